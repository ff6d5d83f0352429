// What the worker derives from each published result (head scores, the heatmaps' pixels) and how much of the
// previous result's it can reuse. A live run (core/run/live.h) shares the pattern tensors of the layers it did not
// recompute, and in a causal model the query rows of an equal token prefix are equal under equal interventions:
// typing a token at the end scores and colours one row per head instead of T (at T = 256 on GPT-2 small the
// scores took 26-36 ms and the pixels 48 ms, more than the one-token run itself).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app_state.h"
#include "heat_pixels.h"

namespace gbui {

// What a record shares with the one earlier scores and pixels were derived from.
struct reuse_plan {
    std::vector<uint8_t> same_layer; // [L] 1: that layer's pattern is the very same tensor
    int same_rows = 0;               // query rows [0, same_rows) are equal at every layer
};
// same_inputs: `before` was run on the same model with the same interventions and attention backend (then
// rows before the first differing token are equal). before may be null (nothing to reuse).
reuse_plan plan_reuse(const gb::record& now, const gb::record* before, bool same_inputs);

// The last published result's derived data, kept by the worker for the next result.
struct derived_cache {
    std::shared_ptr<const gb::record> rec;     // the record they were derived from (null: none yet)
    std::string inputs;                        // model, interventions and attention backend rec was run with
    std::shared_ptr<const heat_pixels> pixels; // rec's pixels (null when they are of another scale)
    gb::score_sums sums;                       // rec's head-score sums (gb::score_heads_resume)
    std::shared_ptr<const gb::record> scored;  // the record the last surprisal was computed from (null: none)
    std::shared_ptr<const gb::surprisal_result> surprisal; // its surprisal (rows an edit did not reach are reused)
};

} // namespace gbui
