// Logit lens over the recorded residual stream.
#include "lens.h"

#include <algorithm>
#include <cmath>

#include "error.h"
#include "lanes.h"
#include "ops.h"
#include "simd_math.h"

namespace gb {

// sum over v of e^(lg[v] - mx) (in double, NaN counting as -inf), mx = the largest logit (0 when none is finite):
// one vectorised pass for the maximum and one for the exponentials, which dominate the lens after the LM head.
static double softmax_sum(const float* lg, int V, float& mx) {
    avec mv = avec{} - INFINITY;
    int v = 0;
    for (; v + AL <= V; v += AL) {
        const avec x = *(const avec*)(lg + v);
        mv = x > mv ? x : mv; // NaN compares false: skipped
    }
    mx = -INFINITY;
    for (int l = 0; l < AL; l++) mx = std::max(mx, mv[l]);
    for (; v < V; v++)
        if (lg[v] > mx) mx = lg[v];
    if (!std::isfinite(mx)) { // +inf somewhere (those share the mass), or all NaN / -inf (uniform): the caller's
        mx = mx > 0 ? INFINITY : 0.0f;
        return 0;
    }
    double sum = 0;
    avec acc = {};
    for (v = 0; v + AL <= V; v += AL) {
        const avec x = *(const avec*)(lg + v);
        const avec e = exp_lanes(x - mx);
        acc += x == x ? e : avec{}; // NaN lanes add nothing
    }
    for (int l = 0; l < AL; l++) sum += acc[l];
    for (; v < V; v++)
        if (!std::isnan(lg[v])) sum += std::exp((double)lg[v] - mx);
    return sum;
}

// ids [k] of the k largest logits, largest first, ties to the lower id, NaN last: one pass keeping a sorted list
static void top_k_ids(int* ids, const float* lg, int V, int k) {
    auto before = [&](int a, int b) { // a ranks before b
        const bool na = std::isnan(lg[a]), nb = std::isnan(lg[b]);
        if (na != nb) return nb;
        return lg[a] != lg[b] && !na ? lg[a] > lg[b] : a < b;
    };
    int n = 0;
    for (int v = 0; v < V; v++) {
        if (n == k && !before(v, ids[k - 1])) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && before(v, ids[j - 1])) ids[j] = ids[j - 1], j--;
        ids[j] = v;
    }
}

lens_result logit_lens(const record& r, const model& m, const ablation& ab, int k, int target,
                       const std::function<bool(float)>& progress) {
    const model_config& c = m.config;
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model, V = r.vocab, P = 2 * L + 1;
    if (L != c.n_layer || d != c.d_model || V != c.vocab_size) throw error("internal: the record is of another model");
    for (int p = 0; p < P; p++)
        if (!r.resid(p)) throw error("internal: the logit lens needs the residual stream at every point");
    if (target >= V) throw error("target id " + std::to_string(target) + " is outside the vocabulary");
    k = std::max(1, std::min(k, V));
    lens_result out;
    out.n_points = P;
    out.n_tokens = T;
    out.k = k;
    out.points = resid_labels(L);
    out.top_ids.assign((size_t)P * T * k, 0);
    out.top_probs.assign((size_t)P * T * k, 0.0f);
    out.target_prob.assign((size_t)P * T, 0.0f);
    out.target_ids.assign(T, target);
    const arch_info& arch = arch_table(c.arch);
    const bool identity = ab.no_layernorm.covers_all(L);
    const int chunk = std::max(1, std::min(T, (int)((64u << 20) / (sizeof(float) * (size_t)V)))); // rows of logits at once
    std::vector<float> xn((size_t)chunk * d), logits((size_t)chunk * V);
    gemm_scratch gs;
    // the last point first: its top-1 is each position's default target
    for (int step = 0; step < P; step++) {
        const int p = step == 0 ? P - 1 : step - 1;
        for (int t0 = 0; t0 < T; t0 += chunk) {
            const int rows = std::min(chunk, T - t0);
            norm_forward(xn.data(), r.resid(p) + (size_t)t0 * d, identity ? nullptr : &m.weights.normf_g,
                         &m.weights.normf_b, arch.norm, c.norm_eps, rows, d);
            lm_head_forward(logits.data(), xn.data(), rows, m, gs);
#pragma omp parallel for schedule(dynamic, 4) if (rows > 1 && (int64_t)rows * V >= (1 << 16))
            for (int i = 0; i < rows; i++) {
                const int t = t0 + i;
                const float* lg = &logits[(size_t)i * V];
                float mx;
                const double sum = softmax_sum(lg, V, mx);
                // the k largest logits are the k most probable tokens (ties: the lower id)
                int* ids = &out.top_ids[((size_t)p * T + t) * k];
                top_k_ids(ids, lg, V, k);
                // as compare.h's clean_logits: NaN counts as -inf; +inf logits share all the mass; none finite: uniform
                int n_inf = 0;
                if (mx == INFINITY)
                    for (int v = 0; v < V; v++) n_inf += lg[v] == INFINITY;
                auto prob = [&](int v) -> float {
                    if (n_inf) return lg[v] == INFINITY ? 1.0f / n_inf : 0.0f;
                    if (sum > 0) return std::isnan(lg[v]) ? 0.0f : (float)(std::exp((double)lg[v] - mx) / sum);
                    return 1.0f / V;
                };
                for (int j = 0; j < k; j++) out.top_probs[((size_t)p * T + t) * k + j] = prob(ids[j]);
                if (p == P - 1 && target < 0) out.target_ids[t] = ids[0];
                out.target_prob[(size_t)p * T + t] = prob(out.target_ids[t]);
            }
        }
        if (progress && !progress((float)(step + 1) / P)) {
            out.complete = false;
            return out;
        }
    }
    return out;
}

} // namespace gb
