// Ablations: knock out residual connections, LayerNorm or attention (all layers or chosen ones),
// and the lists of ablated heads, experts (MoE) and attention knockouts (decoder-only models). Each toggle says what the component does and what to expect.
#include <algorithm>

#include "ui.h"

namespace gbui {

static void layer_picker(gb::layer_set& set, int n_layer, const char* id) {
    if (!set.on) return;
    ImGui::Indent(24);
    bool all = set.layers.empty();
    if (ImGui::Checkbox((std::string("all layers##") + id).c_str(), &all)) {
        set.layers.clear();
        if (!all)
            for (int l = 0; l < n_layer; l++) set.layers.push_back(l);
    }
    if (!all) {
        for (int l = 0; l < n_layer; l++) {
            bool on = std::find(set.layers.begin(), set.layers.end(), l) != set.layers.end();
            if (l % 8) ImGui::SameLine();
            if (ImGui::Checkbox(("L" + std::to_string(l) + "##" + id).c_str(), &on)) {
                if (on) set.layers.push_back(l);
                else set.layers.erase(std::remove(set.layers.begin(), set.layers.end(), l), set.layers.end());
                std::sort(set.layers.begin(), set.layers.end());
            }
        }
        if (set.layers.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "no layer chosen: nothing is removed");
    }
    ImGui::Unindent(24);
}

static void toggle(app_state& s, ui_context& ui, const char* label, gb::layer_set& set, const char* what,
                   const char* expect) {
    ImGui::Checkbox(label, &set.on);
    remember_item(ui, label);
    if (explanations_folded()) { // what it is and what to expect, on hover: the column keeps its room
        folded_explanation(std::string(what) + "\n\n" + expect);
    } else {
        ImGui::BeginGroup();
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", what);
        ImGui::TextColored(ImVec4(0.75f, 0.75f, 0.55f, 1), "%s", expect);
        ImGui::PopTextWrapPos();
        ImGui::EndGroup();
    }
    note_drawn(ui, std::string("explanation ") + label, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    layer_picker(set, s.model ? gb::ablation_layers(*s.model) : 0, label);
    ImGui::Spacing();
}

// MoE models: the ablated experts (layer, expert), each with a button that brings it back.
static void experts_list(gb::ablation& ab, ui_context& ui) {
    ImGui::Separator();
    ImGui::Text("Ablated experts: %zu", ab.experts.size());
    if (!ab.experts.empty()) {
        ImGui::SameLine();
        if (ImGui::SmallButton("clear experts")) ab.experts.clear();
        remember_item(ui, "clear experts");
    }
    ImGui::PushID("experts");
    for (size_t i = 0; i < ab.experts.size(); i++) {
        ImGui::PushID((int)i);
        if (ImGui::SmallButton("x")) {
            ab.experts.erase(ab.experts.begin() + i);
            ImGui::PopID();
            break;
        }
        remember_item(ui, "restore expert " + std::to_string(ab.experts[i].layer) + "." + std::to_string(ab.experts[i].head));
        ImGui::SameLine();
        ImGui::Text("L%d E%d", ab.experts[i].layer, ab.experts[i].head);
        if (i % 4 != 3 && i + 1 < ab.experts.size()) ImGui::SameLine();
        ImGui::PopID();
    }
    ImGui::PopID();
    ImGui::PushTextWrapPos(0.0f);
    if (ab.experts.empty())
        ImGui::TextDisabled("right-click (or ctrl+click) an expert in the Experts tab: its mixing weight becomes 0 for "
                            "every token at that layer");
    else
        ImGui::TextDisabled("the other chosen experts keep their weights (not renormalised)");
    ImGui::PopTextWrapPos();
}

// The attention knockouts (layer.head: query -> key), each with a button that removes it.
static void knockouts_list(gb::ablation& ab, ui_context& ui) {
    ImGui::Separator();
    ImGui::Text("Knockouts: %zu", ab.knockouts.size());
    if (!ab.knockouts.empty()) {
        ImGui::SameLine();
        if (ImGui::SmallButton("clear knockouts")) ab.knockouts.clear();
        remember_item(ui, "clear knockouts");
    }
    ImGui::PushID("knockouts");
    for (size_t i = 0; i < ab.knockouts.size(); i++) {
        ImGui::PushID((int)i);
        const std::string name = ab.knockouts[i].describe();
        if (ImGui::SmallButton("x")) {
            ab.knockouts.erase(ab.knockouts.begin() + i);
            ImGui::PopID();
            break;
        }
        remember_item(ui, "restore knockout " + name);
        ImGui::SameLine();
        ImGui::Text("%s", name.c_str());
        if (i % 3 != 2 && i + 1 < ab.knockouts.size()) ImGui::SameLine();
        ImGui::PopID();
    }
    ImGui::PopID();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("LAYER.HEAD:QUERY-KEY (right-click a cell of the Head view); the query's attention is "
                        "renormalised over the keys left");
    ImGui::PopTextWrapPos();
}

void panel_ablations(app_state& s, ui_context& ui) {
    auto& edits = inputs_of<features_inputs>(s, TAB_FEATURES).edits;
    panel_title("Ablations", "what breaks when a part is removed?");
    gb::ablation& ab = s.ablation;
    toggle(s, ui, "No residual", ab.no_residual,
           "The residual connection is the default path the stream flows along: each sublayer only adds to it.",
           "Without it each sublayer replaces the stream: the token's identity and position are soon lost.");
    const bool post_ln = s.model && gb::arch_table(s.model->config.arch).post_ln;
    toggle(s, ui, "No LayerNorm", ab.no_layernorm,
           post_ln ? "LayerNorm keeps the scale of activations stable after every residual add (Post-LN)."
                   : "LayerNorm keeps the scale of activations stable before every sublayer.",
           "Without it the residual norms grow layer by layer (use the log axis) and predictions degrade.");
    toggle(s, ui, "No attention", ab.no_attention,
           "Attention is the only way tokens exchange information.",
           "Without it each position sees only its own token: the prediction depends on the last token alone.");
    ImGui::Separator();
    ImGui::Text("Ablated heads: %zu", ab.heads.size());
    if (!ab.heads.empty()) {
        ImGui::SameLine();
        if (ImGui::SmallButton("clear all")) ab.heads.clear();
        remember_item(ui, "clear all");
    }
    for (size_t i = 0; i < ab.heads.size(); i++) {
        ImGui::PushID((int)i);
        if (ImGui::SmallButton("x")) {
            ab.heads.erase(ab.heads.begin() + i);
            ImGui::PopID();
            break;
        }
        ImGui::SameLine();
        ImGui::Text("L%d H%d", ab.heads[i].layer, ab.heads[i].head);
        if (i % 4 != 3 && i + 1 < ab.heads.size()) ImGui::SameLine();
        ImGui::PopID();
    }
    if (ab.heads.empty()) { // wrapped: the column is narrow in small windows
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("right-click (or ctrl+click) a head in the grid to zero its output");
        ImGui::PopTextWrapPos();
    }
    if ((s.model && gb::offers(s.model->config, gb::FEATURE_EXPERTS)) || !ab.experts.empty()) experts_list(ab, ui);
    // only when there are some: the column's height decides whether Ablations and Model both fit (layout.cpp), and
    // the Head view's tooltip says how to make one
    if (!ab.knockouts.empty()) knockouts_list(ab, ui);
    if (s.patch) { // a tab's component patch (the Circuit tab's "keep only this circuit"), until removed
        ImGui::Separator();
        if (ImGui::SmallButton("x##patch")) {
            s.patch.reset();
            return;
        }
        remember_item(ui, "remove " + s.patch->by);
        ImGui::SameLine();
        ImGui::Text("Kept: %s", s.patch->what.c_str());
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", patch_in_force(s) ? s.patch->effect.c_str()
                                                    : "not applied: the prompt or model is not the one it was found on");
        ImGui::PopTextWrapPos();
    }
    if (!edits.empty()) { // the Features tab's edits, each with its remove button
        ImGui::TextUnformatted("Features:");
        for (size_t i = 0; i < edits.size(); i++) {
            ImGui::PushID((int)i);
            const bool gone = ImGui::SmallButton("x");
            remember_item(ui, "remove feature edit " + std::to_string(i));
            ImGui::SameLine();
            ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "%s", describe_feature_edit(edits[i]).c_str());
            ImGui::PopID();
            if (gone) {
                edits.erase(edits.begin() + i);
                break;
            }
        }
    }
    for (int t = 0; t < TAB_COUNT; t++) // what a tab applies (the Steer tab's steering), listed with the rest
        if (const tab_entry& e = tab_info((analysis_tab)t); e.applied) e.applied(s, ui);
}

} // namespace gbui
