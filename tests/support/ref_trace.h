// What the double-precision reference forwards (reference.h: GPT-2, tiny_llama.h: Llama) return and accept:
// every intermediate in the hook points' layouts, the residual stream, patches and edits that change a run,
// and the final norm + unembedding in double for the analyses' references. Naive loops, nothing from core/
// but the hook point names.
#pragma once
#include <functional>
#include <vector>

#include "run/ablation.h"
#include "run/hooks.h"

// One reference run. act[p][l] is point p at layer l laid out as core/run/hooks.h says for n = T rows:
// [T][width] (q [T][H*dh], k and v [T][KV*dh] after RoPE, z [T][H*dh], head_out [T][H*d], mlp_post [T][ff]) and
// the pattern [H][T][T]; the final points (final_norm [T][d], logits [T][V]) at act[p][0], for every position.
// Each tensor is kept as it flowed on: after the ablations, patches and edit at its point.
struct ref_trace {
    std::vector<double> logits;     // [T][V]
    std::vector<double> attention;  // [L][H][T][T]
    std::vector<double> resid_norm; // [2L+1][T]
    std::vector<std::vector<double>> act[gb::HOOK_COUNT];
    std::vector<double> resid;      // [2L+1][T][d] 0 embeddings, 2l+1 resid_mid of l, 2l+2 resid_post of l
    int n_layer = 0, n_tokens = 0, d_model = 0;
    const std::vector<double>& at(gb::hook_point p, int layer) const {
        return act[p][gb::hook_is_final(p) ? 0 : layer];
    }
    const double* resid_at(int point, int t) const { return &resid[((size_t)point * n_tokens + t) * d_model]; }
};

// The residual stream at residual point `point` (0 embeddings, 2l+1 resid_mid of l, 2l+2 resid_post of l) and
// position `position` becomes values [d] (activation patching).
struct ref_resid_patch {
    int point = 0, position = 0;
    std::vector<double> values;
};
// Head `head`'s z at layer `layer` becomes values [T][dh] at every position.
struct ref_z_patch {
    int layer = 0, head = 0;
    std::vector<double> values;
};
// Called at every point (layer: n_layer for the final points) with the whole tensor in the layout above, after
// the ablations and patches there; what it leaves in x flows on (an edited pattern re-weights the values).
using ref_edit = std::function<void(gb::hook_point p, int layer, std::vector<double>& x)>;

struct ref_options {
    std::vector<ref_resid_patch> resid_patches;
    std::vector<ref_z_patch> z_patches;
    ref_edit edit;
};

// What both references do at each point: apply the patches and the edit there, then keep the tensor (and, at
// the residual points, the stream and its norms).
struct ref_points {
    ref_trace& out;
    const ref_options& opt;
    int L, T, d, dh;
    ref_points(ref_trace& out, const ref_options& opt, int L, int T, int d, int dh);
    void at(gb::hook_point p, int layer, std::vector<double>& x);
    void finish(int H); // out.attention and out.logits from the kept pattern and logits
};

// An ablation switch on at these layers (empty: every layer), for the references' ablation cases.
gb::layer_set layers_on(std::vector<int> layers);

// head_out [T][H*d] of z [T][H*dh]: head h's z times its columns h*dh .. of W_o, stored [d][H*dh] as nn.Linear
// does (no bias). Shared by the references whose W_o has that layout (Llama, the families, the encoders).
std::vector<double> ref_head_outputs(const std::vector<float>& wo, const std::vector<double>& z, int T, int H, int dh, int d);

// The bidirectional references' (encoders', vision models') plain pieces, on n rows:
// LayerNorm of each row of v [n][d] with gain g and bias b (v itself when off)
std::vector<double> ref_layernorm(const std::vector<double>& v, const std::vector<float>& g, const std::vector<float>& b,
                                  int n, int d, double eps, bool off = false);
// v [n][in] times w [out][in] (nn.Linear's layout) plus b [out]
std::vector<double> ref_linear(const std::vector<float>& w, const std::vector<float>& b, const std::vector<double>& v,
                               int n, int out, int in);
// Unmasked attention of q, k [n][H*dh]: the pattern [H][n][n], softmax of q.k / sqrt dh over every key
std::vector<double> ref_full_pattern(const std::vector<double>& q, const std::vector<double>& k, int n, int H, int dh);
// z [n][H*dh] = pattern [H][n][n] times v [n][H*dh] per head, the heads ab ablates at layer l left at zero
std::vector<double> ref_pattern_values(const std::vector<double>& pattern, const std::vector<double>& v, int n, int H,
                                       int dh, int l, const gb::ablation& ab);

// The final norm and unembedding of a tiny model in double, from the tensors the test wrote: what the logit
// lens and direct logit attribution are checked against.
struct ref_readout {
    bool layernorm = true;                // false: RMSNorm
    double eps = 1e-5;
    int d = 0, V = 0;
    std::vector<double> g, b;             // [d] final norm gain and bias (b empty for RMSNorm)
    std::vector<double> unembed;          // [V][d]
    std::vector<std::vector<double>> b_o; // [L][d] attention output bias; empty vectors when the model has none
    // 1 / sigma of the final norm at x [d]: LayerNorm sqrt(var + eps) of the centred x, RMSNorm sqrt(mean x^2 + eps)
    double inv_sigma(const double* x) const;
    // final norm of x [d] (the identity when identity) times the unembedding: [V]
    std::vector<double> logits(const double* x, bool identity) const;
};
