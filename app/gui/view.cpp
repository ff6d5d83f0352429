// The View controls: text scale, presentation mode, the maximised panel and the panel menus.
#include "view.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "settings.h"
#include "text_scale.h"

namespace gbui {

// script name, window id, what the menus call it
static const struct {
    const char* name;
    const char* window;
    const char* label;
} panels[] = {{"prompt", "Prompt", "Prompt"},          {"ablations", "Ablations", "Ablations"},
              {"model", "Model", "Model"},             {"left", "Left", "Ablations and Model"},
              {"overview", "Overview", "Attention heads"}, {"analysis", "Analysis", "Analysis tabs"},
              {"output", "Output", "Next token"},      {"residual", "Residual", "Residual stream"},
              {"side", "Side", "Next token, residual stream and ablations"},
              {"demo", "Demo", "Demo caption"}};

std::string panel_window_id(const std::string& name) {
    for (const auto& p : panels)
        if (name == p.name || name == p.window) return p.window;
    return "";
}

static const char* panel_label(const std::string& window) {
    for (const auto& p : panels)
        if (window == p.window) return p.label;
    return "panel";
}

std::string panel_file_name(const app_state& s, const std::string& window) {
    if (window == "Overview") return "attention-heads";
    if (window == "Output") return "next-token";
    if (window == "Residual") return "residual-stream";
    if (window == "Analysis") {
        if (s.tab == TAB_HEAD) return "head-L" + std::to_string(s.sel_layer) + "H" + std::to_string(s.sel_head);
        if (s.tab == TAB_LENS) return "logit-lens";
        if (s.tab == TAB_CROSS) return "cross-attention";
        return tab_name(s.tab);
    }
    std::string n = window;
    for (char& c : n) c = (char)std::tolower((unsigned char)c);
    return n;
}

float shown_ui_scale(const app_state& s) { return clamp_ui_scale(s.ui_scale * (s.presenting ? presenting_factor : 1.0f)); }

void remember_ui_scale(app_state& s, ui_context& ui) {
    if (std::fabs(s.ui_scale - ui.saved_ui_scale) < 1e-4f) return;
    ui.saved_ui_scale = s.ui_scale;
    if (s.config_dir.empty()) return;
    const float v = s.ui_scale;
    std::string err = update_settings(s.config_dir, [&](app_settings& a) { a.ui_scale = v; });
    if (!err.empty()) std::fprintf(stderr, "glassbox: %s: the text size is not remembered\n", err.c_str());
}

// glassbox-NAME(-20250101-120000)(-2)EXT in dir: with a stamp, never an earlier file's name.
static std::string export_path(const std::string& dir, const std::string& name, bool stamped, const char* ext) {
    std::string base = (dir.empty() ? "" : dir + "/") + "glassbox-" + name;
    if (!stamped) return base + ext;
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "-%Y%m%d-%H%M%S", std::localtime(&now));
    base += stamp;
    std::string path = base + ext;
    for (int i = 2; std::ifstream(path).good(); i++) path = base + "-" + std::to_string(i) + ext;
    return path;
}

void export_panel(app_state& s, ui_context& ui, const std::string& window, const std::string& dir, bool stamped) {
    const std::string name = panel_file_name(s, window);
    ui.exports.push_back({window, true, export_path(dir, name, stamped, ".svg")});
    ui.exports.push_back({window, false, export_path(dir, name, stamped, "@2x.png")});
}

// The panel F11 and Ctrl+Shift+E act on: the focused one, else the one under the mouse, else the analyses.
static std::string target_panel(const ui_context& ui) {
    if (!ui.maximised.empty()) return ui.maximised;
    if (!ui.focused_panel.empty()) return ui.focused_panel;
    return ui.hovered_panel.empty() ? "Analysis" : ui.hovered_panel;
}

static void set_scale(app_state& s, float v) { s.ui_scale = clamp_ui_scale(v); }

void view_keys(app_state& s, ui_context& ui) {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD)))
        set_scale(s, step_ui_scale(s.ui_scale, +1));
    if (io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT)))
        set_scale(s, step_ui_scale(s.ui_scale, -1));
    if (io.KeyCtrl && (ImGui::IsKeyPressed(GLFW_KEY_0, false) || ImGui::IsKeyPressed(GLFW_KEY_KP_0, false)))
        set_scale(s, ui.default_ui_scale);
    if (ImGui::IsKeyPressed(GLFW_KEY_F5, false)) s.presenting = !s.presenting;
    if (ImGui::IsKeyPressed(GLFW_KEY_F11, false)) ui.maximised = ui.maximised.empty() ? target_panel(ui) : "";
    if (!io.WantTextInput && ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false)) {
        if (!ui.maximised.empty()) ui.maximised.clear();
        else s.presenting = false;
    }
    if (io.KeyCtrl && io.KeyShift && ImGui::IsKeyPressed(GLFW_KEY_E, false)) export_panel(s, ui, target_panel(ui), "", true);
}

// The text size: smaller / larger buttons around the percentage, the steps, the default.
static void text_size_items(app_state& s, ui_context& ui) {
    ImGui::TextUnformatted("Text size");
    ImGui::SameLine();
    if (ImGui::SmallButton(" - ")) set_scale(s, step_ui_scale(s.ui_scale, -1));
    remember_item(ui, "text smaller");
    ImGui::SameLine();
    ImGui::Text("%3.0f %%", s.ui_scale * 100);
    ImGui::SameLine();
    if (ImGui::SmallButton(" + ")) set_scale(s, step_ui_scale(s.ui_scale, +1));
    remember_item(ui, "text larger");
    for (float v : {0.75f, 1.0f, 1.25f, 1.5f, 2.0f, 2.5f, 3.0f}) {
        char label[32];
        snprintf(label, sizeof label, "%.0f %%", v * 100);
        if (ImGui::MenuItem(label, nullptr, std::fabs(s.ui_scale - v) < 0.01f)) set_scale(s, v);
        remember_item(ui, std::string("text ") + label);
    }
    char def[64];
    snprintf(def, sizeof def, "Default (%.0f %%)", ui.default_ui_scale * 100);
    if (ImGui::MenuItem(def, "Ctrl+0")) set_scale(s, ui.default_ui_scale);
    ImGui::TextDisabled("Ctrl+= larger, Ctrl+- smaller");
}

// A panel's Maximise and Export items (the View menu's and the title line's menu).
static void panel_items(app_state& s, ui_context& ui, const std::string& window) {
    const bool is_max = ui.maximised == window;
    if (ImGui::MenuItem(is_max ? "Back to all panels" : "Fill the window", is_max ? "Esc" : "F11"))
        ui.maximised = is_max ? "" : window;
    remember_item(ui, "maximise " + window);
    if (ImGui::MenuItem("Export as SVG and PNG (2x)", "Ctrl+Shift+E")) export_panel(s, ui, window, "", true);
    remember_item(ui, "export " + window);
    ImGui::TextDisabled("to %s.svg / @2x.png", ("glassbox-" + panel_file_name(s, window) + "-<time>").c_str());
}

void view_menu(app_state& s, ui_context& ui) {
    char label[48];
    snprintf(label, sizeof label, "View: text %.0f %%%s", shown_ui_scale(s) * 100, s.presenting ? ", presenting" : "");
    if (ImGui::SmallButton(label)) ImGui::OpenPopup("##view_menu");
    remember_item(ui, "view menu");
    if (!ImGui::BeginPopup("##view_menu")) return;
    text_size_items(s, ui);
    ImGui::Separator();
    if (ImGui::MenuItem("Presentation mode", "F5", s.presenting)) s.presenting = !s.presenting;
    remember_item(ui, "presentation mode");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the demo's picture over most of the screen, larger text (x1.5), the model's controls hidden; "
                          "Esc or F5 leaves");
    if (ImGui::MenuItem("Explanations in full", nullptr, ui.explain_full)) {
        ui.explain_full = !ui.explain_full;
        if (!s.config_dir.empty()) { // folded from now on, or in full again, at the next starts too
            const char* now = ui.explain_full ? "full" : "folded";
            std::string err = update_settings(s.config_dir, [&](app_settings& a) { a.explanations = now; });
            if (!err.empty()) std::fprintf(stderr, "glassbox: %s: the choice is not remembered\n", err.c_str());
        }
    }
    remember_item(ui, "explanations in full");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the panels' explanations as paragraphs; else behind a (?) that shows them on hover. The "
                          "first start shows them, later ones fold them; presentation mode always folds them");
    ImGui::Separator();
    const std::string target = target_panel(ui);
    ImGui::TextDisabled("%s (the focused panel; right-click a panel's title for its own)", panel_label(target));
    panel_items(s, ui, target);
    ImGui::EndPopup();
}

void panel_title_line(app_state& s, ui_context& ui, const char* window) {
    const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
    const ImGuiStyle& st = ImGui::GetStyle();
    const ImVec2 a = wp, z(wp.x + ws.x, wp.y + st.WindowPadding.y + ImGui::GetFrameHeight());
    ui.widgets[std::string("title ") + window] = ImVec4(a.x, a.y, z.x, z.y);
    note_drawn(ui, std::string("panel ") + window, wp, ImVec2(wp.x + ws.x, wp.y + ws.y));
    if (ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows)) ui.focused_panel = window;
    const bool hovered = ImGui::IsWindowHovered(ImGuiHoveredFlags_RootAndChildWindows);
    if (hovered) ui.hovered_panel = window;
    // (a tab pressed on the analyses' first line is the active item, which ImGui says blocks the window's hover: a
    // double-click there selected the tab and did not fill the window)
    const bool on_title = ImGui::IsWindowHovered(ImGuiHoveredFlags_RootAndChildWindows | ImGuiHoveredFlags_AllowWhenBlockedByActiveItem) &&
                          ImGui::IsMouseHoveringRect(a, z, false);
    if (on_title && ImGui::IsMouseDoubleClicked(0)) ui.maximised = ui.maximised == window ? "" : window;
    if (on_title && ImGui::IsMouseClicked(1)) ImGui::OpenPopup("##panel_menu");
    if (ImGui::BeginPopup("##panel_menu")) {
        ImGui::TextDisabled("%s", panel_label(window));
        panel_items(s, ui, window);
        ImGui::EndPopup();
    }
}

} // namespace gbui
