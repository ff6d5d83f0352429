// Sampling the next token and generating a continuation through the KV cache.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "ablation.h"
#include "model.h"

namespace gb {

struct sampling {
    float temperature = 0.0f; // 0 = greedy
    int top_k = 0;            // 0 = off
    float top_p = 1.0f;       // 1 = off
    uint64_t seed = 0;
};
int sample_token(const float* logits, int vocab, const sampling& sp, std::mt19937_64& rng);

struct generation {
    std::vector<int> ids;   // generated ids only
    bool hit_eos = false;
    double ms = 0;
};
// Prompt once through the cache, then one token per step, with ab's interventions at every step. on_token may
// return false to stop early.
generation generate(const model& m, const std::vector<int>& prompt, int max_new, const sampling& sp,
                    const ablation& ab = {}, const std::function<bool(int)>& on_token = {});

} // namespace gb
