// The forward pass: one per-layer loop for every architecture. Every intermediate passes a named hook point
// (hooks.h), where interventions (ablations, patches) change it, hooks read or overwrite it, and the
// activation record (record.h) keeps it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/moe.h"
#include "model/model.h"
#include "run/ablation.h"
#include "run/hooks.h"
#include "run/record.h"

namespace gb {

// KV cache and scratch; reuse it across calls so nothing is allocated per token.
struct forward_state {
    int n_ctx = 0;
    int n_past = 0;
    bool keep_cache = false;    // write keys and values to the cache even when a run fills the whole context
                                // (activation patching resumes runs from a layer and reads them)
    std::vector<float> k_cache; // [L][n_ctx][KV*dh]
    std::vector<float> v_cache; // [L][n_ctx][KV*dh]
    // scratch, grown on demand
    std::vector<float> x, xn, qkv, att_out, ff, ff2, probs, head_out, blocks;
    std::vector<float> sub_out; // [n][d] the sublayer's output before its residual add: attention's, cross-attention's
                                // or the MLP's (one at a time; each is added to x before the next is computed)
    std::vector<float> x_in;    // [n][d] parallel blocks: the layer's input, which the MLP reads after attention added to x
    std::vector<float> cross_kv; // [L][S][2*H*dh] encoder–decoders: each layer's cross-attention keys | values of the
                                 // source, made when a target starts (position 0) and read by every later call
    std::vector<float> xq;       // [n][H*dh] cross-attention queries
    std::vector<uint8_t> plan;  // what happens at each hook point of a call (core/run/pass.h's point_plan)
    gemm_scratch gemm;          // activations packed for the matrix products
    moe_scratch moe;            // routing and expert buffers of MoE layers
};
void state_init(forward_state& s, const model_config& c, int n_ctx);

struct forward_options {
    std::vector<intervention> interventions; // applied at their points, in order, before any hook there
    std::vector<hook> hooks;                 // called at their points, in order
    record_request keep;                     // what the record keeps (when eval is given one)
    bool all_logits = false;                 // logits (and final_norm) for every position, not just the last
    std::vector<int> logit_ids;              // not empty: only these tokens' logits, [n_out][ids] (the LM head's
                                             // other rows are skipped, and so is the logits hook point)
    // Resuming: the call starts at residual point start_point (0 embeddings, 2l+1 after attention of l, 2l+2
    // after the MLP of l) with start_resid [n][d] as the stream there for this call's positions; the cache must
    // hold the keys and values of positions before them at every later layer. Null: start from the embeddings.
    int start_point = 0;
    const float* start_resid = nullptr;
    const float* pixels = nullptr;           // vision models: [C][S][S] the preprocessed image (tokens are then the
                                             // positions 0 .. n-1, the whole sequence in one call)
    const float* source = nullptr;           // encoder–decoders' decoder: the encoder's output [n_source][d] (the
    int n_source = 0;                        // stack's final norm, run_seq2seq) that cross-attention reads
    attention_fn attention;                  // empty = attention_cpu
    // Continuing a record (live.h): rec already has this run's layout for s.n_past + n tokens (record_begin),
    // with its rows before s.n_past and its points before start_point filled; the call fills the rest.
    bool continue_record = false;
    std::function<bool()> cancelled;         // asked before each layer: true stops the call (throws gb::cancelled)
};

// Runs n tokens at positions s.n_past .. through the model and appends them to the cache.
// logits: [n_out][V] (n_out = n with all_logits, else 1), or [n_out][ids] with logit_ids; an encoder–decoder's
// encoder stack (arch no_head) has no LM head: logits gets its output [n][d] instead.
// rec may be null (generation, patching); when given, the call must start at position 0 from the embeddings.
void eval(std::vector<float>& logits, record* rec, forward_state& s, const model& m, const int* tokens, int n,
          const forward_options& opt);

// Sets up rec for n tokens from position 0: dimensions, token text, and storage for what plan keeps (not zeroed:
// the run that fills it writes every row).
// n_source: S, the source positions an encoder–decoder's decoder reads (its cross-attention pattern is [H][T][S]).
void record_begin(record& rec, const model& m, const int* tokens, int n, bool all_logits, const record_plan& plan,
                  int n_source = 0);
// The plan a record was laid out with (which points at which layers it keeps).
record_plan plan_of(const record& rec);

// Full record of a prompt from position 0, with ab's interventions before opt's. Throws gb::error if the prompt
// is empty or too long.
void run_forward(record& out, const model& m, const std::vector<int>& tokens, const ablation& ab = {},
                 const forward_options& opt = {});

// Process setting for programs that run many forwards: freed large buffers (a record, a KV cache) stay in
// the heap, so the next forward reuses them instead of faulting fresh zero pages in (10 % of a T=256 forward).
void keep_freed_buffers_in_heap();

} // namespace gb
