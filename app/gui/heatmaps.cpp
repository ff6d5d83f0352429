// Viridis colour map, the heatmaps' pixels and mipmaps (worker thread) and their texture uploads (UI thread).
#include "heatmaps.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "derived.h"

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

// Columns [x0, dw) of row y of one mipmap level from the level above it (sw x sh RGBA into dw x dh): each texel
// the mean of its 2 x 2 sources, clamped at the edges (an odd size's last row or column drops out, as in most
// GL drivers).
static void box_filter_row(const uint8_t* src, int sw, int sh, uint8_t* dst, int dw, int y, int x0) {
    const int y0 = std::min(2 * y, sh - 1), y1 = std::min(2 * y + 1, sh - 1);
    for (int x = x0; x < dw; x++) {
        const int xa = std::min(2 * x, sw - 1), xb = std::min(2 * x + 1, sw - 1);
        const uint8_t *a = src + ((size_t)y0 * sw + xa) * 4, *b = src + ((size_t)y0 * sw + xb) * 4;
        const uint8_t *c = src + ((size_t)y1 * sw + xa) * 4, *d = src + ((size_t)y1 * sw + xb) * 4;
        uint8_t* q = dst + ((size_t)y * dw + x) * 4;
        for (int ch = 0; ch < 4; ch++) q[ch] = (uint8_t)((a[ch] + b[ch] + c[ch] + d[ch] + 2) / 4);
    }
}

std::shared_ptr<heat_pixels> make_heat_pixels(const run_result& r, scale_mode scale, const heat_pixels* before,
                                              const reuse_plan* reuse) {
    const gb::record& c = r.cap();
    const int T = c.n_tokens, L = c.n_layer, H = c.n_head;
    auto px = std::make_shared<heat_pixels>();
    px->request_id = r.request_id;
    px->scale = scale;
    px->n_layer = L, px->n_head = H, px->n_tokens = T;
    // levels of the full T x T chain not kept: a prompt longer than max_heat_dim, or whose kept layers' pixels and
    // their GL copy (the same bytes again: in RAM with a software renderer) would pass the capture budget
    px->part = c.part;
    int kept_heads = 0; // (a part layer keeps some of its heads)
    for (int l = 0; l < L; l++) kept_heads += c.has(gb::HOOK_PATTERN, l) ? px->layer_heads(l) : 0;
    auto heat_bytes = [&](int side) { return 2 * (size_t)kept_heads * mip_offset(side, side, mip_count(side, side)) * 4; };
    int skip = 0;
    while (mip_dim(T, skip) > max_heat_dim ||
           (r.budget_bytes && mip_dim(T, skip) > min_heat_dim && heat_bytes(mip_dim(T, skip)) > r.budget_bytes))
        skip++;
    px->dim = mip_dim(T, skip);
    px->layers.assign(L, nullptr);
    if (before && (before->scale != scale || before->n_layer != L || before->n_head != H || !reuse)) before = nullptr;
    if (skip > 0 || (before && before->dim != before->n_tokens))
        before = nullptr; // (rows no longer map to texels one to one: colour everything)
    const int Tb = before ? before->n_tokens : 0;
    uint8_t lut[256][3]; // viridis at 256 levels: the 8-bit output cannot show more
    for (int i = 0; i < 256; i++) viridis(i / 255.0f, lut[i]);
    std::vector<uint8_t> masked_row((size_t)T * 4); // a row of masked cells (the future, or before a window)
    for (int j = 0; j < T; j++) std::copy(masked_rgb, masked_rgb + 3, &masked_row[(size_t)j * 4]), masked_row[(size_t)j * 4 + 3] = 255;
    const size_t head_bytes = px->head_texels() * 4;
    std::vector<std::shared_ptr<uint8_t[]>> fresh(L); // layers coloured here
    std::vector<int> copy_rows(L, 0);                 // rows of each taken from before
    for (int l = 0; l < L; l++) {
        if (!c.has(gb::HOOK_PATTERN, l)) continue;
        if (before && before->layers[l] && reuse->same_layer[l] && Tb == T) { // the very same pattern
            px->layers[l] = before->layers[l];
            continue;
        }
        fresh[l] = std::shared_ptr<uint8_t[]>(new uint8_t[(size_t)px->layer_heads(l) * head_bytes]); // all written below
        if (before && before->layers[l]) copy_rows[l] = std::min({reuse->same_rows, Tb, T});
    }
    const int levels = mip_count(T, T);
    // heads are independent. Level 0: rows of an unchanged prefix are copied (their cells past the old T are
    // masked), the others coloured. Each mipmap: texels whose 2x2 sources were copied are copied too.
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < L * H; k++) {
        const int l = k / H, h = k % H;
        const float* p = c.head(l, h);
        if (!fresh[l] || !p) continue; // (a part layer's heads not kept)
        uint8_t* kept = fresh[l].get() + (size_t)px->part.slot(l, h) * head_bytes;
        // a long prompt: the whole chain in a buffer of this head's (freed after it), then the levels from `skip`
        // on into kept
        std::unique_ptr<uint8_t[]> full(skip > 0 ? new uint8_t[mip_offset(T, T, levels) * 4] : nullptr);
        uint8_t* out = skip > 0 ? full.get() : kept;
        const uint8_t* old = copy_rows[l] ? before->head(l, h) : nullptr;
        const int same = old ? copy_rows[l] : 0;
        for (int i = 0; i < same; i++) {
            const int n = std::min(T, Tb);
            std::copy_n(old + (size_t)i * Tb * 4, (size_t)n * 4, out + (size_t)i * T * 4);
            std::copy_n(masked_row.data(), (size_t)(T - n) * 4, out + ((size_t)i * T + n) * 4);
        }
        for (int i = same; i < T; i++) {
            const int j0 = c.first_key(l, i); // keys before a sliding window are masked like the future
            const int j1 = c.last_key(i);     // an encoder's query sees the keys after it too
            float row_max = 0;
            for (int j = j0; j <= j1; j++) row_max = std::max(row_max, p[i * T + j]);
            uint8_t* q = out + (size_t)i * T * 4;
            std::copy_n(masked_row.data(), (size_t)j0 * 4, q);
            q += (size_t)j0 * 4;
            for (int j = j0; j <= j1; j++, q += 4) {
                float t = scale_value(p[i * T + j], scale, row_max);
                t = std::isfinite(t) ? std::min(1.0f, std::max(0.0f, t)) : 0.0f;
                const uint8_t* rgb = lut[(int)std::lround(t * 255)];
                q[0] = rgb[0], q[1] = rgb[1], q[2] = rgb[2], q[3] = 255;
            }
            std::copy_n(masked_row.data(), (size_t)(T - 1 - j1) * 4, q);
        }
        int same_k = same; // rows of the level whose sources are all copied ones
        for (int lv = 1; lv < levels; lv++) {
            const int sz = mip_dim(T, lv), src_sz = mip_dim(T, lv - 1), old_sz = old ? mip_dim(Tb, lv) : 0;
            const uint8_t* src = out + mip_offset(T, T, lv - 1) * 4;
            uint8_t* dst = out + mip_offset(T, T, lv) * 4;
            const uint8_t* old_lv = old ? old + mip_offset(Tb, Tb, lv) * 4 : nullptr;
            same_k /= 2;
            for (int r = 0; r < sz; r++) {
                int c0 = 0;
                if (r < same_k && old_lv) {
                    c0 = std::min(sz, old_sz);
                    std::copy_n(old_lv + (size_t)r * old_sz * 4, (size_t)c0 * 4, dst + (size_t)r * sz * 4);
                }
                box_filter_row(src, src_sz, src_sz, dst, sz, r, c0);
            }
        }
        if (skip > 0) std::copy_n(full.get() + mip_offset(T, T, skip) * 4, head_bytes, kept);
    }
    for (int l = 0; l < L; l++)
        if (fresh[l]) px->layers[l] = std::move(fresh[l]);
    // residual norms: rows = points (embed, L0 attn, ...), columns = tokens; colour by log norm
    const int P = 2 * L + 1;
    px->resid_min = 1e30f, px->resid_max = 0;
    for (float v : c.resid_norm)
        if (std::isfinite(v)) px->resid_min = std::min(px->resid_min, v), px->resid_max = std::max(px->resid_max, v);
    if (px->resid_min > px->resid_max) px->resid_min = px->resid_max = 0;
    px->resid.resize(mip_offset(T, P, mip_count(T, P)) * 4);
    float lo = std::log(std::max(px->resid_min, 1e-6f)), hi = std::log(std::max(px->resid_max, 1e-6f));
    for (int p = 0; p < P; p++)
        for (int t = 0; t < T; t++) {
            float v = c.resid_norm[(size_t)p * T + t];
            uint8_t* q = &px->resid[((size_t)p * T + t) * 4];
            viridis(hi > lo ? (std::log(std::max(v, 1e-6f)) - lo) / (hi - lo) : 0.5f, q);
            q[3] = 255;
        }
    for (int lv = 1; lv < mip_count(T, P); lv++) // a side already 1 texel wide stays 1
        for (int y = 0; y < mip_dim(P, lv); y++)
            box_filter_row(&px->resid[mip_offset(T, P, lv - 1) * 4], mip_dim(T, lv - 1), mip_dim(P, lv - 1),
                           &px->resid[mip_offset(T, P, lv) * 4], mip_dim(T, lv), y, 0);
    return px;
}

// Fills tex (created on first use, w x h) with the RGBA levels made on the worker: level 0 and its mipmaps
// (heat_pixels). Thumbnails of T = 256 patterns drawn 30 px wide alias badly without mipmaps.
static void upload(GLuint& tex, int w, int h, const uint8_t* levels) {
    const int n = mip_count(w, h);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    if (!tex) {
        glGenTextures(1, &tex);
        glBindTexture(GL_TEXTURE_2D, tex);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR_MIPMAP_LINEAR);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST); // crisp cells when zoomed in
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAX_LEVEL, n - 1);
        for (int k = 0; k < n; k++)
            glTexImage2D(GL_TEXTURE_2D, k, GL_RGBA8, mip_dim(w, k), mip_dim(h, k), 0, GL_RGBA, GL_UNSIGNED_BYTE,
                         levels + mip_offset(w, h, k) * 4);
        return;
    }
    glBindTexture(GL_TEXTURE_2D, tex);
    for (int k = 0; k < n; k++)
        glTexSubImage2D(GL_TEXTURE_2D, k, 0, 0, mip_dim(w, k), mip_dim(h, k), GL_RGBA, GL_UNSIGNED_BYTE,
                        levels + mip_offset(w, h, k) * 4);
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
    const size_t total = px->bytes();
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
        upload(tex, px->dim, px->dim, p);
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
