// The analysis table: one row per analysis the app computes off the UI thread (the model is llama.cpp's tool
// table). A row names the analysis in scripts, the tab whose panel draws it, the thread lane it runs on, what the
// model's kind must offer (core/model/kind.h answers), the function that computes it, the type of its output and
// what Export writes of it.
// The worker (analysis_worker.h) dispatches through it and keeps one output slot per row; app_state holds one
// published output per row (app_state::output), read with output_of.
//
// Adding an analysis: its files (<name>_analysis.{h,cpp}: inputs, output, compute, schedule and print hooks), its
// request fields, one row in analysis_table.cpp, and the panel that draws its output (docs/development.md, "How to
// add an analysis").
#pragma once
#include <functional>
#include <memory>
#include <typeinfo>

#include <nlohmann/json_fwd.hpp>

#include "analysis_outputs.h"
#include "analysis_requests.h"
#include "analysis_worker.h"
#include "app_state.h"
#include "util/error.h"

namespace gbui {

struct ui_context;       // ui.h

// The tabs under the attention grid, one row each: the name sessions and scripts use, the label, the feature the
// tab shows (tab_available asks the kind table for it) and the panel that draws it (panels/panel_*.cpp).
struct tab_entry {
    analysis_tab tab;
    const char* name;  // "head", "lens", ... (sessions, scripts)
    const char* label; // "Head", "Logit lens", ... (the tab bar)
    gb::feature feature;
    void (*draw)(app_state& s, ui_context& ui);
    const char* pick;  // what a click on a Next-token row picks while the tab is open ("": nothing)
    std::shared_ptr<void> (*make_inputs)(); // the tab's own inputs (app_state::inputs), made with the state
    const std::type_info* inputs;           // their type (null: none)
    int* (*picks)(app_state& s);            // the token id a click on a Next-token row sets (null: none; `pick` says
                                            // what it is)
    bool model_only = false;                // hidden while no model is loaded (the text tabs show, empty)
    // What the tab applies to the main run through the ablation beyond its own lists (the Steer tab's steering): its
    // line in the Ablations panel with a remove button, and its part of a session's "ablation" (null: nothing)
    void (*applied)(app_state& s, ui_context& ui) = nullptr;
    void (*save_applied)(nlohmann::json& ablation, const app_state& s) = nullptr;
    void (*read_applied)(const nlohmann::json& ablation, gb::ablation& ab) = nullptr; // throws gb::error
};
template <class T> std::shared_ptr<void> make_inputs() { return std::make_shared<T>(); }
// The row of t (t < TAB_COUNT).
const tab_entry& tab_info(analysis_tab t);

// What a compute function may call while it runs on its analysis thread.
struct analysis_run {
    std::function<bool(float)> go;        // progress in [0, 1]; false once the request is stopped
    std::function<bool()> stopped;        // whether the request is stopped (polled between a run's layers too)
    std::function<void(std::shared_ptr<const void>)> early; // publishes a first output before the final one
                                                            // (patching's fast estimate)
};
// Returns the output (of the row's type), or null when stopped; throws gb::error when the inputs do not work.
using analysis_compute = std::shared_ptr<const void> (*)(const analysis_request& q, const analysis_run& run);

// Writes out (the row's output type) into dir in the CLI's formats when it is of s.result; returns what it wrote
// for the status line ("lens"), "" when the output is of another run.
using analysis_write = std::string (*)(const app_state& s, const void* out, const std::string& dir);

struct analysis_entry;
// Sends the row's request when its inputs changed, through schedule_analysis (ui.h); called every frame.
using analysis_schedule = void (*)(app_state& s, ui_context& ui, const analysis_entry& row);
// Adds the row's output (and the state it owns) to the script's `print` (script_state.cpp), for the GUI tests.
using analysis_print = void (*)(nlohmann::json& j, const app_state& s, const analysis_entry& row);
// The panels a row may draw a part of beyond its tab's panel (model B: its button in the Model panel, its views of
// the grid, the residual stream and the lens).
enum panel_part : int { PART_MODEL, PART_GRID, PART_RESIDUAL, PART_LENS };
// Draws the row's part of panel p; true when it drew in place of the panel's own content (the panel then stops).
using analysis_draw_part = bool (*)(app_state& s, ui_context& ui, panel_part p);
// Runs the script command `cmd arg` when it is the row's (script.cpp); false when it is not.
using analysis_script = bool (*)(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg);

struct analysis_entry {
    analysis_kind kind;
    const char* name;            // in scripts' JSON, their wait-running command and messages ("lens", "sae_train")
    analysis_tab tab;            // the tab whose panel draws the output (tab_info)
    int lane;                    // 0: the quick analyses; 1: the long ones (a forward per head, node or row), so
                                 // that a long one never delays a quick one; 2: model B's (a second model's load
                                 // and runs wait for neither)
    gb::feature needs[2];        // what the model's kind must offer (FEATURE_RUN: nothing beyond a run); the
                                 // scheduler asks for it only then
    analysis_compute compute;
    const std::type_info* request; // the type of its request's inputs (analysis_request::inputs; request_of)
    const std::type_info* output; // the type of its output: what output_of reads from its slot
    analysis_write write;        // Export: writes the output when it is of the shown run (null: not exported)
    analysis_schedule schedule;  // when it is sent (null: scheduler.cpp's schedule_analyses sends it)
    analysis_print print;        // its part of `print` (null: script_state.cpp prints it)
    // What the analysis keeps of its own beyond a tab's inputs (app_state::own, read with state_of; null: nothing),
    // made with the state, and its type
    std::shared_ptr<void> (*make_state)() = nullptr;
    const std::type_info* state = nullptr;
    analysis_draw_part draw_part = nullptr; // its parts of other panels (null: none)
    analysis_script script = nullptr;       // its script commands (null: none)
};
// The inputs tab t keeps of its own, as the type its row names.
template <class T> T& inputs_of(app_state& s, analysis_tab t) {
    if (!tab_info(t).inputs || *tab_info(t).inputs != typeid(T)) throw gb::error(std::string("inputs_of: wrong type for ") + tab_info(t).name);
    return *static_cast<T*>(s.inputs[t].get());
}
template <class T> const T& inputs_of(const app_state& s, analysis_tab t) { return inputs_of<T>(const_cast<app_state&>(s), t); }

// The row of k (k < ANALYSIS_COUNT).
const analysis_entry& analysis_info(analysis_kind k);
// What row k keeps of its own, as the type its row names.
template <class T> T& state_of(app_state& s, analysis_kind k) {
    if (!analysis_info(k).state || *analysis_info(k).state != typeid(T)) throw gb::error(std::string("state_of: wrong type for ") + analysis_info(k).name);
    return *static_cast<T*>(s.own[k].get());
}
template <class T> const T& state_of(const app_state& s, analysis_kind k) { return state_of<T>(const_cast<app_state&>(s), k); }
// Each row's part of panel p, in the table's order; true when one drew in place of the panel's own content.
bool draw_parts(app_state& s, ui_context& ui, panel_part p);
// The script command `cmd arg` run by the row that has it; false when no row has it.
bool analysis_script_command(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg);
// The analysis's name in scripts' JSON and messages ("lens", "break", "sae_train", ...); "?" outside the table.
const char* analysis_name(analysis_kind k);
// The kind named `name` in the table, or ANALYSIS_COUNT.
analysis_kind analysis_named(const std::string& name);
// The row named `name`, for the files of an analysis that analysis_kind / analysis_tab do not name; throws
// gb::error when the table has none.
analysis_kind analysis_id(const char* name);
analysis_tab tab_id(const char* name);
// Whether m's kind offers what k needs (false without a model).
bool analysis_offered(analysis_kind k, const gb::model* m);

// What request q carries for its row's compute function, as the type its row names.
template <class T> const T& request_of(const analysis_request& q) {
    if (*analysis_info(q.kind).request != typeid(T)) throw gb::error(std::string("request_of: wrong type for ") + analysis_name(q.kind));
    return *std::any_cast<T>(&q.inputs);
}

// The newest published output of k (null: none yet), as the type its row names.
template <class T> std::shared_ptr<const T> output_of(const app_state& s, analysis_kind k) {
    if (*analysis_info(k).output != typeid(T)) throw gb::error(std::string("output_of: wrong type for ") + analysis_name(k));
    return std::static_pointer_cast<const T>(s.output[k]);
}

// The compute functions the rows name (analysis_compute.cpp; the Features tab's in feature_analysis.cpp; an
// analysis with files of its own declares its own).
std::shared_ptr<const void> compute_lens(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_attribution(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_induction(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_patching(const analysis_request& q, const analysis_run& run);
// Patching's clean and corrupted prompts' ids, the corrupted run's top tokens, and the target and contrast (the
// chosen ones, else the clean top-1 against the corrupted top-1, or the clean top-2 when both predict the target),
// into out; the analyses of patching's inputs share it.
void patch_inputs(patch_output* out, const std::string& key, const patch_request& q, int& target, int& contrast);
std::shared_ptr<const void> compute_learn(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_break(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_sampling(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_features(const analysis_request& q, const analysis_run& run);
std::shared_ptr<const void> compute_graph(const analysis_request& q, const analysis_run& run); // graph_analysis.cpp
// Export itself (analysis_export.cpp): the request is a snapshot of the state (the shown run and the outputs, as they
// were when Export was pressed) and the folder; once written, the status line and the window's PNG
std::shared_ptr<const void> compute_export(const analysis_request& q, const analysis_run& run);
void schedule_export(app_state& s, ui_context& ui, const analysis_entry& row);
// The writers of Export (analysis_export.cpp)
std::string export_lens(const app_state& s, const void* out, const std::string& dir);
std::string export_attribution(const app_state& s, const void* out, const std::string& dir);
std::string export_induction(const app_state& s, const void* out, const std::string& dir);
std::string export_patching(const app_state& s, const void* out, const std::string& dir);
std::string export_break(const app_state& s, const void* out, const std::string& dir);
std::string export_sampling(const app_state& s, const void* out, const std::string& dir);

} // namespace gbui
