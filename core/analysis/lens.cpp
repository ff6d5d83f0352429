// Logit lens over the recorded residual stream.
#include "analysis/lens.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "kernels/softmax.h"
#include "util/error.h"

namespace gb {

lens_result logit_lens(const record& r, const model& m, const ablation& ab, int k, int target,
                       const std::function<bool(float)>& progress) {
    const model_config& c = m.config;
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model, V = r.vocab, P = 2 * L + 1;
    if (L != c.n_layer || d != c.d_model || V != c.vocab_size) throw error("internal: the record is of another model");
    int missing = 0;
    for (int p = 0; p < P; p++) missing += !r.resid(p);
    if (missing)
        throw error("the logit lens needs the residual stream at every point, and this run left out " +
                    std::to_string(missing) + " of " + std::to_string(P) +
                    " (the memory budget: raise the capture budget to keep them)");
    if (target >= V) throw error("target id " + std::to_string(target) + " is outside the vocabulary");
    k = std::max(1, std::min(k, V));
    lens_result out;
    out.n_points = P;
    out.n_tokens = T;
    out.k = k;
    out.points = resid_labels(L, r.n_source > 0);
    out.top_ids.assign((size_t)P * T * k, 0);
    out.top_probs.assign((size_t)P * T * k, 0.0f);
    out.target_prob.assign((size_t)P * T, 0.0f);
    out.log_norm.assign((size_t)P * T, NAN);
    out.target_ids.assign(T, target);
    const bool identity = ab.no_layernorm.covers_all(L);
    const int chunk = std::max(1, std::min(T, (int)((64u << 20) / (sizeof(float) * (size_t)V)))); // rows of logits at once
    std::vector<float> xn((size_t)chunk * d), logits((size_t)chunk * V);
    gemm_scratch gs;
    // the last point first: its top-1 is each position's default target
    for (int step = 0; step < P; step++) {
        const int p = step == 0 ? P - 1 : step - 1;
        for (int t0 = 0; t0 < T; t0 += chunk) {
            const int rows = std::min(chunk, T - t0);
            final_norm_forward(xn.data(), r.resid(p) + (size_t)t0 * d, rows, m, identity, gs);
            lm_head_forward(logits.data(), xn.data(), rows, m, gs);
            if (c.final_softcap > 0) softcap_forward(logits.data(), (size_t)rows * V, c.final_softcap); // as the run
#pragma omp parallel for schedule(dynamic, 4) if (rows > 1 && (int64_t)rows * V >= (1 << 16))
            for (int i = 0; i < rows; i++) {
                const int t = t0 + i;
                const float* lg = &logits[(size_t)i * V];
                const softmax_row sm = softmax_stats(lg, V);
                int* ids = &out.top_ids[((size_t)p * T + t) * k];
                top_k_ids(ids, lg, V, k);
                auto prob = [&](int v) { return softmax_prob(sm, lg, V, v); };
                for (int j = 0; j < k; j++) out.top_probs[((size_t)p * T + t) * k + j] = prob(ids[j]);
                if (p == P - 1 && target < 0) out.target_ids[t] = ids[0];
                if (sm.sum > 0) out.log_norm[(size_t)p * T + t] = (float)(sm.mx + std::log(sm.sum));
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

void lens_retarget(lens_result& l, const record& r, const model& m, const ablation& ab, int target) {
    const model_config& c = m.config;
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model, P = 2 * L + 1;
    if (l.n_points != P || l.n_tokens != T || (int)l.log_norm.size() != P * T)
        throw error("internal: lens_retarget needs the lens of this record");
    if (target >= c.vocab_size) throw error("target id " + std::to_string(target) + " is outside the vocabulary");
    for (int t = 0; t < T; t++) l.target_ids[t] = target >= 0 ? target : l.top_ids[((size_t)(P - 1) * T + t) * l.k];
    const row_table& table = m.weights.unembedding();
    const bool identity = ab.no_layernorm.covers_all(L);
    std::vector<float> xn(d), row, target_rows((size_t)T * d); // [T][d] each token's target row of the unembedding
    for (int t = 0; t < T; t++) table_row(&target_rows[(size_t)t * d], table, l.target_ids[t]);
    gemm_scratch gs;
    if (std::any_of(l.log_norm.begin(), l.log_norm.end(), [](float x) { return std::isnan(x); })) row.resize(c.vocab_size);
    for (int p = 0; p < P; p++)
        for (int t = 0; t < T; t++) {
            const size_t cell = (size_t)p * T + t;
            const int id = l.target_ids[t];
            // a cell among its own top-k already knows the probability
            const size_t o = cell * l.k;
            int j = 0;
            while (j < l.k && l.top_ids[o + j] != id) j++;
            if (j < l.k) {
                l.target_prob[cell] = l.top_probs[o + j];
                continue;
            }
            final_norm_forward(xn.data(), r.resid(p) + (size_t)t * d, 1, m, identity, gs);
            if (std::isnan(l.log_norm[cell])) { // no finite normaliser (a broken model): the whole row, as logit_lens
                lm_head_forward(row.data(), xn.data(), 1, m, gs);
                if (c.final_softcap > 0) softcap_forward(row.data(), row.size(), c.final_softcap);
                l.target_prob[cell] = softmax_prob(softmax_stats(row.data(), c.vocab_size), row.data(), c.vocab_size, id);
                continue;
            }
            double logit = 0;
            const float* e = &target_rows[(size_t)t * d];
            for (int i = 0; i < d; i++) logit += (double)xn[i] * e[i];
            if (!m.weights.lm_head_b.empty()) logit += m.weights.lm_head_b[id];
            if (c.final_softcap > 0) logit = c.final_softcap * std::tanh(logit / c.final_softcap);
            l.target_prob[cell] = (float)std::exp(logit - l.log_norm[cell]);
        }
}

} // namespace gb
