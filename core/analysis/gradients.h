// Analyses on the backward pass (run/backward.h): which tokens a metric leans on (gradient x input and
// integrated gradients at the embeddings' residual point), and attribution patching: activation patching
// estimated to first order from the corrupted run's gradients (docs/interpretability.md "Gradients").
#pragma once
#include <string>
#include <vector>

#include "analysis/patching.h"
#include "model/model.h"
#include "run/ablation.h"
#include "run/backward.h"

namespace gb {

struct saliency_result {
    int n_layer = 0, n_tokens = 0, d_model = 0;
    metric_spec metric;              // its position resolved (never -1)
    double value = 0;                // the metric on the prompt
    std::vector<float> resid_grad;   // [2L+1][T][d] d metric / d the stream at each residual point
    std::vector<float> grad_x_input; // [T] sum over d of the gradient times the stream at point 0
    int steps = 0;                   // integrated gradients' steps (0: not computed)
    std::vector<float> integrated;   // [T] sum over d of x0 times the mean gradient at alpha x0, alpha = (k - 1/2) / N
    double baseline = 0;             // the metric with point 0 all zero (steps > 0)
    // An encoder–decoder (saliency_seq2seq): the same at the encoder's point 0 over the S source tokens (the
    // arrays above are the decoder's, over the target's tokens); empty for the other kinds
    int n_source = 0, source_layers = 0;
    std::vector<float> source_grad;           // [2Le+1][S][d]
    std::vector<float> source_grad_x_input;   // [S]
    std::vector<float> source_integrated;     // [S] (steps > 0)
    // metric(x0) - metric(0) - sum of integrated (and source_integrated): 0 for exact integration (the midpoint
    // rule's error otherwise)
    double completeness_gap() const;
};

// The gradients of metric on tokens under ab; with steps > 0 integrated gradients from the zero baseline too
// (steps + 1 more forward and backward passes). x0 is residual point 0 of every kind: a decoder's token (+
// position) embeddings; an encoder's embeddings after their LayerNorm (the stream its first layer reads: the sum
// before that norm would give gradient x input ~0, a LayerNorm being blind to its input's scale); an image
// classifier's [CLS] and patch embeddings plus positions. base: the forward's inputs (an image classifier's
// pixels) and interventions.
saliency_result saliency(const model& m, const std::vector<int>& tokens, const metric_spec& metric, int steps,
                         const ablation& ab = {}, const forward_options& base = {});
// An encoder–decoder: the decoder's metric on target (its input, decoder start first) given source. Gradient x
// input at both stacks' point 0 (the source's and the target prefix's embeddings, after BART's and mBART's
// embedding LayerNorm); integrated gradients scale both together from zero, so that both sums close the gap.
saliency_result saliency_seq2seq(const model& m, const std::vector<int>& source, const std::vector<int>& target,
                                 const metric_spec& metric, int steps, const ablation& ab = {});

// The two runs of attribution patching and edge attribution (circuit.h): the corrupted prompt's forward, keeping
// backward_keep and clean_keep's points, with its gradients (readers: backward's), then the clean prompt's keeping
// clean_keep. Their positions before the first that differs are the same tokens in a causal model, so the clean
// run computes only the positions from there, on the corrupted run's keys and values, and takes its rows before
// it from rx. ab is in force in both; their logits are the metric's rows (rc's [1][ids]). clean_keep may not ask
// for patterns (their rows are not the positions').
void corrupt_and_clean_runs(record& rc, record& rx, gradients& g, const model& m, const std::vector<int>& clean,
                            const std::vector<int>& corrupt, const metric_spec& metric, const ablation& ab,
                            const record_request& clean_keep, bool readers = false);

// Attribution patching. The estimate of patching (point, position) or a head: corrupt + (clean activation -
// corrupt activation) . d metric / d activation, the gradient taken on the corrupted run. Metric: logit(target)
// - logit(contrast) (logit(target) without a contrast) at the last position, as activation_patching's.
// The arrays are patch_result's: resid [2L+1][T], heads [L][H] (a head: its z at every position), normalized.
patch_result attribution_patching(const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                                  int target, int contrast, const ablation& ab = {});

// How far an estimate is from the exact values, over the entries finite in both.
struct estimate_error {
    double max = 0, rms = 0; // of estimate - exact
    double correlation = 0;  // Pearson's; NaN when either side is constant
};
estimate_error compare_estimate(const std::vector<float>& estimate, const std::vector<float>& exact);

} // namespace gb
