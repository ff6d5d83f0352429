// Causal tracing on the hook points: the subject's embeddings noised by INTERVENE_SET at residual point 0, each
// restored cell one more SET, resuming the corrupted run at the restored point (analysis/patching.h).
#include "analysis/trace.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "analysis/patching.h"
#include "kernels/softmax.h"
#include "model/quant.h"
#include "util/error.h"

namespace gb {

void subject_span(int& first, int& end, const tokenizer& tok, const std::vector<int>& tokens, const std::string& subject) {
    if (subject.empty()) throw error("trace: the subject is empty (--subject TEXT: words of the prompt)");
    std::string text;
    std::vector<size_t> starts; // [T + 1] each token's first byte in text
    for (int id : tokens) starts.push_back(text.size()), text += token_bytes(tok, id);
    starts.push_back(text.size());
    const size_t at = text.find(subject);
    if (at == std::string::npos) throw error("trace: the subject \"" + subject + "\" is not in the prompt \"" + text + "\"");
    first = 0;
    while (starts[first + 1] <= at) first++;
    end = first + 1;
    while (end < (int)tokens.size() && starts[end] < at + subject.size()) end++;
}

double embedding_std(const model& m) {
    const row_table& e = m.weights.tok_emb;
    const int V = m.config.vocab_size, d = m.config.d_model;
    std::vector<float> row(d);
    double sum = 0, sq = 0;
    for (int v = 0; v < V; v++) {
        table_row(row.data(), e, v);
        for (float x : row) sum += x, sq += (double)x * x;
    }
    const double n = (double)V * d, mean = sum / n;
    return std::sqrt(std::max(0.0, sq / n - mean * mean));
}

std::vector<float> trace_noise(int rows, int d, double sigma, uint64_t seed, int sample) {
    std::mt19937_64 rng(seed * 1000003u + (uint64_t)sample);
    auto uniform = [&] { return ((double)(rng() >> 11) + 0.5) * 0x1.0p-53; }; // in (0, 1)
    std::vector<float> out((size_t)rows * d);
    for (size_t i = 0; i < out.size(); i += 2) { // Box–Muller: two normal draws from two uniform ones
        const double r = std::sqrt(-2.0 * std::log(uniform())), a = 6.283185307179586 * uniform();
        out[i] = (float)(sigma * r * std::cos(a));
        if (i + 1 < out.size()) out[i + 1] = (float)(sigma * r * std::sin(a));
    }
    return out;
}

namespace {

// p(target) from the last position's logits [V]
double prob_of(const std::vector<float>& logits, int V, int target) {
    return softmax_prob(softmax_stats(logits.data(), V), logits.data(), V, target);
}

// One noise sample's corrupted run, kept for its restored runs to resume
struct corrupted {
    resumable_run x;
    std::vector<float> noised; // [end - first][d] the subject's embeddings with the noise added
    std::vector<float> lg;     // the latest run's logits
    double prob = 0;           // p(target) of the corrupted run itself
};

// Whether row t of a point (a [T][d] tensor) is the same in the clean and the corrupted run
bool same_row(const float* clean, const float* corrupt, int t, int d) {
    return std::memcmp(clean + (size_t)t * d, corrupt + (size_t)t * d, d * sizeof(float)) == 0;
}

struct trace_run {
    const model& m;
    const std::vector<int>& tokens;
    const record& clean;   // the clean run's stream, attn_out and mlp_out
    trace_result& out;
    std::function<bool()> step; // counts one cell; false: stop
};

// One restored cell: the corrupted run with iv, resumed at point p from position t; p(target), counted in runs
double restored(trace_run& r, corrupted& c, int p, int t, const intervention& iv) {
    resumable_patch(c.lg, c.x, r.m, r.tokens, p, t, {iv});
    r.out.runs++;
    return prob_of(c.lg, r.m.config.vocab_size, r.out.target);
}

// Adds sample c's cells / n_samples to out.resid (and out.attn, out.mlp)
void trace_sample(trace_run& r, corrupted& c, int n_samples, bool sublayers) {
    const model_config& cf = r.m.config;
    const int L = cf.n_layer, T = r.out.n_tokens, d = cf.d_model, P = 2 * L + 1;
    std::vector<float> cell((size_t)P * T); // this sample's p(target) at each restored (point, position)
    for (int p = 0; p < P && r.out.complete; p++) {
        intervention iv{INTERVENE_SET, HOOK_RESID_PRE, 0};
        resid_point_hook(p, iv.point, iv.layer);
        for (int t = 0; t < T && r.out.complete; t++) {
            float& v = cell[(size_t)p * T + t];
            if (same_row(r.clean.resid(p), c.x.rec.resid(p), t, d)) v = (float)c.prob; // nothing to restore
            else if (p > 0 && p % 2 == 0 && !cf.parallel) v = cell[(size_t)(p - 1) * T + t]; // the MLP reads this row alone
            else iv.position = t, iv.values = r.clean.resid(p) + (size_t)t * d, v = (float)restored(r, c, p, t, iv);
            r.out.resid[(size_t)p * T + t] += v / n_samples;
            if (!r.step()) r.out.complete = false;
        }
    }
    if (!sublayers) return;
    for (int l = 0; l < L && r.out.complete; l++)
        for (int k = 0; k < 2 && r.out.complete; k++) { // attention, then the MLP
            const hook_point hp = k == 0 ? HOOK_ATTN_OUT : HOOK_MLP_OUT;
            // a parallel block's MLP reads the layer's input: its run resumes at the layer's start
            const int p = k == 0 || cf.parallel ? 2 * l : 2 * l + 1;
            std::vector<float>& grid = k == 0 ? r.out.attn : r.out.mlp;
            intervention iv{INTERVENE_SET, hp, l};
            for (int t = 0; t < T && r.out.complete; t++) {
                const float* want = r.clean.get(hp, l);
                double v = c.prob;
                if (!same_row(want, c.x.rec.get(hp, l), t, d))
                    iv.position = t, iv.values = want + (size_t)t * d, v = restored(r, c, p, t, iv);
                grid[(size_t)l * T + t] += (float)(v / n_samples);
                if (!r.step()) r.out.complete = false;
            }
        }
}

} // namespace

trace_result causal_trace(const model& m, const std::vector<int>& tokens, int first, int end, const trace_options& opt,
                          const std::function<bool(float)>& progress) {
    const auto t_start = std::chrono::steady_clock::now();
    const model_config& c = m.config;
    require(m, FEATURE_TRACE);
    const int L = c.n_layer, T = (int)tokens.size(), d = c.d_model, V = c.vocab_size, P = 2 * L + 1;
    if (T == 0) throw error("trace: the prompt is empty");
    if (T > c.n_ctx) throw error("trace: prompt too long: " + std::to_string(T) + " tokens, the model's context is " + std::to_string(c.n_ctx));
    if (first < 0 || end > T || first >= end)
        throw error("trace: the subject's tokens [" + std::to_string(first) + ", " + std::to_string(end) +
                    ") are not inside the prompt's " + std::to_string(T));
    if (!(opt.noise >= 0)) throw error("trace: --noise must be 0 or more");
    if (opt.samples < 1) throw error("trace: --samples must be at least 1");
    trace_result out;
    out.n_layer = L, out.n_tokens = T, out.subject_first = first, out.subject_end = end;
    out.samples = opt.samples, out.seed = opt.seed;
    out.embed_std = embedding_std(m);
    out.sigma = opt.noise * out.embed_std;

    // the clean run: its stream and sublayer outputs, and its answer (the top-1 at the last position)
    record_request keep;
    keep.points = opt.sublayers ? hook_bit(HOOK_ATTN_OUT) | hook_bit(HOOK_MLP_OUT) : 0;
    forward_options base;
    base.interventions = ablation_interventions(opt.ab, c);
    base.attention = opt.attention;
    resumable_run clean;
    clean.base = base;
    std::vector<float> lg;
    resumable_start(lg, clean, m, tokens, keep);
    out.target = top_k_probs(lg.data(), V, 1)[0].id;
    out.clean_prob = prob_of(lg, V, out.target);

    out.resid.assign((size_t)P * T, 0.0f);
    if (opt.sublayers) out.attn.assign((size_t)L * T, 0.0f), out.mlp.assign((size_t)L * T, 0.0f);
    const int cells = P * T + (opt.sublayers ? 2 * L * T : 0), total = cells * opt.samples;
    int done = 0;
    trace_run r{m, tokens, clean.rec, out, [&] { return !progress || progress((float)++done / total); }};
    for (int s = 0; s < opt.samples && out.complete; s++) {
        corrupted cr;
        cr.x.base = base;
        const std::vector<float> noise = trace_noise(end - first, d, out.sigma, opt.seed, s);
        cr.noised.assign(clean.rec.resid(0) + (size_t)first * d, clean.rec.resid(0) + (size_t)end * d);
        for (size_t i = 0; i < noise.size(); i++) cr.noised[i] += noise[i];
        for (int t = first; t < end; t++) { // the noised embeddings, one SET per subject token, before the restores
            intervention iv{INTERVENE_SET, HOOK_RESID_PRE, 0};
            iv.position = t;
            iv.values = &cr.noised[(size_t)(t - first) * d];
            cr.x.base.interventions.push_back(iv);
        }
        resumable_start(cr.lg, cr.x, m, tokens, keep);
        cr.prob = prob_of(cr.lg, V, out.target);
        out.corrupt_prob += cr.prob / opt.samples;
        trace_sample(r, cr, opt.samples, opt.sublayers);
    }
    if (!out.complete) { // what a stopped trace did not reach is not a number
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (auto* v : {&out.resid, &out.attn, &out.mlp}) std::fill(v->begin(), v->end(), nan);
    }
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    return out;
}

} // namespace gb
