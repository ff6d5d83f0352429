// The Graph tab's picture as data (graph_view.h): built from the shown run's pruned graph or from a Neuronpedia
// JSON file, placed in rows and columns, and the paths through pinned nodes.
#include "graph_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "analysis/graph_json.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gbui {

int graph_view::find(const std::string& id) const {
    for (size_t i = 0; i < nodes.size(); i++)
        if (nodes[i].id == id) return (int)i;
    return -1;
}

// ---- from the shown run's graph ----

// A node's Neuronpedia id (graph_json.h's numbering)
static std::string node_id(const gb::attribution_graph& g, int i) {
    const int nf = g.n_features(), ne = g.n_errors(), T = g.n_tokens();
    if (i < nf) {
        const gb::active_feature& f = g.features[i];
        return std::to_string(f.layer) + "_" + std::to_string(f.index) + "_" + std::to_string(f.pos);
    }
    if (i < nf + ne) {
        const int per = T - g.first_pos;
        return std::to_string((i - nf) / per) + "_-1_" + std::to_string((i - nf) % per + g.first_pos);
    }
    if (i < nf + ne + T) return "E_" + std::to_string(g.tokens[i - nf - ne]) + "_" + std::to_string(i - nf - ne);
    return std::to_string(g.n_layer + 1) + "_" + std::to_string(g.logit_tokens[i - nf - ne - T]) + "_" + std::to_string(T - 1);
}

graph_view view_of_graph(const gb::attribution_graph& g, const gb::prune_result& p, const std::vector<std::string>& pieces,
                         const std::vector<std::string>& labels, const std::vector<float>& acts_after,
                         const std::vector<float>& probs_after) {
    const int N = g.n_nodes(), nf = g.n_features(), ne = g.n_errors(), T = g.n_tokens();
    graph_view v;
    v.n_layer = g.n_layer;
    v.tokens = pieces;
    v.tokens.resize(T, "?");
    // kept nodes with a kept edge between kept nodes, and every token and logit (as neuronpedia_json writes them)
    std::vector<uint8_t> used(N, 0);
    for (int t = 0; t < N; t++)
        for (int s = 0; s < N; s++)
            if (p.edge_mask[(size_t)t * N + s] && p.node_mask[t] && p.node_mask[s]) used[t] = used[s] = 1;
    double top = 0;
    for (int i = 0; i < nf; i++) top = std::max(top, p.node_influence[i]);
    std::vector<int> at(N, -1);
    for (int i = 0; i < N; i++) {
        if (!p.node_mask[i] || (!used[i] && i < nf + ne)) continue;
        graph_node n;
        n.id = node_id(g, i), n.index = i, n.label = labels[i];
        if (i < nf) {
            const gb::active_feature& f = g.features[i];
            n.kind = GNODE_FEATURE, n.layer = f.layer, n.pos = f.pos, n.feature = f.index, n.activation = f.act;
            n.act_after = acts_after.empty() ? f.act : acts_after[i];
            n.size = top > 0 ? (float)(p.node_influence[i] / top) : 0;
        } else if (i < nf + ne) {
            const int per = T - g.first_pos;
            n.kind = GNODE_ERROR, n.layer = (i - nf) / per, n.pos = (i - nf) % per + g.first_pos;
        } else if (i < nf + ne + T) {
            n.kind = GNODE_TOKEN, n.layer = -1, n.pos = i - nf - ne, n.feature = g.tokens[n.pos];
        } else {
            const int k = i - nf - ne - T;
            n.kind = GNODE_LOGIT, n.layer = g.n_layer, n.pos = T - 1, n.feature = g.logit_tokens[k];
            n.prob = g.logit_probs[k], n.prob_after = probs_after.empty() ? n.prob : probs_after[k];
        }
        at[i] = (int)v.nodes.size();
        v.nodes.push_back(std::move(n));
    }
    for (int t = 0; t < N; t++)
        for (int s = 0; s < N; s++)
            if (p.edge_mask[(size_t)t * N + s] && at[t] >= 0 && at[s] >= 0) {
                float w = g.edge(t, s);
                // a feature's direct effects are its activation times fixed vectors in the frozen model: under an
                // edit they scale with its new activation
                if (s < nf && !acts_after.empty() && g.features[s].act != 0) w *= acts_after[s] / g.features[s].act;
                v.links.push_back({at[t], at[s], w});
            }
    std::sort(v.links.begin(), v.links.end(), [](const graph_link& a, const graph_link& b) { return std::fabs(a.weight) < std::fabs(b.weight); });
    for (const graph_link& l : v.links) v.max_weight = std::max(v.max_weight, std::fabs(l.weight));
    return v;
}

// ---- from a file ----

// "a_b_c" into its three parts; false when it has another shape
static bool split_id(const std::string& id, std::string& a, std::string& b, std::string& c) {
    const size_t u1 = id.find('_'), u2 = u1 == std::string::npos ? u1 : id.find('_', u1 + 1);
    if (u2 == std::string::npos || id.find('_', u2 + 1) != std::string::npos) return false;
    a = id.substr(0, u1), b = id.substr(u1 + 1, u2 - u1 - 1), c = id.substr(u2 + 1);
    return true;
}

static long long id_number(const std::string& s, const std::string& what) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) throw gb::error(what);
    return v;
}

// One node of a file, checked against the model (L layers, V tokens) and the prompt's T positions.
static graph_node file_node(const gb::np_node& x, const std::string& path, const gb::model& m, int T) {
    const int L = m.config.n_layer, V = m.config.vocab_size;
    const std::string where = path + ": node " + x.node_id;
    std::string a, b, c;
    if (!split_id(x.node_id, a, b, c)) throw gb::error(where + ": not an id of the form LAYER_INDEX_POSITION");
    graph_node n;
    n.id = x.node_id;
    n.pos = x.ctx_idx;
    if (n.pos < 0 || n.pos >= T) throw gb::error(where + ": position " + std::to_string(n.pos) + " is outside the prompt's " + std::to_string(T) + " tokens");
    const std::string bad = where + ": not a number in its id";
    if (x.feature_type == "embedding") {
        n.kind = GNODE_TOKEN, n.layer = -1, n.feature = id_number(b, bad);
    } else if (x.feature_type == "logit") {
        n.kind = GNODE_LOGIT, n.layer = L, n.feature = id_number(b, bad), n.prob = n.prob_after = (float)x.token_prob;
        if (id_number(a, bad) != L + 1)
            throw gb::error(path + ": its logits sit at layer " + a + ", a model of " + std::to_string(id_number(a, bad) - 1) +
                            " layers; this one has " + std::to_string(L));
    } else if (x.feature_type == "mlp reconstruction error") {
        n.kind = GNODE_ERROR, n.layer = (int)id_number(a, bad);
    } else if (x.feature_type.find("transcoder") != std::string::npos) {
        n.kind = GNODE_FEATURE, n.layer = (int)id_number(a, bad), n.feature = id_number(b, bad);
        n.activation = n.act_after = (float)x.activation;
        n.size = x.has_influence ? (float)std::clamp(1.0 - x.influence, 0.0, 1.0) : 0.5f;
    } else {
        throw gb::error(where + ": feature_type \"" + x.feature_type + "\" is not one we draw");
    }
    if ((n.kind == GNODE_FEATURE || n.kind == GNODE_ERROR) && (n.layer < 0 || n.layer >= L))
        throw gb::error(where + ": layer " + std::to_string(n.layer) + ", this model has layers 0.." + std::to_string(L - 1));
    if ((n.kind == GNODE_TOKEN || n.kind == GNODE_LOGIT) && (n.feature < 0 || n.feature >= V))
        throw gb::error(where + ": token " + std::to_string(n.feature) + " is outside this model's vocabulary of " + std::to_string(V));
    return n;
}

graph_view view_of_file(const nlohmann::json& j, const std::string& path, const gb::model& m) {
    const gb::np_graph f = gb::parse_neuronpedia(j, path);
    graph_view v;
    v.n_layer = m.config.n_layer, v.tokens = f.prompt_tokens, v.file = path, v.prompt = f.prompt, v.scan = f.scan;
    const int T = (int)v.tokens.size();
    if (T == 0) throw gb::error(path + ": metadata's \"prompt_tokens\" is empty");
    std::map<std::string, int> at;
    for (const gb::np_node& x : f.nodes) {
        graph_node n = file_node(x, path, m, T);
        const std::string piece = "'" + v.tokens[n.pos] + "'";
        switch (n.kind) {
        case GNODE_FEATURE: n.label = "L" + std::to_string(n.layer) + " #" + std::to_string(n.feature) + " @" + std::to_string(n.pos) + " " + piece; break;
        case GNODE_ERROR: n.label = "error L" + std::to_string(n.layer) + " @" + std::to_string(n.pos) + " " + piece; break;
        case GNODE_TOKEN: n.label = "token " + piece + " @" + std::to_string(n.pos); break;
        case GNODE_LOGIT: n.label = "logit '" + gb::decode(m.tok, {(int)n.feature}) + "'"; break;
        }
        if (at.count(n.id)) throw gb::error(path + ": node " + n.id + " appears twice");
        at[n.id] = (int)v.nodes.size();
        v.nodes.push_back(std::move(n));
    }
    // sizes relative to the largest, as the run's graph draws them
    float top = 0;
    for (const graph_node& n : v.nodes) top = std::max(top, n.kind == GNODE_FEATURE ? n.size : 0.0f);
    for (graph_node& n : v.nodes)
        if (n.kind == GNODE_FEATURE && top > 0) n.size /= top;
    for (const gb::np_link& l : f.links) v.links.push_back({at[l.target], at[l.source], (float)l.weight});
    std::sort(v.links.begin(), v.links.end(), [](const graph_link& a, const graph_link& b) { return std::fabs(a.weight) < std::fabs(b.weight); });
    for (const graph_link& l : v.links) v.max_weight = std::max(v.max_weight, std::fabs(l.weight));
    // the pins and supernodes a file keeps (Neuronpedia's qParams: supernodes as [name, id, id, ...])
    if (j.contains("qParams") && j["qParams"].is_object()) {
        const nlohmann::json& q = j["qParams"];
        if (q.contains("pinnedIds") && q["pinnedIds"].is_array())
            for (const auto& id : q["pinnedIds"])
                if (id.is_string() && at.count(id.get<std::string>())) v.pinned.push_back(id.get<std::string>());
        if (q.contains("supernodes") && q["supernodes"].is_array())
            for (const auto& sn : q["supernodes"]) {
                if (!sn.is_array() || sn.empty() || !sn[0].is_string()) continue;
                graph_supernode g{sn[0].get<std::string>(), {}};
                for (size_t i = 1; i < sn.size(); i++)
                    if (sn[i].is_string() && at.count(sn[i].get<std::string>())) g.members.push_back(sn[i].get<std::string>());
                if (!g.members.empty()) v.supernodes.push_back(std::move(g));
            }
    }
    return v;
}

void add_qparams(nlohmann::json& j, const std::vector<std::string>& pinned, const std::vector<graph_supernode>& groups) {
    nlohmann::json sn = nlohmann::json::array();
    for (const graph_supernode& g : groups) {
        nlohmann::json one = nlohmann::json::array({g.name});
        for (const std::string& id : g.members) one.push_back(id);
        sn.push_back(one);
    }
    j["qParams"]["pinnedIds"] = pinned;
    j["qParams"]["supernodes"] = sn;
}

// ---- placing and paths ----

graph_place place_view(const graph_view& v, float w, float h, float unit) {
    const int T = std::max(1, (int)v.tokens.size()), L = v.n_layer, n = (int)v.nodes.size();
    graph_place pl;
    pl.col_w = w / T, pl.row_h = h / (L + 2);
    pl.x.assign(n, 0), pl.y.assign(n, 0), pl.r.assign(n, 0);
    std::map<std::pair<int, int>, std::vector<int>> cell; // (layer, pos) -> its features, then its error
    int n_logits = 0;
    for (int i = 0; i < n; i++)
        if (v.nodes[i].kind == GNODE_FEATURE) cell[{v.nodes[i].layer, v.nodes[i].pos}].push_back(i);
    for (int i = 0; i < n; i++) {
        const graph_node& x = v.nodes[i];
        if (x.kind == GNODE_ERROR) cell[{x.layer, x.pos}].push_back(i);
        if (x.kind == GNODE_LOGIT) n_logits++;
    }
    for (const auto& [lp, ids] : cell)
        for (size_t k = 0; k < ids.size(); k++) {
            const int i = ids[k];
            pl.x[i] = (lp.second + (k + 0.5f) / ids.size()) * pl.col_w;
            pl.y[i] = (L - lp.first + 0.5f) * pl.row_h;
            pl.r[i] = v.nodes[i].kind == GNODE_FEATURE
                          ? std::max(2.5f * unit, std::sqrt(v.nodes[i].size) * std::min(pl.col_w, pl.row_h) * 0.3f)
                          : 3 * unit;
        }
    const float lw = w / std::max(4, n_logits); // the logits on the top row, the most probable leftmost of the right
    int k = 0;                                  // end's, each with room for its word
    for (int i = 0; i < n; i++) {
        const graph_node& x = v.nodes[i];
        if (x.kind == GNODE_TOKEN) pl.x[i] = (x.pos + 0.5f) * pl.col_w, pl.y[i] = (L + 1.5f) * pl.row_h, pl.r[i] = 4 * unit;
        if (x.kind == GNODE_LOGIT) pl.x[i] = w - (n_logits - k++) * lw + 6 * unit, pl.y[i] = 0.5f * pl.row_h, pl.r[i] = 5 * unit;
    }
    return pl;
}

std::vector<uint8_t> pinned_paths(const graph_view& v, const std::vector<std::string>& pinned) {
    const int n = (int)v.nodes.size();
    std::vector<uint8_t> down(n, 0), up(n, 0), lit(v.links.size(), 0);
    std::vector<int> stack;
    for (const std::string& id : pinned)
        if (const int i = v.find(id); i >= 0) down[i] = up[i] = 1, stack.push_back(i);
    if (stack.empty()) return lit;
    std::vector<std::vector<int>> out(n), in(n); // link indices by source and by target
    for (size_t k = 0; k < v.links.size(); k++) out[v.links[k].source].push_back((int)k), in[v.links[k].target].push_back((int)k);
    std::vector<int> st = stack;
    while (!st.empty()) { // everything a pinned node reaches
        const int i = st.back();
        st.pop_back();
        for (int k : out[i])
            if (!down[v.links[k].target]) down[v.links[k].target] = 1, st.push_back(v.links[k].target);
    }
    st = stack;
    while (!st.empty()) { // everything that reaches a pinned node
        const int i = st.back();
        st.pop_back();
        for (int k : in[i])
            if (!up[v.links[k].source]) up[v.links[k].source] = 1, st.push_back(v.links[k].source);
    }
    for (size_t k = 0; k < v.links.size(); k++) lit[k] = down[v.links[k].source] || up[v.links[k].target];
    return lit;
}

// ---- SVG ----

namespace {

std::string xml_escaped(const std::string& s) {
    std::string out;
    for (char ch : s) {
        if (ch == '&') out += "&amp;";
        else if (ch == '<') out += "&lt;";
        else if (ch == '>') out += "&gt;";
        else if (ch == '"') out += "&quot;";
        else out += ch;
    }
    return out;
}

std::string num(float v, int digits = 1) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

} // namespace

std::string view_svg(const graph_view& v, const std::vector<std::string>& pinned, const std::vector<graph_supernode>& groups,
                     float w, float h) {
    const float lw = 40, th = 24, ox = lw, oy = 18; // row labels on the left, tokens below, supernode names above
    const graph_place pl = place_view(v, w, h, 1.5f);
    auto X = [&](int i) { return num(ox + pl.x[i]); };
    auto Y = [&](int i) { return num(oy + pl.y[i]); };
    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w + lw + 120) + "\" height=\"" + num(h + th + oy) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#15161a\"/>\n";
    for (int l = 0; l < v.n_layer; l++) {
        const std::string y = num(oy + (v.n_layer - l + 0.5f) * pl.row_h);
        s += "<line x1=\"" + num(ox) + "\" y1=\"" + y + "\" x2=\"" + num(ox + w) + "\" y2=\"" + y + "\" stroke=\"#ffffff\" stroke-opacity=\"0.07\"/>\n";
        s += "<text x=\"4\" y=\"" + y + "\" dy=\"4\" fill=\"#888\">L" + std::to_string(l) + "</text>\n";
    }
    for (const graph_supernode& g : groups) { // named boxes under everything
        float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
        for (const std::string& id : g.members)
            if (const int i = v.find(id); i >= 0) {
                const float r = pl.r[i] + 6;
                x0 = std::min(x0, ox + pl.x[i] - r), y0 = std::min(y0, oy + pl.y[i] - r);
                x1 = std::max(x1, ox + pl.x[i] + r), y1 = std::max(y1, oy + pl.y[i] + r);
            }
        if (x0 > x1) continue;
        s += "<rect x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(x1 - x0) + "\" height=\"" + num(y1 - y0) +
             "\" rx=\"4\" fill=\"#be8cff\" fill-opacity=\"0.16\" stroke=\"#be8cff\"/>\n<text x=\"" + num(x0) + "\" y=\"" + num(y0 - 3) +
             "\" fill=\"#d7b9ff\">" + xml_escaped(g.name) + "</text>\n";
    }
    for (const graph_link& l : v.links) {
        const float a = v.max_weight > 0 ? std::sqrt(std::fabs(l.weight) / v.max_weight) : 0;
        s += "<line x1=\"" + X(l.source) + "\" y1=\"" + Y(l.source) + "\" x2=\"" + X(l.target) + "\" y2=\"" + Y(l.target) +
             "\" stroke=\"" + (l.weight > 0 ? "#ff9628" : "#5096ff") + "\" stroke-opacity=\"" + num(0.05f + 0.86f * a * a, 3) +
             "\" stroke-width=\"" + num(std::max(1.0f, 2.5f * a)) + "\"/>\n";
    }
    for (size_t k = 0; k < v.nodes.size(); k++) {
        const graph_node& n = v.nodes[k];
        const int i = (int)k;
        const std::string r = num(pl.r[i]);
        s += "<g><title>" + xml_escaped(n.label) + "</title>";
        if (n.kind == GNODE_ERROR)
            s += "<rect x=\"" + num(ox + pl.x[i] - pl.r[i]) + "\" y=\"" + num(oy + pl.y[i] - pl.r[i]) + "\" width=\"" + num(2 * pl.r[i]) +
                 "\" height=\"" + num(2 * pl.r[i]) + "\" fill=\"#969696\"/>";
        else
            s += "<circle cx=\"" + X(i) + "\" cy=\"" + Y(i) + "\" r=\"" + r + "\" fill=\"" + (n.kind == GNODE_FEATURE ? "#f5e178" : "#78dc8c") + "\"/>";
        if (std::find(pinned.begin(), pinned.end(), n.id) != pinned.end())
            s += "<circle cx=\"" + X(i) + "\" cy=\"" + Y(i) + "\" r=\"" + num(pl.r[i] + 4) + "\" fill=\"none\" stroke=\"#fff\" stroke-width=\"2\"/>";
        s += "</g>\n";
        if (n.kind == GNODE_LOGIT)
            s += "<text x=\"" + num(ox + pl.x[i] + pl.r[i] + 4) + "\" y=\"" + Y(i) + "\" dy=\"4\" fill=\"#ddd\">" +
                 xml_escaped((n.label.rfind("logit ", 0) == 0 ? n.label.substr(6) : n.label) + " " + num(n.prob_after, 2)) + "</text>\n";
    }
    for (size_t t = 0; t < v.tokens.size(); t++)
        s += "<text x=\"" + num(ox + (t + 0.5f) * pl.col_w) + "\" y=\"" + num(oy + h + 16) + "\" text-anchor=\"middle\" fill=\"#ddd\">" +
             xml_escaped(v.tokens[t]) + "</text>\n";
    return s + "</svg>\n";
}

} // namespace gbui
