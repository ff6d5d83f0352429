// Remembered window placement: fitted to the monitors there are now when the window is made, read back from
// GLFW on exit.
#define GLFW_INCLUDE_NONE
#include "window_placement.h"

#include <GLFW/glfw3.h>

#include <algorithm>

namespace gbui {

namespace {

struct area {
    int x = 0, y = 0, w = 0, h = 0;
    bool holds(int px, int py) const { return px >= x && py >= y && px < x + w && py < y + h; }
};

area work_area(GLFWmonitor* m) {
    area a;
    if (m) glfwGetMonitorWorkarea(m, &a.x, &a.y, &a.w, &a.h);
    return a;
}

// The monitor whose work area holds the point, or nullptr.
GLFWmonitor* monitor_at(int x, int y) {
    int n = 0;
    GLFWmonitor** all = glfwGetMonitors(&n);
    for (int i = 0; i < n; i++)
        if (work_area(all[i]).holds(x, y)) return all[i];
    return nullptr;
}

} // namespace

bool position_on_screen(const app_settings& a) {
    // a little inside the corner: enough of the title bar to grab
    return a.has_pos && monitor_at(a.x + 40, a.y + 10) != nullptr;
}

bool remembered_size(const app_settings& a, int* w, int* h) {
    if (a.width <= 0 || a.height <= 0) return false;
    *w = a.width, *h = a.height;
    GLFWmonitor* m = position_on_screen(a) ? monitor_at(a.x + 40, a.y + 10) : glfwGetPrimaryMonitor();
    const area wa = work_area(m);
    if (wa.w >= 320 && wa.h >= 240) *w = std::min(*w, wa.w), *h = std::min(*h, wa.h);
    return true;
}

GLFWwindow* create_window(const app_settings& a, int w, int h, bool size_given, bool headless) {
    const bool restore_size = !size_given && remembered_size(a, &w, &h);
    if (restore_size && a.maximized && !headless) glfwWindowHint(GLFW_MAXIMIZED, GLFW_TRUE);
    const bool restore_pos = position_on_screen(a);
    if (restore_pos) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
    GLFWwindow* win = glfwCreateWindow(w, h, "Glassbox", nullptr, nullptr);
    if (win && restore_pos) {
        glfwSetWindowPos(win, a.x, a.y);
        glfwShowWindow(win);
    }
    return win;
}

void read_placement(GLFWwindow* win, app_settings& a) {
    if (glfwGetWindowAttrib(win, GLFW_ICONIFIED)) return; // its size now says nothing about the window
    a.maximized = glfwGetWindowAttrib(win, GLFW_MAXIMIZED) != 0;
    if (a.maximized) return;
    int w = 0, h = 0;
    glfwGetWindowSize(win, &w, &h);
    if (w > 0 && h > 0) a.width = std::clamp(w, 320, 8192), a.height = std::clamp(h, 240, 8192);
    glfwGetWindowPos(win, &a.x, &a.y);
    a.has_pos = true;
}

} // namespace gbui
