// The app's fonts: DejaVu Sans (ImGui's own when it is not installed) with a CJK font merged in when one is;
// glyphs the shown text needs beyond the base ranges are added on demand and the atlas rebuilt.
#pragma once
#include <imgui.h>

#include <set>
#include <string>

#include "app_state.h"

namespace gbui {

struct font_state {
    std::set<ImWchar> extra;  // code points added beyond the base ranges
    std::set<ImWchar> missing; // asked for, found in no font (never retried)
    std::string cjk;          // path of a CJK font, if any
    ImVector<ImWchar> ranges;
    std::string checked_for;   // the shown text's key when the atlas was last checked against it
    float size_px = 0;         // the base font's pixel size (text_scale.h sets it; 0: not built yet)
    bool large = false;        // a second, larger font is built too (presentation mode's caption)
};

// The larger font (presentation mode's caption), or nullptr when the atlas has none. Inside a frame.
ImFont* large_font();

// Builds the font atlas at fs.size_px (and 1.4 x that when fs.large): the base ranges and fs.extra, from DejaVu
// Sans and the CJK font (merged into each).
void build_fonts(font_state& fs);
// Adds glyphs for text the font lacks; returns true when the atlas must be rebuilt.
bool need_glyphs(font_state& fs, const std::string& text);
// Everything the window may show as text: the prompt, its tokens, the top-k tokens and the continuation.
std::string glyph_text(const app_state& s);
// Rebuilds the atlas (and its texture) when the text on screen changed and needs glyphs the font lacks: the
// prompt, tokens, top-k tokens, continuation, the analyses' tokens.
void refresh_glyphs(font_state& fs, const app_state& s);
// Sets fs.cjk to the first of a few well-known CJK fonts that is installed.
void find_cjk_font(font_state& fs);

} // namespace gbui
