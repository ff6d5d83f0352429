// Patching: activation patching between the prompt (clean) and a second, corrupted prompt of the same length.
// For every residual point x position and every head, the corrupted run gets that one activation back from the
// clean run; the heatmaps show how much of the clean logit difference returns (normalized: 0 = corrupted,
// 1 = clean), on a diverging map centred at 0. The run goes on the patching thread, with a progress bar, and
// restarts when any input changes. In the fast mode attribution patching's estimate (one backward pass) fills the
// maps first, then the exact maps replace it, and the normalized difference can be shown instead.
//
// Sections: heatmap | inputs | panel
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>

#include "patching_inputs.h"
#include "text_scale.h"
#include "trace_analysis.h"
#include "ui.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// Heatmap: rows x cols normalized values in [-1, 1] (NaN grey), labelled; returns the hovered cell
// ---------------------------------------------------------------------------------------------
struct grid_labels {
    std::vector<std::string> rows, cols;
    std::vector<bool> col_marked; // columns drawn in orange (the positions where the prompts differ)
    bool vertical_cols = false;   // column labels turned 90 degrees (token texts)
    bool sequential = false;      // values in [0, 1] on viridis (causal tracing) instead of [-1, 1] diverging
    const std::vector<float>* text = nullptr; // the numbers written in the cells (default: the values coloured)
};

static bool norm_grid(ui_context& ui, const char* name, const std::vector<float>& v, int R, int C, const grid_labels& g,
                      ImVec2 size, int* hr, int* hc) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const float font = ImGui::GetFontSize();
    float row_w = 0, col_h = 0;
    for (const std::string& r : g.rows) row_w = std::max(row_w, ImGui::CalcTextSize(r.c_str()).x);
    for (const std::string& c : g.cols) col_h = std::max(col_h, ImGui::CalcTextSize(c.c_str()).x);
    row_w += 8;
    col_h = g.vertical_cols ? col_h + 8 : ImGui::GetTextLineHeight() + 2;
    const float cw = std::max(2.0f, std::min(px(56), (size.x - row_w) / C));
    const float ch = std::max(8.0f, std::min(px(40), (size.y - col_h) / R)); // the panel scrolls below 8 px
    const ImVec2 a(o.x + row_w, o.y + col_h);
    const ImU32 lc = IM_COL32(175, 175, 185, 255);
    // row labels a little smaller than the text when the rows are (down to 10 px at 100 %), so that each row keeps
    // its label before every other one is dropped
    const float fs = std::min(font, std::max(px(10), ch - 1));
    const int rk = label_step(R, ch, fs);
    for (int r = 0; r < R; r += rk)
        dl->AddText(ImGui::GetFont(), fs, ImVec2(o.x + row_w - 8 - ImGui::CalcTextSize(g.rows[r].c_str()).x * fs / font,
                                                 a.y + r * ch + (ch - fs) / 2), lc, g.rows[r].c_str());
    float need = g.vertical_cols ? font + 1 : 0;
    if (!g.vertical_cols)
        for (const std::string& c : g.cols) need = std::max(need, ImGui::CalcTextSize(c.c_str()).x + 6);
    const int ck = label_step(C, cw, need);
    for (int c = 0; c < C; c += ck) {
        ImU32 col = c < (int)g.col_marked.size() && g.col_marked[c] ? IM_COL32(255, 190, 60, 255) : lc;
        if (g.vertical_cols) add_text_vertical(dl, ImVec2(a.x + (c + 0.5f) * cw - font / 2, a.y - 4), col, g.cols[c].c_str());
        else dl->AddText(ImVec2(a.x + c * cw + (cw - ImGui::CalcTextSize(g.cols[c].c_str()).x) / 2, o.y), col, g.cols[c].c_str());
    }
    const float gap = cw >= 8 && ch >= 8 ? 1 : 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            ImVec2 p0(a.x + c * cw, a.y + r * ch), p1(p0.x + cw - gap, p0.y + ch - gap);
            const float x = v[(size_t)r * C + c];
            ImU32 col = !g.sequential ? diverging_u32(x)
                        : std::isfinite(x) ? viridis_u32(std::max(0.0f, std::min(1.0f, x))) : IM_COL32(90, 90, 90, 255);
            dl->AddRectFilled(p0, p1, col);
            char b[16];
            snprintf(b, sizeof b, "%.2f", g.text ? (*g.text)[(size_t)r * C + c] : x);
            if (std::isfinite(x) && ImGui::CalcTextSize(b).x + 6 <= cw && ch >= ImGui::GetTextLineHeight() + 2)
                dl->AddText(ImVec2(p0.x + (cw - gap - ImGui::CalcTextSize(b).x) / 2,
                                   p0.y + (ch - gap - ImGui::GetTextLineHeight()) / 2), text_on(col), b);
        }
    ui.widgets[name] = ImVec4(a.x, a.y, a.x + C * cw, a.y + R * ch);
    ImGui::Dummy(ImVec2(row_w + C * cw, col_h + R * ch));
    const ImVec2 m = ImGui::GetMousePos();
    if (ImGui::IsWindowHovered() && m.x >= a.x && m.y >= a.y && m.x < a.x + C * cw && m.y < a.y + R * ch) {
        *hc = std::min(C - 1, (int)((m.x - a.x) / cw));
        *hr = std::min(R - 1, (int)((m.y - a.y) / ch));
        dl->AddRect(ImVec2(a.x + *hc * cw, a.y + *hr * ch), ImVec2(a.x + (*hc + 1) * cw, a.y + (*hr + 1) * ch),
                    IM_COL32(255, 255, 255, 255), 0, 0, 1.5f);
        return true;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Inputs: the corrupted prompt, target and contrast
// ---------------------------------------------------------------------------------------------
static void inputs(app_state& s, ui_context& ui, const patch_output* po) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    const run_result& r = *s.result;
    const gb::tokenizer& tok = r.model->tok;
    const float label_w = ImGui::CalcTextSize("corrupted").x + 12;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("corrupted");
    ImGui::SameLine(label_w);
    const float copy_w = ImGui::CalcTextSize("copy the clean prompt").x + 2 * ImGui::GetStyle().FramePadding.x + 8;
    ImGui::SetNextItemWidth(-copy_w);
    ImGui::InputTextWithHint("##corrupt", "the prompt with one word changed (the same number of tokens)", &pin.corrupt);
    remember_item(ui, "corrupt prompt");
    ImGui::SameLine();
    if (ImGui::SmallButton("copy the clean prompt")) pin.corrupt = s.prompt;
    // what to pick from: both runs' top tokens
    std::vector<gb::token_prob> offered = r.pred.top;
    const bool po_current = po && po->model == r.model;
    if (po_current)
        for (const gb::token_prob& t : po->corrupt_top)
            if (std::none_of(offered.begin(), offered.end(), [&](const gb::token_prob& o) { return o.id == t.id; }))
                offered.push_back(t);
    const int V = r.cap().vocab;
    const float combo_w = 130, one_w = token_picker_w("contrast", combo_w) + 24;
    std::string tdef = r.pred.top.empty() ? "clean top-1" : "clean top-1 " + quoted(tok, r.pred.top[0].id);
    std::string cdef = po_current && po->res.contrast >= 0 && pin.contrast < 0 ? "default " + quoted(tok, po->res.contrast)
                                                                                    : "corrupted top-1";
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("target");
    ImGui::SameLine(label_w);
    token_picker("patching target", &pin.target, tdef, offered, tok, V, 2, ui, combo_w);
    if (room_right_of_item() > one_w) ImGui::SameLine(0, 24);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("contrast");
    ImGui::SameLine();
    token_picker("patching contrast", &pin.contrast, cdef, offered, tok, V, 3, ui, combo_w);
    for (int k = 2; k < 4; k++)
        if (!ui.typed_error[k].empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", ui.typed_error[k].c_str());
}

// Above the maps when the clean and corrupted metrics are close (under 1 logit apart): the maps are normalized by
// that gap, so they then show noise. Suggests a contrast the corruption does move: the corrupted prompt's own top-1
// (a button sets it).
static void small_gap_note(app_state& s, ui_context& ui, const patch_output& po) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    const gb::patch_result& p = po.res;
    const double gap = std::fabs((double)p.clean - p.corrupt);
    if (!(gap < 1.0)) return;
    const gb::tokenizer& tok = po.model->tok;
    // the corrupted prompt's most probable token that is neither the target nor the contrast (none when the two
    // prompts are the same: no contrast separates them)
    int suggest = -1, rank = 0;
    for (size_t i = 0; i < po.corrupt_top.size() && po.corrupt_ids != po.clean_ids; i++)
        if (po.corrupt_top[i].id != p.target && po.corrupt_top[i].id != p.contrast) {
            suggest = po.corrupt_top[i].id, rank = (int)i + 1;
            break;
        }
    char gap_s[32];
    snprintf(gap_s, sizeof gap_s, "%.2f", gap);
    std::string msg = gap == 0 ? "Clean and corrupted give the same metric: there is nothing to restore, and the maps "
                                 "below show nothing."
                               : std::string("Clean and corrupted differ by only ") + gap_s + " logit: the maps below are "
                                 "divided by that gap, so they show mostly noise.";
    if (po.corrupt_ids == po.clean_ids) msg += " The corrupted prompt is the clean one: change a word in it.";
    else if (suggest >= 0)
        msg += " Choose a contrast the corruption moves, e.g. the corrupted prompt's own " +
               (rank == 1 ? std::string("top-1 ") : "top-" + std::to_string(rank) + " ") + quoted(tok, suggest) + ".";
    else msg += " Choose another target or contrast, or a corruption that changes the answer.";
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", msg.c_str());
    ImGui::PopTextWrapPos();
    note_text(ui, "patching gap", msg);
    if (suggest >= 0) {
        if (ImGui::SmallButton("use it as the contrast")) pin.contrast = suggest; // (no token in a label: "##")
        remember_item(ui, "patching use suggested contrast");
    }
}

// The fast mode's controls: the estimate first; once exact, the difference (estimate - exact, normalized, made with
// the output) on request. Returns whether the maps show the difference.
static bool fast_mode(app_state& s, ui_context& ui, bool has_estimate) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    ImGui::Checkbox("fast mode", &pin.fast);
    remember_item(ui, "patching fast mode");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("show attribution patching's estimate (one backward pass) at once, then the exact maps");
    if (has_estimate) {
        ImGui::SameLine(0, 16);
        ImGui::Checkbox("estimate \u2212 exact", &pin.diff);
        remember_item(ui, "patching difference");
    }
    return has_estimate && pin.diff;
}

// ---------------------------------------------------------------------------------------------
// Panel
// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Causal tracing: the subject noised, each activation restored from the clean run
// ---------------------------------------------------------------------------------------------
// The maps of a trace: the residual stream (points x positions) on the left, the MLP and attention outputs (layers x
// positions) stacked on the right, coloured from the noised run's probability (0) to the clean run's (1).
static void trace_maps(ui_context& ui, const trace_output& o) {
    const gb::trace_result& t = o.res;
    const gb::tokenizer& tok = o.model->tok;
    const int L = t.n_layer, T = t.n_tokens, P = 2 * L + 1;
    const double span = t.clean_prob - t.corrupt_prob;
    auto restored = [&](const std::vector<float>& v) { // 0 = the noised run's probability, 1 = the clean run's
        std::vector<float> n(v.size());
        for (size_t i = 0; i < v.size(); i++) n[i] = span != 0 ? (float)((v[i] - t.corrupt_prob) / span) : NAN;
        return n;
    };
    const std::vector<float> nr = restored(t.resid), nm = restored(t.mlp), na = restored(t.attn);
    grid_labels rl, ll;
    rl.rows = gb::resid_labels(L);
    rl.vertical_cols = ll.vertical_cols = true;
    rl.sequential = ll.sequential = true;
    for (int i = 0; i < T; i++) {
        const bool subj = i >= t.subject_first && i < t.subject_end;
        rl.cols.push_back(short_label(gb::token_text(tok, o.ids[i]), 8) + (subj ? "*" : ""));
        rl.col_marked.push_back(subj);
    }
    ll.cols = rl.cols, ll.col_marked = rl.col_marked;
    for (int l = 0; l < L; l++) ll.rows.push_back("L" + std::to_string(l));
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float legend_h = 12 + 4 + ImGui::GetTextLineHeight() + line + 8;
    const float left_w = avail.x * 0.5f - 8, right_w = avail.x - left_w - 16;
    // captions wrap to their half: a caption wider than its map would push the right half out of the panel
    auto caption = [](const char* text, float w) {
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + w);
        ImGui::TextDisabled("%s", text);
        ImGui::PopTextWrapPos();
    };
    auto caption_h = [&](const char* text, float w) {
        return ImGui::CalcTextSize(text, nullptr, false, w).y + ImGui::GetStyle().ItemSpacing.y;
    };
    const char* resid_caption = "residual stream: one point at one position restored (orange *: the subject)";
    const char* mlp_caption = "MLP output of one layer at one position";
    const char* attn_caption = "attention output of one layer at one position";
    // at least a text line a row under the vertical column labels (8 characters): a short panel scrolls rather
    // than squeezing the rows to slivers
    const float labels_h = ImGui::CalcTextSize("MMMMMMMM").x + 8, row_h = ImGui::GetTextLineHeight();
    const float grid_h = std::max(avail.y - caption_h(resid_caption, left_w) - ImGui::GetStyle().ItemSpacing.y,
                                  labels_h + P * row_h);
    int hr = -1, hc = -1, kind = 0, r2 = -1, c2 = -1;
    ImGui::BeginGroup();
    caption(resid_caption, left_w);
    rl.text = &t.resid;
    if (norm_grid(ui, "trace resid", nr, P, T, rl, ImVec2(left_w, grid_h), &hr, &hc)) kind = 1;
    ImGui::EndGroup();
    ImGui::SameLine(0, 16);
    ImGui::BeginGroup();
    const float sub_fit = (grid_h + caption_h(resid_caption, left_w) - legend_h - caption_h(mlp_caption, right_w) -
                         caption_h(attn_caption, right_w)) / 2;
    const float sub_h = std::max(sub_fit, labels_h + L * row_h);
    caption(mlp_caption, right_w);
    ll.text = &t.mlp;
    if (norm_grid(ui, "trace mlp", nm, L, T, ll, ImVec2(right_w, sub_h), &r2, &c2)) kind = 2, hr = r2, hc = c2;
    caption(attn_caption, right_w);
    ll.text = &t.attn;
    if (norm_grid(ui, "trace attn", na, L, T, ll, ImVec2(right_w, sub_h), &r2, &c2)) kind = 3, hr = r2, hc = c2;
    ImVec2 la = ImGui::GetCursorScreenPos();
    la.y += 6;
    const float bar_w = std::min(right_w, 220.0f);
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%.3f", t.corrupt_prob);
    snprintf(hi, sizeof hi, "%.3f", t.clean_prob);
    const float used = colour_bar(ImGui::GetWindowDrawList(), la, bar_w, false, lo, nullptr, hi);
    ImGui::Dummy(ImVec2(bar_w, used + 6));
    caption(("p(" + quoted(tok, t.target) + "): noised subject → clean; the cells' numbers are p").c_str(), right_w);
    ImGui::EndGroup();
    if (!kind) return;
    const std::vector<float>& v = kind == 1 ? t.resid : kind == 2 ? t.mlp : t.attn;
    const size_t k = (size_t)hr * T + hc;
    ImGui::BeginTooltip();
    if (kind == 1) ImGui::Text("clean stream at %s, token %d %s restored", rl.rows[hr].c_str(), hc, quoted(tok, o.ids[hc]).c_str());
    else ImGui::Text("clean %s output of layer %d at token %d %s restored", kind == 2 ? "MLP" : "attention", hr, hc,
                     quoted(tok, o.ids[hc]).c_str());
    ImGui::Separator();
    ImGui::Text("p(%s) = %.4f   (clean %.4f, noised %.4f)", quoted(tok, t.target).c_str(), v[k], t.clean_prob, t.corrupt_prob);
    ImGui::TextDisabled("the mean over %d noise samples (seed %llu)", t.samples, (unsigned long long)t.seed);
    ImGui::EndTooltip();
}

static void panel_causal(app_state& s, ui_context& ui) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    const float label_w = ImGui::CalcTextSize("corrupted").x + 12;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("subject");
    ImGui::SameLine(label_w);
    ImGui::SetNextItemWidth(std::min(ImGui::GetContentRegionAvail().x, 480.0f));
    ImGui::InputTextWithHint("##subject", "words of the prompt, e.g. Eiffel Tower", &pin.subject);
    remember_item(ui, "trace subject");
    const analysis_kind kind = analysis_id("trace");
    const analysis_status& st = s.analysis[kind];
    const std::string& want = s.analysis_want[kind];
    if (pin.subject.empty()) {
        ImGui::TextDisabled("type the subject: its tokens' embeddings get Gaussian noise (3 x the embeddings' standard "
                            "deviation, 10 samples), then each activation is restored from the clean run in turn");
        return;
    }
    if (!st.error.empty() && st.error_key == want) { // e.g. the subject is not in the prompt
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        note_text(ui, "trace error", st.error);
        return;
    }
    const trace_output* o = output_of<trace_output>(s, kind).get();
    if (!o || o->key != want) {
        analysis_progress(ui, st, "tracing... %.0f%%", "trace progress");
    }
    if (!o) return;
    const gb::trace_result& t = o->res;
    ImGui::Text("p(%s):  clean %.3f   subject noised %.3f", quoted(o->model->tok, t.target).c_str(), t.clean_prob, t.corrupt_prob);
    ImGui::SameLine();
    ImGui::TextDisabled("  (σ = %.3g = 3 × the embeddings' std, %d samples; %d runs, %.1f s)", t.sigma, t.samples,
                        t.runs, o->ms / 1000);
    trace_maps(ui, *o);
}

void panel_patching(app_state& s, ui_context& ui) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    const bool patching = pin.shown == ANALYSIS_PATCHING;
    tab_hint(!patching ? "Causal tracing: noise the subject's embeddings, restore one activation from the clean run: "
                             "where does the answer come back?"
                           : "Run the corrupted prompt, restore one activation from the clean prompt (yours): how much "
                             "of the clean answer returns?");
    if (!s.result) return;
    if (ImGui::RadioButton("activation patching", patching)) pin.shown = ANALYSIS_PATCHING;
    remember_item(ui, "patch mode patching");
    ImGui::SameLine();
    if (ImGui::RadioButton("causal tracing", !patching)) pin.shown = analysis_id("trace");
    remember_item(ui, "patch mode trace");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("Meng et al.'s causal tracing: the prompt against itself with the subject's embeddings noised");
    if (!patching) return panel_causal(s, ui);
    const patch_output* po = output_of<patch_output>(s, ANALYSIS_PATCHING).get();
    inputs(s, ui, po);

    const analysis_status& st = s.analysis[ANALYSIS_PATCHING];
    const std::string& want = s.analysis_want[ANALYSIS_PATCHING];
    if (pin.corrupt.empty()) {
        ImGui::TextDisabled("type a corrupted prompt: e.g. change one word (\"cat\" -> \"dog\") and keep the token count");
        return;
    }
    if (!st.error.empty() && st.error_key == want) { // e.g. the prompts tokenize to different lengths
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    const bool updating = !po || po->key != want || !po->exact;
    if (updating) {
        analysis_progress(ui, st, po && !po->exact ? "estimate shown; exact patching... %.0f%%" : "patching... %.0f%%",
                          "patching progress");
    }
    if (!po) return;
    const bool has_estimate = po->exact && !po->estimate.resid.empty();
    const bool diff = fast_mode(s, ui, has_estimate);
    const gb::patch_result& p = diff ? po->difference : po->res;
    const gb::tokenizer& tok = po->model->tok;
    const int L = p.n_layer, H = p.n_head, T = p.n_tokens, P = 2 * L + 1;
    ImGui::Text("metric logit(%s) \u2212 logit(%s):  clean %.3f   corrupted %.3f", quoted(tok, p.target).c_str(),
                quoted(tok, p.contrast).c_str(), p.clean, p.corrupt);
    ImGui::SameLine();
    if (!po->exact) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "  estimate from one backward pass (%.0f ms)", po->ms);
    else if (diff) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "  showing estimate \u2212 exact (normalized)");
    else ImGui::TextDisabled("  (%d runs, %.0f ms; estimate %.0f ms)", p.runs, p.ms, po->estimate_ms);
    if (!po->note.empty()) ImGui::TextDisabled("%s", po->note.c_str());
    small_gap_note(s, ui, *po);

    grid_labels rl, hl;
    rl.rows = gb::resid_labels(L);
    rl.vertical_cols = true;
    for (int t = 0; t < T; t++) {
        rl.cols.push_back(short_label(gb::token_text(tok, po->clean_ids[t]), 8));
        rl.col_marked.push_back(po->clean_ids[t] != po->corrupt_ids[t]);
    }
    for (int l = 0; l < L; l++) hl.rows.push_back("L" + std::to_string(l));
    for (int h = 0; h < H; h++) hl.cols.push_back("H" + std::to_string(h));
    // the residual stream (points x positions) on the left; the heads (layers x heads) and the legend on the right
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float legend_h = 12 + 4 + ImGui::GetTextLineHeight() + line + 8;
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float right_w = std::min(avail.x * 0.4f, 46.0f * H + 40);
    const float grid_h = avail.y - line - 2 * ImGui::GetStyle().ItemSpacing.y;
    const float left_w = avail.x - right_w - 16;
    int hr = -1, hc = -1, kind = 0;
    ImGui::BeginGroup();
    // captions are cut to their grid's width so that the two grids keep their places
    ImGui::TextDisabled("%s", left_w > ImGui::CalcTextSize("residual stream: one point at one position (orange: the tokens differ)").x
                                  ? "residual stream: one point at one position (orange: the tokens differ)"
                                  : "residual stream (orange: tokens differ)");
    if (norm_grid(ui, "patching resid", p.resid_normalized, P, T, rl, ImVec2(left_w, grid_h), &hr, &hc)) kind = 1;
    ImGui::EndGroup();
    ImGui::SameLine(0, 16);
    ImGui::SetCursorPosX(ImGui::GetCursorPosX() + std::max(0.0f, left_w - ImGui::GetItemRectSize().x)); // heads at a fixed place
    ImGui::BeginGroup();
    const char* heads_caption = "heads: one head's output everywhere";
    ImGui::TextDisabled("%s", right_w > ImGui::CalcTextSize(heads_caption).x ? heads_caption : "heads");
    int hr2 = -1, hc2 = -1;
    if (norm_grid(ui, "patching heads", p.heads_normalized, L, H, hl, ImVec2(right_w, grid_h - legend_h), &hr2, &hc2))
        kind = 2, hr = hr2, hc = hc2;
    // legend under the heads
    ImVec2 la = ImGui::GetCursorScreenPos();
    la.y += 6;
    const float bar_w = std::min(right_w, 220.0f);
    float used = colour_bar(ImGui::GetWindowDrawList(), la, bar_w, true, "\u22121", "0", "1");
    ImGui::Dummy(ImVec2(bar_w, used + 6));
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + right_w);
    ImGui::TextDisabled("normalized: 0 = corrupted run, 1 = clean run");
    ImGui::PopTextWrapPos();
    ImGui::EndGroup();
    if (kind) {
        const size_t k = (size_t)hr * (kind == 1 ? T : H) + hc;
        const float raw = kind == 1 ? p.resid[k] : p.heads[k], norm = kind == 1 ? p.resid_normalized[k] : p.heads_normalized[k];
        ImGui::BeginTooltip();
        if (kind == 1)
            ImGui::Text("clean stream at %s, token %d %s (corrupted %s)", rl.rows[hr].c_str(), hc,
                        quoted(tok, po->clean_ids[hc]).c_str(), quoted(tok, po->corrupt_ids[hc]).c_str());
        else
            ImGui::Text("clean output of L%d H%d at every position", hr, hc);
        ImGui::Separator();
        ImGui::Text(diff ? "exact metric %.4f   estimate \u2212 exact, normalized %.3f" : "metric %.4f   normalized %.3f", raw, norm);
        if (has_estimate) {
            const std::vector<float>& en = kind == 1 ? po->estimate.resid_normalized : po->estimate.heads_normalized;
            const std::vector<float>& xn = kind == 1 ? po->res.resid_normalized : po->res.heads_normalized;
            ImGui::TextDisabled("normalized: estimate %.3f, exact %.3f", en[k], xn[k]);
        }
        ImGui::TextDisabled("normalized = (patched \u2212 corrupted) / (clean \u2212 corrupted)");
        ImGui::EndTooltip();
    }
}

} // namespace gbui
