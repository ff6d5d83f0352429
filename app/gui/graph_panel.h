// The Graph tab's pieces shared by its panel files (panels/panel_graph.cpp: the controls; panels/graph_canvas.cpp:
// the picture, its hovers, clicks and menu) and its script commands (graph_script.cpp).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "graph_analysis.h"
#include "graph_view.h"
#include "ui.h"

namespace gbui {

// The picture of v in the rest of the panel: nodes, links, pins, supernodes, hover tooltips (a feature's
// dashboard, an edge's head loadings), clicks (pin) and the right-click menu (ablate, clamp). go: the shown run's
// graph when v is its view (null for a file's graph: no edits, loadings or dashboards).
void draw_graph_canvas(app_state& s, ui_context& ui, const graph_view& v, const std::shared_ptr<const graph_output>& go);

// The view the tab shows: a file's while one is open, else the run's graph (null: none yet).
const graph_view* shown_graph_view(const app_state& s);

// Pins or unpins the node id.
void toggle_graph_pin(graph_inputs& gin, const std::string& id);
// The pinned nodes into a supernode named gin.group_name (false, with gin.error, when there is no name or fewer than
// two pinned nodes); they leave the pins.
bool group_graph_pins(graph_inputs& gin);
// Feature n held at value in the replacement model at its position, or at every position (the CLI's L:*:I), replacing
// an edit of the same feature and position; a node that is no feature sets gin.error instead.
void set_graph_edit(graph_inputs& gin, const graph_node& n, float value, bool every_position = false);

// The Graph tab's script commands (script.h lists them): graph-wait (until the graph, its file job and its hover
// jobs are done) and graph-print (the tab's state as one JSON line {"graph_tab": ...}). Nothing when cmd is not
// one of them, else whether it is done.
struct script_runner;
std::optional<bool> graph_command(script_runner& sc, const app_state& s, const std::string& cmd);

// The top contexts' corpus: the text the Features tab starts with (the default model's README), "" without one.
const std::string& graph_corpus();

} // namespace gbui
