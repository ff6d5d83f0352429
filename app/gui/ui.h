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
    float prompt_wanted_h = 0;             // height the prompt panel's content asked for (layout, next frame)
    std::map<std::string, float> content_h; // panel -> height its content took last frame (layout)
    bool left_tabs = false;                 // Ablations and Model share the left column as tabs
    bool prompt_editing = false;           // the prompt shows its editor (else the wrapped text)
    int prompt_edit_frames = 0;            // frames since the editor was asked for (focus takes two)
    bool prompt_cursor_to_end = false;     // the editor puts its cursor at the end on its first active frame
};

// Draws text rotated 90 degrees counter-clockwise (reading bottom to top) with its start at the bottom-left
// corner `at`: ImGui 1.86 has no rotated text, so the vertices AddText emits are rotated afterwards.
void add_text_vertical(ImDrawList* dl, ImVec2 at, ImU32 col, const char* text, float font_size = 0);
// A token's visible text cut to max_chars characters (with "…" when cut), for axis labels.
std::string short_label(const std::string& s, size_t max_chars = 10);
// Indices 0, k, 2k, ... of n labels spaced `spacing` pixels apart, with k the smallest step that gives each
// label `need` pixels (so labels never overlap).
int label_step(int n, float spacing, float need);

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
struct session_file {
    std::string model;          // path of the model it was saved with ("" if none)
    std::string prompt;
    bool bos = false;
    pending_settings settings;  // ablation and selection, checked against that model once it has loaded
};
void save_session(const app_state& s, const std::string& path);
session_file read_session(const std::string& path); // throws gb::error (file, JSON), no model checks
// The panel's Load (and the script's "session FILE"): prompt and BOS at once; the session's model is loaded
// if it is not the current one, and its ablation and selection are applied (and checked) against it.
void open_session(app_state& s, worker& w, const std::string& path);
void export_capture(const app_state& s, const std::string& dir);

} // namespace gbui
