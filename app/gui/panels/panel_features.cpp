// Features: sparse autoencoders (core/analysis/features.h) on the loaded model's hook points. An SAE opened from
// its folder (Open, or dropped on the window); per token its top features as chips (hover: activation and the
// feature's top promoted tokens; click: select it) over a strip of the reconstruction error; the selected
// feature's page: its activation over the prompt, its direct logit effect, its top contexts over a corpus file,
// and ablate / clamp / steer, applied to the live run like the ablations (listed with them).
#include <algorithm>
#include <cmath>
#include <imgui.h>
#include <imgui_stdlib.h>

#include "text_scale.h"
#include "ui.h"
#include "file_dialog.h"

namespace gbui {

namespace {

const ImVec4 blue(0.55f, 0.78f, 1.0f, 1), amber(1, 0.85f, 0.4f, 1), green(0.45f, 0.85f, 0.5f, 1), red(1, 0.45f, 0.45f, 1);
const int chips_per_token = 3;

// The path box, Open, the SAEs' combo and the shown one's line (its warnings dimmed)
void sae_inputs(app_state& s, ui_context& ui) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("SAE");
    ImGui::SameLine();
    const bool chosen = path_box(ui, "sae path", fin.path_input, BROWSE_SAE,
                                 "SAELens folder (cfg.json) or Gemma Scope's params.npz",
                                 std::max(px(200), ImGui::GetContentRegionAvail().x * 0.55f));
    ImGui::SameLine();
    if ((ImGui::Button("Open##sae") || chosen) && !fin.path_input.empty()) open_sae_file(s, fin.path_input);
    remember_item(ui, "sae open");
    if (!ui.sae_jobs.empty()) {
        ImGui::SameLine();
        ImGui::TextDisabled("opening...");
    }
    if (fin.saes.size() > 1) { // one per hook point: the combo picks the one shown
        ImGui::SameLine();
        const gb::bound_sae* b = shown_sae(s);
        if (text_combo("##sae shown", gb::hook_label(b->out, b->layer), px(150))) {
            for (int i = 0; i < (int)fin.saes.size(); i++)
                if (ImGui::Selectable(gb::hook_label(fin.saes[i]->out, fin.saes[i]->layer).c_str(), i == fin.shown)) fin.shown = i;
            ImGui::EndCombo();
        }
        remember_item(ui, "sae shown");
    }
    if (const gb::bound_sae* b = shown_sae(s)) {
        const gb::sae& sa = *b->s;
        ImGui::TextDisabled("%s %s%s at %s, d_in %d, %d features", sa.format.c_str(), gb::sae_arch_name(sa.arch),
                            sa.transcoder ? " transcoder" : "", gb::hook_label(b->out, b->layer).c_str(), sa.d_in, sa.d_sae);
        for (const std::string& w : b->warnings) {
            ImGui::PushTextWrapPos(0.0f);
            ImGui::TextDisabled("warning: %s", w.c_str());
            ImGui::PopTextWrapPos();
        }
    }
}

// The reconstruction error's colour: 0 (fits) dark green, 1 (explains nothing) and above red
ImU32 fvu_colour(float f) {
    const float t = std::isfinite(f) ? std::clamp(f, 0.0f, 1.0f) : 1.0f;
    return ImGui::ColorConvertFloat4ToU32(ImVec4(0.15f + 0.8f * t, 0.55f - 0.35f * t, 0.25f - 0.1f * t, 1));
}

// The chips' features at position t: the top active ones, largest first
std::vector<int> top_at(const gb::feature_result& r, int t, int n) {
    const float* a = r.acts.data() + (size_t)t * r.d_sae;
    std::vector<int> ids;
    for (int i = 0; i < r.d_sae; i++)
        if (a[i] > 0) ids.push_back(i);
    const size_t k = std::min<size_t>(ids.size(), n);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int x, int y) { return a[x] > a[y] || (a[x] == a[y] && x < y); });
    ids.resize(k);
    return ids;
}

void chip_tooltip(const features_output& o, int id, float act) {
    ImGui::BeginTooltip();
    ImGui::Text("feature %d: activation %.3g", id, act);
    const auto it = std::find(o.chip_ids.begin(), o.chip_ids.end(), id);
    if (it != o.chip_ids.end() && (size_t)(it - o.chip_ids.begin()) < o.chip_tokens.size()) {
        std::string t;
        for (const gb::token_effect& e : o.chip_tokens[it - o.chip_ids.begin()])
            t += (t.empty() ? "" : "  ") + visible_token(gb::token_text(o.model->tok, e.id));
        ImGui::Text("promotes: %s", t.c_str());
    }
    ImGui::TextDisabled("click: open its page");
    ImGui::EndTooltip();
}

// Each token with its top features as chips beneath, and under them the reconstruction error's strip
void token_chips(app_state& s, ui_context& ui, const features_output& o) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    const gb::feature_result& r = o.res;
    const float x0 = ImGui::GetCursorScreenPos().x, right = x0 + ImGui::GetContentRegionAvail().x;
    const float line = ImGui::GetTextLineHeightWithSpacing(), chip_w = ImGui::CalcTextSize("#00000").x + px(6);
    float x = x0, y = ImGui::GetCursorScreenPos().y;
    const float col_h = line * (1 + chips_per_token) + px(10);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int t = 0; t < r.n_tokens; t++) {
        const std::string piece = short_label(visible_token(gb::token_text(o.model->tok, o.ids[t])), 10);
        const float w = std::max(chip_w, ImGui::CalcTextSize(piece.c_str()).x) + px(6);
        if (x > x0 && x + w > right) x = x0, y += col_h + px(4);
        ImGui::SetCursorScreenPos(ImVec2(x, y));
        ImGui::TextColored(blue, "%s", piece.c_str());
        const std::vector<int> top = top_at(r, t, chips_per_token);
        for (size_t k = 0; k < top.size(); k++) {
            const int id = top[k];
            const float act = r.acts[(size_t)t * r.d_sae + id];
            ImGui::SetCursorScreenPos(ImVec2(x, y + line * (1 + k)));
            ImGui::PushID(t * 8 + (int)k);
            const bool sel = id == fin.sel;
            if (sel) ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0.65f, 0.45f, 0.1f, 1));
            if (ImGui::SmallButton(("#" + std::to_string(id)).c_str())) fin.sel = id;
            if (sel) ImGui::PopStyleColor();
            remember_item(ui, "feature chip " + std::to_string(t) + "." + std::to_string(k));
            if (ImGui::IsItemHovered()) chip_tooltip(o, id, act);
            ImGui::PopID();
        }
        // the strip: this position's fraction of variance unexplained
        const ImVec2 a(x, y + line * (1 + chips_per_token) + px(2)), b(x + w - px(4), a.y + px(6));
        dl->AddRectFilled(a, b, fvu_colour(r.fvu[t]));
        if (ImGui::IsMouseHoveringRect(a, ImVec2(b.x, b.y + px(2))))
            ImGui::SetTooltip("reconstruction error at '%s': FVU %.3f, MSE %.3g", piece.c_str(), r.fvu[t], r.mse[t]);
        x += w;
    }
    ImGui::SetCursorScreenPos(ImVec2(x0, y + col_h + px(4)));
    // the legend: the strip's colours, and the SAE's fit over the prompt
    const ImVec2 l0 = ImGui::GetCursorScreenPos();
    for (int i = 0; i < 20; i++)
        dl->AddRectFilled(ImVec2(l0.x + px(4) * i, l0.y + px(4)), ImVec2(l0.x + px(4) * (i + 1), l0.y + px(10)), fvu_colour(i / 19.0f));
    ImGui::SetCursorScreenPos(ImVec2(l0.x + px(86), l0.y));
    ImGui::PushTextWrapPos(0.0f); // a narrow panel wraps them
    ImGui::TextDisabled("reconstruction error per token (FVU: 0 fits, 1 explains nothing)");
    ImGui::TextDisabled("whole prompt: FVU %.3f; next-token loss %+.3f nats with the SAE's reconstruction spliced in",
                        r.fvu_all, r.loss_delta);
    ImGui::PopTextWrapPos();
}

// The selected feature's activation over the prompt: one bar per token, the token under it
void activation_bars(const features_output& o, int id) {
    const gb::feature_result& r = o.res;
    float mx = 0;
    for (int t = 0; t < r.n_tokens; t++) mx = std::max(mx, r.acts[(size_t)t * r.d_sae + id]);
    ImGui::Text("activation over the prompt (max %.3g)", mx);
    const float h = px(36), bw = std::max(px(8), std::min(px(40), ImGui::GetContentRegionAvail().x / std::max(1, r.n_tokens)));
    const ImVec2 o0 = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int t = 0; t < r.n_tokens; t++) {
        const float a = r.acts[(size_t)t * r.d_sae + id], f = mx > 0 ? a / mx : 0;
        const ImVec2 p0(o0.x + bw * t, o0.y + h * (1 - f)), p1(o0.x + bw * (t + 1) - px(2), o0.y + h);
        dl->AddRectFilled(ImVec2(p0.x, o0.y), ImVec2(p1.x, p1.y), IM_COL32(60, 60, 70, 255));
        if (a > 0) dl->AddRectFilled(p0, p1, IM_COL32(240, 180, 60, 255));
        const std::string piece = visible_token(gb::token_text(o.model->tok, o.ids[t]));
        if (ImGui::IsMouseHoveringRect(ImVec2(p0.x, o0.y), p1)) ImGui::SetTooltip("'%s' (token %d): %.4g", piece.c_str(), t, a);
        // the token under its bar, cut to the bar's width
        for (size_t n : {8, 4, 2, 1}) {
            const std::string label = short_label(piece, n);
            if (ImGui::CalcTextSize(label.c_str()).x > bw - px(2)) continue;
            dl->AddText(ImVec2(p0.x, o0.y + h + px(2)), ImGui::GetColorU32(ImGuiCol_TextDisabled), label.c_str());
            break;
        }
    }
    ImGui::Dummy(ImVec2(bw * r.n_tokens, h + ImGui::GetTextLineHeight() + px(4)));
}

void token_list(const char* what, const ImVec4& c, const std::vector<gb::token_effect>& list, const gb::model& m) {
    ImGui::TextColored(c, "%s", what);
    std::string t;
    for (const gb::token_effect& e : list) {
        char v[32];
        std::snprintf(v, sizeof v, " (%+.2f)", e.effect);
        t += (t.empty() ? "" : "   ") + visible_token(gb::token_text(m.tok, e.id)) + v;
    }
    ImGui::SameLine();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(t.empty() ? "-" : t.c_str());
    ImGui::PopTextWrapPos();
}

// Ablate, clamp to the value, steer by the value: each adds an edit on the shown SAE (the live run recomputes)
void edit_buttons(app_state& s, ui_context& ui, const std::shared_ptr<const gb::bound_sae>& b, int id) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    auto add = [&](gb::feature_edit_kind k) {
        app_feature_edit f{b, {k, id, k == gb::FEATURE_ABLATE ? 0.0f : fin.value}};
        fin.edits.erase(std::remove_if(fin.edits.begin(), fin.edits.end(), [&](const app_feature_edit& x) {
                                  return x.sae == b && x.e.id == id && (x.e.kind == gb::FEATURE_STEER) == (k == gb::FEATURE_STEER);
                              }),
                              fin.edits.end()); // a new ablate/clamp replaces the old one; steer likewise
        fin.edits.push_back(f);
    };
    if (ImGui::Button("Ablate")) add(gb::FEATURE_ABLATE);
    remember_item(ui, "feature ablate");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("set it to 0 at every position; the reconstruction error is kept");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(px(70));
    ImGui::InputFloat("##feature value", &fin.value, 0, 0, "%.2f");
    if (!std::isfinite(fin.value)) fin.value = 0;
    remember_item(ui, "feature value");
    ImGui::SameLine();
    if (ImGui::Button("Clamp")) add(gb::FEATURE_CLAMP);
    remember_item(ui, "feature clamp");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("set it to the value at every position; the reconstruction error is kept");
    ImGui::SameLine();
    if (ImGui::Button("Steer")) add(gb::FEATURE_STEER);
    remember_item(ui, "feature steer");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("add value x its decoder direction at every position");
    ImGui::SameLine();
    ImGui::TextDisabled("edits apply live, listed with the ablations");
}

// The top contexts: the corpus box, Index (built on the analysis thread, cached beside the SAE), the contexts
void top_contexts(app_state& s, ui_context& ui, int id) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("top contexts in");
    ImGui::SameLine();
    const bool chosen = path_box(ui, "feature corpus", fin.corpus, BROWSE_TEXT, "a text file (indexed once, cached beside the SAE)",
                                 std::max(px(200), ImGui::GetContentRegionAvail().x * 0.5f));
    ImGui::SameLine();
    if (ImGui::Button("Index") || chosen) fin.index_build++, fin.index_path = fin.corpus;
    remember_item(ui, "feature index");
    const analysis_status& st = s.analysis[ANALYSIS_FEATURE_INDEX];
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_FEATURE_INDEX]) ImGui::TextColored(red, "%s", st.error.c_str());
    else if (st.busy) analysis_progress(ui, st, "indexing the corpus %.0f%%", "feature index progress");
    const features_output* o = output_of<features_output>(s, ANALYSIS_FEATURE_INDEX).get();
    if (!o || !o->index || o->sae.get() != shown_sae(s)) return;
    ImGui::TextDisabled("%s", o->index_note.c_str());
    if (id >= o->index->d_sae || o->index->top[id].empty()) {
        ImGui::TextDisabled("feature %d is never active in %s", id, o->corpus.c_str());
        return;
    }
    for (const gb::feature_context& c : o->index->top[id]) {
        ImGui::TextColored(amber, "%7.3f", c.act);
        ImGui::SameLine();
        ImGui::PushTextWrapPos(0.0f);
        std::string text = display_text(gb::context_text(*o->model, *o->index, c));
        for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at)) text.replace(at, 1, "\u21b5 ");
        ImGui::TextUnformatted(text.c_str()); // one line a context: newlines as ↵
        ImGui::PopTextWrapPos();
    }
}

void feature_page(app_state& s, ui_context& ui, const features_output& o) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    const int id = fin.sel;
    if (id < 0 || id >= o.res.d_sae) {
        ImGui::TextDisabled("click a feature chip to open its page");
        return;
    }
    ImGui::Separator();
    ImGui::TextColored(amber, "Feature %d", id);
    ImGui::SameLine();
    if (ImGui::SmallButton("close")) fin.sel = -1;
    remember_item(ui, "feature close");
    const std::shared_ptr<const gb::bound_sae>& b = fin.saes[std::clamp(fin.shown, 0, (int)fin.saes.size() - 1)];
    edit_buttons(s, ui, b, id);
    activation_bars(o, id);
    if (o.feature == id && (!o.promotes.empty() || !o.suppresses.empty())) {
        ImGui::TextDisabled("direct effect on the logits (decoder row x final norm gain x unembedding):");
        token_list("promotes  ", green, o.promotes, *o.model);
        token_list("suppresses", red, o.suppresses, *o.model);
    }
    top_contexts(s, ui, id);
}

// Train an SAE on this model (as glassbox-cli train-sae, TopK): the corpus, the point and layer, the size, the
// folder; Train runs it on the analysis thread with progress, and the SAE opens when it is written.
void train_section(app_state& s, ui_context& ui) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    const bool open = ImGui::CollapsingHeader("Train an SAE on this model");
    remember_item(ui, "sae train section");
    if (!open) return;
    features_inputs::train_fields& f = fin.train;
    const float w = px(90);
    const float box_w = std::max(px(240), ImGui::GetContentRegionAvail().x * 0.6f);
    path_box(ui, "sae train corpus", f.corpus, BROWSE_TEXT, "the corpus: a text file", box_w);
    ImGui::SameLine();
    ImGui::TextDisabled("corpus");
    path_box(ui, "sae train folder", f.out, BROWSE_FOLDER, "the folder to write the SAE into", box_w);
    ImGui::SameLine();
    ImGui::TextDisabled("folder to write");
    static const char* names[] = {"resid_post", "resid_mid", "resid_pre", "mlp_out", "attn_out"};
    ImGui::SetNextItemWidth(w * 1.4f);
    ImGui::Combo("point##sae train", &f.point, names, IM_ARRAYSIZE(names));
    ImGui::SameLine();
    slider_int_beside(ui, "sae train layer", &f.layer, 0, s.model ? s.model->config.n_layer - 1 : 0,
                      "layer " + std::to_string(f.layer), w);
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("features##sae train", &f.features, 0);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(w * 0.7f);
    ImGui::InputInt("k (TopK)##sae train", &f.k, 0);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(w);
    ImGui::InputInt("steps of 256##sae train", &f.steps, 0);
    if (ImGui::Button("Train")) start_sae_training(s);
    remember_item(ui, "sae train");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the model's activations at that point over the corpus (up to 200,000 tokens), a TopK SAE\n"
                          "trained with Adam (seed 0), written in SAELens's format and opened; pressed again with the\n"
                          "same folder, it resumes from its train_state.bin");
    const analysis_status& st = s.analysis[ANALYSIS_SAE_TRAIN];
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_SAE_TRAIN]) ImGui::TextColored(red, "%s", st.error.c_str());
    else if (st.busy) analysis_progress(ui, st, "training %.0f%%", "sae train progress");
    else if (output_of<features_output>(s, ANALYSIS_SAE_TRAIN)) ImGui::TextDisabled("%s", output_of<features_output>(s, ANALYSIS_SAE_TRAIN)->train_note.c_str());
}

} // namespace

void panel_features(app_state& s, ui_context& ui) {
    if (s.model && !gb::offers(s.model->config, gb::FEATURE_SAE)) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", gb::refusal(*s.model, gb::FEATURE_SAE).c_str());
        ImGui::PopTextWrapPos();
        return;
    }
    sae_inputs(s, ui);
    const gb::bound_sae* b = shown_sae(s);
    if (!b) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("open an SAE for this model (type its folder and press Open, or drop the folder on the "
                            "window), or train one here");
        ImGui::PopTextWrapPos();
        train_section(s, ui);
        return;
    }
    const analysis_status& st = s.analysis[ANALYSIS_FEATURES];
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_FEATURES]) ImGui::TextColored(red, "%s", st.error.c_str());
    const features_output* o = output_of<features_output>(s, ANALYSIS_FEATURES).get();
    if (!o || o->sae.get() != b) {
        analysis_progress(ui, st, "computing the features %.0f%%", "features progress");
        return;
    }
    ImGui::BeginChild("##features body", ImVec2(0, 0), false);
    token_chips(s, ui, *o);
    feature_page(s, ui, *o);
    train_section(s, ui);
    ImGui::EndChild();
}

} // namespace gbui
