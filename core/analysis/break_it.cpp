// "Break it" (break_it.h): the baseline, then one run per ablation; numbers from kernels/softmax.h, sentences from them.
#include "analysis/break_it.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/softmax.h"
#include "run/forward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gb {

const char* break_kind_name(break_kind k) {
    static const char* names[] = {"no_attention", "no_layernorm", "no_residual", "layer_attention", "head"};
    return names[k];
}

namespace {

// What one run leaves for the table: the last position's logits [V] and the last token's norm after the last layer.
struct last_state {
    std::vector<float> logits; // [V]
    float norm = 0;
};

last_state run_last(const model& m, const std::vector<int>& ids, const ablation& ab, const std::function<bool()>& cancelled) {
    if (cancelled && cancelled()) throw gb::cancelled();
    forward_options o;
    o.keep.points = 0;         // no pattern or activation: only the logits and the norms are read
    o.keep.resid_norms = true; // [2L+1][T]
    o.cancelled = cancelled;
    record r;
    run_forward(r, m, ids, ab, o);
    last_state s;
    s.logits.assign(r.last_logits(), r.last_logits() + r.vocab);
    const int T = r.n_tokens;
    s.norm = r.resid_norm[(size_t)2 * r.n_layer * T + T - 1];
    return s;
}

// the probability of the top-1 of a logits row, and its id
int top1(const std::vector<float>& logits, float* prob) {
    const std::vector<token_prob> t = top_k_probs(logits.data(), (int)logits.size(), 1);
    *prob = t[0].prob;
    return t[0].id;
}

// "‘ mat’": the token's text in quotes, a newline or tab shown as ↵ or →, other control bytes as \xNN (one line)
std::string quote(const tokenizer& tok, int id) {
    std::string out = "\u2018";
    for (unsigned char c : token_text(tok, id)) {
        if (c == '\n') out += "\u21b5";
        else if (c == '\t') out += "\u2192";
        else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else out += (char)c;
    }
    return out + "\u2019";
}

// 312, 4.12, 0.0523 (three digits); 1234 rather than 1.23e+03; inf and nan as they are
std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, std::isfinite(v) && std::fabs(v) >= 1000 && std::fabs(v) < 1e9 ? "%.0f" : "%.3g", v);
    return b;
}

// a probability as a percentage: 34 %, 3.2 %, 0.052 %, < 0.001 %
std::string pct(double p) {
    char b[32];
    const double x = 100 * p;
    if (x > 0 && x < 0.001) return "< 0.001 %";
    std::snprintf(b, sizeof b, x >= 9.95 ? "%.0f %%" : x >= 0.995 ? "%.1f %%" : "%.2g %%", x);
    return b;
}

// The row's sentence: what was removed, what happened to the last token's vector, to the prediction, and the KL.
std::string explain(const break_row& r, const break_result& b, const tokenizer& tok) {
    std::string s;
    switch (r.kind) {
    case BREAK_NO_ATTENTION: s = "Without attention (no token can read another)"; break;
    case BREAK_NO_LAYERNORM: s = "Without layer norm"; break;
    case BREAK_NO_RESIDUAL: s = "Without residual connections"; break;
    case BREAK_LAYER_ATTENTION: s = "Without layer " + std::to_string(r.layer) + "'s attention"; break;
    case BREAK_HEAD: s = "Without head " + std::to_string(r.layer) + "." + std::to_string(r.head); break;
    }
    const double n0 = b.base_resid_norm, n1 = r.resid_norm;
    s += ", the last token's vector ";
    if (!std::isfinite(n1)) s += "blows up (from " + num(n0) + " to " + num(n1) + ")";
    else if (n1 > 1.15 * n0) s += "grows from " + num(n0) + " to " + num(n1);
    else if (n1 < n0 / 1.15) s += "shrinks from " + num(n0) + " to " + num(n1);
    else s += "changes little (" + num(n0) + " \u2192 " + num(n1) + ")";
    const std::string base = quote(tok, b.base_top_id);
    if (r.top_id == b.base_top_id) {
        const double d = r.top_prob - b.base_top_prob;
        s += " and the prediction stays " + base + (std::fabs(d) < 0.005 ? " (" + pct(b.base_top_prob) + " \u2192 " + pct(r.top_prob) + ")"
                                                    : std::string(d > 0 ? ", rising" : ", falling") + " from " +
                                                          pct(b.base_top_prob) + " to " + pct(r.top_prob));
    } else {
        s += " and the prediction moves from " + base + " (" + pct(b.base_top_prob) + ") to " + quote(tok, r.top_id) + " (" +
             pct(r.top_prob) + "), " + base + " now " + pct(r.base_top_prob);
    }
    s += ": KL " + num(r.kl) + " nats" + (r.kl < 0.005 ? ", almost nothing changed." : ".");
    return s;
}

// true when KL a ranks before KL b: larger first, NaN (a broken run) after every number
bool kl_before(float a, float b) { return std::isnan(b) ? !std::isnan(a) : a > b; }

} // namespace

break_result break_it(const model& m, const std::vector<int>& ids, const break_options& opt) {
    const model_config& c = m.config;
    const int L = c.n_layer, H = c.n_head, V = c.vocab_size;
    if (ids.empty()) throw error("break it: the prompt is empty: nothing to run");
    require(m, FEATURE_BREAK_IT);
    if ((int)ids.size() > c.n_ctx)
        throw error("break it: the prompt has " + std::to_string(ids.size()) + " tokens, more than the model's context of " +
                    std::to_string(c.n_ctx));
    for (int id : ids)
        if (id < 0 || id >= V)
            throw error("break it: token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
    const int n_heads = std::max(0, std::min(opt.n_heads, L * H));
    const int scan = std::min(L * H, std::max(opt.max_head_scan, n_heads));
    const int total = 1 + 3 + L + scan + n_heads; // runs, for the progress
    int done = 0;
    auto step = [&] {
        if (opt.progress) opt.progress((float)++done / total);
    };

    break_result b;
    b.tokens = ids;
    b.n_layer = L, b.n_head = H;
    const last_state base = run_last(m, ids, {}, opt.cancelled);
    step();
    b.base_top_id = top1(base.logits, &b.base_top_prob);
    b.base_resid_norm = base.norm;

    // one row: run with its ablation, compare with the baseline
    auto add_row = [&](break_kind kind, int layer, int head, const ablation& ab, std::string label) {
        const last_state s = run_last(m, ids, ab, opt.cancelled);
        step();
        break_row r;
        r.kind = kind, r.layer = layer, r.head = head, r.ab = ab, r.label = std::move(label);
        r.top_id = top1(s.logits, &r.top_prob);
        r.base_top_prob = softmax_prob(softmax_stats(s.logits.data(), V), s.logits.data(), V, b.base_top_id);
        r.kl = kl_divergence(base.logits.data(), s.logits.data(), V);
        r.resid_norm = s.norm;
        r.explanation = explain(r, b, m.tok);
        b.rows.push_back(std::move(r));
    };
    ablation ab;
    ab.no_attention.on = true;
    add_row(BREAK_NO_ATTENTION, -1, -1, ab, "no attention (all layers)");
    ab = {};
    ab.no_layernorm.on = true;
    add_row(BREAK_NO_LAYERNORM, -1, -1, ab, "no layer norm (all layers)");
    ab = {};
    ab.no_residual.on = true;
    add_row(BREAK_NO_RESIDUAL, -1, -1, ab, "no residual (all layers)");
    for (int l = 0; l < L; l++) {
        ab = {};
        ab.no_attention.on = true;
        ab.no_attention.layers = {l};
        add_row(BREAK_LAYER_ATTENTION, l, -1, ab, "no attention in layer " + std::to_string(l));
    }

    // the heads: every one alone when there are few enough; else those of the layers whose attention matters most
    std::vector<int> scanned; // l * H + h
    if (scan == L * H) {
        for (int i = 0; i < L * H; i++) scanned.push_back(i);
    } else {
        std::vector<int> layers(L);
        for (int l = 0; l < L; l++) layers[l] = l;
        std::stable_sort(layers.begin(), layers.end(), [&](int x, int y) {
            return kl_before((float)b.rows[3 + x].kl, (float)b.rows[3 + y].kl);
        });
        int n_layers = 0;
        for (int l : layers) {
            if ((int)scanned.size() >= scan) break;
            for (int h = 0; h < H && (int)scanned.size() < scan; h++) scanned.push_back(l * H + h);
            n_layers++;
        }
        b.note = "this model has " + std::to_string(L * H) + " heads: the scan removed " + std::to_string(scan) +
                 " of them, those of the " + std::to_string(n_layers) + " layer" + (n_layers == 1 ? "" : "s") +
                 " whose attention matters most (the layer rows' KL)";
    }
    b.head_kl.assign((size_t)L * H, NAN);
    for (int i : scanned) {
        ab = {};
        ab.heads = {{i / H, i % H}};
        const last_state s = run_last(m, ids, ab, opt.cancelled);
        step();
        b.head_kl[i] = (float)kl_divergence(base.logits.data(), s.logits.data(), V);
    }
    b.heads_scanned = (int)scanned.size();
    std::stable_sort(scanned.begin(), scanned.end(), [&](int x, int y) { return kl_before(b.head_kl[x], b.head_kl[y]); });
    for (int k = 0; k < n_heads && k < (int)scanned.size(); k++) {
        const int l = scanned[k] / H, h = scanned[k] % H;
        ab = {};
        ab.heads = {{l, h}};
        add_row(BREAK_HEAD, l, h, ab, "head " + std::to_string(l) + "." + std::to_string(h));
    }
    return b;
}

int most_confident_prompt(const model& m, const std::vector<prompt_candidate>& candidates, bool bos,
                          const std::function<bool()>& cancelled) {
    if (candidates.empty()) throw error("no candidate prompts to choose from");
    int best_right = -1, best_any = -1;
    float p_right = -1, p_any = -1;
    for (size_t i = 0; i < candidates.size(); i++) {
        const std::vector<int> ids = encode_prompt(m.tok, candidates[i].text, bos);
        if (ids.empty() || (int)ids.size() > m.config.n_ctx) continue; // cannot run here
        const last_state s = run_last(m, ids, {}, cancelled);
        float p = 0;
        const int top = top1(s.logits, &p);
        const std::vector<int> answer = encode(m.tok, candidates[i].answer);
        if (answer.size() == 1 && answer[0] == top && p > p_right) best_right = (int)i, p_right = p;
        if (best_any < 0 || p > p_any || (std::isnan(p_any) && !std::isnan(p))) best_any = (int)i, p_any = p; // NaN: a broken run
    }
    if (best_any < 0)
        throw error("none of the " + std::to_string(candidates.size()) + " candidate prompts fits the model's context of " +
                    std::to_string(m.config.n_ctx) + " tokens");
    return best_right >= 0 ? best_right : best_any;
}

} // namespace gb
