// The Learn tab's picture: what it drew in its last frame (the script's `print` reports it, so that tests can
// check the boxes, their live shapes and which one is lit), and the drawing function the tab calls.
#pragma once
#include <imgui.h>

#include <string>
#include <vector>

#include "analysis/learn_diagram.h"

namespace gbui {

struct learn_box_drawn {
    std::string part;    // gb::part_name ("qkv", "softmax", ...); encoder column boxes "encoder " + that
    std::string label;   // what the box says
    std::string shape;   // "[T, H, d_head] = [5, 8, 32]"
    bool lit = false;    // the current step's box
    int head = -1;       // the head whose slice the box marks (its path through attention); -1: no head axis
    ImVec4 rect;         // on screen: x0, y0, x1, y1
};

struct learn_view {
    int frame = -1;          // ImGui's frame count when the tab last drew it
    bool full = false;       // drawn over the window (the Present button), not inside the tab
    std::string kind;        // gb::kind_table(..).name
    int layers = 0;          // the stack's layer cells drawn (an encoder–decoder: the decoder's)
    int encoder_layers = 0;  // an encoder–decoder's encoder cells
    int cross_arrows = 0;    // arrows from the encoder's output into decoder layers
    std::vector<int> experts; // mixtures of experts: the experts marked as chosen in the MLP's box
    int layer = -1, head = -1, token = -1; // what the picture shows (the walk's, or the selection without a walk)
    int step = 0, steps = 0; // the current step and how many there are
    bool walk = false;       // the steps carry this token's numbers (a decoder's walk)
    std::string lit;         // the lit box's part
    std::string title, formula; // the current step's, as shown
    std::vector<learn_box_drawn> boxes;
    std::vector<std::string> missing_glyphs; // characters of the tab's text that the font lacks, "U+1D40"
    std::vector<std::string> raw_missing;    // the same of the core's text before font_safe (what it fixes)
    float need_w = 0;        // the width the picture's widest row needs at this scale (Present fits it)
    float pic_h = 0, step_h = 0; // the picture's and the step's text heights at this scale (Present lays them out)
};

// What the picture shows: the model's diagram, the step, the walk (nullptr without one).
struct learn_picture_in {
    const gb::learn_diagram* g = nullptr;
    const gb::learn_walk* walk = nullptr;
    std::vector<gb::diagram_part> parts; // [steps] the part each step lights
    int step = 0, layer = 0, head = 0, token = 0;
    std::string token_text;  // the token's visible text
    std::vector<int> experts; // mixtures of experts: the experts the router chose for the token (the walk's top-k)
};
// What the user did in the picture this frame.
struct learn_picture_out {
    int goto_step = -1;      // a box was clicked: the first step it lights
    int goto_layer = -1;     // a layer cell was clicked
};

struct ui_context;
// Draws the picture at the cursor in a w x h area (h: what it may take; returns the height it used), filling
// view's boxes; names each box "learn box PART" and each layer cell "learn layer L" for scripts.
float learn_picture(ui_context& ui, learn_view& view, const learn_picture_in& in, float w, float h, learn_picture_out& out);
// s with the characters the font lacks replaced by ones it has (the walk's E with a raised T becomes E⊤).
std::string font_safe(const std::string& s);
// The characters of s that the current font lacks ("U+1D40"), added to out once each.
void missing_glyphs(const std::string& s, std::vector<std::string>& out);

} // namespace gbui
