// Text scale: steps, the pristine style, and the atlas and style rebuilt for a new scale.
#include "text_scale.h"

#include <backends/imgui_impl_opengl3.h>

#include <cmath>
#include <iterator>

namespace gbui {

static const float steps[] = {0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f};
static float applied = 1.0f;       // the scale the fonts and the style are at
static ImGuiStyle pristine;        // the style at 100 %
static bool have_pristine = false;

float clamp_ui_scale(float s) {
    if (!std::isfinite(s)) return 1.0f;
    return std::fmin(max_ui_scale, std::fmax(min_ui_scale, s));
}

float step_ui_scale(float s, int dir) {
    if (dir > 0) {
        for (float v : steps)
            if (v > s + 0.01f) return v;
        return max_ui_scale;
    }
    for (auto it = std::rbegin(steps); it != std::rend(steps); ++it)
        if (*it < s - 0.01f) return *it;
    return min_ui_scale;
}

float current_ui_scale() { return applied; }

float px(float v) { return v * applied; }

void keep_pristine_style() {
    pristine = ImGui::GetStyle();
    have_pristine = true;
}

bool apply_ui_scale(font_state& fs, float scale, bool large) {
    // up to twice the largest: a 2x export of a panel shown at 300 %
    scale = std::isfinite(scale) ? std::fmin(2 * max_ui_scale, std::fmax(min_ui_scale, scale)) : 1.0f;
    const float size = std::round(base_font_px * scale);
    if (size == fs.size_px && large == fs.large && scale == applied) return false;
    const bool fonts_change = size != fs.size_px || large != fs.large;
    fs.size_px = size, fs.large = large;
    if (fonts_change) {
        build_fonts(fs);
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
    }
    if (!have_pristine) keep_pristine_style();
    ImGui::GetStyle() = pristine;
    ImGui::GetStyle().ScaleAllSizes(scale);
    applied = scale;
    return true;
}

} // namespace gbui
