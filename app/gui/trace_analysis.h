// Causal tracing, the Patching tab's other analysis: the shown run's tokens with the subject's embeddings noised, each
// residual point, attention and MLP output restored from the clean run in turn (core/analysis/trace.h). Everything
// of it but its view (panels/panel_patching.cpp, which draws it when the tab's `shown` is its row) and its row in
// analysis_table.cpp is here; its row is found by name ("trace"). Its input, the subject, is the tab's
// (patching_inputs.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/trace.h"
#include "app_state.h"

namespace gbui {

struct analysis_entry;   // analysis_table.h
struct analysis_request; // analysis_worker.h
struct analysis_run;     // analysis_table.h
struct ui_context;       // ui.h

// What its request carries (analysis_request::inputs): the run traced, and the subject (words of its prompt).
struct trace_request {
    std::shared_ptr<const run_result> from;
    std::string subject;
};

struct trace_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::string subject;                           // as typed
    std::vector<int> ids;                          // [T] the prompt's tokens
    gb::trace_result res;                          // resid [2L+1][T], attn and mlp [L][T], probabilities
    double ms = 0;
};

// The row's hooks (analysis_table.h): the trace with the CLI's defaults (on the long lane); sent while the Patching
// tab shows it, of the shown run, debounced like patching; its part of `print` (the whole maps, which the tests
// compare with the core's).
std::shared_ptr<const void> compute_trace(const analysis_request& q, const analysis_run& run);
void schedule_trace(app_state& s, ui_context& ui, const analysis_entry& row);
void print_trace(nlohmann::json& j, const app_state& s, const analysis_entry& row);

} // namespace gbui
