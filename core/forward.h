// The forward pass: ablations in, capture out. One per-layer loop serves every architecture.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"
#include "model.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Ablations (a contract, see README "Ablation semantics")
// ---------------------------------------------------------------------------------------------
struct layer_set {
    bool on = false;
    std::vector<int> layers; // empty = every layer
    bool covers(int layer) const;
    bool covers_all(int n_layer) const; // on, and every layer 0..n_layer-1 included
};

struct head_ref {
    int layer = 0;
    int head = 0;
    bool operator==(const head_ref& o) const { return layer == o.layer && head == o.head; }
};

struct ablation {
    layer_set no_attention;  // attention sublayer output is zero
    layer_set no_residual;   // x <- f(x) instead of x + f(x), both sublayers
    layer_set no_layernorm;  // every norm in the layer is the identity; final norm too when all layers
    std::vector<head_ref> heads; // head's weighted value vector (before W_o) is zero; pattern still captured
    bool any() const;
    std::string describe() const; // "no-residual[0,3] heads 5.1" or "none"
};

// Throws gb::error when a layer or head index is outside the model.
void check_ablation(const ablation& ab, const model_config& c);
// From the CLI's/app's lists: ablate "no-residual,no-layernorm,no-attention", layers "0,3" (restricts
// ablate), heads "5.1,5.5". Throws gb::error naming the bad item; ranges are checked by check_ablation.
ablation parse_ablation(const std::string& ablate, const std::string& layers, const std::string& heads);

// ---------------------------------------------------------------------------------------------
// Capture: everything the UI shows about one forward pass
// ---------------------------------------------------------------------------------------------
struct forward_timing {
    double total_ms = 0;
    double matmul_ms = 0;    // projections, MLP, LM head
    double attention_ms = 0; // scores, softmax, weighted values
    double rest_ms = 0;      // norms, activations, embeddings, bookkeeping
};

struct capture {
    int n_layer = 0;
    int n_head = 0;
    int n_tokens = 0;                 // T
    int vocab = 0;                    // V
    bool all_logits = false;
    std::vector<int> tokens;          // [T]
    std::vector<std::string> pieces;  // [T] display text of each token
    std::vector<float> attention;     // [L_kept][H][T][T] probabilities; 0 above the diagonal
    std::vector<int> layer_slot;      // [L] index into attention's first axis, -1 if not kept (budget)
    std::vector<float> resid_norm;    // [2L+1][T] L2 norm: 0 embed, 2l+1 after attn of l, 2l+2 after mlp of l
    std::vector<float> logits;        // [T][V] with all_logits, else [1][V] for the last position
    int nonfinite_layer = -1;         // first layer whose output held NaN/Inf, -1 if none
    std::string nonfinite_where;      // "L3 attn", "embed", "final norm", ...
    forward_timing timing;

    bool has_layer(int layer) const { return layer >= 0 && layer < n_layer && layer_slot[layer] >= 0; }
    // [T][T] pattern of one head (query rows, key columns), or nullptr when its layer was not kept.
    const float* head(int layer, int h) const {
        if (!has_layer(layer)) return nullptr;
        return &attention[((size_t)layer_slot[layer] * n_head + h) * n_tokens * n_tokens];
    }
    const float* last_logits() const { return &logits[logits.size() - (size_t)vocab]; }
};

// "embed", "L0 attn", "L0 mlp", ... for the 2L+1 residual points.
std::vector<std::string> resid_labels(int n_layer);

// ---------------------------------------------------------------------------------------------
// Attention backend: CPU by default; the GL path plugs in here.
// ---------------------------------------------------------------------------------------------
struct attention_args {
    const float* q;      // [n_q][q_stride], head h at column h*d_head
    const float* k;      // [n_past + n_q][kv_stride], kv head g at column g*d_head
    const float* v;      // [n_past + n_q][kv_stride]
    int q_stride, kv_stride;
    int n_q, n_past;     // queries are positions n_past .. n_past+n_q-1; keys 0 .. n_past+n_q-1
    int n_head, n_kv_head, d_head;
    float* probs;        // [H][n_q][n_past+n_q] or nullptr (not kept); causal part is 0
    float* out;          // [n_q][out_stride], head h at column h*d_head
    int out_stride;
};
using attention_fn = std::function<void(const attention_args&)>;
// Plain CPU path (the reference every backend is tested against).
void attention_cpu(const attention_args& a);

// ---------------------------------------------------------------------------------------------
// Evaluation with a KV cache
// ---------------------------------------------------------------------------------------------
// KV cache and scratch; reuse it across calls so nothing is allocated per token.
struct forward_state {
    int n_ctx = 0;
    int n_past = 0;
    std::vector<float> k_cache; // [L][n_ctx][KV*dh]
    std::vector<float> v_cache; // [L][n_ctx][KV*dh]
    // scratch, grown on demand
    std::vector<float> x, xn, qkv, att, att_out, ff, ff2, probs, logits_in;
    gemm_scratch gemm;          // activations packed for the matrix products
};
void state_init(forward_state& s, const model_config& c, int n_ctx);

struct forward_options {
    bool capture_attention = true;
    bool all_logits = false;
    std::vector<uint8_t> attention_layers; // [L] layers to keep attention for (empty = all)
    attention_fn attention;                // empty = attention_cpu
};

// Runs n tokens at positions s.n_past .. through the model and appends them to the cache.
// logits: [n][V] with all_logits, else [1][V] for the last token. cap may be null (generation);
// when given, it receives the new tokens' attention/norms (call with n_past == 0 for a full capture).
void eval(std::vector<float>& logits, capture* cap, forward_state& s, const model& m, const int* tokens, int n,
          const ablation& ab, const forward_options& opt);

// Capture budget: which layers' attention to keep so that kept * H * T * T floats fit in budget_bytes.
// Empty when everything fits; otherwise a [L] mask of the layers nearest focus_layer that fit (at least one).
std::vector<uint8_t> attention_layers_for_budget(const model_config& c, int n_tokens, size_t budget_bytes, int focus_layer);
// Bytes of a full attention capture: L * H * T * T floats.
size_t attention_capture_bytes(const model_config& c, int n_tokens);

// Process setting for programs that run many forwards: freed large buffers (a capture, a KV cache) stay in
// the heap, so the next forward reuses them instead of faulting fresh zero pages in (10 % of a T=256 forward).
void keep_freed_buffers_in_heap();

// Full capture of a prompt from position 0. Throws gb::error if the prompt is empty or too long.
void run_forward(capture& out, const model& m, const std::vector<int>& tokens, const ablation& ab = {},
                 const forward_options& opt = {});

// ---------------------------------------------------------------------------------------------
// Next-token probabilities and generation
// ---------------------------------------------------------------------------------------------
struct token_prob {
    int id;
    float prob;
};
// Softmax of logits [V] then the k most probable, highest first.
std::vector<token_prob> top_k_probs(const float* logits, int vocab, int k);
// Full softmax of logits [V] (double accumulation), written to probs [V].
void softmax_probs(std::vector<float>& probs, const float* logits, int vocab);

struct sampling {
    float temperature = 0.0f; // 0 = greedy
    int top_k = 0;            // 0 = off
    float top_p = 1.0f;       // 1 = off
    uint64_t seed = 0;
};
int sample_token(const float* logits, int vocab, const sampling& sp, std::mt19937_64& rng);

struct generation {
    std::vector<int> ids;   // generated ids only
    bool hit_eos = false;
    double ms = 0;
};
// Prompt once through the cache, then one token per step. on_token may return false to stop early.
generation generate(const model& m, const std::vector<int>& prompt, int max_new, const sampling& sp,
                    const ablation& ab = {}, const std::function<bool(int)>& on_token = {});

} // namespace gb
