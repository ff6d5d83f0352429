// Logit lens: a (2L+1) x T grid (rows = residual points, columns = prompt tokens); each cell shows the token the
// model would predict from the stream there, coloured by its probability or by a chosen target token's. The grid
// scrolls both ways with its row labels and token headers kept in view; only visible cells are drawn.
#include <algorithm>
#include <cmath>

#include <imgui_internal.h> // SetNextWindowScroll

#include "tab_inputs.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

// s cut (on UTF-8 boundaries, with "…") to fit `room` pixels at font size fs.
static std::string fit_text(const std::string& s, float room, float fs) {
    const float scale = fs / ImGui::GetFontSize();
    if (ImGui::CalcTextSize(s.c_str()).x * scale <= room) return s;
    std::string cut = s;
    while (!cut.empty()) {
        size_t i = cut.size() - 1;
        while (i > 0 && ((unsigned char)cut[i] & 0xC0) == 0x80) i--;
        cut.resize(i);
        if (ImGui::CalcTextSize((cut + "\u2026").c_str()).x * scale <= room) return cut + "\u2026";
    }
    return "";
}

static void status_line(const app_state& s, const lens_output* lo) {
    const analysis_status& st = s.analysis[ANALYSIS_LENS];
    const bool stale = lo && lo->key != s.analysis_want[ANALYSIS_LENS];
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_LENS]) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        ImGui::PopTextWrapPos();
    }
    else if (st.busy || stale)
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "computing the lens... %.0f%%", st.progress * 100);
    else if (lo)
        ImGui::TextDisabled("%d points x %d tokens in %.0f ms", lo->lens.n_points, lo->lens.n_tokens, lo->ms);
}

// The visible cells, each its top-1 token coloured by its probability (or the target's, outlined where it is the
// top-1), and a line under each layer's MLP row.
static void draw_cells(const grid_view& g, const lens_output* lo, float fs, ui_context& ui) {
    const gb::lens_result& l = lo->lens;
    const gb::tokenizer& tok = lo->from->model->tok;
    const int T = l.n_tokens, K = l.k;
    const bool by_target = lo->target >= 0;
    ImDrawList* dl = g.dl;
    const ImVec2 o = g.o, wp = g.wp;
    const float label_w = g.label_w, header_h = g.header_h, cw = g.cw, ch = g.ch;
    const int t0 = g.c0, t1 = g.c1, p0 = g.r0, p1 = g.r1;
    const int hp = g.hover_r, ht = g.hover_c; // the hovered cell (not over the sticky labels)
    // cells
    for (int p = p0; p < p1; p++)
        for (int t = t0; t < t1; t++) {
            const size_t at = ((size_t)p * T + t) * K;
            const int top = l.top_ids[at];
            const float v = by_target ? l.target_prob[(size_t)p * T + t] : l.top_probs[at];
            ImVec2 a(o.x + label_w + t * cw, o.y + header_h + p * ch), z(a.x + cw - px(2), a.y + ch - px(2));
            ImU32 bg = viridis_u32(v);
            dl->AddRectFilled(a, z, bg);
            if (by_target && top == lo->target) dl->AddRect(a, z, IM_COL32(255, 190, 60, 255), 0, 0, px(2));
            if (p == hp && t == ht) dl->AddRect(a, z, IM_COL32(255, 255, 255, 255), 0, 0, px(1.5f));
            std::string txt = fit_text(visible_token(gb::token_text(tok, top)), cw - px(8), fs);
            dl->AddText(ImGui::GetFont(), fs, ImVec2(a.x + px(4), a.y + (ch - px(2) - fs) / 2), text_on(bg), txt.c_str());
            ui.widgets["lens cell " + std::to_string(p) + "." + std::to_string(t)] = ImVec4(a.x, a.y, z.x, z.y);
        }
    // layer separators: a thin line under each MLP row
    for (int p = std::max(2, p0); p < p1; p += 1)
        if (p % 2 == 0) {
            float y = o.y + header_h + (p + 1) * ch - px(1);
            dl->AddLine(ImVec2(wp.x + label_w, y), ImVec2(o.x + label_w + T * cw, y), IM_COL32(20, 20, 24, 255), px(2));
        }
}

// Sticky token headers (scroll sideways with the cells; sel_t's in gold) and row labels (scroll up and down with them).
static void draw_labels(const grid_view& g, const lens_output* lo, int sel_t, ui_context& ui) {
    const gb::lens_result& l = lo->lens;
    const gb::record& rec = lo->from->lm_record();
    const int P = l.n_points;
    const float font = ImGui::GetFontSize();
    ImDrawList* dl = g.dl;
    const ImVec2 o = g.o, wp = g.wp, ws = g.ws;
    const float label_w = g.label_w, header_h = g.header_h, cw = g.cw, ch = g.ch;
    const int t0 = g.c0, t1 = g.c1, p0 = g.r0, p1 = g.r1;
    const ImU32 panel_bg = ImGui::GetColorU32(ImGuiCol_WindowBg, 1.0f) | IM_COL32_A_MASK;
    dl->AddRectFilled(ImVec2(wp.x, wp.y), ImVec2(wp.x + ws.x, wp.y + header_h), panel_bg);
    for (int t = t0; t < t1; t++) {
        float x = o.x + label_w + t * cw;
        std::string h = fit_text(visible_token(rec.pieces[t]), cw - px(8), font);
        ImU32 c = t == sel_t ? IM_COL32(255, 190, 60, 255) : IM_COL32(200, 200, 210, 255);
        dl->AddText(ImVec2(x + px(4), wp.y + px(3)), c, h.c_str());
        note_drawn(ui, "lens column " + std::to_string(t), ImVec2(x, wp.y), ImVec2(x + cw - px(2), wp.y + header_h));
        if (t == sel_t) dl->AddLine(ImVec2(x, wp.y + header_h - px(2)), ImVec2(x + cw - px(2), wp.y + header_h - px(2)), c, px(2));
    }
    dl->AddRectFilled(ImVec2(wp.x, wp.y + header_h), ImVec2(wp.x + label_w, wp.y + ws.y), panel_bg);
    for (int p = p0; p < p1; p++) {
        float y = o.y + header_h + p * ch + (ch - px(2) - ImGui::GetTextLineHeight()) / 2;
        if (y < wp.y + header_h - px(2)) continue;
        ImU32 c = p == P - 1 ? IM_COL32(255, 215, 120, 255) : IM_COL32(170, 170, 180, 255); // the model's own output row
        dl->AddText(ImVec2(wp.x + px(4), y), c, l.points[p].c_str());
        const float bottom = y + ImGui::GetTextLineHeight();
        if (bottom <= wp.y + ImGui::GetWindowContentRegionMax().y) // above the scroll bar: in view
            note_drawn(ui, "lens row " + std::to_string(p), ImVec2(wp.x, y), ImVec2(wp.x + label_w, bottom));
    }
    dl->AddRectFilled(wp, ImVec2(wp.x + label_w, wp.y + header_h), panel_bg);
    dl->AddText(ImVec2(wp.x + px(4), wp.y + px(3)), IM_COL32(120, 120, 130, 255), "point");
    note_drawn(ui, "lens grid", wp, ImVec2(wp.x + ws.x, wp.y + ws.y));
}

// The hovered cell (hp, ht): the k tokens the stream there predicts; a click colours every cell by its top-1.
static void cell_tooltip(app_state& s, const lens_output* lo, int hp, int ht) {
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    const gb::lens_result& l = lo->lens;
    const gb::record& rec = lo->from->lm_record();
    const gb::tokenizer& tok = lo->from->model->tok;
    const int T = l.n_tokens, K = l.k;
    const bool by_target = lo->target >= 0;
    if (hp >= 0) {
        const size_t at = ((size_t)hp * T + ht) * K;
        ImGui::BeginTooltip();
        ImGui::Text("%s, token %d %s: the next token would be", l.points[hp].c_str(), ht, quoted(tok, rec.tokens[ht]).c_str());
        ImGui::Separator();
        for (int j = 0; j < K; j++) ImGui::Text("%-3d %6.4f  %s", j + 1, l.top_probs[at + j], quoted(tok, l.top_ids[at + j]).c_str());
        if (by_target) {
            ImGui::Separator();
            ImGui::Text("target %s: %.4f", quoted(tok, lo->target).c_str(), l.target_prob[(size_t)hp * T + ht]);
        }
        ImGui::TextDisabled("click: colour every cell by %s", quoted(tok, l.top_ids[at]).c_str());
        ImGui::EndTooltip();
        if (ImGui::IsMouseClicked(0)) lin.target = l.top_ids[at];
    }
}

// The legend: what a colour means, and which row is the model's own output.
static void legend(const lens_output* lo) {
    const gb::lens_result& l = lo->lens;
    const int P = l.n_points;
    const bool by_target = lo->target >= 0;
    ImVec2 la = ImGui::GetCursorScreenPos();
    la.y += px(4);
    float used = colour_bar(ImGui::GetWindowDrawList(), la, px(220), false, "0", "0.5", "1");
    const char* what = by_target ? "probability of the target token" : "probability of the cell's top-1";
    ImGui::GetWindowDrawList()->AddText(ImVec2(la.x + px(236), la.y - px(2)), IM_COL32(200, 200, 200, 255), what);
    ImGui::GetWindowDrawList()->AddText(ImVec2(la.x + px(236), la.y + ImGui::GetTextLineHeight() - px(2)), IM_COL32(150, 150, 160, 255),
                                        ("last row (" + l.points[P - 1] + ") = the model's own prediction").c_str());
    ImGui::Dummy(ImVec2(1, used + px(4)));
}

void panel_lens(app_state& s, ui_context& ui) {
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    if (draw_parts(s, ui, PART_LENS)) return; // e.g. the lens of models A and B, where they first disagree
    // what the readout is: the next token (decoders), the masked-LM head's filler (encoders), a class (images)
    const gb::kind_info& k = gb::kind_table(s.model ? gb::kind_of(s.model->config) : gb::KIND_DECODER);
    tab_hint(k.input == gb::INPUT_SOURCE_TARGET ? "What the decoder's stream at each point (rows) and target token (columns) predicts as the next "
                             "target token. \"self-attn\" is after the masked self-attention; \"cross+mlp\" adds the "
                             "cross-attention (the source) and the MLP. Click a cell, or a row of Next token, to colour "
                             "every cell by that token."
             : k.output == gb::OUTPUT_CLASSES ? "Which class the stream at each point (rows) and position (columns) reads as, through the final "
                              "norm and the classifier ([CLS]'s column is the prediction). Click a cell, or a row of Image "
                              "classes, to colour every cell by that class."
             : k.output == gb::OUTPUT_FILL_MASK ? "What the masked-LM head reads at each point (rows) and position (columns). Click a cell, "
                                       "or a row of Fill mask, to colour every cell by that token."
                                     : "What the stream at each point (rows) and token (columns) predicts next. Click a cell, or "
                                       "a row of Next token, to colour every cell by that token.");
    const lens_output* lo = output_of<lens_output>(s, ANALYSIS_LENS).get();
    if (!lo) {
        status_line(s, lo);
        if (!s.analysis[ANALYSIS_LENS].busy && s.analysis[ANALYSIS_LENS].error.empty()) ImGui::TextDisabled("no result yet");
        return;
    }
    const gb::lens_result& l = lo->lens;
    const gb::tokenizer& tok = lo->from->model->tok;
    const int P = l.n_points, T = l.n_tokens;
    const bool by_target = lo->target >= 0;

    // what the colour means, and the way back to the default
    if (by_target) {
        ImGui::Text("colour: probability of %s", quoted(tok, lo->target).c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("clear target")) lin.target = -1;
        remember_item(ui, "lens clear target");
    } else {
        ImGui::Text("colour: probability of each cell's own top-1 token");
    }
    ImGui::SameLine();
    status_line(s, lo);

    // geometry: rows as tall as fit (20..34 px), columns wide enough for a short token (50 px) or wider
    const float font = ImGui::GetFontSize();
    float label_w = 0;
    for (const std::string& p : l.points) label_w = std::max(label_w, ImGui::CalcTextSize(p.c_str()).x);
    label_w += px(14);
    const float legend_h = px(12 + 4) + ImGui::GetTextLineHeight() + px(8);
    const float header_h = ImGui::GetTextLineHeight() + px(8);
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float grid_h = std::max(px(60), avail.y - legend_h);
    const float scroll_room = ImGui::GetStyle().ScrollbarSize; // a scrollbar may take this much
    const float cw = std::max(px(50), std::min(px(120), (avail.x - label_w - scroll_room) / T));
    const bool wide = label_w + T * cw > avail.x - scroll_room; // a horizontal scroll bar takes room under the rows
    // rows down to the text's height (and a little) so that every point is in view, the model's own (the last)
    // included; a deep model's rows scroll
    const float ch = std::max(std::min(px(20), font + px(3)), std::min(px(34), (grid_h - header_h - (wide ? scroll_room : 0.0f)) / P));
    const float fs = std::min(font, std::max(px(12), ch - px(6)));

    // the grid opens (the tab, or a new lens) scrolled to its end both ways: the last position's last row, the
    // model's own prediction, is in view
    const bool opened = ImGui::GetFrameCount() - ui.lens_drawn_frame > 1 || ui.lens_scrolled_for != lo->key;
    ui.lens_drawn_frame = ImGui::GetFrameCount(), ui.lens_scrolled_for = lo->key;
    if (opened) ImGui::SetNextWindowScroll(ImVec2(label_w + T * cw, header_h + P * ch));
    // points are rows, tokens columns
    // rows that overflow the grid by less than the horizontal scroll bar's height would hide under it without a
    // vertical scroll bar (ImGui counts that bar's room only for the scrolling): ask for one whenever they overflow
    const bool tall = header_h + P * ch > grid_h - scroll_room;
    const grid_view g = begin_grid("##lens_grid", ImVec2(avail.x, grid_h), label_w, header_h, cw, ch, P, T,
                                   tall ? ImGuiWindowFlags_AlwaysVerticalScrollbar : 0);
    // an encoder–decoder showing its encoder selects a source token: the lens (of the decoder) marks its last row
    const bool other_stack = source_shown(*lo->from);
    const int sel_t = other_stack ? T - 1 : query_token(s, T);
    draw_cells(g, lo, fs, ui);
    draw_labels(g, lo, sel_t, ui);
    cell_tooltip(s, lo, g.hover_r, g.hover_c);
    end_grid(g);
    legend(lo);
    // the picture: the grid as far as its cells reach (a narrow one leaves the panel's right empty), and the legend
    const float pic_w = std::min(g.ws.x, label_w + T * cw + (tall ? scroll_room : 0.0f));
    note_drawn(ui, "picture", g.wp, ImVec2(g.wp.x + pic_w, ImGui::GetItemRectMax().y));
}

} // namespace gbui
