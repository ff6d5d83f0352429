// Logit lens: the model's own final norm and unembedding applied to the residual stream at every point, so
// each layer's partial answer can be read as next-token probabilities.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ablation.h"
#include "model.h"
#include "record.h"

namespace gb {

struct lens_result {
    int n_points = 0;                 // P = 2L+1: 0 embeddings, 2l+1 after attention of l, 2l+2 after the MLP of l
    int n_tokens = 0;                 // T
    int k = 0;                        // K
    std::vector<std::string> points;  // [P] "embed", "L0 attn", ...
    std::vector<int> top_ids;         // [P][T][K] most probable tokens at each point and position, highest first
    std::vector<float> top_probs;     // [P][T][K]
    std::vector<int> target_ids;      // [T] the token target_prob follows: the target, or the last point's top-1
    std::vector<float> target_prob;   // [P][T] its probability at each point
    bool complete = true;             // false when progress asked to stop
};

// r must keep the residual stream (record_request::resid_stream). The final norm is the one the run used: the
// identity when ab's no-layernorm covers every layer. target < 0: each position's final top-1. progress (may
// be empty) gets the fraction done after each point and returns false to stop.
lens_result logit_lens(const record& r, const model& m, const ablation& ab, int k, int target = -1,
                       const std::function<bool(float)>& progress = {});

} // namespace gb
