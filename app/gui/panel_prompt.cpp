// Prompt panel: multi-line input (re-runs as you type) and the token strip (click a chip to select a query).
#include <imgui.h>
#include <imgui_stdlib.h>

#include "ui.h"

namespace gbui {

void panel_prompt(app_state& s, ui_context& ui) {
    panel_title("Prompt", "the model re-runs as you type");
    float w = ImGui::GetContentRegionAvail().x;
    ImGui::InputTextMultiline("##prompt", &s.prompt, ImVec2(w - 190, ImGui::GetTextLineHeight() * 3.2f));
    remember_item(ui, "prompt");
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::Checkbox("prepend BOS", &s.bos);
    remember_item(ui, "prepend BOS");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Start with the model's beginning-of-text token (<|endoftext|> for GPT-2)");
    if (s.busy) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "running...");
    else if (s.result) ImGui::TextDisabled("%d tokens, %.1f ms", s.result->cap.n_tokens, s.result->cap.timing.total_ms);
    ImGui::EndGroup();

    // token chips, wrapped; whitespace visible; the selected query token highlighted
    if (!s.result) return;
    const gb::capture& c = s.result->cap;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    float x0 = ImGui::GetCursorScreenPos().x, right = x0 + ImGui::GetContentRegionAvail().x;
    float line_h = ImGui::GetTextLineHeight() + 8;
    ImVec2 pos = ImGui::GetCursorScreenPos();
    pos.y += 2;
    int selected = s.sel_token < 0 ? c.n_tokens - 1 : s.sel_token;
    for (int t = 0; t < c.n_tokens; t++) {
        std::string label = visible_token(c.pieces[t]);
        ImVec2 ts = ImGui::CalcTextSize(label.c_str());
        float cw = ts.x + 10;
        if (pos.x + cw > right && pos.x > x0) pos = ImVec2(x0, pos.y + line_h + 3);
        ImVec2 a = pos, b = ImVec2(pos.x + cw, pos.y + line_h);
        bool hover = ImGui::IsMouseHoveringRect(a, b) && ImGui::IsWindowHovered();
        ImU32 bg = t == selected ? IM_COL32(255, 190, 60, 255) : hover ? IM_COL32(90, 110, 150, 255) : IM_COL32(55, 65, 85, 255);
        dl->AddRectFilled(a, b, bg, 4.0f);
        dl->AddText(ImVec2(a.x + 5, a.y + 4), t == selected ? IM_COL32(20, 20, 20, 255) : IM_COL32(235, 235, 235, 255),
                    label.c_str());
        if (hover) {
            ImGui::SetTooltip("token %d: id %d \"%s\"\nclick: show this token's attention row", t, c.tokens[t], label.c_str());
            if (ImGui::IsMouseClicked(0)) s.sel_token = t;
        }
        ui.widgets["token " + std::to_string(t)] = ImVec4(a.x, a.y, b.x, b.y);
        pos.x += cw + 4;
    }
    ImGui::SetCursorScreenPos(ImVec2(x0, pos.y + line_h + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

} // namespace gbui
