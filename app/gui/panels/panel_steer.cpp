// Steer: a steering vector (built from contrast prompts on the analysis thread, or opened from a llama.cpp control
// vector or a .npy), applied to the live run like an ablation (the ablation's steer; the baseline stays unsteered),
// the prompt continued with and without it at several scales from one seed (where they part marked, each token's
// probability shift underlined), and the cost sweep: KL from the baseline and loss on a reference text over
// scale x layer; clicking a cell steers there.
#include <algorithm>
#include <cmath>
#include <imgui.h>
#include <imgui_stdlib.h>

#include "steer_analysis.h"
#include "text_scale.h"
#include "ui.h"
#include "file_dialog.h"

namespace gbui {

gb::steering tab_steering(const app_state& s) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    gb::steering st;
    st.vec = in.vec;
    st.scale = in.scale;
    st.from = in.from;
    if (st.vec)
        for (int l = in.lo; l <= in.hi; l++)
            if (st.vec->has(l)) st.layers.push_back(l);
    return st;
}

std::string steering_key(const gb::steering& st) {
    std::string k = std::to_string((uintptr_t)st.vec.get()) + "|" + (st.vec ? st.vec->name : "") + "|" +
                    std::to_string(st.scale) + "|" + std::to_string(st.from) + "|";
    for (int l : st.layers) k += std::to_string(l) + ",";
    return k;
}

namespace {

const ImVec4 red(1, 0.45f, 0.45f, 1), blue(0.55f, 0.78f, 1.0f, 1), amber(1, 0.85f, 0.4f, 1);

// The vector: its contrast prompts and Build, or a file to Open; Save writes it.
void vector_inputs(app_state& s, ui_context& ui) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    const float half = (ImGui::GetContentRegionAvail().x - px(8)) / 2, h = ImGui::GetTextLineHeight() * 3.6f;
    ImGui::TextColored(blue, "positive prompts (one a line)");
    ImGui::SameLine(half + px(8));
    ImGui::TextColored(blue, "negative prompts");
    ImGui::InputTextMultiline("##steer positive", &in.positive, ImVec2(half, h));
    remember_item(ui, "steer positive");
    ImGui::SameLine();
    ImGui::InputTextMultiline("##steer negative", &in.negative, ImVec2(half, h));
    remember_item(ui, "steer negative");
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("read at");
    ImGui::SameLine();
    ImGui::RadioButton("last token", &in.where, 0);
    remember_item(ui, "steer last");
    ImGui::SameLine();
    ImGui::RadioButton("mean", &in.where, 1);
    remember_item(ui, "steer mean");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("the mean over each prompt's positions, then over the prompts");
    ImGui::SameLine();
    if (ImGui::Button("Build")) in.build++;
    remember_item(ui, "steer build");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("v[l] = mean resid_post of layer l over the positive prompts minus over the negative ones, "
                          "at every layer");
    ImGui::SameLine();
    path_box(ui, "steer path", in.path, BROWSE_CONTROL_VECTOR, "a .gguf (llama.cpp's control vector) or .npy",
             std::max(px(200), ImGui::GetContentRegionAvail().x - px(110)));
    ImGui::SameLine();
    if (ImGui::Button("Open")) in.open++;
    remember_item(ui, "steer open");
    ImGui::SameLine();
    if (ImGui::Button("Save") && in.vec) in.save++;
    remember_item(ui, "steer save");
}

// alpha, the layer range, the from-position, and Apply (the live run recomputes with it)
void apply_inputs(app_state& s, ui_context& ui, const gb::model& m) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    const int L = m.config.n_layer;
    char t[48];
    snprintf(t, sizeof t, "\u03b1 %.2f", in.scale);
    slider_float_beside(ui, "steer alpha", &in.scale, -16.0f, 16.0f, t, px(110));
    if (!std::isfinite(in.scale)) in.scale = 0;
    ImGui::SameLine();
    slider_int_beside(ui, "steer from layer", &in.lo, 0, L - 1, "from L" + std::to_string(in.lo), px(60));
    ImGui::SameLine();
    slider_int_beside(ui, "steer to layer", &in.hi, 0, L - 1, "to L" + std::to_string(in.hi), px(60));
    in.lo = std::max(0, std::min(in.lo, L - 1));
    in.hi = std::max(in.lo, std::min(in.hi, L - 1));
    if (room_right_of_item() > px(150)) ImGui::SameLine();
    ImGui::SetNextItemWidth(px(44));
    ImGui::InputInt("from position", &in.from, 0);
    in.from = std::max(0, std::min(in.from, m.config.n_ctx - 1));
    remember_item(ui, "steer from position");
    const gb::steering st = tab_steering(s);
    bool applied = s.ablation.steer.any();
    ImGui::SameLine();
    if (ImGui::Checkbox("Apply", &applied)) s.ablation.steer = applied ? st : gb::steering{};
    remember_item(ui, "steer apply");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("add it to the live run, listed with the ablations (the baseline stays unsteered)");
    if (applied && steering_key(s.ablation.steer) != steering_key(st) && st.vec && !st.layers.empty()) s.ablation.steer = st;
    if (in.vec && st.layers.empty()) ImGui::TextColored(red, "the vector has no direction in layers %d..%d", in.lo, in.hi);
}

// One continuation: its tokens, those after it parts from the baseline in amber, each underlined by how much the
// steering moved its probability (green up, red down); the numbers on hover.
void continuation_row(const char* label, const gb::steered_continuation& c, bool baseline, ui_context& ui, int row) {
    ImGui::TextColored(blue, "%s", label);
    remember_item(ui, "steer row " + std::to_string(row));
    ImGui::SameLine();
    const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
    const float x0 = ImGui::GetCursorScreenPos().x;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (size_t i = 0; i < c.ids.size(); i++) {
        const std::string piece = visible_token(c.pieces[i]);
        const float w = ImGui::CalcTextSize(piece.c_str()).x;
        if (i > 0) {
            ImGui::SameLine(0, px(1));
            if (ImGui::GetCursorScreenPos().x + w > right) ImGui::SetCursorScreenPos(ImVec2(x0, ImGui::GetCursorScreenPos().y + ImGui::GetTextLineHeightWithSpacing()));
        }
        const bool parted = !baseline && c.parts_at >= 0 && (int)i >= c.parts_at;
        ImGui::TextColored(parted ? amber : ImVec4(0.85f, 0.85f, 0.88f, 1), "%s", piece.c_str());
        const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
        if (!baseline && (int)i == c.parts_at) dl->AddRect(ImVec2(a.x - 1, a.y), ImVec2(b.x + 1, b.y), IM_COL32(255, 200, 80, 255));
        const float dp = c.p_steered[i] - c.p_base[i];
        if (!baseline) {
            const float t = std::min(1.0f, std::fabs(dp) * 2);
            dl->AddRectFilled(ImVec2(a.x, b.y - px(2)), ImVec2(b.x, b.y),
                              dp >= 0 ? IM_COL32(60, 200, 110, (int)(60 + 195 * t)) : IM_COL32(230, 80, 80, (int)(60 + 195 * t)));
        }
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("%s\np steered %.3f, baseline %.3f (%+.3f)%s", piece.c_str(), c.p_steered[i], c.p_base[i], dp,
                              (int)i == c.parts_at ? "\nthe first token where it parts from the baseline" : "");
    }
    if (c.ids.empty()) ImGui::TextDisabled("(nothing generated)");
}

void side_by_side(app_state& s, ui_context& ui) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    for (int i = 0; i < 3; i++) {
        char t[32];
        snprintf(t, sizeof t, "\u03b1%d %.1f", i + 1, in.scales[i]);
        slider_float_beside(ui, ("steer compare " + std::to_string(i)).c_str(), &in.scales[i], -16.0f, 16.0f, t, px(56));
        if (!std::isfinite(in.scales[i])) in.scales[i] = 0;
        ImGui::SameLine();
    }
    slider_int_beside(ui, "steer tokens", &in.tokens, 1, 64, std::to_string(in.tokens) + " tokens", px(56));
    const analysis_kind kind = analysis_id("steer_compare");
    const analysis_status& st = s.analysis[kind];
    if (!st.error.empty() && st.error_key == s.analysis_want[kind]) {
        ImGui::TextColored(red, "%s", st.error.c_str());
        return;
    }
    const steer_output* o = output_of<steer_output>(s, kind).get();
    if (!o) {
        ImGui::TextDisabled(st.busy ? "generating..." : "build or open a vector to compare");
        return;
    }
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("from one seed (the Continuation's sampling); amber: where it parts from the baseline; "
                        "underline: how much the steering moved that token's probability (hover: the numbers)%s",
                        o->key != s.analysis_want[kind] ? "  (updating...)" : "");
    ImGui::PopTextWrapPos();
    continuation_row("baseline ", o->side_by_side.baseline, true, ui, 0);
    for (size_t i = 0; i < o->side_by_side.runs.size(); i++) {
        char label[32];
        snprintf(label, sizeof label, "\u03b1 = %-5g", o->side_by_side.runs[i].scale);
        continuation_row(label, o->side_by_side.runs[i], false, ui, (int)i + 1);
    }
}

// One grid of the sweep: rows the scales, columns the layers, each cell coloured by its value (KL: from 0 to the
// largest; loss: its change from the baseline's, diverging), the number on it, the continuation on hover.
void sweep_grid(app_state& s, ui_context& ui, const steer_output& o, bool kl, float w) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    const gb::steer_sweep_result& r = o.sweep;
    const int S = (int)r.scales.size(), Ly = (int)r.layers.size();
    const std::vector<double>& x = kl ? r.kl : r.loss;
    double hi = 1e-9;
    for (double v : x) hi = std::max(hi, kl ? v : std::fabs(v - r.base_loss));
    const float lab = px(40), cw = std::max(px(24), (w - lab) / std::max(1, Ly)), ch = ImGui::GetTextLineHeight() + px(6);
    ImGui::BeginGroup();
    ImGui::TextColored(blue, kl ? "KL(baseline || steered), nats" : "loss on the reference (baseline %.2f)", r.base_loss);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 o0 = ImGui::GetCursorScreenPos();
    for (int li = 0; li < Ly; li++) {
        const std::string h = "L" + std::to_string(r.layers[li]);
        dl->AddText(ImVec2(o0.x + lab + li * cw + (cw - ImGui::CalcTextSize(h.c_str()).x) / 2, o0.y), IM_COL32(200, 200, 210, 255), h.c_str());
    }
    o0.y += ImGui::GetTextLineHeight() + px(2);
    for (int si = 0; si < S; si++) {
        char a[24];
        snprintf(a, sizeof a, "\u03b1 %g", r.scales[si]);
        dl->AddText(ImVec2(o0.x, o0.y + si * ch + px(3)), IM_COL32(200, 200, 210, 255), a);
        for (int li = 0; li < Ly; li++) {
            const double v = x[r.at(si, li)];
            const ImVec2 p0(o0.x + lab + li * cw, o0.y + si * ch), p1(p0.x + cw - px(2), p0.y + ch - px(2));
            const ImU32 col = kl ? viridis_u32((float)std::sqrt(v / hi)) : diverging_u32((float)((v - r.base_loss) / hi));
            dl->AddRectFilled(p0, p1, col);
            char b[24];
            snprintf(b, sizeof b, v < 10 ? "%.2f" : "%.1f", v);
            dl->AddText(ImVec2(p0.x + (cw - px(2) - ImGui::CalcTextSize(b).x) / 2, p0.y + px(3)), text_on(col), b);
            ImGui::SetCursorScreenPos(p0);
            ImGui::InvisibleButton(("##cell" + std::to_string(kl) + "_" + std::to_string(si) + "_" + std::to_string(li)).c_str(),
                                   ImVec2(cw - px(2), ch - px(2)));
            remember_item(ui, std::string("steer cell ") + (kl ? "kl " : "loss ") + std::to_string(si) + " " + std::to_string(li));
            const int k = r.at(si, li);
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("\u03b1 %g at L%d: KL %.4f nats, loss %.3f (baseline %.3f)\ngreedy: %s%s\n(click: steer here)",
                                  r.scales[si], r.layers[li], r.kl[k], r.loss[k], r.base_loss, display_text(s.prompt).c_str(),
                                  k < (int)r.texts.size() ? display_text(r.texts[k]).c_str() : "");
            if (ImGui::IsItemClicked()) { // steer there: the tab's alpha and layer, the middle comparison, applied
                in.scale = in.scales[1] = r.scales[si];
                in.lo = in.hi = r.layers[li];
                if (s.ablation.steer.any()) s.ablation.steer = tab_steering(s);
            }
        }
    }
    ImGui::SetCursorScreenPos(ImVec2(o0.x, o0.y + S * ch));
    ImGui::Dummy(ImVec2(lab + Ly * cw, px(2)));
    ImGui::EndGroup();
}

void sweep(app_state& s, ui_context& ui) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    const analysis_kind kind = analysis_id("steer_sweep");
    const analysis_status& st = s.analysis[kind];
    ImGui::TextColored(blue, "reference text");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x);
    ImGui::InputText("##steer reference", &in.reference);
    remember_item(ui, "steer reference");
    if (!st.error.empty() && st.error_key == s.analysis_want[kind]) {
        ImGui::TextColored(red, "%s", st.error.c_str());
        return;
    }
    const steer_output* o = output_of<steer_output>(s, kind).get();
    if (!o) {
        ImGui::TextDisabled(st.busy ? "sweeping..." : "the cost sweep shows once there is a vector");
        return;
    }
    ImGui::TextDisabled("%d reference tokens, %zu x %zu cells in %.0f ms%s", o->sweep.ref_tokens, o->sweep.scales.size(),
                        o->sweep.layers.size(), o->sweep.grid_ms, o->key != s.analysis_want[kind] ? "  (updating...)" : "");
    const float w = ImGui::GetContentRegionAvail().x;
    if (w > px(520)) {
        sweep_grid(s, ui, *o, true, w / 2 - px(8));
        ImGui::SameLine(0, px(16));
        sweep_grid(s, ui, *o, false, w / 2 - px(8));
    } else {
        sweep_grid(s, ui, *o, true, w);
        sweep_grid(s, ui, *o, false, w);
    }
}

} // namespace

void panel_steer(app_state& s, ui_context& ui) {
    auto& in = inputs_of<steer_inputs>(s, tab_id("steer"));
    if (!s.model) return;
    const gb::model& m = *s.model;
    if (in.vec && in.vec->d_model != m.config.d_model) in.vec.reset(); // another model's
    if (!in.vec && s.ablation.steer.vec) { // applied by a session: the tab shows it
        in.vec = s.ablation.steer.vec;
        in.scale = s.ablation.steer.scale;
        in.from = s.ablation.steer.from;
        if (!s.ablation.steer.layers.empty()) in.lo = s.ablation.steer.layers.front(), in.hi = s.ablation.steer.layers.back();
    }
    tab_hint("Activation addition: \u03b1 \u00b7 v[l] added to the stream after layer l (resid_post; llama.cpp's direction.l), "
             "v built from contrast prompts or opened from a control vector.");
    if (ImGui::CollapsingHeader("Vector", ImGuiTreeNodeFlags_DefaultOpen)) vector_inputs(s, ui);
    const analysis_kind build = analysis_id("steer_build");
    const analysis_status& bs = s.analysis[build];
    if (!bs.error.empty() && bs.error_key == s.analysis_want[build]) ImGui::TextColored(red, "%s", bs.error.c_str());
    else if (bs.busy) ImGui::TextDisabled("building...");
    if (in.vec) {
        std::string ls;
        for (int l : in.vec->layers()) ls += (ls.empty() ? "L" : ",") + std::to_string(l);
        ImGui::TextDisabled("vector %s: d %d, directions at %s%s%s", in.vec->name.c_str(), in.vec->d_model, ls.c_str(),
                            in.note.empty() ? "" : "; ", in.note.c_str());
    } else if (!in.note.empty()) {
        ImGui::TextColored(red, "%s", in.note.c_str());
    }
    apply_inputs(s, ui, m);
    ImGui::Separator();
    if (ImGui::BeginTable("##steer body", 2, ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp)) {
        ImGui::TableSetupColumn("side", ImGuiTableColumnFlags_WidthStretch, 1.0f);
        ImGui::TableSetupColumn("sweep", ImGuiTableColumnFlags_WidthStretch, 1.1f);
        ImGui::TableNextColumn();
        side_by_side(s, ui);
        ImGui::TableNextColumn();
        sweep(s, ui);
        ImGui::EndTable();
    }
}

void steer_applied(app_state& s, ui_context& ui) {
    gb::ablation& ab = s.ablation;
    if (!ab.steer.any()) return;
    ImGui::TextUnformatted("Steering:");
    ImGui::SameLine();
    if (ImGui::SmallButton("x##steer")) ab.steer = gb::steering{};
    remember_item(ui, "remove steering");
    ImGui::SameLine();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "%s", ab.steer.describe().c_str());
    ImGui::PopTextWrapPos();
}

} // namespace gbui
