// Cross-attention (encoder–decoders): which source tokens each target token reads. Target rows, source columns:
// the selected decoder head's pattern, or every head and layer averaged (the alignment picture of translation,
// each row's strongest source token outlined). Row t reads target token t and writes token t + 1, so a row is
// labelled with the token it writes: that is the word its reading of the source translates.
#include <algorithm>

#include "heatmaps.h"
#include "run/seq2seq.h"
#include "tab_inputs.h"
#include "ui.h"

namespace gbui {

void panel_cross(app_state& s, ui_context& ui) {
    auto& xin = inputs_of<cross_inputs>(s, TAB_CROSS);
    panel_title("Cross-attention", "target rows read source columns: where the decoder looks in the encoder's output "
                                   "while it writes each target token");
    if (!s.result || run_kind(*s.result).input != gb::INPUT_SOURCE_TARGET) {
        ImGui::TextDisabled("type a source text above: the decoder's cross-attention shows here");
        return;
    }
    const run_result& r = *s.result;
    const gb::record& dec = *r.decoder;
    const gb::record& enc = *r.encoder;
    const int T = dec.n_tokens, S = dec.n_source;
    ImGui::Checkbox("average of every head and layer (alignment)", &xin.average);
    remember_item(ui, "cross average");
    const int l = std::clamp(s.sel_layer, 0, dec.n_layer - 1), h = std::clamp(s.sel_head, 0, dec.n_head - 1);
    if (!xin.average) {
        ImGui::SameLine();
        ImGui::TextDisabled("decoder head L%d.H%d (pick one in the grid: Stack \"decoder\")", l, h);
    }
    const float* p = xin.average ? (r.cross_mean.empty() ? nullptr : r.cross_mean.data()) : dec.cross_head(l, h);
    if (!p) return;

    // each row is labelled with the token it writes: the next target token, and for the last row the prediction
    std::vector<std::string> writes(T);
    for (int t = 0; t + 1 < T; t++) writes[t] = dec.pieces[t + 1];
    writes[T - 1] = r.pred.top.empty() ? "?" : gb::token_text(r.model->tok, r.pred.top[0].id);
    ImGui::TextDisabled("each row is labelled with the token it writes (it reads the one before)");

    // cells as large as the panel allows, labels to the left (target) and below (source)
    constexpr int label_lines = 3;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    float label_w = 0;
    for (int t = 0; t < T; t++) label_w = std::max(label_w, ImGui::CalcTextSize(writes[t].c_str()).x);
    label_w = std::min(label_w + 8, 140.0f);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float cell = std::clamp(std::min((avail.x - label_w) / S, (avail.y - (label_lines + 1) * line) / T), 4.0f, 48.0f);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 grid(o.x + label_w, o.y);
    std::vector<int> best(T, 0);
    for (int t = 0; t < T; t++)
        best[t] = (int)(std::max_element(p + (size_t)t * S, p + (size_t)(t + 1) * S) - (p + (size_t)t * S));
    for (int t = 0; t < T; t++) {
        float row_max = 0;
        for (int j = 0; j < S; j++) row_max = std::max(row_max, p[(size_t)t * S + j]);
        for (int j = 0; j < S; j++) {
            uint8_t rgb[3];
            viridis(scale_value(p[(size_t)t * S + j], s.scale, row_max), rgb);
            const ImVec2 a(grid.x + j * cell, grid.y + t * cell), b(a.x + cell - 1, a.y + cell - 1);
            dl->AddRectFilled(a, b, IM_COL32(rgb[0], rgb[1], rgb[2], 255));
            if (j == best[t] && xin.average) dl->AddRect(a, b, IM_COL32(255, 255, 255, 255), 0, 0, 2);
        }
        if (cell >= ImGui::GetFontSize() * 0.8f)
            dl->PushClipRect(ImVec2(o.x, grid.y + t * cell), ImVec2(grid.x - 4, grid.y + (t + 1) * cell), true),
                dl->AddText(ImVec2(o.x, grid.y + t * cell + (cell - ImGui::GetFontSize()) / 2), IM_COL32(220, 220, 220, 255),
                            writes[t].c_str()),
                dl->PopClipRect();
    }
    // source labels under the columns on staggered lines, every one that fits (others on hover)
    float next_x[label_lines];
    std::fill(next_x, next_x + label_lines, grid.x);
    for (int j = 0; j < S; j++) {
        const float x = grid.x + j * cell;
        const int row = (int)(std::find_if(next_x, next_x + label_lines, [&](float n) { return x >= n; }) - next_x);
        if (row == label_lines) continue;
        dl->AddText(ImVec2(x, grid.y + T * cell + 2 + row * line), IM_COL32(220, 220, 220, 255), enc.pieces[j].c_str());
        next_x[row] = x + ImGui::CalcTextSize(enc.pieces[j].c_str()).x + 6;
    }
    ImGui::InvisibleButton("##crossgrid", ImVec2(label_w + S * cell, T * cell + label_lines * line));
    remember_item(ui, "cross grid");
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int j = (int)((m.x - grid.x) / cell), t = (int)((m.y - grid.y) / cell);
        if (j >= 0 && j < S && t >= 0 && t < T)
            ImGui::SetTooltip("row %d reads \"%s\", writes \"%s\"\nreads source \"%s\" (column %d): %.3f", t,
                              dec.pieces[t].c_str(), writes[t].c_str(), enc.pieces[j].c_str(), j, p[(size_t)t * S + j]);
    }
    ImGui::TextDisabled("translation: %s", r.translation.c_str());
}

} // namespace gbui
