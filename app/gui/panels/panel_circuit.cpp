// Circuit: the graph of components (embeddings, each head, each MLP, the logits) between the Patching tab's
// prompts, its edges scored by edge attribution patching (core/analysis/circuit.h). Laid out by layer, the
// embeddings at the bottom and the logits at the top, each layer a row of heads with its MLP on the row above;
// the top N edges drawn, their width by |score| and colour by sign; the slider sets N, beside it the faithfulness
// of that circuit. Hover a node or an edge for its numbers, click a head to open it in the Head view, and "keep
// only this circuit" patches every other node to its corrupted output in the app's runs.
//
// Sections: layout | drawing | panel
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "circuit_analysis.h"
#include "patching_inputs.h"
#include "ui.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// Layout: rows from the bottom (0 embeddings, 2l+1 layer l's heads, 2l+2 its MLP, 2L+1 the logits)
// ---------------------------------------------------------------------------------------------
struct graph_geometry {
    ImVec2 a, b;             // the drawing area
    float row_h = 0, label_w = 0, node_w = 0, node_h = 0;
    int rows = 0, H = 0;
    ImVec2 centre(const gb::circuit_node& n) const {
        int row = 0;
        float x = 0.5f;
        if (n.kind == gb::circuit_node::HEAD) row = 2 * n.layer + 1, x = (n.head + 0.5f) / H;
        else if (n.kind == gb::circuit_node::MLP) row = 2 * n.layer + 2;
        else if (n.kind == gb::circuit_node::LOGITS) row = rows - 1;
        const float w = b.x - a.x - label_w;
        return ImVec2(a.x + label_w + x * w, b.y - (row + 0.5f) * row_h);
    }
};

static graph_geometry layout_graph(const gb::circuit_result& c, ImVec2 a, ImVec2 size) {
    graph_geometry g;
    g.a = a, g.b = ImVec2(a.x + size.x, a.y + size.y);
    g.rows = 2 * c.n_layer + 2;
    g.H = c.n_head;
    g.row_h = size.y / g.rows;
    g.label_w = ImGui::CalcTextSize("L00 MLP").x + 10;
    g.node_w = std::min(ImGui::CalcTextSize("00.00").x + 8, (size.x - g.label_w) / c.n_head - 3);
    g.node_h = std::min(ImGui::GetTextLineHeight() + 4, g.row_h * 0.7f);
    return g;
}

// The cubic from the top of u to the bottom of v, as points (drawn as a polyline, hovered by distance)
static void edge_curve(ImVec2* pts, int n, ImVec2 p0, ImVec2 p3) {
    const float dy = (p0.y - p3.y) * 0.45f;
    const ImVec2 p1(p0.x, p0.y - dy), p2(p3.x, p3.y + dy);
    for (int i = 0; i < n; i++) {
        const float t = (float)i / (n - 1), u = 1 - t;
        const float w0 = u * u * u, w1 = 3 * u * u * t, w2 = 3 * u * t * t, w3 = t * t * t;
        pts[i] = ImVec2(w0 * p0.x + w1 * p1.x + w2 * p2.x + w3 * p3.x, w0 * p0.y + w1 * p1.y + w2 * p2.y + w3 * p3.y);
    }
}

static float dist_to_polyline(ImVec2 m, const ImVec2* pts, int n) {
    float best = 1e9f;
    for (int i = 0; i + 1 < n; i++) {
        const ImVec2 d(pts[i + 1].x - pts[i].x, pts[i + 1].y - pts[i].y);
        const float len2 = d.x * d.x + d.y * d.y;
        float t = len2 > 0 ? ((m.x - pts[i].x) * d.x + (m.y - pts[i].y) * d.y) / len2 : 0;
        t = std::max(0.0f, std::min(1.0f, t));
        const float dx = pts[i].x + t * d.x - m.x, dy = pts[i].y + t * d.y - m.y;
        best = std::min(best, std::sqrt(dx * dx + dy * dy));
    }
    return best;
}

static std::string node_label(const gb::circuit_node& n) {
    if (n.kind == gb::circuit_node::HEAD) return std::to_string(n.layer) + "." + std::to_string(n.head);
    if (n.kind == gb::circuit_node::MLP) return "MLP " + std::to_string(n.layer);
    return n.id;
}

// ---------------------------------------------------------------------------------------------
// Drawing: edges under nodes; returns the hovered node or edge (-1 each when none)
// ---------------------------------------------------------------------------------------------
static void draw_graph(ui_context& ui, const gb::circuit_result& c, int n_edges, const std::vector<unsigned char>& in,
                       const graph_geometry& g, int* hover_node, int* hover_edge) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImU32 lc = IM_COL32(175, 175, 185, 255);
    for (int row = 0; row < g.rows; row++) { // row labels and faint bands
        const float y = g.b.y - (row + 0.5f) * g.row_h;
        std::string label = row == 0 ? "embed" : row == g.rows - 1 ? "logits"
                          : "L" + std::to_string((row - 1) / 2) + (row % 2 ? " attn" : " MLP");
        dl->AddText(ImVec2(g.a.x, y - ImGui::GetTextLineHeight() / 2), lc, label.c_str());
        if (row % 2 == 1 && row < g.rows - 1)
            dl->AddRectFilled(ImVec2(g.a.x + g.label_w - 4, y - g.row_h / 2), ImVec2(g.b.x, y + g.row_h / 2),
                              IM_COL32(255, 255, 255, 8));
    }
    double top = 0;
    for (int i = 0; i < n_edges; i++) top = std::max(top, std::fabs(c.edges[i].score));
    const ImVec2 m = ImGui::GetMousePos();
    const bool hovered_area = ImGui::IsWindowHovered() && m.x >= g.a.x && m.y >= g.a.y && m.x < g.b.x && m.y < g.b.y;
    constexpr int K = 24;
    ImVec2 pts[K];
    float best = 5.0f;
    for (int i = n_edges - 1; i >= 0; i--) { // the strongest drawn last, on top
        const gb::circuit_edge& e = c.edges[i];
        const ImVec2 u = g.centre(c.nodes[e.from]), v = g.centre(c.nodes[e.to]);
        edge_curve(pts, K, ImVec2(u.x, u.y - g.node_h / 2), ImVec2(v.x, v.y + g.node_h / 2));
        const float f = top > 0 ? (float)(std::fabs(e.score) / top) : 0;
        const float sign = e.score >= 0 ? 1.0f : -1.0f;
        ImU32 col = diverging_u32(sign * (0.35f + 0.65f * f));
        col = (col & 0x00FFFFFF) | ((ImU32)(90 + 165 * f) << 24);
        dl->AddPolyline(pts, K, col, 0, 1.0f + 7.0f * f);
        if (hovered_area) {
            const float dist = dist_to_polyline(m, pts, K);
            if (dist < best) best = dist, *hover_edge = i;
        }
    }
    for (size_t v = 0; v < c.nodes.size(); v++) {
        const gb::circuit_node& n = c.nodes[v];
        const ImVec2 p = g.centre(n);
        const bool wide = n.kind != gb::circuit_node::HEAD;
        const float w = wide ? std::max(g.node_w, ImGui::CalcTextSize(node_label(n).c_str()).x + 10) : g.node_w;
        const ImVec2 p0(p.x - w / 2, p.y - g.node_h / 2), p1(p.x + w / 2, p.y + g.node_h / 2);
        if (!in[v]) { // outside the circuit: a faint dot (patched to its corrupted value by "keep only")
            dl->AddCircleFilled(p, 2.5f, IM_COL32(120, 120, 130, 140));
        } else {
            dl->AddRectFilled(p0, p1, IM_COL32(40, 44, 56, 255), 4);
            dl->AddRect(p0, p1, IM_COL32(210, 210, 220, 255), 4);
            const std::string label = node_label(n);
            const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
            if (ts.x <= w) dl->AddText(ImVec2(p.x - ts.x / 2, p.y - ts.y / 2), IM_COL32(235, 235, 240, 255), label.c_str());
        }
        if (hovered_area && m.x >= p0.x && m.x < p1.x && m.y >= p0.y && m.y < p1.y) *hover_node = (int)v;
        ui.widgets["circuit node " + n.id] = ImVec4(p0.x, p0.y, p1.x, p1.y);
    }
    if (*hover_node >= 0) *hover_edge = -1;
    if (*hover_edge >= 0) { // outline the hovered edge
        const gb::circuit_edge& e = c.edges[*hover_edge];
        const ImVec2 u = g.centre(c.nodes[e.from]), v = g.centre(c.nodes[e.to]);
        edge_curve(pts, K, ImVec2(u.x, u.y - g.node_h / 2), ImVec2(v.x, v.y + g.node_h / 2));
        dl->AddPolyline(pts, K, IM_COL32(255, 255, 255, 200), 0, 1.5f);
    }
}

static void tooltip(const circuit_output& co, int n_edges, const std::vector<unsigned char>& in, int node, int edge) {
    const gb::circuit_result& c = *co.res;
    const double span = c.clean - c.corrupt;
    ImGui::BeginTooltip();
    if (node >= 0) {
        const gb::circuit_node& n = c.nodes[node];
        ImGui::Text("%s (%s)%s", n.id.c_str(), gb::circuit_kind_name(n.kind), in[node] ? "" : "  outside the circuit");
        ImGui::Separator();
        if (n.kind == gb::circuit_node::LOGITS)
            ImGui::Text("sum of incoming edges %+.4f (clean \u2212 corrupted %+.4f)", n.score, span);
        else
            ImGui::Text("score %+.4f  (%.1f%% of clean \u2212 corrupted): the sum of its outgoing edges", n.score,
                        span != 0 ? 100 * n.score / span : 0.0);
        int shown = 0;
        for (int i = 0; i < n_edges && shown < 6; i++)
            if (c.edges[i].from == node || c.edges[i].to == node) {
                const gb::circuit_edge& e = c.edges[i];
                ImGui::TextDisabled("%s \u2192 %s  %+.4f", c.nodes[e.from].id.c_str(), c.nodes[e.to].id.c_str(), e.score);
                shown++;
            }
        if (n.kind == gb::circuit_node::HEAD) ImGui::TextDisabled("click: open it in the Head view");
    } else {
        const gb::circuit_edge& e = c.edges[edge];
        ImGui::Text("%s \u2192 %s   edge %d of %zu", c.nodes[e.from].id.c_str(), c.nodes[e.to].id.c_str(), edge + 1,
                    c.edges.size());
        ImGui::Separator();
        ImGui::Text("score %+.4f  (%.1f%% of clean \u2212 corrupted)", e.score, span != 0 ? 100 * e.score / span : 0.0);
        ImGui::TextDisabled("(clean \u2212 corrupted output of %s) \u00b7 d metric / d (input of %s), corrupted run",
                            c.nodes[e.from].id.c_str(), c.nodes[e.to].id.c_str());
    }
    ImGui::EndTooltip();
}

// ---------------------------------------------------------------------------------------------
// Panel
// ---------------------------------------------------------------------------------------------
// The slider, the faithfulness and "keep only this circuit"
static void controls(app_state& s, ui_context& ui, const circuit_output& co, int n, const std::vector<unsigned char>& in) {
    auto& cin = inputs_of<circuit_inputs>(s, tab_id("circuit"));
    const gb::circuit_result& c = *co.res;
    const gb::tokenizer& tok = co.model->tok;
    ImGui::Text("metric logit(%s) \u2212 logit(%s):  clean %.3f   corrupted %.3f", quoted(tok, c.target).c_str(),
                quoted(tok, c.contrast).c_str(), c.clean, c.corrupt);
    ImGui::SameLine();
    ImGui::TextDisabled("  (%zu edges, %.0f ms)", c.edges.size(), co.ms);
    const int nodes = (int)std::count(in.begin(), in.end(), 1);
    slider_int_beside(ui, "circuit edges", &cin.edges, 1, std::max(1, co.max_edges),
                      std::to_string(n) + " edges, " + std::to_string(nodes) + " nodes", 220);
    ImGui::SameLine(0, 20);
    const float f = co.faithfulness[n];
    char fs[64];
    snprintf(fs, sizeof fs, std::isfinite(f) ? "faithfulness %.3f" : "faithfulness n/a", f);
    ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "%s", fs);
    note_text(ui, "circuit faithfulness", fs);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the metric with every node outside the circuit patched to its corrupted output,\n"
                          "as a fraction of clean \u2212 corrupted (1 = the clean answer, 0 = the corrupted one)");
    const float keep_w = ImGui::CalcTextSize("keep only this circuit").x + 24;
    if (room_right_of_item() > keep_w) ImGui::SameLine(0, 20);
    const bool same = co.clean_ids == s.result->cap().tokens && co.model == s.model;
    const run_patch* kept = patch_in_force(s);
    if (kept) {
        ImGui::TextDisabled("kept: %s", kept->what.c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("restore the model")) s.patch.reset();
        remember_item(ui, "circuit restore");
    } else if (same) {
        if (ImGui::SmallButton("keep only this circuit")) {
            auto p = std::make_shared<run_patch>();
            p->owner = co.res; // the interventions point into it
            p->interventions = gb::circuit_interventions(*co.res, in);
            p->model = co.model;
            p->prompt = s.prompt;
            p->bos = s.bos;
            p->by = "circuit";
            p->what = "circuit of " + std::to_string(n) + " edges (" + std::to_string(nodes) + " nodes)";
            p->effect = "every other head, MLP (and the embeddings, when out) patched to the corrupted prompt's output";
            s.patch = p;
        }
        remember_item(ui, "circuit keep");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("every node outside the circuit takes its output from the corrupted prompt in the app's runs\n"
                              "(the grid, the head view, the prediction), recomputed live; listed with the ablations");
    }
}

void panel_circuit(app_state& s, ui_context& ui) {
    auto& cin = inputs_of<circuit_inputs>(s, tab_id("circuit"));
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    tab_hint("Which components carry the answer, through which paths? Edges scored by edge attribution patching between "
             "the Patching tab's prompts.");
    if (!s.result) return;
    const analysis_kind kind = analysis_id("circuit");
    const analysis_status& st = s.analysis[kind];
    const std::string& want = s.analysis_want[kind];
    if (pin.corrupt.empty()) {
        ImGui::PushTextWrapPos(0); // (one line was cut at the panel's edge at 1280 x 720)
        ImGui::TextDisabled("type a corrupted prompt in the Patching tab (the same number of tokens): the circuit is "
                            "found between the two");
        ImGui::PopTextWrapPos();
        return;
    }
    if (!st.error.empty() && st.error_key == want) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    const circuit_output* co = output_of<circuit_output>(s, kind).get();
    if (!co || co->key != want) {
        analysis_progress(ui, st, "finding the circuit... %.0f%%", "circuit progress");
    }
    if (!co || !co->res) return;
    const gb::circuit_result& c = *co->res;
    const int n = std::max(0, std::min(cin.edges, co->max_edges));
    const std::vector<unsigned char> in = gb::circuit_members(c, n);
    controls(s, ui, *co, n, in);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float legend_h = ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 a = ImGui::GetCursorScreenPos();
    const graph_geometry g = layout_graph(c, a, ImVec2(avail.x, std::max(60.0f, avail.y - legend_h)));
    int hn = -1, he = -1;
    draw_graph(ui, c, n, in, g, &hn, &he);
    ui.widgets["circuit graph"] = ImVec4(g.a.x, g.a.y, g.b.x, g.b.y);
    ImGui::Dummy(ImVec2(avail.x, g.b.y - g.a.y));
    ImGui::TextDisabled("edge width: |score|;  red raises logit(target) \u2212 logit(contrast), blue lowers it;  "
                        "dots: nodes outside the circuit");
    if (hn >= 0 || he >= 0) tooltip(*co, n, in, hn, he);
    if (hn >= 0 && ImGui::IsMouseClicked(0) && c.nodes[hn].kind == gb::circuit_node::HEAD) {
        s.sel_layer = c.nodes[hn].layer, s.sel_head = c.nodes[hn].head;
        s.selection_pinned = true;
        s.tab = TAB_HEAD;
    }
}

} // namespace gbui
