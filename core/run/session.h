// One entry point for every kind of model: a request (its input as the kind reads it, the ablation and any
// other interventions) comes back as the records of the run and of its baseline and the kind's prediction,
// computed live where the kind allows (an edit or an intervention recomputes only what it reaches, core/run/live.h).
// The CLI's run and the app's worker both call session_run; neither works out what a kind predicts itself.
//
// An encoder–decoder runs as two live stacks: the encoder on the source, then the decoder on the target (given,
// or the model's own translation of the source under the ablation), whose cross-attention reads the encoder's
// output; typing in the target recomputes only the new target rows, an ablation only the layers it reaches.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "run/generate.h"
#include "run/live.h"
#include "run/predict.h"
#include "run/steer.h"

namespace gb {

struct session_request {
    // the input, by the kind's input (kind_info::input)
    std::vector<int> tokens;      // INPUT_TEXT: the prompt's ids from position 0; INPUT_SOURCE_TARGET: the source's
                                  // ids (source_ids); INPUT_IMAGE: unused (the positions are the image's)
    std::vector<float> pixels;    // INPUT_IMAGE: [C][S][S] the preprocessed image (vision_pixels)
    std::vector<int> target;      // INPUT_SOURCE_TARGET: the decoder's input, decoder start first (target_ids);
                                  // empty: the model's own translation of the source, made under the ablation
    sampling target_sampling;     // how that translation is made (greedy by default)
    int max_target = 0;           // its most new tokens (0: 40, or fewer when the context is shorter)
    ablation ab;                  // the user's ablation; an encoder–decoder's names layers both stacks share
    std::vector<intervention> interventions; // on the model (an encoder–decoder: its decoder), after the
                                             // ablation's; values are copied
    steering steer;               // a steering vector added after the interventions (decoder kinds only,
                                  // FEATURE_STEERING); the run without it is the baseline
    record_request keep;          // what each record keeps; keep.budget_bytes bounds the whole live state
    int top_k = 10;               // tokens in the prediction's lists
    bool all_logits = false;      // every position's logits in the records (a decoder keeps the last one's)
    bool baseline = true;         // also run without the interventions (false: base is the run itself)
    attention_fn attention;       // empty = attention_cpu
    std::function<bool()> cancelled; // asked between layers: true stops the run (gb::cancelled)
};

struct session_result {
    std::shared_ptr<const record> run, base;        // the model's (an encoder–decoder: its decoder's) records with
                                                    // and without the interventions (the same when there are none)
    std::shared_ptr<const record> encoder, encoder_base; // an encoder–decoder's encoder stack, the same two ways
    std::vector<int> target;                        // an encoder–decoder: the decoder's input that ran
    std::string translation;                        // an encoder–decoder: the target's text after the decoder start
    prediction pred;                                // what the kind predicts (core/run/predict.h)
    live_report report;                             // what was recomputed, what the memory budget left out
};

// What a session keeps between requests: the live runs, and an encoder–decoder's last translation.
struct session {
    const model* m = nullptr;          // the model the kept runs are of (another one starts afresh)
    live_state main;                   // the model's kept runs (an encoder–decoder: its decoder's)
    live_state encoder;                // an encoder–decoder's encoder stack
    std::vector<float> source, base_source; // [S][d] the encoder's outputs the decoder's runs read
    std::string made_key;              // what the last made translation was made from
    std::vector<int> made_target;      // and the decoder's input it gave
};

// Brings s up to date with rq for model m and fills out. Throws gb::error for bad input (an empty or too long
// prompt, source or target, pixels for a text model, ...) and gb::cancelled when rq.cancelled stopped it; s keeps
// its previous runs either way.
void session_run(session_result& out, session& s, const model& m, const session_request& rq);

} // namespace gb
