// Causal tracing (Meng et al.'s ROME method): corrupt the subject's token embeddings with Gaussian noise, then
// put back one activation at a time from the clean run and see how much of the clean answer's probability returns.
// Where restoring brings it back is where the model carries the fact about the subject. Decoder kinds only
// (FEATURE_TRACE in the kind table).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "model/model.h"
#include "run/ablation.h"

namespace gb {

struct trace_options {
    double noise = 3.0;     // sigma = noise x the standard deviation of the token embeddings' entries
    int samples = 10;       // noise draws; every cell is averaged over them
    uint64_t seed = 0;      // the draws' seed: the same seed, the same numbers
    bool sublayers = true;  // also restore each sublayer's output (attn, mlp)
    ablation ab;            // applied to every run (clean, corrupted, restored)
    attention_fn attention; // empty = CPU
};

struct trace_result {
    int n_layer = 0, n_tokens = 0;  // L, T
    int subject_first = 0, subject_end = 0; // the subject's tokens: positions [first, end)
    int target = 0;                 // the clean run's top-1 at the last position, whose probability every cell is
    double embed_std = 0, sigma = 0; // the token embeddings' standard deviation, and the noise's (noise x it)
    int samples = 0;
    uint64_t seed = 0;
    double clean_prob = 0;          // p(target) of the clean run
    double corrupt_prob = 0;        // with the subject noised (the mean over samples)
    std::vector<float> resid;       // [2L+1][T] p(target) with the stream at (point, position) restored to the clean
                                    // run's (points numbered as in the lens: 0 embeddings, 2l+1 after the attention
                                    // of layer l, 2l+2 after its MLP)
    std::vector<float> attn, mlp;   // [L][T] with layer l's attention (attn_out) or MLP (mlp_out) output at that
                                    // position restored; empty without sublayers
    int runs = 0;                   // restored runs computed (the rest equal the corrupted run or another cell)
    double ms = 0;
    bool complete = true;           // false when progress asked to stop (then every cell is NaN: a mean over part
                                    // of the samples is not the trace)
};

// The subject's tokens in the prompt: the tokens whose bytes overlap the subject's first occurrence in the
// prompt's bytes (so "Eiffel Tower" finds ‘·Eiffel’ ‘·Tower’). Throws gb::error (one line) when it is empty or not
// in the prompt.
void subject_span(int& first, int& end, const tokenizer& tok, const std::vector<int>& tokens, const std::string& subject);

// The standard deviation of every entry of the token embedding matrix [V][d].
double embedding_std(const model& m);

// The noise of sample s: [rows][d] draws from N(0, sigma^2) (Box–Muller on a mt19937_64 seeded by seed and s), the
// same on every platform and build.
std::vector<float> trace_noise(int rows, int d, double sigma, uint64_t seed, int sample);

// Causal tracing of tokens with the subject's span [first, end). Each corrupted run adds sample s's noise to the
// embeddings (residual point 0) of the subject's tokens; a restored cell sets one point's row at one position to
// the clean run's value (resuming the corrupted run there: layers before it and positions before it are never
// recomputed). Throws gb::error for a kind without FEATURE_TRACE, an empty or too long prompt, a span outside it,
// noise < 0 or samples < 1. progress (may be empty) gets the fraction done and returns false to stop.
trace_result causal_trace(const model& m, const std::vector<int>& tokens, int first, int end, const trace_options& opt,
                          const std::function<bool(float)>& progress = {});

} // namespace gb
