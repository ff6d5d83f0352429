// glassbox: the desktop app. Linear main: parse args, init GLFW + ImGui, frame loop, shutdown.
#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "demos.h"
#include "events.h"
#include "fonts.h"
#include "io/loader.h"
#include "layout.h"
#include "options.h"
#include "script.h"
#include "settings.h"
#include "startup.h"
#include "ui.h"
#include "util/error.h"
#include "window_placement.h"

using namespace gbui;
using clock_type = std::chrono::steady_clock;

static const int run_debounce_ms = 20;

// glassbox-20250101-120000.png in the working folder, never overwriting an earlier one.
static std::string timestamped_png() {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    std::string base = std::string("glassbox-") + stamp, path = base + ".png";
    for (int i = 2; std::ifstream(path).good(); i++) path = base + "-" + std::to_string(i) + ".png";
    return path;
}

int main(int argc, char** argv) {
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
    if (!opt.script.empty()) {
        std::ifstream f(opt.script);
        if (!f) {
            std::fprintf(stderr, "error: cannot open script %s\n", opt.script.c_str());
            return 2;
        }
        for (std::string l; std::getline(f, l);)
            if (!l.empty() && l[0] != '#') script.lines.push_back(l);
    }
    std::string model_path = opt.model; // else the session's, the last one opened, or the embedded default (below)
    // settings naming layers and heads wait for the model they are meant for (adopt_model applies them)
    pending_settings startup;
    try {
        if (!opt.session.empty()) {
            session_file f = read_session(opt.session);
            s.prompt = f.prompt;
            s.bos = f.bos;
            apply_session_inputs(s, f);
            startup = f.settings;
            if (opt.model.empty() && !f.model.empty()) model_path = f.model;
        }
        if (opt.prompt_given) s.prompt = opt.prompt;
        if (!opt.image.empty()) s.image_path = opt.image;
        if (opt.bos) s.bos = true;
        if (opt.gl) s.use_gl = true;
        s.budget_mb = (size_t)opt.budget_mb;
        bool from_cli = false;
        if (!opt.ablate.empty() || !opt.layers.empty() || !opt.heads.empty() || !opt.experts.empty()) {
            startup.ablation = gb::parse_ablation(opt.ablate, opt.layers, opt.heads, opt.experts);
            startup.has_ablation = from_cli = true;
        }
        if (opt.sel_layer >= 0) startup.sel_layer = opt.sel_layer, startup.sel_head = opt.sel_head, from_cli = true;
        if (opt.sel_token >= 0) startup.sel_token = opt.sel_token, from_cli = true;
        if (from_cli) startup.source = startup.source.empty() ? "command line" : startup.source + " + command line";
        if (startup.has_ablation || startup.sel_layer >= 0 || startup.sel_token >= 0 || startup.has_tokens) s.pending = startup;
    } catch (const gb::error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    const bool headless_job = !opt.screenshot.empty() || !opt.script.empty();
    // What the app remembers: a window always; a screenshot or script run only when asked (--remember, or
    // GLASSBOX_CONFIG_DIR), so that docs and tests neither depend on nor change the user's settings.
    const char* env_dir = std::getenv("GLASSBOX_CONFIG_DIR");
    const app_settings saved = open_settings(s, !headless_job || opt.remember || (env_dir && *env_dir));
    s.recent_models = existing_paths(saved.recent);
    std::string restoring; // the last model, being reopened: if it fails to load, the default is opened instead
    if (model_path.empty() && !saved.last_model.empty()) {
        std::error_code ec;
        if (std::filesystem::exists(saved.last_model, ec)) model_path = restoring = saved.last_model;
        else add_note(s, "the last model, " + saved.last_model + ", no longer exists: opened the default model");
    }
    if (model_path.empty()) {
        try {
            model_path = gb::default_model_path();
        } catch (const gb::error& e) {
            s.error = e.what();
        }
    }

    glfwSetErrorCallback(glfw_error);
    if (!glfwInit()) {
        std::fprintf(stderr, "error: cannot open a window (no display? try xvfb-run -a glassbox ...)\n");
        return 2;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    if (headless_job) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
    // the size: --size, else the remembered one, else the default; the position where it was, when that is still
    // on a monitor (moved before the window shows, so it does not jump)
    int win_w = opt.width, win_h = opt.height;
    const bool restore_size = !opt.size_given && remembered_size(saved, &win_w, &win_h);
    if (restore_size && saved.maximized && !headless_job) glfwWindowHint(GLFW_MAXIMIZED, GLFW_TRUE);
    const bool restore_pos = position_on_screen(saved);
    if (restore_pos) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
    GLFWwindow* win = glfwCreateWindow(win_w, win_h, "Glassbox", nullptr, nullptr);
    if (!win) {
        std::fprintf(stderr, "error: cannot create an OpenGL 3.3 window\n");
        glfwTerminate();
        return 2;
    }
    if (restore_pos) {
        glfwSetWindowPos(win, saved.x, saved.y);
        glfwShowWindow(win);
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(headless_job ? 0 : 1);
    glfwSetDropCallback(win, on_drop);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    // ImGui's own state goes to the config folder, never the working one (ImGui's default); none when the run
    // does not persist. io.IniFilename points into ini_path, which outlives the context.
    const std::string ini_path = s.config_dir.empty() ? "" : s.config_dir + "/imgui.ini";
    io.IniFilename = ini_path.empty() ? nullptr : ini_path.c_str();
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 4;
    st.FrameRounding = 3;
    st.WindowPadding = ImVec2(10, 8);
    font_state fonts;
    find_cjk_font(fonts);
    build_fonts(fonts);
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
        ui.headless = headless_job;
        if (!model_path.empty()) work.load(model_path);
        const std::optional<pending_settings> startup_pending = s.pending; // for the default, if `restoring` fails
        std::string pending;       // inputs seen last frame
        auto changed_at = clock_type::now();
        const gb::model* picked_for = nullptr; // model for which a default head was chosen
        std::pair<uint64_t, int> colour_asked{0, -1}; // (result, scale) last sent to be re-coloured
        std::string glyphs_for;                          // inputs the font atlas was last checked for
        auto started = clock_type::now();
        int settled_frames = 0;

        work.wake = [] { glfwPostEmptyEvent(); };
        if (!s.config_dir.empty()) catch_quit_signals(); // only to save the settings on the way out
        while (!glfwWindowShouldClose(win) && !quit_asked()) {
            // Frames with nothing to show wait for input, for the worker (it wakes the loop when it publishes) or
            // for the debounce to end. Drawing is CPU work where GL is software (Mesa's llvmpipe): a loop that
            // spins takes a core from the forward it waits for. Scripts step frame by frame, except while
            // `latency` waits for a result, which measures the app as a user runs it.
            const bool may_wait = !headless_job || script.latency_waiting();
            const bool animating = s.next_pixels || s.loading || ImGui::IsAnyMouseDown() ||
                                   !ImGui::GetIO().InputQueueCharacters.empty(); // typed, not yet seen by a frame
            if (may_wait && !animating) {
                // inputs changed by the last frame (typing) are sent once the debounce has passed
                const std::string key_now = s.model ? current_run_key(s) : "";
                const double debounce = headless_job ? 0.0 : 0.001 * run_debounce_ms;
                const double debounce_left =
                    key_now == ui.run_requested ? 1.0
                    : key_now != pending
                        ? debounce
                        : std::max(0.0, debounce - std::chrono::duration<double>(clock_type::now() - changed_at).count());
                const bool working = s.busy || !analyses.idle(); // progress bars move, results come
                glfwWaitEventsTimeout(std::max(0.001, std::min({working ? 0.1 : 0.5, debounce_left})));
            } else {
                glfwPollEvents();
            }
            work.poll(s);
            analyses.poll(s);
            if (!restoring.empty() && !s.loading) { // the last model loaded, or failed to: then the default, once
                if (!s.model && !s.error.empty()) {
                    add_note(s, "could not reopen the last model (" + s.error + "): opened the default model");
                    s.error.clear();
                    s.warning.clear(); // "not applied (its model did not load)": they wait for the default now
                    s.pending = startup_pending;
                    try {
                        work.load(gb::default_model_path());
                    } catch (const gb::error& e) {
                        s.error = e.what();
                    }
                }
                restoring.clear();
            }
            // a new result (or a re-colouring) replaces the shown one once its textures are all uploaded:
            // the screen always shows one complete result (large ones take a few frames, ~6 ms of uploads each)
            auto upload_start = clock_type::now();
            bool uploaded = s.next_pixels && upload_heatmaps(ui.hm, s.next_pixels, 6.0);
            if (s.next_pixels) script.upload_ms = std::chrono::duration<double, std::milli>(clock_type::now() - upload_start).count();
            else script.upload_ms = 0;
            if (uploaded) {
                s.pixels = s.next_pixels;
                if (s.next_result && s.next_result->request_id == s.pixels->request_id) {
                    s.result = s.next_result;
                    s.result_version++;
                }
                s.next_result.reset();
                s.next_pixels.reset();
            }
            // the scale changed: the worker re-colours the shown result (newest request wins)
            if (s.result && s.pixels && !s.next_result && s.pixels->scale != s.scale &&
                colour_asked != std::make_pair(s.result->request_id, (int)s.scale)) {
                work.colour(colour_request{s.result, s.scale});
                colour_asked = {s.result->request_id, (int)s.scale};
            }
            open_dropped(s, work);

            // re-run when the inputs changed and have been stable for run_debounce_ms (a newer run stops an older
            // one between layers, so this only merges a burst of keys)
            std::string key;
            if (s.model) {
                if (s.gen_step > replay_steps(s)) s.gen_step = 0, s.gen_follow = false; // the prompt was edited: no replay
                key = current_run_key(s);
                if (key != pending) pending = key, changed_at = clock_type::now();
                // a generation publishes each step's result with the step slider following it: those inputs
                // need no run of their own (the follow ends with the generation, or when a run replaces it)
                const run_result* newest = s.next_result ? s.next_result.get() : s.result.get();
                if (s.gen_follow && newest && newest->key == key) ui.run_requested = key;
                if (s.gen_follow && !s.generating) s.gen_follow = false;
                bool quiet = clock_type::now() - changed_at > std::chrono::milliseconds(headless_job ? 0 : run_debounce_ms);
                if (key != ui.run_requested && quiet) {
                    try {
                        gb::check_ablation(s.ablation, s.model->config);
                        work.run(current_run_request(s)); // stops a running generation
                        s.gen_follow = false;
                    } catch (const gb::error& e) {
                        s.error = e.what();
                    }
                    ui.run_requested = key;
                }
            }
            // a sensible first head to show: the strongest previous-token head outside layer 0
            if (s.result && s.result->model.get() != picked_for) {
                picked_for = s.result->model.get();
                if (!s.selection_pinned) { // a head asked for (command line, session) is kept
                    const auto& pr = s.result->scores.score[gb::SCORE_PREV_TOKEN];
                    int H = s.result->cap().n_head, best = 0;
                    for (int k = 0; k < (int)pr.size(); k++)
                        if ((k / H > 0 || pr.size() == (size_t)H) && pr[k] > pr[best]) best = k;
                    s.sel_layer = best / H, s.sel_head = best % H;
                }
                s.selection_pinned = false;
            }
            update_demo(s); // a demo's head and caption, once its run is shown
            if (s.model) key = current_run_key(s); // the demo may have changed the inputs (Break it applies a row)
            // the analyses the open tab and the grid's mode show, when their inputs changed (analysis threads)
            const bool analyses_done = schedule_analyses(s, ui);
            // glyphs the shown text needs: prompt, tokens, top-k tokens, continuation, analyses' tokens
            std::string glyph_key = std::to_string(s.result_version) + "|" +
                                    std::to_string((uintptr_t)s.generated.get()) + "|" + std::to_string((uintptr_t)s.lens.get()) +
                                    "|" + std::to_string((uintptr_t)s.patching.get()) + "|" + std::to_string((uintptr_t)s.breaking.get()) +
                                    "|" + std::to_string((uintptr_t)s.sampling.get()) + "|" + s.prompt + "\x1f" + s.corrupt_prompt +
                                    "\x1f" + s.demo_caption;
            if (glyph_key != glyphs_for && need_glyphs(fonts, glyph_text(s))) {
                build_fonts(fonts);
                ImGui_ImplOpenGL3_DestroyFontsTexture();
                ImGui_ImplOpenGL3_CreateFontsTexture();
                // glyphs no font has are remembered so we do not rebuild every frame
                ImFont* f = io.Fonts->Fonts[0];
                for (ImWchar c : fonts.extra)
                    if (!f->FindGlyphNoFallback(c)) fonts.missing.insert(c);
            }
            glyphs_for = glyph_key;

            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            int fb_w, fb_h;
            glfwGetFramebufferSize(win, &fb_w, &fb_h);
            bool settled = s.model && s.result && !s.busy && !s.loading && work.idle() && key == ui.run_requested &&
                           !s.next_pixels && s.pixels && s.pixels->scale == s.scale && ui.hm.shown == s.pixels &&
                           analyses_done && s.tab == ui.tab_shown && !s.demo_waiting;
            if (!script.done()) {
                try {
                    if (script_step(script, s, ui, settled, fb_w, fb_h)) script.next++;
                } catch (const gb::error& e) {
                    std::fprintf(stderr, "error: %s\n", e.what());
                    exit_code = 1;
                    break;
                }
            }
            auto ui_start = clock_type::now();
            ImGui::NewFrame();

            // keyboard: Ctrl+O open, Ctrl+S save session, Ctrl+E export PNG, arrows move the selected head
            if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) s.want_focus_model_path = true;
            if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S, false)) {
                try {
                    save_session(s, s.session_path);
                    s.status = "saved session " + s.session_path;
                } catch (const std::exception& e) {
                    s.error = e.what();
                }
            }
            if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_E, false)) ui.request_screenshot = true, ui.screenshot_path = timestamped_png();
            if (!io.WantTextInput && s.result) {
                const int L = s.result->cap().n_layer, H = s.result->cap().n_head;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.sel_head = (s.sel_head + H - 1) % H;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.sel_head = (s.sel_head + 1) % H;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow))) s.sel_layer = (s.sel_layer + L - 1) % L;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow))) s.sel_layer = (s.sel_layer + 1) % L;
            }

            draw_layout(s, ui, io.DisplaySize.x, io.DisplaySize.y);
            ImGui::Render();
            script.ui_ms = std::chrono::duration<double, std::milli>(clock_type::now() - ui_start).count();
            glViewport(0, 0, fb_w, fb_h);
            glClearColor(0.08f, 0.09f, 0.11f, 1.0f);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

            if (ui.request_screenshot) {
                ui.request_screenshot = false;
                try {
                    write_png(ui.screenshot_path, fb_w, fb_h);
                    s.status = "saved " + ui.screenshot_path;
                } catch (const std::exception& e) {
                    s.error = e.what();
                }
            }
            // headless screenshot: once the result is on screen for a few frames, write it and exit
            if (!opt.screenshot.empty() && script.done()) {
                settled_frames = settled ? settled_frames + 1 : 0;
                bool failed = !s.error.empty() && !s.busy && !s.loading && work.idle();
                if (settled_frames >= 3) {
                    if (!s.warning.empty()) std::fprintf(stderr, "warning: %s\n", s.warning.c_str());
                    try {
                        write_png(opt.screenshot, fb_w, fb_h);
                        std::printf("wrote %s (%dx%d)\n", opt.screenshot.c_str(), fb_w, fb_h);
                    } catch (const std::exception& e) {
                        std::fprintf(stderr, "error: %s\n", e.what());
                        exit_code = 1;
                    }
                    break;
                }
                if (failed && !s.result) {
                    std::fprintf(stderr, "error: %s\n", s.error.c_str());
                    exit_code = 2;
                    break;
                }
            }
            if (!opt.script.empty() && script.done() && opt.screenshot.empty()) break;
            if (headless_job && clock_type::now() - started > std::chrono::seconds(120)) {
                std::fprintf(stderr, "error: timed out waiting for the result\n");
                exit_code = 1;
                break;
            }
            glfwSwapBuffers(win);
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
