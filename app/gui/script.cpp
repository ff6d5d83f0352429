// The test-script driver: one step of the script's current command per frame, and the PNG writer that its
// `screenshot` (and the app's Ctrl+E) uses.
#include "script.h"

#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include "demos.h"
#include "feature_analysis.h"
#include "graph_panel.h"
#include "model_picker.h"
#include "patching_inputs.h"
#include "tab_inputs.h"
#include "text_scale.h"
#include "util/error.h"
#include "view.h"

namespace gbui {

using clock_type = std::chrono::steady_clock;

void read_script(script_runner& sc, const std::string& path) {
    std::ifstream f(path);
    if (!f) throw gb::error("cannot open script " + path);
    for (std::string l; std::getline(f, l);)
        if (!l.empty() && l[0] != '#') sc.lines.push_back(l);
    for (const std::string& l : sc.lines)
        if (l.rfind("repeat-until ", 0) == 0) sc.repeat_s = std::max(sc.repeat_s, std::atof(l.c_str() + 13));
}

void write_png(const std::string& path, int w, int h) {
    std::vector<unsigned char> px((size_t)w * h * 4), flipped(px.size());
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    for (int y = 0; y < h; y++) // GL's origin is bottom-left
        std::copy(px.begin() + (size_t)(h - 1 - y) * w * 4, px.begin() + (size_t)(h - y) * w * 4,
                  flipped.begin() + (size_t)y * w * 4);
    for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
    if (!stbi_write_png(path.c_str(), w, h, 4, flipped.data(), w * 4)) throw gb::error("cannot write " + path);
}

// measure N: renders N frames and prints the mean frame time (CPU side, incl. swap), the longest frame, upload
// and UI build.
static bool measure_step(script_runner& sc, const app_state& s, const std::string& arg) {
    int n = std::max(1, std::atoi(arg.c_str()));
    auto now = clock_type::now();
    if (sc.phase == 0) sc.measure_start = now, sc.ui_ms_sum = 0, sc.max_ms = 0, sc.max_upload_ms = 0, sc.max_ui_ms = 0;
    else sc.ui_ms_sum += sc.ui_ms, sc.max_ms = std::max(sc.max_ms, std::chrono::duration<double, std::milli>(now - sc.last_frame).count()),
         sc.max_upload_ms = std::max(sc.max_upload_ms, sc.upload_ms), sc.max_ui_ms = std::max(sc.max_ui_ms, sc.ui_ms);
    sc.last_frame = now;
    if (++sc.phase <= n) return false;
    double ms = std::chrono::duration<double, std::milli>(now - sc.measure_start).count() / n;
    std::printf("{\"frame_ms\": %.3f, \"max_frame_ms\": %.3f, \"max_upload_ms\": %.3f, \"ui_build_ms\": %.3f, "
                "\"max_ui_build_ms\": %.3f, \"frames\": %d, \"busy_at_end\": %s}\n",
                ms, sc.max_ms, sc.max_upload_ms, sc.ui_ms_sum / (n - 1 > 0 ? n - 1 : 1), sc.max_ui_ms, n,
                s.busy ? "true" : "false");
    std::fflush(stdout);
    sc.phase = 0;
    return true;
}

// latency TEXT: types TEXT one character at a time (the prompt editor must be active), each time waiting for its
// result on screen; prints every keystroke-to-result time and their median.
static bool latency_step(script_runner& sc, const app_state& s, bool settled, const std::string& arg) {
    ImGuiIO& io = ImGui::GetIO();
    auto since_typed = [&] { return std::chrono::duration<double, std::milli>(clock_type::now() - sc.typed_at).count(); };
    const run_result* newest = s.next_result ? s.next_result.get() : s.result.get();
    if (sc.phase > 0 && !sc.arrived && newest && newest->request_id != sc.result_at_type && newest->prompt == s.prompt) {
        const run_result& r = *newest;
        sc.arrived = true;
        sc.arrivals.push_back(since_typed());
        sc.worker_ms.push_back(r.report.ms + r.scores_ms + r.pixels_ms);
    }
    if (sc.phase > 0 && !(settled && result_is_current(s))) {
        if (since_typed() > 60000) throw gb::error("script: latency: no result");
        return false;
    }
    if (sc.phase > 0) sc.latencies.push_back(since_typed());
    if (sc.phase == (int)arg.size()) {
        auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v.empty() ? 0.0 : v[v.size() / 2];
        };
        nlohmann::json j = {{"keystroke_to_result_ms", sc.latencies}, {"median_ms", median(sc.latencies)},
                            {"keystroke_to_arrival_ms", sc.arrivals}, {"median_arrival_ms", median(sc.arrivals)},
                            {"worker_ms", sc.worker_ms}, {"median_worker_ms", median(sc.worker_ms)}};
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str()); // (a path need not be UTF-8)
        std::fflush(stdout);
        sc.phase = 0, sc.latencies.clear(), sc.arrivals.clear(), sc.worker_ms.clear();
        return true;
    }
    io.AddInputCharacter((unsigned char)arg[sc.phase++]);
    sc.typed_at = clock_type::now();
    sc.arrived = false;
    sc.result_at_type = newest ? newest->request_id : 0;
    return false;
}

// One step of the script's commands, by group: each returns nothing when the command is not its own, else
// whether the command is done (false: it needs more frames).

// wait | print | screenshot FILE | measure N
static std::optional<bool> report_command(script_runner& sc, const app_state& s, const ui_context& ui, const std::string& cmd,
                                          const std::string& arg, bool settled, int fb_w, int fb_h) {
    if (cmd == "wait") return settled;
    if (cmd == "print") {
        print_state(s, ui);
        return true;
    }
    if (cmd == "screenshot") {
        write_png(arg, fb_w, fb_h);
        return true;
    }
    if (cmd == "measure") return measure_step(sc, s, arg);
    return std::nullopt;
}

// A key's GLFW code by its script name (end, backspace, enter, escape, f5, f11, =, -, 0, e, o, left, right, up, down,
// tab), -1 for none.
static int key_code(const std::string& name) {
    static const std::pair<const char*, int> keys[] = {
        {"end", GLFW_KEY_END},       {"backspace", GLFW_KEY_BACKSPACE}, {"enter", GLFW_KEY_ENTER}, {"escape", GLFW_KEY_ESCAPE},
        {"f5", GLFW_KEY_F5},         {"f11", GLFW_KEY_F11},             {"=", GLFW_KEY_EQUAL},     {"-", GLFW_KEY_MINUS},
        {"0", GLFW_KEY_0},           {"e", GLFW_KEY_E},                 {"kp+", GLFW_KEY_KP_ADD},
        {"left", GLFW_KEY_LEFT},     {"right", GLFW_KEY_RIGHT},         {"up", GLFW_KEY_UP},       {"down", GLFW_KEY_DOWN},
        {"tab", GLFW_KEY_TAB},       {"o", GLFW_KEY_O}};
    for (const auto& [n, k] : keys)
        if (name == n) return k;
    return -1;
}

// type TEXT | latency TEXT | key [ctrl+][shift+]NAME
static std::optional<bool> keyboard_command(script_runner& sc, const app_state& s, const std::string& cmd, const std::string& arg,
                                            bool settled) {
    ImGuiIO& io = ImGui::GetIO();
    if (cmd == "type") {
        io.AddInputCharactersUTF8(arg.c_str());
        return true;
    }
    if (cmd == "latency") return latency_step(sc, s, settled, arg);
    if (cmd == "key") { // one frame down (with its modifiers), one frame up
        std::string name = arg;
        bool ctrl = false, shift = false;
        for (bool more = true; more;) {
            more = false;
            if (name.rfind("ctrl+", 0) == 0 && name.size() > 5) name = name.substr(5), ctrl = more = true;
            if (name.rfind("shift+", 0) == 0 && name.size() > 6) name = name.substr(6), shift = more = true;
        }
        const int k = key_code(name);
        if (k < 0) throw gb::error("script: unknown key " + arg);
        io.KeysDown[k] = sc.phase == 0;
        io.KeyCtrl = ctrl && sc.phase == 0, io.KeyShift = shift && sc.phase == 0;
        return sc.phase++ == 1 ? (sc.phase = 0, true) : false;
    }
    return std::nullopt;
}

// gen-tokens N | gen-temperature T | gen-step K | flood N
static std::optional<bool> generation_command(script_runner& sc, app_state& s, ui_context& ui, const std::string& cmd,
                                              const std::string& arg) {
    if (cmd == "gen-tokens") { // as the Continuation's tokens slider
        s.gen_tokens = std::max(1, std::atoi(arg.c_str()));
        return true;
    }
    if (cmd == "gen-temperature") { // as the Continuation's temperature slider (0: greedy)
        s.gen.temperature = std::max(0.0f, std::min(2.0f, (float)std::atof(arg.c_str())));
        return true;
    }
    if (cmd == "gen-step") { // as the Continuation's step slider
        s.gen_step = std::max(0, std::min(std::atoi(arg.c_str()), replay_steps(s)));
        s.gen_follow = false;
        return true;
    }
    if (cmd == "flood") { // once a run is being computed, N run requests in a row, the prompt one character longer
        // each time (the running one stops, the waiting ones are replaced: only the newest shows)
        if (!ui.work->running() && ++sc.wait_frames < 600) return false;
        sc.wait_frames = 0;
        const int n = std::max(1, std::atoi(arg.c_str()));
        for (int k = 0; k < n; k++) {
            s.prompt += (char)('a' + k % 26);
            ui.work->run(current_run_request(s));
        }
        ui.run_requested = current_run_key(s);
        return true;
    }
    return std::nullopt;
}

// open PATH | session FILE | save-session FILE | export DIR
static std::optional<bool> file_command(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg) {
    if (cmd == "open") { // as the Model panel's Open button
        open_model(s, *ui.work, arg);
        return true;
    }
    if (cmd == "session") { // as the Model panel's session Load button: a bad file's error shows in the window
        try {
            open_session(s, *ui.work, arg);
            s.status = "loaded session " + arg;
        } catch (const std::exception& e) {
            s.error = e.what();
        }
        return true;
    }
    if (cmd == "save-session") { // as the Model panel's Save with FILE in its box
        save_session(s, arg);
        s.status = "saved session " + arg;
        return true;
    }
    if (cmd == "export") { // as the Model panel's Export with DIR in its box (without window.png)
        std::string wrote = export_capture(s, arg);
        s.status = "exported " + wrote + " to " + arg;
        return true;
    }
    return std::nullopt;
}

// sae-train corpus=FILE out=DIR point=NAME layer=L features=N k=K steps=S (any of them; the rest as the fields
// are): as filling the Features tab's "Train an SAE" fields and pressing Train (a refusal is the app's error line)
static bool sae_train_command(app_state& s, const std::string& arg) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    features_inputs::train_fields& f = fin.train;
    std::istringstream in(arg);
    for (std::string kv; in >> kv;) {
        const size_t eq = kv.find('=');
        const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
        if (k == "corpus") f.corpus = v;
        else if (k == "out") f.out = v;
        else if (k == "layer") f.layer = std::atoi(v.c_str());
        else if (k == "features") f.features = std::atoi(v.c_str());
        else if (k == "k") f.k = std::atoi(v.c_str());
        else if (k == "steps") f.steps = std::atoi(v.c_str());
        else if (k == "point") {
            const auto& pts = sae_train_points();
            f.point = -1;
            for (size_t i = 0; i < pts.size(); i++)
                if (v == gb::hook_name(pts[i])) f.point = (int)i;
        } else throw gb::error("script: sae-train: unknown field " + k);
    }
    start_sae_training(s);
    return true;
}

// scale | image FILE | rollout on|off | tab NAME | demo NAME | colour-by NAME | corrupt TEXT | patch-mode MODE |
// subject TEXT | select-token I | select-head L.H
static std::optional<bool> view_command(script_runner& sc, app_state& s, const std::string& cmd, const std::string& arg) {
    auto& iin = inputs_of<image_inputs>(s, TAB_IMAGE);
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    if (cmd == "scale") { // linear | log | rowmax, as the Head panel's radio buttons
        s.scale = arg == "log" ? SCALE_LOG : arg == "rowmax" ? SCALE_ROW_MAX : SCALE_LINEAR;
        return true;
    }
    if (cmd == "image") { // as typing a path into the Image box (vision models)
        s.image_path = arg;
        return true;
    }
    if (cmd == "rollout") { // on | off: the Image tab's "attention rollout" checkbox
        iin.rollout = arg == "on";
        return true;
    }
    if (cmd == "tab") { // as clicking the tab
        for (int t = 0; t < TAB_COUNT; t++)
            if (arg == tab_name((analysis_tab)t)) {
                s.tab = (analysis_tab)t;
                return true;
            }
        throw gb::error("script: unknown tab " + arg);
    }
    if (cmd == "demo") { // induction | prev-token | lens | ioi | break-it | temperature, as the Prompt panel's Demos
                         // combo (once a model is loaded)
        if (!s.model) {
            if (++sc.wait_frames > 6000) throw gb::error("script: demo: no model loaded");
            return false;
        }
        sc.wait_frames = 0;
        for (int d = DEMO_NONE + 1; d < DEMO_COUNT; d++)
            if (arg == demo_name((demo_kind)d)) {
                if (!demo_offered(*s.model, (demo_kind)d)) // as the combo, which does not list it
                    throw gb::error("script: demo " + arg + ": not offered for this kind of model");
                start_demo(s, (demo_kind)d);
                return true;
            }
        throw gb::error("script: unknown demo " + arg + " (induction, prev-token, lens, ioi, break-it, temperature)");
    }
    if (cmd == "colour-by") { // as the grid's combo
        for (int m = 0; m < COLOUR_COUNT; m++)
            if (arg == colour_name((colour_mode)m)) {
                s.colour_by = (colour_mode)m;
                if (m == COLOUR_PATTERN) state_of<induction_inputs>(s, ANALYSIS_INDUCTION).shown = false;
                return true;
            }
        throw gb::error("script: unknown colour-by " + arg);
    }
    if (cmd == "corrupt") { // as typing into the Patching tab's corrupted prompt box
        pin.corrupt = arg;
        return true;
    }
    if (cmd == "patch-mode") { // patching | trace, as the Patching tab's radio buttons
        if (arg != "patching" && arg != "trace") throw gb::error("script: patch-mode patching|trace, not " + arg);
        pin.shown = analysis_id(arg.c_str());
        return true;
    }
    if (cmd == "subject") { // as typing into the causal-tracing Subject box
        pin.subject = arg;
        return true;
    }
    if (cmd == "select-token") { // as clicking a token chip
        s.sel_token = std::atoi(arg.c_str());
        return true;
    }
    if (cmd == "sae") { // as typing PATH into the Features tab's SAE box and pressing Open
        open_sae_file(s, arg);
        return true;
    }
    if (cmd == "feature") { // N, as clicking a feature chip (-1: none)
        fin.sel = std::atoi(arg.c_str());
        return true;
    }
    if (cmd == "feature-value") { // V, as the Features tab's value box (clamp's value, steer's alpha)
        fin.value = (float)std::atof(arg.c_str());
        return true;
    }
    if (cmd == "feature-corpus") { // FILE, as typing into the Features tab's corpus box
        fin.corpus = arg;
        return true;
    }
    if (cmd == "sae-train") return sae_train_command(s, arg);
    if (cmd == "select-head") { // L.H, as clicking a head in the grid
        int l = -1, h = -1;
        if (std::sscanf(arg.c_str(), "%d.%d", &l, &h) != 2 || l < 0 || h < 0) throw gb::error("script: select-head L.H, not " + arg);
        s.sel_layer = l, s.sel_head = h;
        return true;
    }
    return std::nullopt;
}

// ui-scale S | present on|off | maximise PANEL | restore | export-panel PANEL DIR
static std::optional<bool> layout_command(script_runner& sc, app_state& s, ui_context& ui, const std::string& cmd,
                                          const std::string& arg) {
    if (cmd == "ui-scale") { // as the View menu's text size (1 = 100 %)
        char* end = nullptr;
        const float v = std::strtof(arg.c_str(), &end);
        if (arg.empty() || *end || !(v >= min_ui_scale && v <= max_ui_scale))
            throw gb::error("script: ui-scale: expected 0.6 .. 3, got '" + arg + "'");
        s.ui_scale = v;
        return true;
    }
    if (cmd == "present") { // on | off, as F5
        s.presenting = arg == "on";
        return true;
    }
    if (cmd == "maximise" || cmd == "restore") { // as a double-click on the panel's title line, and Esc
        const std::string id = cmd == "restore" ? "" : panel_window_id(arg);
        if (cmd == "maximise" && id.empty()) throw gb::error("script: no panel named '" + arg + "'");
        ui.maximised = id;
        return true;
    }
    if (cmd == "export-panel") { // PANEL DIR: as its menu's Export (SVG and PNG 2x, named after the panel), unstamped
        if (sc.phase == 0) {
            const std::string name = arg.substr(0, arg.find(' '));
            const std::string dir = arg.find(' ') == std::string::npos ? "" : arg.substr(arg.find(' ') + 1);
            const std::string id = panel_window_id(name);
            if (id.empty()) throw gb::error("script: no panel named '" + name + "'");
            ui.exported.clear();
            export_panel(s, ui, id, dir, false);
            sc.phase = 1;
            return false;
        }
        if (!ui.exports.empty()) return false; // written over the next frames
        sc.phase = 0;
        return true;
    }
    return std::nullopt;
}

// wait-running NAME | frames N | repeat-until SECONDS
static std::optional<bool> waiting_command(script_runner& sc, const app_state& s, const std::string& cmd, const std::string& arg) {
    if (cmd == "wait-running") { // until that analysis is running with some progress made (for cancellation tests)
        const analysis_kind k = analysis_named(arg); // any row of the analysis table
        if (k == ANALYSIS_COUNT) throw gb::error("script: wait-running NAME (an analysis: lens, patching, ...), not " + arg);
        if (s.analysis[k].busy && s.analysis[k].progress > 0) {
            sc.wait_frames = 0;
            return true;
        }
        if (++sc.wait_frames > 6000) throw gb::error("script: " + arg + " never ran");
        return false;
    }
    if (cmd == "repeat-until") { // SECONDS: back to the first line until that long after the script started
        if (std::chrono::duration<double>(clock_type::now() - sc.started).count() < std::atof(arg.c_str())) sc.next = (size_t)-1;
        return true; // (the caller's next++ makes it line 0)
    }
    if (cmd == "frames") { // let N frames pass
        if (++sc.phase < std::max(1, std::atoi(arg.c_str()))) return false;
        sc.phase = 0;
        return true;
    }
    return std::nullopt;
}

// A widget drawn in the last two frames; one drawn only earlier (its panel became a tab not shown, a popup closed)
// is not there to be clicked: its old rectangle may now be under something else.
static std::map<std::string, ImVec4>::const_iterator shown_widget(const ui_context& ui, const std::string& name) {
    auto it = ui.widgets.find(name);
    auto f = ui.widget_frame.find(name);
    if (it != ui.widgets.end() && f != ui.widget_frame.end() && ImGui::GetFrameCount() - f->second > 2) return ui.widgets.end();
    return it;
}

// A press on a widget's centre, the mouse moved by (dx, dy) over four frames, a release (sliders, the grid).
static bool drag_step(script_runner& sc, const ImVec4& r, float dx, float dy) {
    ImGuiIO& io = ImGui::GetIO();
    if (sc.phase == 0) sc.drag_x = (r.x + r.z) / 2, sc.drag_y = (r.y + r.w) / 2;
    const ImVec2 c(sc.drag_x, sc.drag_y);
    const float f = sc.phase < 2 ? 0.0f : std::min(1.0f, (sc.phase - 1) / 4.0f);
    sc.hovering = false;
    io.MousePos = ImVec2(c.x + f * dx, c.y + f * dy);
    io.MouseDown[0] = sc.phase >= 1 && sc.phase <= 5;
    if (++sc.phase < 7) return false;
    sc.phase = 0;
    return true;
}

// wheel N | hover LABEL | click LABEL | rclick LABEL | dclick LABEL | try-click LABEL | drag LABEL DX DY
static std::optional<bool> mouse_command(script_runner& sc, const ui_context& ui, const std::string& cmd, const std::string& arg) {
    ImGuiIO& io = ImGui::GetIO();
    if (cmd == "try-click") { // a click when the widget is on screen now, else nothing (the soak's random clicks)
        if (shown_widget(ui, arg) == ui.widgets.end()) { // (or it went away mid-click: let go)
            if (sc.phase > 0) io.MouseDown[0] = false, sc.phase = 0;
            return true;
        }
        return mouse_command(sc, ui, "click", arg);
    }
    if (cmd == "drag") { // LABEL DX DY (LABEL may hold spaces): nothing when the widget is not on screen
        const size_t b = arg.find_last_of(' '), a = b == std::string::npos ? b : arg.find_last_of(' ', b - 1);
        if (a == std::string::npos) throw gb::error("script: drag LABEL DX DY, not " + arg);
        auto it = shown_widget(ui, arg.substr(0, a));
        if (it == ui.widgets.end()) {
            if (sc.phase == 0) return true;
            sc.phase = 0, io.MouseDown[0] = false; // it went away mid-drag: let go
            return true;
        }
        return drag_step(sc, it->second, (float)std::atof(arg.substr(a + 1, b - a - 1).c_str()), (float)std::atof(arg.substr(b + 1).c_str()));
    }
    if (cmd == "wheel") { // the mouse wheel turned N notches (negative: down) where the mouse is (see hover)
        io.MouseWheel = (float)std::atof(arg.c_str());
        return true;
    }
    if (cmd == "hover") { // the mouse rests on a widget (its tooltip shows from the next frame)
        auto it = shown_widget(ui, arg);
        if (it == ui.widgets.end()) {
            if (++sc.wait_frames > 120) throw gb::error("script: no widget named '" + arg + "'");
            return false;
        }
        sc.wait_frames = 0;
        sc.hovering = true;
        sc.hover_at = io.MousePos = ImVec2((it->second.x + it->second.z) / 2, (it->second.y + it->second.w) / 2);
        return true;
    }
    if (cmd == "dclick") { // a double click: move, press, release, press, release
        auto it = shown_widget(ui, arg);
        if (it == ui.widgets.end()) {
            if (++sc.wait_frames > 120) throw gb::error("script: no widget named '" + arg + "'");
            return false;
        }
        sc.hovering = false;
        io.MousePos = ImVec2((it->second.x + it->second.z) / 2, (it->second.y + it->second.w) / 2);
        io.MouseDown[0] = sc.phase == 1 || sc.phase == 3;
        // the two presses are two frames apart: a double click however slow the frames (software GL under load
        // can take longer than ImGui's 0.3 s for two); then ImGui's default again (the app never changes it)
        io.MouseDoubleClickTime = sc.phase < 4 ? 60.0f : 0.30f;
        if (++sc.phase < 5) return false;
        sc.phase = 0, sc.wait_frames = 0;
        return true;
    }
    if (cmd == "click" || cmd == "rclick") {
        auto it = shown_widget(ui, arg);
        if (it == ui.widgets.end()) {
            if (++sc.wait_frames > 120) throw gb::error("script: no widget named '" + arg + "'");
            return false;
        }
        ImVec4 r = it->second;
        sc.hovering = false;
        io.MousePos = ImVec2((r.x + r.z) / 2, (r.y + r.w) / 2);
        int button = cmd == "click" ? 0 : 1;
        if (sc.phase == 0) io.MouseDown[button] = false;      // move there first
        else if (sc.phase == 1) io.MouseDown[button] = true;  // press
        else io.MouseDown[button] = false;                    // release
        if (++sc.phase == 3) {
            sc.phase = 0;
            sc.wait_frames = 0;
            return true;
        }
        return false;
    }
    return std::nullopt;
}

// Returns false while the action needs more frames.
static bool script_step(script_runner& sc, app_state& s, ui_context& ui, bool settled, int fb_w, int fb_h) {
    const std::string& line = sc.lines[sc.next];
    std::string cmd = line.substr(0, line.find(' '));
    std::string arg = line.find(' ') == std::string::npos ? "" : line.substr(line.find(' ') + 1);
    if (sc.hovering) ImGui::GetIO().MousePos = sc.hover_at;
    std::optional<bool> done = report_command(sc, s, ui, cmd, arg, settled, fb_w, fb_h);
    if (!done) done = keyboard_command(sc, s, cmd, arg, settled);
    if (!done) done = generation_command(sc, s, ui, cmd, arg);
    if (!done) done = file_command(s, ui, cmd, arg);
    if (!done && analysis_script_command(s, ui, cmd, arg)) done = true; // the analyses' own (model B's open-b, ...)
    if (!done) done = view_command(sc, s, cmd, arg);
    if (!done) done = layout_command(sc, s, ui, cmd, arg);
    if (!done) done = waiting_command(sc, s, cmd, arg);
    if (!done) done = mouse_command(sc, ui, cmd, arg);
    if (!done && ui.picker) done = picker_command(s, ui, cmd, arg);
    if (!done) done = graph_command(sc, s, cmd); // graph-wait | graph-print (graph_panel.h)
    if (!done) throw gb::error("script: unknown command '" + cmd + "'");
    return *done;
}

bool advance_script(script_runner& sc, app_state& s, ui_context& ui, bool settled, int fb_w, int fb_h) {
    if (sc.done()) return true;
    if (!sc.began) sc.began = true, sc.started = clock_type::now(); // (not the start-up, which a loaded machine slows)
    try {
        if (script_step(sc, s, ui, settled, fb_w, fb_h)) sc.next++;
    } catch (const gb::error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return false;
    }
    return true;
}

} // namespace gbui
