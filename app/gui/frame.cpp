// The frame loop's steps besides drawing: waiting, taking results in, sending runs, shortcuts, screenshots.
#include "frame.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "demos.h"
#include "events.h"
#include "io/loader.h"
#include "model_picker.h"
#include "script.h"
#include "startup.h"
#include "util/error.h"
#include "view.h"
#include "file_dialog.h"

namespace gbui {

using clock_type = std::chrono::steady_clock;

static const int run_debounce_ms = 20;

void wait_for_events(const app_state& s, const ui_context& ui, const frame_state& f, bool may_wait) {
    // Frames with nothing to show wait for input, for the worker (it wakes the loop when it publishes) or
    // for the debounce to end. Drawing is CPU work where GL is software (Mesa's llvmpipe): a loop that
    // spins takes a core from the forward it waits for. Scripts step frame by frame, except while
    // `latency` waits for a result, which measures the app as a user runs it.
    const bool animating = s.next_pixels || s.loading || ImGui::IsAnyMouseDown() ||
                           !ImGui::GetIO().InputQueueCharacters.empty(); // typed, not yet seen by a frame
    if (may_wait && !animating) {
        // inputs changed by the last frame (typing) are sent once the debounce has passed
        const std::string key_now = s.model ? current_run_key(s) : "";
        const double debounce = ui.headless ? 0.0 : 0.001 * run_debounce_ms;
        const double debounce_left =
            key_now == ui.run_requested ? 1.0
            : key_now != f.pending
                ? debounce
                : std::max(0.0, debounce - std::chrono::duration<double>(clock_type::now() - f.changed_at).count());
        const bool working = s.busy || !ui.analysis->idle(); // progress bars move, results come
        glfwWaitEventsTimeout(std::max(0.001, std::min({working ? 0.1 : 0.5, debounce_left})));
    } else {
        glfwPollEvents();
    }
}

// Takes in what the workers published; when the last model (being restored) failed to load, opens the default.
static void take_results(app_state& s, ui_context& ui, frame_state& f) {
    ui.work->poll(s);
    ui.analysis->poll(s);
    if (!f.restoring.empty() && !s.loading) { // the last model loaded, or failed to: then the default, once
        if (!s.model && !s.error.empty()) {
            add_note(s, "could not reopen the last model (" + s.error + "): opened the default model");
            s.error.clear();
            s.warning.clear(); // "not applied (its model did not load)": they wait for the default now
            s.pending = f.startup_pending;
            try {
                ui.work->load(gb::default_model_path());
            } catch (const gb::error& e) {
                s.error = e.what();
            }
        }
        f.restoring.clear();
    }
}

// Returns the milliseconds spent uploading (0 when nothing was waiting).
static double show_next_result(app_state& s, ui_context& ui) {
    // a new result (or a re-colouring) replaces the shown one once its textures are all uploaded:
    // the screen always shows one complete result (large ones take a few frames, ~6 ms of uploads each)
    auto upload_start = clock_type::now();
    bool uploaded = s.next_pixels && upload_heatmaps(ui.hm, s.next_pixels, 6.0);
    const double upload_ms =
        s.next_pixels ? std::chrono::duration<double, std::milli>(clock_type::now() - upload_start).count() : 0;
    if (uploaded) {
        s.pixels = s.next_pixels;
        if (s.next_result && s.next_result->request_id == s.pixels->request_id) {
            s.result = s.next_result;
            s.result_version++;
        }
        s.next_result.reset();
        s.next_pixels.reset();
    }
    return upload_ms;
}

static void recolour_if_needed(app_state& s, ui_context& ui, frame_state& f) {
    // the scale changed: the worker re-colours the shown result (newest request wins)
    if (s.result && s.pixels && !s.next_result && s.pixels->scale != s.scale &&
        f.colour_asked != std::make_pair(s.result->request_id, (int)s.scale)) {
        ui.work->colour(colour_request{s.result, s.scale});
        f.colour_asked = {s.result->request_id, (int)s.scale};
    }
}

// Returns the inputs' run key ("" when no model is loaded).
static std::string send_run(app_state& s, ui_context& ui, frame_state& f) {
    // re-run when the inputs changed and have been stable for run_debounce_ms (a newer run stops an older
    // one between layers, so this only merges a burst of keys)
    std::string key;
    if (!s.model) return key;
    if (s.gen_step > replay_steps(s)) s.gen_step = 0, s.gen_follow = false; // the prompt was edited: no replay
    key = current_run_key(s);
    if (key != f.pending) f.pending = key, f.changed_at = clock_type::now();
    // inputs a result already answers need no run: a generation's steps (published with the step slider
    // following them; the follow ends with the generation, or when a run replaces it), and a run whose capture
    // left layers out, whose key only then names the focus layer and head block (the one asked for did not)
    const run_result* newest = s.next_result ? s.next_result.get() : s.result.get();
    if (newest && newest->key == key) ui.run_requested = key;
    if (s.gen_follow && !s.generating) s.gen_follow = false;
    bool quiet = clock_type::now() - f.changed_at > std::chrono::milliseconds(ui.headless ? 0 : run_debounce_ms);
    if (key != ui.run_requested && quiet) {
        try {
            gb::check_ablation(s.ablation, *s.model);
            ui.work->run(current_run_request(s)); // stops a running generation
            s.gen_follow = false;
        } catch (const gb::error& e) {
            s.error = e.what();
        }
        ui.run_requested = key;
    }
    return key;
}

static void pick_first_head(app_state& s, frame_state& f) {
    // a telling first head to show (not L0H0, often a dull first-token head), by the scores on the prompt
    if (s.result && s.result->model.get() != f.picked_for) {
        f.picked_for = s.result->model.get();
        if (!s.selection_pinned) { // a head asked for (command line, session) is kept
            const int best = first_head(s.result->scores);
            if (best >= 0) s.sel_layer = best / s.result->scores.n_head, s.sel_head = best % s.result->scores.n_head;
        }
        s.selection_pinned = false;
    }
}

int first_head(const gb::head_scores& sc) {
    const int H = sc.n_head;
    auto best_of = [&](gb::head_score_kind k, bool skip_layer0) {
        const std::vector<float>& v = sc.score[k];
        int best = -1;
        for (int i = 0; i < (int)v.size(); i++)
            if (std::isfinite(v[i]) && !(skip_layer0 && i < H && sc.n_layer > 1) && (best < 0 || v[i] > v[best])) best = i;
        return best;
    };
    if (sc.n_induction_positions > 0) {
        const int ind = best_of(gb::SCORE_INDUCTION, false);
        if (ind >= 0 && sc.score[gb::SCORE_INDUCTION][ind] >= 0.2f) return ind;
    }
    return best_of(gb::SCORE_PREV_TOKEN, true);
}

// The shown result is of the inputs as they are now (key), with everything it shows computed and uploaded: ""; else
// what is still awaited (a headless run that times out names it).
static const char* unsettled(const app_state& s, const ui_context& ui, const std::string& key, bool analyses_done) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    // (the tab bar shows the chosen tab only while the Analysis panel is drawn: not while another fills the window)
    const bool tab_shown = s.tab == ui.tab_shown || (!ui.maximised.empty() && ui.maximised != "Analysis");
    if (!s.model || s.loading) return "the model";
    if (!s.result || s.busy || !ui.work->idle() || key != ui.run_requested) return "the run";
    if (s.next_pixels || !s.pixels || s.pixels->scale != s.scale || ui.hm.shown != s.pixels) return "the heatmaps";
    if (!analyses_done) return "an analysis";
    if (!tab_shown) return "the tab bar";
    if (s.demos.waiting) return "the demo";
    if (!fin.queue.empty() || !ui.sae_jobs.empty()) return "an SAE being opened";
    return "";
}

bool update_state(app_state& s, ui_context& ui, frame_state& f, double* upload_ms) {
    take_results(s, ui, f);
    // a tab this model lacks (Experts of a dense model, chosen by a session or a script) falls back to Head, once no
    // model that might have it is on its way (here, not in the tab bar: that is not drawn while a panel is maximised)
    if (!tab_available(s.tab, s.model.get()) && !s.loading && !s.pending) s.tab = TAB_HEAD;
    *upload_ms = show_next_result(s, ui);
    recolour_if_needed(s, ui, f);
    open_dropped(s, *ui.work);
    poll_saes(s, ui); // before the run's key: an SAE a session opens brings its edits
    std::string key = send_run(s, ui, f);
    pick_first_head(s, f);
    update_demo(s); // a demo's head and caption, once its run is shown
    if (s.model) key = current_run_key(s); // the demo may have changed the inputs (Break it applies a row)
    // the analyses the open tab and the grid's mode show, when their inputs changed (analysis threads)
    const bool analyses_done = schedule_analyses(s, ui);
    const char* waiting = unsettled(s, ui, key, analyses_done);
    if (*waiting) f.waiting_for = waiting;
    if (*waiting && !analyses_done && ui.analysis_waiting >= 0) f.waiting_for += std::string(" (") + analysis_name((analysis_kind)ui.analysis_waiting) + ")";
    return !*waiting;
}

// glassbox-20250101-120000.png in the working folder, never overwriting an earlier one.
static std::string timestamped_png() {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    std::string base = std::string("glassbox-") + stamp, path = base + ".png";
    for (int i = 2; std::ifstream(path).good(); i++) path = base + "-" + std::to_string(i) + ".png";
    return path;
}

void keyboard_shortcuts(app_state& s, ui_context& ui) {
    const ImGuiIO& io = ImGui::GetIO();
    if (ui.picker && picker_is_open(*ui.picker)) return; // its keys are its own (arrows, Enter, Esc)
    if (file_dialog_open()) return;                       // so are a file browser's (Backspace, arrows, Enter, Esc)
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false) && ui.picker) picker_show(*ui.picker, PICKER_MACHINE);
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S, false)) {
        try {
            save_session(s, s.session_path);
            s.status = "saved session " + s.session_path;
        } catch (const std::exception& e) {
            s.error = e.what();
        }
    }
    if (io.KeyCtrl && !io.KeyShift && ImGui::IsKeyPressed(GLFW_KEY_E, false))
        ui.request_screenshot = true, ui.screenshot_path = timestamped_png();
    view_keys(s, ui); // text size, presentation mode, a panel filling the window, a panel's export
    if (!io.WantTextInput && s.result) {
        const int L = s.result->cap().n_layer, H = s.result->cap().n_head;
        if (s.tab != TAB_LEARN) { // (the Learn tab steps with them)
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.sel_head = (s.sel_head + H - 1) % H;
            if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.sel_head = (s.sel_head + 1) % H;
        }
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow))) s.sel_layer = (s.sel_layer + L - 1) % L;
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow))) s.sel_layer = (s.sel_layer + 1) % L;
    }
}

void save_requested_screenshot(app_state& s, ui_context& ui, int fb_w, int fb_h) {
    if (!ui.request_screenshot) return;
    ui.request_screenshot = false;
    try {
        write_png(ui.screenshot_path, fb_w, fb_h);
        s.status = "saved " + ui.screenshot_path;
    } catch (const std::exception& e) {
        s.error = e.what();
    }
}

// Returns the exit code once the screenshot is written or cannot be, nothing while it waits.
static std::optional<int> finish_screenshot(app_state& s, const ui_context& ui, frame_state& f, bool settled, const std::string& path,
                                     int fb_w, int fb_h) {
    // once the result is on screen for a few frames, write it and exit
    f.settled_frames = settled ? f.settled_frames + 1 : 0;
    bool failed = !s.error.empty() && !s.busy && !s.loading && ui.work->idle();
    if (f.settled_frames >= 3) {
        if (!s.warning.empty()) std::fprintf(stderr, "warning: %s\n", s.warning.c_str());
        try {
            write_png(path, fb_w, fb_h);
            std::printf("wrote %s (%dx%d)\n", path.c_str(), fb_w, fb_h);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "error: %s\n", e.what());
            return 1;
        }
        return 0;
    }
    if (failed && !s.result) {
        std::fprintf(stderr, "error: %s\n", s.error.c_str());
        return 2;
    }
    return std::nullopt;
}

std::optional<int> headless_end(app_state& s, const ui_context& ui, frame_state& f, const options& opt, bool script_done,
                                bool settled, int fb_w, int fb_h) {
    if (!opt.screenshot.empty() && script_done)
        if (std::optional<int> rc = finish_screenshot(s, ui, f, settled, opt.screenshot, fb_w, fb_h)) return rc;
    if (!opt.script.empty() && script_done && opt.screenshot.empty()) return 0;
    if (ui.headless && std::chrono::duration<double>(clock_type::now() - f.started).count() > f.limit_s) {
        std::fprintf(stderr, "error: timed out waiting for the result (for %s)\n", f.waiting_for.c_str());
        return 1;
    }
    return std::nullopt;
}

} // namespace gbui
