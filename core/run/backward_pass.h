// One call of the backward pass, as its parts see it: the model, the forward's record and options, the plan of
// its interventions, scratch; and the sublayers' backwards that the decoder's loop (backward.cpp) and the other
// kinds' stacks (backward_stack.cpp: encoders, image classifiers, both stacks of an encoder–decoder) share.
// Internal to core/run; everything else calls backward.h.
#pragma once
#include <string>
#include <vector>

#include "kernels/moe.h"
#include "run/backward.h"
#include "run/pass.h"
#include "util/error.h"

namespace gb {

struct bctx {
    const model& m;
    const model_config& c;
    const model_weights& w;
    const arch_info& arch;
    const record& rec;
    const forward_options& opt;
    int T, d, H, KV, dh, qkv_w;
    std::vector<uint8_t> plan_buf;
    point_plan plan;
    gemm_scratch gs;
    moe_scratch ms;
    std::vector<float> t1, t2, t3, t4, t5; // scratch, grown on demand
    // The stream the MLP of the layer being differentiated read, when it is not the record's resid_mid (an
    // encoder–decoder's decoder: the stream after the cross-attention); null: the record's
    const float* mlp_stream = nullptr;
    const float* source = nullptr; // [S][d] an encoder–decoder's decoder: the encoder's output
    int S = 0;
    float* head_in = nullptr; // [L][H][T][d] gradients::head_in, when readers were asked
};

inline float* grown(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// The record's tensor at (p, l); throws naming it when the forward did not keep it.
inline const float* kept(const bctx& b, hook_point p, int l) {
    const float* x = p == HOOK_PATTERN && l == b.rec.part.layer ? nullptr : b.rec.get(p, l); // (every head's)
    if (!x) throw error("internal: the backward needs " + hook_label(p, l) + " in the record (backward_keep)");
    return x;
}

// ---- backward.cpp ----
// Throws gb::error for a model whose kind offers no gradients, hooks in opt, a record that is not m's, or a metric
// outside the vocabulary or positions.
void check_backward(const model& m, const record& fwd, const metric_spec& metric, const forward_options& opt);
// g [n][width] at point p of layer l (rows from position pos0): the part its ZERO and SET interventions cover
// becomes 0; as: the layout to cover it in.
void zero_covered(bctx& b, hook_point p, int l, float* g, int n, int width, int stride, int pos0 = 0,
                  hook_point as = HOOK_COUNT);
// g [T][d] at mlp_out (as flowed; overwritten) -> accumulated into gx [T][d] at the stream the MLP read
void mlp_backward(bctx& b, int l, float* g, float* gx);
// g [T][d] at attn_out (as flowed; overwritten) -> gz_out [T][H*dh] at z, and accumulated into gx [T][d] at
// resid_pre
void attention_backward(bctx& b, int l, float* g, float* gz_out, float* gx);
// The metric at position p from the last residual point's stream, its gradient there into g [T][d] (0 at the
// other positions); returns the metric.
double head_backward(bctx& b, const metric_spec& metric, int p, float* g);

// ---- backward_stack.cpp ----
// What the other kinds' backward needs kept beyond the decoder's: the sublayers' outputs (a Post-LN norm's
// input is the stream plus them), the cross-attention's input, pattern and output.
void other_kinds_keep(record_request& rq, const model_config& c);
// gx [n][d] = the gradient at final_norm_forward's input x [n][d] from gy [n][d] at its output (a masked-LM head:
// through its LayerNorm, GELU and dense transform; identity: the LayerNorm skipped).
void final_norm_backward(bctx& b, float* gx, const float* x, const float* gy, int n, bool identity);
// The layers, last first: g [T][d] at the last residual point (point 2L, as flowed; consumed) -> resid
// [2L+1][T][d] at every point and z [L][T][H*dh]. A decoder with cross-attention adds the gradient at the encoder's
// output (b.source) into g_source [S][d].
void stack_backward(bctx& b, std::vector<float>& g, float* resid, float* z, float* g_source);
// An encoder's or an image classifier's gradients: the head, then every layer (backward.h's backward for them).
void single_stack_backward(gradients& out, bctx& b, const metric_spec& metric);

} // namespace gb
