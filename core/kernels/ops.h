// The forward pass's elementwise and row-wise ops: free functions, output first, sizes last, no hidden state.
// (Matrix products are in gemm.h, attention in attention.h.)
#pragma once
#include <cstddef>
#include <vector>

#include "kernels/gemm.h"
#include "model/model.h"

namespace gb {

// out [n][d] = LayerNorm(x) * g + b, or RMSNorm(x) * g when kind is RMSNORM; the identity when g is null.
// Mean and variance in double (two passes: no cancellation when |mean| >> spread), eps inside the root.
void norm_forward(float* out, const float* x, const std::vector<float>* g, const std::vector<float>* b, norm_kind kind,
                  float eps, int n, int d);

// Bookkeeping on activations and gradients: y = x, y = v, y += x over n floats. Split over the threads from
// parallel_min_rows floats up, not to beat a serial loop but so that OpenMP's other thread, between two products,
// does not fall asleep during a serial copy and need waking (util/threads.h: it spins only briefly; a wake cost
// more than the copy on the machines measured, docs/performance.md "A busy machine").
void copy_floats(float* y, const float* x, size_t n);
void fill_floats(float* y, float v, size_t n);
void add_floats(float* y, const float* x, size_t n);

// SwiGLU in place: up [n] <- silu(gate) * up = up * gate / (1 + e^-gate).
void swiglu_forward(float* up, const float* gate, size_t n);

// GeGLU in place: up [n] <- gelu_tanh(gate) * up (Gemma).
void geglu_forward(float* up, const float* gate, size_t n);
// SiLU in place: x <- x * sigmoid(x) (Marian's "swish", not gated).
void silu_forward(float* x, size_t n);
// The exact GELU in place: x <- x * (1 + erf(x / sqrt 2)) / 2 (GPT-NeoX's "gelu").
void gelu_erf_forward(float* x, size_t n);
// The tanh GELU in place, GPT-2's (the lanes the products' GELU epilogue applies).
void gelu_forward(float* x, size_t n);
// Soft-capping in place: x <- cap * tanh(x / cap) (Gemma 2's logits).
void softcap_forward(float* x, size_t n, float cap);
// RMSNorm in place on groups of width values: row t's group k at x + t * stride + k * width, times g [width]
// (q/k norms: one group of all heads, or one group per head).
void rms_groups(float* x, int stride, int n, int groups, int width, const std::vector<float>& g, float eps);

// Rotary embedding in place on the heads of x [n][stride] for positions pos0.. (n_heads heads from column 0).
// freq [rot/2]: radians per position of pair i, scaling included (model_config::rope_freq, made at load); the
// first rot dimensions of each head rotate (pairs (i, i + rot/2), or adjacent), the rest pass unchanged.
void rope_forward(float* x, int stride, int n, int n_heads, int d_head, int pos0, const std::vector<double>& freq,
                  rope_pairing pairing);

// x [n][d] <- x + f, or f alone when replace (no residual); f may be null (x as it is). Then, with norms [n],
// each row's L2 norm. Returns false when some element of x is not finite (only checked with norms: the sum of
// squares is in double, finite exactly when every element is).
bool residual_step(float* x, const float* f, bool replace, float* norms, int n, int d);

// out [n][H*d], head h's slice of row t = z[t][h*dh .. (h+1)*dh) * W_o's rows h*dh .. (h+1)*dh (no bias): one
// product of block-diagonal rows with W_o, H times W_o's own work, done only when head_out is asked for.
// blocks: scratch, grown as needed.
void head_outputs(float* out, const float* z, int z_stride, const weight_matrix& w_o, int n, int H, int dh,
                  std::vector<float>& blocks, gemm_scratch& gs);
// A vision model's embeddings before positions: x [n_prefix + patches][d] = [CLS], ([DIST],) then each patch's
// pixels (channel-major [C][P][P], patches row by row over the grid) times W_patch plus its bias.
// pixels: [C][S][S] the preprocessed image (S = image_size).
void patch_embed_forward(float* x, const float* pixels, const model& m, gemm_scratch& gs);
// DeiT with a teacher: HF's prediction averages the class head at [CLS] and the distillation head at [DIST].
// logits0 [V] holds the class head's logits of row 0; x1 [d] is [DIST]'s final-normed row.
void distill_average(float* logits0, const float* x1, const model& m);
// The final norm: out [n][d] = norm(x) with the final gain and bias (identity: x as it is). A masked-LM head
// (arch_info::mlm_head) transforms first, out = LN(GELU(x W_t + b_t)), and identity skips only its LayerNorm.
// out must not alias x.
void final_norm_forward(float* out, const float* x, int n, const model& m, bool identity, gemm_scratch& gs);
// The LM head: logits [n][V] = x [n][d] times the unembedding (lm_head, or tok_emb when tied), plus the
// decoder's bias when the model has one, with the matmul kernel the weights were packed for.
void lm_head_forward(float* logits, const float* x, int n, const model& m, gemm_scratch& gs);
// One logit in double, before any soft-cap: x [d] . row id of the unembedding (+ its bias). row [d] gets the
// unembedding's row (the backward's gradient reads it). The forward's logit_ids and the backward's logit metrics.
double lm_head_logit(float* row, const float* x, int id, const model& m);

// out [n][d] = sum over heads of head_out [n][H*d] (+ bias [d] when not empty).
void sum_heads(float* out, const float* head_out, const std::vector<float>& bias, int n, int H, int d);

} // namespace gb
