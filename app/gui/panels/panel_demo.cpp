// The active demo's caption (what to look at) with its End button, and Break it's steps. In the Prompt panel under
// the box; presenting, in a panel of its own beside the picture (layout.cpp), so that the prompt strip stays one row
// and the picture the caption speaks of gets the height.
#include <imgui.h>

#include <cfloat>

#include "analysis_outputs.h"
#include "analysis_table.h"
#include "demos.h"
#include "fonts.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

// Break it: step through the rows (each applies its ablation to the whole app) or restore the model; with_row:
// which row is applied, beside them.
static void break_buttons(app_state& s, ui_context& ui, bool with_row) {
    const break_output* b = output_of<break_output>(s, ANALYSIS_BREAK).get();
    const bool ready = break_is_current(b, s.model, s.prompt, s.bos) && !s.demos.waiting;
    const int n = ready ? (int)b->res.rows.size() : 0;
    if (!ready) ImGui::BeginDisabled();
    if (ImGui::SmallButton("\u25c0 Previous") && s.demos.break_row > -1) break_step(s, s.demos.break_row - 1);
    remember_item(ui, "break previous");
    ImGui::SameLine();
    if (ImGui::SmallButton("Next \u25b6") && s.demos.break_row + 1 < n) break_step(s, s.demos.break_row + 1);
    remember_item(ui, "break next");
    ImGui::SameLine();
    if (ImGui::SmallButton("Restore")) break_step(s, -1);
    remember_item(ui, "break restore");
    if (!ready) ImGui::EndDisabled();
    if (ready && with_row) {
        ImGui::SameLine();
        if (s.demos.break_row >= 0) ImGui::TextDisabled("row %d of %d: %s (every row is in the Learn tab)", s.demos.break_row + 1, n,
                                                  b->res.rows[s.demos.break_row].label.c_str());
        else ImGui::TextDisabled("nothing removed: the model as it is (%d rows in the Learn tab)", n);
    }
}

// The caption, as a paragraph of the Prompt panel (own_panel false: the End button at its right, Break it's steps
// under it) or as the Demo panel's content (presenting: a title line with End, the steps, then the caption in the
// large font when it takes at most a quarter of the window's height: the tabs under the panel keep their room).
void demo_caption(app_state& s, ui_context& ui, bool own_panel) {
    if (s.demos.kind == DEMO_NONE) return;
    const std::string label = std::string("Demo, ") + demo_label(s.demos.kind);
    if (own_panel) {
        ImGui::TextColored(ImVec4(0.55f, 0.8f, 1.0f, 1), "%s", label.c_str());
        ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - ImGui::CalcTextSize("end").x - 2 * ImGui::GetStyle().FramePadding.x);
        if (ImGui::SmallButton("end##demo")) end_demo(s);
        remember_item(ui, "end demo");
        ImGui::Separator();
        if (s.demos.kind == DEMO_BREAK) break_buttons(s, ui, false);
        const float w = ImGui::GetContentRegionAvail().x;
        ImFont* large = large_font();
        if (large && large->CalcTextSizeA(large->FontSize, FLT_MAX, w, s.demos.caption.c_str()).y > ImGui::GetIO().DisplaySize.y / 4)
            large = nullptr;
        if (large) ImGui::PushFont(large);
        text_wrapped_at_spaces(ImVec4(0.55f, 0.8f, 1.0f, 1), s.demos.caption, w);
        if (large) ImGui::PopFont();
        remember_item(ui, "demo caption");
        note_drawn(ui, "demo caption", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
        return;
    }
    const std::string text = label + ": " + s.demos.caption;
    const float w = ImGui::GetWindowContentRegionMax().x - px(60) - ImGui::GetCursorPosX();
    text_wrapped_at_spaces(ImVec4(0.55f, 0.8f, 1.0f, 1), text, w);
    remember_item(ui, "demo caption");
    note_drawn(ui, "demo caption", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - px(50));
    if (ImGui::SmallButton("end##demo")) end_demo(s);
    remember_item(ui, "end demo");
    if (s.demos.kind == DEMO_BREAK) break_buttons(s, ui, true);
}

void panel_demo(app_state& s, ui_context& ui) { demo_caption(s, ui, true); }

} // namespace gbui
