// The Graph tab: the shown run's attribution graph over transcoder features (graph_analysis.h, docs/graphs.md).
// Rows are layers (tokens below, the logits above), columns the prompt's positions; a kept feature is a circle in
// its (layer, position) cell sized by its influence, an error node a grey square; a kept edge a line, orange where
// it pushes its target up, blue where down, as opaque as it is strong. The two sliders prune live (the graph is
// built once per run and set; a threshold re-prunes it). Hover a node for what it is.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "file_dialog.h"
#include "graph_analysis.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

namespace {

struct node_spot {
    ImVec2 at;
    float r = 0;
    int node = -1;
};

// Where each kept node is drawn in the canvas [o, o + size]: rows from the top, the logits, layers L-1 .. 0, the
// tokens; a cell's features side by side.
std::vector<node_spot> place_nodes(const graph_output& go, ImVec2 o, ImVec2 size) {
    const gb::attribution_graph& g = *go.g;
    const gb::prune_result& p = go.pruned;
    const int T = g.n_tokens(), L = g.n_layer, N = g.n_nodes();
    const float cw = size.x / std::max(1, T), rh = size.y / (L + 2);
    double top = 0;
    for (int i = 0; i < g.n_features(); i++) top = std::max(top, p.node_influence[i]);
    std::map<std::pair<int, int>, std::vector<int>> cell; // (layer, pos) -> its kept features and error
    for (int i = 0; i < g.n_features(); i++)
        if (p.node_mask[i]) cell[{g.features[i].layer, g.features[i].pos}].push_back(i);
    for (int l = 0; l < L; l++)
        for (int t = g.first_pos; t < T; t++)
            if (p.node_mask[g.error_index(l, t)]) cell[{l, t}].push_back(g.error_index(l, t));
    std::vector<node_spot> spots;
    for (const auto& [lp, nodes] : cell) {
        const float y = o.y + (L - lp.first + 0.5f) * rh;
        for (size_t k = 0; k < nodes.size(); k++) {
            const float x = o.x + (lp.second + (k + 0.5f) / nodes.size()) * cw;
            const int n = nodes[k];
            const float r = n < g.n_features() && top > 0 ? std::max(px(2.5f), (float)std::sqrt(p.node_influence[n] / top) * std::min(cw, rh) * 0.3f)
                                                           : px(3);
            spots.push_back({ImVec2(x, y), r, n});
        }
    }
    for (int t = 0; t < T; t++) spots.push_back({ImVec2(o.x + (t + 0.5f) * cw, o.y + (L + 1.5f) * rh), px(4), g.token_index(t)});
    const float lw = size.x / std::max(4, g.n_logits()); // the logits on the top row, the most probable leftmost
    for (int i = 0; i < g.n_logits(); i++)                   // of the right end's, each with room for its word
        spots.push_back({ImVec2(o.x + size.x - (g.n_logits() - i) * lw + px(6), o.y + 0.5f * rh), px(5), g.logit_index(i)});
    (void)N;
    return spots;
}

void draw_graph(app_state& s, ui_context& ui, const graph_output& go) {
    const gb::attribution_graph& g = *go.g;
    const gb::prune_result& p = go.pruned;
    const int N = g.n_nodes(), T = g.n_tokens(), L = g.n_layer;
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = px(34), token_h = ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 size(std::max(px(100), avail.x - label_w), std::max(px(80), avail.y - token_h));
    const ImVec2 c0(o.x + label_w, o.y);
    ImGui::InvisibleButton("##graph canvas", ImVec2(label_w + size.x, size.y + token_h));
    remember_item(ui, "graph canvas");
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float rh = size.y / (L + 2), cw = size.x / std::max(1, T);
    for (int l = 0; l < L; l++) { // row labels and faint row lines
        const float y = c0.y + (L - l + 0.5f) * rh;
        dl->AddText(ImVec2(o.x, y - ImGui::GetTextLineHeight() / 2), ImGui::GetColorU32(ImGuiCol_TextDisabled), ("L" + std::to_string(l)).c_str());
        dl->AddLine(ImVec2(c0.x, y), ImVec2(c0.x + size.x, y), IM_COL32(255, 255, 255, 18));
    }
    dl->AddText(ImVec2(o.x, c0.y + 0.5f * rh - ImGui::GetTextLineHeight() / 2), ImGui::GetColorU32(ImGuiCol_TextDisabled), "out");
    const std::vector<node_spot> spots = place_nodes(go, c0, size);
    std::vector<int> spot_of(N, -1);
    for (size_t i = 0; i < spots.size(); i++) spot_of[spots[i].node] = (int)i;
    // edges, strongest drawn last (the output keeps them in that order)
    const int hovered = inputs_of<graph_inputs>(s, TAB_GRAPH).hovered;
    for (const auto& tf : go.edges) {
        if (spot_of[tf.first] < 0 || spot_of[tf.second] < 0) continue;
        const float w = g.edge(tf.first, tf.second);
        const float a = go.max_edge > 0 ? std::sqrt(std::fabs(w) / go.max_edge) : 0;
        const bool lit = hovered < 0 || tf.first == hovered || tf.second == hovered;
        const int alpha = (int)(lit ? 12 + 220 * a * a : 6 + 24 * a * a); // the strong paths stand out of the many
        const ImU32 col = w > 0 ? IM_COL32(255, 150, 40, alpha) : IM_COL32(80, 150, 255, alpha);
        dl->AddLine(spots[spot_of[tf.second]].at, spots[spot_of[tf.first]].at, col, std::max(1.0f, px(2.5f) * a));
    }
    // nodes
    int hover = -1;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (const node_spot& sp : spots) {
        const bool feature = sp.node < g.n_features(), error = !feature && sp.node < g.token_index(0);
        const ImU32 col = feature ? IM_COL32(245, 225, 120, 255) : error ? IM_COL32(150, 150, 150, 255) : IM_COL32(120, 220, 140, 255);
        if (error) dl->AddRectFilled(ImVec2(sp.at.x - sp.r, sp.at.y - sp.r), ImVec2(sp.at.x + sp.r, sp.at.y + sp.r), col);
        else dl->AddCircleFilled(sp.at, sp.r, col);
        const float dx = mouse.x - sp.at.x, dy = mouse.y - sp.at.y;
        if (ImGui::IsItemHovered() && dx * dx + dy * dy <= (sp.r + px(3)) * (sp.r + px(3))) hover = sp.node;
    }
    // tokens under their columns, logits' text above theirs
    const std::vector<std::string>& pieces = go.from->cap().pieces;
    for (int t = 0; t < T && t < (int)pieces.size(); t++) {
        const std::string txt = pieces[t];
        const float w = ImGui::CalcTextSize(txt.c_str()).x;
        if (w < cw * 1.6f || T < 12)
            dl->AddText(ImVec2(c0.x + (t + 0.5f) * cw - w / 2, c0.y + size.y + 2), ImGui::GetColorU32(ImGuiCol_Text), txt.c_str());
    }
    for (int i = 0; i < g.n_logits(); i++) { // each logit's word right of its node, with its probability
        const node_spot& sp = spots[spot_of[g.logit_index(i)]];
        char prob[16];
        std::snprintf(prob, sizeof prob, " %.2f", g.logit_probs[i]);
        const std::string lab = go.node_label[g.logit_index(i)].substr(6) + prob; // without "logit "
        dl->AddText(ImVec2(sp.at.x + sp.r + px(3), sp.at.y - ImGui::GetTextLineHeight() / 2), ImGui::GetColorU32(ImGuiCol_Text), lab.c_str());
    }
    inputs_of<graph_inputs>(s, TAB_GRAPH).hovered = hover;
    if (hover >= 0) {
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(go.node_label[hover].c_str());
        if (hover < g.n_features()) ImGui::Text("activation %.3f", g.features[hover].act);
        ImGui::Text("influence %.4f (cumulative %.2f)", p.node_influence[hover], p.cumulative_scores[hover]);
        ImGui::EndTooltip();
    }
}

} // namespace

void panel_graph(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    tab_hint("Which transcoder features, through which paths, make the prediction (the model without its ablations). "
             "Circles: features (size: influence); grey squares: what the transcoders miss; lines: direct effects, "
             "orange up, blue down.");
    path_box(ui, "graph transcoders", gin.transcoders, BROWSE_TRANSCODERS, "the default model's own set (or Browse...)",
             std::max(px(220), ImGui::GetContentRegionAvail().x * 0.45f));
    slider_float_beside(ui, "graph nodes", &gin.node_threshold, 0.1f, 1.0f, "nodes " + std::to_string((int)std::lround(gin.node_threshold * 100)) + "%", px(110));
    ImGui::SameLine();
    slider_float_beside(ui, "graph edges", &gin.edge_threshold, 0.1f, 1.0f, "edges " + std::to_string((int)std::lround(gin.edge_threshold * 100)) + "%", px(110));
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    const analysis_status& st = s.analysis[ANALYSIS_GRAPH];
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_GRAPH]) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        ImGui::PopTextWrapPos();
    } else if (st.busy || (go && go->key != s.analysis_want[ANALYSIS_GRAPH])) {
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "building the graph... %.0f%%", st.progress * 100);
    }
    if (!go || !go->g) return;
    const int kept = (int)std::count(go->pruned.node_mask.begin(), go->pruned.node_mask.end(), 1);
    ImGui::TextDisabled("replacement %.2f, completeness %.2f; %d of %d nodes, %zu edges kept; %.0f ms", go->pruned.replacement_score,
                        go->pruned.completeness_score, kept, go->g->n_nodes(), go->edges.size(), go->ms);
    draw_graph(s, ui, *go);
}

} // namespace gbui
