// The Steer tab: its own inputs (its row in the tab table makes them; inputs_of reads them): the contrast prompts
// (one a line), where each prompt's stream is read, the vector (built or opened), and how it is applied (the
// ablation's steer holds what is applied: the live run recomputes with it); its three analyses (the vector built,
// the continuations side by side, the sweep over scale x layer: steer_analysis.cpp) and its panel
// (panels/panel_steer.cpp). Its rows in analysis_table.cpp are found by name ("steer_build", "steer_compare",
// "steer_sweep"; the tab "steer").
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/steer.h"
#include "app_state.h"

namespace gbui {

struct analysis_entry;   // analysis_table.h
struct analysis_request; // analysis_worker.h
struct analysis_run;     // analysis_table.h
struct ui_context;       // ui.h

struct steer_inputs {
    std::string positive = "I love this, it is wonderful.\nWhat a happy day, everyone is smiling.\nThe food was "
                           "great and we had fun.\nShe laughed with joy.";
    std::string negative = "I hate this, it is terrible.\nWhat a sad day, everyone is crying.\nThe food was bad "
                           "and we were angry.\nShe cried with pain.";
    int where = 0;             // gb::steer_position: 0 the last token, 1 the mean over positions
    int build = 0;             // bumped by Build: the build request's inputs
    std::shared_ptr<const gb::steer_vector> vec; // the vector the tab shows and applies (null: none yet)
    float scale = 4.0f;        // alpha
    int lo = 1, hi = 1;        // the layers it is added after (those with a direction)
    int from = 0;              // the first position steered
    float scales[3] = {2.0f, 4.0f, 8.0f}; // the side-by-side continuations' alphas
    int tokens = 16;
    float sweep_scales[5] = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f};
    std::string reference = "The cat sat on the mat. The dog ran in the park and the children played with a "
                            "ball. Once upon a time there was a little girl who lived in a small house near the "
                            "woods. Every day she walked to school with her friend.";
    std::string path = "steer.gguf"; // Open and Save
    int open = 0, save = 0;    // bumped by Open and Save: their requests' inputs (the file is read and written on
                               // an analysis thread)
    std::string note;          // the last Open/Save/Build outcome, one line
    std::string adopted[3];    // the build, open and save outputs (or errors) the tab took: each is taken once
};

// What the rows' requests carry (analysis_request::inputs), each of `model` (with bos): build from the positive and
// negative prompts (one a line) at `where`; compare `prompt` under `steering` at `scales` (gen_tokens each, drawn
// as `sampling` says); sweep `steering.vec` at `scales` x `layers` on `reference` from `steering.from`; open the
// file at `path` (a .npy's direction at `npy_layer`); save `steering.vec` to `path`.
struct steer_request {
    std::shared_ptr<const gb::model> model;
    bool bos = false;
    std::string prompt;
    int gen_tokens = 30;
    gb::sampling sampling;
    std::string path;
    int npy_layer = -1;
    std::string positive, negative;
    int where = 0;
    gb::steering steering;
    std::vector<float> scales;
    std::vector<int> layers;
    std::string reference;
};

// The output of each of the three rows (the fields of its row filled).
struct steer_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::shared_ptr<const gb::steer_vector> vec; // build: the vector made
    gb::steer_compare side_by_side;              // compare: baseline and one continuation per scale
    std::vector<std::string> prompt_pieces;      // compare: the prompt's tokens
    gb::steer_sweep_result sweep;                // sweep: KL and loss [scales][layers], a continuation per cell
    std::string note;                            // open, save: what was done, one line
    double ms = 0;
};

// The rows' hooks (analysis_table.h). Build runs when Build was pressed (its prompts as they were then) and the
// vector it made becomes the tab's; Open and Save when pressed, and the vector opened becomes the tab's; the
// continuations and the sweep of the tab's vector while the tab shows. Each prints its part of `print`'s "steer".
std::shared_ptr<const void> compute_steer_build(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_steer_compare(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_steer_sweep(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_steer_open(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_steer_save(const analysis_request& q, const analysis_run& run);
void schedule_steer_build(app_state& s, ui_context& ui, const analysis_entry& row);
void schedule_steer_compare(app_state& s, ui_context& ui, const analysis_entry& row);
void schedule_steer_sweep(app_state& s, ui_context& ui, const analysis_entry& row);
void schedule_steer_open(app_state& s, ui_context& ui, const analysis_entry& row);
void schedule_steer_save(app_state& s, ui_context& ui, const analysis_entry& row);
void print_steer_build(nlohmann::json& j, const app_state& s, const analysis_entry& row);
void print_steer_compare(nlohmann::json& j, const app_state& s, const analysis_entry& row);
void print_steer_sweep(nlohmann::json& j, const app_state& s, const analysis_entry& row);

// The panel: build or open, apply, side by side, the cost sweep.
void panel_steer(app_state& s, ui_context& ui);
// The tab's row in the tab table: the applied steering's line in the Ablations panel, with its remove button
// (panel_steer.cpp); the steering with its vector's directions in a session's "ablation" (null when none: a built
// vector has no file; absent in sessions saved before steering)
void steer_applied(app_state& s, ui_context& ui);
void save_steer_applied(nlohmann::json& ablation, const app_state& s);
void read_steer_applied(const nlohmann::json& ablation, gb::ablation& ab);
// The steering the tab's inputs describe (its vector, alpha, the layers in its range that have a direction,
// from-position); vec null when there is no vector yet.
gb::steering tab_steering(const app_state& s);
// "ptr|name|scale|layers|from": names a steering in analysis keys
std::string steering_key(const gb::steering& st);

} // namespace gbui
