// Widgets that show text whole and values readable: token text drawn over id-only widgets (ImGui cuts a label at
// "##"), table headers drawn whole, and sliders with their value beside the track (ui.h).
#include <imgui.h>

#include <string>
#include <vector>

#include "ui.h"

namespace gbui {

// the value's text after a slider just drawn, and the rectangles the tests compare
static void value_beside(ui_context& ui, const char* name, const std::string& text) {
    const std::string n = std::string("slider ") + name;
    note_drawn(ui, n, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    remember_item(ui, n);
    const bool hovered = ImGui::IsItemHovered();
    ImGui::SameLine(0, ImGui::GetStyle().ItemInnerSpacing.x);
    ImGui::TextUnformatted(text.c_str());
    note_drawn(ui, n + " text", ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
    note_text(ui, n, text);
    if (hovered) ImGui::SetTooltip("drag, or ctrl+click to type a value");
}

bool slider_int_beside(ui_context& ui, const char* name, int* v, int lo, int hi, const std::string& text, float w) {
    ImGui::SetNextItemWidth(w);
    const bool changed = ImGui::SliderInt((std::string("##") + name).c_str(), v, lo, hi, "");
    value_beside(ui, name, text);
    return changed;
}

bool slider_float_beside(ui_context& ui, const char* name, float* v, float lo, float hi, const std::string& text, float w) {
    ImGui::SetNextItemWidth(w);
    const bool changed = ImGui::SliderFloat((std::string("##") + name).c_str(), v, lo, hi, "");
    value_beside(ui, name, text);
    return changed;
}

bool text_selectable(const std::string& text, const char* id, bool selected, ImGuiSelectableFlags flags) {
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const char* end = text.c_str() + text.size();
    const bool clicked = ImGui::Selectable(id, selected, flags, ImVec2(ImGui::CalcTextSize(text.c_str(), end).x, 0));
    ImGui::GetWindowDrawList()->AddText(at, ImGui::GetColorU32(ImGuiCol_Text), text.c_str(), end);
    return clicked;
}

bool text_combo(const char* id, const std::string& preview, float width) {
    ImDrawList* dl = ImGui::GetWindowDrawList(); // the combo's window (an open combo's popup is current after Begin)
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const ImGuiStyle& st = ImGui::GetStyle();
    ImGui::SetNextItemWidth(width);
    const bool open = ImGui::BeginCombo(id, "");
    const ImVec2 lo(at.x + st.FramePadding.x, at.y), hi(at.x + width - ImGui::GetFrameHeight(), at.y + ImGui::GetFrameHeight());
    dl->PushClipRect(lo, hi, true);
    dl->AddText(ImVec2(lo.x, at.y + st.FramePadding.y), ImGui::GetColorU32(ImGuiCol_Text), preview.c_str(),
                preview.c_str() + preview.size());
    dl->PopClipRect();
    return open;
}

void analysis_progress(ui_context& ui, const analysis_status& st, const char* busy_text, const char* item) {
    char label[96];
    snprintf(label, sizeof label, st.busy ? busy_text : "waiting for the prompt's run", st.progress * 100);
    ImGui::ProgressBar(st.busy ? st.progress : 0.0f, ImVec2(-1, 0), label);
    remember_item(ui, item);
}

void text_headers(const std::vector<std::string>& names) {
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int c = 0; c < (int)names.size(); c++) {
        if (!ImGui::TableSetColumnIndex(c)) continue;
        const ImVec2 at = ImGui::GetCursorScreenPos();
        const std::string& n = names[c];
        // the header's own label, unseen: the text with "##" spread to "# #" (a column fitting its content fits it)
        std::string spread = n;
        for (size_t at2 = spread.find("##"); at2 != std::string::npos; at2 = spread.find("##", at2 + 2)) spread.insert(at2 + 1, " ");
        ImGui::PushID(c);
        ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(0, 0, 0, 0));
        ImGui::TableHeader(spread.c_str());
        ImGui::PopStyleColor();
        ImGui::PopID();
        ImGui::GetWindowDrawList()->AddText(at, ImGui::GetColorU32(ImGuiCol_Text), n.c_str(), n.c_str() + n.size());
    }
}

} // namespace gbui
