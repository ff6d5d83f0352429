// What the panels share: the UI-thread context (textures, widget rectangles for scripted input, the worker)
// and one draw function per panel (each in its own panel_*.cpp).
#pragma once
#include <imgui.h>

#include <map>
#include <string>

#include "app_state.h"
#include "heatmaps.h"
#include "worker.h"

namespace gbui {

struct ui_context {
    heatmaps hm;
    worker* work = nullptr;
    std::map<std::string, ImVec4> widgets; // label -> screen rect (x0, y0, x1, y1), for scripted tests
    bool request_screenshot = false;       // Ctrl+E / export button: main writes the PNG after the frame
    std::string screenshot_path = "glassbox.png";
};

// Remembers the last item's rectangle under a name (scripted input finds widgets by it).
void remember_item(ui_context& ui, const std::string& name);
ImU32 viridis_u32(float t, float alpha = 1.0f);
// Ablation helpers shared by the overview grid and the ablations panel.
bool head_ablated(const gb::ablation& ab, int layer, int head);
void toggle_head(gb::ablation& ab, int layer, int head);
// A heading line for a panel, with a one-line hint.
void panel_title(const char* title, const char* hint = nullptr);

void panel_prompt(app_state& s, ui_context& ui);
void panel_overview(app_state& s, ui_context& ui);
void panel_head(app_state& s, ui_context& ui);
void panel_residual(app_state& s, ui_context& ui);
void panel_ablations(app_state& s, ui_context& ui);
void panel_output(app_state& s, ui_context& ui);
void panel_model(app_state& s, ui_context& ui);

// Sessions (.json: model path, prompt, BOS, ablations, selection) and capture export.
void save_session(const app_state& s, const std::string& path);
void load_session(app_state& s, const std::string& path); // throws gb::error
void export_capture(const app_state& s, const std::string& dir);

} // namespace gbui
