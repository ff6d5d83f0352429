// Comparing the shown model (A) with a second one (B): two rows of the analysis table on a lane of their own (B's
// load, and the comparison of the shown run's tokens: core/analysis/compare.h), what the analysis keeps of its own
// (model B, the view shown), and its parts of other panels (the Model panel's "B..." button; the grid, residual and
// lens panels' B and "A vs B" views: panels/panel_compare.cpp). Everything of it but that panel file and its rows
// in analysis_table.cpp is here; its rows are found by name ("model_b", "compare").
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/compare.h"
#include "app_state.h"
#include "model/model.h"

namespace gbui {

struct analysis_entry;   // analysis_table.h
struct analysis_request; // analysis_worker.h
struct analysis_run;     // analysis_table.h
struct ui_context;       // ui.h
enum panel_part : int;   // analysis_table.h

// What the two rows' requests carry (analysis_request::inputs): the load reads `path` (keeping the weights stored
// as A's are, or widened); the comparison runs `a` and `b` on `tokens`.
struct compare_request {
    std::string path;
    bool keep_stored = true;
    std::shared_ptr<const gb::model> a, b;
    std::vector<int> tokens; // [T]
};

// The load's output: model B, not yet checked against A (that waits for A, whose shape it must have).
struct model_b_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
};

// One comparison: both models on the shown run's tokens; immutable once published.
struct compare_output {
    std::string key;                           // compare_key of the inputs it answers
    std::shared_ptr<const gb::model> a, b;
    std::vector<int> tokens;                   // [T]
    gb::compare_result res;
    std::shared_ptr<const gb::record> run_b;   // B's record (patterns, residual stream): the grid and residual's B
    double ms = 0;
};

// What the comparison keeps of its own (the "compare" row's state): model B and the views.
struct compare_state {
    enum view { VIEW_A, VIEW_B, VIEW_AVB };
    std::shared_ptr<const gb::model> model;    // model B (null: nothing to compare)
    std::string path_input;                    // the Model panel's "model B" box
    view shown = VIEW_A;                       // what the grid, residual and lens panels show
    bool rel = false;                          // A vs B's residual heatmap: |a - b| / |a| (else 1 - cosine)
    int loads = 0;                             // bumped by each Open model B: the load row's request
    std::string load_path;                     // of the newest load
    std::string taken[2];                      // the load's output or error, and the comparison's error, taken
                                               // (each is taken once: its key)
};

// The rows' hooks (analysis_table.h): B's load (sent when Open model B was pressed, once a model A is there) and
// the comparison of the shown run (sent while B is loaded), on their own lane; what the comparison prints, its parts
// of the other panels, and the script's `open-b PATH` and `compare-view a|b|avsb`.
std::shared_ptr<const void> compute_model_b(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_compare(const analysis_request& q, const analysis_run& run);
void schedule_model_b(app_state& s, ui_context& ui, const analysis_entry& row);
void schedule_compare(app_state& s, ui_context& ui, const analysis_entry& row);
void print_compare(nlohmann::json& j, const app_state& s, const analysis_entry& row);
bool compare_parts(app_state& s, ui_context& ui, panel_part p);
bool compare_script(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg);

// The comparison's state (the "compare" row's).
compare_state& compare_of(app_state& s);
const compare_state& compare_of(const app_state& s);
// Opens model B at path (the "B..." box, the script's `open-b`, `--compare`).
void open_model_b(app_state& s, const std::string& path);
// The popup's Close model B: no B, its comparison dropped, the views back to A (a load under way still lands).
void close_model_b(app_state& s);
// Whether a load of B was asked and has not been taken yet; whether the comparison is queued or running.
bool model_b_loading(const app_state& s);
bool comparing(const app_state& s);
// The comparison of the shown run, when it has arrived (null otherwise).
const compare_output* current_compare(const app_state& s);

// panels/panel_compare.cpp: the "A | B | A vs B" switch (only while a model B is loaded), the Model panel's "B..."
// button, whose popup "Open model B..." takes B's path (and closes B), and the panels' B and "A vs B" views: the
// head grid (B's patterns, or each head's JS divergence), the residual heatmap (B's norms, or cosine / relative
// difference) with the prompt's surprisal difference, the lens of both.
void compare_switch(app_state& s, ui_context& ui);
void model_b_button(app_state& s, ui_context& ui);
void compare_grid(app_state& s, ui_context& ui);
void compare_residual(app_state& s, ui_context& ui);
void compare_lens(app_state& s, ui_context& ui);

} // namespace gbui
