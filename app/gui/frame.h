// What the frame loop does besides drawing: waiting for input or results, taking the workers' results in (a new
// one is shown once its textures are all uploaded), sending a run when the inputs changed, the keyboard
// shortcuts, and the end of a headless screenshot run.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "options.h"
#include "ui.h"

namespace gbui {

// What the loop carries from one frame to the next.
struct frame_state {
    std::string pending;                            // run inputs seen last frame
    std::chrono::steady_clock::time_point changed_at = std::chrono::steady_clock::now(); // when they last changed
    const gb::model* picked_for = nullptr;          // model for which a default head was chosen
    std::pair<uint64_t, int> colour_asked{0, -1};   // (result, scale) last sent to be re-coloured
    std::string restoring;                          // the last model, being reopened: if it fails to load, the
                                                    // default is opened instead
    std::optional<pending_settings> startup_pending; // the startup settings, for the default if `restoring` fails
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    int settled_frames = 0;                         // headless screenshot: frames the result has been on screen
    double limit_s = 120;                           // a headless run ends with an error after this long (--timeout)
    std::string waiting_for;                        // what the last unsettled frame awaited (named on a timeout)
};

// Waits for input, a worker's result or the debounce's end when may_wait and nothing moves on screen; else only
// polls the events.
void wait_for_events(const app_state& s, const ui_context& ui, const frame_state& f, bool may_wait);
// Between two frames: takes in what the workers published (a new result is shown once its textures are all
// uploaded, *upload_ms the time that took), re-colours for a changed scale, opens dropped files, sends a run for
// changed inputs, picks a first head, steps a demo and sends the analyses the view shows. Returns whether the app
// is settled: the shown result is of the inputs as they are now, with everything it shows computed and uploaded.
bool update_state(app_state& s, ui_context& ui, frame_state& f, double* upload_ms);
// Ctrl+O open, Ctrl+S save session, Ctrl+E export PNG, arrows move the selected head, and the View keys
// (view.h: text size, F5, F11, Esc, Ctrl+Shift+E) (inside a frame).
// The head a model opens on, as an index layer * H + head (-1: no scores): its best induction head on the prompt when
// a token repeats and that head scores at least 0.2, else its strongest previous-token head outside layer 0.
int first_head(const gb::head_scores& sc);
void keyboard_shortcuts(app_state& s, ui_context& ui);
// Writes the PNG that Ctrl+E or Export asked for, of the frame just rendered.
void save_requested_screenshot(app_state& s, ui_context& ui, int fb_w, int fb_h);
// Whether a headless run is over, after a frame is rendered: a --screenshot is written once the result has been
// on screen for a few frames (or the model failed to load), a --script ends with its last line, and either gives
// up after 120 s. Returns the exit code when it is over, nothing while it goes on (and for a window).
std::optional<int> headless_end(app_state& s, const ui_context& ui, frame_state& f, const options& opt, bool script_done,
                                bool settled, int fb_w, int fb_h);

} // namespace gbui
