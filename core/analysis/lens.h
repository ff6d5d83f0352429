// Logit lens: the model's own final norm and unembedding applied to the residual stream at every point, so
// each layer's partial answer can be read as next-token probabilities.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "run/ablation.h"
#include "run/record.h"

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
    std::vector<float> log_norm;      // [P][T] log of each cell's softmax normaliser (max + log sum e^(x - max));
                                      // NaN where no logit is finite or one is +inf
    bool complete = true;             // false when progress asked to stop
};

// r must keep the residual stream (record_request::resid_stream; else a gb::error says the memory budget left
// it out). The final norm is the one the run used: the
// identity when ab's no-layernorm covers every layer. target < 0: each position's final top-1. progress (may
// be empty) gets the fraction done after each point and returns false to stop.
lens_result logit_lens(const record& r, const model& m, const ablation& ab, int k, int target = -1,
                       const std::function<bool(float)>& progress = {});

// The same lens following another target (target < 0: each position's final top-1), from l's normalisers: one
// row of the unembedding per cell instead of the whole LM head, so choosing a target is instant. l must be
// logit_lens's result for this r, m and ab. Cells whose normaliser is NaN get what logit_lens gives them.
void lens_retarget(lens_result& l, const record& r, const model& m, const ablation& ab, int target);

} // namespace gb
