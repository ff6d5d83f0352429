// The backward pass: the gradient of a metric of one position's logits with respect to the residual stream at
// every residual point and each head's z, by hand (no autodiff), as the derivative of what eval computes with
// the weights as its products multiply by them. Every kind (the kind table's FEATURE_GRADIENTS): decoder-only
// models, dense and MoE (an MoE layer's gradient passes through the experts each token chose and their weights);
// encoders and image classifiers through backward (backward_stack.cpp); encoder–decoders through
// run_seq2seq_gradients, both stacks.
// It reads a record the forward made (backward_keep says what it must hold) and recomputes the few intermediates
// that are not kept: the q/k norms' inputs, a post norm's input, the final norm and the metric's logits (a
// record without the MLP's pre-activations has those recomputed too; docs/interpretability.md "Gradients").
//
// Interventions stay in force: what a ZERO or SET fixes is a constant, so no gradient flows back through it
// (the gradient at the point itself is still reported); an identity norm is the identity here too; a dropped
// residual add carries no gradient along the skip path. Hooks cannot be differentiated and are refused.
#pragma once
#include <string>
#include <vector>

#include "run/ablation.h"
#include "run/forward.h"
#include "run/record.h"
#include "run/seq2seq.h"

namespace gb {

// What is differentiated, from the logits of one position: logit[target] - logit[contrast] (LOGIT_DIFF),
// logit[target] (LOGIT) or log softmax(logits)[target] (LOGPROB). Gemma 2's logits are the soft-capped ones.
struct metric_spec {
    enum kind_t { LOGIT_DIFF, LOGIT, LOGPROB } kind = LOGIT_DIFF;
    int target = 0;
    int contrast = -1; // LOGIT_DIFF only
    int position = -1; // -1: the last
};
// "logit-diff", "logit", "logprob"; parse throws gb::error listing them.
const char* metric_name(metric_spec::kind_t k);
metric_spec::kind_t parse_metric(const std::string& name);
// The metric on one position's logits [V] ("logit(a) - logit(b)" etc. in label, when not null).
double metric_of(const float* logits, int V, const metric_spec& metric, std::string* label = nullptr);
// A logit metric's tokens, as forward_options::logit_ids (target, then the contrast of a difference), and the
// metric on the logits a forward with them gave ([ids]). Not for LOGPROB, which reads every logit.
std::vector<int> metric_ids(const metric_spec& metric);
double metric_of_ids(const float* logits, const metric_spec& metric);

// Where the metric is read, by kind: a decoder's position (default the last); an encoder's masked-LM logits at a
// position (default its first [MASK], as fill mask reads); an image classifier's class logits at [CLS] (position 0,
// the only one); an encoder–decoder's decoder logits at a target position (default the last), differentiated back
// through the cross-attention into the encoder (run_seq2seq_gradients).

// d metric / d (a tensor as it flowed on: after its point's interventions).
struct gradients {
    int n_layer = 0, n_tokens = 0, d_model = 0, n_head = 0, d_head = 0;
    int position = 0;          // the metric's position
    double metric_value = 0;   // the metric on the forward's logits at that position
    std::vector<float> resid;  // [2L+1][T][d] at each residual point, numbered as record::resid
    std::vector<float> z;      // [L][T][H*dh] at each head's z (before W_o)
    // With readers asked (edge attribution, analysis/circuit.h): the gradient at the stream as each sublayer
    // reads it, through that reader alone. A sum over the readers after a residual point (and the final norm's,
    // resid at point 2L) gives the stream's gradient there, when no intervention drops the skip path.
    std::vector<float> head_in; // [L][H][T][d] at resid_pre of layer l through head h's own q, k and v: its z's
                                // gradient back through its pattern, values, RoPE and q/k norms, W_qkv and the norm
    std::vector<float> mlp_in;  // [L][T][d] at the stream the MLP's norm read, through the MLP alone
    bool mlp_reads_layer_input = false; // parallel blocks: the MLP read resid_pre (not resid_mid), beside attention
    const float* resid_at(int point) const { return resid.data() + (size_t)point * n_tokens * d_model; }
    const float* z_at(int layer) const { return z.data() + (size_t)layer * n_tokens * n_head * d_head; }
    // An encoder–decoder (run_seq2seq_gradients): the same of its encoder stack, over the S source positions;
    // resid and z above are the decoder's. Empty for the other kinds.
    int n_source = 0, source_layers = 0;
    std::vector<float> source_resid; // [2Le+1][S][d]
    std::vector<float> source_z;     // [Le][S][H*dh]
    const float* source_resid_at(int point) const { return source_resid.data() + (size_t)point * n_source * d_model; }
};

// What the forward must keep for the backward: the residual stream at every point and resid_pre at every layer,
// per layer q, k, v, pattern, z, mlp_in, mlp_post and the pre-activations (dense) or the router's weights (MoE),
// and attn_in.
record_request backward_keep(const model_config& c);

// out = the gradients of metric on the run fwd recorded (with at least backward_keep). opt: the options the
// forward ran with; its interventions are in force. Throws gb::error for a model whose kind offers no gradients,
// hooks in opt, a record without what backward_keep asks for, or a metric outside the vocabulary or positions.
// readers: also fill head_in and mlp_in (one more attention backward per head).
void backward(gradients& out, const model& m, const record& fwd, const metric_spec& metric, const forward_options& opt,
              bool readers = false);

// The forward (keeping backward_keep, ab's interventions before opt's) and the backward of tokens. fwd, when not
// null, gets the forward's record.
void run_gradients(gradients& out, const model& m, const std::vector<int>& tokens, const metric_spec& metric,
                   const ablation& ab = {}, const forward_options& opt = {}, record* fwd = nullptr,
                   bool readers = false);

// An encoder–decoder: the forward of both stacks (the encoder on source with ab's part and source_opt's
// interventions, the decoder on target with ab's part and opt's), then the backward from the decoder's metric
// through its layers and cross-attention into the encoder, down to the source embeddings (out.source_resid).
// fwd, when not null, gets both records. Throws gb::error as backward does, and for an empty or too-long source or
// target.
void run_seq2seq_gradients(gradients& out, const model& m, const std::vector<int>& source, const std::vector<int>& target,
                           const metric_spec& metric, const ablation& ab = {}, const forward_options& opt = {},
                           const forward_options& source_opt = {}, seq2seq_record* fwd = nullptr);

} // namespace gb
