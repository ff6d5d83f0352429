// The heatmaps' pixels, made on the worker thread (make_heat_pixels): each kept layer's head textures and the
// residual one, with their mipmaps, within the capture budget.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "app_state.h"

namespace gbui {

// Texels of a w x h picture with its mipmaps: level 0, then each level half the size of the one before (at
// least 1), down to 1 x 1. The heatmaps' mipmaps are box-filtered on the worker with their colours, because
// glGenerateMipmap costs ~1-3 ms a head texture and ~45 ms the residual one in Mesa's software renderer (144
// heads: half a second per result), and because rows an edit did not reach can then be reused.
inline int mip_dim(int n, int level) { return std::max(1, n >> level); }
inline int mip_count(int w, int h) {
    int n = 1;
    while ((w >> n) > 0 || (h >> n) > 0) n++;
    return n;
}
// The largest side of a head texture: the Head view is drawn at most a screen wide, and the T x T RGBA of every
// head of a kept layer (with its GL copy) grows with T^2. Within it, the side is also halved until the kept layers'
// pixels and their GL copy fit the capture budget, down to min_heat_dim (make_heat_pixels).
constexpr int max_heat_dim = 2048;
constexpr int min_heat_dim = 256;
inline size_t mip_offset(int w, int h, int level) { // texels before `level`
    size_t o = 0;
    for (int k = 0; k < level; k++) o += (size_t)mip_dim(w, k) * mip_dim(h, k);
    return o;
}

// Colour-mapped pixels of one result's heatmaps, made on the worker thread so that the UI thread only
// uploads them (colouring L*H*T*T cells on the UI thread would cost a visible frame hitch).
struct heat_pixels {
    uint64_t request_id = 0;          // the run_result they were made from
    scale_mode scale = SCALE_LINEAR;
    int n_layer = 0, n_head = 0, n_tokens = 0;
    // The head textures' side: n_tokens, halved until it is at most max_heat_dim and the kept layers' pixels with
    // their GL copy fit the capture budget, or it is min_heat_dim (a longer prompt's levels above it are not kept: at
    // 4,096 tokens a layer of 32 heads is 2.8 GB of RGBA with mipmaps at full size, 0.7 GB at 2048, 0.18 at 1024)
    int dim = 0;
    // [L] one layer's heads [H][head_texels()][4] RGBA: dim x dim and its mipmaps, masked (future) cells grey; null
    // when the layer was not kept (a part layer: its kept heads only). A layer whose pattern did not change is shared with the previous result's pixels.
    std::vector<std::shared_ptr<const uint8_t[]>> layers;
    gb::part_layer_heads part; // the record's part layer (gb::record::part): its buffer holds the kept heads only
    int layer_heads(int layer) const { return part.heads(layer, n_head); } // heads in its buffer
    std::vector<uint8_t> resid;       // [2L+1][T][4] RGBA of the log residual norm, then its mipmaps
    float resid_min = 0, resid_max = 0;
    size_t head_texels() const { return mip_offset(dim, dim, mip_count(dim, dim)); }
    // level 0 ([dim][dim][4]) of one head, its mipmaps after it; nullptr when its layer was not kept
    const uint8_t* head(int layer, int h, int level = 0) const {
        if (layer < 0 || layer >= n_layer || !layers[layer]) return nullptr;
        const int k = part.slot(layer, h);
        return k < 0 ? nullptr : layers[layer].get() + ((size_t)k * head_texels() + mip_offset(dim, dim, level)) * 4;
    }
    size_t bytes() const {
        size_t n = resid.size();
        for (int l = 0; l < n_layer; l++) n += layers[l] ? (size_t)layer_heads(l) * head_texels() * 4 : 0;
        return n;
    }
};

} // namespace gbui
