// Logit lens over the recorded residual stream.
#include "lens.h"

#include <algorithm>
#include <cmath>

#include "error.h"
#include "ops.h"

namespace gb {

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
    std::vector<double> prob(V);
    std::vector<int> idx(V);
    gemm_scratch gs;
    // the last point first: its top-1 is each position's default target
    for (int step = 0; step < P; step++) {
        const int p = step == 0 ? P - 1 : step - 1;
        for (int t0 = 0; t0 < T; t0 += chunk) {
            const int rows = std::min(chunk, T - t0);
            norm_forward(xn.data(), r.resid(p) + (size_t)t0 * d, identity ? nullptr : &m.weights.normf_g,
                         &m.weights.normf_b, arch.norm, c.norm_eps, rows, d);
            lm_head_forward(logits.data(), xn.data(), rows, m, gs);
            for (int i = 0; i < rows; i++) {
                const int t = t0 + i;
                const float* lg = &logits[(size_t)i * V];
                // softmax in double; NaN counts as -inf so that a broken model still ranks something
                double mx = -INFINITY;
                for (int v = 0; v < V; v++)
                    if (!std::isnan(lg[v])) mx = std::max(mx, (double)lg[v]);
                double sum = 0;
                for (int v = 0; v < V; v++) sum += prob[v] = std::isnan(lg[v]) || !std::isfinite(mx) ? 0.0 : std::exp(lg[v] - mx);
                for (int v = 0; v < V; v++) prob[v] = sum > 0 ? prob[v] / sum : 1.0 / V;
                for (int v = 0; v < V; v++) idx[v] = v;
                std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                                  [&](int a, int b) { return prob[a] != prob[b] ? prob[a] > prob[b] : a < b; });
                const size_t o = ((size_t)p * T + t) * k;
                for (int j = 0; j < k; j++) out.top_ids[o + j] = idx[j], out.top_probs[o + j] = (float)prob[idx[j]];
                if (p == P - 1 && target < 0) out.target_ids[t] = idx[0];
                out.target_prob[(size_t)p * T + t] = (float)prob[out.target_ids[t]];
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
