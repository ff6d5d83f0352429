// glassbox-cli intervene: set, clamp or ablate transcoder features at (layer, position) in the replacement model,
// with attention frozen or not, and print the next-token distribution before and after (docs/graphs.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "analysis/graph_intervene.h"
#include "analysis/replacement.h"
#include "args.h"
#include "commands.h"
#include "io/transcoders.h"

namespace cli {
namespace {

std::vector<double> softmax(const std::vector<float>& logits) {
    const double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(logits.size());
    double z = 0;
    for (size_t i = 0; i < p.size(); i++) z += p[i] = std::exp((double)logits[i] - mx);
    for (double& x : p) x /= z;
    return p;
}

std::vector<int> top(const std::vector<double>& p, int k) {
    std::vector<int> ids(p.size());
    std::iota(ids.begin(), ids.end(), 0);
    k = std::min<int>(k, (int)p.size());
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    ids.resize(k);
    return ids;
}

} // namespace

int cmd_intervene(const args& a) {
    gb::model m = open_model(a);
    const gb::transcoder_set t = gb::read_transcoders(transcoders_arg(a, m));
    const std::vector<int> tokens = prompt_ids(m, a.need("prompt"), a.has("bos"));
    const bool bos = (a.has("bos") || m.tok.add_bos) && !tokens.empty() && m.tok.bos_id >= 0 && tokens[0] == m.tok.bos_id;
    const int T = (int)tokens.size();
    std::vector<gb::graph_edit> edits;
    gb::parse_graph_edits(edits, a.get("set"), true, "--set", t, T);
    gb::parse_graph_edits(edits, a.get("ablate"), false, "--ablate", t, T);
    if (edits.empty()) throw usage_error("intervene needs --set or --ablate (see glassbox-cli intervene --help)");
    const int K = (int)parse_int(a.get("top-k", "10"), "--top-k", 1, m.config.vocab_size);
    const bool frozen = a.has("freeze-attention");
    const gb::replacement r = gb::build_replacement(m, t, tokens, bos);
    const std::vector<float> after = gb::intervene_logits(m, t, r, edits, frozen);
    const std::vector<double> p0 = softmax(r.logits), p1 = softmax(after);
    std::printf("%zu edit%s, attention %s:", edits.size(), edits.size() == 1 ? "" : "s", frozen ? "frozen" : "recomputed");
    for (const gb::graph_edit& e : edits)
        std::printf(" L%d:%s:#%d=%g", e.layer, e.pos < 0 ? "*" : std::to_string(e.pos).c_str(), e.index, e.value);
    std::printf("\n%-24s %-10s %-10s %s\n", "token", "before", "after", "change");
    nlohmann::json before = nlohmann::json::array(), after_j = nlohmann::json::array();
    for (int id : top(p0, K)) {
        std::printf("%-24s %-10.4f %-10.4f %+.4f\n", padded(quoted(m, id), 24).c_str(), p0[id], p1[id], p1[id] - p0[id]);
        before.push_back({{"id", id}, {"text", gb::token_text(m.tok, id)}, {"prob", p0[id]}, {"prob_after", p1[id]}});
    }
    std::printf("after:");
    for (int id : top(p1, K)) {
        std::printf(" %s %.4f", quoted(m, id).c_str(), p1[id]);
        after_j.push_back({{"id", id}, {"text", gb::token_text(m.tok, id)}, {"prob", p1[id]}, {"prob_before", p0[id]}});
    }
    std::printf("\n");
    nlohmann::json ej = nlohmann::json::array();
    for (const gb::graph_edit& e : edits)
        ej.push_back({{"layer", e.layer}, {"position", e.pos < 0 ? nlohmann::json() : nlohmann::json(e.pos)},
                      {"feature", e.index}, {"value", e.value}});
    const nlohmann::json j = {{"tokens", tokens}, {"edits", ej}, {"freeze_attention", frozen},
                              {"before", before}, {"after", after_j}};
    write_outputs(a, j, nullptr);
    return 0;
}

} // namespace cli
