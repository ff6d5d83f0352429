// Attention overview: an L x H grid of every head's pattern. Click: open in the detail view;
// right-click or ctrl+click: knock the head out (ablate) or bring it back.
#include <algorithm>

#include "ui.h"

namespace gbui {

void panel_overview(app_state& s, ui_context& ui) {
    panel_title("Attention heads", "rows = layers, columns = heads; right-click a head to ablate it");
    if (!s.result) {
        ImGui::TextDisabled("no result yet");
        return;
    }
    const gb::record& c = s.result->cap;
    const int L = c.n_layer, H = c.n_head;
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = 34, head_h = 18, gap = 3;
    float cell = std::min((avail.x - label_w) / H, (avail.y - head_h) / L) - gap;
    cell = std::max(8.0f, std::min(cell, 120.0f));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 o = ImGui::GetCursorScreenPos();
    // column titles: "H10" when it fits, else the number alone, else every k-th number
    const ImU32 lc = IM_COL32(170, 170, 180, 255);
    char b[16];
    snprintf(b, sizeof b, "H%d", H - 1);
    const bool with_h = ImGui::CalcTextSize(b).x + 2 <= cell + gap;
    snprintf(b, sizeof b, "%d", H - 1);
    const int hk = with_h ? 1 : label_step(H, cell + gap, ImGui::CalcTextSize(b).x + 4);
    for (int h = 0; h < H; h += hk) {
        snprintf(b, sizeof b, with_h ? "H%d" : "%d", h);
        ImVec2 ts = ImGui::CalcTextSize(b);
        dl->AddText(ImVec2(o.x + label_w + h * (cell + gap) + (cell - ts.x) / 2, o.y), lc, b);
    }
    const int lk = label_step(L, cell + gap, ImGui::GetTextLineHeight());
    for (int l = 0; l < L; l++) {
        if (l % lk == 0) {
            snprintf(b, sizeof b, "L%d", l);
            dl->AddText(ImVec2(o.x, o.y + head_h + l * (cell + gap) + cell / 2 - ImGui::GetTextLineHeight() / 2), lc, b);
        }
        const bool kept = c.has_layer(l);
        if (!kept) { // left out by the capture budget: one grey band, its words centred where they fit
            ImVec2 a(o.x + label_w, o.y + head_h + l * (cell + gap));
            ImVec2 z(a.x + H * (cell + gap) - gap, a.y + cell);
            dl->AddRectFilled(a, z, IM_COL32(50, 50, 50, 255));
            const char* msg = "not kept (memory budget): select a head here to capture this layer";
            if (ImGui::CalcTextSize(msg).x > z.x - a.x - 6) msg = "not kept";
            ImVec2 ts = ImGui::CalcTextSize(msg);
            if (ts.y <= cell && ts.x <= z.x - a.x)
                dl->AddText(ImVec2((a.x + z.x - ts.x) / 2, (a.y + z.y - ts.y) / 2), IM_COL32(160, 160, 160, 255), msg);
        }
        for (int h = 0; h < H; h++) {
            ImVec2 a(o.x + label_w + h * (cell + gap), o.y + head_h + l * (cell + gap));
            ImVec2 z(a.x + cell, a.y + cell);
            GLuint tex = ui.hm.head(l, h);
            if (tex && kept) dl->AddImage((ImTextureID)(intptr_t)tex, a, z);
            bool ablated = head_ablated(s.ablation, l, h);
            bool selected = l == s.sel_layer && h == s.sel_head;
            if (ablated) {
                dl->AddRectFilled(a, z, IM_COL32(0, 0, 0, 140));
                dl->AddLine(a, z, IM_COL32(255, 70, 70, 255), 2.0f);
                dl->AddLine(ImVec2(a.x, z.y), ImVec2(z.x, a.y), IM_COL32(255, 70, 70, 255), 2.0f);
                dl->AddRect(a, z, IM_COL32(255, 70, 70, 255), 0, 0, 2.0f);
            }
            if (selected) dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), IM_COL32(255, 190, 60, 255), 0, 0, 2.5f);
            ui.widgets["head " + std::to_string(l) + "." + std::to_string(h)] = ImVec4(a.x, a.y, z.x, z.y);
            if (ImGui::IsMouseHoveringRect(a, z) && ImGui::IsWindowHovered()) {
                size_t k = (size_t)l * H + h;
                ImGui::BeginTooltip();
                ImGui::Text("L%d H%d%s", l, h, ablated ? "  (ablated)" : "");
                ImGui::Separator();
                if (kept) {
                    const gb::head_scores& sc = s.result->scores;
                    ImGui::Text("entropy          %.2f nats", sc.score[gb::SCORE_ENTROPY][k]);
                    ImGui::Text("previous token   %.2f", sc.score[gb::SCORE_PREV_TOKEN][k]);
                    ImGui::Text("first token      %.2f", sc.score[gb::SCORE_FIRST_TOKEN][k]);
                } else {
                    ImGui::TextDisabled("attention not kept (memory budget): no pattern, no metrics");
                }
                ImGui::TextDisabled("click: open   right-click / ctrl+click: %s", ablated ? "restore" : "ablate");
                ImGui::EndTooltip();
                bool toggle = ImGui::IsMouseClicked(1) || (ImGui::IsMouseClicked(0) && ImGui::GetIO().KeyCtrl);
                if (toggle) toggle_head(s.ablation, l, h);
                else if (ImGui::IsMouseClicked(0)) s.sel_layer = l, s.sel_head = h;
            }
        }
    }
    ImGui::Dummy(ImVec2(label_w + H * (cell + gap), head_h + L * (cell + gap)));
}

} // namespace gbui
