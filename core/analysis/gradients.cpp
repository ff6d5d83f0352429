// Saliency (gradient x input, integrated gradients) and attribution patching, from the backward pass.
#include "analysis/gradients.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "model/kind.h"
#include "run/forward.h"
#include "util/error.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Saliency
// ---------------------------------------------------------------------------------------------
double saliency_result::completeness_gap() const {
    double sum = 0;
    for (float v : integrated) sum += v;
    for (float v : source_integrated) sum += v;
    return value - baseline - sum;
}

// out [T] += scale * sum over d of a [T][d] * b [T][d]
static void row_dots(std::vector<float>& out, const float* a, const float* b, int T, int d, double scale) {
    for (int t = 0; t < T; t++) {
        double s = 0;
        for (int i = 0; i < d; i++) s += (double)a[(size_t)t * d + i] * b[(size_t)t * d + i];
        out[t] += (float)(scale * s);
    }
}

saliency_result saliency(const model& m, const std::vector<int>& tokens, const metric_spec& metric, int steps,
                         const ablation& ab, const forward_options& base) {
    if (steps < 0) throw error("integrated gradients: " + std::to_string(steps) + " steps (0 or more)");
    saliency_result out;
    gradients g;
    record rec;
    run_gradients(g, m, tokens, metric, ab, base, &rec);
    const int T = g.n_tokens, d = g.d_model;
    out.n_layer = g.n_layer, out.n_tokens = T, out.d_model = d;
    out.metric = metric;
    out.metric.position = g.position;
    out.value = g.metric_value;
    out.resid_grad = std::move(g.resid);
    const float* x0 = rec.resid(0);
    out.grad_x_input.assign(T, 0.0f);
    row_dots(out.grad_x_input, out.resid_grad.data(), x0, T, d, 1.0);
    out.steps = steps;
    if (steps == 0) return out;
    // the stream at point 0 set to alpha x0 at every position; alpha 0 is the baseline
    const std::vector<float> x(x0, x0 + (size_t)T * d);
    std::vector<float> scaled(x.size());
    forward_options o = base;
    intervention set{INTERVENE_SET, HOOK_RESID_PRE, 0};
    set.values = scaled.data();
    o.interventions.push_back(set);
    out.integrated.assign(T, 0.0f);
    for (int k = 0; k <= steps; k++) {
        const double alpha = k == 0 ? 0.0 : (k - 0.5) / steps;
        for (size_t i = 0; i < x.size(); i++) scaled[i] = (float)(alpha * x[i]);
        run_gradients(g, m, tokens, metric, ab, o);
        if (k == 0) out.baseline = g.metric_value;
        else row_dots(out.integrated, g.resid.data(), x.data(), T, d, 1.0 / steps);
    }
    return out;
}

saliency_result saliency_seq2seq(const model& m, const std::vector<int>& source, const std::vector<int>& target,
                                 const metric_spec& metric, int steps, const ablation& ab) {
    if (steps < 0) throw error("integrated gradients: " + std::to_string(steps) + " steps (0 or more)");
    saliency_result out;
    gradients g;
    seq2seq_record rec;
    run_seq2seq_gradients(g, m, source, target, metric, ab, {}, {}, &rec);
    const int T = g.n_tokens, S = g.n_source, d = g.d_model;
    out.n_layer = g.n_layer, out.n_tokens = T, out.d_model = d;
    out.n_source = S, out.source_layers = g.source_layers;
    out.metric = metric;
    out.metric.position = g.position;
    out.value = g.metric_value;
    out.resid_grad = std::move(g.resid);
    out.source_grad = std::move(g.source_resid);
    const float *x0 = rec.decoder.resid(0), *s0 = rec.encoder.resid(0);
    out.grad_x_input.assign(T, 0.0f);
    out.source_grad_x_input.assign(S, 0.0f);
    row_dots(out.grad_x_input, out.resid_grad.data(), x0, T, d, 1.0);
    row_dots(out.source_grad_x_input, out.source_grad.data(), s0, S, d, 1.0);
    out.steps = steps;
    if (steps == 0) return out;
    // both stacks' point 0 set to alpha times their embeddings; alpha 0 is the baseline
    const std::vector<float> x(x0, x0 + (size_t)T * d), xs(s0, s0 + (size_t)S * d);
    std::vector<float> scaled(x.size()), scaled_s(xs.size());
    forward_options o, os;
    intervention set{INTERVENE_SET, HOOK_RESID_PRE, 0};
    set.values = scaled.data();
    o.interventions.push_back(set);
    set.values = scaled_s.data();
    os.interventions.push_back(set);
    out.integrated.assign(T, 0.0f);
    out.source_integrated.assign(S, 0.0f);
    for (int k = 0; k <= steps; k++) {
        const double alpha = k == 0 ? 0.0 : (k - 0.5) / steps;
        for (size_t i = 0; i < x.size(); i++) scaled[i] = (float)(alpha * x[i]);
        for (size_t i = 0; i < xs.size(); i++) scaled_s[i] = (float)(alpha * xs[i]);
        run_seq2seq_gradients(g, m, source, target, metric, ab, o, os);
        if (k == 0) {
            out.baseline = g.metric_value;
            continue;
        }
        row_dots(out.integrated, g.resid.data(), x.data(), T, d, 1.0 / steps);
        row_dots(out.source_integrated, g.source_resid.data(), xs.data(), S, d, 1.0 / steps);
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Attribution patching
// ---------------------------------------------------------------------------------------------
// (v - corrupt) / (clean - corrupt) elementwise; NaN when clean == corrupt
static std::vector<float> normalized(const std::vector<float>& v, double clean, double corrupt) {
    const double span = clean - corrupt;
    std::vector<float> n(v.size(), std::numeric_limits<float>::quiet_NaN());
    if (span != 0)
        for (size_t i = 0; i < v.size(); i++) n[i] = (float)((v[i] - corrupt) / span);
    return n;
}

void corrupt_and_clean_runs(record& rc, record& rx, gradients& g, const model& m, const std::vector<int>& clean,
                            const std::vector<int>& corrupt, const metric_spec& metric, const ablation& ab,
                            const record_request& clean_keep, bool readers) {
    const model_config& c = m.config;
    const int T = (int)corrupt.size();
    if ((int)clean.size() != T || T <= 0) throw error("internal: the clean and corrupted prompts differ in length");
    require(m, FEATURE_PATCHING); // the clean run reuses the corrupted run's keys: a causal decoder's two prompts
    int first = 0; // the first position whose token differs (T: none)
    while (first < T && clean[first] == corrupt[first]) first++;
    forward_options o;
    o.interventions = ablation_interventions(ab, c);
    o.keep = backward_keep(c);
    o.keep.points |= clean_keep.points;
    o.logit_ids = metric_ids(metric);
    forward_state s;
    state_init(s, c, T);
    s.keep_cache = first > 0 && first < T; // the clean run reads the shared positions' keys and values
    eval(rx.logits, &rx, s, m, corrupt.data(), T, o);
    backward(g, m, rx, metric, o, readers);
    forward_options oc;
    oc.interventions = o.interventions;
    oc.keep = clean_keep;
    oc.logit_ids = o.logit_ids;
    oc.continue_record = true;
    record_begin(rc, m, clean.data(), T, false, plan_record(clean_keep, c, T, 1));
    rc.logit_ids = oc.logit_ids;
    // the shared positions' rows of what both keep ([n][width] tensors: every per-layer point but the patterns),
    // then the clean run from the first position that differs
    for (int h = 0; h < HOOK_COUNT; h++) {
        const hook_point p = (hook_point)h;
        if (hook_is_final(p)) continue;
        for (int l = 0; l < c.n_layer; l++) {
            if (!rc.has(p, l)) continue;
            if (hook_is_pattern(p) || !rx.has(p, l))
                throw error(std::string("internal: the clean run cannot share the rows of ") + hook_name(p));
            std::copy_n(rx.get(p, l), (size_t)first * (rc.layer_floats(p) / T), rc.get_mut(p, l));
        }
    }
    std::copy_n(rx.resid_norm.data(), rx.resid_norm.size(), rc.resid_norm.data());
    if (first == T) { // the same prompt: the clean run is the corrupted one
        rc.logits = rx.logits;
        return;
    }
    s.n_past = first;
    eval(rc.logits, &rc, s, m, clean.data() + first, T - first, oc);
}

patch_result attribution_patching(const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                                  int target, int contrast, const ablation& ab) {
    const auto t0 = std::chrono::steady_clock::now();
    const model_config& c = m.config;
    check_patch_prompts(clean, corrupt, c);
    require(m, FEATURE_GRADIENTS);
    require(m, FEATURE_PATCHING); // its estimates are of patching one prompt into another of a decoder-only model
    metric_spec ms;
    ms.kind = contrast >= 0 ? metric_spec::LOGIT_DIFF : metric_spec::LOGIT;
    ms.target = target;
    ms.contrast = contrast;
    // the corrupted run with its gradients; the clean run's stream and z
    record rc, rx;
    record_request keep; // the clean run: only what the estimates read
    keep.points = hook_bit(HOOK_Z);
    keep.resid_stream = true;
    gradients g;
    corrupt_and_clean_runs(rc, rx, g, m, clean, corrupt, ms, ab, keep);
    const int L = c.n_layer, H = c.n_head, dh = c.d_head, T = (int)clean.size(), d = c.d_model, P = 2 * L + 1;
    patch_result out;
    out.n_layer = L, out.n_head = H, out.n_tokens = T, out.target = target, out.contrast = contrast;
    out.clean = metric_of_ids(rc.last_logits(), ms);
    out.corrupt = g.metric_value;
    out.resid.assign((size_t)P * T, 0.0f);
    // the sums split over the threads, each writing its own entries (serial, the other thread would fall asleep)
#pragma omp parallel for schedule(static)
    for (int p = 0; p < P; p++) {
        const float *xc = rc.resid(p), *xx = rx.resid(p), *gr = g.resid_at(p);
        for (int t = 0; t < T; t++) {
            const float *c_ = xc + (size_t)t * d, *x_ = xx + (size_t)t * d, *g_ = gr + (size_t)t * d;
            double s = 0;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < d; i++) s += ((double)c_[i] - x_[i]) * g_[i];
            out.resid[(size_t)p * T + t] = (float)(out.corrupt + s);
        }
    }
    out.heads.assign((size_t)L * H, 0.0f);
#pragma omp parallel for schedule(static)
    for (int l = 0; l < L; l++) {
        const float *zc = rc.get(HOOK_Z, l), *zx = rx.get(HOOK_Z, l), *gz = g.z_at(l);
        for (int h = 0; h < H; h++) {
            double s = 0;
            for (int t = 0; t < T; t++) {
                const size_t at = (size_t)t * H * dh + (size_t)h * dh;
#pragma omp simd reduction(+ : s)
                for (int e = 0; e < dh; e++) s += ((double)zc[at + e] - zx[at + e]) * gz[at + e];
            }
            out.heads[(size_t)l * H + h] = (float)(out.corrupt + s);
        }
    }
    out.resid_normalized = normalized(out.resid, out.clean, out.corrupt);
    out.heads_normalized = normalized(out.heads, out.clean, out.corrupt);
    out.runs = 0; // no patched run: one forward each and one backward
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

estimate_error compare_estimate(const std::vector<float>& estimate, const std::vector<float>& exact) {
    if (estimate.size() != exact.size()) throw error("internal: an estimate and its exact values differ in size");
    double n = 0, sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, sq = 0;
    estimate_error e;
    for (size_t i = 0; i < exact.size(); i++) {
        const double a = estimate[i], b = exact[i];
        if (!std::isfinite(a) || !std::isfinite(b)) continue;
        e.max = std::max(e.max, std::fabs(a - b));
        sq += (a - b) * (a - b);
        n++, sa += a, sb += b, saa += a * a, sbb += b * b, sab += a * b;
    }
    if (n == 0) return e;
    e.rms = std::sqrt(sq / n);
    const double va = saa - sa * sa / n, vb = sbb - sb * sb / n;
    e.correlation = va > 0 && vb > 0 ? (sab - sa * sb / n) / std::sqrt(va * vb) : std::numeric_limits<double>::quiet_NaN();
    return e;
}

} // namespace gb
