// glassbox-cli graph: an attribution graph over transcoder features (docs/graphs.md): the nodes, the adjacency
// through the frozen replacement model, influence, pruning and the replacement and completeness scores; with
// --npy-dir the arrays, --json the scores and counts, --neuronpedia the pruned graph as Neuronpedia's JSON.
// graph --open FILE.json reads a graph made elsewhere (circuit-tracer, Neuronpedia) and says what it holds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/attribution_graph.h"
#include "analysis/export.h"
#include "analysis/graph_json.h"
#include "analysis/graph_prune.h"
#include "args.h"
#include "commands.h"
#include "input.h"
#include "io/transcoders.h"
#include "run/record.h"
#include "util/npy.h"

namespace cli {
namespace {

void write_bool_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<uint8_t>& v) {
    std::ofstream f;
    gb::open_npy(f, path, shape, "|b1");
    f.write(reinterpret_cast<const char*>(v.data()), (std::streamsize)v.size());
    if (!f) throw gb::error("cannot write " + path);
}

int open_graph(const args& a) {
    const std::string path = a.need("open");
    const gb::np_graph g = gb::read_neuronpedia(path);
    int features = 0, errors = 0, tokens = 0, logits = 0;
    for (const gb::np_node& n : g.nodes) {
        if (n.feature_type == "embedding") tokens++;
        else if (n.feature_type == "logit") logits++;
        else if (n.feature_type == "mlp reconstruction error") errors++;
        else features++;
    }
    std::printf("graph %s%s%s: %zu nodes (%d features, %d errors, %d tokens, %d logits), %zu links\n", path.c_str(),
                g.slug.empty() ? "" : " slug ", g.slug.c_str(), g.nodes.size(), features, errors, tokens, logits,
                g.links.size());
    std::printf("prompt tokens:");
    for (const std::string& t : g.prompt_tokens) std::printf(" %s", ("\"" + visible(t) + "\"").c_str());
    std::printf("\n");
    const nlohmann::json j = {{"file", path}, {"slug", g.slug}, {"scan", g.scan}, {"n_nodes", g.nodes.size()},
                              {"n_links", g.links.size()}, {"n_features", features}, {"n_errors", errors},
                              {"n_tokens", tokens}, {"n_logits", logits}, {"prompt_tokens", g.prompt_tokens}};
    write_outputs(a, j, nullptr);
    return 0;
}

// --head-loadings T,S: the edge's split per attention layer, printed, and as JSON.
nlohmann::json head_loadings_json(const args& a, const gb::model& m, const gb::transcoder_set& t, const gb::replacement& r,
                                  const gb::attribution_graph& g) {
    const int N = g.n_nodes();
    const std::vector<std::string> ends = split(a.get("head-loadings"), ',');
    if (ends.size() != 2) throw usage_error("--head-loadings takes TARGET,SOURCE (node indices)");
    const int target = (int)parse_int(ends[0], "--head-loadings target", 0, N - 1);
    const int source = (int)parse_int(ends[1], "--head-loadings source", 0, N - 1);
    const std::vector<double> hl = gb::edge_head_loadings(m, t, r, g, target, source);
    const int H = r.n_head;
    std::printf("edge %d <- %d: %.6g; split at each attention layer below its read (bypass, then heads):\n", target,
                source, g.edge(target, source));
    nlohmann::json layers = nlohmann::json::array();
    for (int l = 0; l < r.n_layer; l++) {
        const double* row = hl.data() + (size_t)l * (H + 1);
        if (std::all_of(row, row + H + 1, [](double v) { return v == 0; })) continue;
        std::printf("  L%d  bypass %.4g  heads", l, row[H]);
        for (int h = 0; h < H; h++) std::printf(" %.4g", row[h]);
        std::printf("\n");
        layers.push_back({{"layer", l}, {"bypass", row[H]}, {"heads", std::vector<double>(row, row + H)}});
    }
    return {{"target", target}, {"source", source}, {"edge", g.edge(target, source)}, {"layers", layers}};
}

} // namespace

// The transcoder set with only the features that fire on this prompt, read a layer of the file at a time: the
// model's run gives each layer's MLP input [L][T][d] (and the stream before the MLP); kept maps the set's feature
// numbers back to the file's, full_d_tc is the file's width.
static gb::transcoder_set prompt_transcoders(const gb::model& m, const std::vector<int>& tokens, const std::string& tc_dir,
                                             std::vector<std::vector<int>>& kept, int& full_d_tc) {
    gb::record rec;
    gb::forward_options fo;
    fo.keep.resid_stream = true;
    fo.keep.points = gb::hook_bit(gb::HOOK_MLP_IN);
    gb::run_forward(rec, m, tokens, {}, fo);
    const int L = m.config.n_layer, T = (int)tokens.size(), d = m.config.d_model;
    std::vector<float> in((size_t)L * T * d), mid((size_t)L * T * d);
    for (int l = 0; l < L; l++) {
        if (!rec.get(gb::HOOK_MLP_IN, l) || !rec.resid(2 * l + 1))
            throw gb::error("graph: the model's run did not keep layer " + std::to_string(l));
        std::copy_n(rec.get(gb::HOOK_MLP_IN, l), (size_t)T * d, in.begin() + (size_t)l * T * d);
        std::copy_n(rec.resid(2 * l + 1), (size_t)T * d, mid.begin() + (size_t)l * T * d);
    }
    return gb::read_active_transcoders(tc_dir, in, mid, T, L, d, kept, full_d_tc);
}

// The ten most influential kept features, a line each.
static void print_top_features(const gb::model& m, const gb::attribution_graph& g, const gb::prune_result& p) {
    std::vector<int> order;
    for (int i = 0; i < g.n_features(); i++)
        if (p.node_mask[i]) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](int x, int y) { return p.node_influence[x] > p.node_influence[y]; });
    for (size_t k = 0; k < std::min<size_t>(order.size(), 10); k++) {
        const gb::active_feature& f = g.features[order[k]];
        std::printf("  feature L%d #%d at %d %s  act %.3f  influence %.4f\n", f.layer, f.index, f.pos,
                    quoted(m, g.tokens[f.pos]).c_str(), f.act, p.node_influence[order[k]]);
    }
}

int cmd_graph(const args& a) {
    if (a.has("open")) {
        for (const char* o : {"prompt", "transcoders", "npy-dir", "neuronpedia", "model", "head-loadings"})
            if (a.has(o)) throw usage_error(std::string("--") + o + " has no use with --open");
        return open_graph(a);
    }
    const auto t0 = std::chrono::steady_clock::now();
    gb::model m = open_model(a);
    const std::string prompt = a.need("prompt");
    const bool bos = a.has("bos");
    const std::vector<int> tokens = prompt_ids(m, prompt, bos);
    // only the features that fire on this prompt are read (a layer of the file at a time): the model's run gives
    // each layer's MLP input; kept maps the set's feature numbers back to the file's
    const std::string tc_dir = transcoders_arg(a, m);
    std::vector<std::vector<int>> kept;
    int full_d_tc = 0;
    const gb::transcoder_set t = prompt_transcoders(m, tokens, tc_dir, kept, full_d_tc);
    gb::graph_options opt;
    opt.bos = (bos || m.tok.add_bos) && !tokens.empty() && m.tok.bos_id >= 0 && tokens[0] == m.tok.bos_id;
    opt.max_logits = (int)parse_int(a.get("max-logits", "10"), "--max-logits", 1, m.config.vocab_size);
    opt.logit_prob = parse_float(a.get("logit-prob", "0.95"), "--logit-prob", 0, 1);
    opt.max_feature_nodes = (int)parse_int(a.get("max-feature-nodes", "8192"), "--max-feature-nodes", 0, 1 << 24);
    const double node_th = parse_float(a.get("node-threshold", "0.8"), "--node-threshold", 0, 1);
    const double edge_th = parse_float(a.get("edge-threshold", "0.98"), "--edge-threshold", 0, 1);
    opt.progress = [](const std::string& stage, int done, int total) {
        std::fprintf(stderr, "\r%s %d/%d", stage.c_str(), done, total);
        if (done == total) std::fprintf(stderr, "\n");
    };
    const gb::replacement r = gb::build_replacement(m, t, tokens, opt.bos);
    const double forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gb::attribution_graph g = gb::build_graph(m, t, r, opt);
    g.seconds_forward = forward_s;
    std::vector<gb::active_feature> read_numbers = g.features; // as t numbers them (head loadings)
    for (gb::active_feature& f : g.features) f.index = kept[f.layer][f.index];
    const auto t1 = std::chrono::steady_clock::now();
    const gb::graph_layout lay{g.n_features(), g.n_errors(), g.n_tokens(), g.n_logits()};
    const gb::prune_result p = gb::prune_graph(g.adjacency.data(), lay, g.logit_probs, node_th, edge_th);
    const double prune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int N = g.n_nodes();
    int kept_nodes = 0, kept_features = 0;
    long kept_edges = 0;
    for (int i = 0; i < N; i++) kept_nodes += p.node_mask[i], kept_features += i < g.n_features() && p.node_mask[i];
    for (uint8_t e : p.edge_mask) kept_edges += e;

    std::printf("transcoders %s: %s%s, %s%s, %d layers x %d features%s\n", t.path.c_str(),
                t.layout == gb::TC_GEMMA_SCOPE_2 ? "Gemma Scope 2, " : "", t.cross_layer ? "cross-layer" : "per-layer",
                gb::sae_arch_name(t.arch), t.has_skip() ? " + skip" : "", t.n_layer, full_d_tc,
                r.output_normed ? ", writing after the MLP's post-norm" : "");
    std::printf("%d tokens, %d active features (%d as nodes), %d error nodes, %d logits:", g.n_tokens(), g.n_active,
                g.n_features(), g.n_errors(), g.n_logits());
    for (int i = 0; i < g.n_logits(); i++)
        std::printf(" %s %.3f", quoted(m, g.logit_tokens[i]).c_str(), g.logit_probs[i]);
    std::printf("\npruned (node %.2f, edge %.2f): %d of %d nodes (%d features), %ld edges\n", node_th, edge_th, kept_nodes,
                N, kept_features, kept_edges);
    std::printf("replacement score %.4f, completeness score %.4f\n", p.replacement_score, p.completeness_score);
    std::printf("time %.3f s (forward and transcoders %.3f, adjacency %.3f, pruning %.3f); adjacency %.1f MB\n", total_s,
                g.seconds_forward, g.seconds_rows, prune_s, (double)N * N * 4 / 1e6);
    print_top_features(m, g, p);

    nlohmann::json loadings;
    if (a.has("head-loadings")) {
        std::swap(g.features, read_numbers);
        loadings = head_loadings_json(a, m, t, r, g);
        std::swap(g.features, read_numbers);
    }
    if (a.has("neuronpedia")) {
        const std::string path = a.get("neuronpedia");
        std::ofstream f(path);
        if (!f) throw gb::error("cannot write " + path);
        f << gb::neuronpedia_json(g, p, m.tok, prompt, "glassbox-graph", t.model_name.empty() ? "glassbox" : t.model_name,
                                  node_th).dump(2);
        if (!f) throw gb::error("cannot write " + path);
    }
    nlohmann::json logits = nlohmann::json::array();
    for (int i = 0; i < g.n_logits(); i++)
        logits.push_back({{"id", g.logit_tokens[i]}, {"text", gb::token_text(m.tok, g.logit_tokens[i])},
                          {"probability", g.logit_probs[i]}});
    const nlohmann::json j = {
        {"transcoders", t.path}, {"cross_layer", t.cross_layer},
        {"format", t.layout == gb::TC_GEMMA_SCOPE_2 ? "gemma-scope-2" : "circuit-tracer"}, {"tokens", g.tokens}, {"bos", opt.bos},
        {"replacement_score", p.replacement_score}, {"completeness_score", p.completeness_score},
        {"n_nodes", N}, {"n_features", g.n_features()}, {"n_active_features", g.n_active}, {"n_errors", g.n_errors()},
        {"n_tokens", g.n_tokens()}, {"n_logits", g.n_logits()}, {"n_kept_nodes", kept_nodes},
        {"n_kept_features", kept_features}, {"n_kept_edges", kept_edges}, {"node_threshold", node_th},
        {"edge_threshold", edge_th}, {"node_cutoff", p.node_cutoff}, {"edge_cutoff", p.edge_cutoff}, {"logits", logits},
        {"seconds", {{"total", total_s}, {"forward", g.seconds_forward}, {"adjacency", g.seconds_rows}, {"prune", prune_s}}},
        {"bytes_rows", g.bytes_rows}, {"head_loadings", loadings}};
    write_outputs(a, j, [&](const std::string& dir) {
        gb::make_dir(dir);
        const int T = g.n_tokens(), nf = g.n_features(), nl = g.n_logits();
        gb::write_npy(dir + "/tokens.npy", {T}, g.tokens.data());
        std::vector<int32_t> af((size_t)nf * 3);
        std::vector<float> av(nf);
        for (int i = 0; i < nf; i++) {
            af[(size_t)i * 3] = g.features[i].layer, af[(size_t)i * 3 + 1] = g.features[i].pos;
            af[(size_t)i * 3 + 2] = g.features[i].index, av[i] = g.features[i].act;
        }
        gb::write_npy(dir + "/active_features.npy", {nf, 3}, af.data());
        gb::write_npy(dir + "/activation_values.npy", {nf}, av.data());
        gb::write_npy(dir + "/logit_tokens.npy", {nl}, g.logit_tokens.data());
        gb::write_npy(dir + "/logit_probabilities.npy", {nl}, g.logit_probs.data());
        gb::write_npy(dir + "/adjacency.npy", {N, N}, g.adjacency.data());
        gb::write_npy(dir + "/node_influence.npy", {N}, p.node_influence.data());
        write_bool_npy(dir + "/node_mask.npy", {N}, p.node_mask);
        write_bool_npy(dir + "/edge_mask.npy", {N, N}, p.edge_mask);
    });
    return 0;
}

} // namespace cli
