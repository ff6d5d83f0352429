// Attribution graphs (issue 51; docs/graphs.md): which transcoder features, through which paths, produce the next
// token. Nodes, in order: the selected active features sorted by (layer, position, index); error nodes layer-major
// then position; token nodes; logit nodes (the fewest top tokens whose probabilities reach logit_prob, at most
// max_logits, by decreasing probability). With a BOS, position 0 carries no feature or error node.
// The adjacency A [N][N] (rows targets, columns sources) is the direct effect through the frozen replacement model
// (core/analysis/replacement.h): a feature reads its encoder row at its input, a logit its demeaned unembedding
// row at the final norm's output of the last position; a feature writes activation x decoder row(s), an error node
// its error vector, a token its embedding.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/replacement.h"
#include "io/transcoders.h"
#include "model/model.h"

namespace gb {

struct graph_options {
    int max_logits = 10;
    double logit_prob = 0.95;
    int max_feature_nodes = 8192; // more active features than this: the ones of highest estimated influence
    int batch = 256;              // reads sent back together (memory: batch x T x d floats, a few times)
    bool bos = false;             // tokens[0] is a BOS
    std::function<void(const std::string& stage, int done, int total)> progress; // may be empty
    std::function<bool()> cancelled;                                            // true: throws gb::cancelled
};

struct attribution_graph {
    std::vector<int> tokens;          // [T]
    int n_layer = 0, first_pos = 0;   // first_pos: 1 with a BOS
    int n_active = 0;                 // active features before selection
    std::vector<active_feature> features; // [n_f] the selected ones, sorted by (layer, pos, index)
    std::vector<int> logit_tokens;    // [n_l] by decreasing probability
    std::vector<float> logit_probs;   // [n_l]
    std::vector<float> adjacency;     // [N][N] rows targets, columns sources
    double seconds_forward = 0, seconds_rows = 0;
    size_t bytes_rows = 0;            // the row buffer's memory (the largest allocation)
    int n_tokens() const { return (int)tokens.size(); }
    int n_features() const { return (int)features.size(); }
    int n_errors() const { return n_layer * (n_tokens() - first_pos); }
    int n_logits() const { return (int)logit_tokens.size(); }
    int n_nodes() const { return n_features() + n_errors() + n_tokens() + n_logits(); }
    int error_index(int layer, int pos) const { return n_features() + layer * (n_tokens() - first_pos) + pos - first_pos; }
    int token_index(int pos) const { return n_features() + n_errors() + pos; }
    int logit_index(int i) const { return n_features() + n_errors() + n_tokens() + i; }
    float edge(int target, int source) const { return adjacency[(size_t)target * n_nodes() + source]; }
};

// The logit nodes from logits [V] as circuit-tracer picks them: the max_logits most probable tokens, cut after the
// first whose cumulative probability reaches logit_prob.
void pick_logits(std::vector<int>& ids, std::vector<float>& probs, const float* logits, int V, int max_logits,
                 double logit_prob);

// The graph of tokens (bos: tokens[0] is a BOS) on m with t. Throws gb::error as build_replacement does, and
// gb::cancelled when opt.cancelled says so.
attribution_graph build_graph(const model& m, const transcoder_set& t, const std::vector<int>& tokens,
                              const graph_options& opt);
// The same from a replacement already built (tests, interventions).
attribution_graph build_graph(const model& m, const transcoder_set& t, const replacement& r, const graph_options& opt);

// Head loadings of g's edge from node source to node target (replacement.h head_loadings): [L][H + 1]. r: the
// replacement g was built from. Throws gb::error for a target that reads nothing (an error or token node) or a
// node index outside g.
std::vector<double> edge_head_loadings(const model& m, const transcoder_set& t, const replacement& r,
                                       const attribution_graph& g, int target, int source);

} // namespace gb
