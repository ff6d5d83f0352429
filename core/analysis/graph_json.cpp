// Neuronpedia's graph JSON, written from a pruned attribution graph and read back (graph_json.h).
#include "analysis/graph_json.h"

#include <cstdio>
#include <fstream>
#include <set>

#include "util/error.h"

namespace gb {
using nlohmann::json;

namespace {

json node_json(const std::string& id, long long feature, const std::string& layer, int ctx, const std::string& type,
               const std::string& js_id) {
    return {{"node_id", id}, {"feature", feature}, {"layer", layer}, {"ctx_idx", ctx}, {"feature_type", type},
            {"token_prob", 0.0}, {"is_target_logit", false}, {"run_idx", 0}, {"reverse_ctx_idx", 0},
            {"jsNodeId", js_id}, {"clerp", ""}, {"influence", nullptr}, {"activation", nullptr}};
}

} // namespace

json neuronpedia_json(const attribution_graph& g, const prune_result& p, const tokenizer& tok, const std::string& prompt,
                      const std::string& slug, const std::string& scan, double node_threshold) {
    const int N = g.n_nodes(), nf = g.n_features(), ne = g.n_errors(), T = g.n_tokens(), L = g.n_layer;
    std::vector<json> nodes(N);
    std::vector<std::string> ids(N);
    for (int i = 0; i < N; i++) {
        if (!p.node_mask[i]) continue;
        json n;
        if (i < nf) {
            const active_feature& f = g.features[i];
            const long long cantor = (long long)(f.layer + f.index) * (f.layer + f.index + 1) / 2 + f.index;
            n = node_json(std::to_string(f.layer) + "_" + std::to_string(f.index) + "_" + std::to_string(f.pos), cantor,
                          std::to_string(f.layer), f.pos, "cross layer transcoder",
                          std::to_string(f.layer) + "_" + std::to_string(f.index) + "-0");
            n["activation"] = f.act;
        } else if (i < nf + ne) {
            const int per = T - g.first_pos, layer = (i - nf) / per, pos = (i - nf) % per + g.first_pos;
            n = node_json(std::to_string(layer) + "_-1_" + std::to_string(pos), -1, std::to_string(layer), pos,
                          "mlp reconstruction error", std::to_string(layer) + "_-1-" + std::to_string(pos));
        } else if (i < nf + ne + T) {
            const int pos = i - nf - ne, id = g.tokens[pos];
            n = node_json("E_" + std::to_string(id) + "_" + std::to_string(pos), pos, "E", pos, "embedding",
                          "E_" + std::to_string(id) + "-" + std::to_string(pos));
        } else {
            const int k = i - nf - ne - T, id = g.logit_tokens[k], pos = T - 1;
            const std::string layer = std::to_string(L + 1);
            n = node_json(layer + "_" + std::to_string(id) + "_" + std::to_string(pos), id, layer, pos, "logit",
                          "L_" + std::to_string(id) + "-" + std::to_string(pos));
            n["token_prob"] = g.logit_probs[k];
            n["is_target_logit"] = k == 0;
            char prob[32];
            std::snprintf(prob, sizeof prob, "%.3f", g.logit_probs[k]);
            n["clerp"] = "Output \"" + token_text(tok, id) + "\" (p=" + prob + ")";
        }
        if (i < nf + ne + T) n["influence"] = p.cumulative_scores[i];
        ids[i] = n["node_id"].get<std::string>();
        nodes[i] = std::move(n);
    }
    json links = json::array();
    std::vector<uint8_t> used(N, 0);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++)
            if (p.edge_mask[(size_t)r * N + c] && p.node_mask[r] && p.node_mask[c]) {
                links.push_back({{"source", ids[c]}, {"target", ids[r]}, {"weight", g.edge(r, c)}});
                used[r] = used[c] = 1;
            }
    json out_nodes = json::array();
    for (int i = 0; i < N; i++)
        if (p.node_mask[i] && (used[i] || i >= nf + ne)) out_nodes.push_back(nodes[i]);
    json prompt_tokens = json::array();
    for (int id : g.tokens) prompt_tokens.push_back(token_text(tok, id));
    json meta = {{"slug", slug}, {"scan", scan}, {"transcoder_list", json::array()}, {"prompt_tokens", prompt_tokens},
                 {"prompt", prompt}, {"node_threshold", node_threshold}, {"schema_version", 1}};
    json q = {{"pinnedIds", json::array()}, {"supernodes", json::array()}, {"linkType", "both"}, {"clickedId", ""},
              {"sg_pos", ""}};
    return {{"metadata", meta}, {"qParams", q}, {"nodes", out_nodes}, {"links", links}};
}

np_graph parse_neuronpedia(const json& j, const std::string& what) {
    auto need = [&](const json& o, const char* key, const std::string& where) -> const json& {
        if (!o.is_object() || !o.contains(key)) throw error(what + ": " + where + " has no \"" + key + "\"");
        return o[key];
    };
    auto str = [&](const json& o, const char* key, const std::string& where) {
        const json& v = need(o, key, where);
        if (!v.is_string()) throw error(what + ": " + where + "'s \"" + key + "\" is not a string");
        return v.get<std::string>();
    };
    auto num = [&](const json& o, const char* key, const std::string& where) {
        const json& v = need(o, key, where);
        if (!v.is_number()) throw error(what + ": " + where + "'s \"" + key + "\" is not a number");
        return v.get<double>();
    };
    np_graph g;
    const json& meta = need(j, "metadata", "the file");
    g.slug = meta.contains("slug") && meta["slug"].is_string() ? meta["slug"].get<std::string>() : "";
    g.scan = meta.contains("scan") && meta["scan"].is_string() ? meta["scan"].get<std::string>() : "";
    g.prompt = meta.contains("prompt") && meta["prompt"].is_string() ? meta["prompt"].get<std::string>() : "";
    if (meta.contains("node_threshold") && meta["node_threshold"].is_number()) g.node_threshold = meta["node_threshold"];
    const json& pt = need(meta, "prompt_tokens", "metadata");
    if (!pt.is_array()) throw error(what + ": metadata's \"prompt_tokens\" is not a list");
    for (const json& t : pt) {
        if (!t.is_string()) throw error(what + ": metadata's \"prompt_tokens\" holds a non-string");
        g.prompt_tokens.push_back(t.get<std::string>());
    }
    const json& nodes = need(j, "nodes", "the file");
    if (!nodes.is_array()) throw error(what + ": \"nodes\" is not a list");
    std::set<std::string> known;
    for (size_t i = 0; i < nodes.size(); i++) {
        const json& n = nodes[i];
        const std::string where = "node " + std::to_string(i);
        np_node x;
        x.node_id = str(n, "node_id", where);
        x.layer = n.contains("layer") && n["layer"].is_number() ? std::to_string(n["layer"].get<long long>()) : str(n, "layer", where);
        x.feature_type = str(n, "feature_type", where);
        x.feature = (long long)num(n, "feature", where);
        x.ctx_idx = (int)num(n, "ctx_idx", where);
        if (n.contains("jsNodeId") && n["jsNodeId"].is_string()) x.js_node_id = n["jsNodeId"];
        if (n.contains("clerp") && n["clerp"].is_string()) x.clerp = n["clerp"];
        if (n.contains("influence") && n["influence"].is_number()) x.influence = n["influence"], x.has_influence = true;
        if (n.contains("activation") && n["activation"].is_number()) x.activation = n["activation"], x.has_activation = true;
        if (n.contains("token_prob") && n["token_prob"].is_number()) x.token_prob = n["token_prob"];
        if (n.contains("is_target_logit") && n["is_target_logit"].is_boolean()) x.is_target_logit = n["is_target_logit"];
        known.insert(x.node_id);
        g.nodes.push_back(std::move(x));
    }
    const json& links = need(j, "links", "the file");
    if (!links.is_array()) throw error(what + ": \"links\" is not a list");
    for (size_t i = 0; i < links.size(); i++) {
        const std::string where = "link " + std::to_string(i);
        np_link l{str(links[i], "source", where), str(links[i], "target", where), num(links[i], "weight", where)};
        if (!known.count(l.source) || !known.count(l.target))
            throw error(what + ": " + where + " joins " + l.source + " and " + l.target + ", not both nodes");
        g.links.push_back(std::move(l));
    }
    return g;
}

np_graph read_neuronpedia(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw error("cannot open " + path);
    json j;
    try {
        j = json::parse(f);
    } catch (const json::exception& e) {
        throw error(path + ": not JSON (" + std::string(e.what()) + ")");
    }
    return parse_neuronpedia(j, path);
}

} // namespace gb
