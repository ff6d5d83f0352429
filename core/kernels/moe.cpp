// Mixture-of-experts MLP: routing (softmax, top-k, renormalisation) and the experts run on their rows only.
#include "kernels/moe.h"

#include <algorithm>
#include <cmath>

#include "kernels/grad.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace gb {

template <class T> static void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

void moe_route(float* weights, const float* logits, int n, int E, int k, bool norm_topk, std::vector<int>& chosen) {
    grow(chosen, (size_t)k);
    for (int r = 0; r < n; r++) {
        const float* lg = logits + (size_t)r * E;
        float* w = weights + (size_t)r * E;
        // the top k by logit (the softmax is monotone): strictly greater replaces, so at equal logits the lower
        // index is taken first
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                if (std::find(chosen.begin(), chosen.begin() + j, e) != chosen.begin() + j) continue;
                if (best < 0 || lg[e] > lg[best] || (std::isnan(lg[best]) && !std::isnan(lg[e]))) best = e;
            }
            chosen[j] = best;
        }
        // softmax over all E (subtracting the max only for numerical stability), in double
        float mx = lg[0];
        for (int e = 1; e < E; e++) mx = std::max(mx, lg[e]);
        double sum = 0;
        for (int e = 0; e < E; e++) sum += std::exp((double)lg[e] - mx);
        double kept = 0;
        for (int j = 0; j < k; j++) kept += std::exp((double)lg[chosen[j]] - mx) / sum;
        std::fill_n(w, E, 0.0f);
        const double scale = norm_topk ? 1.0 / kept : 1.0;
        for (int j = 0; j < k; j++) w[chosen[j]] = (float)(std::exp((double)lg[chosen[j]] - mx) / sum * scale);
    }
}

int moe_top(const float* weights, int E, int k, int* ids, float* vals) {
    int m = 0;
    for (int e = 0; e < E; e++) {
        const float v = weights[e];
        if (v == 0) continue;
        // insertion into the sorted list: after every weight >= v, so equal weights keep index order
        int at = m;
        while (at > 0 && (vals[at - 1] < v || std::isnan(vals[at - 1]))) at--;
        if (at >= k) continue;
        for (int j = std::min(m, k - 1); j > at; j--) ids[j] = ids[j - 1], vals[j] = vals[j - 1];
        ids[at] = e, vals[at] = v;
        m = std::min(m + 1, k);
    }
    return m;
}

// out [n][d] += scale(r) * down(silu(x gate) * (x up)) for the m rows x [m][d]; row i of x is row rows[i] of out
// (rows null: row i). scale(r) is weights[rows[i] * stride] when weights is given, else gates[i].
static void swiglu_expert(float* out, const float* x, int m, const weight_matrix& w_gate, const weight_matrix& w_up,
                          const weight_matrix& w_down, const int* rows, const float* weights, int stride,
                          const float* gates, int d, moe_scratch& s, gemm_scratch& g) {
    static const std::vector<float> no_bias;
    const int ff = w_up.out;
    grow(s.gate, (size_t)m * ff);
    grow(s.up, (size_t)m * ff);
    grow(s.y, (size_t)m * d);
    gemm(s.gate.data(), x, w_gate, no_bias, m, g);
    gemm(s.up.data(), x, w_up, no_bias, m, g);
    swiglu_forward(s.up.data(), s.gate.data(), (size_t)m * ff);
    gemm(s.y.data(), s.up.data(), w_down, no_bias, m, g);
    for (int i = 0; i < m; i++) {
        const int r = rows ? rows[i] : i;
        const float a = weights ? weights[(size_t)r * stride] : gates[i];
        const float* yi = s.y.data() + (size_t)i * d;
        float* o = out + (size_t)r * d;
        for (int j = 0; j < d; j++) o[j] += a * yi[j];
    }
}

void moe_forward(float* out, const float* xn, int n, const layer_weights& lw, const model_config& c, moe_scratch& s,
                 gemm_scratch& g, const std::function<void(float* weights)>& at_router) {
    static const std::vector<float> no_bias;
    const int d = c.d_model, E = c.n_expert, k = c.n_expert_used;
    if (E <= 0 || k < 1 || k > E)
        throw error("MoE layer: " + std::to_string(k) + " experts per token of " + std::to_string(E) +
                    " (expected 1.." + std::to_string(E) + ")");
    if ((int)lw.exp_gate.size() != E || (int)lw.exp_up.size() != E || (int)lw.exp_down.size() != E ||
        lw.router.in != d || lw.router.out != E)
        throw error("MoE layer: the weights hold " + std::to_string(lw.exp_up.size()) + " experts and a router of " +
                    std::to_string(lw.router.out) + " outputs, the config says " + std::to_string(E));
    grow(s.logits, (size_t)n * E);
    grow(s.weights, (size_t)n * E);
    grow(s.rows, (size_t)n);
    grow(s.xg, (size_t)n * d);
    float* w = s.weights.data();

    gemm(s.logits.data(), xn, lw.router, no_bias, n, g);
    moe_route(w, s.logits.data(), n, E, k, c.norm_topk, s.chosen);
    if (at_router) at_router(w);

    std::fill_n(out, (size_t)n * d, 0.0f);
    for (int e = 0; e < E; e++) {
        // the rows routed to e (a weight a hook set to non-zero counts too), gathered into one block
        int m = 0;
        for (int r = 0; r < n; r++)
            if (w[(size_t)r * E + e] != 0) s.rows[m++] = r;
        if (m == 0) continue;
        for (int i = 0; i < m; i++) std::copy_n(xn + (size_t)s.rows[i] * d, d, s.xg.data() + (size_t)i * d);
        swiglu_expert(out, s.xg.data(), m, lw.exp_gate[e], lw.exp_up[e], lw.exp_down[e], s.rows.data(), w + e, E,
                      nullptr, d, s, g);
    }
    if (!lw.w_up.empty()) { // Qwen2-MoE's shared expert, on every row
        // its gate per row: sigmoid(x . shared_gate), in double; kept in logits (free once routing is done)
        float* gates = s.logits.data();
        for (int r = 0; r < n; r++) {
            double dot = 0;
            if (!lw.shared_gate.empty())
                for (int j = 0; j < d; j++) dot += (double)xn[(size_t)r * d + j] * lw.shared_gate[j];
            gates[r] = lw.shared_gate.empty() ? 1.0f : (float)(1.0 / (1.0 + std::exp(-dot)));
        }
        swiglu_expert(out, xn, n, lw.w_gate, lw.w_up, lw.w_down, nullptr, nullptr, 0, gates, d, s, g);
    }
}

// ---------------------------------------------------------------------------------------------
// The backward
// ---------------------------------------------------------------------------------------------
// One SwiGLU expert on m rows x [m][d] scaled per row by scale[i]: gx rows (scattered by rows, or in order)
// += its gradient from g's rows; dscale [m] = g . the expert's output (before the scale).
static void swiglu_expert_backward(float* gx, float* dscale, const float* g, const float* x, int m, const float* scale,
                                   const int* rows, const weight_matrix& w_gate, const weight_matrix& w_up,
                                   const weight_matrix& w_down, int d, moe_scratch& s, gemm_scratch& gs) {
    static const std::vector<float> no_bias;
    const int ff = w_up.out;
    const size_t mf = (size_t)m * ff;
    std::vector<float> h(mf), gy((size_t)m * d), gh(mf), gg(mf), gxm((size_t)m * d);
    grow(s.gate, mf);
    grow(s.up, mf);
    grow(s.y, (size_t)m * d);
    gemm(s.gate.data(), x, w_gate, no_bias, m, gs);
    gemm(s.up.data(), x, w_up, no_bias, m, gs);
    std::copy_n(s.up.data(), mf, h.data());
    swiglu_forward(h.data(), s.gate.data(), mf);
    gemm(s.y.data(), h.data(), w_down, no_bias, m, gs);
    for (int i = 0; i < m; i++) {
        const float* gr = g + (size_t)(rows ? rows[i] : i) * d;
        double dot = 0;
        for (int j = 0; j < d; j++) {
            dot += (double)gr[j] * s.y[(size_t)i * d + j];
            gy[(size_t)i * d + j] = scale[i] * gr[j];
        }
        dscale[i] = (float)dot;
    }
    gemm_backward(gh.data(), gy.data(), w_down, m, gs);
    swiglu_backward(gh.data(), gg.data(), gh.data(), s.up.data(), s.gate.data(), mf);
    gemm_backward(gxm.data(), gh.data(), w_up, m, gs);
    gemm_backward(gxm.data(), gg.data(), w_gate, m, gs, true);
    for (int i = 0; i < m; i++) {
        float* o = gx + (size_t)(rows ? rows[i] : i) * d;
        for (int j = 0; j < d; j++) o[j] += gxm[(size_t)i * d + j];
    }
}

void moe_experts_backward(float* gx, float* dw, const float* g, const float* xn, const float* weights, int n,
                          const layer_weights& lw, const model_config& c, moe_scratch& s, gemm_scratch& gs) {
    const int d = c.d_model, E = c.n_expert;
    grow(s.rows, (size_t)n);
    grow(s.xg, (size_t)n * d);
    std::fill_n(dw, (size_t)n * E, 0.0f);
    std::vector<float> scale(n), dscale(n);
    for (int e = 0; e < E; e++) {
        int m = 0;
        for (int r = 0; r < n; r++)
            if (weights[(size_t)r * E + e] != 0) s.rows[m++] = r;
        if (m == 0) continue;
        for (int i = 0; i < m; i++) {
            std::copy_n(xn + (size_t)s.rows[i] * d, d, s.xg.data() + (size_t)i * d);
            scale[i] = weights[(size_t)s.rows[i] * E + e];
        }
        swiglu_expert_backward(gx, dscale.data(), g, s.xg.data(), m, scale.data(), s.rows.data(), lw.exp_gate[e],
                               lw.exp_up[e], lw.exp_down[e], d, s, gs);
        for (int i = 0; i < m; i++) dw[(size_t)s.rows[i] * E + e] = dscale[i];
    }
    if (lw.w_up.empty()) return;
    // the shared expert, scaled by sigmoid(x . shared_gate) (1 without), and that gate's own gradient
    for (int r = 0; r < n; r++) {
        double dot = 0;
        if (!lw.shared_gate.empty())
            for (int j = 0; j < d; j++) dot += (double)xn[(size_t)r * d + j] * lw.shared_gate[j];
        scale[r] = lw.shared_gate.empty() ? 1.0f : (float)(1.0 / (1.0 + std::exp(-dot)));
    }
    swiglu_expert_backward(gx, dscale.data(), g, xn, n, scale.data(), nullptr, lw.w_gate, lw.w_up, lw.w_down, d, s, gs);
    if (lw.shared_gate.empty()) return;
    for (int r = 0; r < n; r++) {
        const float a = dscale[r] * scale[r] * (1.0f - scale[r]);
        for (int j = 0; j < d; j++) gx[(size_t)r * d + j] += a * lw.shared_gate[j];
    }
}

void moe_route_backward(float* dlogits, const float* dw, const float* logits, int n, int E, int k, bool norm_topk,
                        std::vector<int>& chosen) {
    std::vector<float> w(E);
    for (int r = 0; r < n; r++) {
        const float* lg = logits + (size_t)r * E;
        const float* gw = dw + (size_t)r * E;
        float* out = dlogits + (size_t)r * E;
        moe_route(w.data(), lg, 1, E, k, norm_topk, chosen); // the chosen experts and their weights
        // the softmax over all E (weights of the unchosen computed here, not kept by moe_route)
        float mx = lg[0];
        for (int e = 1; e < E; e++) mx = std::max(mx, lg[e]);
        double sum = 0;
        for (int e = 0; e < E; e++) sum += std::exp((double)lg[e] - mx);
        double dot = 0; // sum over the chosen of dw_e w_e
        for (int e = 0; e < E; e++)
            if (w[e] != 0) dot += (double)gw[e] * w[e];
        for (int j = 0; j < E; j++) {
            const bool in = w[j] != 0;
            if (norm_topk) { // a softmax over the chosen alone
                out[j] = in ? (float)(w[j] * (gw[j] - dot)) : 0.0f;
            } else { // the chosen entries of the softmax over all E
                const double p = std::exp((double)lg[j] - mx) / sum;
                out[j] = (float)((in ? (double)gw[j] * w[j] : 0.0) - p * dot);
            }
        }
    }
}

} // namespace gb
