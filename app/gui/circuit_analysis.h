// The Circuit tab's analysis: the graph of components between the Patching tab's prompts (target and contrast
// too), its edges scored by edge attribution patching (core/analysis/circuit.h), and the faithfulness of the
// circuit of every size the slider offers. Everything of it but its panel (panels/panel_circuit.cpp) and its rows
// in analysis_table.cpp is here; its rows are found by name ("circuit").
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/circuit.h"
#include "app_state.h"

namespace gbui {

struct analysis_entry;   // analysis_table.h
struct analysis_request; // analysis_worker.h
struct analysis_run;     // analysis_table.h
struct ui_context;       // ui.h

struct circuit_inputs {  // the tab's own (its row in the tab table makes them)
    int edges = 20;      // N: the top N edges
};

struct circuit_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::vector<int> clean_ids, corrupt_ids;       // [T] each
    gb::ablation ab;                               // in force in its runs
    std::shared_ptr<const gb::circuit_result> res; // nodes, every edge by |score|, the corrupted outputs
    int max_edges = 0;                             // the slider's range: 1 .. max_edges
    std::vector<float> faithfulness;               // [max_edges + 1] of the top-N circuit (NaN when clean == corrupt)
    double ms = 0;
};

// The rows' hooks (analysis_table.h): the circuit of patching's inputs and its faithfulness per size (on the long
// lane); sent while the tab shows, of the prompt as typed when its run is the shown one, debounced like patching;
// its part of `print`, with the patch it keeps on the main run.
std::shared_ptr<const void> compute_circuit(const analysis_request& q, const analysis_run& run);
void schedule_circuit(app_state& s, ui_context& ui, const analysis_entry& row);
void print_circuit(nlohmann::json& j, const app_state& s, const analysis_entry& row);
// The tab: the graph, the size slider, the faithfulness and "keep only this circuit" (the main run's patch).
void panel_circuit(app_state& s, ui_context& ui);

} // namespace gbui
