// Head detail: the selected head's T x T pattern with token labels, hover values, a legend, the scale
// (linear / log / row max), and the selected query row as text shaded by weight.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace gbui {

static std::string short_label(const std::string& s, size_t max_chars = 10) {
    std::string v = visible_token(s);
    // cut on UTF-8 boundaries
    size_t n = 0, i = 0;
    while (i < v.size() && n < max_chars) {
        unsigned char ch = v[i];
        i += ch < 0x80 ? 1 : ch < 0xe0 ? 2 : ch < 0xf0 ? 3 : 4;
        n++;
    }
    return i < v.size() ? v.substr(0, i) + "\u2026" : v;
}

static void legend(ImDrawList* dl, ImVec2 a, float w, float h, scale_mode mode) {
    const int steps = 64;
    for (int i = 0; i < steps; i++) {
        float x0 = a.x + w * i / steps, x1 = a.x + w * (i + 1) / steps + 1;
        dl->AddRectFilled(ImVec2(x0, a.y), ImVec2(x1, a.y + h), viridis_u32((i + 0.5f) / steps));
    }
    const char* lo = mode == SCALE_LOG ? "1e-4" : "0";
    const char* mid = mode == SCALE_LOG ? "1e-2" : mode == SCALE_ROW_MAX ? "0.5 x row max" : "0.5";
    const char* hi = mode == SCALE_ROW_MAX ? "row max" : "1";
    ImU32 tc = IM_COL32(200, 200, 200, 255);
    dl->AddText(ImVec2(a.x, a.y + h + 2), tc, lo);
    dl->AddText(ImVec2(a.x + w / 2 - ImGui::CalcTextSize(mid).x / 2, a.y + h + 2), tc, mid);
    dl->AddText(ImVec2(a.x + w - ImGui::CalcTextSize(hi).x, a.y + h + 2), tc, hi);
    ImVec2 m(a.x + w + 12, a.y);
    dl->AddRectFilled(m, ImVec2(m.x + h, m.y + h), IM_COL32(masked_rgb[0], masked_rgb[1], masked_rgb[2], 255));
    dl->AddRect(m, ImVec2(m.x + h, m.y + h), IM_COL32(120, 120, 120, 255));
    dl->AddText(ImVec2(m.x + h + 5, m.y - 1), tc, "masked (future)");
}

void panel_head(app_state& s, ui_context& ui) {
    char title[64];
    snprintf(title, sizeof title, "Head L%d H%d", s.sel_layer, s.sel_head);
    panel_title(title, "rows = queries, columns = keys; arrows move between heads");
    if (!s.result) return;
    const gb::capture& c = s.result->cap;
    const int T = c.n_tokens;
    s.sel_layer = std::min(s.sel_layer, c.n_layer - 1);
    s.sel_head = std::min(s.sel_head, c.n_head - 1);
    int mode = s.scale;
    ImGui::RadioButton("linear", &mode, SCALE_LINEAR);
    ImGui::SameLine();
    ImGui::RadioButton("log", &mode, SCALE_LOG);
    ImGui::SameLine();
    ImGui::RadioButton("row / max", &mode, SCALE_ROW_MAX);
    s.scale = (scale_mode)mode;
    if (head_ablated(s.ablation, s.sel_layer, s.sel_head)) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "  ablated: its output is zeroed, its pattern still shown");
    }
    const float* p = c.head(s.sel_layer, s.sel_head);
    if (!p) {
        ImGui::TextDisabled("this layer's attention was not captured (memory budget)");
        return;
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const bool labels = T <= 48;
    const float label_w = labels ? 80.0f : 0.0f, label_h = labels ? 70.0f : 0.0f;
    const float below = 70 + ImGui::GetTextLineHeightWithSpacing() * 2; // legend + query row text
    float side = std::max(40.0f, std::min(avail.x - label_w - 10, avail.y - label_h - below));
    ImVec2 o = ImGui::GetCursorScreenPos();
    ImVec2 a(o.x + label_w, o.y + label_h), z(a.x + side, a.y + side);
    GLuint tex = ui.hm.heads.empty() ? 0 : ui.hm.heads[s.sel_layer * c.n_head + s.sel_head];
    if (tex) dl->AddImage((ImTextureID)(intptr_t)tex, a, z);
    ui.widgets["head detail"] = ImVec4(a.x, a.y, z.x, z.y);
    float cell = side / T;
    int sel_q = s.sel_token < 0 ? T - 1 : std::min(s.sel_token, T - 1);
    dl->AddRect(ImVec2(a.x, a.y + sel_q * cell), ImVec2(z.x, a.y + (sel_q + 1) * cell), IM_COL32(255, 190, 60, 255), 0, 0, 1.5f);
    if (labels) {
        ImU32 tc = IM_COL32(210, 210, 210, 255);
        float fs = std::min(ImGui::GetFontSize(), std::max(9.0f, cell * 0.9f));
        for (int t = 0; t < T; t++) {
            std::string lb = short_label(c.pieces[t]);
            ImVec2 ts = ImGui::CalcTextSize(lb.c_str());
            ts.x *= fs / ImGui::GetFontSize();
            dl->AddText(ImGui::GetFont(), fs, ImVec2(a.x - ts.x - 4, a.y + t * cell + (cell - fs) / 2),
                        t == sel_q ? IM_COL32(255, 190, 60, 255) : tc, lb.c_str());
            // key labels: written top-down in a narrow column above each key (no rotated text in ImGui)
            float kx = a.x + t * cell + (cell - fs * 0.6f) / 2;
            float ky = a.y - 4;
            size_t i = 0;
            std::vector<std::string> glyphs;
            while (i < lb.size()) {
                unsigned char ch = lb[i];
                size_t n = ch < 0x80 ? 1 : ch < 0xe0 ? 2 : ch < 0xf0 ? 3 : 4;
                glyphs.push_back(lb.substr(i, n));
                i += n;
            }
            int max_rows = (int)(label_h / fs);
            int rows = std::min((int)glyphs.size(), max_rows);
            for (int g = 0; g < rows; g++)
                dl->AddText(ImGui::GetFont(), fs * 0.85f, ImVec2(kx, ky - (rows - g) * fs * 0.85f), tc, glyphs[g].c_str());
        }
    }
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton("##heat", ImVec2(side, side));
    if (ImGui::IsItemHovered()) {
        ImVec2 m = ImGui::GetMousePos();
        int qi = std::min(T - 1, std::max(0, (int)((m.y - a.y) / cell)));
        int kj = std::min(T - 1, std::max(0, (int)((m.x - a.x) / cell)));
        std::string q = visible_token(c.pieces[qi]), k = visible_token(c.pieces[kj]);
        if (kj > qi)
            ImGui::SetTooltip("query \u2018%s\u2019 \u2192 key \u2018%s\u2019: masked (a token cannot see the future)", q.c_str(), k.c_str());
        else
            ImGui::SetTooltip("query \u2018%s\u2019 \u2192 key \u2018%s\u2019: %.4f", q.c_str(), k.c_str(), p[qi * T + kj]);
        if (ImGui::IsMouseClicked(0)) s.sel_token = qi;
    }
    ImGui::SetCursorScreenPos(ImVec2(o.x, z.y + 8));
    ImVec2 la = ImGui::GetCursorScreenPos();
    legend(dl, ImVec2(la.x + label_w, la.y), std::min(260.0f, side * 0.6f), 12, s.scale);
    ImGui::Dummy(ImVec2(side, 34));

    // the selected query's row as text, each key's background shaded by its weight
    ImGui::Text("query %d \u2018%s\u2019 attends to:", sel_q, visible_token(c.pieces[sel_q]).c_str());
    float row_max = 0;
    for (int j = 0; j <= sel_q; j++) row_max = std::max(row_max, p[sel_q * T + j]);
    ImVec2 pos = ImGui::GetCursorScreenPos();
    float x0 = pos.x, right = x0 + ImGui::GetContentRegionAvail().x, lh = ImGui::GetTextLineHeight() + 4;
    for (int j = 0; j <= sel_q; j++) {
        std::string lb = visible_token(c.pieces[j]);
        ImVec2 ts = ImGui::CalcTextSize(lb.c_str());
        if (pos.x + ts.x + 4 > right && pos.x > x0) pos = ImVec2(x0, pos.y + lh + 2);
        float v = p[sel_q * T + j];
        float t = scale_value(v, s.scale, row_max);
        ImVec2 b(pos.x + ts.x + 4, pos.y + lh);
        dl->AddRectFilled(pos, b, viridis_u32(t));
        dl->AddText(ImVec2(pos.x + 2, pos.y + 2), t > 0.6f ? IM_COL32(10, 10, 10, 255) : IM_COL32(240, 240, 240, 255), lb.c_str());
        if (ImGui::IsMouseHoveringRect(pos, b)) ImGui::SetTooltip("%s: %.4f", lb.c_str(), v);
        pos.x = b.x + 2;
    }
    ImGui::SetCursorScreenPos(ImVec2(x0, pos.y + lh + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

} // namespace gbui
