// The backward pass's ops (see grad.h): norms, RoPE, activations, soft-cap, attention.
#include "kernels/grad.h"

#include <algorithm>
#include <cmath>
#include <omp.h>

#include "util/error.h"
#include "util/lanes.h"
#include "util/simd_math.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// norms
// ---------------------------------------------------------------------------------------------
// One row: y = xhat * g (+ b), xhat = (x - mean) * inv (mean 0 for RMSNorm), inv as the forward rounds it.
// gx = inv * (gy g - mean(gy g) - xhat * mean(gy g xhat)), without the first mean for RMSNorm.
static void norm_row_backward(float* gx, const float* x, const float* gy, const float* g, bool layernorm, float eps,
                              int d, bool accumulate) {
    // in double, each loop a vector of doubles at a time (the sums' order differs from a plain loop's only at
    // double's rounding, far below the float results)
    double mean = 0, var = 0;
    if (layernorm) {
#pragma omp simd reduction(+ : mean)
        for (int i = 0; i < d; i++) mean += x[i];
        mean /= d;
    }
#pragma omp simd reduction(+ : var)
    for (int i = 0; i < d; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
    var /= d;
    const double inv = (float)(1.0 / std::sqrt(var + eps)), fmean = (float)mean;
    double s1 = 0, s2 = 0; // sums of gy g and of gy g xhat
#pragma omp simd reduction(+ : s1, s2)
    for (int i = 0; i < d; i++) {
        const double gg = (double)gy[i] * g[i], xh = ((double)x[i] - fmean) * inv;
        s1 += gg, s2 += gg * xh;
    }
    const double m1 = layernorm ? s1 / d : 0.0, m2 = s2 / d;
    // gx may be gy (each element read before it is written); not accumulating, gx may hold anything
    if (accumulate) {
#pragma omp simd
        for (int i = 0; i < d; i++) {
            const double gg = (double)gy[i] * g[i], xh = ((double)x[i] - fmean) * inv;
            gx[i] += (float)(inv * (gg - m1 - xh * m2));
        }
        return;
    }
#pragma omp simd
    for (int i = 0; i < d; i++) {
        const double gg = (double)gy[i] * g[i], xh = ((double)x[i] - fmean) * inv;
        gx[i] = (float)(inv * (gg - m1 - xh * m2));
    }
}

void norm_backward(float* gx, const float* x, const float* gy, const std::vector<float>* g, norm_kind kind, float eps,
                   int n, int d, bool accumulate) {
#pragma omp parallel for schedule(static) if (n > 1 && (int64_t)n * d >= parallel_min_rows)
    for (int t = 0; t < n; t++) {
        float* o = gx + (size_t)t * d;
        const float* gt = gy + (size_t)t * d;
        if (!g) {
            for (int i = 0; i < d; i++) o[i] = accumulate ? o[i] + gt[i] : gt[i];
            continue;
        }
        norm_row_backward(o, x + (size_t)t * d, gt, g->data(), kind == NORM_LAYERNORM, eps, d, accumulate);
    }
}

void rms_groups_backward(float* gy, const float* x, int stride, int n, int groups, int width,
                         const std::vector<float>& g, float eps) {
    for (int t = 0; t < n; t++)
        for (int k = 0; k < groups; k++) {
            const size_t at = (size_t)t * stride + (size_t)k * width;
            norm_row_backward(gy + at, x + at, gy + at, g.data(), false, eps, width, false);
        }
}

// ---------------------------------------------------------------------------------------------
// RoPE: a rotation by the position's angle per pair; its gradient turns back by the same angle
// ---------------------------------------------------------------------------------------------
void rope_backward(float* g, int stride, int n, int n_heads, int d_head, int pos0, const std::vector<double>& freq,
                   rope_pairing pairing) {
    const int half = (int)freq.size();
    if (half == 0 || 2 * half > d_head) throw error("internal: RoPE table does not fit the head size");
    std::vector<float> cs(2 * (size_t)half);
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < half; i++) { // the forward's cos and sin, rounded as it rounds them
            const double ang = (double)(pos0 + t) * freq[i];
            cs[2 * i] = (float)std::cos(ang), cs[2 * i + 1] = (float)std::sin(ang);
        }
        for (int h = 0; h < n_heads; h++) {
            float* v = g + (size_t)t * stride + (size_t)h * d_head;
            for (int i = 0; i < half; i++) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const int a = pairing == ROPE_HALF ? i : 2 * i, b = pairing == ROPE_HALF ? i + half : 2 * i + 1;
                const float ga = v[a], gb_ = v[b]; // forward: a' = a c - b s, b' = a s + b c
                v[a] = ga * c + gb_ * s;
                v[b] = gb_ * c - ga * s;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// activations, a vector of lanes at a time (the tail through a zero-padded vector)
// ---------------------------------------------------------------------------------------------
// out[i] = f(a[i], b[i], c[i]) for i < n; b and c may be null (f then sees zeros); out may be a, b or c
template <class F> static void lanes3(float* out, const float* a, const float* b, const float* c, size_t n, F f) {
    const int64_t chunk = 4096, chunks = ((int64_t)n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if ((int64_t)n > parallel_min_work / 8)
    for (int64_t ci = 0; ci < chunks; ci++) {
        const int64_t i0 = ci * chunk, len = std::min<int64_t>(chunk, (int64_t)n - i0);
        int64_t i = 0;
        for (; i + AL <= len; i += AL) { // whole vectors straight from memory (avec loads unaligned)
            const int64_t at = i0 + i;
            const avec r = f(*(const avec*)(a + at), b ? *(const avec*)(b + at) : avec{}, c ? *(const avec*)(c + at) : avec{});
            *(avec*)(out + at) = r;
        }
        for (; i < len; i += AL) { // the tail
            const int64_t m = std::min<int64_t>(AL, len - i);
            avec va = {}, vb = {}, vc = {};
            for (int64_t t = 0; t < m; t++) {
                va[t] = a[i0 + i + t];
                if (b) vb[t] = b[i0 + i + t];
                if (c) vc[t] = c[i0 + i + t];
            }
            const avec r = f(va, vb, vc);
            for (int64_t t = 0; t < m; t++) out[i0 + i + t] = r[t];
        }
    }
}

// tanh GELU x s, s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): f' = s + x s (1 - s) 2 u'
static inline avec gelu_slope(avec x) {
    const avec u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    const avec s = 1.0f / (1.0f + exp_lanes(-2.0f * u));
    return s + x * s * (1.0f - s) * (2.0f * 0.7978845608028654f) * (1.0f + 3.0f * 0.044715f * x * x);
}
static inline avec gelu_value(avec x) {
    const avec u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + exp_lanes(-2.0f * u));
}
static inline avec sigmoid(avec x) { return 1.0f / (1.0f + exp_lanes(-x)); }

void gelu_backward(float* g, const float* pre, size_t n) {
    lanes3(g, g, pre, nullptr, n, [](avec gv, avec x, avec) { return gv * gelu_slope(x); });
}

void gelu_erf_backward(float* g, const float* pre, size_t n) {
    // f' = Phi(x) + x phi(x), Phi = gelu_erf(x) / x as the forward computes it (its erf approximation)
    lanes3(g, g, pre, nullptr, n, [](avec gv, avec x, avec) {
        const avec phi = 0.3989422804014327f * exp_lanes(-0.5f * x * x);
        const avec z = x * 0.7071067811865476f, az = z < 0.0f ? -z : z;
        const avec t = 1.0f / (1.0f + 0.3275911f * az);
        avec q = avec{} + 1.061405429f;
        for (float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f}) q = q * t + c;
        const avec erfc = q * t * exp_lanes(-az * az);
        const avec Phi = 0.5f * (x >= 0.0f ? 2.0f - erfc : erfc);
        return gv * (Phi + x * phi);
    });
}

void silu_backward(float* g, const float* pre, size_t n) {
    lanes3(g, g, pre, nullptr, n, [](avec gv, avec x, avec) {
        const avec s = sigmoid(x);
        return gv * s * (1.0f + x * (1.0f - s));
    });
}

void swiglu_backward(float* g_up, float* g_gate, const float* g, const float* up, const float* gate, size_t n) {
    lanes3(g_gate, g, up, gate, n, [](avec gv, avec u, avec x) {
        const avec s = sigmoid(x);
        return gv * u * s * (1.0f + x * (1.0f - s));
    });
    lanes3(g_up, g, gate, nullptr, n, [](avec gv, avec x, avec) { return gv * x * sigmoid(x); });
}

void geglu_backward(float* g_up, float* g_gate, const float* g, const float* up, const float* gate, size_t n) {
    lanes3(g_gate, g, up, gate, n, [](avec gv, avec u, avec x) { return gv * u * gelu_slope(x); });
    lanes3(g_up, g, gate, nullptr, n, [](avec gv, avec x, avec) { return gv * gelu_value(x); });
}

void softcap_backward(float* g, const float* y, size_t n, float cap) {
    for (size_t i = 0; i < n; i++) {
        const float t = y[i] / cap;
        g[i] *= 1.0f - t * t;
    }
}

// ---------------------------------------------------------------------------------------------
// attention
// ---------------------------------------------------------------------------------------------
// a . b over n floats, a vector of lanes at a time
static float dot(const float* a, const float* b, int n) {
    avec acc = {};
    int i = 0;
    for (; i + AL <= n; i += AL) acc += *(const avec*)(a + i) * *(const avec*)(b + i);
    float s = 0;
    for (int l = 0; l < AL; l++) s += acc[l];
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

void attention_backward_probs(float* gp, const attention_args& a, const float* g_out) {
    const int H = a.n_head, dh = a.d_head, keys = key_count(a), n = a.n_q, group = H / a.n_kv_head;
#pragma omp parallel for schedule(static) if ((int64_t)H * n * keys * dh > parallel_min_work)
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n; i++) {
            float* row = gp + ((size_t)h * n + i) * keys;
            const int pos = a.n_past + i, j0 = first_key(a, pos), j1 = end_key(a, pos);
            const float* go = g_out + (size_t)i * a.out_stride + (size_t)h * dh;
            std::fill(row, row + keys, 0.0f);
            for (int j = j0; j < j1; j++) row[j] = dot(go, a.v + (size_t)j * a.kv_stride + (size_t)(h / group) * dh, dh);
        }
}

// acc [DV vectors] += c * x over one head's dh = DV * AL floats: the accumulator stays in registers across a loop
// of calls (DV 0: any dh, through memory)
template <int DV> struct head_acc {
    avec v[DV];
    void load(const float* p, int) {
        for (int k = 0; k < DV; k++) v[k] = *(const avec*)(p + k * AL);
    }
    void zero(int) {
        for (int k = 0; k < DV; k++) v[k] = avec{};
    }
    void add(float c, const float* x, int) {
        for (int k = 0; k < DV; k++) v[k] += c * *(const avec*)(x + k * AL);
    }
    void store(float* p, int) const {
        for (int k = 0; k < DV; k++) *(avec*)(p + k * AL) = v[k];
    }
};
template <> struct head_acc<0> {
    float v[512];
    void load(const float* p, int dh) { std::copy_n(p, dh, v); }
    void zero(int dh) { std::fill_n(v, dh, 0.0f); }
    void add(float c, const float* x, int dh) {
        for (int e = 0; e < dh; e++) v[e] += c * x[e];
    }
    void store(float* p, int dh) const { std::copy_n(v, dh, p); }
};

// Query head h (of key/value head g): gs [n][keys] the scores' gradients (scaled), then gq's rows (a sum over the
// keys), then gk's and gv's rows (sums over the queries that see the key, added to what the group's earlier
// heads left there). Each sum adds in the order of the plain loop over (h, i, j), so the results do not depend
// on DV.
template <int DV>
static void head_backward(float* gq, int gq_stride, float* gk, float* gv, int gkv_stride, const attention_args& a,
                          const float* gp, const float* g_out, int h, int g, float scale, float* gs) {
    const int dh = a.d_head, keys = key_count(a), n = a.n_q;
    for (int i = 0; i < n; i++) {
        const float* p = a.probs + ((size_t)h * n + i) * keys;
        const float* gpi = gp + ((size_t)h * n + i) * keys;
        const float* qi = a.q + (size_t)i * a.q_stride + (size_t)h * dh;
        float* gsi = gs + (size_t)i * keys;
        const int pos = a.n_past + i, j0 = first_key(a, pos), j1 = end_key(a, pos);
        double s = 0; // the softmax's: gs_j = p_j (gp_j - sum_k p_k gp_k)
        for (int j = j0; j < j1; j++) s += (double)p[j] * gpi[j];
        head_acc<DV> acc;
        acc.zero(dh);
        for (int j = j0; j < j1; j++) {
            const float* kj = a.k + (size_t)j * a.kv_stride + (size_t)g * dh;
            float gsj = (float)(p[j] * (gpi[j] - s));
            if (a.softcap > 0) { // through cap * tanh(r / cap), r = scale q.k as the forward rounds it
                const float t = std::tanh(scale * dot(qi, kj, dh) / a.softcap);
                gsj *= 1.0f - t * t;
            }
            gsj *= scale;
            gsi[j] = gsj;
            acc.add(gsj, kj, dh);
        }
        acc.store(gq + (size_t)i * gq_stride + (size_t)h * dh, dh);
    }
    for (int j = 0; j < keys; j++) {
        float* gkj = gk + (size_t)j * gkv_stride + (size_t)g * dh;
        float* gvj = gv + (size_t)j * gkv_stride + (size_t)g * dh;
        head_acc<DV> ak, av;
        ak.load(gkj, dh), av.load(gvj, dh);
        for (int i = 0; i < n; i++) {
            const int pos = a.n_past + i;
            if (j < first_key(a, pos) || j >= end_key(a, pos)) continue;
            ak.add(gs[(size_t)i * keys + j], a.q + (size_t)i * a.q_stride + (size_t)h * dh, dh);
            av.add(a.probs[((size_t)h * n + i) * keys + j], g_out + (size_t)i * a.out_stride + (size_t)h * dh, dh);
        }
        ak.store(gkj, dh), av.store(gvj, dh);
    }
}

void attention_backward_inputs(float* gq, int gq_stride, float* gk, float* gv, int gkv_stride, const attention_args& a,
                               const float* gp, const float* g_out) {
    const int H = a.n_head, KV = a.n_kv_head, dh = a.d_head, keys = key_count(a), n = a.n_q, group = H / KV;
    const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt((float)dh);
    const int dv = dh % AL == 0 ? dh / AL : 0;
    if (dv == 0 && dh > 512) throw error("internal: attention_backward_inputs takes heads of at most 512");
    // a thread per key/value head: it owns that head's gk and gv and its query heads' gq
#pragma omp parallel if ((int64_t)H * n * keys * dh > parallel_min_work)
    {
        std::vector<float> gs((size_t)n * keys); // [n][keys] one query head's score gradients
#pragma omp for schedule(static)
        for (int g = 0; g < KV; g++) {
            for (int j = 0; j < keys; j++) {
                std::fill_n(gk + (size_t)j * gkv_stride + (size_t)g * dh, dh, 0.0f);
                std::fill_n(gv + (size_t)j * gkv_stride + (size_t)g * dh, dh, 0.0f);
            }
            for (int h = g * group; h < (g + 1) * group; h++) {
                switch (dv) {
                case 1: head_backward<1>(gq, gq_stride, gk, gv, gkv_stride, a, gp, g_out, h, g, scale, gs.data()); break;
                case 2: head_backward<2>(gq, gq_stride, gk, gv, gkv_stride, a, gp, g_out, h, g, scale, gs.data()); break;
                case 4: head_backward<4>(gq, gq_stride, gk, gv, gkv_stride, a, gp, g_out, h, g, scale, gs.data()); break;
                case 8: head_backward<8>(gq, gq_stride, gk, gv, gkv_stride, a, gp, g_out, h, g, scale, gs.data()); break;
                default: head_backward<0>(gq, gq_stride, gk, gv, gkv_stride, a, gp, g_out, h, g, scale, gs.data());
                }
            }
        }
    }
}

} // namespace gb
