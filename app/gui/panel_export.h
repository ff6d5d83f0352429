// A panel's export for slides and papers: one extra frame draws the panel alone (never shown on screen), then
//  - SVG: its draw lists (the window's and its child windows') turned into vector shapes: untextured triangles into
//    <rect> and <polygon>, the font's glyph quads back into <text> runs (the glyph is found by its place in the font
//    atlas), and images (the heatmaps' textures) into one <rect> per texel (an embedded PNG when too many);
//    anti-aliasing is off for that frame, so that edges are plain triangles;
//  - PNG at twice the scale: the fonts rebuilt at 2x and the style scaled, rendered into an offscreen framebuffer.
#pragma once
#include <string>

#include "fonts.h"
#include "ui.h"

namespace gbui {

// Writes ui.exports' first file (between frames; the panel keeps the size the last frame gave it, ui.drawn's
// "panel NAME"). Says what it wrote in s.status and ui.exported, or why not in s.error.
void run_panel_export(app_state& s, ui_context& ui, font_state& fonts);
// The SVG of window `id` and its child windows as the last ImGui::Render left them, with the window's corner at
// (0, 0) and w x h its size; throws gb::error when no such window was drawn.
std::string window_svg(const std::string& id, float w, float h, const std::string& title);

} // namespace gbui
