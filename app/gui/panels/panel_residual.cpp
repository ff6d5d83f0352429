// Residual stream: the L2 norm of every token's stream at every point (embed, L0 attn, L0 mlp, ...),
// as a line chart (one line per token, the selected one highlighted) and a points x tokens heatmap.
#include <algorithm>
#include <cmath>

#include "number_format.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

// A polyline drawn as dashes (ImGui has no dashed lines): on for `on` pixels, off for `off`.
static void dashed_polyline(ImDrawList* dl, const std::vector<ImVec2>& pts, ImU32 col, float thickness, float on = 6,
                            float off = 4) {
    float phase = 0; // distance along the current dash/gap pattern
    for (size_t i = 1; i < pts.size(); i++) {
        ImVec2 a = pts[i - 1], b = pts[i];
        float len = std::sqrt((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y)), t = 0;
        while (t < len) {
            float period_left = phase < on ? on - phase : on + off - phase;
            float step = std::min(period_left, len - t);
            if (phase < on) {
                ImVec2 p0(a.x + (b.x - a.x) * t / len, a.y + (b.y - a.y) * t / len);
                ImVec2 p1(a.x + (b.x - a.x) * (t + step) / len, a.y + (b.y - a.y) * (t + step) / len);
                dl->AddLine(p0, p1, col, thickness);
            }
            t += step;
            phase = std::fmod(phase + step, on + off);
        }
    }
}

// Labels of the 2L+1 points along an axis `spacing` pixels apart: the full names ("L3 attn") when they fit,
// else "embed" and "L3" at the end of each layer. Returns {point, label} pairs to draw, left to right.
static std::vector<std::pair<int, std::string>> point_labels(const std::vector<std::string>& full, int n_layer,
                                                             float spacing, float font_size, bool* compact) {
    const float scale = font_size / ImGui::GetFontSize();
    float widest = 0;
    for (const std::string& l : full) widest = std::max(widest, ImGui::CalcTextSize(l.c_str()).x * scale);
    std::vector<std::pair<int, std::string>> out;
    *compact = widest + 8 > spacing;
    if (!*compact) {
        for (int p = 0; p < (int)full.size(); p++) out.push_back({p, full[p]});
        return out;
    }
    out.push_back({0, full[0]});
    for (int l = 0; l < n_layer; l++) out.push_back({2 * l + 2, "L" + std::to_string(l)});
    return out;
}

// What the line chart and the heatmap share: the record and the selected token, the points' labels, the y range
// and the layout (the axis as wide as its widest tick or the heatmap's widest row label).
struct resid_frame {
    const gb::record* c = nullptr;
    int T = 0, P = 0, sel = 0;
    const std::vector<float>* base_norm = nullptr; // [2L+1][T] of the baseline run when it is drawn (ghost), else null
    std::vector<std::string> labels;               // the 2L+1 points
    bool log = false;                              // log y-axis
    float hi = 0, l0 = 0, l1 = 0;                  // the largest norm shown; log10 of the smallest and the largest
    char ticks[5][32] = {};                        // the y axis's tick values, bottom to top
    ImDrawList* dl = nullptr;
    ImU32 grid = 0, tc = 0;                        // grid lines, text
    float small = 0, lh = 0, ks = 0;               // small text's size, a line's height, small text's width scale
    ImVec2 avail, o;                               // the room below the panel's header lines, and its corner
    float right_edge = 0, axis_w = 0, chart_h = 0, axis_h = 0;
    ui_context* ui = nullptr;                      // notes where the captions and labels were drawn (tests)
    // a norm's height in the chart as a fraction of it (outside 0..1 when off the axis)
    float ty(float v) const {
        if (log) return l1 > l0 ? (std::log10(std::max(v, 1e-6f)) - l0) / (l1 - l0) : 0.5f;
        return v / (hi > 0 ? hi : 1);
    }
};

// The line chart: x = residual point, one line per token (the selected one on top, its baseline dashed under it).
static void line_chart(const resid_frame& f) {
    const gb::record& c = *f.c;
    const int T = f.T, P = f.P, sel = f.sel;
    const bool ghost = f.base_norm != nullptr;
    const std::vector<float>* base_norm = f.base_norm;
    const std::vector<std::string>& labels = f.labels;
    ImDrawList* dl = f.dl;
    const ImU32 grid = f.grid, tc = f.tc;
    const float small = f.small, lh = f.lh, ks = f.ks;
    const ImVec2 o = f.o;
    const float right_edge = f.right_edge, axis_w = f.axis_w, chart_h = f.chart_h, axis_h = f.axis_h;
    const auto& ticks = f.ticks;
    auto ty = [&](float v) { return f.ty(v); };
    ImVec2 a(o.x + axis_w, o.y + px(4)), z(right_edge - px(4), o.y + chart_h - axis_h);
    dl->AddRectFilled(a, z, IM_COL32(28, 30, 36, 255));
    for (int k = 0; k <= 4; k++) {
        float y = z.y - k / 4.0f * (z.y - a.y);
        dl->AddLine(ImVec2(a.x, y), ImVec2(z.x, y), grid);
        float w = ImGui::CalcTextSize(ticks[k]).x * ks;
        dl->AddText(ImGui::GetFont(), small, ImVec2(a.x - px(6) - w, y - small / 2), tc, ticks[k]);
    }
    // the y title turned upright, shortened when the chart is not as tall as it
    const char* ytitle = "\u2016x\u2016 (L2 norm)";
    if (ImGui::CalcTextSize(ytitle).x * ks > z.y - a.y) ytitle = "\u2016x\u2016";
    const float yt_w = ImGui::CalcTextSize(ytitle).x * ks, yt_bottom = (a.y + z.y) / 2 + yt_w / 2;
    add_text_vertical(dl, ImVec2(o.x, yt_bottom), tc, ytitle, small);
    note_drawn(*f.ui, "residual y caption", ImVec2(o.x, yt_bottom - yt_w), ImVec2(o.x + small, yt_bottom));
    float dx = P > 1 ? (z.x - a.x) / (P - 1) : 0;
    bool compact = false;
    float last_right = -1e30f;
    for (const auto& [p, text] : point_labels(labels, c.n_layer, dx, small, &compact)) {
        float x = a.x + p * dx, w = ImGui::CalcTextSize(text.c_str()).x * ks;
        dl->AddLine(ImVec2(x, a.y), ImVec2(x, z.y), grid);
        float left = std::min(std::max(x - w / 2, o.x), right_edge - w); // never clipped at the ends
        if (left < last_right + px(6)) continue;                         // never overlapping
        dl->AddText(ImGui::GetFont(), small, ImVec2(left, z.y + px(3)), tc, text.c_str());
        last_right = left + w;
    }
    // the x title: the longest of its forms that fits under the axis (centred on it, else from its left end)
    const char* forms[] = {"residual point (Ln = after layer n; hover for each sublayer)", "residual point (Ln = after layer n)",
                           "residual point"};
    const char* xtitle = forms[2];
    for (int i = compact ? 0 : 2; i < 3; i++)
        if (ImGui::CalcTextSize(forms[i]).x * ks <= right_edge - o.x) {
            xtitle = forms[i];
            break;
        }
    const float xtw = ImGui::CalcTextSize(xtitle).x * ks;
    const ImVec2 xt(std::max(o.x, std::min((a.x + z.x - xtw) / 2, right_edge - xtw)), z.y + px(3) + lh);
    dl->AddText(ImGui::GetFont(), small, xt, tc, xtitle);
    note_drawn(*f.ui, "residual x caption", xt, ImVec2(xt.x + xtw, xt.y + small));
    std::vector<ImVec2> pts(P);
    auto point_y = [&](float v) { return z.y - std::min(1.0f, std::max(0.0f, ty(v))) * (z.y - a.y); };
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < T; t++) {
            if ((t == sel) != (pass == 1)) continue; // selected token drawn last, on top
            for (int p = 0; p < P; p++) pts[p] = ImVec2(a.x + p * dx, point_y(c.resid_norm[(size_t)p * T + t]));
            ImU32 col = t == sel ? IM_COL32(255, 190, 60, 255) : viridis_u32(T > 1 ? (float)t / (T - 1) : 0.5f, 0.55f);
            if (t == sel && ghost) { // the baseline under the selected line, so the change is visible
                std::vector<ImVec2> base(P);
                for (int p = 0; p < P; p++) base[p] = ImVec2(a.x + p * dx, point_y((*base_norm)[(size_t)p * T + t]));
                dashed_polyline(dl, base, IM_COL32(200, 200, 200, 230), px(2), px(6), px(4));
            }
            dl->AddPolyline(pts.data(), P, col, 0, t == sel ? px(3) : px(1.2f));
        }
    ImGui::SetCursorScreenPos(a);
    ImGui::InvisibleButton("##chart", ImVec2(std::max(1.0f, z.x - a.x), std::max(1.0f, z.y - a.y)));
    if (ImGui::IsItemHovered() && dx > 0) {
        int p = std::min(P - 1, std::max(0, (int)std::lround((ImGui::GetMousePos().x - a.x) / dx)));
        float v = c.resid_norm[(size_t)p * T + sel];
        if (ghost)
            ImGui::SetTooltip("%s\ntoken %d \u2018%s\u2019: %s (without the ablation %s)", labels[p].c_str(), sel,
                              visible_token(c.pieces[sel]).c_str(), format_number(v).c_str(),
                              format_number((*base_norm)[(size_t)p * T + sel]).c_str());
        else
            ImGui::SetTooltip("%s\ntoken %d \u2018%s\u2019: %s", labels[p].c_str(), sel, visible_token(c.pieces[sel]).c_str(),
                              format_number(v).c_str());
    }
}

// The heatmap: rows = points, columns = tokens (log colour scale); a click selects the token.
static void norm_heatmap(app_state& s, ui_context& ui, const resid_frame& f) {
    const gb::record& c = *f.c;
    const int T = f.T, P = f.P, sel = f.sel;
    const std::vector<std::string>& labels = f.labels;
    ImDrawList* dl = f.dl;
    const ImU32 tc = f.tc;
    const float small = f.small, lh = f.lh, ks = f.ks;
    const ImVec2 o = f.o, avail = f.avail;
    const float right_edge = f.right_edge, axis_w = f.axis_w, chart_h = f.chart_h;
    ImVec2 h0(o.x, o.y + chart_h + px(4));
    float hh = std::max(px(30), o.y + avail.y - h0.y - 2 * lh - px(8));
    ImVec2 ha(h0.x + axis_w, h0.y), hz(right_edge - px(4), h0.y + hh);
    if (ui.hm.front.resid) dl->AddImage((ImTextureID)(intptr_t)ui.hm.front.resid, ha, hz);
    float rh = (hz.y - ha.y) / P, cw = (hz.x - ha.x) / T;
    float last_bottom = -1e30f;
    // row labels: every one that has its line's height, else every k-th; kept inside the heatmap's height (the end
    // ones may shift by half a label) and never overlapping
    for (int p = 0; p < P; p += label_step(P, rh, small + px(1))) {
        float w = ImGui::CalcTextSize(labels[p].c_str()).x * ks;
        float y = std::max(ha.y, std::min(ha.y + (p + 0.5f) * rh - small / 2, hz.y - small));
        if (y < last_bottom) continue;
        const ImVec2 at(ha.x - px(6) - w, y);
        dl->AddText(ImGui::GetFont(), small, at, tc, labels[p].c_str());
        note_drawn(*f.ui, "residual row label " + std::to_string(p), at, ImVec2(at.x + w, at.y + small));
        last_bottom = y + small + px(1);
    }
    // token labels under the columns: every k-th, the selected one highlighted
    std::vector<std::string> toks(T);
    float tok_w = 0;
    for (int t = 0; t < T; t++) {
        toks[t] = short_label(c.pieces[t], 6);
        tok_w = std::max(tok_w, ImGui::CalcTextSize(toks[t].c_str()).x * ks);
    }
    const int tk = label_step(T, cw, tok_w + px(6));
    float last_right = -1e30f;
    for (int t = 0; t < T; t++) {
        if (t % tk != 0 && t != sel) continue;
        float w = ImGui::CalcTextSize(toks[t].c_str()).x * ks;
        float left = std::min(std::max(ha.x + (t + 0.5f) * cw - w / 2, o.x), right_edge - w);
        if (left < last_right + px(4)) continue;
        dl->AddText(ImGui::GetFont(), small, ImVec2(left, hz.y + px(2)), t == sel ? IM_COL32(255, 190, 60, 255) : tc, toks[t].c_str());
        last_right = left + w;
    }
    if (sel >= 0) dl->AddRect(ImVec2(ha.x + sel * cw, ha.y), ImVec2(ha.x + (sel + 1) * cw, hz.y), IM_COL32(255, 190, 60, 255), 0, 0, px(1.5f));
    ImGui::SetCursorScreenPos(ha);
    ImGui::InvisibleButton("##rheat", ImVec2(std::max(1.0f, hz.x - ha.x), std::max(1.0f, hz.y - ha.y)));
    if (ImGui::IsItemHovered()) {
        ImVec2 m = ImGui::GetMousePos();
        int p = std::min(P - 1, std::max(0, (int)((m.y - ha.y) / rh)));
        int t = std::min(T - 1, std::max(0, (int)((m.x - ha.x) / cw)));
        ImGui::SetTooltip("%s, token %d \u2018%s\u2019: %s\nclick: select this token", labels[p].c_str(), t,
                          visible_token(c.pieces[t]).c_str(), format_number(c.resid_norm[(size_t)p * T + t]).c_str());
        if (ImGui::IsMouseClicked(0)) s.sel_token = t;
    }
    ImGui::SetCursorScreenPos(ImVec2(ha.x, hz.y + 2 * lh + px(4)));
    float rmin = s.pixels ? s.pixels->resid_min : 0, rmax = s.pixels ? s.pixels->resid_max : 0;
    char caption[128];
    const std::string lo_s = format_number(rmin), hi_s = format_number(rmax);
    snprintf(caption, sizeof caption, "colour: log \u2016x\u2016, %s (dark) .. %s (bright)", lo_s.c_str(), hi_s.c_str());
    float cap_x = ha.x;
    if (ImGui::CalcTextSize(caption).x * ks > right_edge - cap_x) snprintf(caption, sizeof caption, "log \u2016x\u2016 %s .. %s", lo_s.c_str(), hi_s.c_str());
    if (ImGui::CalcTextSize(caption).x * ks > right_edge - cap_x) cap_x = o.x; // under the row labels too
    const ImVec2 cap(cap_x, hz.y + lh + px(2));
    dl->AddText(ImGui::GetFont(), small, cap, tc, caption);
    note_drawn(ui, "residual colour caption", cap, ImVec2(cap.x + ImGui::CalcTextSize(caption).x * ks, cap.y + small));
}

void panel_residual(app_state& s, ui_context& ui) {
    panel_title("Residual stream norm", "\u2016x\u2016 of every token after each sublayer");
    if (!s.result) return;
    if (draw_parts(s, ui, PART_RESIDUAL)) return; // e.g. model B's stream, or A's against B's
    const run_result& r = *s.result;
    const gb::record& c = r.cap();
    const int T = c.n_tokens, P = 2 * c.n_layer + 1;
    if (c.nonfinite_layer >= 0)
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "NaN/Inf first appears at %s", c.nonfinite_where.c_str());
    resid_frame f;
    f.c = &c, f.T = T, f.P = P, f.log = s.resid_log;
    const int sel = f.sel = query_token(s, T);
    // baseline (no ablation) of the selected token: a grey dashed ghost line
    const bool ghost = r.ablation.any() && r.base && r.base != r.run && r.base->resid_norm.size() == (size_t)P * T;
    const std::vector<float>* base_norm = f.base_norm = ghost ? &r.base->resid_norm : nullptr;
    // the selected token's line, the log axis's checkbox at the right of it, and the ablation's ghost line
    ImGui::AlignTextToFramePadding();
    ImGui::TextColored(ImVec4(1, 0.75f, 0.25f, 1), "\u2014 token %d \u2018%s\u2019", sel, visible_token(c.pieces[sel]).c_str());
    const float box_w = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("log y-axis").x;
    if (room_right_of_item() > box_w + px(12)) ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - box_w);
    ImGui::Checkbox("log y-axis", &s.resid_log);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("a log scale: without LayerNorm the norms explode");
    if (ghost) {
        const char* ghost_line = "- - - same token without the ablation";
        if (ImGui::CalcTextSize(ghost_line).x + px(12) < room_right_of_item()) ImGui::SameLine();
        ImGui::TextDisabled("%s", ghost_line);
    }
    f.labels = gb::resid_labels(c.n_layer, c.n_source > 0);
    float lo = 1e30f, hi = -1e30f;
    for (float v : c.resid_norm)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (ghost)
        for (int p = 0; p < P; p++) {
            float v = (*base_norm)[(size_t)p * T + sel];
            if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        }
    if (hi < lo) return;
    f.hi = hi, f.l0 = std::log10(std::max(lo, 1e-6f)), f.l1 = std::log10(std::max(hi, 1e-6f));
    f.dl = ImGui::GetWindowDrawList();
    f.grid = IM_COL32(70, 70, 80, 255), f.tc = IM_COL32(190, 190, 190, 255);
    f.ui = &ui;
    f.small = std::round(ImGui::GetFontSize() * 0.82f), f.lh = ImGui::GetTextLineHeight();
    f.ks = f.small / ImGui::GetFontSize(); // text width scale at the small size
    f.avail = ImGui::GetContentRegionAvail();
    f.o = ImGui::GetCursorScreenPos();
    f.right_edge = f.o.x + f.avail.x - px(2);

    // y tick values first: the axis is as wide as its widest tick (and the heatmap's row labels)
    // (one format on every tick: on a linear axis one SI unit for all, 1.52 M rather than 1.5e+06 over 762262)
    float tick_w = 0;
    std::vector<double> tick_v(5);
    for (int k = 0; k <= 4; k++) {
        const float t = k / 4.0f;
        tick_v[k] = f.log ? std::pow(10.0f, f.l0 + t * (f.l1 - f.l0)) : t * hi;
    }
    std::vector<std::string> tick_s = f.log ? std::vector<std::string>() : format_ticks(tick_v);
    for (int k = 0; k <= 4; k++) {
        snprintf(f.ticks[k], sizeof f.ticks[k], "%s", f.log ? format_number(tick_v[k]).c_str() : tick_s[k].c_str());
        tick_w = std::max(tick_w, ImGui::CalcTextSize(f.ticks[k]).x * f.ks);
        note_text(ui, "residual tick " + std::to_string(k), f.ticks[k]);
    }
    float row_label_w = 0;
    for (const std::string& l : f.labels) row_label_w = std::max(row_label_w, ImGui::CalcTextSize(l.c_str()).x * f.ks);
    const float title_w = f.small + px(4);
    f.axis_w = title_w + std::max(tick_w, row_label_w) + px(8);
    // the chart gets 55 % of the room, less where that leaves the heatmap too short to label each of its rows (the
    // chart keeps 70 px at 100 %); the layout is asked for the room both want
    f.axis_h = 2 * f.lh + px(4);
    const float heat_rows = P * (f.small + px(2)), heat_extra = 2 * f.lh + px(12), chart_least = px(70) + f.axis_h;
    f.chart_h = std::max(chart_least, std::min(f.avail.y * 0.55f, f.avail.y - heat_rows - heat_extra));
    ui.content_h["Residual wanted"] = ImGui::GetCursorPosY() + px(40) + chart_least + heat_rows + heat_extra;
    line_chart(f);
    norm_heatmap(s, ui, f);
}

} // namespace gbui
