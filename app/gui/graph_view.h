// The Graph tab's picture as data (graph_view.cpp): the kept nodes and links of an attribution graph, from the
// shown run's graph (graph_analysis.h) or from a Neuronpedia JSON file (core/analysis/graph_json.h), so that both
// are drawn, pinned, grouped and exported the same way; where each node sits; the paths through pinned nodes; the
// picture as SVG.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/attribution_graph.h"
#include "analysis/graph_prune.h"
#include "model/model.h"

namespace gbui {

enum graph_node_kind { GNODE_FEATURE, GNODE_ERROR, GNODE_TOKEN, GNODE_LOGIT };

struct graph_node {
    std::string id;              // Neuronpedia's node id: "3_438_7", "2_-1_4" (error), "E_262_1", "7_6342_7" (logit)
    graph_node_kind kind = GNODE_FEATURE;
    int layer = 0, pos = 0;      // a logit: layer n_layer (the top row), pos the last
    long long feature = -1;      // a feature's index; a token's or a logit's token id
    float activation = 0;        // a feature's (in the unedited run)
    float act_after = 0;         // a feature's in the edited run (activation when nothing is edited)
    float size = 0;              // in [0, 1]: the node's influence over the largest feature's (drawn as sqrt)
    float prob = 0, prob_after = 0; // a logit's probability, and in the edited run
    std::string label;           // "L3 #438 @7 'of'", "error L2 @4 'Tower'", "token ' Eiffel' @1", "logit ' Paris'"
    int index = -1;              // its index in the built graph's adjacency; -1: opened from a file
};

struct graph_link {
    int target = 0, source = 0;  // indices into graph_view::nodes
    float weight = 0;            // the direct effect (scaled by the source's activation change under edits)
};

struct graph_supernode {
    std::string name;
    std::vector<std::string> members; // node ids
};

struct graph_view {
    int n_layer = 0;
    std::vector<std::string> tokens;     // [T] the prompt's pieces as the columns name them
    std::vector<graph_node> nodes;       // features (by layer, pos), errors, tokens, logits
    std::vector<graph_link> links;       // weakest first (drawn so: the strong ones on top)
    float max_weight = 0;                // the largest |weight|
    std::string file;                    // "" : the shown run's graph; else the file it was read from
    std::string prompt, scan;            // a file's metadata
    std::vector<std::string> pinned;     // a file's qParams.pinnedIds
    std::vector<graph_supernode> supernodes; // a file's qParams.supernodes
    int find(const std::string& id) const; // the node with that id, -1: none
};

// The kept nodes of g (those with a kept link, and every token and logit) and its kept edges, as
// neuronpedia_json writes them. pieces: the tokens' text; labels [N] as graph_analysis names them; acts_after
// [n_features of g] (empty: no edit) and probs_after [n_logits] (empty: none) the edited run's.
graph_view view_of_graph(const gb::attribution_graph& g, const gb::prune_result& p,
                         const std::vector<std::string>& pieces, const std::vector<std::string>& labels,
                         const std::vector<float>& acts_after, const std::vector<float>& probs_after);

// A graph read from Neuronpedia's JSON (ours, circuit-tracer's, Neuronpedia's), checked against the model it is to
// be shown over: throws gb::error (one line naming the file) for a node of a layer the model does not have, a token
// outside its vocabulary, a position outside the prompt, or an id we cannot read. Features are sized by
// 1 - their cumulative influence (what the file keeps); qParams' pins and supernodes are kept.
graph_view view_of_file(const nlohmann::json& j, const std::string& path, const gb::model& m);

// The tab's pins and supernodes into Neuronpedia's qParams (pinnedIds; supernodes as [name, id, id, ...]) of j,
// a graph core's neuronpedia_json wrote.
void add_qparams(nlohmann::json& j, const std::vector<std::string>& pinned, const std::vector<graph_supernode>& groups);

// Where each node is drawn in a w x h picture: rows from the top, the logits, layers L-1 .. 0, the tokens; a
// cell's features and error side by side. at [nodes] (x, y) pairs; r [nodes] radii; unit: the smallest radius.
struct graph_place {
    std::vector<float> x, y, r;
    float row_h = 0, col_w = 0;
};
graph_place place_view(const graph_view& v, float w, float h, float unit);

// The links on a path through any pinned node (upstream into it or downstream from it): [links] 0/1.
std::vector<uint8_t> pinned_paths(const graph_view& v, const std::vector<std::string>& pinned);

// The picture as SVG, w x h plus margins for the row labels, the tokens and the logits' words: as the tab draws it
// (without the edits' marks), pinned nodes ringed, supernodes boxed and named, each node's label its tooltip.
std::string view_svg(const graph_view& v, const std::vector<std::string>& pinned,
                     const std::vector<graph_supernode>& groups, float w, float h);

} // namespace gbui
