// Residual stream: the L2 norm of every token's stream at every point (embed, L0 attn, L0 mlp, ...),
// as a line chart (one line per token, the selected one highlighted) and a points x tokens heatmap.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace gbui {

void panel_residual(app_state& s, ui_context& ui) {
    panel_title("Residual stream norm", "||x|| per token after each sublayer");
    if (!s.result) return;
    const gb::capture& c = s.result->cap;
    const int T = c.n_tokens, P = 2 * c.n_layer + 1;
    ImGui::Checkbox("log y-axis", &s.resid_log);
    ImGui::SameLine();
    ImGui::TextDisabled("(without LayerNorm the norms explode)");
    if (c.nonfinite_layer >= 0)
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "NaN/Inf first appears at %s", c.nonfinite_where.c_str());
    std::vector<std::string> labels = gb::resid_labels(c.n_layer);
    float lo = 1e30f, hi = -1e30f;
    for (float v : c.resid_norm)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (hi < lo) return;
    auto ty = [&](float v) {
        if (s.resid_log) {
            float l0 = std::log10(std::max(lo, 1e-6f)), l1 = std::log10(std::max(hi, 1e-6f));
            return l1 > l0 ? (std::log10(std::max(v, 1e-6f)) - l0) / (l1 - l0) : 0.5f;
        }
        return (v - 0) / (hi > 0 ? hi : 1);
    };
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 avail = ImGui::GetContentRegionAvail();
    float chart_h = std::max(80.0f, avail.y * 0.55f);
    ImVec2 o = ImGui::GetCursorScreenPos();
    const float axis_w = 52, axis_h = 40;
    ImVec2 a(o.x + axis_w, o.y + 6), z(o.x + avail.x - 8, o.y + chart_h - axis_h);
    dl->AddRectFilled(a, z, IM_COL32(28, 30, 36, 255));
    ImU32 grid = IM_COL32(70, 70, 80, 255), tc = IM_COL32(190, 190, 190, 255);
    for (int k = 0; k <= 4; k++) { // y ticks
        float f = k / 4.0f;
        float v = s.resid_log ? std::pow(10.0f, std::log10(std::max(lo, 1e-6f)) +
                                                    f * (std::log10(std::max(hi, 1e-6f)) - std::log10(std::max(lo, 1e-6f))))
                              : f * hi;
        float y = z.y - f * (z.y - a.y);
        dl->AddLine(ImVec2(a.x, y), ImVec2(z.x, y), grid);
        char b[32];
        snprintf(b, sizeof b, v >= 1000 ? "%.3g" : "%.1f", v);
        dl->AddText(ImVec2(o.x, y - 7), tc, b);
    }
    float dx = P > 1 ? (z.x - a.x) / (P - 1) : 0;
    int step = std::max(1, (int)std::ceil(P * 48.0f / (z.x - a.x)));
    for (int p = 0; p < P; p += step) { // x labels
        float x = a.x + p * dx;
        dl->AddLine(ImVec2(x, a.y), ImVec2(x, z.y), grid);
        dl->AddText(ImVec2(x - ImGui::CalcTextSize(labels[p].c_str()).x / 2, z.y + 4 + (p / step % 2) * 14), tc,
                    labels[p].c_str());
    }
    int sel = s.sel_token < 0 ? T - 1 : std::min(s.sel_token, T - 1);
    std::vector<ImVec2> pts(P);
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < T; t++) {
            if ((t == sel) != (pass == 1)) continue; // selected token drawn last, on top
            for (int p = 0; p < P; p++) {
                float v = c.resid_norm[(size_t)p * T + t];
                pts[p] = ImVec2(a.x + p * dx, z.y - std::min(1.0f, std::max(0.0f, ty(v))) * (z.y - a.y));
            }
            ImU32 col = t == sel ? IM_COL32(255, 190, 60, 255) : viridis_u32(T > 1 ? (float)t / (T - 1) : 0.5f, 0.55f);
            dl->AddPolyline(pts.data(), P, col, 0, t == sel ? 3.0f : 1.2f);
        }
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton("##chart", ImVec2(z.x - a.x, z.y - a.y));
    if (ImGui::IsItemHovered() && dx > 0) {
        int p = std::min(P - 1, std::max(0, (int)std::lround((ImGui::GetMousePos().x - a.x) / dx)));
        ImGui::SetTooltip("%s\ntoken %d \u2018%s\u2019: %.3f", labels[p].c_str(), sel,
                          visible_token(c.pieces[sel]).c_str(), c.resid_norm[(size_t)p * T + sel]);
    }
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + chart_h));

    // heatmap: rows = points, columns = tokens (log colour scale)
    ImVec2 h0 = ImGui::GetCursorScreenPos();
    float hh = std::max(30.0f, ImGui::GetContentRegionAvail().y - 24);
    ImVec2 ha(h0.x + axis_w, h0.y), hz(h0.x + avail.x - 8, h0.y + hh);
    if (ui.hm.resid) dl->AddImage((ImTextureID)(intptr_t)ui.hm.resid, ha, hz);
    float rh = (hz.y - ha.y) / P;
    int lstep = std::max(1, (int)std::ceil(14.0f / rh));
    for (int p = 0; p < P; p += lstep) dl->AddText(ImVec2(h0.x, ha.y + p * rh), tc, labels[p].c_str());
    ImGui::SetCursorScreenPos(ha);
    ImGui::InvisibleButton("##rheat", ImVec2(hz.x - ha.x, hz.y - ha.y));
    if (ImGui::IsItemHovered()) {
        ImVec2 m = ImGui::GetMousePos();
        int p = std::min(P - 1, std::max(0, (int)((m.y - ha.y) / rh)));
        int t = std::min(T - 1, std::max(0, (int)((m.x - ha.x) / ((hz.x - ha.x) / T))));
        ImGui::SetTooltip("%s, token %d \u2018%s\u2019: %.3f", labels[p].c_str(), t, visible_token(c.pieces[t]).c_str(),
                          c.resid_norm[(size_t)p * T + t]);
        if (ImGui::IsMouseClicked(0)) s.sel_token = t;
    }
    ImGui::TextDisabled("colour: log norm, %.2f (dark) .. %.4g (bright)", ui.hm.resid_min, ui.hm.resid_max);
}

} // namespace gbui
