// Comparing next-token distributions: probabilities, top-k, KL divergence. Shared by the CLI, the app and
// the other analyses.
#pragma once
#include <vector>

namespace gb {

struct token_prob {
    int id;
    float prob;
};
// Logits as the probabilities see them, so a broken model still shows something: NaN counts as -inf; when
// some logit is +inf those share all the mass; when none is finite or +inf (all NaN / -inf) every token is
// equally likely. Writes the cleaned copy to out and returns its maximum, always finite.
float clean_logits(std::vector<float>& out, const float* logits, int vocab);
// One row's softmax as clean_logits sees the row: its largest logit and normaliser sum e^(x - mx) (NaN counting
// as -inf), or, when some logits are +inf, how many (they share the mass; sum is 0, and when none is finite
// either every token is equally likely). Vectorised: the logit lens runs it over (2L+1)·T rows of V.
struct softmax_row {
    float mx = 0;
    double sum = 0;
    int n_inf = 0;
};
softmax_row softmax_stats(const float* logits, int vocab);
// The probability of token v in a row with those stats.
float softmax_prob(const softmax_row& s, const float* logits, int vocab, int v);
// ids [k] of the k most probable tokens, highest first, ties to the lower id, NaN last: one pass, no copy.
void top_k_ids(int* ids, const float* logits, int vocab, int k);

// Full softmax of logits [V] (double accumulation), written to probs [V].
void softmax_probs(std::vector<float>& probs, const float* logits, int vocab);
// Softmax of logits [V] then the k most probable, highest first (ties: lower id first).
std::vector<token_prob> top_k_probs(const float* logits, int vocab, int k);
// log-softmax of logits [V] in double.
void log_softmax(std::vector<double>& out, const float* logits, int vocab);
// KL(p || q) in nats for p = softmax(p_logits), q = softmax(q_logits), from log-probabilities in double so that
// tokens whose probability underflows a float still count (no clamping).
double kl_divergence(const float* p_logits, const float* q_logits, int vocab);

} // namespace gb
