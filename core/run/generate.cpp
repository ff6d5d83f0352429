// Sampling (greedy, temperature, top-k, top-p) and generation through the KV cache.
#include "run/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/softmax.h"
#include "run/forward.h"
#include "util/error.h"
#include "util/timing.h"

namespace gb {

using clock_type = std::chrono::steady_clock;
// uniform double in [0,1) from 53 random bits: identical on every platform, unlike std distributions
static double uniform01(std::mt19937_64& rng) { return (double)(rng() >> 11) * (1.0 / 9007199254740992.0); }

// The tokens sampling may pick (idx [keep], most probable first) and their weights exp((logit - max) / T), whose sum
// is *sum: shared by sample_token and sampling_distribution, so that the distribution shown is the one drawn from.
static void kept_weights(std::vector<int>& idx, std::vector<double>& p, double* sum, const float* logits_in, int vocab,
                         const sampling& sp) {
    std::vector<float> clean; // NaN as -inf, as softmax_probs: the sort below needs a strict order
    clean_logits(clean, logits_in, vocab);
    const float* logits = clean.data();
    idx.resize(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    int keep = sp.top_k > 0 ? std::min(sp.top_k, vocab) : vocab;
    // only the kept prefix needs ordering (the same prefix a full sort gives: ties broken by id)
    std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(),
                      [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    p.resize(keep);
    *sum = 0;
    for (int i = 0; i < keep; i++) {
        p[i] = std::exp(((double)logits[idx[i]] - logits[idx[0]]) / sp.temperature);
        *sum += p[i];
    }
    if (sp.top_p > 0.0f && sp.top_p < 1.0f) { // smallest prefix whose mass reaches top_p
        double cum = 0;
        int cut = keep;
        for (int i = 0; i < keep; i++) {
            cum += p[i] / *sum;
            if (cum >= sp.top_p) {
                cut = i + 1;
                break;
            }
        }
        keep = cut;
        p.resize(keep);
        *sum = std::accumulate(p.begin(), p.end(), 0.0);
    }
    idx.resize(keep);
}

// greedy: the first largest logit, NaN counting as -inf (no copy per token); id 0 when none is above -inf
static int greedy_token(const float* logits, int vocab) {
    int best = -1; // stays -1 while every logit seen is NaN or -inf; then all are equally likely: id 0
    for (int i = 0; i < vocab; i++) {
        const float x = logits[i];
        if (!std::isnan(x) && (best < 0 ? x > -std::numeric_limits<float>::infinity() : x > logits[best])) best = i;
    }
    return best < 0 ? 0 : best;
}

int sample_token(const float* logits, int vocab, const sampling& sp, std::mt19937_64& rng) {
    if (sp.temperature <= 0.0f) return greedy_token(logits, vocab);
    std::vector<int> idx;
    std::vector<double> p;
    double sum = 0;
    kept_weights(idx, p, &sum, logits, vocab, sp);
    const int keep = (int)idx.size();
    double r = uniform01(rng) * sum;
    for (int i = 0; i < keep; i++) {
        r -= p[i];
        if (r < 0) return idx[i];
    }
    return idx[keep - 1];
}

void sampling_distribution(sampling_dist& out, const float* logits, int vocab, const sampling& sp) {
    if (sp.temperature <= 0.0f) {
        out.ids = {greedy_token(logits, vocab)};
        out.probs = {1.0};
        return;
    }
    double sum = 0;
    kept_weights(out.ids, out.probs, &sum, logits, vocab, sp);
    for (double& p : out.probs) p /= sum;
}

generation generate(const model& m, const std::vector<int>& prompt, int max_new, const sampling& sp,
                    const ablation& ab, const std::function<bool(int)>& on_token,
                    const std::vector<intervention>& extra) {
    auto t_start = clock_type::now();
    generation g;
    if (prompt.empty()) throw error("empty prompt: nothing to continue");
    if (arch_table(m.config.arch).bidirectional)
        throw error(std::string(arch_table(m.config.arch).name) +
                    " is an encoder: it fills masked tokens (fill mask), it does not generate text");
    if (arch_table(m.config.arch).cross)
        throw error(std::string(arch_table(m.config.arch).name) +
                    " is an encoder–decoder: it translates a source text (generate --source), it does not continue a prompt");
    if ((int)prompt.size() > m.config.n_ctx)
        throw error("prompt too long: " + std::to_string(prompt.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    if (max_new < 0) throw error("max new tokens must be >= 0");
    int n_ctx = std::min<int64_t>(m.config.n_ctx, (int64_t)prompt.size() + max_new);
    forward_state s;
    state_init(s, m.config, n_ctx);
    forward_options opt;
    opt.interventions = ablation_interventions(ab, m.config);
    opt.interventions.insert(opt.interventions.end(), extra.begin(), extra.end());
    std::vector<float> logits;
    std::mt19937_64 rng(sp.seed);
    eval(logits, nullptr, s, m, prompt.data(), (int)prompt.size(), opt); // the prompt once
    for (int i = 0; i < max_new; i++) {
        int next = sample_token(logits.data(), m.config.vocab_size, sp, rng);
        if (next == m.tok.eos_id) {
            g.hit_eos = true;
            break;
        }
        g.ids.push_back(next);
        if (on_token && !on_token(next)) break;
        if (i + 1 == max_new || s.n_past >= s.n_ctx) break; // done, or the context is full
        eval(logits, nullptr, s, m, &next, 1, opt);       // one new token through the cache
    }
    g.ms = ms_since(t_start);
    return g;
}

temperature_run run_at_temperature(const model& m, const std::vector<int>& prompt, const float* last_logits, int vocab,
                                   sampling sp, float t, int max_new, const ablation& ab,
                                   const std::function<bool(int)>& on_token,
                                   const std::vector<intervention>& extra) {
    temperature_run run;
    run.temperature = sp.temperature = t;
    sampling_distribution(run.dist, last_logits, vocab, sp);
    const generation g = generate(m, prompt, max_new, sp, ab, on_token, extra);
    run.ids = g.ids, run.hit_eos = g.hit_eos;
    run.text = utf8_sanitize(decode(m.tok, g.ids));
    return run;
}

} // namespace gb
