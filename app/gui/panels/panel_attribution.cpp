// Attribution: direct logit attribution of logit(target) - logit(contrast) at the selected token to every head
// (an L x H heatmap, diverging colours centred at 0), every layer's attention bias and MLP, the embeddings and
// the final norm's bias (bars), with the check that the parts add up to the run's own logit difference; and the
// token saliency of the same difference (gradient x input or integrated gradients) that shades the prompt's chips
// (an image classifier: drawn over its patches here; the kinds without direct logit attribution get it alone).
//
// Sections: pickers | saliency | head heatmap | component bars | panel
#include <algorithm>
#include <cmath>

#include "tab_inputs.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// Pickers: target and contrast on one line when they fit, else two
// ---------------------------------------------------------------------------------------------
static void pickers(app_state& s, ui_context& ui, int target, int contrast) {
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    const run_result& r = *s.result;
    const gb::tokenizer& tok = r.model->tok;
    const int V = r.cap().vocab;
    // the combos as wide as their tokens need at this text size (at least the 130 px they had at 100 %)
    const ImGuiStyle& st = ImGui::GetStyle();
    const float tw = std::max(ImGui::CalcTextSize(quoted(tok, ain.target >= 0 ? ain.target : target).c_str()).x,
                              ImGui::CalcTextSize(quoted(tok, ain.contrast >= 0 ? ain.contrast : contrast).c_str()).x);
    const float combo_w = std::clamp(tw + ImGui::GetFrameHeight() + 2 * st.FramePadding.x + px(4), 130.0f, px(220)), one_w = token_picker_w("contrast", combo_w) + 24;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("target  ");
    ImGui::SameLine();
    token_picker("attribution target", &ain.target, "top-1 " + quoted(tok, target), r.pred.top, tok, V, 0, ui, combo_w);
    if (room_right_of_item() > one_w) ImGui::SameLine(0, 24);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("contrast");
    ImGui::SameLine();
    token_picker("attribution contrast", &ain.contrast, "next best " + quoted(tok, contrast), r.pred.top, tok, V, 1, ui, combo_w);
    for (int k = 0; k < 2; k++)
        if (!ui.typed_error[k].empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", ui.typed_error[k].c_str());
}

// ---------------------------------------------------------------------------------------------
// Saliency: the method, and what integrated gradients' sum leaves out
// ---------------------------------------------------------------------------------------------
static void saliency_controls(app_state& s, ui_context& ui, const attribution_output* ao) {
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("saliency");
    ImGui::SameLine();
    int ig = ain.saliency_steps > 0;
    if (ImGui::RadioButton("gradient \u00d7 input", &ig, 0)) ain.saliency_steps = 0;
    remember_item(ui, "saliency gradient x input");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("each token's gradient times its embedding (the residual stream at point 0)");
    ImGui::SameLine();
    if (ImGui::RadioButton("integrated gradients", &ig, 1)) ain.saliency_steps = ain.saliency_ig_steps;
    remember_item(ui, "saliency integrated gradients");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the gradient averaged along the embeddings scaled from 0 to themselves (midpoint steps), times\n"
                          "the embeddings: the tokens' values sum to metric(x) - metric(0) up to the gap shown");
    if (ig) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(px(140));
        if (ImGui::SliderInt("steps", &ain.saliency_ig_steps, 4, 256, "%d steps", ImGuiSliderFlags_Logarithmic))
            ain.saliency_steps = ain.saliency_ig_steps;
        remember_item(ui, "saliency steps");
    }
    if (!ao || ao->steps == 0 || ao->saliency.empty()) return;
    ImGui::TextDisabled("metric(x) \u2212 metric(0) = %+.4f, completeness gap %+.3g (%d steps)", ao->change, ao->gap, ao->steps);
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("The norms make the metric along the path nearly flat with a spike near 0, so the gap does not "
                        "vanish at small N, least of all with RMSNorm: more steps close it, slowly.");
    ImGui::PopTextWrapPos();
}

// The kinds without direct logit attribution (encoders, image classifiers, encoder–decoders): the saliency alone
static void saliency_only(app_state& s, ui_context& ui, const attribution_output& ao) {
    const run_result& r = *ao.from;
    const gb::tokenizer& tok = r.model->tok;
    const gb::attribution& a = ao.attr;
    if (a.contrast >= 0)
        ImGui::Text("logit(%s) \u2212 logit(%s) = %.4f", quoted(tok, a.target).c_str(), quoted(tok, a.contrast).c_str(), ao.metric);
    else
        ImGui::Text("logit(%s) = %.4f", quoted(tok, a.target).c_str(), ao.metric);
    if (ao.saliency.empty()) return;
    if (r.view) {
        image_saliency(s, ui, ao.saliency);
        return;
    }
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled(run_kind(r).input == gb::INPUT_SOURCE_TARGET ? (r.stack == 0 ? "The source's chips are shaded by each source token's share (show the "
                                                    "decoder for the target's own)."
                                                  : "The target's chips are shaded by each target token's share (show the "
                                                    "encoder for the source's).")
                                  : "The prompt's chips are shaded by each token's share: red raises the difference, "
                                    "blue lowers it.");
    ImGui::PopTextWrapPos();
}

// ---------------------------------------------------------------------------------------------
// Head heatmap: L x H cells, blue (lowers the difference) - white (0) - red (raises it); click opens the head
// ---------------------------------------------------------------------------------------------
// (fill: presenting, cells as wide and as tall as fill size, up to twice as wide as tall; else square)
static void head_heatmap(app_state& s, ui_context& ui, const gb::attribution& a, ImVec2 size, bool fill) {
    const int L = a.n_layer, H = a.n_head;
    double vmax = 0;
    for (double v : a.heads) vmax = std::max(vmax, std::fabs(v));
    if (vmax == 0) vmax = 1;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const float label_w = ImGui::CalcTextSize("L00").x + 8, head_h = ImGui::GetTextLineHeight() + 2;
    const float legend_h = px(6) + px(12) + px(4) + ImGui::GetTextLineHeight(); // the colour bar below (colour_bar's height)
    float cw = std::max(6.0f, std::min(px(fill ? 160 : 64), (size.x - label_w) / H));
    float ch = std::max(6.0f, std::min(px(fill ? 160 : 64), (size.y - head_h - legend_h) / L));
    if (!fill) cw = ch = std::min(cw, ch);
    else cw = std::min(cw, 2 * ch), ch = std::min(ch, 1.2f * cw);
    char b[32];
    const ImU32 lc = IM_COL32(170, 170, 180, 255);
    snprintf(b, sizeof b, "H%d", H - 1);
    const bool with_h = ImGui::CalcTextSize(b).x + 2 <= cw;
    snprintf(b, sizeof b, "%d", H - 1);
    const int hk = with_h ? 1 : label_step(H, cw, ImGui::CalcTextSize(b).x + 4);
    for (int h = 0; h < H; h += hk) {
        snprintf(b, sizeof b, with_h ? "H%d" : "%d", h);
        dl->AddText(ImVec2(o.x + label_w + h * cw + (cw - ImGui::CalcTextSize(b).x) / 2, o.y), lc, b);
    }
    const int lk = label_step(L, ch, ImGui::GetTextLineHeight());
    int hover_l = -1, hover_h = -1;
    for (int l = 0; l < L; l++) {
        if (l % lk == 0) {
            snprintf(b, sizeof b, "L%d", l);
            dl->AddText(ImVec2(o.x, o.y + head_h + l * ch + (ch - ImGui::GetTextLineHeight()) / 2), lc, b);
        }
        for (int h = 0; h < H; h++) {
            const double v = a.heads[(size_t)l * H + h];
            ImVec2 p0(o.x + label_w + h * cw, o.y + head_h + l * ch), p1(p0.x + cw - 2, p0.y + ch - 2);
            ImU32 c = diverging_u32((float)(v / vmax));
            dl->AddRectFilled(p0, p1, c);
            snprintf(b, sizeof b, "%.2f", std::fabs(v) < 0.005 ? 0.0 : v); // no "-0.00"
            if (ImGui::CalcTextSize(b).x + 4 <= cw - 2 && ch >= ImGui::GetTextLineHeight() + 4)
                dl->AddText(ImVec2(p0.x + (cw - 2 - ImGui::CalcTextSize(b).x) / 2,
                                   p0.y + (ch - 2 - ImGui::GetTextLineHeight()) / 2), text_on(c), b);
            if (l == s.sel_layer && h == s.sel_head)
                dl->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), IM_COL32(255, 190, 60, 255), 0, 0, 2.0f);
            ui.widgets["attribution head " + std::to_string(l) + "." + std::to_string(h)] = ImVec4(p0.x, p0.y, p1.x, p1.y);
            if (ImGui::IsMouseHoveringRect(p0, p1) && ImGui::IsWindowHovered()) hover_l = l, hover_h = h;
        }
    }
    if (hover_l >= 0) {
        ImGui::BeginTooltip();
        ImGui::Text("L%d H%d writes %+.4f into the logit difference", hover_l, hover_h, a.heads[(size_t)hover_l * H + hover_h]);
        ImGui::TextDisabled("click: open its pattern in the Head tab");
        ImGui::EndTooltip();
        if (ImGui::IsMouseClicked(0)) s.sel_layer = hover_l, s.sel_head = hover_h, s.tab = TAB_HEAD;
    }
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%+.3g", -vmax);
    snprintf(hi, sizeof hi, "%+.3g", vmax);
    const float grid_w = label_w + H * cw;
    colour_bar(dl, ImVec2(o.x + label_w, o.y + head_h + L * ch + px(6)), std::max(px(140), std::min(grid_w - label_w, px(260))), true,
               lo, "0", hi);
    ImGui::Dummy(ImVec2(std::max(grid_w, label_w + px(140)), head_h + L * ch + legend_h));
}

// ---------------------------------------------------------------------------------------------
// Component bars: one row each, zero in the middle, red raises the difference and blue lowers it
// ---------------------------------------------------------------------------------------------
struct bar_row {
    std::string label;
    double v;
    bool dim;   // a derived row (the sum of a layer's heads), shown lighter
    bool bold;  // the totals
};

// (fit_h > 0: rows as tall as share fit_h, down to a line's height, so that every row is in view)
// (presenting, fit_h > 0, a layer's heads and attention bias are one row, its attention: the map beside gives the heads)
static void component_bars(const gb::attribution& a, float fit_h) {
    const int L = a.n_layer, H = a.n_head;
    std::vector<bar_row> rows;
    rows.push_back({"embeddings", a.embed, false, false});
    for (int l = 0; l < L; l++) {
        double heads = 0;
        for (int h = 0; h < H; h++) heads += a.heads[(size_t)l * H + h];
        if (fit_h > 0) {
            rows.push_back({"L" + std::to_string(l) + " attention", heads + (a.has_attn_bias ? a.attn_bias[l] : 0.0), false, false});
            rows.push_back({"L" + std::to_string(l) + " MLP", a.mlp[l], false, false});
            continue;
        }
        rows.push_back({"L" + std::to_string(l) + " heads (sum)", heads, true, false});
        if (a.has_attn_bias) rows.push_back({"L" + std::to_string(l) + " attn bias", a.attn_bias[l], false, false});
        rows.push_back({"L" + std::to_string(l) + " MLP", a.mlp[l], false, false});
    }
    if (a.has_final_bias) rows.push_back({"final-norm bias", a.bias, false, false});
    rows.push_back({"sum of the parts", a.sum(), false, true});
    rows.push_back({"logit difference", a.total, false, true});
    double vmax = 0;
    for (const bar_row& r : rows) vmax = std::max(vmax, std::fabs(r.v));
    if (vmax == 0) vmax = 1;
    float row_h = ImGui::GetTextLineHeight() + 3;
    if (fit_h > 0) row_h = std::max(ImGui::GetTextLineHeight(), std::min(row_h, fit_h / rows.size()));
    const float label_w = ImGui::CalcTextSize("L00 heads (sum)").x + 10, value_w = ImGui::CalcTextSize("-00.000").x + 8;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x, bar_w = std::max(40.0f, w - label_w - value_w - 4);
    const float zero = o.x + label_w + bar_w / 2;
    for (size_t i = 0; i < rows.size(); i++) {
        const bar_row& r = rows[i];
        const float y = o.y + i * row_h;
        if (r.bold && !rows[i - 1].bold) dl->AddLine(ImVec2(o.x, y), ImVec2(o.x + w, y), IM_COL32(90, 90, 100, 255));
        ImU32 tc = r.dim ? IM_COL32(140, 140, 150, 255) : r.bold ? IM_COL32(255, 215, 120, 255) : IM_COL32(215, 215, 220, 255);
        dl->AddText(ImVec2(o.x, y + 1), tc, r.label.c_str());
        float len = (float)(r.v / vmax) * bar_w / 2;
        ImU32 bc = r.v >= 0 ? IM_COL32(214, 96, 77, r.dim ? 120 : 255) : IM_COL32(67, 147, 195, r.dim ? 120 : 255);
        dl->AddRectFilled(ImVec2(std::min(zero, zero + len), y + 3), ImVec2(std::max(zero, zero + len), y + row_h - 3), bc);
        char b[32];
        snprintf(b, sizeof b, "%+.3f", r.v);
        dl->AddText(ImVec2(o.x + w - ImGui::CalcTextSize(b).x - 2, y + 1), tc, b);
    }
    dl->AddLine(ImVec2(zero, o.y), ImVec2(zero, o.y + rows.size() * row_h), IM_COL32(200, 200, 200, 160));
    ImGui::Dummy(ImVec2(w, rows.size() * row_h));
}

// ---------------------------------------------------------------------------------------------
// Panel
// ---------------------------------------------------------------------------------------------
void panel_attribution(app_state& s, ui_context& ui) {
    const bool dla = !s.model || gb::offers(s.model->config, gb::FEATURE_ATTRIBUTION);
    tab_hint(dla ? "How much each head, MLP and bias writes into logit(target) \u2212 logit(contrast) at the selected "
                   "token; the prompt's chips are shaded by each token's saliency for it (red raises it, blue lowers it)."
                 : "Which inputs logit(target) \u2212 logit(contrast) leans on: each token's (or patch's) gradient "
                   "\u00d7 input or integrated gradients, from the backward pass (red raises it, blue lowers it).");
    if (!s.result) return;
    const run_result& r = *s.result;
    int target = 0, contrast = -1;
    attribution_tokens(s, &target, &contrast);
    pickers(s, ui, target, contrast);
    const int pos = attribution_position(s);
    const gb::record& at = r.lm_record(); // the record whose logits the difference reads
    // presenting, the pickers and the sum are the controls: the rest of the height is the picture's
    if (!s.presenting) {
        ImGui::Text("at %s %d %s", r.view ? "position" : "token", pos, at.pieces[pos].c_str());
        ImGui::SameLine();
        ImGui::TextDisabled(r.view ? "(the classifier reads [CLS])"
                            : source_shown(r) ? "(the decoder's last target token; show the decoder to pick another)"
                                              : "(click a token chip in the Prompt to move; the prediction is for the token after it)");
        if (gb::offers(r.model->config, gb::FEATURE_GRADIENTS))
            saliency_controls(s, ui, output_of<attribution_output>(s, ANALYSIS_ATTRIBUTION).get());
    }

    const analysis_status& st = s.analysis[ANALYSIS_ATTRIBUTION];
    const std::string& want = s.analysis_want[ANALYSIS_ATTRIBUTION];
    if (!st.error.empty() && st.error_key == want) { // e.g. no-residual: the core says why there is nothing to split
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    const attribution_output* ao = output_of<attribution_output>(s, ANALYSIS_ATTRIBUTION).get();
    if (!ao) {
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "computing...");
        return;
    }
    if (!ao->dla) {
        if (ao->key != want) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "updating...");
        saliency_only(s, ui, *ao);
        return;
    }
    const gb::attribution& a = ao->attr;
    const gb::tokenizer& atok = ao->from->model->tok;
    // the numbers the parts must add up to
    const double diff = a.total, sum = a.sum();
    ImGui::Text("logit(%s) \u2212 logit(%s) = %.4f", quoted(atok, a.target).c_str(), quoted(atok, a.contrast).c_str(), diff);
    ImGui::SameLine();
    const bool adds_up = std::fabs(sum - diff) <= 1e-3 * std::max(1.0, std::fabs(diff));
    ImGui::TextColored(adds_up ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.5f, 0.5f, 1), "  sum of the parts %.4f (%s)", sum,
                       adds_up ? "adds up" : "does not add up");
    if (ao->key != want) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "  updating...");
    }

    // heatmap on the left, bars on the right (the bars scroll when the model has many layers)
    // (presenting: the map takes 64 % of the width, and the bars' rows share the height, so that both are whole)
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const ImVec2 from = ImGui::GetCursorScreenPos();
    const float left_w = s.presenting ? avail.x * 0.64f : std::min(avail.x * 0.55f, std::max(avail.x * 0.45f, 60.0f * a.n_head + 40));
    ImGui::BeginChild("##attr_heads", ImVec2(left_w, avail.y), false, ImGuiWindowFlags_NoScrollbar);
    ImGui::TextDisabled("heads (rows = layers); click one to open it");
    head_heatmap(s, ui, a, ImGui::GetContentRegionAvail(), s.presenting);
    const ImVec2 map_end = ImGui::GetItemRectMax();
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("##attr_bars", ImVec2(0, avail.y));
    ImGui::TextDisabled("each part of the stream");
    component_bars(a, s.presenting ? ImGui::GetContentRegionAvail().y - px(4) : 0.0f);
    const ImVec2 bars_end = ImGui::GetItemRectMax();
    const bool bars_whole = ImGui::GetScrollMaxY() <= 0;
    ImGui::EndChild();
    // the picture: the map, and the bars beside it when they are whole
    note_drawn(ui, "picture", from, bars_whole ? ImVec2(bars_end.x, std::max(map_end.y, bars_end.y)) : map_end);
}

} // namespace gbui
