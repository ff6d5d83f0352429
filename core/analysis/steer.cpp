// Steering vectors: the contrastive vector, side-by-side continuations, and the cost sweep.
//
// Sections: the contrastive vector | continuations side by side | the cost sweep
#include "analysis/steer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/softmax.h"
#include "run/forward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/timing.h"

namespace gb {

steer_position parse_steer_position(const std::string& s) {
    if (s == "last") return STEER_LAST;
    if (s == "mean") return STEER_MEAN;
    throw error("position '" + s + "': expected last or mean");
}

// ---------------------------------------------------------------------------------------------
// The contrastive vector
// ---------------------------------------------------------------------------------------------
// sum [layers][d] += each prompt's resid_post row at each layer (its last, or the mean of its rows)
static void accumulate(std::vector<std::vector<double>>& sum, const model& m, const std::vector<std::vector<int>>& prompts,
                       const std::vector<int>& layers, steer_position where, const std::function<bool()>& cancelled,
                       const char* side) {
    const model_config& c = m.config;
    const int d = c.d_model;
    forward_options o;
    o.keep.points = hook_bit(HOOK_RESID_POST);
    o.keep.resid_norms = false;
    o.keep.layers.assign(c.n_layer, 0);
    for (int l : layers) o.keep.layers[l] = 1;
    o.cancelled = cancelled;
    for (size_t p = 0; p < prompts.size(); p++) {
        const std::vector<int>& ids = prompts[p];
        if (ids.empty()) throw error(std::string(side) + " prompt " + std::to_string(p + 1) + " is empty");
        record r;
        run_forward(r, m, ids, {}, o);
        const int T = r.n_tokens;
        for (size_t k = 0; k < layers.size(); k++) {
            const float* x = r.get(HOOK_RESID_POST, layers[k]); // [T][d]
            if (!x) throw error("internal: resid_post of layer " + std::to_string(layers[k]) + " was not kept");
            const int t0 = where == STEER_LAST ? T - 1 : 0;
            const double w = 1.0 / (T - t0);
            for (int t = t0; t < T; t++)
                for (int i = 0; i < d; i++) sum[k][i] += w * x[(size_t)t * d + i];
        }
    }
}

steer_vector contrastive_vector(const model& m, const std::vector<std::vector<int>>& positive,
                                const std::vector<std::vector<int>>& negative, const std::vector<int>& layers,
                                steer_position where, const std::function<bool()>& cancelled) {
    const model_config& c = m.config;
    if (positive.empty()) throw error("no positive prompts: the vector is their mean minus the negatives'");
    if (negative.empty()) throw error("no negative prompts: the vector is the positives' mean minus theirs");
    if (layers.empty()) throw error("no layer to make the vector at");
    for (int l : layers)
        if (l < 0 || l >= c.n_layer)
            throw error("layer " + std::to_string(l) + " is outside the model (layers 0.." + std::to_string(c.n_layer - 1) + ")");
    const int d = c.d_model;
    std::vector<std::vector<double>> pos(layers.size(), std::vector<double>(d)), neg = pos;
    accumulate(pos, m, positive, layers, where, cancelled, "positive");
    accumulate(neg, m, negative, layers, where, cancelled, "negative");
    steer_vector v;
    v.d_model = d;
    v.model_hint = c.model_type;
    for (size_t k = 0; k < layers.size(); k++) {
        std::vector<float> dir(d);
        for (int i = 0; i < d; i++) dir[i] = (float)(pos[k][i] / positive.size() - neg[k][i] / negative.size());
        v.set(layers[k], std::move(dir));
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// Continuations side by side
// ---------------------------------------------------------------------------------------------
// p of each continuation token given the prompt and the tokens before it, with the interventions iv: [n]
static std::vector<float> token_probs(const model& m, const std::vector<int>& prompt, const std::vector<int>& ids,
                                      const std::vector<intervention>& iv) {
    if (ids.empty()) return {};
    std::vector<int> all = prompt;
    all.insert(all.end(), ids.begin(), ids.end());
    if ((int)all.size() > m.config.n_ctx) all.resize(m.config.n_ctx);
    forward_options o;
    o.all_logits = true;
    o.keep.points = 0;
    o.keep.resid_norms = false;
    o.interventions = iv;
    record r;
    run_forward(r, m, all, {}, o);
    const int V = r.vocab, P = (int)prompt.size();
    std::vector<float> out(ids.size(), 0.0f);
    for (size_t i = 0; i < ids.size() && P + (int)i <= (int)all.size(); i++) {
        const float* lg = &r.logits[(size_t)(P - 1 + i) * V];
        out[i] = softmax_prob(softmax_stats(lg, V), lg, V, ids[i]);
    }
    return out;
}

static void fill_text(steered_continuation& c, const model& m) {
    c.pieces.clear();
    for (int id : c.ids) c.pieces.push_back(token_text(m.tok, id));
    c.text = utf8_sanitize(decode(m.tok, c.ids));
}

void compare_steering(steer_compare& out, const model& m, const std::vector<int>& prompt, const steering& s,
                      const std::vector<float>& scales, int max_new, const sampling& sp,
                      const std::function<bool()>& cancelled) {
    check_steering(s, m.config);
    if (!s.vec) throw error("no steering vector to compare with");
    auto go_on = [&](int) { return !(cancelled && cancelled()); };
    steer_compare r;
    r.baseline.ids = generate(m, prompt, max_new, sp, {}, go_on).ids;
    if (cancelled && cancelled()) throw gb::cancelled();
    fill_text(r.baseline, m);
    r.baseline.p_base = r.baseline.p_steered = token_probs(m, prompt, r.baseline.ids, {});
    for (float a : scales) {
        steering sa = s;
        sa.scale = a;
        std::vector<std::vector<float>> vals;
        const std::vector<intervention> iv = steering_interventions(sa, m.config, vals);
        steered_continuation c;
        c.scale = a;
        c.ids = generate(m, prompt, max_new, sp, {}, go_on, iv).ids;
        if (cancelled && cancelled()) throw gb::cancelled();
        fill_text(c, m);
        for (size_t i = 0; i < c.ids.size() && c.parts_at < 0; i++)
            if (i >= r.baseline.ids.size() || c.ids[i] != r.baseline.ids[i]) c.parts_at = (int)i;
        c.p_steered = token_probs(m, prompt, c.ids, iv);
        c.p_base = token_probs(m, prompt, c.ids, {});
        r.runs.push_back(std::move(c));
    }
    out = std::move(r);
}

// ---------------------------------------------------------------------------------------------
// The cost sweep
// ---------------------------------------------------------------------------------------------
const std::vector<float>& sweep_direction(const steer_vector& v, int layer) {
    if (v.has(layer)) return v.dirs[layer];
    const std::vector<int> ls = v.layers();
    if (ls.size() == 1) return v.dirs[ls[0]];
    throw error("steering sweep at layer " + std::to_string(layer) + ": the vector has no direction there");
}

// KL(base || steered) summed over positions and the loss summed over T-1 positions, from the steered logits [T][V]
// and the baseline's log-probabilities [T][V]
static void cell_costs(double& kl, double& loss, const std::vector<float>& logits, const std::vector<double>& base_lp,
                       const std::vector<int>& ref, int V) {
    const int T = (int)ref.size();
    kl = loss = 0;
    std::vector<double> lp;
    for (int t = 0; t < T; t++) {
        log_softmax(lp, &logits[(size_t)t * V], V);
        const double* lb = &base_lp[(size_t)t * V];
        double k = 0;
        for (int v = 0; v < V; v++)
            if (lb[v] > -INFINITY) k += std::exp(lb[v]) * (lb[v] - lp[v]);
        kl += k;
        if (t + 1 < T) loss -= lp[ref[t + 1]];
    }
}

static void check_sweep(const model& m, const steer_vector& v, const std::vector<float>& scales,
                        const std::vector<int>& layers, const std::vector<int>& reference, int from) {
    const model_config& c = m.config;
    if (v.d_model != c.d_model)
        throw error("steering vector is " + std::to_string(v.d_model) + " wide, the model's stream is " + std::to_string(c.d_model));
    if (scales.empty() || layers.empty()) throw error("steering sweep: no scales or no layers");
    for (float a : scales)
        if (!std::isfinite(a)) throw error("steering sweep: scales must be finite numbers");
    for (int l : layers) {
        if (l < 0 || l >= c.n_layer)
            throw error("steering sweep at layer " + std::to_string(l) + ": the model has layers 0.." + std::to_string(c.n_layer - 1));
        sweep_direction(v, l);
    }
    if (reference.size() < 2) throw error("steering sweep: the reference text needs at least 2 tokens (it scores each next token)");
    if ((int)reference.size() > c.n_ctx)
        throw error("steering sweep: the reference is " + std::to_string(reference.size()) + " tokens, the context " +
                    std::to_string(c.n_ctx));
    if (from < 0 || from >= (int)reference.size())
        throw error("steering sweep: from position " + std::to_string(from) + " is outside the reference's " +
                    std::to_string(reference.size()) + " tokens");
}

void steer_sweep(steer_sweep_result& out, const model& m, const steer_vector& v, const std::vector<float>& scales,
                 const std::vector<int>& layers, const std::vector<int>& reference, int from,
                 const std::vector<int>& prompt, int max_new, const std::function<bool()>& cancelled) {
    check_sweep(m, v, scales, layers, reference, from);
    const model_config& c = m.config;
    const int T = (int)reference.size(), V = c.vocab_size;
    const auto t0 = std::chrono::steady_clock::now();
    steer_sweep_result r;
    r.scales = scales, r.layers = layers, r.from = from, r.ref_tokens = T;
    // the baseline once: every position's logits and the stream after each swept layer, where each cell resumes
    forward_options bo;
    bo.all_logits = true;
    bo.keep.points = hook_bit(HOOK_RESID_POST);
    bo.keep.resid_norms = false;
    bo.cancelled = cancelled;
    record base;
    run_forward(base, m, reference, {}, bo);
    std::vector<double> base_lp((size_t)T * V), lp;
    for (int t = 0; t < T; t++) {
        log_softmax(lp, &base.logits[(size_t)t * V], V);
        std::copy(lp.begin(), lp.end(), base_lp.begin() + (size_t)t * V);
        if (t + 1 < T) r.base_loss -= lp[reference[t + 1]];
    }
    r.base_loss /= T - 1;
    r.kl.assign(scales.size() * layers.size(), 0.0);
    r.loss = r.kl;
    forward_state fs;
    std::vector<float> logits, add(c.d_model);
    for (size_t li = 0; li < layers.size(); li++) {
        const int l = layers[li];
        const std::vector<float>& dir = sweep_direction(v, l);
        for (size_t si = 0; si < scales.size(); si++) {
            for (int i = 0; i < c.d_model; i++) add[i] = scales[si] * dir[i];
            forward_options o; // from the baseline's stream after layer l, where the vector is added
            o.all_logits = true;
            o.start_point = 2 * l + 2;
            o.start_resid = base.get(HOOK_RESID_POST, l);
            o.cancelled = cancelled;
            intervention iv;
            iv.kind = INTERVENE_ADD, iv.point = HOOK_RESID_POST, iv.layer = l, iv.from = from, iv.values = add.data();
            o.interventions = {iv};
            state_init(fs, c, T);
            eval(logits, nullptr, fs, m, reference.data(), T, o);
            double kl, loss;
            cell_costs(kl, loss, logits, base_lp, reference, V);
            r.kl[r.at((int)si, (int)li)] = kl / T;
            r.loss[r.at((int)si, (int)li)] = loss / (T - 1);
        }
    }
    r.grid_ms = ms_since(t0);
    if (!prompt.empty() && max_new > 0) {
        const auto t1 = std::chrono::steady_clock::now();
        r.texts.resize(r.kl.size());
        for (size_t li = 0; li < layers.size(); li++)
            for (size_t si = 0; si < scales.size(); si++) {
                steer_vector one;
                one.d_model = v.d_model;
                one.set(layers[li], sweep_direction(v, layers[li]));
                steering s;
                s.vec = std::make_shared<const steer_vector>(std::move(one));
                s.scale = scales[si];
                std::vector<std::vector<float>> vals;
                const std::vector<intervention> iv = steering_interventions(s, c, vals);
                const generation g = generate(m, prompt, max_new, sampling{}, {}, {}, iv);
                r.texts[r.at((int)si, (int)li)] = utf8_sanitize(decode(m.tok, g.ids));
                if (cancelled && cancelled()) throw gb::cancelled();
            }
        r.text_ms = ms_since(t1);
    }
    out = std::move(r);
}

} // namespace gb
