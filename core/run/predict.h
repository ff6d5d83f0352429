// What each kind of model predicts, read from its run's record (no extra forward): the next-token (or next
// target token) distribution at the last position, an encoder's fillers at each mask, an image classifier's
// classes at [CLS] with its attention rollout, an encoder–decoder's alignment, an MoE model's routing. The session
// (core/run/session.h) hands every front end one prediction; nothing outside core/run works it out again.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/softmax.h"
#include "model/model.h"
#include "run/record.h"
#include "tokenizer/tokenizer.h"

namespace gb {

// ---- fill mask: an encoder's masked-LM head at each mask (its run keeps every position's logits) ----
struct fill_slot {
    int position = 0;             // in the prompt (the [CLS] at 0 counts)
    std::vector<token_prob> top;  // [k] the most probable fillers, best first (softmax over the whole vocabulary)
};
// Positions of the prompt holding the tokenizer's mask token (none when it has none).
std::vector<int> mask_positions(const record& r, const tokenizer& tok);
// The top-k fillers at each of the positions (usually mask_positions; any position shows what the head puts
// there); throws gb::error naming what is missing when the record has no logits for a position (a decoder's run
// keeps only the last position's) or a position is outside the prompt.
std::vector<fill_slot> fill_mask(const record& r, const std::vector<int>& positions, int k);

// ---- attention rollout (Abnar & Zuidema, 2020): how much each position's final representation draws on each
// input position, following attention through every layer. Each layer's head-averaged pattern gets the
// residual's share, A' = (A + I) / 2, and the layers multiply: R = A'_{L-1} ... A'_0. A Vision Transformer's row 0
// ([CLS]) is the classic "where the model looked" map. ----
// [T][T] the rollout through layers 0 .. up_to (inclusive; -1 = all); rows sum to 1. Throws gb::error naming the
// layer when the record did not keep its pattern.
std::vector<float> attention_rollout(const record& r, int up_to = -1);

// ---- routing: the experts that ran for every kept layer and token of an MoE record (non-zero mixing weight),
// largest weight first ----
struct routing_table {
    int n_layer = 0, n_tokens = 0, n_expert = 0;
    int k = 0;                  // slots per cell
    std::vector<int> ids;       // [L][T][k] expert ids, -1 in a slot left empty (fewer experts ran)
    std::vector<float> weights; // [L][T][k] their mixing weights (0 in an empty slot)
    std::vector<uint8_t> kept;  // [L] 1 when the record kept that layer's router (else its cells are empty)
    bool empty() const { return n_expert == 0; }
    const int* cell_ids(int l, int t) const { return &ids[((size_t)l * n_tokens + t) * k]; }
    const float* cell_weights(int l, int t) const { return &weights[((size_t)l * n_tokens + t) * k]; }
};
// At most k experts per cell (the model's n_expert_used, or rec.n_expert for all that ran). Empty for a dense
// model's record.
routing_table routing_of(const record& rec, int k);

// ---- the prediction of a run and its baseline, by the model's kind (kind_info::output) ----
struct prediction {
    kind_output output = OUTPUT_NEXT_TOKEN;
    int position = -1;                    // the row of logits read: the last position, an encoder's first mask
                                          // (without one: the last position its template does not fix), [CLS] (0)
    std::vector<float> probs, base_probs; // [V] softmax at that row, with and without the interventions
    std::vector<token_prob> top, base_top; // [k] their most probable tokens (classes), best first
    double kl = 0;                        // KL(base || run) in nats at that row
    std::vector<int> masks;               // OUTPUT_FILL_MASK: the mask positions
    std::vector<fill_slot> fills, base_fills; // OUTPUT_FILL_MASK: each mask's fillers
    std::vector<float> rollout;           // OUTPUT_CLASSES: [T][T] attention rollout through every layer
    std::vector<int> alignment;           // OUTPUT_NEXT_TARGET: per target row, the source position it reads most
    routing_table routing, base_routing;  // KIND_MOE: the experts each token went to
};
// The position whose logits are the prediction: the last (a decoder's, an encoder–decoder's last target token),
// [CLS] (0) for a classifier, an encoder's first mask (without one: the last position its template does not fix).
int prediction_position(const model& m, const record& r);
// run and base are m's (an encoder–decoder: its decoder's) records with and without the interventions (the same
// record when there are none); top_k tokens in the lists.
void predict(prediction& out, const model& m, const record& run, const record& base, int top_k);

} // namespace gb
