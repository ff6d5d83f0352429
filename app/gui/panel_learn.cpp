// Learn: a walk along the pipeline for the selected token, layer and head (core/analysis/learn.h): each step's
// formula for this architecture, its live shape and the token's own numbers, then the parameter count derived.
// A click on a token chip, a head in the grid or a layer changes what is walked through (computed on the
// analysis thread: the walk reruns the prompt keeping every point of one layer).
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace gbui {

namespace {

// The step's numbers as chips: labelled ones (keys, top tokens) shaded by value, plain ones (a vector's first
// values) in a row, then the vector's norm
void step_values(const gb::learn_step& st) {
    if (st.values.empty()) return;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x, lh = ImGui::GetTextLineHeight() + 4;
    ImVec2 pos = ImGui::GetCursorScreenPos();
    const float x0 = pos.x;
    float vmin = 0, vmax = 0;
    for (float v : st.values) vmin = std::min(vmin, v), vmax = std::max(vmax, v);
    char b[96];
    for (size_t i = 0; i < st.values.size(); i++) {
        if (st.labels.empty()) snprintf(b, sizeof b, "%.3g", st.values[i]);
        else snprintf(b, sizeof b, "%s %.3g", visible_token(st.labels[i]).c_str(), st.values[i]);
        const ImVec2 ts = ImGui::CalcTextSize(b);
        if (pos.x + ts.x + 8 > right && pos.x > x0) pos = ImVec2(x0, pos.y + lh + 2);
        const ImVec2 z(pos.x + ts.x + 8, pos.y + lh);
        // shade: the value's place between the smallest and largest shown (viridis), plain grey for a vector's values
        const float t = vmax > vmin ? (st.values[i] - vmin) / (vmax - vmin) : 0.5f;
        const ImU32 bg = st.labels.empty() ? IM_COL32(45, 48, 58, 255) : viridis_u32(t);
        dl->AddRectFilled(pos, z, bg, 3);
        dl->AddText(ImVec2(pos.x + 4, pos.y + 2), !st.labels.empty() && t > 0.6f ? IM_COL32(10, 10, 10, 255) : IM_COL32(235, 235, 240, 255), b);
        pos.x = z.x + 4;
    }
    if (st.labels.empty() && st.width > (int)st.values.size()) {
        snprintf(b, sizeof b, "... (%d values)", st.width);
        dl->AddText(ImVec2(pos.x + 2, pos.y + 2), IM_COL32(140, 140, 150, 255), b);
        pos.x += ImGui::CalcTextSize(b).x + 8;
    }
    if (st.norm >= 0) {
        snprintf(b, sizeof b, "|x| = %.4g", st.norm);
        if (pos.x + ImGui::CalcTextSize(b).x > right) pos = ImVec2(x0, pos.y + lh + 2);
        dl->AddText(ImVec2(pos.x + 6, pos.y + 2), IM_COL32(250, 200, 90, 255), b);
    }
    ImGui::SetCursorScreenPos(ImVec2(x0, pos.y + lh + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

} // namespace

void panel_learn(app_state& s, ui_context& ui) {
    (void)ui;
    const std::shared_ptr<const learn_output>& lo = s.learn;
    const analysis_status& st = s.analysis[ANALYSIS_LEARN];
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("The model step by step for one token: click a token chip (the token), a head in the grid "
                        "(layer and head). Each step: its formula, the shapes of this model, this token's numbers.");
    ImGui::PopTextWrapPos();
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_LEARN]) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        return;
    }
    if (!lo) {
        ImGui::TextDisabled(st.busy ? "walking through the model..." : "no result yet");
        return;
    }
    const gb::learn_walk& w = lo->walk;
    const bool stale = lo->key != s.analysis_want[ANALYSIS_LEARN];
    ImGui::Text("token %d \u2018%s\u2019, layer %d, head %d%s", w.token, visible_token(w.pieces[w.token]).c_str(), w.layer,
                w.head, stale ? "  (updating...)" : "");
    ImGui::BeginChild("##learn_steps", ImVec2(0, 0), false);
    for (size_t i = 0; i < w.steps.size(); i++) {
        const gb::learn_step& step = w.steps[i];
        ImGui::Separator();
        ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "%zu. %s", i + 1, step.title.c_str());
        ImGui::SameLine();
        ImGui::TextDisabled("%s", step.shape.c_str());
        if (!step.panel.empty()) {
            ImGui::SameLine();
            ImGui::TextDisabled("  see: %s", step.panel.c_str());
        }
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextUnformatted(step.formula.c_str());
        ImGui::PopTextWrapPos();
        step_values(step);
        if (!step.note.empty()) {
            ImGui::PushTextWrapPos(0.0f);
            ImGui::TextColored(ImVec4(0.85f, 0.82f, 0.55f, 1), "%s", step.note.c_str());
            ImGui::PopTextWrapPos();
        }
    }
    ImGui::Separator();
    ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "Parameters");
    if (ImGui::BeginTable("##learn_params", 3, ImGuiTableFlags_SizingFixedFit)) {
        for (const gb::param_line& p : lo->params) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(p.what.c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%12lld", (long long)p.count);
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", p.formula.c_str());
        }
        ImGui::EndTable();
    }
    ImGui::EndChild();
}

} // namespace gbui
