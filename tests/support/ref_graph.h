// Test support for attribution graphs (tests/test_attribution_graph.cpp): random transcoder sets, and a plain
// double-precision reference of the frozen replacement model written from the definitions (docs/graphs.md), not
// from core/analysis: it runs the replacement model forward, affine, with every constant (biases, position
// embeddings, b_dec, skips, the features and errors that are not nodes) and each node's write included or not,
// so a column of the adjacency is what removing that source's write changes in every target's read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/attribution_graph.h"
#include "io/transcoders.h"
#include "model/model.h"

struct tc_spec {
    int n_layer = 2, d_model = 16, d_tc = 24;
    bool cross = false, skip = false;
    gb::sae_arch arch = gb::SAE_RELU;
    int k = 4;          // TopK
    float bias = -0.4f; // b_enc: about a third of the features active
    uint32_t seed = 1;
};
gb::transcoder_set random_transcoders(const tc_spec& s);

// The reference of one graph's prompt: activations, errors and the reads of the targets.
struct ref_graph {
    std::vector<gb::active_feature> active; // sorted by (layer, pos, index), none before first_pos
    std::vector<double> A;                  // [N][N] as g numbers its nodes: reads(all) - reads(all but s)
    std::vector<double> reads_all;          // [N] each target's read with every write (0 for errors and tokens)
    std::vector<double> true_reads;         // [N] the model's own: features W_enc x + b_enc from the run, logits
                                            // logit - mean logit
};
// g: the graph under test (its nodes: which features are nodes, which logits); tokens with bos as it was built.
ref_graph reference_graph(const gb::model& m, const gb::transcoder_set& t, const std::vector<int>& tokens, bool bos,
                          const gb::attribution_graph& g);

// circuit-tracer's pruning written another way: influence as w Â (I - Â)^-1 by Gauss-Jordan elimination.
struct ref_prune {
    std::vector<double> influence, cumulative;
    std::vector<uint8_t> node_mask, edge_mask;
    double node_cutoff = 0, edge_cutoff = 0, replacement = 0, completeness = 0;
};
ref_prune reference_prune(const std::vector<float>& A, int nf, int ne, int nt, int nl, const std::vector<float>& probs,
                          double node_threshold, double edge_threshold);
