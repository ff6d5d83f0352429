// The window's size, position and maximized state between runs (kept in settings.json, see settings.h).
#pragma once
#include "settings.h"

struct GLFWwindow;

namespace gbui {

// The remembered size, made to fit the work area of the monitor the window was on (or the primary one): a
// monitor may have been unplugged or changed since. False (w, h untouched) when no size was remembered.
// Needs glfwInit.
bool remembered_size(const app_settings& a, int* w, int* h);

// True when the remembered position puts the window's top-left corner (its title bar) on a monitor now.
bool position_on_screen(const app_settings& a);

// Creates the window (with the context hints already given): w x h unless size_given is false and a size is
// remembered (then maximized again when it was, except headless), at the remembered position when that is still
// on a monitor (moved before the window shows, so it does not jump). nullptr when GLFW cannot make it.
GLFWwindow* create_window(const app_settings& a, int w, int h, bool size_given, bool headless);

// Reads the window's state into a: maximized or not, and its size and position when it is neither maximized
// nor iconified (a maximized window keeps the size it returns to). Sizes are kept within what --size accepts.
void read_placement(GLFWwindow* win, app_settings& a);

} // namespace gbui
