// The Graph tab: the shown run's attribution graph over transcoder features (graph_analysis.h, docs/graphs.md). Above
// the picture (graph_canvas.cpp): the transcoder set and the two prune sliders (the graph is built once per run and
// set; a threshold re-prunes it), the pins with the supernode name box and Group, the edits in force; then the scores.
#include <algorithm>
#include <cmath>
#include <cstdio>


#include "feature_analysis.h"
#include "file_dialog.h"
#include "graph_panel.h" // (imgui.h, before imgui_stdlib.h)
#include <imgui_stdlib.h>
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

void toggle_graph_pin(graph_inputs& gin, const std::string& id) {
    auto it = std::find(gin.pinned.begin(), gin.pinned.end(), id);
    if (it == gin.pinned.end()) gin.pinned.push_back(id);
    else gin.pinned.erase(it);
    gin.error.clear();
}

bool group_graph_pins(graph_inputs& gin) {
    if (gin.group_name.empty()) {
        gin.error = "a supernode needs a name: type one in the box beside Group";
        return false;
    }
    if (gin.pinned.size() < 2) {
        gin.error = "a supernode groups pinned nodes: click at least two nodes to pin them first";
        return false;
    }
    gin.supernodes.push_back({gin.group_name, gin.pinned});
    gin.pinned.clear(), gin.group_name.clear(), gin.error.clear();
    return true;
}

void set_graph_edit(graph_inputs& gin, const graph_node& n, float value) {
    if (n.kind != GNODE_FEATURE) {
        gin.error = "right-click a feature to ablate or clamp it; " + n.label + " is no feature";
        return;
    }
    auto same = [&](const gb::graph_edit& e) { return e.layer == n.layer && e.pos == n.pos && e.index == (int)n.feature; };
    gin.edits.erase(std::remove_if(gin.edits.begin(), gin.edits.end(), same), gin.edits.end());
    gb::graph_edit e;
    e.layer = n.layer, e.pos = n.pos, e.index = (int)n.feature, e.value = value;
    gin.edits.push_back(e);
    gin.error.clear();
}

namespace {

// The pins and supernodes, once a node is pinned (before that the tab's hint says how)
void pins_row(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    if (gin.pinned.empty() && gin.supernodes.empty()) return;
    ImGui::AlignTextToFramePadding();
    if (gin.pinned.empty()) ImGui::TextDisabled("pin nodes to group them:");
    else ImGui::Text("%zu pinned", gin.pinned.size());
    ImGui::SameLine();
    ImGui::SetNextItemWidth(px(140));
    ImGui::InputTextWithHint("##graph group name", "supernode name", &gin.group_name);
    remember_item(ui, "graph group name");
    ImGui::SameLine();
    if (ImGui::Button("Group")) group_graph_pins(gin);
    remember_item(ui, "graph group");
    if (!gin.pinned.empty()) {
        ImGui::SameLine();
        if (ImGui::Button("Unpin all")) gin.pinned.clear();
        remember_item(ui, "graph unpin");
    }
    for (size_t i = 0; i < gin.supernodes.size(); i++) {
        ImGui::SameLine();
        ImGui::PushID((int)i);
        const std::string lab = gin.supernodes[i].name + " (" + std::to_string(gin.supernodes[i].members.size()) + ") x";
        if (ImGui::SmallButton(lab.c_str())) {
            gin.supernodes.erase(gin.supernodes.begin() + i);
            ImGui::PopID();
            break;
        }
        remember_item(ui, "graph ungroup " + gin.supernodes[i].name);
        ImGui::PopID();
    }
}

void edits_row(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const std::vector<int>& tokens = s.result->cap().tokens;
    if (!gin.edits.empty() && gin.edits_tokens != tokens) gin.edits.clear(); // made on another prompt
    gin.edits_tokens = tokens;
    if (gin.edits.empty()) return;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("edits:");
    for (size_t i = 0; i < gin.edits.size(); i++) {
        const gb::graph_edit& e = gin.edits[i];
        char b[80];
        std::snprintf(b, sizeof b, "L%d #%d @%d = %.3g x##edit%zu", e.layer, e.index, e.pos, e.value, i);
        ImGui::SameLine();
        if (ImGui::SmallButton(b)) {
            gin.edits.erase(gin.edits.begin() + i);
            break;
        }
    }
    ImGui::SameLine();
    if (ImGui::SmallButton("Clear the edits")) gin.edits.clear();
    remember_item(ui, "graph clear edits");
}

} // namespace

void panel_graph(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    tab_hint("Which transcoder features, through which paths, make the prediction (the model without its ablations). "
             "Circles: features (size: influence); grey squares: what the transcoders miss; lines: direct effects, "
             "orange up, blue down. Hover for more; click nodes to pin them (and group them into a supernode); "
             "right-click a feature to ablate or clamp it.");
    path_box(ui, "graph transcoders", gin.transcoders, BROWSE_TRANSCODERS, "the default model's own set (or Browse...)",
             std::max(px(200), ImGui::GetContentRegionAvail().x * 0.3f));
    if (room_right_of_item() > px(470)) ImGui::SameLine(); // the sliders beside the box where they fit
    slider_float_beside(ui, "graph nodes", &gin.node_threshold, 0.1f, 1.0f, "nodes " + std::to_string((int)std::lround(gin.node_threshold * 100)) + "%", px(110));
    ImGui::SameLine();
    slider_float_beside(ui, "graph edges", &gin.edge_threshold, 0.1f, 1.0f, "edges " + std::to_string((int)std::lround(gin.edge_threshold * 100)) + "%", px(110));
    pins_row(s, ui);
    if (s.result) edits_row(s, ui);
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    const analysis_status& st = s.analysis[ANALYSIS_GRAPH];
    ImGui::PushTextWrapPos(0);
    if (!gin.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", gin.error.c_str());
    else if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_GRAPH]) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
    else if ((st.busy || (go && go->key != s.analysis_want[ANALYSIS_GRAPH])))
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s... %.0f%%", go && go->g && go->from == s.result ? "updating the graph" : "building the graph", st.progress * 100);
    ImGui::PopTextWrapPos();
    if (!go || !go->g) return;
    const int kept = (int)std::count(go->pruned.node_mask.begin(), go->pruned.node_mask.end(), 1);
    ImGui::TextDisabled("replacement %.2f, completeness %.2f; %d of %d nodes, %zu edges kept; %.0f ms", go->pruned.replacement_score,
                        go->pruned.completeness_score, kept, go->g->n_nodes(), go->edges.size(), go->ms);
    draw_graph_canvas(s, ui, go->view, go);
}

} // namespace gbui
