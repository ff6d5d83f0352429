// The Graph tab's inputs and output (its analyses: graph_analysis.cpp): an attribution graph of the shown run
// over a transcoder set (core/analysis/attribution_graph.h, docs/graphs.md), pruned at the tab's two thresholds,
// with the tab's feature edits run through the replacement model (core/analysis/graph_intervene.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "analysis/attribution_graph.h"
#include "analysis/graph_intervene.h"
#include "analysis/graph_prune.h"
#include "graph_view.h"

namespace gbui {

struct run_result; // app_state.h
struct app_state;
struct analysis_request; // analysis_worker.h

struct graph_inputs {
    std::string transcoders;     // the set's folder ("" : the default model's shipped set)
    float node_threshold = 0.8f; // the prune sliders (circuit-tracer's defaults)
    float edge_threshold = 0.98f;
    int hovered = -1;            // the view's node under the mouse (the panel's), -1: none
    int hovered_link = -1;       // the view's link under the mouse, -1: none
    std::vector<std::string> pinned;         // node ids (a click pins or unpins)
    std::vector<graph_supernode> supernodes; // named groups of pinned nodes
    std::string group_name;                  // the name box beside Group
    std::vector<gb::graph_edit> edits;       // features held at values in the replacement model (right-click)
    std::vector<int> edits_tokens;           // the prompt they were made on (another prompt drops them)
    float clamp_value = 0;                   // the right-click menu's typed value
    int menu_node = -1;                      // the node whose right-click menu is open (a view index)
    std::string error;                       // the tab's one-line error (bad file, a right-click on no feature)
    std::string note;                        // what the last file action did ("saved g.json: 202 nodes")
    std::string file;                        // the JSON file box (Open, Save)
    std::string file_job;                    // the open, save or export job waiting (graph_tasks.h), "" none
    int file_jobs = 0;                       // jobs started (each press is a job of its own)
    std::shared_ptr<const graph_view> opened; // a graph read from a file, shown instead of the run's while set
};

// The top tokens before and after the edits: what the tab shows beside the graph.
struct graph_logit_change {
    int id = 0;
    std::string text;
    float before = 0, after = 0;
};

struct graph_output {
    std::string key;
    std::shared_ptr<const run_result> from;          // the run it is of (tokens, model)
    std::string transcoders;                         // the set's folder it used
    std::shared_ptr<const gb::transcoder_set> set;   // that set (head loadings, dashboards)
    std::shared_ptr<const gb::replacement> rep;      // the frozen replacement model g was built from
    std::shared_ptr<const gb::attribution_graph> g;  // shared between outputs that only re-prune or edit
    gb::prune_result pruned;                         // at the thresholds below
    float node_threshold = 0, edge_threshold = 0;
    std::vector<std::string> node_label;             // [N] "L3 #438 @5", "err L2 @4", "tok 'cat'", "logit ' Paris'"
    std::vector<std::pair<int, int>> edges;          // the kept edges (target, source), weakest first
    float max_edge = 0;                              // the largest kept |weight|
    std::vector<gb::graph_edit> edits;               // the edits it ran (empty: none)
    std::vector<graph_logit_change> top_before, top_after; // the 10 most probable tokens of each run (edits only)
    graph_view view;                                 // what the tab draws: the kept nodes and links
    double ms = 0;
};

// What its request carries (analysis_request::inputs): `from`'s tokens over the transcoder set at `transcoders`,
// pruned at the thresholds; `graph` the one on screen (of the same run and set, only the pruning and the edits are
// redone); edits: features held in the replacement model.
struct graph_request {
    std::shared_ptr<const run_result> from;
    std::shared_ptr<const graph_output> graph;
    std::string transcoders;
    std::vector<gb::graph_edit> edits;
    float node_threshold = 0.8f, edge_threshold = 0.98f;
};

// The Graph request of the shown run (the scheduler's): fills q and returns its key ("" : nothing to ask).
std::string graph_key(const app_state& s, graph_request& q);

} // namespace gbui
