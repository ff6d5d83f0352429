// Neuronpedia's attribution-graph JSON (what circuit-tracer's create_graph_files writes and Neuronpedia shows):
// metadata (slug, scan, transcoder_list, prompt_tokens, prompt, node_threshold, schema_version), qParams
// (pinnedIds, supernodes, linkType, clickedId, sg_pos), nodes and links. Node ids: features {layer}_{index}_{pos},
// errors {layer}_-1_{pos}, tokens E_{token id}_{pos}, logits {L+1}_{token id}_{pos}; a node's influence is its
// cumulative score. Only the pruned graph is written: kept nodes with a kept edge, and every token and logit.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/attribution_graph.h"
#include "analysis/graph_prune.h"
#include "tokenizer/tokenizer.h"

namespace gb {

struct np_node {
    std::string node_id, layer, feature_type, js_node_id, clerp;
    long long feature = 0;
    int ctx_idx = 0;
    double influence = 0, activation = 0, token_prob = 0;
    bool has_influence = false, has_activation = false, is_target_logit = false;
};
struct np_link {
    std::string source, target;
    double weight = 0;
};
struct np_graph {
    std::string slug, scan, prompt;
    std::vector<std::string> prompt_tokens;
    double node_threshold = 0;
    std::vector<np_node> nodes;
    std::vector<np_link> links;
};

// The pruned graph as Neuronpedia's JSON. tok: the tokens' text.
nlohmann::json neuronpedia_json(const attribution_graph& g, const prune_result& p, const tokenizer& tok,
                                const std::string& prompt, const std::string& slug, const std::string& scan,
                                double node_threshold);
// Reads that JSON (ours or circuit-tracer's / Neuronpedia's). Throws gb::error naming the file and the missing or
// ill-typed key, or a link whose end is no node.
np_graph read_neuronpedia(const std::string& path);
np_graph parse_neuronpedia(const nlohmann::json& j, const std::string& what);

} // namespace gb
