// Model B's parts of other panels (compare_analysis.h): the Model panel's "B..." button, the grid's "A | B | A vs B"
// switch, and the B and "A vs B" views of the head grid, the residual stream and the lens.
#include "compare_analysis.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>

#include "file_dialog.h"
#include "number_format.h"
#include "text_scale.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// Controls
// ---------------------------------------------------------------------------------------------
void compare_switch(app_state& s, ui_context& ui) {
    compare_state& c = compare_of(s);
    if (!c.model) return;
    const char* names[] = {"A", "B", "A vs B"};
    const char* ids[] = {"view A", "view B", "view A vs B"};
    for (int v = 0; v < 3; v++) {
        if (v) ImGui::SameLine();
        if (ImGui::RadioButton(names[v], c.shown == v)) c.shown = (compare_state::view)v;
        remember_item(ui, ids[v]);
    }
    ImGui::SameLine();
    std::string b = c.model->path;
    if (b.size() > 48) b = "..." + b.substr(b.size() - 45);
    ImGui::TextDisabled("B: %s%s", b.c_str(), comparing(s) ? "  (comparing...)" : "");
}

void model_b_button(app_state& s, ui_context& ui) {
    compare_state& c = compare_of(s);
    // a file chosen with Browse... (the in-app browser, a modal at the frame's root, closed this popup on opening)
    if (take_dialog_answer("model B path", c.path_input) && !c.path_input.empty()) open_model_b(s, c.path_input);
    const bool loading = model_b_loading(s);
    if (ImGui::Button(loading ? "B..*" : "B...")) ImGui::OpenPopup("##model_b");
    remember_item(ui, "Model B");
    if (ImGui::IsItemHovered() && !ImGui::IsPopupOpen("##model_b"))
        ImGui::SetTooltip(loading ? "loading model B..." : c.model ? "model B: %s" : "Open model B... (a second model "
                          "of the same shape, to compare with)", c.model ? c.model->path.c_str() : "");
    if (!ImGui::BeginPopup("##model_b")) return;
    ImGui::TextDisabled("Open model B... (the same shape and tokenizer as the model shown)");
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    const bool enter = path_box(ui, "model B path", c.path_input, BROWSE_MODEL, "model folder, .gguf or .bin",
                                ImGui::GetFontSize() * 30);
    ImGui::SameLine();
    if ((ImGui::Button("Open model B") || enter) && !c.path_input.empty()) {
        open_model_b(s, c.path_input);
        ImGui::CloseCurrentPopup();
    }
    remember_item(ui, "Open model B");
    if (c.model) {
        ImGui::TextDisabled("B: %s", c.model->path.c_str());
        if (ImGui::SmallButton("Close model B")) close_model_b(s), ImGui::CloseCurrentPopup();
        remember_item(ui, "Close model B");
    }
    ImGui::EndPopup();
}

// ---------------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------------
namespace {

bool waiting(const app_state& s, const compare_output* c) {
    if (c) return false;
    ImGui::TextDisabled(comparing(s) || model_b_loading(s) ? "comparing A and B..." : "no comparison yet");
    return true;
}

// A head's pattern [T][T] drawn as at most n x n blocks, each the mean of its cells, on viridis
void pattern_blocks(ImDrawList* dl, ImVec2 a, float cell, const float* pat, int T) {
    const int n = std::min(T, std::max(1, (int)(cell / 2)));
    const float bs = cell / n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const int q0 = i * T / n, q1 = (i + 1) * T / n, k0 = j * T / n, k1 = (j + 1) * T / n;
            double sum = 0;
            for (int q = q0; q < q1; q++)
                for (int k = k0; k < k1; k++) sum += pat[(size_t)q * T + k];
            const float v = (float)(sum / std::max(1, (q1 - q0) * (k1 - k0)));
            const bool masked = k0 > q1 - 1; // wholly above the diagonal: the causal mask
            dl->AddRectFilled(ImVec2(a.x + j * bs, a.y + i * bs), ImVec2(a.x + (j + 1) * bs, a.y + (i + 1) * bs),
                              masked ? IM_COL32(45, 45, 50, 255) : viridis_u32(std::sqrt(v)));
        }
}

} // namespace

void compare_grid(app_state& s, ui_context&) {
    const compare_output* c = current_compare(s);
    if (waiting(s, c)) return;
    const gb::compare_result& r = c->res;
    const int L = r.n_layer, H = r.n_head;
    const bool avb = compare_of(s).shown == compare_state::VIEW_AVB;
    float jmax = 1e-12f;
    for (float v : r.head_js) jmax = std::max(jmax, v);
    if (avb) {
        ImGui::TextDisabled("colour: JS divergence of A's and B's patterns, 0 .. %.3g nats", jmax);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("each head's Jensen-Shannon divergence between A's and B's attention rows, averaged over "
                              "the query rows");
    } else {
        ImGui::TextDisabled("model B's patterns (sqrt scale)");
    }
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = px(34), head_h = px(18), gap = px(3);
    float cell = std::min((avail.x - label_w) / H, (avail.y - head_h) / L) - gap;
    cell = std::max(8.0f, std::min(cell, px(160)));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImU32 lc = IM_COL32(170, 170, 180, 255);
    char b[32];
    for (int h = 0; h < H; h++) {
        snprintf(b, sizeof b, "%d", h);
        if (ImGui::CalcTextSize(b).x <= cell + gap) dl->AddText(ImVec2(o.x + label_w + h * (cell + gap) + cell / 2 - px(4), o.y), lc, b);
    }
    for (int l = 0; l < L; l++) {
        snprintf(b, sizeof b, "L%d", l);
        dl->AddText(ImVec2(o.x, o.y + head_h + l * (cell + gap) + cell / 2 - ImGui::GetTextLineHeight() / 2), lc, b);
        for (int h = 0; h < H; h++) {
            const ImVec2 a(o.x + label_w + h * (cell + gap), o.y + head_h + l * (cell + gap)), z(a.x + cell, a.y + cell);
            const float js = r.head_js[(size_t)l * H + h];
            if (avb) {
                const ImU32 col = viridis_u32(js / jmax);
                dl->AddRectFilled(a, z, col);
                snprintf(b, sizeof b, "%.3f", js);
                const ImVec2 ts = ImGui::CalcTextSize(b);
                if (ts.x + px(4) <= cell && ts.y <= cell) dl->AddText(ImVec2(a.x + (cell - ts.x) / 2, a.y + (cell - ts.y) / 2), text_on(col), b);
            } else if (const float* pat = c->run_b->head(l, h)) {
                pattern_blocks(dl, a, cell, pat, r.n_tokens);
            }
            if (l == s.sel_layer && h == s.sel_head)
                dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), IM_COL32(255, 190, 60, 255), 0, 0, 2.5f);
            if (ImGui::IsMouseHoveringRect(a, z) && ImGui::IsWindowHovered()) {
                ImGui::SetTooltip("L%d H%d\nJS(A, B) = %.4f nats (mean over query rows)", l, h, js);
                if (ImGui::IsMouseClicked(0)) s.sel_layer = l, s.sel_head = h;
            }
        }
    }
    ImGui::Dummy(ImVec2(label_w + H * (cell + gap), head_h + L * (cell + gap)));
}

void compare_residual(app_state& s, ui_context& ui) {
    const compare_output* c = current_compare(s);
    if (waiting(s, c)) return;
    const gb::compare_result& r = c->res;
    const int P = r.n_points, T = r.n_tokens;
    const bool avb = compare_of(s).shown == compare_state::VIEW_AVB;
    // the value of each cell, and its colour's range
    std::vector<float> v((size_t)P * T);
    for (size_t i = 0; i < v.size(); i++)
        v[i] = !avb ? std::log10(std::max(1e-6f, c->run_b->resid_norm[i])) : compare_of(s).rel ? r.rel_diff[i] : 1.0f - r.cosine[i];
    float lo = avb ? 0.0f : 1e30f, hi = -1e30f;
    for (float x : v)
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    if (avb) {
        ImGui::Checkbox("|a - b| / |a|  (else 1 - cos)", &compare_of(s).rel);
        remember_item(ui, "compare rel");
    }
    ImGui::TextDisabled("%s: %s (dark) .. %s (bright)", avb ? (compare_of(s).rel ? "|a - b| / |a|" : "1 - cos(a, b)") : "B's log10 |x|",
                        format_number(lo).c_str(), format_number(hi).c_str());
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 avail = ImGui::GetContentRegionAvail(), o = ImGui::GetCursorScreenPos();
    float label_w = 0;
    for (const std::string& p : r.points) label_w = std::max(label_w, ImGui::CalcTextSize(p.c_str()).x);
    if (avb) label_w = std::max(label_w, ImGui::CalcTextSize("B - A").x);
    label_w += px(6);
    const float lh = ImGui::GetTextLineHeight(), strip_h = avb ? 2 * lh + px(10) : 0;
    const float hh = std::max(px(40), avail.y - lh - strip_h - px(6)), cw = (avail.x - label_w) / T, rh = hh / P;
    for (int p = 0; p < P; p++) {
        if (rh >= lh * 0.8f || p % std::max(1, (int)(lh / rh + 1)) == 0)
            dl->AddText(ImVec2(o.x, o.y + p * rh + (rh - lh) / 2), IM_COL32(190, 190, 190, 255), r.points[p].c_str());
        for (int t = 0; t < T; t++) {
            const float x = v[(size_t)p * T + t];
            const ImVec2 a(o.x + label_w + t * cw, o.y + p * rh);
            dl->AddRectFilled(a, ImVec2(a.x + cw, a.y + rh),
                              std::isfinite(x) ? viridis_u32(hi > lo ? (x - lo) / (hi - lo) : 0) : IM_COL32(90, 90, 90, 255));
            if (ImGui::IsMouseHoveringRect(a, ImVec2(a.x + cw, a.y + rh)) && ImGui::IsWindowHovered())
                ImGui::SetTooltip("%s, token %d \u2018%s\u2019\ncos(a, b) = %.6f\n|a - b| / |a| = %.4g", r.points[p].c_str(), t,
                                  visible_token(r.pieces[t]).c_str(), r.cosine[(size_t)p * T + t], r.rel_diff[(size_t)p * T + t]);
        }
    }
    note_drawn(ui, "compare residual heatmap", ImVec2(o.x + label_w, o.y), ImVec2(o.x + avail.x, o.y + hh));
    if (!avb || r.surprisal_a.scored == 0) {
        ImGui::Dummy(ImVec2(avail.x, hh));
        return;
    }
    // the prompt's tokens with B's surprisal minus A's: red where B finds the token harder, blue easier
    double dmax = 1e-9;
    for (int t = 1; t < T; t++) dmax = std::max(dmax, std::fabs(r.surprisal_diff[t]));
    const float y = o.y + hh + px(6);
    dl->AddText(ImVec2(o.x, y + px(2)), IM_COL32(190, 190, 190, 255), "B - A");
    for (int t = 0; t < T; t++) {
        const ImVec2 a(o.x + label_w + t * cw, y), z(a.x + cw - 1, y + lh + px(4));
        const double d = r.surprisal_diff[t];
        const ImU32 col = t == 0 ? IM_COL32(60, 60, 68, 255) : diverging_u32((float)(d / dmax));
        dl->AddRectFilled(a, z, col);
        const std::string tok = visible_token(r.pieces[t]);
        if (ImGui::CalcTextSize(tok.c_str()).x <= cw - 2) dl->AddText(ImVec2(a.x + 1, a.y + px(2)), text_on(col), tok.c_str());
        if (ImGui::IsMouseHoveringRect(a, z) && ImGui::IsWindowHovered() && t > 0)
            ImGui::SetTooltip("token %d \u2018%s\u2019\nA %.3f nats, B %.3f nats: B - A = %+.3f", t, tok.c_str(),
                              r.surprisal_a.nats[t], r.surprisal_b.nats[t], d);
    }
    char cap[96];
    snprintf(cap, sizeof cap, "surprisal B - A: blue easier, red harder (\u00b1%.2g)", dmax);
    dl->AddText(ImVec2(o.x + label_w, y + lh + px(6)), IM_COL32(170, 170, 180, 255), cap);
    ImGui::Dummy(ImVec2(avail.x, hh + strip_h));
}

void compare_lens(app_state& s, ui_context& ui) {
    const compare_output* c = current_compare(s);
    if (waiting(s, c)) return;
    const gb::compare_result& r = c->res;
    const gb::tokenizer& tok = c->a->tok;
    ImGui::Text("logit lens of A and B at the last token \u2018%s\u2019: each point's top-1",
                visible_token(r.pieces[r.lens_position]).c_str());
    if (r.first_disagree >= 0)
        ImGui::TextColored(ImVec4(1, 0.6f, 0.3f, 1), "first disagreement: %s", r.points[r.first_disagree].c_str());
    else ImGui::TextDisabled("A and B agree at every point");
    note_text(ui, "compare first disagreement", r.first_disagree >= 0 ? r.points[r.first_disagree] : "none");
    ImGui::TextDisabled("next token: top-1 agrees at %d of %d positions, mean KL(A || B) %.4g nats", r.top_agree_count,
                        r.n_tokens, r.mean_kl);
    if (!ImGui::BeginTable("##cmp_lens", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV))
        return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("point");
    ImGui::TableSetupColumn("A: top-1  p");
    ImGui::TableSetupColumn("B: top-1  p");
    ImGui::TableHeadersRow();
    for (int p = 0; p < r.n_points; p++) {
        ImGui::TableNextRow();
        const bool differ = r.lens_top_a[p] != r.lens_top_b[p];
        if (p == r.first_disagree) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(120, 70, 20, 200));
        const ImVec4 col = differ ? ImVec4(1, 0.65f, 0.35f, 1) : ImVec4(0.85f, 0.85f, 0.85f, 1);
        ImGui::TableNextColumn();
        ImGui::TextColored(col, "%s%s", r.points[p].c_str(), p == r.first_disagree ? "  \u2190 first" : "");
        ImGui::TableNextColumn();
        ImGui::TextColored(col, "%s  %.3f", quoted(tok, r.lens_top_a[p]).c_str(), r.lens_prob_a[p]);
        ImGui::TableNextColumn();
        ImGui::TextColored(col, "%s  %.3f", quoted(tok, r.lens_top_b[p]).c_str(), r.lens_prob_b[p]);
    }
    ImGui::EndTable();
}

} // namespace gbui
