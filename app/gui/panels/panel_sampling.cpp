// Sampling: the prompt continued at three temperatures from one seed and top-k, side by side, each under the
// distribution its first token is drawn from (softmax(logits / T) over the top-k, renormalised:
// gb::sampling_distribution, the one gb::sample_token draws from), so that the flattening with T shows. The
// continuations are generated on the analysis thread (analysis_worker.cpp); this panel only draws them.
#include <algorithm>
#include <imgui.h>

#include "sampling_inputs.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

namespace {

// The n most probable tokens of a column's distribution: the token, a bar as long as its probability, the number.
void dist_bars(const sampling_column& c, const gb::tokenizer& tok, int n) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetTextLineHeight(), label_w = std::min(90.0f, w * 0.36f);
    for (int i = 0; i < n && i < (int)c.dist.ids.size(); i++) {
        const ImVec2 a = ImGui::GetCursorScreenPos();
        const std::string label = "\u2018" + short_label(gb::token_text(tok, c.dist.ids[i]), 9) + "\u2019";
        dl->AddText(ImVec2(a.x + label_w - ImGui::CalcTextSize(label.c_str()).x - 6, a.y), IM_COL32(225, 225, 230, 255), label.c_str());
        const float bx = a.x + label_w, bw = w - label_w - 2, p = (float)c.dist.probs[i];
        dl->AddRectFilled(ImVec2(bx, a.y + 1), ImVec2(bx + bw, a.y + h), IM_COL32(45, 48, 56, 255));
        dl->AddRectFilled(ImVec2(bx, a.y + 1), ImVec2(bx + bw * std::min(1.0f, p), a.y + h), IM_COL32(60, 160, 120, 255));
        char b[16];
        snprintf(b, sizeof b, "%.3f", p);
        dl->AddText(ImVec2(bx + 3, a.y), IM_COL32(240, 240, 240, 255), b);
        ImGui::Dummy(ImVec2(w, h + 2));
    }
    const int rest = (int)c.dist.ids.size() - n;
    if (rest > 0) ImGui::TextDisabled("... and %d more token%s", rest, rest == 1 ? "" : "s");
}

// The end of the prompt on one line of width `room` ("…and said"), so the continuation reads on from it
std::string prompt_tail(const std::string& prompt, float room) {
    std::string tail = display_text(prompt);
    if (ImGui::CalcTextSize(tail.c_str()).x <= room) return tail;
    size_t cut = 0;
    while (cut < tail.size() && ImGui::CalcTextSize(tail.c_str() + cut).x > room * 0.92f) {
        do cut++; while (cut < tail.size() && ((unsigned char)tail[cut] & 0xC0) == 0x80); // UTF-8 boundary
    }
    return "\u2026" + tail.substr(cut);
}

} // namespace

void panel_sampling(app_state& s, ui_context& ui) {
    auto& smp = inputs_of<sampling_inputs>(s, TAB_SAMPLING);
    tab_hint("The prompt continued three times from the same seed at three temperatures. Above each: the distribution "
             "its first token is drawn from, softmax(logits / T) over the top-k tokens, renormalised.");
    // the inputs: three temperatures, top-k, length, seed
    for (int i = 0; i < 3; i++) { // each value beside its slider (on the track the handle covers it)
        char t[32];
        if (smp.temps[i] == 0) snprintf(t, sizeof t, "greedy");
        else snprintf(t, sizeof t, "T %.2f", smp.temps[i]);
        slider_float_beside(ui, ("temperature " + std::to_string(i)).c_str(), &smp.temps[i], 0.0f, 2.5f, t, px(60));
        // a typed value (ctrl+click) may be anything: 0 (greedy) .. 100, NaN as greedy
        smp.temps[i] = smp.temps[i] >= 0 ? std::min(smp.temps[i], 100.0f) : 0.0f;
        ImGui::SameLine();
    }
    ImGui::SetNextItemWidth(56);
    ImGui::InputInt("top-k", &smp.top_k, 0);
    smp.top_k = std::max(0, smp.top_k); // beyond the vocabulary it keeps every token
    remember_item(ui, "sampling top-k");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("sample only among the k most probable tokens (0: all of them)");
    // the next field on this line when it fits there, else on the next (nothing cut at the panel's edge)
    if (room_right_of_item() > px(60) + ImGui::CalcTextSize("100 tokens").x + px(16)) ImGui::SameLine();
    slider_int_beside(ui, "sampling tokens", &smp.tokens, 1, 100, std::to_string(smp.tokens) + " tokens", px(60));
    smp.tokens = std::max(1, std::min(smp.tokens, 1000));
    if (room_right_of_item() > 52 + ImGui::CalcTextSize("seed").x + px(16)) ImGui::SameLine();
    int seed = (int)smp.seed;
    ImGui::SetNextItemWidth(52);
    if (ImGui::InputInt("seed", &seed, 0)) smp.seed = (uint64_t)std::max(0, seed);
    remember_item(ui, "sampling seed");

    const analysis_status& st = s.analysis[ANALYSIS_SAMPLING];
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_SAMPLING]) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        return;
    }
    const sampling_output* o = output_of<sampling_output>(s, ANALYSIS_SAMPLING).get();
    if (!o) {
        ImGui::TextDisabled(st.busy ? "sampling... %.0f %%" : "no result yet", 100 * st.progress);
        return;
    }
    const gb::tokenizer& tok = o->from->model->tok;
    const bool stale = o->key != s.analysis_want[ANALYSIS_SAMPLING];
    // (presenting, the controls above say as much: the line goes to the picture, unless it is updating)
    if (!s.presenting || stale)
        ImGui::TextDisabled("seed %llu, %s, %d tokens each%s", (unsigned long long)o->seed,
                            o->top_k > 0 ? ("top-k " + std::to_string(o->top_k)).c_str() : "every token", o->n_tokens,
                            stale ? "  (updating...)" : "");
    // as many rows of each distribution as leave every sampled text in view (they are the point: the same prompt
    // and seed, three temperatures), from 3 to 8
    const ImGuiStyle& sty = ImGui::GetStyle();
    const float col_w = ImGui::GetContentRegionAvail().x / std::max<size_t>(1, o->columns.size()) - 2 * sty.CellPadding.x;
    float text_h = 0;
    for (const sampling_column& c : o->columns)
        text_h = std::max(text_h, ImGui::CalcTextSize(display_text(c.text).c_str(), nullptr, false, col_w).y);
    const float row_h = ImGui::GetTextLineHeightWithSpacing();
    const int bars = std::clamp((int)((ImGui::GetContentRegionAvail().y - text_h - 4 * row_h) / row_h) - 1, 3, 8);
    if (ImGui::BeginTable("##sampling", (int)o->columns.size(), ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame |
                                                                    ImGuiTableFlags_ScrollY)) {
        for (size_t i = 0; i < o->columns.size(); i++) {
            const sampling_column& c = o->columns[i];
            ImGui::TableNextColumn();
            if (c.temperature == 0) ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "greedy (T = 0)");
            else ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "T = %.2f", c.temperature);
            remember_item(ui, "sampling column " + std::to_string(i));
            dist_bars(c, tok, bars);
            ImGui::Spacing();
            ImGui::TextDisabled("%s", prompt_tail(o->from->prompt, ImGui::GetContentRegionAvail().x).c_str());
            ImGui::PushTextWrapPos(0.0f);
            ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "%s", display_text(c.text).c_str());
            ImGui::PopTextWrapPos();
            remember_item(ui, "sampling text " + std::to_string(i));
            if (c.hit_eos) ImGui::TextDisabled("(end of text)");
        }
        ImGui::EndTable();
        note_drawn(ui, "picture", ImGui::GetItemRectMin(), ImGui::GetItemRectMax()); // the three columns
    }
}

} // namespace gbui
