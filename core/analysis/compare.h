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
