// Influence, pruning and scores of an attribution graph, as circuit-tracer's graph.py defines them, in double:
// - the row-normalised |A| (each row divided by its sum, at least 1e-10);
// - node influence: w Â + w Â² + ... (w: the logit nodes' probabilities, 0 elsewhere), summed until a term is zero;
// - the node cut-off: the score at which the cumulative sum of the sorted scores reaches node_threshold of their
//   total (never below the smallest non-zero score); tokens and logits always kept;
// - edge scores: the pruned matrix row-normalised, times each target's influence (+ its logit weight); the edge
//   cut-off likewise with edge_threshold;
// - then features and errors without a kept outgoing edge, and features without a kept incoming edge, are dropped,
//   and their edges with them, until nothing changes;
// - the cumulative score of each node: the running sum of the sorted influences over their total, at its rank;
// - replacement score: token influence / (token + error influence); completeness score: Σ (1 - the error share of
//   each row of Â) (influence + logit weight) / Σ (influence + logit weight).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gb {

struct graph_layout { // the node ranges of an adjacency [N][N]: features, errors, tokens, logits in that order
    int n_features = 0, n_errors = 0, n_tokens = 0, n_logits = 0;
    int n() const { return n_features + n_errors + n_tokens + n_logits; }
};

struct prune_result {
    std::vector<double> node_influence;    // [N]
    std::vector<uint8_t> node_mask;        // [N]
    std::vector<uint8_t> edge_mask;        // [N][N]
    std::vector<double> cumulative_scores; // [N]
    double node_cutoff = 0, edge_cutoff = 0;
    double replacement_score = 0, completeness_score = 0;
};

// w Â + w Â² + ... for A [N][N], w [N], Â the row-normalised |A| over the kept nodes (keep [N]; empty: all), never
// held whole (each row's divisor in div [N], as normalised); throws gb::error after 1000 terms without reaching
// zero (a cycle).
std::vector<double> influence(const float* A, int N, const std::vector<double>& w, const std::vector<uint8_t>& keep,
                              std::vector<double>* div = nullptr);
// The score at which the cumulative sum of scores sorted (largest first) reaches threshold of their total.
double find_threshold(std::vector<double> scores, double threshold);

// Everything above on A [N][N] laid out as lay says. Memory: N² bytes of edge mask and the kept edges' scores
// beside A. Throws gb::error for a threshold outside [0, 1].
prune_result prune_graph(const float* A, const graph_layout& lay, const std::vector<float>& logit_probs,
                         double node_threshold = 0.8, double edge_threshold = 0.98);

} // namespace gb
