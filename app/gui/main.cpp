// glassbox: the desktop app. Linear main, as Dear ImGui's examples: the inputs and settings it starts from, GLFW
// and ImGui set up, the frame loop (events, results in, new frame, draw, render, swap, a panel's export), shutdown
// in reverse.
#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <optional>

#include "demos.h"
#include "events.h"
#include "fonts.h"
#include "frame.h"
#include "layout.h"
#include "model_picker.h"
#include "panel_export.h"
#include "options.h"
#include "run/forward.h"
#include "script.h"
#include "settings.h"
#include "startup.h"
#include "text_scale.h"
#include "ui.h"
#include "util/error.h"
#include "util/threads.h"
#include "view.h"
#include "window_placement.h"
#include "file_dialog.h"

using namespace gbui;

// GLFW: an OpenGL 3.3 window, at the remembered size and place; nullptr (said on stderr) when there is none.
static GLFWwindow* open_window(const app_settings& saved, const options& opt, bool headless_job) {
    glfwSetErrorCallback(glfw_error);
    if (!glfwInit()) {
        std::fprintf(stderr, "error: cannot open a window (no display? try xvfb-run -a glassbox ...)\n");
        return nullptr;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    if (headless_job) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
    GLFWwindow* win = create_window(saved, opt.width, opt.height, opt.size_given, headless_job);
    if (!win) {
        std::fprintf(stderr, "error: cannot create an OpenGL 3.3 window\n");
        glfwTerminate();
        return nullptr;
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(headless_job ? 0 : 1);
    glfwSetDropCallback(win, on_drop);
    return win;
}

// The text scale the app starts at: --ui-scale, else the one chosen last time, else the monitor's content scale
// (which Ctrl+0 returns to).
static void start_ui_scale(app_state& s, ui_context& ui, GLFWwindow* win, const options& opt, const app_settings& saved) {
    float xs = 1, ys = 1;
    glfwGetWindowContentScale(win, &xs, &ys);
    ui.default_ui_scale = clamp_ui_scale(std::fmax(xs, ys));
    s.ui_scale = opt.ui_scale > 0 ? opt.ui_scale : saved.ui_scale > 0 ? clamp_ui_scale(saved.ui_scale) : ui.default_ui_scale;
    ui.saved_ui_scale = s.ui_scale; // written to the settings only once it is changed
}

// One frame: results in, the script's step, the UI drawn and rendered, a screenshot or a panel's export.
// Returns the exit code once the run is over (a headless run's end, a script line that failed).
static std::optional<int> one_frame(GLFWwindow* win, app_state& s, ui_context& ui, frame_state& f, script_runner& script,
                                    font_state& fonts, const options& opt, bool headless_job) {
    using clock_type = std::chrono::steady_clock;
    // a script line waiting for a worker sleeps until the worker publishes: drawing meanwhile (Mesa's llvmpipe in
    // the tests) took the core the worker needed, 3/5 of a Graph tab test's CPU under ASan
    const bool script_sleeps = script.waiting_for_workers() && (s.busy || !ui.analysis->idle());
    wait_for_events(s, ui, f, !headless_job || script.latency_waiting() || script_sleeps);
    const bool settled = update_state(s, ui, f, &script.upload_ms); // results in, runs and analyses out
    refresh_glyphs(fonts, s);
    apply_ui_scale(fonts, shown_ui_scale(s), s.presenting); // between frames: the atlas and the style
    remember_ui_scale(s, ui);
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    int fb_w, fb_h;
    glfwGetFramebufferSize(win, &fb_w, &fb_h);
    if (!advance_script(script, s, ui, settled, fb_w, fb_h)) return 1; // a line that failed ends the run
    auto ui_start = clock_type::now();
    ImGui::NewFrame();
    keyboard_shortcuts(s, ui);
    draw_layout(s, ui, ImGui::GetIO().DisplaySize.x, ImGui::GetIO().DisplaySize.y);
    draw_model_picker(s, ui); // over the panels when open
    file_dialog_frame(ui);    // a Browse... button's dialog, when one is open
    ImGui::Render();
    script.ui_ms = std::chrono::duration<double, std::milli>(clock_type::now() - ui_start).count();
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(0.08f, 0.09f, 0.11f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    save_requested_screenshot(s, ui, fb_w, fb_h);
    if (std::optional<int> rc = headless_end(s, ui, f, opt, script.done(), settled, fb_w, fb_h)) return rc;
    glfwSwapBuffers(win);
    run_panel_export(s, ui, fonts); // an extra frame of its own, never shown
    return std::nullopt;
}

int main(int argc, char** argv) {
    gb::wait_briefly(argv); // before any thread starts: OpenMP threads must not spin long on a busy machine
    gb::keep_freed_buffers_in_heap();
    options opt;
    try {
        opt = parse_options(argc, argv);
    } catch (const gb::error& e) {
        std::fprintf(stderr, "error: %s (see glassbox --help)\n", e.what());
        return 2;
    }
    app_state s;
    script_runner script;
    std::string model_path; // else the last one opened, or the embedded default (choose_first_model)
    try {
        if (!opt.script.empty()) read_script(script, opt.script);
        model_path = apply_startup_inputs(s, opt);
    } catch (const gb::error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    const bool headless_job = !opt.screenshot.empty() || !opt.script.empty();
    const app_settings saved = open_settings(s, remembers(opt, headless_job));
    s.recent_models = existing_paths(saved.recent);
    // the last model, being reopened: if it fails to load, the default is opened instead
    const std::string restoring = choose_first_model(&model_path, s, saved);
    GLFWwindow* win = open_window(saved, opt, headless_job);
    if (!win) return 2;

    // ImGui: its own state goes to the config folder, never the working one (ImGui's default); none when the run
    // does not persist. io.IniFilename points into ini_path, which outlives the context.
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    const std::string ini_path = s.config_dir.empty() ? "" : s.config_dir + "/imgui.ini";
    io.IniFilename = ini_path.empty() ? nullptr : ini_path.c_str();
    set_style();
    font_state fonts;
    find_cjk_font(fonts);
    ImGui_ImplGlfw_InitForOpenGL(win, true);
    ImGui_ImplOpenGL3_Init("#version 330");

    int exit_code = 0;
    {
        worker work;
        work.keep_stored = opt.keep_stored;
        analysis_worker analyses;
        ui_context ui;
        ui.work = &work;
        ui.analysis = &analyses;
        analyses.wake = [] { glfwPostEmptyEvent(); };
        model_picker picker; // (destroyed first: its jobs' threads are waited for while GLFW still runs)
        picker.wake = [] { glfwPostEmptyEvent(); };
        ui.picker = &picker;
        if (!opt.model_b.empty()) analysis_script_command(s, ui, "open-b", opt.model_b); // as the script's
        ui.headless = headless_job;
        start_ui_scale(s, ui, win, opt, saved);
        std::copy(saved.split, saved.split + SPLIT_COUNT, ui.split); // the splitters where the user left them
        // the explanations in full at the first start, folded behind (?) at the later ones (View menu: either)
        ui.explain_full = saved.explanations != "folded";
        if (saved.explanations.empty() && !s.config_dir.empty())
            if (std::string err = update_settings(s.config_dir, [](app_settings& a) { a.explanations = "folded"; }); !err.empty())
                std::fprintf(stderr, "glassbox: %s\n", err.c_str());
        apply_ui_scale(fonts, shown_ui_scale(s), s.presenting); // the font atlas, at the scale it starts at
        if (!model_path.empty()) work.load(model_path);
        frame_state f;
        f.restoring = restoring;
        f.limit_s = opt.timeout_s;
        // a soak's script repeats for that long (tools/soak.py), and its last lap may end in a long wait
        if (script.repeat_s > 0) f.limit_s += script.repeat_s + 480;
        f.startup_pending = s.pending; // for the default, if `restoring` fails
        work.wake = [] { glfwPostEmptyEvent(); };
        if (!s.config_dir.empty()) catch_quit_signals(); // only to save the settings on the way out
        while (!glfwWindowShouldClose(win) && !quit_asked()) {
            if (std::optional<int> rc = one_frame(win, s, ui, f, script, fonts, opt, headless_job)) {
                exit_code = *rc;
                break;
            }
        }
        free_heatmaps(ui.hm);
    }
    if (!s.config_dir.empty()) { // the window's size and place, for the next start
        std::string err = update_settings(s.config_dir, [&](app_settings& a) { read_placement(win, a); });
        if (!err.empty()) std::fprintf(stderr, "glassbox: %s: the window's size is not remembered\n", err.c_str());
    }
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(win);
    glfwTerminate();
    return exit_code;
}
