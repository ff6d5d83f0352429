// glassbox-cli heads: every head's scores (previous token, first token, induction, duplicate token, entropy) on a
// prompt, repeated random tokens, an image, or an encoder–decoder's target.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/head_scores.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/seq2seq.h"
#include "util/error.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

namespace {

// --repeat-random N [--seed S]: N random tokens, twice (after BOS where the model's tokenizer adds one)
std::vector<int> repeated_random(const args& a, const gb::model& m) {
    refuse_unless(m, gb::FEATURE_INDUCTION_TEST, "--repeat-random");
    if (a.has("prompt")) throw usage_error("give --prompt or --repeat-random, not both");
    const int n = (int)parse_int(a.get("repeat-random"), "--repeat-random", 1, 1 << 20);
    const bool bos = a.has("bos") || m.tok.add_bos;
    if (a.has("bos") && m.tok.bos_id < 0) throw usage_error("--bos: this model's tokenizer has no BOS token (" + m.path + ")");
    if (2 * n + (bos && m.tok.bos_id >= 0) > m.config.n_ctx)
        throw gb::error("--repeat-random " + std::to_string(n) + ": twice that is longer than the model's context (" +
                        std::to_string(m.config.n_ctx) + ")");
    const uint64_t seed = (uint64_t)parse_int(a.get("seed", "0"), "--seed", 0, std::numeric_limits<long>::max());
    return gb::repeated_random_tokens(m.tok, m.config.vocab_size, n, seed, bos);
}

// The run whose heads are scored, and what its positions are: the prompt's (or the repeated random tokens'), an
// image's, or an encoder–decoder's decoder on its target (given, or the greedy translation of --source), the
// stack the lens and learn read too.
std::shared_ptr<const gb::record> scored_run(const args& a, const gb::model& m, std::string& positions) {
    const bool repeat = a.has("repeat-random");
    gb::session_request rq;
    if (repeat) {
        model_input(a, m); // (another kind's input option is refused by name)
        rq.tokens = repeated_random(a, m); // refuses a kind without the induction test
        rq.baseline = false;
    } else {
        if (a.has("seed")) throw usage_error("--seed goes with --repeat-random");
        rq = read_input(a, m);
    }
    with_backend(rq, a);
    const gb::kind_input in = gb::kind_info_of(m.config).input;
    positions = in == gb::INPUT_SOURCE_TARGET ? " target tokens (the decoder's self-attention)"
                : in == gb::INPUT_IMAGE       ? " positions of the image"
                : repeat                      ? " tokens (random tokens, repeated)"
                                              : " tokens";
    return run_once(m, rq).run;
}

} // namespace

int cmd_heads(const args& a) {
    gb::model m = open_model(a);
    std::string positions;
    const std::shared_ptr<const gb::record> run = scored_run(a, m, positions);
    const gb::record& r = *run;
    gb::head_scores s = gb::score_heads(r);
    std::printf("%d%s; the five heads that score highest on each (layer.head; entropy: the lowest, the most "
                "focused):\n", r.n_tokens, positions.c_str());
    for (int k = 0; k < gb::SCORE_COUNT; k++) {
        const gb::head_score_kind kind = (gb::head_score_kind)k;
        std::vector<int> order;
        for (int i = 0; i < s.n_layer * s.n_head; i++)
            if (std::isfinite(s.score[k][i])) order.push_back(i);
        // entropy: the most focused heads (lowest) are the interesting ones
        std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
            return kind == gb::SCORE_ENTROPY ? s.score[k][x] < s.score[k][y] : s.score[k][x] > s.score[k][y];
        });
        std::printf("  %-16s", (std::string(gb::head_score_name(kind)) + (kind == gb::SCORE_ENTROPY ? " (lowest)" : "")).c_str());
        if (order.empty()) std::printf(" (undefined: no token occurs twice)");
        for (size_t i = 0; i < order.size() && i < 5; i++)
            std::printf("  %d.%d %.3f", order[i] / s.n_head, order[i] % s.n_head, s.score[k][order[i]]);
        std::printf("\n");
    }
    write_outputs(a, gb::head_scores_json(s, r), [&](const std::string& d) { gb::write_head_scores_npy(d, s); });
    return 0;
}

} // namespace cli
