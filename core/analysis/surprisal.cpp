// Per-token loss from a record's logits.
#include "analysis/surprisal.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ops.h"
#include "kernels/softmax.h"
#include "util/error.h"

namespace gb {

// The means over tokens 1..T-1 of a result whose per-token entries are filled.
static void finish_means(surprisal_result& s, const record& r, const tokenizer& tok) {
    double total = 0;
    size_t bytes = 0;
    for (int t = 1; t < s.n_tokens; t++) total += s.nats[t], bytes += token_bytes(tok, r.tokens[t]).size();
    s.scored = s.n_tokens - 1;
    s.mean_nats = total / s.scored;
    s.bits_per_byte = bytes > 0 ? total / std::log(2.0) / (double)bytes : std::numeric_limits<double>::quiet_NaN();
}

surprisal_result surprisal(const record& r, const tokenizer& tok) {
    const int T = r.n_tokens, V = r.vocab;
    if (!r.all_logits || !r.logit_ids.empty() || r.logits.size() != (size_t)T * V)
        throw error("surprisal needs every position's logits, and this run kept only the last position's (run it "
                    "with all logits: glassbox-cli run --loss)");
    if (T < 2) throw error("surprisal: a prompt of one token has no token that another predicts");
    surprisal_result s;
    s.n_tokens = T;
    s.nats.assign(T, std::numeric_limits<double>::quiet_NaN());
    s.top_ids.assign(T, -1);
    s.top_probs.assign(T, 0.0f);
    std::vector<double> logp;
    for (int t = 1; t < T; t++) {
        const float* row = &r.logits[(size_t)(t - 1) * V]; // position t-1 predicts token t
        log_softmax(logp, row, V);
        s.nats[t] = -logp[r.tokens[t]];
        const token_prob top = top_k_probs(row, V, 1)[0];
        s.top_ids[t] = top.id, s.top_probs[t] = top.prob;
    }
    finish_means(s, r, tok);
    return s;
}

surprisal_result surprisal_from_stream(const record& r, const model& m, const ablation& ab,
                                       const surprisal_result* before, int same_rows) {
    const model_config& c = m.config;
    const int T = r.n_tokens, L = r.n_layer, d = r.d_model, V = c.vocab_size;
    if (L != c.n_layer || d != c.d_model) throw error("internal: the record is of another model");
    if (T < 2) throw error("surprisal: a prompt of one token has no token that another predicts");
    const float* last = r.resid(2 * L);
    if (!last)
        throw error("surprisal needs the residual stream after the last layer, and the memory budget left it out "
                    "(raise the capture budget)");
    surprisal_result s;
    s.n_tokens = T;
    s.nats.assign(T, std::numeric_limits<double>::quiet_NaN());
    s.top_ids.assign(T, -1);
    s.top_probs.assign(T, 0.0f);
    int t_from = 1; // the first token whose entry is computed here
    if (before && before->n_tokens >= 2) {
        t_from = std::max(1, std::min({same_rows, before->n_tokens, T}));
        for (int t = 1; t < t_from; t++)
            s.nats[t] = before->nats[t], s.top_ids[t] = before->top_ids[t], s.top_probs[t] = before->top_probs[t];
    }
    const bool identity = ab.no_layernorm.covers_all(L);
    const int rows_all = T - t_from; // positions t_from-1 .. T-2 predict tokens t_from .. T-1
    const int chunk = std::max(1, std::min(rows_all, (int)((64u << 20) / (sizeof(float) * (size_t)V))));
    std::vector<float> xn((size_t)chunk * d), logits((size_t)chunk * V);
    gemm_scratch gs;
    for (int p0 = t_from - 1; p0 < T - 1; p0 += chunk) {
        const int rows = std::min(chunk, T - 1 - p0);
        final_norm_forward(xn.data(), last + (size_t)p0 * d, rows, m, identity, gs);
        lm_head_forward(logits.data(), xn.data(), rows, m, gs);
        if (c.final_softcap > 0) softcap_forward(logits.data(), (size_t)rows * V, c.final_softcap); // as the run
#pragma omp parallel for schedule(dynamic, 4) if (rows > 1)
        for (int i = 0; i < rows; i++) {
            const int t = p0 + i + 1; // the token position p0 + i predicts
            const float* row = &logits[(size_t)i * V];
            std::vector<double> logp;
            log_softmax(logp, row, V);
            s.nats[t] = -logp[r.tokens[t]];
            const token_prob top = top_k_probs(row, V, 1)[0];
            s.top_ids[t] = top.id, s.top_probs[t] = top.prob;
        }
    }
    finish_means(s, r, m.tok);
    return s;
}

} // namespace gb
