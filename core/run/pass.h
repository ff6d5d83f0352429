// One call of the forward pass, as the blocks of core/run/blocks.cpp see it: the model, the caller's state and
// options, the stream, what happens at each hook point, and the timing. Internal to core/run (forward.cpp,
// points.cpp, blocks.cpp); everything else calls eval (forward.h).
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "run/forward.h"

namespace gb {

// A scratch buffer at least n long (it only grows, so a call after the first allocates nothing)
inline void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

// What happens at each (point, layer) of one call, worked out once so that a point with nothing to do costs one
// byte read. Three views of one buffer kept in forward_state, so that a call (a generated token) allocates nothing.
enum point_flag : uint8_t { PT_CHANGE = 1, PT_HOOK = 2, PT_KEEP = 4 };
// The bits of point_plan's identity_norm (which of a layer's norms no-layernorm makes the identity) and no_residual
// (which of its residual adds no-residual drops).
enum plan_bit : uint8_t { NORM_ATTN_IN = 1, NORM_MLP_IN = 2, SKIP_RESID_MID = 1, SKIP_RESID_POST = 2 };
struct point_plan {
    int n_layer = 0;
    uint8_t* flags = nullptr;         // [HOOK_COUNT][L] (final points at layer 0)
    uint8_t* identity_norm = nullptr; // [L + 1]: attn_in and mlp_in of layer l (NORM_ATTN_IN, NORM_MLP_IN); [L] the final norm
    uint8_t* no_residual = nullptr;   // [L]: resid_mid (SKIP_RESID_MID), resid_post (SKIP_RESID_POST)
    uint8_t& at(hook_point p, int l) { return flags[(size_t)p * n_layer + (hook_is_final(p) ? 0 : l)]; }
};

// Time spent, charged to one bucket of forward_timing at a time: to() switches the bucket, the destructor charges
// the last one.
struct stopwatch {
    using clock = std::chrono::steady_clock;
    double* bucket;
    clock::time_point t0 = clock::now();
    explicit stopwatch(double& b) : bucket(&b) {}
    void to(double& b) {
        const clock::time_point t = clock::now();
        *bucket += std::chrono::duration<double, std::milli>(t - t0).count();
        bucket = &b, t0 = t;
    }
    ~stopwatch() { to(*bucket); }
    stopwatch(const stopwatch&) = delete;
    stopwatch& operator=(const stopwatch&) = delete;
};

struct pass {
    const model& m;
    const model_config& c;
    const model_weights& w;
    const arch_info& arch;
    forward_state& s;
    const forward_options& opt;
    record* rec;                 // null: nothing kept
    int n0 = 0;                  // position of this call's first row (tokens before it are in the cache)
    int n = 0;                   // rows (positions) of this call
    int n_keys = 0;              // n0 + n: keys a query of the last row sees
    int n_out = 0;               // rows that get logits (n, or the last one)
    int n_source = 0;            // S: source positions an encoder–decoder's decoder reads (0 otherwise)
    bool use_cache = false;      // keys and values go to (and are read from) the cache
    float* x = nullptr;          // [n][d] the residual stream
    float* norms = nullptr;      // [2L+1][norm_row] the record's residual norms (null: not kept)
    size_t norm_row = 0;         // floats per point in norms (the record's T)
    int pos0 = 0;                // position of row 0 of the tensors the hooks see (the final points: the first logit row)
    point_plan plan;
    forward_timing tm;
    // the rest is set by name (forward.cpp's eval)
    pass(const model& model_, forward_state& state, const forward_options& options, record* record_)
        : m(model_), c(model_.config), w(model_.weights), arch(arch_table(model_.config.arch)), s(state), opt(options),
          rec(record_) {}
};

// ---- points.cpp ----
point_plan make_plan(std::vector<uint8_t>& buf, const forward_options& opt, const record_plan* rp, int L);
// A ZERO or SET intervention on t, over the rows and slices it covers (t holds the positions t.pos0 ..).
void apply_intervention(const intervention& v, hook_tensor& t, const model_config& c);
// At point p of layer l: the interventions, then the hooks, then the record's copy (so the record holds what
// flowed on). data: n rows of width floats, stride apart. Returns true when an intervention or hook wrote to it.
bool visit(pass& f, hook_point p, int l, float* data, int n, int width, int stride);
// Residual point q (0 embeddings, 2l+1 after the attention of l, 2l+2 after its MLP): x <- x + add (add alone
// when replace, x as it is when add is null), Post-LN's norm of the sum (ln_g; null: none or ablated), the
// point's interventions and hooks as hook point hp of layer l, then its norms and the first non-finite value.
void residual_point(pass& f, const float* add, bool replace, int q, hook_point hp, int l, const char* where,
                    const std::vector<float>* ln_g = nullptr, const std::vector<float>* ln_b = nullptr);

// ---- blocks.cpp: the model, one named block at a time ----
void embed_block(pass& f, const int* tokens);      // token (or patch) embeddings + positions: residual point 0
void attention_block(pass& f, int l);              // self-attention sublayer of layer l: point 2l+1
void cross_attention_block(pass& f, int l);        // encoder–decoders: cross-attention of decoder layer l
void mlp_block(pass& f, int l);                    // MLP (dense or mixture of experts) of layer l: point 2l+2
void head_block(pass& f, std::vector<float>& out); // final norm, then the LM head (or a stack's output)

} // namespace gb
