// One-click demonstrations for teaching: each sets the prompt, the view (tab, grid colouring) and the selection,
// and writes a caption saying what to look at. Heads are chosen by the loaded model's own head scores on the
// demo's prompt, once its run has arrived; the caption says so when the model shows no such head. Break it
// steps through its rows (each row's ablation applied to the whole app, its sentence as the caption); Temperature
// opens the Sampling tab, and its caption gives the top token's share at each temperature.
#pragma once
#include "analysis_table.h"
#include "app_state.h"

namespace gbui {

const char* demo_name(demo_kind d);  // "induction", "prev-token", "lens", "ioi", "break-it", "temperature" (scripts,
                                     // print); "" for none
const char* demo_label(demo_kind d); // "Induction head", ... (the Demos combo)
// Whether m's kind can run demo d (the kind table: the demos at all, and the feature the demo shows).
bool demo_offered(const gb::model& m, demo_kind d);
// Sets the demo's inputs on s (s.model must be loaded): prompt, tab, colouring, target tokens. The head and the
// caption follow in update_demo once the run of that prompt is shown.
void start_demo(app_state& s, demo_kind d);
// Once per frame on the UI thread (cheap: one pass over [L][H] scores): picks the head and writes the caption when
// the demo's run is shown; ends the demo when the prompt was edited or the model changed.
void update_demo(app_state& s);
// Break it: applies row `row` of the current Break-it output (of the prompt as it is now) to s.ablation,
// with its sentence as the caption; -1 restores the model (nothing ablated). Starts the demo when it is not on (a
// click on a row of the Learn tab's table). Does nothing when the output is not of the prompt as it is now.
void break_step(app_state& s, int row);
// Ends the demo shown (the caption's "end", an edit that makes the caption wrong).
void end_demo(app_state& s);

} // namespace gbui
