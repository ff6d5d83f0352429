// Steering vectors found and priced: the contrastive vector (mean residual of positive prompts minus negative
// ones), the side-by-side continuations with and without it, and the cost sweep over scale x layer (how far the
// next-token distributions move from the baseline on a reference text, and the steered model's loss there).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "run/generate.h"
#include "run/steer.h"

namespace gb {

// Where a prompt's resid_post is read: its last token, or the mean over its positions.
enum steer_position { STEER_LAST, STEER_MEAN };
steer_position parse_steer_position(const std::string& s); // "last" | "mean"; throws naming the bad value

// For each layer in `layers`: mean over the positive prompts of resid_post at that layer (each prompt: its last
// token's row, or the mean of its rows), minus the same over the negative prompts. Prompts are token ids from
// position 0. Throws gb::error for no prompts on a side, an empty or too long prompt, a layer outside the model.
steer_vector contrastive_vector(const model& m, const std::vector<std::vector<int>>& positive,
                                const std::vector<std::vector<int>>& negative, const std::vector<int>& layers,
                                steer_position where, const std::function<bool()>& cancelled = {});

// One continuation of the prompt under steering at one scale, beside the baseline's.
struct steered_continuation {
    float scale = 0;
    std::vector<int> ids;             // [n] the continuation (without the prompt)
    std::vector<std::string> pieces;  // [n] its tokens' text
    std::string text;                 // decoded (invalid UTF-8 replaced)
    int parts_at = -1;                // first index where it differs from the baseline continuation; -1: nowhere
    std::vector<float> p_steered;     // [n] p(token i | prompt and the tokens before it) under the steering
    std::vector<float> p_base;        // [n] the same prefix through the model without it
};
struct steer_compare {
    steered_continuation baseline;           // scale 0: no steering (its p_steered = p_base)
    std::vector<steered_continuation> runs;  // one per scale, in the order given
};
// Each scale's continuation of prompt (s with its scale replaced) from the same seed, and the baseline's; then one
// forward of prompt + continuation with and without the steering for each token's two probabilities.
void compare_steering(steer_compare& out, const model& m, const std::vector<int>& prompt, const steering& s,
                      const std::vector<float>& scales, int max_new, const sampling& sp,
                      const std::function<bool()>& cancelled = {});

// The cost sweep: for each scale a and layer l, the vector's direction at l (a vector with a single direction:
// that one, moved to each layer) times a added to resid_post of l from position `from` on, on the reference text.
struct steer_sweep_result {
    std::vector<float> scales;   // [S]
    std::vector<int> layers;     // [Ly]
    int from = 0;
    int ref_tokens = 0;          // T: tokens of the reference text
    std::vector<double> kl;      // [S][Ly] mean over the T positions of KL(baseline || steered) of the next-token
                                 // distributions, nats
    std::vector<double> loss;    // [S][Ly] mean -log p(reference token t+1) under the steering, over T-1 positions
    double base_loss = 0;        // the same without steering
    std::vector<std::string> texts; // [S][Ly] greedy continuations of the prompt there (empty: none asked)
    double grid_ms = 0;          // time of the KL and loss grid (one baseline forward, then one forward per cell
                                 // from the cell's layer on)
    double text_ms = 0;          // time of the continuations
    int at(int si, int li) const { return si * (int)layers.size() + li; }
};
// The direction steer_sweep adds at layer l: v's own there, or v's only one. Throws naming the layer otherwise.
const std::vector<float>& sweep_direction(const steer_vector& v, int layer);
// prompt and max_new: a greedy continuation per cell (max_new 0 or an empty prompt: none). Throws gb::error for
// a reference of fewer than 2 tokens, a vector of another width, a layer outside the model or without a direction.
void steer_sweep(steer_sweep_result& out, const model& m, const steer_vector& v, const std::vector<float>& scales,
                 const std::vector<int>& layers, const std::vector<int>& reference, int from,
                 const std::vector<int>& prompt = {}, int max_new = 0, const std::function<bool()>& cancelled = {});

} // namespace gb
