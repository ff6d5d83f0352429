// Mixture-of-experts MLP (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): a router picks a few experts per token, each
// expert (a SwiGLU MLP) runs only on the tokens routed to it, and their outputs are summed weighted by the
// router's mixing weights (plus Qwen2-MoE's always-on shared expert, scaled by its own sigmoid gate).
#pragma once
#include <functional>
#include <vector>

#include "kernels/gemm.h"
#include "model/model.h"

namespace gb {

// Scratch of moe_forward, grown on demand: after the first call of a size nothing is allocated.
struct moe_scratch {
    std::vector<float> logits;    // [n][E] router logits
    std::vector<float> weights;   // [n][E] mixing weights, 0 for the experts not chosen
    std::vector<int> rows;        // [n] the rows routed to one expert
    std::vector<int> chosen;      // [k] one row's chosen experts while routing
    std::vector<float> xg;        // [n][d] those rows' inputs, gathered
    std::vector<float> gate, up;  // [n][ff] one expert's gate and up products (ff = its width)
    std::vector<float> y;         // [n][d] one expert's output for its rows
};

// weights [n][E] from logits [n][E]: the softmax over all E logits; the k experts with the largest logits keep
// theirs (ties: the lower index wins), the others get 0; with norm_topk the k kept ones are divided by their sum.
// chosen: scratch, grown to k.
void moe_route(float* weights, const float* logits, int n, int E, int k, bool norm_topk, std::vector<int>& chosen);

// One row's experts with non-zero weight, largest weight first (ties: the lower index), at most k of them:
// ids [k], vals [k]; returns how many. For displays (CLI, app) of a router row.
int moe_top(const float* weights, int E, int k, int* ids, float* vals);

// out [n][d] = the MoE MLP of xn [n][d] (the normed input) with layer lw's router and experts:
//   logits = xn W_router; weights = moe_route(logits); at_router(weights) (the forward's hook point "router":
//   interventions and hooks may change the weights in place); then for each expert e, in index order, on the
//   rows whose weight for e is not 0: out[r] += weights[r][e] * down_e(silu(x gate_e) * (x up_e));
//   finally, when the layer has a shared expert (w_up not empty): out[r] += sigmoid(x . shared_gate) *
//   down_s(silu(x gate_s) * (x up_s)) (a factor 1 without shared_gate).
// Deterministic: the same inputs give the same bits whatever rows share the call. at_router may be empty.
void moe_forward(float* out, const float* xn, int n, const layer_weights& lw, const model_config& c, moe_scratch& s,
                 gemm_scratch& g, const std::function<void(float* weights)>& at_router);

// The backward of moe_forward's experts (core/run/backward.h), from g [n][d] at its output: gx [n][d] += the
// gradient at xn through every expert on its rows (weights [n][E] as they flowed, after the router's
// interventions) and the shared expert with its gate; dw [n][E] = the gradient at those weights (0 where a weight
// is 0). Recomputes each expert's products on its rows.
void moe_experts_backward(float* gx, float* dw, const float* g, const float* xn, const float* weights, int n,
                          const layer_weights& lw, const model_config& c, moe_scratch& s, gemm_scratch& gs);
// dlogits [n][E] = the gradient at the router's logits from dw [n][E] at moe_route's weights (the chosen experts
// are a constant choice: the gradient flows through the softmax and the renormalisation only).
void moe_route_backward(float* dlogits, const float* dw, const float* logits, int n, int E, int k, bool norm_topk,
                        std::vector<int>& chosen);

} // namespace gb
