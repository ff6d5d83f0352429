// The Graph tab: the shown run's attribution graph over transcoder features (graph_analysis.h, docs/graphs.md).
// Above the picture (graph_canvas.cpp): the transcoder set and the two prune sliders (the graph is built once per
// run and set; a threshold re-prunes it); then the scores.
#include <algorithm>
#include <cmath>
#include <cstdio>


#include "feature_analysis.h"
#include "file_dialog.h"
#include "graph_panel.h"
#include "text_scale.h"

namespace gbui {

const std::string& graph_corpus() {
    static const std::string corpus = shipped_text();
    return corpus;
}

const graph_view* shown_graph_view(const app_state& s) {
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    return go && go->g ? &go->view : nullptr;
}

namespace {

} // namespace

void panel_graph(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    tab_hint("Which transcoder features, through which paths, make the prediction (the model without its ablations). "
             "Circles: features (size: influence); grey squares: what the transcoders miss; lines: direct effects, "
             "orange up, blue down. Hover for more.");
    path_box(ui, "graph transcoders", gin.transcoders, BROWSE_TRANSCODERS, "the default model's own set (or Browse...)",
             std::max(px(200), ImGui::GetContentRegionAvail().x * 0.3f));
    if (room_right_of_item() > px(470)) ImGui::SameLine(); // the sliders beside the box where they fit
    slider_float_beside(ui, "graph nodes", &gin.node_threshold, 0.1f, 1.0f, "nodes " + std::to_string((int)std::lround(gin.node_threshold * 100)) + "%", px(110));
    ImGui::SameLine();
    slider_float_beside(ui, "graph edges", &gin.edge_threshold, 0.1f, 1.0f, "edges " + std::to_string((int)std::lround(gin.edge_threshold * 100)) + "%", px(110));
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    const analysis_status& st = s.analysis[ANALYSIS_GRAPH];
    ImGui::PushTextWrapPos(0);
    if (!gin.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", gin.error.c_str());
    else if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_GRAPH]) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
    else if ((st.busy || (go && go->key != s.analysis_want[ANALYSIS_GRAPH])))
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "building the graph... %.0f%%", st.progress * 100);
    ImGui::PopTextWrapPos();
    if (!go || !go->g) return;
    const int kept = (int)std::count(go->pruned.node_mask.begin(), go->pruned.node_mask.end(), 1);
    ImGui::TextDisabled("replacement %.2f, completeness %.2f; %d of %d nodes, %zu edges kept; %.0f ms", go->pruned.replacement_score,
                        go->pruned.completeness_score, kept, go->g->n_nodes(), go->edges.size(), go->ms);
    draw_graph_canvas(s, ui, go->view, go);
}

} // namespace gbui
