// The backward pass's elementwise, row-wise and attention ops (core/run/backward.h): each takes the gradient of
// a forward op's output and what that op read (recomputed or kept by the caller), and gives the gradient of its
// input. Free functions, output first, sizes last; each is the derivative of the forward op in ops.h /
// attention.h as that op computes it (its statistics in double where it takes them in double).
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/attention.h"
#include "model/model.h"

namespace gb {

// gx [n][d] (+= with accumulate) = the gradient at norm_forward's input x [n][d] from gy [n][d] at its output:
// LayerNorm (kind) or RMSNorm with gain g; the identity (gx = gy) when g is null. Sums in double.
void norm_backward(float* gx, const float* x, const float* gy, const std::vector<float>* g, norm_kind kind, float eps,
                   int n, int d, bool accumulate = false);
// In place: gy, the gradient at rms_groups' output (same layout as x: row t's group k at t * stride + k * width),
// becomes the gradient at its input x (the values before the norm).
void rms_groups_backward(float* gy, const float* x, int stride, int n, int groups, int width,
                         const std::vector<float>& g, float eps);
// In place: the gradient at rope_forward's output becomes the gradient at its input (the inverse rotation).
void rope_backward(float* g, int stride, int n, int n_heads, int d_head, int pos0, const std::vector<double>& freq,
                   rope_pairing pairing);

// g [n] *= f'(pre [n]) for the activations f of the dense MLPs: the tanh GELU (GPT-2's, inside the product's
// epilogue), the exact erf GELU, SiLU.
void gelu_backward(float* g, const float* pre, size_t n);
void gelu_erf_backward(float* g, const float* pre, size_t n);
void silu_backward(float* g, const float* pre, size_t n);
// The gated MLPs, out = up * f(gate) (SwiGLU: f = SiLU; GeGLU: the tanh GELU): from g [n] at out, g_up [n] =
// g * f(gate) and g_gate [n] = g * up * f'(gate). g_up may be g itself.
void swiglu_backward(float* g_up, float* g_gate, const float* g, const float* up, const float* gate, size_t n);
void geglu_backward(float* g_up, float* g_gate, const float* g, const float* up, const float* gate, size_t n);
// g [n] *= 1 - (y / cap)^2: through softcap_forward, from its output y.
void softcap_backward(float* g, const float* y, size_t n, float cap);

// Attention's backward in two steps, around the pattern's interventions (which the caller applies between them).
// a is the forward's call (q, k, v as they flowed on; a.probs the pattern as it flowed on, [H][n_q][keys];
// n_past 0), g_out [n_q][a.out_stride] the gradient at its output z.
// gp [H][n_q][keys] = the gradient at the pattern: g_out . v for the keys each query sees, 0 elsewhere.
void attention_backward_probs(float* gp, const attention_args& a, const float* g_out);
// From gp (the pattern's gradient once its covered rows are 0): through the softmax (and the soft-cap: scores
// recomputed from q and k), gq [n_q][gq_stride] (query head h at column h*d_head), and gk, gv [keys][gkv_stride]
// (key/value head g at column g*d_head, summed over the query heads that share it). Every output is written.
void attention_backward_inputs(float* gq, int gq_stride, float* gk, float* gv, int gkv_stride, const attention_args& a,
                               const float* gp, const float* g_out);

} // namespace gb
