// Learn: a walk along the pipeline for the selected token, layer and head (core/analysis/learn.h): each step's
// formula for this architecture, its live shape and the token's own numbers, then the parameter count derived.
// A click on a token chip, a head in the grid or a layer changes what is walked through (computed on the
// analysis thread: the walk reruns the prompt keeping every point of one layer). At the end, Break it
// (core/analysis/break_it.h): the prompt with each part removed in turn, a row per ablation; a click on a row
// applies it to the whole app.
#include <algorithm>
#include <cmath>

#include "demos.h"
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

// The walk's steps and the parameter derivation.
void learn_walk_steps(app_state& s, ui_context& ui, const learn_output& lo) {
    const gb::learn_walk& w = lo.walk;
    const bool stale = lo.key != s.analysis_want[ANALYSIS_LEARN];
    ImGui::Text("token %d \u2018%s\u2019, layer %d, head %d%s", w.token, visible_token(w.pieces[w.token]).c_str(), w.layer,
                w.head, stale ? "  (updating...)" : "");
    for (size_t i = 0; i < w.steps.size(); i++) {
        const gb::learn_step& step = w.steps[i];
        ImGui::Separator();
        ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "%zu. %s", i + 1, step.title.c_str());
        ImGui::SameLine();
        ImGui::TextDisabled("%s", step.shape.c_str());
        if (!step.panel.empty()) {
            ImGui::SameLine();
            ImGui::TextDisabled("  see:");
            ImGui::SameLine();
            // a link: underlined, the hand cursor on hover; a click opens the tab or outlines the panel
            ImGui::PushID((int)i);
            const ImVec2 at = ImGui::GetCursorScreenPos(), ts = ImGui::CalcTextSize(step.panel.c_str());
            const bool clicked = ImGui::InvisibleButton("##see", ts);
            const bool hot = ImGui::IsItemHovered();
            remember_item(ui, "learn see " + step.panel);
            ImGui::PopID();
            const ImU32 col = hot ? IM_COL32(250, 200, 90, 255) : IM_COL32(120, 180, 250, 255);
            ImDrawList* dl = ImGui::GetWindowDrawList();
            dl->AddText(at, col, step.panel.c_str());
            dl->AddLine(ImVec2(at.x, at.y + ts.y), ImVec2(at.x + ts.x, at.y + ts.y), col);
            if (hot) {
                ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
                ImGui::SetTooltip("show it: %s", step.panel.c_str());
            }
            if (clicked) follow_panel_link(s, ui, step.panel);
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
        for (const gb::param_line& p : lo.params) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(p.what.c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%12lld", (long long)p.count);
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", p.formula.c_str());
        }
        ImGui::EndTable();
    }
}

// 312, 4.12, 0.0523; 6595 rather than 6.6e+03 (as the core's sentences write numbers)
std::string number3(double v) {
    char b[32];
    snprintf(b, sizeof b, std::isfinite(v) && std::fabs(v) >= 1000 && std::fabs(v) < 1e9 ? "%.0f" : "%.3g", v);
    return b;
}

// "34 %", "3.2 %", "0.052 %"
std::string percent(double p) {
    char b[32];
    const double x = 100 * p;
    snprintf(b, sizeof b, x >= 9.95 ? "%.0f %%" : x >= 0.995 ? "%.1f %%" : x >= 0.001 || x == 0 ? "%.2g %%" : "< 0.001 %%", x);
    return b;
}

// The table of Break it: a row per ablation with its numbers; the row the demo applies is highlighted; when it
// changes the section scrolls to the top of the view (or the row to its middle, when the table is taller than
// the view); a click applies a row; its sentence is the tooltip.
void break_section(app_state& s, ui_context& ui) {
    ImGui::Separator();
    const bool stepping = s.demo == DEMO_BREAK, moved_row = stepping && ui.break_row_shown != s.break_row;
    const float title_y = ImGui::GetCursorPosY();
    ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "Break it, with this model's numbers");
    if (moved_row) ImGui::SetScrollY(title_y); // the title at the top of the view
    remember_item(ui, "break it");
    const analysis_status& st = s.analysis[ANALYSIS_BREAK];
    const break_output* b = s.breaking.get();
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_BREAK]) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        return;
    }
    if (!b || b->choice) {
        if (st.busy) ImGui::TextDisabled("removing each part of the model in turn... %.0f %%", 100 * st.progress);
        else ImGui::TextDisabled("no result yet");
        return;
    }
    const gb::break_result& res = b->res;
    const gb::tokenizer& tok = b->model->tok;
    const bool current = break_is_current(b, s.model, s.prompt, s.bos);
    const std::string base = quoted(tok, res.base_top_id);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("Each row removes one part of the model and runs \u201c%s\u201d again: the prediction, what %s "
                        "keeps, KL(baseline \u2016 ablated), and the last token's \u2016x\u2016 after the last layer. Click a "
                        "row to apply it to the whole app; hover it for what changed.%s",
                        display_text(b->prompt).c_str(), base.c_str(),
                        current ? "" : st.busy ? "  (updating...)" : "  (of an earlier prompt)");
    ImGui::PopTextWrapPos();
    double max_kl = 0;
    for (const gb::break_row& r : res.rows)
        if (std::isfinite(r.kl)) max_kl = std::max(max_kl, r.kl);
    const std::string keeps = "p(" + base + ")";
    if (ImGui::BeginTable("##break_it", 6, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
        ImGui::TableSetupColumn("removed");
        ImGui::TableSetupColumn("top-1");
        ImGui::TableSetupColumn("p");
        ImGui::TableSetupColumn(keeps.c_str());
        ImGui::TableSetupColumn("KL (nats)", ImGuiTableColumnFlags_WidthFixed, 150);
        ImGui::TableSetupColumn("\u2016x\u2016 last");
        ImGui::TableHeadersRow();
        // the model as it is, for comparison (a click restores it)
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (ImGui::Selectable("nothing removed##break_none", stepping && s.break_row < 0, ImGuiSelectableFlags_SpanAllColumns) &&
            current)
            break_step(s, -1);
        remember_item(ui, "break row none");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("click: the model as it is, nothing ablated");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(base.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(percent(res.base_top_prob).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(percent(res.base_top_prob).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(" 0");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(number3(res.base_resid_norm).c_str());
        for (size_t i = 0; i < res.rows.size(); i++) {
            const gb::break_row& r = res.rows[i];
            const bool on = stepping && s.break_row == (int)i;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (on && moved_row && ImGui::GetCursorPosY() - title_y > ImGui::GetWindowHeight() - 2 * ImGui::GetTextLineHeightWithSpacing())
                ImGui::SetScrollHereY(0.5f);
            const std::string label = r.label + "##break" + std::to_string(i);
            if (ImGui::Selectable(label.c_str(), on, ImGuiSelectableFlags_SpanAllColumns) && current) break_step(s, (int)i);
            remember_item(ui, "break row " + std::to_string(i));
            if (ImGui::IsItemHovered()) {
                ImGui::BeginTooltip();
                ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32);
                ImGui::TextUnformatted(visible_quotes(r.explanation).c_str());
                ImGui::TextDisabled("click: apply %s to the whole app", r.ab.describe().c_str());
                ImGui::PopTextWrapPos();
                ImGui::EndTooltip();
            }
            ImGui::TableNextColumn();
            const bool moved = r.top_id != res.base_top_id;
            ImGui::TextColored(moved ? ImVec4(1, 0.55f, 0.45f, 1) : ImVec4(0.85f, 0.85f, 0.88f, 1), "%s", quoted(tok, r.top_id).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(percent(r.top_prob).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(percent(r.base_top_prob).c_str());
            ImGui::TableNextColumn();
            // a bar by KL on a square-root scale (small changes stay visible next to a broken model's thousands)
            const ImVec2 a = ImGui::GetCursorScreenPos();
            const float w = 146, h = ImGui::GetTextLineHeight();
            const float f = max_kl > 0 && std::isfinite(r.kl) ? (float)std::sqrt(r.kl / max_kl) : 1.0f;
            ImGui::GetWindowDrawList()->AddRectFilled(a, ImVec2(a.x + w * f, a.y + h), IM_COL32(150, 70, 60, 200));
            ImGui::Text(" %s", number3(r.kl).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(number3(r.resid_norm).c_str());
        }
        ImGui::EndTable();
    }
    if (!res.note.empty()) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", res.note.c_str());
        ImGui::PopTextWrapPos();
    }
    // while the demo steps, room below the table so that its title can scroll to the top of the view (the walk's end
    // above it is not what the class should be reading)
    const float section_h = ImGui::GetCursorPosY() - title_y, view_h = ImGui::GetWindowHeight(); // (a child without padding)
    if (stepping && section_h < view_h) ImGui::Dummy(ImVec2(1, view_h - section_h));
    ui.break_row_shown = stepping ? s.break_row : -2;
}

// For a Pre-LN decoder: what the original Transformer did differently, and which model to open to walk it.
void other_designs(const gb::model& m) {
    const gb::arch_info& a = gb::arch_table(m.config.arch);
    if (a.post_ln || gb::kind_of(m.config) == gb::KIND_SEQ2SEQ) return;
    if (!ImGui::CollapsingHeader("Post-LN and sinusoidal positions: the original Transformer")) return;
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled(
        "%s norms a copy of the stream before each sublayer (Pre-LN) and %s. The 2017 Transformer did both differently: "
        "the norm came after each residual add, on the stream itself (Post-LN: x ← LayerNorm(x + sublayer(x))), and "
        "the position was a fixed table of sines and cosines added to the embedding (PE[p, i] = sin(p / 10000^(2i/d)), "
        "with cos beside it), nothing learned. It was an encoder–decoder: the decoder's cross-attention reads the "
        "encoder's output. Marian translation models (Helsinki-NLP/opus-mt-*) are built this way: open one's folder "
        "and this walk follows its decoder, the cross-attention to the source included.",
        a.name,
        a.pos == gb::POS_ROPE ? "rotates q and k by the position (RoPE)" : "adds a learned table for the position");
    ImGui::PopTextWrapPos();
}

} // namespace

void panel_learn(app_state& s, ui_context& ui) {
    const std::shared_ptr<const learn_output>& lo = s.learn;
    const analysis_status& st = s.analysis[ANALYSIS_LEARN];
    const run_result* r = s.result.get();
    const bool s2s = r && r->decoder;
    ImGui::PushTextWrapPos(0.0f);
    if (s2s)
        ImGui::TextDisabled("The decoder step by step for one target token, the cross-attention to the source included: "
                            "click a target token chip (the token), a head in the grid (layer and head).%s",
                            r->stack == 0 ? " The grid shows the encoder now: Show decoder picks the target's tokens; until "
                                            "then the walk follows the last one."
                                          : "");
    else
        ImGui::TextDisabled("The model step by step for one token: click a token chip (the token), a head in the grid "
                            "(layer and head). Each step: its formula, the shapes of this model, this token's numbers.");
    ImGui::PopTextWrapPos();
    if (s.model) other_designs(*s.model);
    ImGui::BeginChild("##learn_steps", ImVec2(0, 0), false);
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_LEARN]) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
    } else if (!lo) {
        ImGui::TextDisabled(st.busy ? "walking through the model..." : "no result yet");
    } else {
        learn_walk_steps(s, ui, *lo);
    }
    if (!s2s) break_section(s, ui);
    ImGui::EndChild();
}

} // namespace gbui
