// Text scale: the font atlas rebuilt at 15 px x scale (crisp glyphs, not stretched ones) and ImGui's style sizes
// scaled from a pristine copy, between frames; px() scales the panels' own pixel sizes the same way.
#pragma once
#include "fonts.h"

namespace gbui {

constexpr float min_ui_scale = 0.6f, max_ui_scale = 3.0f;
constexpr float base_font_px = 15.0f;  // the font's pixel size at 100 %
constexpr float presenting_factor = 1.5f; // presentation mode's scale over the chosen one

// s clamped to [min_ui_scale, max_ui_scale]; 1 for a value that is not a number.
float clamp_ui_scale(float s);
// The next step up (dir > 0) or down from s: 60, 70, 80, 90, 100, 110, 125, 150, 175, 200, 250, 300 %.
float step_ui_scale(float s, int dir);
// The scale the frames are drawn at now (what apply_ui_scale last applied).
float current_ui_scale();
// v pixels at 100 %, in pixels at the current scale (the panels' fixed sizes: column widths, gaps, minimums).
float px(float v);
// Keeps the style set_style made as the pristine one that every scale is made from (once, after set_style).
void keep_pristine_style();
// Rebuilds the font atlas at base_font_px x scale (with the large font when `large`: presentation mode's
// caption), recreates its GL texture and scales the pristine style, when either differs from what is applied.
// Between frames only (never inside NewFrame .. Render). Takes up to 2 x max_ui_scale (a panel's 2x export).
// Returns whether anything was rebuilt.
bool apply_ui_scale(font_state& fs, float scale, bool large);

} // namespace gbui
