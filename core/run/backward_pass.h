// One call of the backward pass, as its blocks (core/run/backward_blocks.cpp) see it: the model, the record the
// forward made, the interventions in force, the gradient of the stream, what to keep. Internal to core/run.
#pragma once
#include <vector>

#include "run/backward.h"
#include "run/pass.h"

namespace gb {

struct bpass {
    const model& m;
    const model_config& c;
    const model_weights& w;
    const arch_info& arch;
    const record& rec;              // the forward's, laid out by backward_keep
    const forward_options& opt;     // its interventions, pixels, source
    const gradient_request& want;
    gradients& out;
    int T, d;
    std::vector<uint8_t> plan_buf;
    point_plan plan;                // which points the interventions change, identity norms, dropped adds
    std::vector<float> g;           // [T][d] the gradient of the stream at the point the pass has reached
    std::vector<float> g_in;        // [T][d] a parallel block: the MLP's gradient at the layer's input
    std::vector<float> x, s, ga, gb2, t1, t2, t3, t4; // scratch, grown on demand
    gemm_scratch gs;

    bpass(gradients& out, const model& m, const record& rec, const forward_options& opt, const gradient_request& want);
    // Whether the caller asked for p at layer l, and its storage there (allocated, zeroed, when asked).
    float* kept(hook_point p, int l);
    // The gradient arriving at point p of layer l, n rows of width floats (stride apart; a pattern [H][n][width]),
    // rows from position pos0: kept when asked for, then what the point's ZERO/SET interventions cover is zeroed
    // (a constant passes no gradient back).
    void at_point(hook_point p, int l, float* g, int n, int width, int stride, int pos0 = 0);
    // The point's ZERO/SET interventions applied to x as the forward applied them (a recomputed tensor).
    void reapply(hook_point p, int l, float* x, int n, int width, int stride);
    // The stream entering layer l as it flowed on (resid_pre's interventions applied) into b.x.
    const float* stream_in(int l);
    // The stream the MLP of layer l reads its input from: the layer's input (parallel blocks), the stream after
    // the cross-attention (encoder–decoders' decoders, recomputed into dst), or resid_mid.
    const float* mlp_stream(int l, std::vector<float>& dst);
    void keep_resid(int point); // out.resid[point] = g
};

// ---- backward_blocks.cpp: from the gradient at a block's output (b.g) to the gradient at its input ----
void mlp_backward(bpass& b, int l);             // resid_post of l -> the MLP's input stream
void cross_attention_backward(bpass& b, int l); // the stream after the cross-attention -> resid_mid
void attention_backward(bpass& b, int l);       // resid_mid of l -> resid_post of l - 1 (l > 0) / resid_pre of 0

template <class T> void grow(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

} // namespace gb
