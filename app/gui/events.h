// What reaches the app from outside its frames: GLFW's errors, files dropped on the window, Ctrl+C or a kill.
#pragma once
#include "ui.h"

struct GLFWwindow;

namespace gbui {

// GLFW's error callback: one line on stderr.
void glfw_error(int code, const char* msg);
// GLFW's drop callback: keeps the paths for open_dropped.
void on_drop(GLFWwindow*, int n, const char** paths);
// The files dropped since the last call: an image is classified by the vision model; anything else opens.
void open_dropped(app_state& s, worker& w);
// Ctrl+C or a kill in the terminal closes the window as its close button does, so that the window's size is
// remembered; a second one ends the app at once (SA_RESETHAND), e.g. while a large model is still loading.
void catch_quit_signals();
// A quit signal came.
bool quit_asked();

} // namespace gbui
