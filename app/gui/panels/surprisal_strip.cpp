// The surprisal strip under the prompt's chips: each token's -log p given the tokens before it, as a bar under its
// chip coloured on viridis from 0 to ln V nats (the loss of a uniform guess over the vocabulary), the model's
// top guess on hover, and the mean per token and per UTF-8 byte on the line above the chips. The numbers are the
// worker's (run_result::surprisal): the UI thread only draws them.
#include <imgui.h>

#include <cmath>

#include "number_format.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

static const gb::surprisal_result* shown_surprisal(const app_state& s) {
    if (!s.result || !s.result->surprisal) return nullptr;
    const gb::surprisal_result* sp = s.result->surprisal.get();
    return sp->n_tokens == s.result->cap().n_tokens ? sp : nullptr;
}

bool surprisal_shown(const app_state& s) { return shown_surprisal(s) != nullptr; }

// The top of the colour scale: ln V, what a uniform guess over the vocabulary loses on every token.
static float scale_top(const app_state& s) { return (float)std::log((double)std::max(2, s.model->config.vocab_size)); }

void surprisal_header(const app_state& s, ui_context& ui) {
    if (!s.result) return;
    const gb::surprisal_result* sp = shown_surprisal(s);
    if (!sp) {
        if (s.result->surprisal_why.empty()) return;
        ImGui::TextDisabled("no surprisal strip");
        remember_item(ui, "surprisal");
        note_text(ui, "surprisal", s.result->surprisal_why);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.result->surprisal_why.c_str());
        return;
    }
    const std::string mean = format_number(sp->mean_nats) + " nats/token, " + format_number(sp->bits_per_byte) +
                             " bits/byte";
    ImGui::TextUnformatted("Surprisal");
    ImGui::SameLine();
    ImGui::TextDisabled("mean %s (%d tokens scored)", mean.c_str(), sp->scored);
    remember_item(ui, "surprisal");
    note_text(ui, "surprisal", mean);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("each token's loss, -log p(token | the tokens before it), under the ablation shown;\n"
                          "the mean is over the %d tokens after the first (nothing predicts the first), in nats per\n"
                          "token and in bits per UTF-8 byte of those tokens (comparable across tokenizers)", sp->scored);
    // the legend on the same line: "0 [viridis] ln V", as tall as the text
    ImGui::SameLine();
    ImGui::TextDisabled("0");
    ImGui::SameLine();
    const float w = px(120), h = ImGui::GetTextLineHeight();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const int steps = 48;
    for (int i = 0; i < steps; i++)
        dl->AddRectFilled(ImVec2(at.x + w * i / steps, at.y + h * 0.2f), ImVec2(at.x + w * (i + 1) / steps + 1, at.y + h * 0.8f),
                          viridis_u32((i + 0.5f) / steps));
    ImGui::Dummy(ImVec2(w, h));
    const bool bar_hovered = ImGui::IsItemHovered();
    ImGui::SameLine();
    ImGui::TextDisabled("%.1f nats = ln V", scale_top(s));
    if (bar_hovered || ImGui::IsItemHovered())
        ImGui::SetTooltip("colour: the token's loss in nats, from 0 (certain) to ln V = %.2f (as unlikely as a\n"
                          "uniform guess over the %d tokens of the vocabulary) and beyond", scale_top(s),
                          s.model->config.vocab_size);
}

void surprisal_bar(const app_state& s, ui_context& ui, int t, ImVec2 a, ImVec2 b, bool window_hovered) {
    const gb::surprisal_result* sp = shown_surprisal(s);
    if (!sp) return;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float v = (float)sp->nats[t];
    const bool scored = std::isfinite(v);
    dl->AddRectFilled(a, b, scored ? viridis_u32(std::min(1.0f, v / scale_top(s))) : IM_COL32(70, 70, 70, 255), px(2));
    note_drawn(ui, "surprisal " + std::to_string(t), a, b);
    if (!window_hovered || !ImGui::IsMouseHoveringRect(a, b)) return;
    const gb::tokenizer& tok = s.model->tok;
    const std::string here = quoted(tok, s.result->cap().tokens[t]);
    if (!scored) {
        ImGui::SetTooltip("token %d %s is not scored: no token before it predicts it", t, here.c_str());
        return;
    }
    ImGui::SetTooltip("token %d %s: -log p = %s nats (p = %s, %s bits)\nthe model's top guess here: %s (p = %s)%s", t,
                      here.c_str(), format_number(v).c_str(), format_number(std::exp(-v)).c_str(),
                      format_number(v / std::log(2.0)).c_str(), quoted(tok, sp->top_ids[t]).c_str(),
                      format_number(sp->top_probs[t]).c_str(),
                      sp->top_ids[t] == s.result->cap().tokens[t] ? " - it guessed right" : "");
}

} // namespace gbui
