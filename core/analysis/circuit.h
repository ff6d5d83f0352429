// Circuits: a graph of the model's components (the embeddings, each attention head, each MLP, the logits) whose
// edges are scored by edge attribution patching, and how much of the clean answer the top edges' nodes keep when
// every other node is patched to its corrupted value (docs/interpretability.md "Circuits").
#pragma once
#include <string>
#include <vector>

#include "model/model.h"
#include "run/ablation.h"
#include "run/hooks.h"

namespace gb {

struct circuit_node {
    enum kind_t { EMBED, HEAD, MLP, LOGITS } kind = EMBED;
    int layer = -1, head = -1; // head: its layer and head; MLP: its layer; embeddings and logits: -1
    std::string id;            // "embed", "L3.H5", "L3.MLP", "logits"
    double score = 0;          // a component: the sum of its outgoing edges' scores (its attribution-patching
                               // estimate); the logits: the sum of their incoming ones
};
const char* circuit_kind_name(circuit_node::kind_t k); // "embed", "head", "mlp", "logits"

struct circuit_edge {
    int from = 0, to = 0; // node indices, from upstream to downstream
    double score = 0;     // (clean output of from - corrupt output of from) . d metric / d (input of to), corrupt run
};

// Nodes in order: the embeddings, then per layer its heads and its MLP, then the logits.
struct circuit_result {
    int n_layer = 0, n_head = 0, n_tokens = 0, d_model = 0, d_head = 0;
    int target = 0, contrast = -1;
    double clean = 0, corrupt = 0;       // the metric on each prompt
    bool mlp_reads_layer_input = false;  // parallel blocks: layer l's heads do not feed its MLP
    std::vector<circuit_node> nodes;     // [1 + L*(H+1) + 1]
    std::vector<circuit_edge> edges;     // every edge, by |score|, largest first
    // the corrupted run's node outputs, which a patched node is set to (SET values; the interventions point here)
    std::vector<float> corrupt_embed;    // [T][d] the stream at point 0
    std::vector<float> corrupt_z;        // [L][H][T][dh] each head's z
    std::vector<float> corrupt_mlp;      // [L][T][d] mlp_out
    double ms = 0;
    int node_of_head(int layer, int head) const { return 1 + layer * (n_head + 1) + head; }
    int node_of_mlp(int layer) const { return 1 + layer * (n_head + 1) + n_head; }
};

// The graph for patching corrupt into clean (same length; check_patch_prompts), metric logit(target) -
// logit(contrast) (logit(target) without a contrast) at the last position, ab in force in both runs.
// Outputs: the embeddings' stream at point 0, a head's head_out slice (its z times its rows of W_o; in families
// with a norm after the attention, Gemma 2 and OLMo 2, that is before the norm, so the estimate is first order
// only up to that norm's scale), an MLP's mlp_out. Inputs: a head reads the stream at its layer's resid_pre
// through its own q, k and v; an MLP the stream its norm reads; the logits the final stream (gradients::head_in,
// mlp_in and the residual gradient at point 2L). Cost: two forwards and one backward with an attention backward
// per head. Throws gb::error for a kind without FEATURE_GRADIENTS.
circuit_result circuit_scores(const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                              int target, int contrast, const ablation& ab = {});

// [nodes] 1 for the nodes the top n_edges edges touch (the logits always).
std::vector<unsigned char> circuit_members(const circuit_result& r, int n_edges);

// The patches that keep only the members: SET of every other head's z, MLP's mlp_out and (when it is out) the
// embeddings' stream to the corrupted run's values. They point into r, which must outlive the runs.
std::vector<intervention> circuit_interventions(const circuit_result& r, const std::vector<unsigned char>& members);

// The metric on the clean prompt with those patches (and ab's) in force: one forward.
double circuit_metric(const model& m, const circuit_result& r, const std::vector<int>& clean,
                      const std::vector<unsigned char>& members, const ablation& ab = {});
// (circuit_metric - corrupt) / (clean - corrupt); NaN when clean == corrupt.
double circuit_faithfulness(const circuit_result& r, double metric);

} // namespace gb
