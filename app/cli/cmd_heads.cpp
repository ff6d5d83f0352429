// glassbox-cli heads: every head's scores (previous token, first token, induction, duplicate token, entropy).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/head_scores.h"
#include "model/model.h"
#include "run/forward.h"
#include "util/error.h"

#include "args.h"
#include "commands.h"

namespace cli {

int cmd_heads(const args& a) {
    gb::model m = open_model(a);
    std::vector<int> ids;
    if (a.has("repeat-random")) {
        if (a.has("prompt")) throw usage_error("give --prompt or --repeat-random, not both");
        const int n = (int)parse_int(a.get("repeat-random"), "--repeat-random", 1, 1 << 20);
        const bool bos = a.has("bos") || m.tok.add_bos;
        if (a.has("bos") && m.tok.bos_id < 0) throw usage_error("--bos: this model's tokenizer has no BOS token (" + m.path + ")");
        if (2 * n + (bos && m.tok.bos_id >= 0) > m.config.n_ctx)
            throw gb::error("--repeat-random " + std::to_string(n) + ": twice that is longer than the model's context (" +
                            std::to_string(m.config.n_ctx) + ")");
        const uint64_t seed = (uint64_t)parse_int(a.get("seed", "0"), "--seed", 0, std::numeric_limits<long>::max());
        ids = gb::repeated_random_tokens(m.tok, m.config.vocab_size, n, seed, bos);
    } else {
        if (a.has("seed")) throw usage_error("--seed goes with --repeat-random");
        ids = analysis_prompt(m, a);
    }
    gb::forward_options opt;
    opt.attention = choose_backend(a);
    gb::record r;
    gb::run_forward(r, m, ids, {}, opt);
    gb::head_scores s = gb::score_heads(r);
    std::printf("%d tokens%s; the highest-scoring heads (layer.head):\n", r.n_tokens,
                a.has("repeat-random") ? " (random tokens, repeated)" : "");
    for (int k = 0; k < gb::SCORE_COUNT; k++) {
        const gb::head_score_kind kind = (gb::head_score_kind)k;
        std::vector<int> order;
        for (int i = 0; i < s.n_layer * s.n_head; i++)
            if (std::isfinite(s.score[k][i])) order.push_back(i);
        // entropy: the most focused heads (lowest) are the interesting ones
        std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
            return kind == gb::SCORE_ENTROPY ? s.score[k][x] < s.score[k][y] : s.score[k][x] > s.score[k][y];
        });
        std::printf("  %-16s", gb::head_score_name(kind));
        if (order.empty()) std::printf(" (undefined: no token occurs twice)");
        for (size_t i = 0; i < order.size() && i < 5; i++)
            std::printf("  %d.%d %.3f", order[i] / s.n_head, order[i] % s.n_head, s.score[k][order[i]]);
        std::printf("\n");
    }
    write_outputs(a, gb::head_scores_json(s, r), [&](const std::string& d) { gb::write_head_scores_npy(d, s); });
    return 0;
}

} // namespace cli
