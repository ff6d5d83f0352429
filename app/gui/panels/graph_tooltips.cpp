// The Graph tab's hovers and right-click menu (graph_canvas.cpp draws the picture): a node's tooltip with a
// feature's top contexts and logit effects, an edge's with its head loadings as a small heatmap (both from the
// tab's job thread, graph_tasks.h; "computing..." until they come), and a feature's menu: ablate, clamp at twice
// its activation or at a typed value (at its position or every one), clear the edits.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph_panel.h"
#include "graph_tasks.h"
#include "text_scale.h"

namespace gbui {

void graph_node_tooltip(const app_state& s, const graph_view& v, int node, const graph_output* go) {
    (void)s;
    const graph_node& n = v.nodes[node];
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(n.label.c_str());
    if (n.kind == GNODE_FEATURE) {
        if (n.act_after != n.activation) ImGui::Text("activation %.3f, %.3f with the edits", n.activation, n.act_after);
        else ImGui::Text("activation %.3f", n.activation);
    }
    if (n.kind == GNODE_LOGIT) ImGui::Text("probability %.3f", n.prob);
    if (go && n.index >= 0 && n.kind != GNODE_LOGIT && n.kind != GNODE_TOKEN)
        ImGui::Text("influence %.4f (cumulative %.2f)", go->pruned.node_influence[n.index], go->pruned.cumulative_scores[n.index]);
    if (go && n.kind == GNODE_FEATURE) {
        const graph_job j = dashboard_job(*go, n.layer, (int)n.feature, graph_corpus());
        ImGui::Separator();
        if (!j.done) {
            ImGui::TextDisabled("top contexts and logit effects: computing...");
        } else if (!j.error.empty()) {
            ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", j.error.c_str());
        } else {
            const auto& d = *std::static_pointer_cast<const graph_dashboard>(j.result);
            const gb::tokenizer& tok = go->from->model->tok;
            if (d.corpus.empty()) ImGui::TextDisabled("top contexts: no corpus (the default model's README is the default)");
            else ImGui::TextDisabled("top contexts in %s:", d.corpus.substr(d.corpus.find_last_of('/') + 1).c_str());
            ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + px(520));
            for (size_t i = 0; i < d.contexts.size() && i < 5; i++)
                ImGui::Text("%.2f  %s", d.contexts[i].first, d.contexts[i].second.c_str());
            if (!d.corpus.empty() && d.contexts.empty()) ImGui::TextDisabled("(it never fires there)");
            ImGui::PopTextWrapPos();
            std::string up, down;
            for (const gb::token_effect& e : d.promotes) up += quoted(tok, e.id) + " ";
            for (const gb::token_effect& e : d.suppresses) down += quoted(tok, e.id) + " ";
            ImGui::Text("promotes %s", up.c_str());
            ImGui::Text("suppresses %s", down.c_str());
        }
    }
    ImGui::EndTooltip();
}

// The head loadings [L][H + 1] as a heatmap: a row per attention layer below the read, each head's part and the
// part bypassing attention, coloured by sign and size, with the row's sum (the edge, at every row)
static void loadings_table(const std::vector<double>& h, int L) {
    const int H = L > 0 ? (int)h.size() / L - 1 : 0;
    double mx = 0;
    for (double x : h) mx = std::max(mx, std::fabs(x));
    const float cw = px(46), ch = ImGui::GetTextLineHeightWithSpacing();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const float lw = px(28);
    char b[32];
    auto col_x = [&](int c) { return o.x + lw + c * cw + (c > H ? px(14) : 0); }; // the bypass column is wider
    for (int c = 0; c <= H + 1; c++) {
        const char* name = c < H ? nullptr : c == H ? "bypass" : "sum";
        if (c < H) std::snprintf(b, sizeof b, "h%d", c);
        dl->AddText(ImVec2(col_x(c) + px(2), o.y), ImGui::GetColorU32(ImGuiCol_TextDisabled), name ? name : b);
    }
    int rows = 0;
    for (int l = 0; l < L; l++) {
        double sum = 0;
        bool any = false;
        for (int c = 0; c <= H; c++) sum += h[(size_t)l * (H + 1) + c], any = any || h[(size_t)l * (H + 1) + c] != 0;
        if (!any) continue; // the layers at and above the read carry nothing
        const float y = o.y + (rows + 1) * ch;
        std::snprintf(b, sizeof b, "L%d", l);
        dl->AddText(ImVec2(o.x, y), ImGui::GetColorU32(ImGuiCol_TextDisabled), b);
        for (int c = 0; c <= H + 1; c++) {
            const double x = c <= H ? h[(size_t)l * (H + 1) + c] : sum;
            const ImVec2 a(col_x(c), y), z(a.x + cw - px(2) + (c == H ? px(14) : 0), y + ch - px(2));
            const ImU32 col = c <= H ? diverging_u32(mx > 0 ? (float)(x / mx) : 0) : IM_COL32(60, 60, 60, 255);
            dl->AddRectFilled(a, z, col);
            std::snprintf(b, sizeof b, "%+.2f", x);
            dl->AddText(ImVec2(a.x + px(2), a.y), c <= H ? text_on(col) : IM_COL32(255, 255, 255, 255), b);
        }
        rows++;
    }
    ImGui::Dummy(ImVec2(lw + (H + 2) * cw + px(14), (rows + 1) * ch));
}

void graph_link_tooltip(const graph_view& v, int link, const std::shared_ptr<const graph_output>& go) {
    const graph_link& l = v.links[link];
    const graph_node &src = v.nodes[l.source], &dst = v.nodes[l.target];
    ImGui::BeginTooltip();
    ImGui::Text("%s -> %s", src.label.c_str(), dst.label.c_str());
    const bool edited = go && src.index >= 0 && dst.index >= 0 && go->g->edge(dst.index, src.index) != l.weight;
    if (edited) ImGui::Text("direct effect %+.4f, %+.4f with the edits", go->g->edge(dst.index, src.index), l.weight);
    else ImGui::Text("direct effect %+.4f", l.weight);
    if (go && src.index >= 0 && dst.index >= 0 && dst.kind != GNODE_ERROR && dst.kind != GNODE_TOKEN) {
        const graph_job j = loadings_job(go, dst.index, src.index);
        if (!j.done) ImGui::TextDisabled("head loadings: computing...");
        else if (!j.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", j.error.c_str());
        else {
            ImGui::TextDisabled("head loadings%s: at each attention layer, its heads and what bypasses them sum to the edge",
                                edited ? " (of the unedited edge)" : "");
            loadings_table(*std::static_pointer_cast<const std::vector<double>>(j.result), v.n_layer);
        }
    }
    ImGui::EndTooltip();
}

void graph_node_menu(app_state& s, ui_context& ui, const graph_view& v) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    if (!ImGui::BeginPopup("graph node menu")) return;
    if (gin.menu_node < 0 || gin.menu_node >= (int)v.nodes.size() || v.nodes[gin.menu_node].kind != GNODE_FEATURE) {
        ImGui::CloseCurrentPopup(); // the graph changed under the menu
        ImGui::EndPopup();
        return;
    }
    const graph_node& n = v.nodes[gin.menu_node];
    ImGui::TextDisabled("%s, activation %.3f", n.label.c_str(), n.activation);
    if (ImGui::MenuItem("Ablate (hold at 0)")) set_graph_edit(gin, n, 0);
    remember_item(ui, "graph ablate");
    if (ImGui::MenuItem("Ablate at every position")) set_graph_edit(gin, n, 0, true);
    remember_item(ui, "graph ablate everywhere");
    char twice[64];
    std::snprintf(twice, sizeof twice, "Clamp at x2 (%.3f)", 2 * n.activation);
    if (ImGui::MenuItem(twice)) set_graph_edit(gin, n, 2 * n.activation);
    remember_item(ui, "graph clamp x2");
    ImGui::SetNextItemWidth(px(90));
    ImGui::InputFloat("##graph clamp value", &gin.clamp_value, 0, 0, "%.3f");
    remember_item(ui, "graph clamp value");
    ImGui::SameLine();
    if (ImGui::Button("Clamp")) {
        set_graph_edit(gin, n, gin.clamp_value);
        ImGui::CloseCurrentPopup();
    }
    remember_item(ui, "graph clamp");
    ImGui::SameLine();
    if (ImGui::Button("at every position")) { // a clamp, as the CLI's --set L:*:I=V
        set_graph_edit(gin, n, gin.clamp_value, true);
        ImGui::CloseCurrentPopup();
    }
    remember_item(ui, "graph clamp everywhere");
    if (!gin.edits.empty() && ImGui::MenuItem("Clear the edits")) gin.edits.clear();
    ImGui::EndPopup();
}

} // namespace gbui
