// The Graph tab's analysis: the shown run's attribution graph over a transcoder set, built on the long lane
// (core/analysis/attribution_graph.h) and pruned at the tab's thresholds; a change of threshold alone re-prunes
// the graph already built (instant), and the transcoder sets stay read between requests. The tab's feature edits
// run the replacement model again (core/analysis/graph_intervene.h, as `glassbox-cli intervene` without
// --freeze-attention): the new top tokens, and the graph's nodes redrawn with their activations in that run.
#include "graph_analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <numeric>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "io/loader.h"
#include "io/transcoders.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gbui {

// The transcoder set at path, read once (a set of the default model is 14 MB: reading it per request would cost
// more than the graph)
static std::shared_ptr<const gb::transcoder_set> transcoders_at(const std::string& path) {
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<const gb::transcoder_set>> sets;
    std::lock_guard<std::mutex> lock(mu);
    auto it = sets.find(path);
    if (it != sets.end()) return it->second;
    auto t = std::make_shared<const gb::transcoder_set>(gb::read_transcoders(path));
    if (sets.size() > 4) sets.clear(); // a few sets at most
    sets[path] = t;
    return t;
}

// "L3 #438 @5", "error L2 @4", "token ' cat' @1", "logit ' Paris'"
static std::vector<std::string> node_labels(const gb::attribution_graph& g, const run_result& r) {
    std::vector<std::string> out;
    const std::vector<std::string>& pieces = r.cap().pieces;
    auto piece = [&](int pos) { return pos >= 0 && pos < (int)pieces.size() ? "'" + pieces[pos] + "'" : "?"; };
    for (const gb::active_feature& f : g.features)
        out.push_back("L" + std::to_string(f.layer) + " #" + std::to_string(f.index) + " @" + std::to_string(f.pos) + " " +
                      piece(f.pos));
    for (int l = 0; l < g.n_layer; l++)
        for (int p = g.first_pos; p < g.n_tokens(); p++)
            out.push_back("error L" + std::to_string(l) + " @" + std::to_string(p) + " " + piece(p));
    for (int p = 0; p < g.n_tokens(); p++) out.push_back("token " + piece(p) + " @" + std::to_string(p));
    for (int id : g.logit_tokens) out.push_back("logit '" + gb::decode(r.model->tok, {id}) + "'");
    return out;
}

static std::string edits_key(const std::vector<gb::graph_edit>& edits) {
    std::string k;
    char b[64];
    for (const gb::graph_edit& e : edits) {
        std::snprintf(b, sizeof b, "%d:%d:%d=%.9g,", e.layer, e.pos, e.index, e.value);
        k += b;
    }
    return k;
}

std::string graph_key(const app_state& s, graph_request& q) {
    const auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const run_result* r = s.result.get();
    q.from = s.result;
    q.graph = output_of<graph_output>(s, ANALYSIS_GRAPH);
    q.transcoders = !gin.transcoders.empty() || !r ? gin.transcoders : gb::default_transcoders_path(*r->model);
    q.node_threshold = gin.node_threshold, q.edge_threshold = gin.edge_threshold;
    q.edits = gin.edits;
    if (!r) return "";
    char th[48];
    std::snprintf(th, sizeof th, "|%.3f|%.3f|", gin.node_threshold, gin.edge_threshold);
    return std::to_string(r->request_id) + "|" + q.transcoders + th + edits_key(gin.edits);
}

static std::vector<double> softmax(const std::vector<float>& logits) {
    const double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t i = 0; i < p.size(); i++) z += p[i] = std::exp((double)logits[i] - mx);
    for (double& x : p) x /= z;
    return p;
}

// The 10 most probable tokens of `by`, each with both runs' probabilities
static std::vector<graph_logit_change> top_tokens(const std::vector<double>& by, const std::vector<double>& p0,
                                                  const std::vector<double>& p1, const gb::tokenizer& tok) {
    std::vector<int> ids(by.size());
    std::iota(ids.begin(), ids.end(), 0);
    const int k = std::min<int>(10, (int)ids.size());
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) { return by[a] > by[b] || (by[a] == by[b] && a < b); });
    std::vector<graph_logit_change> out;
    for (int i = 0; i < k; i++) out.push_back({ids[i], gb::token_text(tok, ids[i]), (float)p0[ids[i]], (float)p1[ids[i]]});
    return out;
}

// The edits run through the replacement model: the top tokens before and after, each graph feature's activation
// and each logit node's probability in the edited run
static void run_edits(graph_output& out, const gb::model& m, std::vector<float>& acts_after, std::vector<float>& probs_after) {
    const gb::attribution_graph& g = *out.g;
    std::vector<float> acts;
    const std::vector<float> after = gb::intervene_logits(m, *out.set, *out.rep, out.edits, false, &acts);
    const std::vector<double> p0 = softmax(out.rep->logits), p1 = softmax(after);
    out.top_before = top_tokens(p0, p0, p1, m.tok);
    out.top_after = top_tokens(p1, p0, p1, m.tok);
    const int T = g.n_tokens(), d_tc = out.set->d_tc;
    for (const gb::active_feature& f : g.features) acts_after.push_back(acts[((size_t)f.layer * T + f.pos) * d_tc + f.index]);
    for (int id : g.logit_tokens) probs_after.push_back((float)p1[id]);
}

// The graph itself (or the one on screen when only the thresholds or edits moved)
static bool build_or_reuse(graph_output& out, const graph_request& q, const analysis_run& run) {
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    if (q.graph && q.graph->from == q.from && q.graph->transcoders == q.transcoders) {
        out.g = q.graph->g, out.rep = q.graph->rep, out.set = q.graph->set;
        out.node_label = q.graph->node_label;
        return true;
    }
    out.set = transcoders_at(q.transcoders);
    const std::vector<int>& tokens = r.cap().tokens;
    gb::graph_options opt;
    opt.bos = r.bos && !tokens.empty() && tokens[0] == m.tok.bos_id;
    opt.progress = [&run](const std::string&, int done, int total) { run.go(total > 0 ? (float)done / total : 0.0f); };
    opt.cancelled = [&run] { return run.stopped(); };
    try {
        out.rep = std::make_shared<const gb::replacement>(gb::build_replacement(m, *out.set, tokens, opt.bos));
        out.g = std::make_shared<const gb::attribution_graph>(gb::build_graph(m, *out.set, *out.rep, opt));
    } catch (const gb::cancelled&) {
        return false;
    }
    out.node_label = node_labels(*out.g, r);
    return true;
}

std::shared_ptr<const void> compute_graph(const analysis_request& rq, const analysis_run& run) {
    const graph_request& q = request_of<graph_request>(rq);
    const auto t0 = std::chrono::steady_clock::now();
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    auto out = std::make_shared<graph_output>();
    out->key = rq.key, out->from = q.from;
    out->transcoders = q.transcoders;
    out->node_threshold = q.node_threshold, out->edge_threshold = q.edge_threshold;
    if (q.transcoders.empty())
        throw gb::error("no transcoder set: choose one with Browse... (the default model ships its own; other models "
                        "need one trained for them, glassbox-cli train-transcoder)");
    if (!build_or_reuse(*out, q, run)) return nullptr;
    const gb::attribution_graph& g = *out->g;
    gb::graph_layout lay;
    lay.n_features = g.n_features(), lay.n_errors = g.n_errors(), lay.n_tokens = g.n_tokens(), lay.n_logits = g.n_logits();
    out->pruned = gb::prune_graph(g.adjacency.data(), lay, g.logit_probs, q.node_threshold, q.edge_threshold);
    const int N = g.n_nodes();
    for (int t = 0; t < N; t++)
        for (int f = 0; f < N; f++)
            if (out->pruned.edge_mask[(size_t)t * N + f]) {
                out->edges.push_back({t, f});
                out->max_edge = std::max(out->max_edge, std::fabs(g.edge(t, f)));
            }
    std::sort(out->edges.begin(), out->edges.end(), [&g](const auto& a, const auto& b) {
        return std::fabs(g.edge(a.first, a.second)) < std::fabs(g.edge(b.first, b.second));
    });
    std::vector<float> acts_after, probs_after;
    out->edits = q.edits;
    if (!q.edits.empty()) run_edits(*out, m, acts_after, probs_after); // one forward: redone with the thresholds too
    out->view = view_of_graph(g, out->pruned, r.cap().pieces, out->node_label, acts_after, probs_after);
    out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace gbui
