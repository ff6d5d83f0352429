// Scripted input for tests (--script FILE), one command a line (# comments), stepped frame by frame:
//   report:     wait | print | screenshot FILE | measure N
//   keyboard:   type TEXT | latency TEXT |
//               key [ctrl+][shift+]end|backspace|enter|escape|left|right|up|down|tab|f5|f11|=|-|0|e|o|kp+
//   generation: gen-tokens N | gen-temperature T | gen-step K | flood N
//   files:      open PATH | open-b PATH (model B, to compare with) | session FILE | save-session FILE | export DIR
//   view:       scale linear|log|rowmax | image FILE | rollout on|off | tab NAME | compare-view a|b|avsb | demo NAME |
//               colour-by NAME | corrupt TEXT | patch-mode patching|trace | subject TEXT | select-token I | select-head L.H |
//               sae PATH | feature N | feature-value V | feature-corpus FILE
//   layout:     ui-scale S | present on|off | maximise PANEL | restore | export-panel PANEL DIR
//   waiting:    wait-running lens|patching|trace | frames N
//   mouse:      wheel N | hover LABEL | click LABEL | rclick LABEL | dclick LABEL
//   picker:     picker machine|hf|file|close | picker-filter TEXT | picker-repo ID | picker-gguf FILE |
//               picker-path TEXT | picker-wait [downloading]   (model_picker.h)
//   graph:      graph-wait | graph-print   (graph_panel.h)
#pragma once
#include <imgui.h>

#include <chrono>
#include <string>
#include <vector>

#include "ui.h"

namespace gbui {

struct script_runner {
    std::vector<std::string> lines;
    size_t next = 0;
    std::chrono::steady_clock::time_point measure_start, last_frame;
    double ui_ms_sum = 0, max_ms = 0; // max_ms: longest frame (e.g. one that uploads a new result)
    double max_ui_ms = 0;             // longest UI build (CPU) of one frame
    std::vector<double> latencies;    // "latency": keystroke to result shown, ms
    std::vector<double> arrivals;     // "latency": keystroke to the worker's result arriving (before its upload), ms
    std::vector<double> worker_ms;    // "latency": the result's run + scores + pixels on the worker, ms
    std::chrono::steady_clock::time_point typed_at;
    bool arrived = false;             // the keystroke's result has come from the worker
    uint64_t result_at_type = 0;      // the newest result when the key was typed
    double max_upload_ms = 0;         // longest texture upload in one frame
    int phase = 0;      // multi-frame actions (click: move, press, release)
    float drag_x = 0, drag_y = 0; // a drag's start: the widget's centre when it began (a splitter moves as dragged)
    bool hovering = false; // "hover": the mouse stays at hover_at (the backend resets it every frame)
    ImVec2 hover_at;
    int wait_frames = 0;
    std::chrono::steady_clock::time_point started; // the first line's first step: "repeat-until" counts from it
    bool began = false;
    double ui_ms = 0;     // CPU time of the last frame's UI build (NewFrame .. Render), without GL raster (main sets it)
    double upload_ms = 0; // time of the last frame's texture uploads, 0 when none (main sets it)
    bool done() const { return next >= lines.size(); }
    double repeat_s = 0;  // the longest "repeat-until SECONDS": a headless run may last that (and 8 min) longer
    // a `latency` line is waiting for its keystroke's result
    // the line waits for the workers' results (wait, graph-wait): until they publish, a frame shows nothing new
    bool waiting_for_workers() const {
        if (done()) return false;
        const std::string cmd = lines[next].substr(0, lines[next].find(' '));
        return cmd == "wait" || cmd == "graph-wait";
    }
    bool latency_waiting() const { return !done() && lines[next].rfind("latency ", 0) == 0 && phase > 0 && !arrived; }
};

// Reads the script's lines (blank lines and # comments left out); throws gb::error when the file cannot be opened.
void read_script(script_runner& sc, const std::string& path);
// Writes the framebuffer's w x h pixels (the frame just rendered) to a PNG; throws gb::error when it cannot.
void write_png(const std::string& path, int w, int h);
// The script's `print`: the app's state as one JSON line on stdout (what the GUI tests check).
void print_state(const app_state& s, const ui_context& ui);
// Steps the script's current line by one frame (nothing once it is done; settled: the shown result is of the
// inputs as they are now, nothing is running). Returns false when the line failed (said on stderr: the run ends).
bool advance_script(script_runner& sc, app_state& s, ui_context& ui, bool settled, int fb_w, int fb_h);

} // namespace gbui
