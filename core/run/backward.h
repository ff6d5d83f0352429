// The backward pass: the gradient of a metric of the logits with respect to every hook point, by hand, exact to
// the forward's arithmetic (the derivative of what eval computes, with the weights as its products multiply by
// them). It reads a record the forward made (what backward_keep asks for) and recomputes the few intermediates
// that are not hook points (docs/interpretability.md "Gradients").
//
// Interventions stay in force: a ZERO or SET makes the part it covers a constant (no gradient flows back through
// it, though the gradient at the point itself is reported), an identity norm is the identity here too, a dropped
// residual add carries no gradient along the skip path. Hooks cannot be differentiated and are refused.
#pragma once
#include <cstdint>
#include <vector>

#include "run/ablation.h"
#include "run/forward.h"
#include "run/hooks.h"
#include "run/record.h"
#include "run/seq2seq.h"

namespace gb {

// What is differentiated, from the logits of one position: logit[target] - logit[contrast] (LOGIT_DIFF),
// logit[target] (LOGIT) or log softmax(logits)[target] (LOGPROB). Gemma 2's logits are the soft-capped ones, an
// image classifier's are its classes, an encoder's the masked-LM head's at that position.
struct metric_spec {
    enum kind_t { LOGIT_DIFF, LOGIT, LOGPROB } kind = LOGIT_DIFF;
    int target = 0;
    int contrast = -1; // LOGIT_DIFF only
    int position = -1; // -1: the last
};

// Which hook points' gradients to keep (the residual stream's always are).
struct gradient_request {
    uint32_t points = 0;         // hook_bit(p): p at every layer in `layers`
    std::vector<uint8_t> layers; // [L] 1 = kept; empty = every layer
    bool pixels = false;         // vision models: the gradient at the image's pixels
};

// d metric / d (a tensor as it flowed on: after its point's interventions), in the tensors' own layouts.
struct gradients {
    int n_layer = 0, n_tokens = 0, d_model = 0;
    double metric_value = 0;        // the metric on the forward's logits
    std::vector<float> resid;       // [2L+1][T][d] at each residual point, numbered as record::resid
    std::vector<float> embed;       // [T][d] at each position's token embedding row (before the family's scale,
                                    // the positions and an encoder's embedding norm; a vision model: its rows of
                                    // [CLS] and the patch products)
    // point p: [L] (final points: [1]) one layer's gradient laid out as the record keeps p (hooks.h, n = T;
    // the final points [T][width], zero but at the metric's position); empty where not asked for
    std::vector<std::vector<float>> at[HOOK_COUNT];
    std::vector<float> pixels;      // vision, when asked: [C][S][S]
    std::vector<float> source;      // an encoder–decoder's decoder: at the encoder's output [S][d]
    const float* get(hook_point p, int layer) const; // nullptr when not kept
    const float* resid_at(int point) const { return resid.data() + (size_t)point * n_tokens * d_model; }
};

// What the forward must keep for the backward (budget none): the residual stream at every point, and per layer
// attn_in, q, k, v, pattern and z; mlp_in and (MoE) the router; Post-LN models attn_out and mlp_out (the sums
// their norms read); encoder–decoders' decoders the cross-attention's cross_in, cross_pattern, cross_z and
// cross_out. Recomputed from those: the norms' statistics, the q|k|v product before the q/k norms, the attention
// output before a post norm, the MLP's pre-activations (one product each), every expert chosen, the final norm.
// The record must hold the logits of the metric's position (the last, or all_logits).
record_request backward_keep(const model_config& c);
// The metric's value on a record's logits (what backward reports as metric_value).
double metric_value(const record& fwd, const metric_spec& metric, const model_config& c);

// out = the gradients of metric on the run fwd recorded. opt: the options the forward ran with (interventions,
// pixels for a vision model, the source of an encoder–decoder's decoder): the same interventions are in force.
// Throws gb::error for a record without what backward_keep asks for, hooks in opt, or a metric outside the
// vocabulary or the positions.
void backward(gradients& out, const model& m, const record& fwd, const metric_spec& metric, const forward_options& opt,
              const gradient_request& want = {});
// An encoder–decoder: the decoder's backward, then the encoder's from the gradient at its output (the source
// embeddings at enc.resid point 0). fwd from run_seq2seq(fwd, m, source, target, ab, opt) with opt.keep =
// backward_keep of each stack (backward_keep_seq2seq), the same ab and opt here.
void backward_seq2seq(gradients& dec, gradients& enc, const model& m, const seq2seq_record& fwd,
                      const metric_spec& metric, const ablation& ab, const forward_options& opt,
                      const gradient_request& want = {});
// What both stacks must keep: backward_keep of the decoder's config and of the encoder's, merged.
record_request backward_keep_seq2seq(const model& m);

} // namespace gb
