// GPT-2 small's published facts, checked on the loaded model (selftest.h).
#include "analysis/selftest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/head_scores.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gb {

int selftest_result::matched() const {
    return (int)std::count_if(facts.begin(), facts.end(), [](const selftest_fact& f) { return f.matched; });
}

static std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

static std::string head_name(int i, int H) { return "L" + std::to_string(i / H) + "H" + std::to_string(i % H); }

// Heads ordered by score k, highest first (undefined scores last)
static std::vector<int> ranked(const head_scores& s, head_score_kind k) {
    std::vector<int> order(s.score[k].size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int)i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        const float x = s.score[k][a], y = s.score[k][b];
        return std::isfinite(x) && (!std::isfinite(y) || x > y);
    });
    return order;
}

selftest_result gpt2_selftest(const model& m) {
    const model_config& c = m.config;
    if (c.arch != ARCH_GPT2 || c.n_layer != 12 || c.n_head != 12 || c.d_model != 768 || c.vocab_size != 50257)
        throw error("selftest checks facts published about GPT-2 small (gpt2, 12 layers, 12 heads, d_model 768, "
                    "vocabulary 50257); " + m.path + " is " + c.model_type + " with " + std::to_string(c.n_layer) +
                    " layers, " + std::to_string(c.n_head) + " heads, d_model " + std::to_string(c.d_model) +
                    ", vocabulary " + std::to_string(c.vocab_size));
    if (m.tok.bos_id < 0) throw error(m.path + ": the tokenizer has no BOS token (<|endoftext|>), which the facts use");
    selftest_result out;

    { // loss: each position predicts the next token, natural log, averaged
        const std::vector<int> ids = encode_prompt(m.tok, "Hello world!", true);
        record r;
        forward_options o;
        o.all_logits = true;
        o.keep.points = 0;
        run_forward(r, m, ids, {}, o);
        const int V = c.vocab_size, T = (int)ids.size();
        double loss = 0;
        std::vector<double> lp;
        for (int t = 0; t + 1 < T; t++) {
            log_softmax(lp, &r.logits[(size_t)t * V], V);
            loss -= lp[ids[t + 1]];
        }
        loss /= T - 1;
        out.facts.push_back({"mean loss on \"Hello world!\" after BOS", "5.3319 nats (within 0.01)", fmt("%.4f nats", loss),
                             std::fabs(loss - 5.3319) <= 0.01});
    }
    { // head scores on the induction test prompt
        const std::vector<int> ids = repeated_random_tokens(m.tok, c.vocab_size, 50, 0, true);
        record r;
        run_forward(r, m, ids);
        const head_scores s = score_heads(r);
        const std::vector<int> prev = ranked(s, SCORE_PREV_TOKEN), ind = ranked(s, SCORE_INDUCTION);
        const int H = c.n_head, l4h11 = 4 * H + 11, l5h5 = 5 * H + 5;
        out.facts.push_back({"top previous-token head", "L4H11",
                             head_name(prev[0], H) + fmt(" (%.3f)", s.score[SCORE_PREV_TOKEN][prev[0]]) +
                                 fmt("; L4H11 scores %.3f", s.score[SCORE_PREV_TOKEN][l4h11]),
                             prev[0] == l4h11});
        std::string top5;
        for (int i = 0; i < 5; i++) top5 += (i ? ", " : "") + head_name(ind[i], H);
        out.facts.push_back({"L5H5 among the five top induction heads", "L5H5 in the top 5",
                             top5 + fmt("; L5H5 scores %.3f", s.score[SCORE_INDUCTION][l5h5]),
                             std::find(ind.begin(), ind.begin() + 5, l5h5) != ind.begin() + 5});
    }
    { // a fact the model knows
        const std::vector<int> ids = encode_prompt(m.tok, "The Eiffel Tower is in the city of", false);
        record r;
        forward_options o;
        o.keep.points = 0;
        run_forward(r, m, ids, {}, o);
        int top = 0;
        top_k_ids(&top, r.last_logits(), c.vocab_size, 1);
        const std::vector<int> paris = encode(m.tok, " Paris");
        out.facts.push_back({"top prediction after \"The Eiffel Tower is in the city of\"", "\" Paris\"",
                             "\"" + token_text(m.tok, top) + "\"", paris.size() == 1 && top == paris[0]});
    }
    return out;
}

} // namespace gb
