// Colour map (viridis) and the GL textures of every head's pattern and the residual heatmap.
// Textures are rebuilt once per new result or scale change, never per frame.
#pragma once
#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>

#include <cstdint>
#include <vector>

#include "app_state.h"

namespace gbui {

// Viridis, interpolated from its published control points; t in [0,1].
void viridis(float t, uint8_t rgb[3]);
// Colour of masked (future) cells: a neutral grey, distinct from viridis(0)'s dark purple.
extern const uint8_t masked_rgb[3];
// Maps a probability to [0,1] for display under a scale mode (row_max: the row's largest value).
float scale_value(float p, scale_mode mode, float row_max);

struct heatmaps {
    uint64_t version = 0;         // result_version the textures show
    scale_mode scale = SCALE_LINEAR;
    int n_tokens = 0;
    std::vector<GLuint> heads;    // [L*H] T x T RGBA textures (0 when the layer was not captured)
    GLuint resid = 0;             // (2L+1) x T residual-norm heatmap
    float resid_max = 0, resid_min = 0;
};

// Re-uploads textures if the result or the scale changed.
void update_heatmaps(heatmaps& hm, const app_state& s);
void free_heatmaps(heatmaps& hm);

} // namespace gbui
