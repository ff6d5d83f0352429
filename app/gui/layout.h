// The window's look and layout: a fixed tiling of panel windows that fills the window and follows its size (the left
// column and the analyses as tab bars), and the status bar.
#pragma once
#include <string>

#include "ui.h"

namespace gbui {

// The tiled layout's splitters (ui.split, remembered in settings.json): drag one to move the border between two
// panels, double-click it to return to the automatic size.
enum split_kind {
    SPLIT_LEFT,     // the left column's width (Ablations, Model), a fraction of the window's width
    SPLIT_RIGHT,    // the right column's width (Next token, Residual)
    SPLIT_GRID,     // the attention grid's height in the middle column, a fraction of the body's height
    SPLIT_RESIDUAL, // the residual panel's height in the right column
    SPLIT_COUNT
};

// The app's look: ImGui's dark colours, rounded corners, roomier window padding.
void set_style();
// Draws every panel and the status bar into a W x H window (inside an ImGui frame).
// One panel fills the window instead when ui.maximised names it.
void draw_layout(app_state& s, ui_context& ui, float W, float H);
// Draws one panel window alone at (0, 0), size x size (a panel's export frame, panel_export.h).
void draw_panel_alone(app_state& s, ui_context& ui, const std::string& id, ImVec2 size);

} // namespace gbui
