// Activation patching over the residual stream and the heads, resuming the corrupt run from each patch's layer.
#include "analysis/patching.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "run/forward.h"
#include "util/error.h"

namespace gb {

void check_patch_prompts(const std::vector<int>& clean, const std::vector<int>& corrupt, const model_config& c) {
    if (clean.empty() || corrupt.empty()) throw error("activation patching needs two non-empty prompts");
    if (!offers(c, FEATURE_PATCHING))
        throw error(std::string("activation patching: a ") + kind_info_of(c).title + " (" + arch_table(c.arch).name +
                    "): " + kind_info_of(c).why_not[FEATURE_PATCHING]);
    if (clean.size() != corrupt.size())
        throw error("the clean prompt has " + std::to_string(clean.size()) + " tokens and the corrupted one " +
                    std::to_string(corrupt.size()) + ": patching needs prompts of the same length");
    if ((int)clean.size() > c.n_ctx)
        throw error("prompt too long: " + std::to_string(clean.size()) + " tokens, the model's context is " +
                    std::to_string(c.n_ctx));
}

int default_contrast(const std::vector<token_prob>& clean_top, const std::vector<token_prob>& corrupt_top, int target,
                     std::string* note) {
    if (!corrupt_top.empty() && corrupt_top[0].id != target) {
        if (note) *note = "contrast = the corrupted prompt's top-1";
        return corrupt_top[0].id;
    }
    for (const token_prob& t : clean_top) // both prompts predict the target: the clean run's next best
        if (t.id != target) {
            if (note) *note = "both prompts predict the target: contrast = the clean prompt's top-2";
            return t.id;
        }
    throw error("no contrast token: the model's vocabulary has a single token");
}

std::string choose_patch_tokens(int& target, int& contrast, const model& m, const std::vector<int>& clean,
                                const std::vector<int>& corrupt, const ablation& ab) {
    check_patch_prompts(clean, corrupt, m.config);
    if (target >= 0 && contrast >= 0) return "";
    const int V = m.config.vocab_size;
    auto top = [&](const std::vector<int>& ids) {
        record r;
        forward_options fo;
        fo.keep.points = 0;
        fo.keep.resid_norms = false;
        run_forward(r, m, ids, ab, fo);
        return top_k_probs(r.last_logits(), V, 10);
    };
    const std::vector<token_prob> clean_top = top(clean);
    std::string note;
    if (target < 0) target = clean_top[0].id, note = "target = the clean prompt's top-1";
    if (contrast < 0) {
        std::string why;
        contrast = default_contrast(clean_top, top(corrupt), target, &why);
        note += (note.empty() ? "" : "; ") + why;
    }
    return note;
}

void resumable_start(std::vector<float>& logits, resumable_run& x, const model& m, const std::vector<int>& tokens,
                     record_request keep) {
    const int T = (int)tokens.size();
    forward_options o = x.base;
    o.keep = keep;
    o.keep.resid_stream = true;
    o.keep.resid_norms = false;
    state_init(x.st, m.config, T);
    x.st.keep_cache = true; // resumed runs read the keys and values of the positions before theirs
    x.rec = record();
    eval(logits, &x.rec, x.st, m, tokens.data(), T, o);
    x.k0 = x.st.k_cache, x.v0 = x.st.v_cache;
}

void resumable_patch(std::vector<float>& logits, resumable_run& x, const model& m, const std::vector<int>& tokens, int p,
                     int t0, const std::vector<intervention>& iv) {
    const int L = m.config.n_layer, T = (int)tokens.size();
    const size_t kv_w = (size_t)m.config.n_kv_head * m.config.d_head;
    forward_options o = x.base;
    o.interventions.insert(o.interventions.end(), iv.begin(), iv.end());
    o.start_point = p;
    o.start_resid = x.rec.resid(p) + (size_t)t0 * m.config.d_model;
    x.st.n_past = t0;
    eval(logits, nullptr, x.st, m, tokens.data() + t0, T - t0, o);
    // put back the cache rows the run overwrote (layers from p's on, positions from t0 on)
    for (int l = p / 2; l < L; l++) { // point 2l+1 resumes inside layer l, whose keys it does not rewrite
        const size_t at = ((size_t)l * x.st.n_ctx + t0) * kv_w, n = (size_t)(T - t0) * kv_w;
        std::memcpy(&x.st.k_cache[at], &x.k0[at], n * sizeof(float));
        std::memcpy(&x.st.v_cache[at], &x.v0[at], n * sizeof(float));
    }
}

namespace {

// The metric of a run's logits [target(, contrast)]: logit(target) − logit(contrast), or logit(target) alone
double patch_metric(const std::vector<float>& lg, int contrast) {
    return (double)lg[0] - (contrast >= 0 ? (double)lg[1] : 0.0);
}

// The clean and the corrupt run, the corrupt one kept for the patched runs to resume
struct patch_runs {
    record rc;            // clean: the stream [2L+1][T][d] (and z [L][T][H][d_head] for heads)
    resumable_run x;      // corrupt: the same, and its keys and values
    std::vector<float> lg_clean, lg_corrupt, lg; // the metric's logits of each run, and of the latest patched one
};

// Runs the clean and the corrupt prompt once each, keeping the streams (and z) and the corrupt run's cache
void run_clean_and_corrupt(patch_runs& x, const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                           int target, int contrast, const patch_options& opt) {
    // every run computes only the metric's logits
    forward_options& base = x.x.base;
    base.interventions = ablation_interventions(opt.ab, m.config);
    base.attention = opt.attention;
    base.logit_ids = {target};
    if (contrast >= 0) base.logit_ids.push_back(contrast);
    record_request keep;
    keep.points = opt.heads ? hook_bit(HOOK_Z) : 0;
    resumable_run clean_run;
    clean_run.base = base;
    resumable_start(x.lg_clean, clean_run, m, clean, keep);
    x.rc = std::move(clean_run.rec);
    resumable_start(x.lg_corrupt, x.x, m, corrupt, keep);
}

// One patched run, counted in out.runs: its metric
double patched_run(patch_runs& x, patch_result& out, const model& m, const std::vector<int>& corrupt, int p, int t0,
                   const intervention& iv) {
    resumable_patch(x.lg, x.x, m, corrupt, p, t0, {iv});
    out.runs++;
    return patch_metric(x.lg, out.contrast);
}

// Every residual point p and position t patched in turn into out.resid [2L+1][T]; step() counts one and says
// whether to go on (out.complete turns false when it does not)
void patch_resid(patch_result& out, patch_runs& x, const model& m, const std::vector<int>& corrupt,
                 const std::function<bool()>& step) {
    const int P = 2 * m.config.n_layer + 1, T = (int)corrupt.size(), d = m.config.d_model;
    for (int p = 0; out.complete && p < P; p++) {
        intervention iv{INTERVENE_SET, HOOK_RESID_PRE, 0};
        resid_point_hook(p, iv.point, iv.layer);
        for (int t = 0; t < T; t++) {
            const float* want = x.rc.resid(p) + (size_t)t * d;
            // where the two streams agree (every position before the prompts first differ) nothing changes
            if (std::memcmp(want, x.x.rec.resid(p) + (size_t)t * d, d * sizeof(float)) == 0) {
                out.resid[(size_t)p * T + t] = (float)out.corrupt;
            } else if (p > 0 && p % 2 == 0) {
                // after the MLP of layer l: the MLP acts on each position alone, so the stream after patching
                // position t after the attention of l is this one already (the run at point p - 1)
                out.resid[(size_t)p * T + t] = out.resid[(size_t)(p - 1) * T + t];
            } else {
                iv.position = t;
                iv.values = want;
                out.resid[(size_t)p * T + t] = (float)patched_run(x, out, m, corrupt, p, t, iv);
            }
            if (!step()) {
                out.complete = false;
                break;
            }
        }
    }
}

// Every head's clean z [T][d_head] patched in turn, at every position, into out.heads [L][H]; step() as above
void patch_heads(patch_result& out, patch_runs& x, const model& m, const std::vector<int>& corrupt,
                 const std::function<bool()>& step) {
    const int L = m.config.n_layer, H = m.config.n_head, dh = m.config.d_head, T = (int)corrupt.size();
    std::vector<float> zh((size_t)T * dh); // one head's clean z, [T][dh]
    for (int l = 0; out.complete && l < L; l++)
        for (int h = 0; h < H; h++) {
            const float* zc = x.rc.get(HOOK_Z, l);
            const float* zx = x.x.rec.get(HOOK_Z, l);
            bool same = true;
            for (int t = 0; t < T; t++) {
                std::memcpy(&zh[(size_t)t * dh], zc + ((size_t)t * H + h) * dh, dh * sizeof(float));
                same = same && std::memcmp(&zh[(size_t)t * dh], zx + ((size_t)t * H + h) * dh, dh * sizeof(float)) == 0;
            }
            intervention iv{INTERVENE_SET, HOOK_Z, l};
            iv.head = h;
            iv.values = zh.data();
            out.heads[(size_t)l * H + h] = same ? (float)out.corrupt : (float)patched_run(x, out, m, corrupt, 2 * l, 0, iv);
            if (!step()) {
                out.complete = false;
                break;
            }
        }
}

} // namespace

patch_result activation_patching(const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                                 int target, int contrast, const patch_options& opt,
                                 const std::function<bool(float)>& progress) {
    const auto t_start = std::chrono::steady_clock::now();
    const model_config& c = m.config;
    const int L = c.n_layer, H = c.n_head, T = (int)clean.size(), P = 2 * L + 1;
    const int V = c.vocab_size;
    check_patch_prompts(clean, corrupt, c);
    if (target < 0 || target >= V) throw error("target id " + std::to_string(target) + " is outside the vocabulary");
    if (contrast >= V) throw error("contrast id " + std::to_string(contrast) + " is outside the vocabulary");
    patch_runs x;
    run_clean_and_corrupt(x, m, clean, corrupt, target, contrast, opt);

    patch_result out;
    out.n_layer = L;
    out.n_head = H;
    out.n_tokens = T;
    out.target = target;
    out.contrast = contrast;
    out.clean = patch_metric(x.lg_clean, contrast);
    out.corrupt = patch_metric(x.lg_corrupt, contrast);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    out.resid.assign(opt.resid ? (size_t)P * T : 0, nan);
    out.heads.assign(opt.heads ? (size_t)L * H : 0, nan);
    const int total = (opt.resid ? P * T : 0) + (opt.heads ? L * H : 0);
    int done = 0;
    auto step = [&] { return !progress || progress((float)++done / std::max(1, total)); };
    if (opt.resid) patch_resid(out, x, m, corrupt, step);
    if (opt.heads) patch_heads(out, x, m, corrupt, step);
    const double span = out.clean - out.corrupt;
    auto normalize = [&](const std::vector<float>& v) {
        std::vector<float> n(v.size());
        for (size_t i = 0; i < v.size(); i++) n[i] = span != 0 ? (float)((v[i] - out.corrupt) / span) : nan;
        return n;
    };
    out.resid_normalized = normalize(out.resid);
    out.heads_normalized = normalize(out.heads);
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    return out;
}

} // namespace gb
