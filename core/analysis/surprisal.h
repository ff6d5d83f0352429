// Surprisal: the loss of every token of a prompt given the ones before it, -log p(token t | tokens < t), read from
// a run that kept every position's logits (no extra forward). The quickest way to see what a model finds hard;
// two models on the same tokens give a per-token difference.
#pragma once
#include <vector>

#include "run/record.h"
#include "tokenizer/tokenizer.h"

namespace gb {

struct surprisal_result {
    int n_tokens = 0;               // T
    std::vector<double> nats;       // [T] -log p of token t from position t-1's logits; NaN at t = 0 (nothing
                                    // before it predicts it)
    std::vector<int> top_ids;       // [T] the model's top guess for position t (at position t-1); -1 at t = 0
    std::vector<float> top_probs;   // [T] its probability
    int scored = 0;                 // tokens scored: T - 1
    double mean_nats = 0;           // per scored token
    double bits_per_byte = 0;       // the scored tokens' total loss in bits over their UTF-8 bytes
};

// r must hold every position's logits (record::all_logits, all of the vocabulary); throws gb::error naming what
// is missing otherwise, or for a prompt of one token (nothing to score).
surprisal_result surprisal(const record& r, const tokenizer& tok);

} // namespace gb
