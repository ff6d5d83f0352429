// Colour map (viridis) and the GL textures of every head's pattern and the residual heatmap.
// Pixels and their mipmaps are made on the worker thread; the UI thread only uploads them, once per result or scale.
#pragma once
#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "app_state.h"
#include "heat_pixels.h"

namespace gbui {

// Viridis, interpolated from its published control points; t in [0,1].
void viridis(float t, uint8_t rgb[3]);
// Colour of masked (future) cells: a neutral grey, distinct from viridis(0)'s dark purple.
extern const uint8_t masked_rgb[3];
// Maps a probability to [0,1] for display under a scale mode (row_max: the row's largest value).
float scale_value(float p, scale_mode mode, float row_max);

struct reuse_plan; // derived.h

// Colours every kept head's pattern (under scale) and the residual-norm heatmap, with their mipmaps: worker
// thread. With `before`
// (pixels of the record `reuse` was planned against): layers it marks the same are shared, and rows before
// reuse->same_rows are copied instead of coloured again (when before has that scale).
std::shared_ptr<heat_pixels> make_heat_pixels(const run_result& r, scale_mode scale, const heat_pixels* before = nullptr,
                                              const reuse_plan* reuse = nullptr);

// GL textures of one heat_pixels: thumbnails and detail share them (mipmapped minification, crisp
// GL_NEAREST magnification).
struct texture_set {
    int n_layer = 0, n_head = 0, n_tokens = 0;
    std::vector<GLuint> heads;    // [L*H] T x T RGBA textures (0 when the layer was not kept)
    GLuint resid = 0;             // T x (2L+1) residual-norm heatmap
};

// What the panels draw (front) and, for results too large to upload in one frame, the set being filled
// over a few frames (back) that replaces front once complete: the screen never mixes two results.
struct heatmaps {
    texture_set front, back;
    std::shared_ptr<const heat_pixels> shown;   // what front holds
    std::shared_ptr<const heat_pixels> filling; // being uploaded into back
    size_t next_head = 0;                       // progress of filling (index into L*H)
    GLuint head(int layer, int h) const {
        size_t k = (size_t)layer * front.n_head + h;
        return layer >= 0 && h >= 0 && h < front.n_head && k < front.heads.size() ? front.heads[k] : 0;
    }
};

// Uploads px's textures for about budget_ms this frame (at least one; all at once when px is small);
// returns true once the textures panels draw hold px.
bool upload_heatmaps(heatmaps& hm, const std::shared_ptr<const heat_pixels>& px, double budget_ms);
void free_heatmaps(heatmaps& hm);

} // namespace gbui
