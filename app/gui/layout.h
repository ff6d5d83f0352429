// The window's look and layout: a fixed tiling of panel windows that fills the window and follows its size (the left
// column and the analyses as tab bars), and the status bar.
#pragma once
#include "ui.h"

namespace gbui {

// The app's look: ImGui's dark colours, rounded corners, roomier window padding.
void set_style();
// Draws every panel and the status bar into a W x H window (inside an ImGui frame).
void draw_layout(app_state& s, ui_context& ui, float W, float H);

} // namespace gbui
