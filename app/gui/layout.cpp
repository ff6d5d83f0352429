// The window's layout: panel windows placed by the window's size, the left column's and the analyses' tab
// bars, and the status bar.
#include "layout.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

namespace gbui {

static void panel_window(const char* id, ImVec2 pos, ImVec2 size, void (*draw)(app_state&, ui_context&), app_state& s,
                         ui_context& ui, ImGuiWindowFlags extra = 0) {
    ImGui::SetNextWindowPos(pos);
    ImGui::SetNextWindowSize(size);
    ImGuiWindowFlags f = extra | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove |
                         ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoBringToFrontOnFocus |
                         ImGuiWindowFlags_NoSavedSettings;
    if (ImGui::Begin(id, nullptr, f)) {
        float y0 = ImGui::GetCursorPosY();
        draw(s, ui);
        ui.content_h[id] = ImGui::GetCursorPosY() - y0; // what the panel would need (layout, next frame)
    }
    if (ui.flash_window == id) { // a Learn link points here: a pulsing outline, gone after 1.5 s
        const double left = std::chrono::duration<double>(ui.flash_until - std::chrono::steady_clock::now()).count();
        if (left > 0) {
            const float a = 0.55f + 0.45f * (float)std::cos(left * 9.0);
            ImGui::GetForegroundDrawList()->AddRect(pos, ImVec2(pos.x + size.x, pos.y + size.y),
                                                    IM_COL32(250, 200, 90, (int)(255 * a)), 4, 0, 3);
        } else {
            ui.flash_window.clear();
        }
    }
    ImGui::End();
}

// The left column when Ablations and Model do not both fit (short windows): one panel with two tabs.
static void left_tabs(app_state& s, ui_context& ui) {
    if (ImGui::BeginTabBar("##left")) {
        for (auto [name, draw] : {std::pair{"Ablations", panel_ablations}, std::pair{"Model", panel_model}}) {
            const bool model = std::string(name) == "Model";
            const bool opened = ImGui::BeginTabItem(name, nullptr, model && ui.select_model_tab ? ImGuiTabItemFlags_SetSelected : 0);
            if (model) ui.select_model_tab = false;
            if (opened) {
                float y0 = ImGui::GetCursorPosY();
                draw(s, ui);
                ui.content_h[name] = ImGui::GetCursorPosY() - y0;
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

// Under the attention grid: the head detail and the three analyses, as tabs. A tab chosen elsewhere (a click
// on an attribution head, a script, a session) is selected through ImGui; until ImGui shows it, the bar's
// current tab does not overwrite s.tab.
static void analysis_tabs(app_state& s, ui_context& ui) {
    static const char* labels[TAB_COUNT] = {"Head", "Logit lens", "Attribution", "Patching", "Learn", "Sampling", "Experts", "Image",
                                            "Cross-attention"};
    static void (*const draw[TAB_COUNT])(app_state&, ui_context&) = {panel_head, panel_lens, panel_attribution, panel_patching,
                                                                      panel_learn, panel_sampling, panel_experts, panel_image,
                                                                      panel_cross};
    // a tab this model lacks (Experts of a dense model, chosen by a session or a script) falls back to Head, once
    // no model that might have it is on its way
    if (!tab_available(s.tab, s.model.get()) && !s.loading && !s.pending) s.tab = TAB_HEAD;
    if (ImGui::BeginTabBar("##analysis")) {
        const bool forced = s.tab != ui.tab_shown;
        for (int t = 0; t < TAB_COUNT; t++) {
            if (!tab_available((analysis_tab)t, s.model.get())) continue;
            ImGuiTabItemFlags f = forced && t == s.tab ? ImGuiTabItemFlags_SetSelected : 0;
            bool open = ImGui::BeginTabItem(labels[t], nullptr, f);
            remember_item(ui, std::string("tab ") + labels[t]);
            if (open) {
                ui.tab_shown = (analysis_tab)t;
                if (!forced) s.tab = (analysis_tab)t;
                draw[t](s, ui);
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

void draw_layout(app_state& s, ui_context& ui, float W, float H) {
    // the prompt panel grows with its text and token chips (up to 26% of the window; then they scroll)
    const float g = 4, status_h = 26;
    const float prompt_h = std::max(118.0f, std::min(ui.prompt_wanted_h > 0 ? ui.prompt_wanted_h : 150.0f, H * 0.26f));
    float body_y = prompt_h + g, body_h = H - body_y - status_h - g;
    float left_w = W * 0.22f, right_w = W * 0.29f, mid_w = W - left_w - right_w - 4 * g; // the middle holds the analyses
    float mid_x = left_w + 2 * g, right_x = mid_x + mid_w + g;
    panel_window("Prompt", ImVec2(g, g), ImVec2(W - 2 * g, prompt_h - g), panel_prompt, s, ui);
    // left column: Ablations over Model, each as tall as its content, when both fit; else tabs (with some
    // hysteresis so that a scrollbar's width cannot make it flip every frame)
    const float pad = 2 * ImGui::GetStyle().WindowPadding.y + 4;
    float abl_h = ui.content_h["Ablations"] + pad, model_h = ui.content_h["Model"] + pad;
    if (abl_h + model_h + g > body_h) ui.left_tabs = true;
    else if (abl_h + model_h + g < body_h - 40) ui.left_tabs = false;
    if (ui.left_tabs) {
        panel_window("Left", ImVec2(g, body_y), ImVec2(left_w, body_h), left_tabs, s, ui);
    } else {
        ui.select_model_tab = false; // (only the frame after "How it differs" opened, should the column become tabs)
        // Model is as tall as its content, or capped (then it scrolls). Uncapped it never shows a scrollbar: one
        // appearing would narrow the text, wrap it onto more lines, grow the panel, drop the scrollbar, and so on,
        // a panel that jumps every frame
        const float full_h = model_h > pad ? model_h : body_h * 0.44f;
        model_h = std::min(full_h, body_h * 0.6f);
        panel_window("Ablations", ImVec2(g, body_y), ImVec2(left_w, body_h - model_h - g), panel_ablations, s, ui);
        panel_window("Model", ImVec2(g, body_y + body_h - model_h), ImVec2(left_w, model_h), panel_model, s, ui,
                     full_h <= model_h ? ImGuiWindowFlags_NoScrollbar : 0);
    }
    panel_window("Overview", ImVec2(mid_x, body_y), ImVec2(mid_w, body_h * 0.42f - g), panel_overview, s, ui);
    panel_window("Analysis", ImVec2(mid_x, body_y + body_h * 0.42f), ImVec2(mid_w, body_h * 0.58f), analysis_tabs, s, ui);
    panel_window("Output", ImVec2(right_x, body_y), ImVec2(right_w, body_h * 0.52f - g), panel_output, s, ui);
    panel_window("Residual", ImVec2(right_x, body_y + body_h * 0.52f), ImVec2(right_w, body_h * 0.48f), panel_residual, s, ui);
    // status bar: the one-line error (previous result stays on screen), else the last status
    ImGui::SetNextWindowPos(ImVec2(g, H - status_h));
    ImGui::SetNextWindowSize(ImVec2(W - 2 * g, status_h - g));
    ImGui::Begin("Status", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoMove);
    if (!s.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "error: %s", s.error.c_str());
    else if (!s.warning.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.warning.c_str());
    else if (s.loading) ImGui::Text("loading model... %.0f%%", s.load_progress * 100);
    else if (s.busy) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "running...");
    else if (s.result && !s.result->notice.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.result->notice.c_str());
    else ImGui::TextDisabled("%s", s.status.empty() ? "ready" : s.status.c_str());
    ImGui::SameLine(ImGui::GetWindowWidth() - 160);
    ImGui::TextDisabled("%.0f fps", ImGui::GetIO().Framerate);
    ImGui::End();
}

void set_style() {
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 4;
    st.FrameRounding = 3;
    st.WindowPadding = ImVec2(10, 8);
}

} // namespace gbui
