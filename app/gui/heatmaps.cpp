// Viridis colour map and texture uploads for the attention and residual heatmaps.
#include "heatmaps.h"

#include <algorithm>
#include <cmath>

namespace gbui {

// viridis at t = 0, 1/8, ..., 1 (matplotlib's published colour map)
static const uint8_t viridis_points[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                             {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                             {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
const uint8_t masked_rgb[3] = {38, 38, 44};

void viridis(float t, uint8_t rgb[3]) {
    t = std::min(1.0f, std::max(0.0f, std::isfinite(t) ? t : 0.0f)) * 8.0f;
    int i = std::min(7, (int)t);
    float f = t - i;
    for (int c = 0; c < 3; c++)
        rgb[c] = (uint8_t)std::lround(viridis_points[i][c] * (1 - f) + viridis_points[i + 1][c] * f);
}

float scale_value(float p, scale_mode mode, float row_max) {
    switch (mode) {
    case SCALE_LOG: return p <= 1e-4f ? 0.0f : (std::log10(p) + 4.0f) / 4.0f; // 1e-4 .. 1
    case SCALE_ROW_MAX: return row_max > 0 ? p / row_max : 0.0f;
    default: return p;
    }
}

static GLuint upload(GLuint tex, int w, int h, const std::vector<uint8_t>& rgba) {
    if (!tex) glGenTextures(1, &tex);
    glBindTexture(GL_TEXTURE_2D, tex);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST); // crisp cells when zoomed in
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
    return tex;
}

void free_heatmaps(heatmaps& hm) {
    for (GLuint t : hm.heads)
        if (t) glDeleteTextures(1, &t);
    hm.heads.clear();
    if (hm.resid) glDeleteTextures(1, &hm.resid);
    hm.resid = 0;
    hm.version = 0;
}

void update_heatmaps(heatmaps& hm, const app_state& s) {
    if (!s.result || (hm.version == s.result_version && hm.scale == s.scale)) return;
    const gb::capture& c = s.result->cap;
    const int T = c.n_tokens, L = c.n_layer, H = c.n_head;
    if ((int)hm.heads.size() != L * H || hm.n_tokens != T) free_heatmaps(hm);
    hm.heads.resize((size_t)L * H, 0);
    std::vector<uint8_t> rgba((size_t)T * T * 4);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float* p = c.head(l, h);
            if (!p) continue;
            for (int i = 0; i < T; i++) {
                float row_max = 0;
                for (int j = 0; j <= i; j++) row_max = std::max(row_max, p[i * T + j]);
                for (int j = 0; j < T; j++) {
                    uint8_t* px = &rgba[((size_t)i * T + j) * 4];
                    if (j > i) std::copy(masked_rgb, masked_rgb + 3, px);
                    else viridis(scale_value(p[i * T + j], s.scale, row_max), px);
                    px[3] = 255;
                }
            }
            hm.heads[l * H + h] = upload(hm.heads[l * H + h], T, T, rgba);
        }
    // residual norms: rows = points (embed, L0 attn, ...), columns = tokens; colour by log norm
    const int P = 2 * L + 1;
    hm.resid_min = 1e30f, hm.resid_max = 0;
    for (float v : c.resid_norm)
        if (std::isfinite(v)) hm.resid_min = std::min(hm.resid_min, v), hm.resid_max = std::max(hm.resid_max, v);
    std::vector<uint8_t> r((size_t)P * T * 4);
    float lo = std::log(std::max(hm.resid_min, 1e-6f)), hi = std::log(std::max(hm.resid_max, 1e-6f));
    for (int p = 0; p < P; p++)
        for (int t = 0; t < T; t++) {
            float v = c.resid_norm[(size_t)p * T + t];
            uint8_t* px = &r[((size_t)p * T + t) * 4];
            viridis(hi > lo ? (std::log(std::max(v, 1e-6f)) - lo) / (hi - lo) : 0.5f, px);
            px[3] = 255;
        }
    hm.resid = upload(hm.resid, T, P, r);
    hm.version = s.result_version;
    hm.scale = s.scale;
    hm.n_tokens = T;
}

} // namespace gbui
