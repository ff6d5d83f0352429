// Activation patching: run a corrupted prompt, put back one activation from the clean prompt, and see how much
// of the clean answer returns. Metric: logit(target) - logit(contrast) at the last position.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/softmax.h"
#include "model/model.h"
#include "run/ablation.h"
#include "run/forward.h"

namespace gb {

// A run kept so that patched runs can resume it at any residual point and position (activation patching, causal
// tracing): its record (the residual stream, and what its request asks for) and its keys and values.
struct resumable_run {
    forward_options base;      // the options of the run and of every resumed one (their interventions come first)
    record rec;
    forward_state st;          // the keys and values of every position, kept
    std::vector<float> k0, v0; // the keys and values as the run left them
};
// Runs tokens with x.base into x.rec (keeping what keep asks for and the residual stream) and logits.
void resumable_start(std::vector<float>& logits, resumable_run& x, const model& m, const std::vector<int>& tokens,
                     record_request keep);
// x's run again with iv after x.base's interventions, resumed at residual point p for positions t0.. (iv may change
// nothing before that point or that position): its logits. x's keys and values are put back afterwards.
void resumable_patch(std::vector<float>& logits, resumable_run& x, const model& m, const std::vector<int>& tokens, int p,
                     int t0, const std::vector<intervention>& iv);

struct patch_options {
    bool resid = true;         // the residual stream at every (point, position)
    bool heads = true;         // every head's z at every position
    ablation ab;               // applied to every run (clean, corrupt, patched)
    attention_fn attention;    // empty = CPU
};

struct patch_result {
    int n_layer = 0, n_head = 0, n_tokens = 0;
    int target = 0, contrast = -1;
    double clean = 0, corrupt = 0;  // the metric on each prompt
    std::vector<float> resid;       // [2L+1][T] metric with the stream at (point, position) from the clean run
    std::vector<float> heads;       // [L][H] metric with that head's z at every position from the clean run
    std::vector<float> resid_normalized, heads_normalized; // (patched - corrupt) / (clean - corrupt); NaN if clean == corrupt
    int runs = 0;                   // patched runs computed (the rest were not rerun: the corrupt value where nothing
                                    // differed, the run after the attention for the point after an MLP)
    double ms = 0;
    bool complete = true;           // false when progress asked to stop (the arrays hold what was done, NaN elsewhere)
};

// clean and corrupt must have the same length (else gb::error naming both lengths). The clean run's stream and z
// and the corrupt run's stream and keys/values are kept; a patch at residual point p (layer l) resumes the
// corrupt run there, so layers before l are never recomputed, and positions before the patched one are read
// from the corrupt run's cache (a causal model cannot see the patch there). Positions where the two streams
// agree are not rerun, and the point after layer l's MLP shares the run after its attention (the MLP acts on
// each position alone, so both patches give the same stream). progress (may be empty) gets the fraction done
// and returns false to stop.
// Throws gb::error when the two prompts cannot be patched into each other: empty, longer than the context, or of
// different lengths (naming both).
void check_patch_prompts(const std::vector<int>& clean, const std::vector<int>& corrupt, const model_config& c);

// The contrast when none is chosen, one rule for the app, patch, atp and circuit: the corrupted prompt's top-1 when
// it is not the target, else the clean prompt's best token other than the target. *note says which (may be null).
int default_contrast(const std::vector<token_prob>& clean_top, const std::vector<token_prob>& corrupt_top, int target,
                     std::string* note);
// The target and contrast of a patching run (clean and corrupt checked first): each one given (>= 0) is kept; a
// missing target is the clean prompt's top-1, a missing contrast default_contrast's. Returns the note saying
// what was chosen ("" when both were given).
std::string choose_patch_tokens(int& target, int& contrast, const model& m, const std::vector<int>& clean,
                                const std::vector<int>& corrupt, const ablation& ab);

patch_result activation_patching(const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                                 int target, int contrast, const patch_options& opt,
                                 const std::function<bool(float)>& progress = {});

} // namespace gb
