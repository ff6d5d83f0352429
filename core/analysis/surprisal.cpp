// Per-token loss from a record's logits.
#include "analysis/surprisal.h"

#include <cmath>
#include <limits>

#include "kernels/softmax.h"
#include "util/error.h"

namespace gb {

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
    double total = 0;
    size_t bytes = 0;
    for (int t = 1; t < T; t++) {
        const float* row = &r.logits[(size_t)(t - 1) * V]; // position t-1 predicts token t
        log_softmax(logp, row, V);
        s.nats[t] = -logp[r.tokens[t]];
        const token_prob top = top_k_probs(row, V, 1)[0];
        s.top_ids[t] = top.id, s.top_probs[t] = top.prob;
        total += s.nats[t];
        bytes += token_bytes(tok, r.tokens[t]).size();
    }
    s.scored = T - 1;
    s.mean_nats = total / s.scored;
    s.bits_per_byte = bytes > 0 ? total / std::log(2.0) / (double)bytes : std::numeric_limits<double>::quiet_NaN();
    return s;
}

} // namespace gb
