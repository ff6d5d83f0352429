// Head detail: the selected head's T x T pattern with token labels, hover values, a legend, the scale
// (linear / log / row max), and the selected query row as text shaded by weight. Right-click (or ctrl+click) a
// cell a query sees: knock that query-key pair out (attention knockout) or bring it back.
#include <algorithm>
#include <cmath>

#include "text_scale.h"
#include "util/error.h"
#include "ui.h"

namespace gbui {

// Colour bar with values under it and, below, the masked-cell swatch; returns the height used.
static float legend(ImDrawList* dl, ImVec2 a, float w, scale_mode mode, bool windowed, bool causal) {
    const int steps = 64;
    const float h = px(12);
    for (int i = 0; i < steps; i++) {
        float x0 = a.x + w * i / steps, x1 = a.x + w * (i + 1) / steps + 1;
        dl->AddRectFilled(ImVec2(x0, a.y), ImVec2(x1, a.y + h), viridis_u32((i + 0.5f) / steps));
    }
    const char* lo = mode == SCALE_LOG ? "1e-4" : "0";
    const char* mid = mode == SCALE_LOG ? "1e-2" : mode == SCALE_ROW_MAX ? "0.5 x max" : "0.5";
    const char* hi = mode == SCALE_ROW_MAX ? "row max" : "1";
    ImU32 tc = IM_COL32(200, 200, 200, 255);
    dl->AddText(ImVec2(a.x, a.y + h + px(2)), tc, lo);
    dl->AddText(ImVec2(a.x + w / 2 - ImGui::CalcTextSize(mid).x / 2, a.y + h + px(2)), tc, mid);
    dl->AddText(ImVec2(a.x + w - ImGui::CalcTextSize(hi).x, a.y + h + px(2)), tc, hi);
    ImVec2 m(a.x, a.y + h + px(2) + ImGui::GetTextLineHeight() + px(6));
    if (!causal) { // an encoder: nothing is masked, every query sees every key
        dl->AddText(ImVec2(m.x, m.y - px(2)), tc, "no mask: every position sees all the others");
        return m.y + h + px(8) - a.y;
    }
    dl->AddRectFilled(m, ImVec2(m.x + h, m.y + h), IM_COL32(masked_rgb[0], masked_rgb[1], masked_rgb[2], 255));
    dl->AddRect(m, ImVec2(m.x + h, m.y + h), IM_COL32(120, 120, 120, 255));
    dl->AddText(ImVec2(m.x + h + px(6), m.y - px(2)), tc, windowed ? "masked (future, or before the window)" : "masked (future)");
    return m.y + h + px(8) - a.y;
}

// The selected query's row as text, each key's background shaded by its weight, wrapped in the current
// (child) window.
static void query_row(const gb::record& c, int layer, const float* p, int sel_q, scale_mode scale) {
    const int T = c.n_tokens;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::Text("query %d \u2018%s\u2019 attends to:", sel_q, visible_token(c.pieces[sel_q]).c_str());
    ImGui::PopTextWrapPos();
    const int j0 = c.first_key(layer, sel_q); // a sliding window: the keys it sees
    float row_max = 0;
    const int j1 = c.last_key(sel_q); // an encoder's query sees the keys after it too
    for (int j = j0; j <= j1; j++) row_max = std::max(row_max, p[sel_q * T + j]);
    ImVec2 pos = ImGui::GetCursorScreenPos();
    float x0 = pos.x, right = x0 + ImGui::GetContentRegionAvail().x, lh = ImGui::GetTextLineHeight() + px(4);
    for (int j = j0; j <= j1; j++) {
        std::string lb = visible_token(c.pieces[j]);
        ImVec2 ts = ImGui::CalcTextSize(lb.c_str());
        if (pos.x + ts.x + px(4) > right && pos.x > x0) pos = ImVec2(x0, pos.y + lh + px(2));
        float v = p[sel_q * T + j];
        float t = scale_value(v, scale, row_max);
        ImVec2 b(pos.x + ts.x + px(4), pos.y + lh);
        dl->AddRectFilled(pos, b, viridis_u32(t));
        dl->AddText(ImVec2(pos.x + px(2), pos.y + px(2)), t > 0.6f ? IM_COL32(10, 10, 10, 255) : IM_COL32(240, 240, 240, 255), lb.c_str());
        if (ImGui::IsMouseHoveringRect(pos, b) && ImGui::IsWindowHovered()) ImGui::SetTooltip("%s: %.4f", lb.c_str(), v);
        pos.x = b.x + px(2);
    }
    ImGui::SetCursorScreenPos(ImVec2(x0, pos.y + lh + px(4)));
    ImGui::Dummy(ImVec2(1, 1));
}

// Knocks out (or restores) query q's read of key k in head h of layer l, unless that leaves a query no key to
// read: then the app's error line says so and nothing changes.
static void toggle_cell(app_state& s, int l, int h, int q, int k, int T) {
    gb::ablation next = s.ablation;
    gb::toggle_knockout(next, {l, h, q, k});
    try {
        gb::check_knockouts(next, s.model->config, T);
        s.ablation = next;
    } catch (const gb::error& e) {
        s.error = e.what();
    }
}

// A red outline over the cells the ablation's knockouts cover in head h of layer l (a * covers a whole row or
// column).
static void knocked_cells(ImDrawList* dl, const gb::ablation& ab, int l, int h, int T, ImVec2 a, float cell) {
    for (const gb::knockout& k : ab.knockouts) {
        if (k.layer != l || (k.head >= 0 && k.head != h) || k.query >= T || k.key >= T) continue;
        const int q0 = k.query < 0 ? 0 : k.query, q1 = k.query < 0 ? T : k.query + 1;
        const int k0 = k.key < 0 ? 0 : k.key, k1 = k.key < 0 ? T : k.key + 1;
        dl->AddRect(ImVec2(a.x + k0 * cell, a.y + q0 * cell), ImVec2(a.x + k1 * cell, a.y + q1 * cell),
                    IM_COL32(255, 80, 80, 255), 0, 0, std::max(1.0f, std::min(2.0f, cell / 4)));
    }
}

void panel_head(app_state& s, ui_context& ui) {
    if (!s.result) {
        panel_title("Head", "rows = queries, columns = keys; arrows move between heads");
        return;
    }
    const gb::record& c = s.result->cap();
    const int T = c.n_tokens;
    // the shown result may still be the previous model's: clamp for display, never the selection itself
    const int sel_l = std::min(s.sel_layer, c.n_layer - 1), sel_h = std::min(s.sel_head, c.n_head - 1);
    char title[64];
    snprintf(title, sizeof title, "Head L%d H%d", sel_l, sel_h);
    // presenting, the scale's buttons share the title's line: the height goes to the picture
    panel_title(title, s.presenting ? nullptr : "rows = queries, columns = keys; arrows move between heads", s.presenting);
    int mode = s.scale;
    if (s.presenting) ImGui::SameLine(0, px(24));
    ImGui::RadioButton("linear", &mode, SCALE_LINEAR);
    ImGui::SameLine();
    ImGui::RadioButton("log", &mode, SCALE_LOG);
    ImGui::SameLine();
    ImGui::RadioButton("row / max", &mode, SCALE_ROW_MAX);
    s.scale = (scale_mode)mode;
    if (head_ablated(s.ablation, sel_l, sel_h)) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "  ablated: its output is zeroed, its pattern still shown");
    }
    const float* p = c.head(sel_l, sel_h);
    if (!p) {
        ImGui::TextDisabled("this head's attention was not captured (memory budget): it is being run again with this head");
        return;
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float font = ImGui::GetFontSize();

    // Geometry: labels' room from their real widths (at most 10 characters); the legend and the query row go
    // to the right of the heatmap when that leaves it bigger than putting them below.
    std::vector<std::string> labels(T);
    float widest = 0;
    for (int t = 0; t < T; t++) {
        labels[t] = short_label(c.pieces[t]);
        widest = std::max(widest, ImGui::CalcTextSize(labels[t].c_str()).x);
    }
    const float side_w = px(250), below_h = px(150);
    auto room = [&](float fs) { return widest * fs / font + px(8); };
    float fit_right = std::min(avail.x - room(font) - side_w - px(12), avail.y - room(font));
    float fit_below = std::min(avail.x - room(font) - px(4), avail.y - room(font) - below_h);
    const bool right = fit_right >= fit_below;
    float side = std::max(px(40), right ? fit_right : fit_below);
    float cell = side / T;
    // label size: the font's when cells are big, down to 11 px (at 100 %); then every k-th label so none overlap
    const float fs = std::min(font, std::max(px(11), cell * 0.9f));
    const int k = label_step(T, cell, fs + px(1));
    const float label_w = room(fs), label_h = room(fs); // smaller labels leave the heatmap a little more room
    side = std::max(px(40), right ? std::min(avail.x - label_w - side_w - px(12), avail.y - label_h)
                                  : std::min(avail.x - label_w - px(4), avail.y - label_h - below_h));
    cell = side / T;

    ImVec2 o = ImGui::GetCursorScreenPos();
    ImVec2 a(o.x + label_w, o.y + label_h), z(a.x + side, a.y + side);
    GLuint tex = ui.hm.head(sel_l, sel_h);
    if (tex) dl->AddImage((ImTextureID)(intptr_t)tex, a, z);
    ui.widgets["head detail"] = ImVec4(a.x, a.y, z.x, z.y);
    int sel_q = query_token(s, T);
    dl->AddRect(ImVec2(a.x, a.y + sel_q * cell), ImVec2(z.x, a.y + (sel_q + 1) * cell), IM_COL32(255, 190, 60, 255), 0, 0, 1.5f);
    // every k-th label (0, k, 2k, ...); the selected query's row label always, its near neighbours skipped
    ImU32 tc = IM_COL32(210, 210, 210, 255);
    for (int t = 0; t < T; t++) {
        bool on_step = t % k == 0, near_sel = t != sel_q && std::abs(t - sel_q) < k;
        if ((on_step && !near_sel) || t == sel_q) {
            const float w = ImGui::CalcTextSize(labels[t].c_str()).x * fs / font;
            const ImVec2 at(a.x - w - px(4), a.y + (t + 0.5f) * cell - fs / 2);
            dl->AddText(ImGui::GetFont(), fs, at, t == sel_q ? IM_COL32(255, 190, 60, 255) : tc, labels[t].c_str());
            note_drawn(ui, "head row label " + std::to_string(t), at, ImVec2(at.x + w, at.y + fs));
        }
        // key labels above the columns, turned 90 degrees so that whole words fit
        if (on_step) add_text_vertical(dl, ImVec2(a.x + (t + 0.5f) * cell - fs / 2, a.y - px(4)), tc, labels[t].c_str(), fs);
    }
    // attention knockout: decoder-only models, on the shown result's own model
    const bool knockout = s.model && s.result->model == s.model && gb::offers(s.model->config, gb::FEATURE_KNOCKOUT);
    knocked_cells(dl, s.ablation, sel_l, sel_h, T, a, cell);
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton("##heat", ImVec2(side, side));
    if (ImGui::IsItemHovered()) {
        ImVec2 m = ImGui::GetMousePos();
        int qi = std::min(T - 1, std::max(0, (int)((m.y - a.y) / cell)));
        int kj = std::min(T - 1, std::max(0, (int)((m.x - a.x) / cell)));
        std::string q = visible_token(c.pieces[qi]), kt = visible_token(c.pieces[kj]);
        if (kj > c.last_key(qi))
            ImGui::SetTooltip("query %d \u2018%s\u2019 \u2192 key %d \u2018%s\u2019: masked (a token cannot see the future)", qi,
                              q.c_str(), kj, kt.c_str());
        else if (kj < c.first_key(sel_l, qi))
            ImGui::SetTooltip("query %d \u2018%s\u2019 \u2192 key %d \u2018%s\u2019: masked (outside this layer's sliding window "
                              "of %d tokens)", qi, q.c_str(), kj, kt.c_str(), c.window[sel_l]);
        else {
            const bool off = gb::knocked_out(s.ablation, {sel_l, sel_h, qi, kj});
            ImGui::SetTooltip("query %d \u2018%s\u2019 \u2192 key %d \u2018%s\u2019: %.4f%s", qi, q.c_str(), kj, kt.c_str(),
                              p[qi * T + kj], !knockout ? "" : off ? "\nknocked out; right-click / ctrl+click: restore"
                                                                  : "\nright-click / ctrl+click: knock out (renormalised "
                                                                    "over the keys left)");
        }
        const bool seen = kj <= c.last_key(qi) && kj >= c.first_key(sel_l, qi);
        const bool toggle = ImGui::IsMouseClicked(1) || (ImGui::IsMouseClicked(0) && ImGui::GetIO().KeyCtrl);
        if (toggle && knockout && seen) toggle_cell(s, sel_l, sel_h, qi, kj, T);
        else if (ImGui::IsMouseClicked(0)) s.sel_token = qi;
    }

    // legend and the query row: beside the heatmap or under it; the row scrolls when long
    ImVec2 la = right ? ImVec2(z.x + px(16), a.y) : ImVec2(a.x, z.y + px(10));
    float lw = right ? std::max(px(120), o.x + avail.x - la.x - px(4)) : std::min(px(260), side);
    float used = legend(dl, la, std::min(lw, px(260)), s.scale, c.first_key(sel_l, c.n_tokens - 1) > 0, c.causal);
    ImGui::SetCursorScreenPos(ImVec2(right ? la.x : o.x, la.y + used));
    ImVec2 rest = ImGui::GetContentRegionAvail();
    ImGui::BeginChild("##query_row", ImVec2(right ? lw : rest.x, std::max(px(40), right ? z.y - la.y - used : rest.y)));
    query_row(c, sel_l, p, sel_q, s.scale);
    ImGui::EndChild();
    // the picture: the heatmap with its labels, the legend and the query's row
    const ImVec2 end = ImGui::GetItemRectMax();
    note_drawn(ui, "picture", o, ImVec2(std::max(z.x, end.x), std::max(z.y, end.y)));
}

} // namespace gbui
