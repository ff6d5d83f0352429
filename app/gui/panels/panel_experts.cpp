// Experts (MoE models only): which experts the router chose at every layer (rows) for every token (columns).
// Each cell is a bar of the token's chosen experts, largest mixing weight first, each part as wide as its weight
// and in its expert's colour (so the cell's main colour is the top-1 expert, and a dark rest shows weight the
// chosen experts do not hold when the model does not renormalise them). Hover: the experts and weights; right-click
// (or ctrl+click) an expert's part: ablate that expert at that layer; click: select the token. The cells come from
// the result's routing table (made on the worker); the grid scrolls both ways with its labels in view and only
// visible cells are drawn.
//
// Sections: colours | header line | grid | legend
#include <algorithm>
#include <cmath>

#include "run/predict.h"
#include "ui.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// Colours: a categorical palette (Tableau 20's strong colours first, then their light twins), then golden-angle hues
// ---------------------------------------------------------------------------------------------
ImU32 expert_colour(int e) {
    static const ImU32 palette[20] = {
        IM_COL32(31, 119, 180, 255),  IM_COL32(255, 127, 14, 255),  IM_COL32(44, 160, 44, 255),
        IM_COL32(214, 39, 40, 255),   IM_COL32(148, 103, 189, 255), IM_COL32(140, 86, 75, 255),
        IM_COL32(227, 119, 194, 255), IM_COL32(127, 127, 127, 255), IM_COL32(188, 189, 34, 255),
        IM_COL32(23, 190, 207, 255),  IM_COL32(174, 199, 232, 255), IM_COL32(255, 187, 120, 255),
        IM_COL32(152, 223, 138, 255), IM_COL32(255, 152, 150, 255), IM_COL32(197, 176, 213, 255),
        IM_COL32(196, 156, 148, 255), IM_COL32(247, 182, 210, 255), IM_COL32(199, 199, 199, 255),
        IM_COL32(219, 219, 141, 255), IM_COL32(158, 218, 229, 255)};
    if (e >= 0 && e < 20) return palette[e];
    float r, g, b;
    ImGui::ColorConvertHSVtoRGB(std::fmod(e * 0.618034f, 1.0f), 0.55f, 0.85f, r, g, b);
    return ImGui::GetColorU32(ImVec4(r, g, b, 1.0f));
}

// ---------------------------------------------------------------------------------------------
// Header line: the model's routing in one sentence, and the ablated experts
// ---------------------------------------------------------------------------------------------
static void header_line(const gb::model_config& c) {
    char b[256];
    std::snprintf(b, sizeof b, "%d experts per layer, %d chosen per token (weights %s), each %d wide", c.n_expert,
                  c.n_expert_used, c.norm_topk ? "renormalised to sum 1" : "as the softmax gave them", c.d_ff_expert);
    std::string line = b;
    if (c.d_ff_shared > 0) line += "; a shared expert (" + std::to_string(c.d_ff_shared) + " wide) runs for every token";
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted(line.c_str());
    ImGui::PopTextWrapPos();
}

// The experts ablated at layer l whose baseline weight at (l, t) was not 0: "chosen without the ablation".
static void ablated_in_cell(const gb::ablation& ab, const gb::routing_table& base, int l, int t, std::vector<std::pair<int, float>>& out) {
    out.clear();
    if (base.empty() || !base.kept[l]) return;
    const int* ids = base.cell_ids(l, t);
    const float* w = base.cell_weights(l, t);
    for (int i = 0; i < base.k && ids[i] >= 0; i++)
        if (gb::expert_ablated(ab, l, ids[i])) out.push_back({ids[i], w[i]});
}

// A layer's load: per expert, the tokens it ran for, the tokens it was the top-1 of, and its mean weight.
static void layer_load_tooltip(const gb::routing_table& rt, const gb::ablation& ab, int l) {
    std::vector<int> ran(rt.n_expert, 0), first(rt.n_expert, 0);
    std::vector<double> sum(rt.n_expert, 0.0);
    for (int t = 0; t < rt.n_tokens; t++) {
        const int* ids = rt.cell_ids(l, t);
        const float* w = rt.cell_weights(l, t);
        for (int i = 0; i < rt.k && ids[i] >= 0; i++) ran[ids[i]]++, sum[ids[i]] += w[i], first[ids[i]] += i == 0;
    }
    ImGui::BeginTooltip();
    ImGui::Text("L%d: the experts' load over %d tokens", l, rt.n_tokens);
    ImGui::Separator();
    ImGui::TextDisabled("expert  tokens  top-1  mean weight");
    for (int e = 0; e < rt.n_expert; e++) {
        if (!ran[e] && !gb::expert_ablated(ab, l, e)) continue;
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float sz = ImGui::GetTextLineHeight() - 3;
        ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + sz, p.y + 2 + sz), expert_colour(e));
        ImGui::Dummy(ImVec2(sz + 2, sz));
        ImGui::SameLine();
        if (gb::expert_ablated(ab, l, e)) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%-5d ablated", e);
        else ImGui::Text("%-5d %6d %6d  %.3f", e, ran[e], first[e], sum[e] / ran[e]);
    }
    int idle = 0;
    for (int e = 0; e < rt.n_expert; e++) idle += !ran[e] && !gb::expert_ablated(ab, l, e);
    if (idle) ImGui::TextDisabled("%d experts ran for none of these tokens", idle);
    ImGui::EndTooltip();
}

// The visible cells (a grey band for a layer the capture left out), each a bar of its chosen experts with a red
// corner where an ablated expert was chosen without the ablation. Returns the expert whose part is under the mouse
// in the hovered cell, or -1.
static int draw_cells(const grid_view& g, const run_result& r, ui_context& ui) {
    const gb::routing_table& rt = r.pred.routing;
    const int K = rt.k;
    const float font = ImGui::GetFontSize();
    ImDrawList* dl = g.dl;
    const ImVec2 o = g.o, wp = g.wp;
    const float label_w = g.label_w, header_h = g.header_h, cw = g.cw, ch = g.ch;
    const int t0 = g.c0, t1 = g.c1, l0 = g.r0, l1 = g.r1;
    // the hovered cell (not over the sticky labels), and the expert part under the mouse
    const ImVec2 m = ImGui::GetMousePos();
    const int hl = g.hover_r, ht = g.hover_c;
    int he = -1;
    std::vector<std::pair<int, float>> gone;
    for (int l = l0; l < l1; l++) {
        if (!rt.kept[l]) { // left out by the capture budget: one grey band
            ImVec2 a(o.x + label_w + t0 * cw, o.y + header_h + l * ch), z(o.x + label_w + t1 * cw - 2, a.y + ch - 2);
            dl->AddRectFilled(a, z, IM_COL32(50, 50, 50, 255));
            dl->AddText(ImVec2(std::max(a.x, wp.x + label_w) + 6, a.y + (ch - 2 - font) / 2), IM_COL32(160, 160, 160, 255),
                        "not kept (memory budget): select a head in this layer to capture it");
            continue;
        }
        for (int t = t0; t < t1; t++) {
            ImVec2 a(o.x + label_w + t * cw, o.y + header_h + l * ch), z(a.x + cw - 2, a.y + ch - 2);
            dl->AddRectFilled(a, z, IM_COL32(36, 36, 42, 255)); // weight the chosen experts do not hold
            const int* ids = rt.cell_ids(l, t);
            const float* w = rt.cell_weights(l, t);
            float x = a.x;
            for (int i = 0; i < K && ids[i] >= 0; i++) {
                const float wi = std::isfinite(w[i]) ? std::max(0.0f, std::min(1.0f, w[i])) : 0.0f;
                const float x1 = std::min(z.x, x + wi * (z.x - a.x));
                const ImU32 col = expert_colour(ids[i]);
                dl->AddRectFilled(ImVec2(x, a.y), ImVec2(x1, z.y), col);
                if (x1 - x > 3) dl->AddLine(ImVec2(x1, a.y), ImVec2(x1, z.y), IM_COL32(20, 20, 24, 255), 1.0f);
                char id[12];
                std::snprintf(id, sizeof id, "%d", ids[i]);
                const ImVec2 ts = ImGui::CalcTextSize(id);
                if (ts.x + 4 <= x1 - x && ts.y <= ch) dl->AddText(ImVec2(x + 3, a.y + (ch - 2 - ts.y) / 2), text_on(col), id);
                ui.widgets["expert " + std::to_string(l) + "." + std::to_string(t) + "." + std::to_string(ids[i])] =
                    ImVec4(x, a.y, std::max(x1, x + 1), z.y);
                if (l == hl && t == ht && m.x >= x && m.x < x1) he = ids[i];
                x = x1;
            }
            // an ablated expert the unablated run chose here: a red corner
            ablated_in_cell(r.ablation, r.pred.base_routing, l, t, gone);
            if (!gone.empty())
                dl->AddTriangleFilled(ImVec2(z.x - 9, a.y), ImVec2(z.x, a.y), ImVec2(z.x, a.y + 9), IM_COL32(255, 70, 70, 255));
            if (l == hl && t == ht) dl->AddRect(a, z, IM_COL32(255, 255, 255, 255), 0, 0, 1.5f);
            ui.widgets["experts cell " + std::to_string(l) + "." + std::to_string(t)] = ImVec4(a.x, a.y, z.x, z.y);
        }
    }
    return he;
}

// Sticky token headers (the selected token's in gold) and layer labels; a hovered layer label shows the layer's load.
static void draw_labels(const grid_view& g, const app_state& s, const run_result& r, int sel_t, ui_context& ui) {
    const gb::routing_table& rt = r.pred.routing;
    const gb::record& rec = r.cap();
    const float font = ImGui::GetFontSize();
    ImDrawList* dl = g.dl;
    const ImVec2 o = g.o, wp = g.wp, ws = g.ws;
    const float label_w = g.label_w, header_h = g.header_h, cw = g.cw, ch = g.ch;
    const int t0 = g.c0, t1 = g.c1, l0 = g.r0, l1 = g.r1;
    const ImVec2 m = ImGui::GetMousePos();
    // sticky token headers and layer labels (a layer with ablated experts in red, with how many)
    const ImU32 panel_bg = ImGui::GetColorU32(ImGuiCol_WindowBg, 1.0f) | IM_COL32_A_MASK;
    dl->AddRectFilled(ImVec2(wp.x, wp.y), ImVec2(wp.x + ws.x, wp.y + header_h), panel_bg);
    for (int t = t0; t < t1; t++) {
        const float x = o.x + label_w + t * cw;
        const std::string h = short_label(rec.pieces[t], (size_t)std::max(1.0f, (cw - 6) / (font * 0.55f)));
        const ImU32 col = t == sel_t ? IM_COL32(255, 190, 60, 255) : IM_COL32(200, 200, 210, 255);
        dl->PushClipRect(ImVec2(x, wp.y), ImVec2(x + cw - 2, wp.y + header_h), true);
        dl->AddText(ImVec2(x + 3, wp.y + 3), col, h.c_str());
        dl->PopClipRect();
        if (t == sel_t) dl->AddLine(ImVec2(x, wp.y + header_h - 2), ImVec2(x + cw - 2, wp.y + header_h - 2), col, 2.0f);
    }
    dl->AddRectFilled(ImVec2(wp.x, wp.y + header_h), ImVec2(wp.x + label_w, wp.y + ws.y), panel_bg);
    for (int l = l0; l < l1; l++) {
        const float y = o.y + header_h + l * ch + (ch - 2 - ImGui::GetTextLineHeight()) / 2;
        if (y < wp.y + header_h - 2) continue;
        int n_abl = 0;
        for (const gb::head_ref& e : s.ablation.experts) n_abl += e.layer == l;
        char b[32];
        std::snprintf(b, sizeof b, n_abl ? "L%d \u00d7%d" : "L%d", l, n_abl);
        dl->AddText(ImVec2(wp.x + 4, y), n_abl ? IM_COL32(255, 110, 110, 255) : IM_COL32(170, 170, 180, 255), b);
        ui.widgets["experts layer " + std::to_string(l)] = ImVec4(wp.x, y, wp.x + label_w - 4, y + ImGui::GetTextLineHeight());
    }
    dl->AddRectFilled(wp, ImVec2(wp.x + label_w, wp.y + header_h), panel_bg);
    dl->AddText(ImVec2(wp.x + 4, wp.y + 3), IM_COL32(120, 120, 130, 255), "layer");
    // a layer label hovered: how the layer spreads its tokens over the experts (load)
    const int label_l = g.hovered_label(m);
    if (label_l >= 0 && rt.kept[label_l]) layer_load_tooltip(rt, r.ablation, label_l);
}

// The hovered cell (hl, ht): its experts and weights, he the one under the mouse; a right-click (or ctrl+click)
// ablates he at that layer, a click selects the token.
static void cell_tooltip(app_state& s, const run_result& r, int hl, int ht, int he) {
    const gb::model_config& c = r.model->config;
    const gb::routing_table& rt = r.pred.routing;
    const gb::record& rec = r.cap();
    const gb::tokenizer& tok = r.model->tok;
    const int K = rt.k;
    std::vector<std::pair<int, float>> gone;
    if (hl >= 0 && rt.kept[hl]) {
        const int* ids = rt.cell_ids(hl, ht);
        const float* w = rt.cell_weights(hl, ht);
        ImGui::BeginTooltip();
        ImGui::Text("L%d, token %d %s", hl, ht, quoted(tok, rec.tokens[ht]).c_str());
        ImGui::Separator();
        float sum = 0;
        for (int i = 0; i < K && ids[i] >= 0; i++) {
            const ImVec2 p = ImGui::GetCursorScreenPos();
            const float sz = ImGui::GetTextLineHeight() - 3;
            ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 2), ImVec2(p.x + sz, p.y + 2 + sz), expert_colour(ids[i]));
            ImGui::Dummy(ImVec2(sz + 2, sz));
            ImGui::SameLine();
            ImGui::Text("expert %-3d %.3f%s", ids[i], w[i], ids[i] == he ? "  <" : "");
            sum += w[i];
        }
        if (ids[0] < 0) ImGui::TextDisabled("no expert ran for this token here");
        ImGui::TextDisabled(c.norm_topk ? "sum %.3f (renormalised)" : "sum %.3f of the softmax (not renormalised)", sum);
        ablated_in_cell(r.ablation, r.pred.base_routing, hl, ht, gone);
        for (const auto& g : gone)
            ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "expert %d ablated (without ablations: %.3f)", g.first, g.second);
        if (c.d_ff_shared > 0) ImGui::TextDisabled("+ the shared expert, for every token");
        if (he >= 0) ImGui::TextDisabled("right-click / ctrl+click: ablate expert %d at L%d   click: select the token", he, hl);
        else ImGui::TextDisabled("click: select the token");
        ImGui::EndTooltip();
        const bool toggle = ImGui::IsMouseClicked(1) || (ImGui::IsMouseClicked(0) && ImGui::GetIO().KeyCtrl);
        if (toggle && he >= 0) gb::toggle_expert(s.ablation, hl, he);
        else if (!toggle && ImGui::IsMouseClicked(0)) s.sel_token = ht;
    }
}

// ---------------------------------------------------------------------------------------------
// Legend: each expert's colour (the first 24; beyond them hover a cell), what width and the red corner mean
// ---------------------------------------------------------------------------------------------
static void legend(const gb::model_config& c) {
    ImDrawList* wl = ImGui::GetWindowDrawList();
    ImVec2 la = ImGui::GetCursorScreenPos();
    la.y += 4;
    const float chip = ImGui::GetTextLineHeight();
    float x = la.x;
    wl->AddText(ImVec2(x, la.y), IM_COL32(200, 200, 200, 255), "expert");
    x += ImGui::CalcTextSize("expert").x + 6;
    const int shown = std::min(c.n_expert, 24);
    for (int e = 0; e < shown; e++) {
        char id[12];
        std::snprintf(id, sizeof id, "%d", e);
        const float w = std::max(chip, ImGui::CalcTextSize(id).x + 6);
        wl->AddRectFilled(ImVec2(x, la.y), ImVec2(x + w, la.y + chip), expert_colour(e));
        wl->AddText(ImVec2(x + (w - ImGui::CalcTextSize(id).x) / 2, la.y), text_on(expert_colour(e)), id);
        x += w + 2;
    }
    if (shown < c.n_expert) wl->AddText(ImVec2(x + 4, la.y), IM_COL32(150, 150, 160, 255), "\u2026 (hover a cell for the ids)");
    const float y2 = la.y + chip + 4, y3 = y2 + ImGui::GetTextLineHeightWithSpacing();
    wl->AddText(ImVec2(la.x, y2), IM_COL32(150, 150, 160, 255),
                c.norm_topk ? "width = mixing weight" : "width = mixing weight; dark rest = the softmax's weight on the experts not chosen");
    wl->AddTriangleFilled(ImVec2(la.x, y3 + 2), ImVec2(la.x + 9, y3 + 2), ImVec2(la.x + 9, y3 + 11), IM_COL32(255, 70, 70, 255));
    wl->AddText(ImVec2(la.x + 14, y3), IM_COL32(150, 150, 160, 255),
                "corner: an ablated expert was chosen here (without the ablation); hover a layer for its experts' load");
    ImGui::Dummy(ImVec2(1, 3 * chip + 16));
}

// ---------------------------------------------------------------------------------------------
// Grid
// ---------------------------------------------------------------------------------------------
void panel_experts(app_state& s, ui_context& ui) {
    tab_hint("Which experts each layer's router chose for each token. A cell's parts are its chosen experts, widest = "
             "largest mixing weight, colour = expert. Hover for the weights; right-click (or ctrl+click) an expert's "
             "part to ablate it at that layer; click to select the token.");
    if (!s.result || s.result->pred.routing.empty()) {
        ImGui::TextDisabled(s.result ? "this model has no experts" : "no result yet");
        return;
    }
    const run_result& r = *s.result;
    const gb::model_config& c = r.model->config;
    const gb::routing_table& rt = r.pred.routing;
    const int L = rt.n_layer, T = rt.n_tokens;
    header_line(c);

    // geometry: rows as tall as fit (18..44 px), columns wide enough for a short token (34 px) or wider
    const float label_w = ImGui::CalcTextSize("L00 ").x + 18;
    const float legend_h = 3 * ImGui::GetTextLineHeightWithSpacing() + 12;
    const float header_h = ImGui::GetTextLineHeight() + 8;
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float grid_h = std::max(60.0f, avail.y - legend_h);
    const float scroll_room = 14;
    const float cw = std::max(34.0f, std::min(110.0f, (avail.x - label_w - scroll_room) / T));
    const float ch = std::max(18.0f, std::min(44.0f, (grid_h - header_h - scroll_room) / L));

    // layers are rows, tokens columns
    const grid_view g = begin_grid("##experts_grid", ImVec2(avail.x, grid_h), label_w, header_h, cw, ch, L, T);
    const int sel_t = query_token(s, T);
    const int he = draw_cells(g, r, ui);
    draw_labels(g, s, r, sel_t, ui);
    cell_tooltip(s, r, g.hover_r, g.hover_c, he);
    end_grid(g);
    legend(c);
}

} // namespace gbui
