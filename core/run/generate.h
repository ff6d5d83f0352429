// Sampling the next token and generating a continuation through the KV cache.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/model.h"
#include "run/ablation.h"

namespace gb {

struct sampling {
    float temperature = 0.0f; // 0 = greedy
    int top_k = 0;            // 0 = off
    float top_p = 1.0f;       // 1 = off
    uint64_t seed = 0;
};
int sample_token(const float* logits, int vocab, const sampling& sp, std::mt19937_64& rng);

// The distribution sample_token draws from: the tokens it may pick, most probable first (ties: the lower id), and
// their probabilities softmax(logit / T) over those tokens alone, renormalised to sum to 1. The tokens are the
// top_k most probable (all when top_k is 0), then the fewest of them that hold top_p; greedy (T = 0) is its
// one token with probability 1. NaN logits count as -inf.
struct sampling_dist {
    std::vector<int> ids;      // [n] kept tokens
    std::vector<double> probs; // [n] their probabilities, summing to 1
};
void sampling_distribution(sampling_dist& out, const float* logits, int vocab, const sampling& sp);

// One continuation at one temperature (generate --temperatures, the app's Sampling tab).
struct temperature_run {
    float temperature = 0;
    sampling_dist dist;     // what its first token is drawn from
    std::vector<int> ids;   // the continuation
    std::string text;       // decoded (invalid UTF-8 replaced)
    bool hit_eos = false;
};

struct generation {
    std::vector<int> ids;   // generated ids only
    bool hit_eos = false;
    double ms = 0;
};
// Prompt once through the cache, then one token per step, with ab's interventions (then extra's: steering, whose
// values must outlive the call) at every step. on_token may return false to stop early.
generation generate(const model& m, const std::vector<int>& prompt, int max_new, const sampling& sp,
                    const ablation& ab = {}, const std::function<bool(int)>& on_token = {},
                    const std::vector<intervention>& extra = {});
// The prompt continued at sp with temperature t (generate), with the distribution its first token is drawn from
// (sampling_distribution of last_logits [vocab], the prompt's next-token logits under ab). on_token as generate's;
// when it stops the run, the continuation holds the tokens made so far.
temperature_run run_at_temperature(const model& m, const std::vector<int>& prompt, const float* last_logits, int vocab,
                                   sampling sp, float t, int max_new, const ablation& ab = {},
                                   const std::function<bool(int)>& on_token = {},
                                   const std::vector<intervention>& extra = {});

} // namespace gb
