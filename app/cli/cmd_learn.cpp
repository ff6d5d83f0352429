// glassbox-cli learn: the forward pass of one token step by step, with its formulas, shapes and numbers.
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/learn.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/seq2seq.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

// An encoder–decoder walks its decoder: the target's token (--target-text, or the greedy translation of --source),
// with the cross-attention step reading the source.
int cmd_learn(const args& a) {
    gb::model m = open_model(a);
    const bool s2s = gb::kind_info_of(m.config).input == gb::INPUT_SOURCE_TARGET;
    gb::session_request rq = read_input(a, m);
    const int L = m.config.n_layer;
    const int layer = (int)parse_int(a.get("layer", "0"), "--layer", 0, L - 1);
    const int head = (int)parse_int(a.get("head", "0"), "--head", 0, m.config.n_head - 1);
    rq.keep = gb::learn_keep(L, layer);
    const gb::session_result sr = run_once(m, rq);
    const gb::record& r = *sr.run; // an encoder–decoder's decoder
    const int T = r.n_tokens;
    const int token = (int)parse_int(a.get("token", std::to_string(T - 1)), "--token", 0, T - 1);
    const gb::learn_walk w = gb::walk_through(m, r, token, layer, head);
    std::printf("%stoken %d \"%s\", layer %d, head %d of %s\n\n", s2s ? "the decoder's " : "", token,
                visible(w.pieces[token]).c_str(), layer, head, m.config.model_type.c_str());
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < w.steps.size(); i++) {
        const gb::learn_step& st = w.steps[i];
        std::printf("%2zu. %s\n    %s\n    shape %s\n", i + 1, st.title.c_str(), st.formula.c_str(), st.shape.c_str());
        if (!st.values.empty()) {
            std::printf("    ");
            for (size_t v = 0; v < st.values.size(); v++) {
                if (st.labels.empty()) std::printf("%s%.4g", v ? " " : "", st.values[v]);
                else std::printf("%s\"%s\" %.4g", v ? ", " : "", visible(st.labels[v]).c_str(), st.values[v]);
            }
            if (st.labels.empty() && st.width > (int)st.values.size()) std::printf(" ... (%d values)", st.width);
            if (st.norm >= 0) std::printf("   |x| = %.4g", st.norm);
            std::printf("\n");
        }
        if (!st.note.empty()) std::printf("    %s\n", st.note.c_str());
        steps.push_back({{"title", st.title}, {"formula", st.formula}, {"shape", st.shape}, {"note", st.note},
                         {"panel", st.panel}, {"values", st.values}, {"labels", st.labels}, {"width", st.width},
                         {"norm", st.norm >= 0 ? nlohmann::json(st.norm) : nlohmann::json()}});
    }
    std::printf("\nParameters:\n");
    nlohmann::json params = nlohmann::json::array();
    for (const gb::param_line& p : gb::param_derivation(m)) {
        std::printf("  %-18s %14lld   %s\n", p.what.c_str(), (long long)p.count, p.formula.c_str());
        params.push_back({{"what", p.what}, {"formula", p.formula}, {"count", p.count}});
    }
    nlohmann::json j{{"token", token}, {"layer", layer}, {"head", head}, {"tokens", w.pieces},
                     {"merges", w.merges}, {"steps", steps}, {"params", params}};
    if (s2s) j["source_tokens"] = r.source_pieces;
    write_outputs(a, j, nullptr);
    return 0;
}

} // namespace cli
