// Viridis colour map, the heatmaps' pixels (worker thread) and their texture uploads (UI thread).
#include "heatmaps.h"

#include <algorithm>
#include <chrono>
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

std::shared_ptr<heat_pixels> make_heat_pixels(const run_result& r, scale_mode scale) {
    const gb::record& c = r.cap;
    const int T = c.n_tokens, L = c.n_layer, H = c.n_head;
    auto px = std::make_shared<heat_pixels>();
    px->request_id = r.request_id;
    px->scale = scale;
    px->n_layer = L, px->n_head = H, px->n_tokens = T;
    px->layer_slot.assign(L, -1);
    int kept = 0;
    for (int l = 0; l < L; l++)
        if (c.has_layer(l)) px->layer_slot[l] = kept++;
    px->heads.resize((size_t)kept * H * T * T * 4);
    uint8_t lut[256][3]; // viridis at 256 levels: the 8-bit output cannot show more
    for (int i = 0; i < 256; i++) viridis(i / 255.0f, lut[i]);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float* p = c.head(l, h);
            if (!p) continue;
            uint8_t* out = &px->heads[((size_t)px->layer_slot[l] * H + h) * T * T * 4];
            for (int i = 0; i < T; i++) {
                float row_max = 0;
                for (int j = 0; j <= i; j++) row_max = std::max(row_max, p[i * T + j]);
                for (int j = 0; j < T; j++) {
                    uint8_t* q = &out[((size_t)i * T + j) * 4];
                    if (j > i) std::copy(masked_rgb, masked_rgb + 3, q);
                    else {
                        float t = scale_value(p[i * T + j], scale, row_max);
                        t = std::isfinite(t) ? std::min(1.0f, std::max(0.0f, t)) : 0.0f;
                        std::copy(lut[(int)std::lround(t * 255)], lut[(int)std::lround(t * 255)] + 3, q);
                    }
                    q[3] = 255;
                }
            }
        }
    // residual norms: rows = points (embed, L0 attn, ...), columns = tokens; colour by log norm
    const int P = 2 * L + 1;
    px->resid_min = 1e30f, px->resid_max = 0;
    for (float v : c.resid_norm)
        if (std::isfinite(v)) px->resid_min = std::min(px->resid_min, v), px->resid_max = std::max(px->resid_max, v);
    if (px->resid_min > px->resid_max) px->resid_min = px->resid_max = 0;
    px->resid.resize((size_t)P * T * 4);
    float lo = std::log(std::max(px->resid_min, 1e-6f)), hi = std::log(std::max(px->resid_max, 1e-6f));
    for (int p = 0; p < P; p++)
        for (int t = 0; t < T; t++) {
            float v = c.resid_norm[(size_t)p * T + t];
            uint8_t* q = &px->resid[((size_t)p * T + t) * 4];
            viridis(hi > lo ? (std::log(std::max(v, 1e-6f)) - lo) / (hi - lo) : 0.5f, q);
            q[3] = 255;
        }
    return px;
}

// Fills tex (created on first use) with w x h RGBA pixels and its mipmaps: thumbnails of T = 256 patterns
// drawn 30 px wide alias badly without them.
static void upload(GLuint& tex, int w, int h, const uint8_t* rgba) {
    if (!tex) {
        glGenTextures(1, &tex);
        glBindTexture(GL_TEXTURE_2D, tex);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR_MIPMAP_LINEAR);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST); // crisp cells when zoomed in
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    }
    glBindTexture(GL_TEXTURE_2D, tex);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
    glGenerateMipmap(GL_TEXTURE_2D);
}

static void free_set(texture_set& t) {
    for (GLuint& x : t.heads)
        if (x) glDeleteTextures(1, &x);
    if (t.resid) glDeleteTextures(1, &t.resid);
    t = texture_set();
}

void free_heatmaps(heatmaps& hm) {
    free_set(hm.front);
    free_set(hm.back);
    hm.shown.reset();
    hm.filling.reset();
    hm.next_head = 0;
}

bool upload_heatmaps(heatmaps& hm, const std::shared_ptr<const heat_pixels>& px, double budget_ms) {
    if (!px) return false;
    if (hm.shown == px) return true;
    const auto start = std::chrono::steady_clock::now();
    auto spent_ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(); };
    const int L = px->n_layer, H = px->n_head, T = px->n_tokens;
    const size_t total = px->heads.size() + px->resid.size();
    if (hm.filling != px) hm.filling = px, hm.next_head = 0;
    // small (a few MB): straight into the textures on screen in one frame; else into back over as many
    // frames as the time budget needs, then swapped in
    const bool direct = hm.next_head == 0 && total <= (4u << 20);
    texture_set& dst = direct ? hm.front : hm.back;
    if (dst.n_layer != L || dst.n_head != H || dst.n_tokens != T) { // sizes changed: new textures
        free_set(dst);
        dst.n_layer = L, dst.n_head = H, dst.n_tokens = T;
        dst.heads.assign((size_t)L * H, 0);
    }
    bool any = false;
    for (; hm.next_head < (size_t)L * H && (direct || !any || spent_ms() < budget_ms); hm.next_head++) {
        GLuint& tex = dst.heads[hm.next_head];
        const uint8_t* p = px->head((int)hm.next_head / H, (int)hm.next_head % H);
        if (!p) { // layer left out by the capture budget: no stale picture of an older result
            if (tex) glDeleteTextures(1, &tex);
            tex = 0;
            continue;
        }
        upload(tex, T, T, p);
        any = true;
    }
    if (hm.next_head < (size_t)L * H) return false; // more next frame
    upload(dst.resid, T, 2 * L + 1, px->resid.data());
    if (!direct) std::swap(hm.front, hm.back);
    hm.shown = px;
    hm.filling.reset();
    hm.next_head = 0;
    return true;
}

} // namespace gbui
