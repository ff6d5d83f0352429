// Live recompute: choose what a request can reuse from a kept run, then run only the rest.
//
// Sections: comparing requests | the keys-and-values cache | building the next record | one variant | live_run
#include "run/live.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "util/error.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Comparing requests: where does a change first take effect?
// ---------------------------------------------------------------------------------------------
// The residual point before the sublayer that computes point p of layer l: 2l for the attention side (the
// stream entering the layer, resid_mid included: attention adds it), 2l+1 for the MLP side (resid_post
// included), 2L for the final norm and logits.
static int sublayer_start(hook_point p, int l, int L) {
    switch (p) {
    case HOOK_CROSS_IN: // the cross-attention runs between resid_mid and the MLP
    case HOOK_CROSS_PATTERN:
    case HOOK_CROSS_Z:
    case HOOK_CROSS_OUT:
    case HOOK_MLP_IN:
    case HOOK_ROUTER:
    case HOOK_MLP_POST:
    case HOOK_MLP_OUT:
    case HOOK_RESID_POST: return 2 * l + 1;
    case HOOK_FINAL_NORM:
    case HOOK_LOGITS: return 2 * L;
    default: return 2 * l;
    }
}

// A resumed run restarts at a residual point, and the stream kept there already holds that point's old
// interventions: a change at a residual point restarts before the sublayer that forms it. Layer 0's resid_pre is
// the embeddings: from scratch (-1). NO_RESIDUAL and IDENTITY_NORM sit at the points of the sublayers they change.
int intervention_start_point(const intervention& v, int L) {
    const int l = std::max(v.layer, 0); // every layer: the first
    if (v.point == HOOK_RESID_PRE && l == 0) return -1;
    return sublayer_start(v.point, l, L);
}

// Floats of a SET intervention's values at T tokens, of an ADD's one row (0 for the other kinds).
static size_t values_size(const intervention& v, const model_config& c, int T) {
    if (v.kind == INTERVENE_ADD && v.values) return (size_t)hook_width(v.point, c, T);
    if (v.kind != INTERVENE_SET || !v.values) return 0;
    const int width = hook_width(v.point, c, T);
    const int slice = v.head >= 0 ? hook_head_width(v.point, c, T) : width;
    return (size_t)slice * (v.position >= 0 ? 1 : T);
}

// a of a run of Ta tokens, b of Tb: a SET at every position holds [T][slice] values, so each side's own T sizes
// what may be read of it
static bool same_intervention(const intervention& a, int Ta, const intervention& b, int Tb, const model_config& c) {
    if (a.kind != b.kind || a.point != b.point || a.layer != b.layer || a.head != b.head || a.position != b.position ||
        a.key != b.key || a.from != b.from || a.scale != b.scale)
        return false;
    const size_t n = values_size(a, c, Ta);
    if (n != values_size(b, c, Tb)) return false;
    return n == 0 || std::memcmp(a.values, b.values, n * sizeof(float)) == 0;
}

// First residual point whose value differs between runs with interventions a (on Ta tokens) and b (on Tb): 2L+1
// when none does, -1 when even the embeddings do. Lists are compared in order (at one point, order can matter).
static int first_changed_point(const std::vector<intervention>& a, int Ta, const std::vector<intervention>& b, int Tb,
                               const model_config& c) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && same_intervention(a[i], Ta, b[i], Tb, c)) i++;
    int q = 2 * c.n_layer + 1;
    for (size_t j = i; j < a.size(); j++) q = std::min(q, intervention_start_point(a[j], c.n_layer));
    for (size_t j = i; j < b.size(); j++) q = std::min(q, intervention_start_point(b[j], c.n_layer));
    return q;
}

static void copy_interventions(live_variant& v, const std::vector<intervention>& iv, const model_config& c, int T) {
    v.iv = iv;
    v.iv_tokens = T;
    v.iv_values.assign(iv.size(), {});
    for (size_t i = 0; i < iv.size(); i++)
        if (size_t n = values_size(iv[i], c, T)) {
            v.iv_values[i].assign(iv[i].values, iv[i].values + n);
            v.iv[i].values = v.iv_values[i].data();
        }
}

// ---------------------------------------------------------------------------------------------
// Keys and values: [L][capacity][KV*dh], grown by doubling so that typing does not re-lay it out per token
// ---------------------------------------------------------------------------------------------
static int cache_capacity(const model_config& c, int T) {
    int cap = 64;
    while (cap < T) cap *= 2;
    return std::min(cap, c.n_ctx);
}

static size_t cache_bytes(const model_config& c, int capacity) {
    return 2 * sizeof(float) * (size_t)c.n_layer * capacity * c.n_kv_head * c.d_head;
}

// Room for T positions, the first `keep` of every layer kept.
static void reserve_cache(forward_state& fs, const model_config& c, int T, int keep) {
    const size_t kv_w = (size_t)c.n_kv_head * c.d_head;
    fs.keep_cache = true;
    if (fs.n_ctx >= T && fs.k_cache.size() >= (size_t)c.n_layer * fs.n_ctx * kv_w) return;
    const int cap = cache_capacity(c, T);
    std::vector<float> k((size_t)c.n_layer * cap * kv_w), v(k.size());
    keep = std::min({keep, fs.n_ctx, cap});
    if (!fs.k_cache.empty() && keep > 0)
        for (int l = 0; l < c.n_layer; l++) {
            std::copy_n(&fs.k_cache[(size_t)l * fs.n_ctx * kv_w], keep * kv_w, &k[(size_t)l * cap * kv_w]);
            std::copy_n(&fs.v_cache[(size_t)l * fs.n_ctx * kv_w], keep * kv_w, &v[(size_t)l * cap * kv_w]);
        }
    fs.k_cache.swap(k);
    fs.v_cache.swap(v);
    fs.n_ctx = cap;
}

// Layers [0, layers) of src's keys and values, positions [0, T), into dst.
static void copy_cache_layers(forward_state& dst, const forward_state& src, const model_config& c, int layers, int T) {
    const size_t kv_w = (size_t)c.n_kv_head * c.d_head;
    for (int l = 0; l < layers; l++) {
        std::copy_n(&src.k_cache[(size_t)l * src.n_ctx * kv_w], T * kv_w, &dst.k_cache[(size_t)l * dst.n_ctx * kv_w]);
        std::copy_n(&src.v_cache[(size_t)l * src.n_ctx * kv_w], T * kv_w, &dst.v_cache[(size_t)l * dst.n_ctx * kv_w]);
    }
}

// ---------------------------------------------------------------------------------------------
// Building the next record from a kept one
// ---------------------------------------------------------------------------------------------
// The residual point from which a resumed run writes (point p, layer l) again: a tensor is shared with the kept
// record when the run starts after it. The residual points themselves are written again when the run resumes
// at them (it visits its start point), the others by their sublayer.
static int written_from(hook_point p, int l, int L) {
    if (p == HOOK_RESID_MID) return 2 * l + 1;
    if (p == HOOK_RESID_POST) return 2 * l + 2;
    return sublayer_start(p, l, L);
}

static bool same_layout(const record_plan& a, const record& r) {
    if (!(a.part == r.part)) return false;
    for (int p = 0; p < HOOK_COUNT; p++) {
        if (a.keep[p].size() != r.slot[p].size()) return false;
        for (size_t l = 0; l < a.keep[p].size(); l++)
            if ((a.keep[p][l] && p != HOOK_LOGITS) != (r.slot[p][l] >= 0)) return false;
    }
    return true;
}

// Rows [0, p) of every kept tensor and norm of `from` (T_from tokens) into `to` (T tokens, same layout). The
// tensors are copied on both threads: at T = 256 on GPT-2 small this is 70 MB, most of what an append costs
// beyond its one token.
static void copy_prefix(record& to, const record& from, int p) {
    const int T = to.n_tokens, Tf = from.n_tokens;
    std::vector<std::pair<hook_point, int>> kept;
    for (int pt = 0; pt < HOOK_COUNT; pt++)
        for (size_t l = 0; l < to.slot[pt].size(); l++)
            if (to.slot[pt][l] >= 0 && !hook_is_final((hook_point)pt)) kept.push_back({(hook_point)pt, (int)l});
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < kept.size(); i++) {
        const hook_point hp = kept[i].first;
        const float* src = from.get(hp, kept[i].second);
        float* dst = to.get_mut(hp, kept[i].second);
        if (hp == HOOK_PATTERN) { // [H][T][T]: rows before p; their keys are all before p too (causal), the rest 0
            const int heads = to.part.heads(kept[i].second, to.n_head);
            for (int h = 0; h < heads; h++) // (a part layer's kept heads: the same ones in both, same_layout)
                for (int r = 0; r < p; r++) {
                    float* row = dst + ((size_t)h * T + r) * T;
                    std::copy_n(src + ((size_t)h * Tf + r) * Tf, r + 1, row);
                    std::fill(row + r + 1, row + T, 0.0f);
                }
        } else if (hp == HOOK_CROSS_PATTERN) { // [H][T][S]: rows before p of each head, over the same source
            const size_t S = (size_t)to.n_source;
            for (int h = 0; h < to.n_head; h++) std::copy_n(src + (size_t)h * Tf * S, (size_t)p * S, dst + (size_t)h * T * S);
        } else { // [T][width]; the final points hold the last position only: recomputed
            std::copy_n(src, (size_t)p * (to.layer_floats(hp) / T), dst);
        }
    }
    for (size_t pt = 0; pt < (size_t)(2 * to.n_layer + 1); pt++)
        std::copy_n(&from.resid_norm[pt * Tf], p, &to.resid_norm[pt * T]);
}

// The stream a run resumed at residual point q reads, as kept in r (null when r does not keep it). The point
// before a layer is resid_post of the layer below: its resid_pre copy already holds that layer's interventions.
static const float* kept_stream(const record& r, int q) {
    if (q == 0) return r.get(HOOK_RESID_PRE, 0);
    if (q % 2) return r.get(HOOK_RESID_MID, (q - 1) / 2);
    return r.get(HOOK_RESID_POST, q / 2 - 1);
}

// ---------------------------------------------------------------------------------------------
// One variant: choose, then run
// ---------------------------------------------------------------------------------------------
enum step_kind { STEP_NONE, STEP_PREFIX, STEP_FROM_POINT, STEP_FULL };
struct step {
    step_kind kind = STEP_FULL;
    int from = 0;        // PREFIX: first position; FROM_POINT: residual point
    double cost = 1;     // fraction of a full run, to choose between sources
    std::string why;     // for a full run
};

static step choose(const live_variant& src, const std::vector<int>& tokens, const std::vector<float>& pixels,
                   const std::vector<float>& source, const std::vector<intervention>& iv, const record_plan& plan,
                   bool all_logits, const model_config& c) {
    const int T = (int)tokens.size(), L = c.n_layer;
    step s;
    if (!src.rec) return s.why = "nothing kept yet", s;
    const record& r = *src.rec;
    if (!same_layout(plan, r)) return s.why = "the capture budget keeps other layers now", s;
    if (r.nonfinite_layer >= 0) return s.why = "the kept run holds NaN or Inf", s;
    if (r.all_logits != all_logits) return s.why = "logits at other positions asked for", s;
    if (src.pixels != pixels) return s.why = "another image", s; // a vision model's tokens are only its positions
    if (src.source != source) return s.why = "another source (the encoder's output changed)", s;
    int common = 0;
    while (common < T && common < r.n_tokens && r.tokens[common] == tokens[common]) common++;
    if (src.stale_token >= 0) common = std::min(common, src.stale_token);
    int q = first_changed_point(src.iv, src.iv_tokens, iv, T, c);
    if (src.stale_point >= 0) q = std::min(q, src.stale_point);
    const bool tokens_same = common == T && r.n_tokens == T;
    if (tokens_same && q > 2 * L) return s.kind = STEP_NONE, s.cost = 0, s;
    if (tokens_same) {
        // a parallel block's MLP reads the layer's input: it restarts from there, not after the attention
        if (c.parallel && q % 2) q--;
        // the latest point at or before q whose stream the record keeps
        while (q >= 0 && !kept_stream(r, q)) q--;
        if (q < 0) return s.why = "the change reaches the embeddings", s;
        s.kind = STEP_FROM_POINT, s.from = q;
        s.cost = (double)(2 * L + 1 - q) / (2 * L + 1);
        return s;
    }
    if (arch_table(c.arch).bidirectional) return s.why = "an encoder's every position sees every token", s;
    if (all_logits) return s.why = "every position's logits asked for", s; // the kept rows' logits are not carried
    if (q > 2 * L && src.stale_point < 0) {
        const int p = std::min(common, T - 1); // the last position's logits are recomputed: only they are kept
        if (p == 0) return s.why = "the first token changed", s;
        s.kind = STEP_PREFIX, s.from = p;
        s.cost = (double)(T - p) / T;
        return s;
    }
    return s.why = "tokens and interventions both changed", s;
}

static void set_status(live_report& rep, const step& st, const model_config& c, int T) {
    const int L = c.n_layer;
    rep.reused = st.kind != STEP_FULL;
    rep.from_token = st.kind == STEP_PREFIX ? st.from : st.kind == STEP_NONE ? T : 0;
    rep.from_point = st.kind == STEP_FROM_POINT ? st.from : st.kind == STEP_NONE ? 2 * L + 1 : 0;
    switch (st.kind) {
    case STEP_NONE: rep.what = "nothing changed"; break;
    case STEP_PREFIX:
        rep.what = std::to_string(T - st.from) + " of " + std::to_string(T) + " tokens (from position " +
                   std::to_string(st.from) + ")";
        break;
    case STEP_FROM_POINT:
        rep.what = st.from >= 2 * L ? "final norm and logits only"
                                    : "layers " + std::to_string(st.from / 2) + ".. of " + std::to_string(L) +
                                          " (resumed after " + resid_labels(L)[st.from] + ")";
        break;
    case STEP_FULL: rep.what = "full run (" + st.why + ")"; break;
    }
}

struct run_args {
    const model& m;
    const std::vector<int>& tokens;
    const std::vector<float>& source; // the encoder's output this variant reads (empty: not an encoder–decoder)
    const std::vector<intervention>& iv;
    const record_plan& plan;
    const live_request& rq;
    bool use_cache;
};

// Runs v up to date from src (v itself, or the clean variant for the first intervened run). Returns the step.
static step update(live_variant& v, const live_variant* seed, const run_args& a) {
    const model_config& c = a.m.config;
    const int T = (int)a.tokens.size(), L = c.n_layer;
    const bool all_logits = arch_table(c.arch).bidirectional || a.rq.all_logits;
    step st = a.use_cache ? choose(v, a.tokens, a.rq.pixels, a.source, a.iv, a.plan, all_logits, c) : step{};
    if (!a.use_cache) st.why = "keys and values do not fit the memory budget";
    const live_variant* src = &v;
    if (seed && a.use_cache) { // a from-layer run on the clean variant's kept run may be cheaper
        step s2 = choose(*seed, a.tokens, a.rq.pixels, a.source, a.iv, a.plan, all_logits, c);
        if (s2.kind == STEP_FROM_POINT && (st.kind == STEP_FULL || s2.cost < st.cost)) st = s2, src = seed;
    }
    if (st.kind == STEP_NONE) return st;

    auto rec = std::make_shared<record>();
    forward_options o;
    o.interventions = a.iv;
    o.attention = a.rq.attention;
    o.cancelled = a.rq.cancelled;
    o.pixels = a.rq.pixels.empty() ? nullptr : a.rq.pixels.data();
    o.source = a.source.empty() ? nullptr : a.source.data();
    o.n_source = (int)(a.source.size() / c.d_model);
    o.continue_record = true;
    o.all_logits = a.rq.all_logits;
    o.keep = a.rq.keep;
    const int* run_tokens = a.tokens.data();
    int n = T;
    if (st.kind == STEP_FROM_POINT) {
        *rec = *src->rec; // shares every tensor, then replaces those the run writes
        const int q = st.from;
        for (int p = 0; p < HOOK_COUNT; p++)
            for (size_t l = 0; l < rec->slot[p].size(); l++)
                if (rec->slot[p][l] >= 0 && written_from((hook_point)p, (int)l, L) >= q)
                    rec->acts[p][rec->slot[p][l]] = std::make_shared<tensor_buffer>(rec->tensor_floats((hook_point)p, (int)l));
        rec->budget_note = a.plan.note;
        o.start_point = q;
        o.start_resid = kept_stream(*src->rec, q);
        if (src != &v) { // the clean run's keys and values below the first changed layer
            reserve_cache(v.fs, c, T, 0);
            copy_cache_layers(v.fs, src->fs, c, (q + 1) / 2, T);
            v.rec.reset(); // v's kept run is being replaced; if this run stops, nothing of it is left to reuse
        }
        v.fs.n_past = 0;
    } else {
        const int p = st.kind == STEP_PREFIX ? st.from : 0;
        record_begin(*rec, a.m, a.tokens.data(), T, all_logits, a.plan, o.n_source);
        rec->logit_ids.clear();
        if (p > 0) copy_prefix(*rec, *v.rec, p);
        if (a.use_cache) reserve_cache(v.fs, c, T, p);
        else v.fs.keep_cache = false, state_init(v.fs, c, T);
        v.fs.n_past = p;
        run_tokens += p;
        n = T - p;
        if (st.kind == STEP_FULL) v.stale_token = v.stale_point = -1;
    }
    rec->source_pieces = a.rq.source_pieces;
    // an encoder–decoder's encoder stack has no head: its output is kept as its final_norm point, not as logits
    std::vector<float> stack_out;
    try {
        eval(arch_table(c.arch).no_head ? stack_out : rec->logits, rec.get(), v.fs, a.m, run_tokens, n, o);
    } catch (const cancelled&) {
        // the cache may hold this run's values from its first position or point on
        if (st.kind == STEP_PREFIX) v.stale_token = v.stale_token < 0 ? st.from : std::min(v.stale_token, st.from);
        else if (st.kind == STEP_FROM_POINT) v.stale_point = v.stale_point < 0 ? st.from : std::min(v.stale_point, st.from);
        else v.rec.reset();
        throw;
    }
    v.rec = rec;
    v.pixels = a.rq.pixels;
    v.source = a.source;
    copy_interventions(v, a.iv, c, T);
    v.stale_token = v.stale_point = -1;
    if (!a.use_cache) v.stale_token = 0; // no keys and values were kept: nothing for a later run to resume from
    return st;
}

// ---------------------------------------------------------------------------------------------
// live_run
// ---------------------------------------------------------------------------------------------
void live_run(live_result& out, live_state& st, const model& m, const live_request& rq) {
    const model_config& c = m.config;
    const int T = (int)rq.tokens.size();
    auto t0 = std::chrono::steady_clock::now();
    if (T == 0) throw error("empty prompt: nothing to run");
    if (T > c.n_ctx)
        throw error("prompt too long: " + std::to_string(T) + " tokens, the model's context is " + std::to_string(c.n_ctx));
    for (int t : rq.tokens)
        if (kind_of(c) != KIND_VISION && (t < 0 || t >= c.vocab_size))
            throw error("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                        std::to_string(c.vocab_size - 1) + ")");
    check_interventions(rq.interventions, c);
    for (const intervention& v : rq.interventions)
        if (v.kind == INTERVENE_SET && !v.values) throw error("internal: a SET intervention without values");

    // Memory: both variants' keys and values first (without them nothing is incremental), then the clean
    // record, then the intervened one with what is left. Each record drops its largest layers far from the
    // focus first (plan_record).
    const size_t budget = rq.keep.budget_bytes;
    const size_t kv = cache_bytes(c, cache_capacity(c, T));
    const bool use_cache = budget == 0 || 2 * kv <= budget / 2;
    record_request keep_clean = rq.keep, keep_changed = rq.keep;
    if (budget) keep_clean.budget_bytes = std::max<size_t>(1, (budget - (use_cache ? 2 * kv : 0)) / (rq.baseline ? 2 : 1));
    const int n_out = arch_table(c.arch).bidirectional || rq.all_logits ? T : 1; // an encoder's at every position
    // an encoder–decoder's decoder: the encoder's output with the interventions, and the baseline's without
    static const std::vector<float> no_source;
    const std::vector<float>& source = rq.source ? *rq.source : no_source;
    const std::vector<float>& base_source = rq.base_source ? *rq.base_source : source;
    if (arch_table(c.arch).cross && (source.empty() || source.size() % c.d_model || base_source.size() != source.size()))
        throw error("internal: an encoder–decoder's decoder reads the encoder's output (live_request::source)");
    const int S = (int)(source.size() / c.d_model);
    const record_plan plan_clean = plan_record(keep_clean, c, T, n_out, S);
    if (budget) keep_changed.budget_bytes = std::max<size_t>(1, budget - (use_cache ? 2 * kv : 0) - plan_clean.bytes);
    // the run differs from its baseline by its interventions or (a decoder) by the source it reads
    const bool intervened = rq.baseline && (!rq.interventions.empty() || (&base_source != &source && base_source != source));
    const record_plan plan_changed = intervened ? plan_record(keep_changed, c, T, n_out, S) : record_plan{};

    live_report rep;
    rep.tokens = T;
    static const std::vector<intervention> none;
    // without a baseline the one run is the "clean" variant, with the interventions
    const std::vector<intervention>& clean_iv = rq.baseline ? none : rq.interventions;
    step s_clean = update(st.clean, nullptr, {m, rq.tokens, rq.baseline ? base_source : source, clean_iv, plan_clean, rq, use_cache});
    rep.baseline_run = s_clean.kind != STEP_NONE;
    if (!intervened) {
        set_status(rep, s_clean, c, T);
        out.run = out.base = st.clean.rec;
    } else {
        step s = update(st.changed, &st.clean, {m, rq.tokens, source, rq.interventions, plan_changed, rq, use_cache});
        set_status(rep, s, c, T);
        out.run = st.changed.rec;
        out.base = st.clean.rec;
    }
    std::string note;
    if (!plan_clean.note.empty()) note = (intervened ? "baseline: " : "") + plan_clean.note;
    if (intervened && !plan_changed.note.empty()) note += (note.empty() ? "" : "; ") + ("ablated run: " + plan_changed.note);
    if (!note.empty() && use_cache)
        note += " (of the " + std::to_string(budget >> 20) + " MB capture budget, " + std::to_string(2 * kv >> 20) +
                " MB hold the keys and values for live recompute; the rest is shared by the run and its baseline)";
    if (!use_cache)
        note += std::string(note.empty() ? "" : "; ") + "no live recompute: keys and values for " + std::to_string(T) +
                " tokens need " + std::to_string(2 * kv >> 20) + " MB of the " + std::to_string(budget >> 20) + " MB budget";
    rep.memory_note = note;
    rep.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.report = rep;
}

} // namespace gb
