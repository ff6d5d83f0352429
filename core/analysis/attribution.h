// Direct logit attribution: how much each head, each MLP, the embeddings and the biases write, through the
// final norm with its scale frozen, into logit(target) - logit(contrast) at one position.
#pragma once
#include <vector>

#include "model/model.h"
#include "run/ablation.h"
#include "run/record.h"

namespace gb {

struct attribution {
    int n_layer = 0, n_head = 0;
    int position = 0, target = 0, contrast = -1; // contrast -1: logit(target) alone
    std::vector<double> heads;     // [L][H] head h's output (its z times its rows of W_o)
    std::vector<double> attn_bias; // [L] the output projection's bias (0 when none)
    std::vector<double> mlp;       // [L] the MLP's output (its bias included)
    double embed = 0;              // token (+ position) embeddings
    double bias = 0;               // the final norm's bias term
    double total = 0;              // the run's own logit(target) - logit(contrast)
    bool has_attn_bias = false;    // the model has output-projection biases (Llama has none: no rows to show)
    bool has_final_bias = false;   // its final norm has a bias (a LayerNorm's; RMSNorm has none)
    double sum() const;            // of the components above (total up to float rounding)
};

// Each component c (a vector in the stream) contributes, with u = W_U[target] - W_U[contrast]:
//   LayerNorm: sum_i (c_i - mean(c)) / sigma * g_i * u_i     (sigma the final norm's, from the run)
//   RMSNorm:   sum_i c_i / rms * g_i * u_i
// and the final norm's bias adds sum_i b_i u_i. The stream is the sum of the components, so they add up to the
// run's logit difference (Gemma 2: before its final soft-cap). Where the attention's output is normed before the
// add (Gemma 2, OLMo 2), that norm's scale is frozen too: head h contributes its output times g_post / rms. r must keep z, mlp_out and the residual stream at every layer. Throws gb::error when
// the run dropped a residual add (the stream is then no sum of components) or an index is out of range.
attribution attribute(const record& r, const model& m, const ablation& ab, int target, int contrast, int position);

} // namespace gb
