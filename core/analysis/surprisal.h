// Surprisal: the loss of every token of a prompt given the ones before it, -log p(token t | tokens < t), read from
// a run that kept every position's logits (no extra forward). The quickest way to see what a model finds hard;
// two models on the same tokens give a per-token difference.
#pragma once
#include <vector>

#include "model/model.h"
#include "run/ablation.h"
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

// The same numbers from a run that kept only the last position's logits: the residual stream's last point
// (record::resid(2L)) read through the final norm the run used (the identity when ab's no-layernorm covers every
// layer), the LM head and any final softcap, as the run's own head does (an intervention on the final norm's
// output or the logits is not seen). This is what the app does: asking the live run for every position's logits
// would keep [T][V] floats per record and turn every edit of the tokens into a full run, while this costs T rows
// of the LM head and none of the live reuse. before (may be null): an earlier result of the same model and
// interventions whose tokens [0, same_rows) and their positions' rows are equal to r's; its entries for tokens
// t < same_rows are kept, and only the LM head rows from same_rows - 1 on are computed. Throws gb::error when the
// memory budget left the last point of the stream out, or for a prompt of one token.
surprisal_result surprisal_from_stream(const record& r, const model& m, const ablation& ab,
                                       const surprisal_result* before = nullptr, int same_rows = 0);

} // namespace gb
