// glassbox-cli circuit: the graph of embeddings, heads, MLPs and logits with edges scored by edge attribution
// patching, the top N edges' circuit and its faithfulness (core/analysis/circuit.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/circuit.h"
#include "analysis/patching.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

static nlohmann::json token_json(const gb::model& m, int id) {
    return id < 0 ? nlohmann::json() : nlohmann::json{{"id", id}, {"text", gb::token_text(m.tok, id)}};
}

static nlohmann::json tokens_json(const gb::model& m, const std::vector<int>& ids) {
    nlohmann::json out = nlohmann::json::array();
    for (int id : ids) out.push_back(token_json(m, id));
    return out;
}

// The faithfulness at a few circuit sizes (0, 5 times powers of two until every node is in, and every edge): one
// forward each
static nlohmann::json faithfulness_curve(const gb::model& m, const gb::circuit_result& r, const std::vector<int>& clean,
                                         const gb::ablation& ab) {
    nlohmann::json out = nlohmann::json::array();
    const int E = (int)r.edges.size();
    std::vector<int> sizes = {0};
    for (int n = 5; n < E; n *= 2) {
        const std::vector<unsigned char> in = gb::circuit_members(r, n);
        if (std::count(in.begin(), in.end(), 1) == (long)in.size()) break;
        sizes.push_back(n);
    }
    sizes.push_back(E);
    for (int n : sizes) {
        const std::vector<unsigned char> in = gb::circuit_members(r, n);
        const double v = gb::circuit_metric(m, r, clean, in, ab);
        out.push_back({{"edges", n}, {"nodes", (int)std::count(in.begin(), in.end(), 1)}, {"metric", v},
                       {"faithfulness", gb::circuit_faithfulness(r, v)}});
    }
    return out;
}

int cmd_circuit(const args& a) {
    gb::model m = open_model(a);
    const std::vector<int> clean = read_input(a, m).tokens, corrupt = read_input(a, m, "corrupt").tokens;
    int target = token_arg(a, m, "target", false), contrast = token_arg(a, m, "contrast", false);
    const int n_edges = (int)parse_int(a.get("edges", "40"), "--edges", 0, 100000000);
    const gb::ablation ab = parse_ablation(a, m);
    const std::vector<std::string> notes = check_knockouts(ab, m, (int)clean.size());
    const std::string chosen = gb::choose_patch_tokens(target, contrast, m, clean, corrupt, ab); // as patch and the app
    if (!chosen.empty()) std::printf("(%s)\n", chosen.c_str());
    const gb::circuit_result r = gb::circuit_scores(m, clean, corrupt, target, contrast, ab);
    const std::vector<unsigned char> in = gb::circuit_members(r, n_edges);
    const double kept = gb::circuit_metric(m, r, clean, in, ab);
    const double faith = gb::circuit_faithfulness(r, kept);
    const int shown = std::min(n_edges, (int)r.edges.size());
    std::printf("metric logit(%s) - logit(%s) at the last position: clean %+.4f, corrupt %+.4f\n",
                quoted(m, target).c_str(), quoted(m, contrast).c_str(), r.clean, r.corrupt);
    std::printf("%zu nodes, %zu edges scored by edge attribution patching in %.0f ms\n", r.nodes.size(),
                r.edges.size(), r.ms);
    std::printf("top %d edges (score: the estimated change of the metric through that edge alone):\n", shown);
    for (int i = 0; i < shown; i++) {
        const gb::circuit_edge& e = r.edges[i];
        std::printf("  %3d  %-10s -> %-10s %+10.4f\n", i + 1, r.nodes[e.from].id.c_str(), r.nodes[e.to].id.c_str(), e.score);
    }
    std::string members;
    for (size_t v = 0; v < r.nodes.size(); v++)
        if (in[v]) members += (members.empty() ? "" : " ") + r.nodes[v].id;
    std::printf("circuit: %d nodes: %s\n", (int)std::count(in.begin(), in.end(), 1), members.c_str());
    std::printf("faithfulness %.4f: the metric is %+.4f with every other node patched to its corrupted value "
                "(1 = clean, 0 = corrupt)\n", faith, kept);

    nlohmann::json nodes = nlohmann::json::array(), edges = nlohmann::json::array();
    for (size_t v = 0; v < r.nodes.size(); v++) {
        const gb::circuit_node& n = r.nodes[v];
        nodes.push_back({{"id", n.id}, {"kind", gb::circuit_kind_name(n.kind)},
                         {"layer", n.layer < 0 ? nlohmann::json() : nlohmann::json(n.layer)},
                         {"head", n.head < 0 ? nlohmann::json() : nlohmann::json(n.head)}, {"score", n.score},
                         {"in_circuit", in[v] != 0}});
    }
    for (int i = 0; i < shown; i++)
        edges.push_back({{"from", r.nodes[r.edges[i].from].id}, {"to", r.nodes[r.edges[i].to].id},
                         {"score", r.edges[i].score}});
    nlohmann::json j = {{"target", token_json(m, target)}, {"contrast", token_json(m, contrast)},
                        {"clean", r.clean}, {"corrupt", r.corrupt},
                        {"clean_tokens", tokens_json(m, clean)}, {"corrupt_tokens", tokens_json(m, corrupt)},
                        {"method", "edge attribution patching"}, {"n_edges", n_edges},
                        {"total_edges", (int)r.edges.size()}, {"nodes", nodes}, {"edges", edges},
                        {"circuit_metric", kept}, {"faithfulness", faith},
                        {"faithfulness_curve", faithfulness_curve(m, r, clean, ab)}, {"ms", r.ms}};
    j.update(knockouts_json(ab, notes));
    write_outputs(a, j, nullptr);
    return 0;
}

} // namespace cli
