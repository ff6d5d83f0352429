// GLFW's error and drop callbacks, and the quit signals (Ctrl+C, kill) that close the window.
#include "events.h"

#include <cctype>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

namespace gbui {

void glfw_error(int code, const char* msg) { std::fprintf(stderr, "glfw error %d: %s\n", code, msg); }

// Files a vision model reads (by extension): dropped on the window, they become its image.
static bool is_image_path(const std::string& p) {
    std::string ext = p.substr(p.find_last_of('.') == std::string::npos ? p.size() : p.find_last_of('.'));
    for (char& ch : ext) ch = (char)std::tolower((unsigned char)ch);
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".gif" || ext == ".tga";
}

static std::vector<std::string> g_dropped; // filled by GLFW's drop callback, consumed by the frame loop
void on_drop(GLFWwindow*, int n, const char** paths) {
    for (int i = 0; i < n; i++) g_dropped.push_back(paths[i]);
}

void open_dropped(app_state& s, worker& w) {
    for (const std::string& p : g_dropped) { // an image is classified by the vision model; anything else opens
        if (is_image_path(p)) s.image_path = p;
        else if (is_sae_folder(p)) { // an SAE for the loaded model, shown in the Features tab
            open_sae_file(s, p);
            s.tab = TAB_FEATURES;
        } else open_model(s, w, p);
    }
    g_dropped.clear();
}

static volatile std::sig_atomic_t g_quit = 0;
static void on_quit_signal(int) { g_quit = 1; }
void catch_quit_signals() {
    struct sigaction sa = {};
    sa.sa_handler = on_quit_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

bool quit_asked() { return g_quit; }

} // namespace gbui
