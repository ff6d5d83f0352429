// Two models on the same token ids: the checks that they can be compared, the two runs, and the differences.
#include "analysis/compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>

#include <omp.h>

#include "kernels/ops.h"
#include "kernels/softmax.h"
#include "model/kind.h"
#include "run/forward.h"
#include "util/error.h"
#include "util/lanes.h"
#include "util/simd_math.h"
#include "util/timing.h"

namespace gb {
namespace {

std::string shown(const tokenizer& tok, int id) { return "\"" + token_text(tok, id) + "\" (id " + std::to_string(id) + ")"; }

// The residual stream's cosine and relative difference at every point and position: sums in double, four lanes
// at a time, the (point, position) cells split over the threads
void compare_streams(compare_result& out, const record& ra, const record& rb) {
    typedef float f4 __attribute__((vector_size(16), aligned(4), may_alias));
    typedef double d4 __attribute__((vector_size(32)));
    const int P = out.n_points, T = out.n_tokens, d = ra.d_model;
    out.cosine.assign((size_t)P * T, 0.0f);
    out.rel_diff.assign((size_t)P * T, 0.0f);
    out.point_mean_cos.assign(P, 0.0f);
    out.point_mean_rel.assign(P, 0.0f);
    std::vector<double> cos_pt((size_t)P * T), rel_pt((size_t)P * T);
#pragma omp parallel for schedule(static) if ((int64_t)P * T * d >= parallel_min_rows * 16)
    for (int pt = 0; pt < P * T; pt++) {
        const int p = pt / T, t = pt % T;
        const float *a = ra.resid(p) + (size_t)t * d, *b = rb.resid(p) + (size_t)t * d;
        d4 vab = {}, vaa = {}, vbb = {}, vdd = {};
        int i = 0;
        for (; i + 4 <= d; i += 4) {
            const d4 x = __builtin_convertvector(*(const f4*)(a + i), d4);
            const d4 y = __builtin_convertvector(*(const f4*)(b + i), d4);
            vab += x * y, vaa += x * x, vbb += y * y, vdd += (x - y) * (x - y);
        }
        double ab = 0, aa = 0, bb = 0, dd = 0;
        for (int l = 0; l < 4; l++) ab += vab[l], aa += vaa[l], bb += vbb[l], dd += vdd[l];
        for (; i < d; i++) {
            ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
            dd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        }
        const double cos = aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == 0 && bb == 0 ? 1.0 : 0.0);
        const double rel = aa > 0 ? std::sqrt(dd / aa) : (dd == 0 ? 0.0 : std::numeric_limits<double>::infinity());
        out.cosine[pt] = (float)cos, out.rel_diff[pt] = (float)rel;
        cos_pt[pt] = cos, rel_pt[pt] = rel;
    }
    for (int p = 0; p < P; p++) {
        double sum_cos = 0, sum_rel = 0;
        for (int t = 0; t < T; t++) sum_cos += cos_pt[(size_t)p * T + t], sum_rel += rel_pt[(size_t)p * T + t];
        out.point_mean_cos[p] = (float)(sum_cos / T), out.point_mean_rel[p] = (float)(sum_rel / T);
    }
}

// log of a row's softmax normaliser, NaN when the row has no finite normaliser (+inf or no finite logit)
double log_norm(const softmax_row& s) { return s.n_inf == 0 && s.sum > 0 ? s.mx + std::log(s.sum) : NAN; }

// The top-1 of a row from its softmax stats: the first token at the maximum (top_k_ids's tie rule) without
// top_k_ids's ranking pass; rows with +inf or no finite logit go through top_k_ids
int top1(const float* lg, int V, const softmax_row& s) {
    if (s.n_inf == 0 && s.sum > 0)
        for (int v = 0; v < V; v++)
            if (lg[v] == s.mx) return v;
    int id = -1;
    top_k_ids(&id, lg, V, 1);
    return id;
}

// KL(A || B) of one position: sum_v pA (xA - xB) - lse A + lse B, one vectorised exp per token; a row without a
// finite normaliser goes through log-softmax in double, as kl_divergence does
double position_kl(const float* a, const float* b, int V, const softmax_row& sa, double lse_a, double lse_b) {
    if (std::isnan(lse_a) || std::isnan(lse_b)) return kl_divergence(a, b, V);
    avec acc = {};
    int v = 0;
    for (; v + AL <= V; v += AL) {
        const avec xa = *(const avec*)(a + v), xb = *(const avec*)(b + v);
        const avec e = exp_lanes(xa - sa.mx);
        acc += xa == xa ? e * (xa - xb) : avec{};
    }
    double sum = 0;
    for (int l = 0; l < AL; l++) sum += acc[l];
    for (; v < V; v++)
        if (!std::isnan(a[v])) sum += std::exp((double)a[v] - sa.mx) * ((double)a[v] - b[v]);
    const double kl = sum / sa.sum - lse_a + lse_b;
    return std::isfinite(kl) ? std::max(0.0, kl) : kl_divergence(a, b, V);
}

// One model's surprisal from each position's normaliser (the same numbers as gb::surprisal, without a second pass
// over the logits): -log p of token t from position t - 1
void fill_surprisal(surprisal_result& s, const record& r, const tokenizer& tok, const std::vector<double>& lse,
                    const std::vector<int>& top) {
    const int T = r.n_tokens, V = r.vocab;
    s = surprisal_result{};
    if (T < 2) return; // (one token: nothing to score)
    s.n_tokens = T;
    s.nats.assign(T, std::numeric_limits<double>::quiet_NaN());
    s.top_ids.assign(T, -1), s.top_probs.assign(T, 0.0f);
    double total = 0;
    size_t bytes = 0;
    for (int t = 1; t < T; t++) {
        const float* row = &r.logits[(size_t)(t - 1) * V];
        s.top_ids[t] = top[t - 1];
        if (std::isnan(lse[t - 1])) { // a broken row: as surprisal() reads it
            std::vector<double> lp;
            log_softmax(lp, row, V);
            s.nats[t] = -lp[r.tokens[t]];
            s.top_probs[t] = softmax_prob(softmax_stats(row, V), row, V, s.top_ids[t]);
        } else {
            s.nats[t] = lse[t - 1] - row[r.tokens[t]];
            s.top_probs[t] = (float)std::exp(row[s.top_ids[t]] - lse[t - 1]);
        }
        total += s.nats[t];
        bytes += token_bytes(tok, r.tokens[t]).size();
    }
    s.scored = T - 1;
    s.mean_nats = total / s.scored;
    s.bits_per_byte = bytes > 0 ? total / std::log(2.0) / (double)bytes : std::numeric_limits<double>::quiet_NaN();
}

// KL(A || B), the top-1s of every position's next-token distributions, and both models' surprisal
void compare_logits(compare_result& out, const record& ra, const model& a, const record& rb, const model& b) {
    const int T = out.n_tokens, V = out.vocab;
    out.kl.assign(T, 0.0), out.top_a.assign(T, -1), out.top_b.assign(T, -1), out.top_agree.assign(T, 0);
    std::vector<double> lse_a(T), lse_b(T);
#pragma omp parallel for schedule(static) if (T > 1 && (int64_t)T * V >= (1 << 16))
    for (int t = 0; t < T; t++) {
        const float *x = &ra.logits[(size_t)t * V], *y = &rb.logits[(size_t)t * V];
        const softmax_row sa = softmax_stats(x, V), sb = softmax_stats(y, V);
        lse_a[t] = log_norm(sa), lse_b[t] = log_norm(sb);
        out.kl[t] = position_kl(x, y, V, sa, lse_a[t], lse_b[t]);
        out.top_a[t] = top1(x, V, sa), out.top_b[t] = top1(y, V, sb);
        out.top_agree[t] = out.top_a[t] == out.top_b[t];
    }
    double sum = 0;
    for (int t = 0; t < T; t++) sum += out.kl[t], out.top_agree_count += out.top_agree[t];
    out.mean_kl = sum / T;
    fill_surprisal(out.surprisal_a, ra, a.tok, lse_a, out.top_a);
    fill_surprisal(out.surprisal_b, rb, b.tok, lse_b, out.top_b);
    out.surprisal_diff.assign(T, std::numeric_limits<double>::quiet_NaN());
    for (int t = 1; t < T; t++) out.surprisal_diff[t] = out.surprisal_b.nats[t] - out.surprisal_a.nats[t];
}

// Each head's Jensen–Shannon divergence between the two patterns, averaged over query rows
void compare_heads(compare_result& out, const record& ra, const record& rb) {
    const int L = out.n_layer, H = out.n_head, T = out.n_tokens;
    out.head_js.assign((size_t)L * H, 0.0f);
#pragma omp parallel for schedule(dynamic, 1) if (L * H > 1 && (int64_t)L * H * T * T >= (1 << 16))
    for (int lh = 0; lh < L * H; lh++) {
        const int l = lh / H, h = lh % H;
        const float *pa = ra.head(l, h), *pb = rb.head(l, h);
        double sum = 0;
        for (int q = 0; q < T; q++) { // keys past a causal query's own are 0 in both: leaving them out changes nothing
            const int n = std::max(ra.last_key(q), rb.last_key(q)) + 1;
            sum += js_divergence(pa + (size_t)q * T, pb + (size_t)q * T, n);
        }
        out.head_js[lh] = (float)(sum / T);
    }
}

// The lens's top-1 and its probability from the logits of each point [P][V]
void lens_tops(std::vector<int>& top, std::vector<float>& prob, const float* logits, int P, int V) {
    top.assign(P, -1), prob.assign(P, 0.0f);
    for (int p = 0; p < P; p++) {
        const float* lg = logits + (size_t)p * V;
        const softmax_row sm = softmax_stats(lg, V);
        top[p] = top1(lg, V, sm);
        prob[p] = softmax_prob(sm, lg, V, top[p]);
    }
}

// The residual stream at position t of every point but the last, through the final norm: rows [P - 1][d]
void lens_rows(float* xn, const record& r, const model& m, int t, gemm_scratch& gs) {
    const int P = 2 * r.n_layer + 1, d = r.d_model;
    std::vector<float> x((size_t)(P - 1) * d);
    for (int p = 0; p < P - 1; p++) std::copy_n(r.resid(p) + (size_t)t * d, d, &x[(size_t)p * d]);
    final_norm_forward(xn, x.data(), P - 1, m, false, gs);
}

// Each point's lens top-1 and its probability at position t: rows [P - 1][d] through the final norm and the head;
// the last point's are the run's own logits at t
void lens_column(std::vector<int>& top, std::vector<float>& prob, const record& r, const model& m, int t) {
    const int P = 2 * r.n_layer + 1, d = r.d_model, V = r.vocab;
    std::vector<float> xn((size_t)(P - 1) * d), logits((size_t)P * V);
    gemm_scratch gs;
    lens_rows(xn.data(), r, m, t, gs);
    lm_head_forward(logits.data(), xn.data(), P - 1, m, gs);
    if (m.config.final_softcap > 0) softcap_forward(logits.data(), (size_t)(P - 1) * V, m.config.final_softcap);
    std::copy_n(&r.logits[(size_t)t * V], V, &logits[(size_t)(P - 1) * V]);
    lens_tops(top, prob, logits.data(), P, V);
}

// One model's run for compare_models, with its lens at position t: the forward keeps the final norm's rows and
// computes one logit, then every position's logits and the lens rows go through the LM head in one product. (A
// stored head is dequantised once per product, so the lens as a product of its own cost as much again as its
// rows: 60 % more than this on the Llama-3.2-1B shape.)
void run_with_lens(record& r, std::vector<int>& top, std::vector<float>& prob, const model& m,
                   const std::vector<int>& tokens, int t, const compare_options& opt) {
    forward_options fo;
    fo.keep = compare_request();
    fo.keep.points |= hook_bit(HOOK_FINAL_NORM);
    fo.all_logits = true;
    fo.logit_ids = {0};
    fo.cancelled = opt.cancelled;
    run_forward(r, m, tokens, {}, fo);
    const int T = r.n_tokens, P = 2 * r.n_layer + 1, d = r.d_model, V = m.config.vocab_size;
    const float* fin = r.get(HOOK_FINAL_NORM, r.n_layer);
    if (!fin) throw error("internal: compare's run did not keep the final norm");
    std::vector<float> xn((size_t)(T + P - 1) * d), logits((size_t)(T + P) * V); // [T][V] the run's, [P][V] the lens
    std::copy_n(fin, (size_t)T * d, xn.data());
    gemm_scratch gs;
    lens_rows(&xn[(size_t)T * d], r, m, t, gs);
    lm_head_forward(logits.data(), xn.data(), T + P - 1, m, gs);
    if (m.config.final_softcap > 0) softcap_forward(logits.data(), (size_t)(T + P - 1) * V, m.config.final_softcap);
    r.logit_ids.clear();
    r.logits.assign(logits.begin(), logits.begin() + (size_t)T * V);
    std::copy_n(&r.logits[(size_t)t * V], V, &logits[(size_t)(T + P - 1) * V]); // the last point: the run's own
    lens_tops(top, prob, &logits[(size_t)T * V], P, V);
}

void check_record(const record& r, const model& m, const char* which) {
    const std::string who = std::string("compare: model ") + which + "'s run ";
    if (r.n_layer != m.config.n_layer || r.d_model != m.config.d_model) throw error("internal: " + who + "is of another model");
    if (!r.all_logits || !r.logit_ids.empty() || r.logits.size() != (size_t)r.n_tokens * r.vocab)
        throw error(who + "kept only the last position's logits (run it with all logits)");
    for (int p = 0; p < 2 * r.n_layer + 1; p++)
        if (!r.resid(p)) throw error(who + "left out the residual stream at " + resid_labels(r.n_layer)[p]);
    for (int l = 0; l < r.n_layer; l++)
        if (!r.has_layer(l)) throw error(who + "left out the attention pattern of layer " + std::to_string(l));
}

} // namespace

double js_divergence(const float* p, const float* q, int n) {
    double js = 0;
    for (int i = 0; i < n; i++) {
        const double a = p[i], b = q[i], m = 0.5 * (a + b);
        if (a > 0) js += 0.5 * a * std::log(a / m);
        if (b > 0) js += 0.5 * b * std::log(b / m);
    }
    return std::max(0.0, js);
}

void check_comparable(const model& a, const model& b) {
    for (const model* m : {&a, &b}) {
        require(*m, FEATURE_LENS);
        const kind_info& k = kind_info_of(m->config);
        if (k.input != INPUT_TEXT || k.output != OUTPUT_NEXT_TOKEN)
            throw error("compare: " + m->path + " is a " + k.title + "; compare reads a prompt through two models "
                        "that predict the next token");
    }
    const model_config &ca = a.config, &cb = b.config;
    auto shape = [](const model_config& c) {
        return std::to_string(c.n_layer) + " layers, d " + std::to_string(c.d_model) + ", " + std::to_string(c.n_head) +
               " heads (" + std::to_string(c.n_kv_head) + " kv) of " + std::to_string(c.d_head);
    };
    if (ca.n_layer != cb.n_layer || ca.d_model != cb.d_model || ca.n_head != cb.n_head || ca.n_kv_head != cb.n_kv_head ||
        ca.d_head != cb.d_head)
        throw error("compare: the models' shapes differ: A has " + shape(ca) + ", B has " + shape(cb));
    const std::vector<std::string> &va = a.tok.vocab, &vb = b.tok.vocab;
    for (size_t i = 0; i < std::min(va.size(), vb.size()); i++)
        if (va[i] != vb[i])
            throw error("compare: the tokenizers differ: id " + std::to_string(i) + " is " + shown(a.tok, (int)i) +
                        " in A and \"" + token_text(b.tok, (int)i) + "\" in B");
    if (va.size() != vb.size() || ca.vocab_size != cb.vocab_size)
        throw error("compare: the tokenizers differ: A has " + std::to_string(ca.vocab_size) + " tokens, B has " +
                    std::to_string(cb.vocab_size));
}

void check_same_ids(const model& a, const model& b, const std::vector<int>& ids_a, const std::vector<int>& ids_b) {
    const size_t n = std::min(ids_a.size(), ids_b.size());
    size_t t = 0;
    while (t < n && ids_a[t] == ids_b[t]) t++;
    if (t == n && ids_a.size() == ids_b.size()) return;
    const std::string ra = t < ids_a.size() ? shown(a.tok, ids_a[t]) : "nothing (the end)";
    const std::string rb = t < ids_b.size() ? shown(b.tok, ids_b[t]) : "nothing (the end)";
    throw error("compare: the tokenizers read the prompt differently: at position " + std::to_string(t) + " A reads " +
                ra + ", B reads " + rb);
}

record_request compare_request() {
    record_request rq;
    rq.points = hook_bit(HOOK_PATTERN);
    rq.resid_stream = true;
    rq.budget_bytes = 0;
    return rq;
}

namespace {

// Everything but the lens; the caller fills it in (out.lens_*) and then calls first_disagreement
void compare_streams_logits_heads(compare_result& out, const record& ra, const model& a, const record& rb,
                                  const model& b) {
    check_record(ra, a, "A"), check_record(rb, b, "B");
    if (ra.tokens != rb.tokens) throw error("internal: compare_records needs two runs of the same token ids");
    const double fa = out.forward_ms_a, fb = out.forward_ms_b;
    out = compare_result{};
    out.forward_ms_a = fa, out.forward_ms_b = fb;
    out.n_layer = ra.n_layer, out.n_head = ra.n_head, out.n_tokens = ra.n_tokens, out.vocab = ra.vocab;
    out.n_points = 2 * ra.n_layer + 1;
    out.points = resid_labels(ra.n_layer);
    out.pieces = ra.pieces;
    compare_streams(out, ra, rb);
    compare_logits(out, ra, a, rb, b);
    compare_heads(out, ra, rb);
}

void first_disagreement(compare_result& out) {
    out.first_disagree = -1;
    for (int p = 0; p < out.n_points && out.first_disagree < 0; p++)
        if (out.lens_top_a[p] != out.lens_top_b[p]) out.first_disagree = p;
}

int lens_at(const compare_options& opt, int T) { return opt.lens_position < 0 ? T - 1 : std::min(opt.lens_position, T - 1); }

} // namespace

void compare_records(compare_result& out, const record& ra, const model& a, const record& rb, const model& b,
                     const compare_options& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    compare_streams_logits_heads(out, ra, a, rb, b);
    out.lens_position = lens_at(opt, ra.n_tokens);
    lens_column(out.lens_top_a, out.lens_prob_a, ra, a, out.lens_position);
    lens_column(out.lens_top_b, out.lens_prob_b, rb, b, out.lens_position);
    first_disagreement(out);
    out.analysis_ms = ms_since(t0);
}

// The two runs side by side, one thread each, when there are two threads to give and either the runs should take
// about as long (one family, the same stored types) or they are small: each run's parallel regions then stay on
// its thread, and the barriers a small model's forward waits at (most of its time on the default model) are not
// paid. Large runs of unequal cost (F16 against Q4_K) go one after the other on every thread, or the faster one's
// core would idle (GPT-2 small at 123 tokens, F32 against Q4_K: 2.4x one forward side by side, 2.1x one after
// the other; the earlier 4-layer default model against its Q4_K copy: 1.7x and 2.25x).
bool compare_side_by_side(const model& a, const model& b, int n_tokens) {
    if (omp_get_max_threads() < 2 || omp_in_parallel()) return false;
    const weight_types ta = stored_types(a), tb = stored_types(b);
    const bool alike = a.config.arch == b.config.arch && ta.attention == tb.attention && ta.mlp == tb.mlp &&
                       ta.embedding == tb.embedding && ta.head == tb.head;
    const param_counts pa = count_params(a);
    const bool small = (pa.attention + pa.mlp) * (int64_t)n_tokens <= (int64_t)1 << 30; // multiply-adds
    return alike || small;
}

void compare_models(compare_result& out, const model& a, const model& b, const std::vector<int>& tokens,
                    const compare_options& opt, record* run_b) {
    check_comparable(a, b);
    if (tokens.empty()) throw error("compare: no tokens to run");
    const int at = lens_at(opt, (int)tokens.size());
    std::vector<int> top_a, top_b;
    std::vector<float> prob_a, prob_b;
    record ra, own_b;
    record& rb = run_b ? *run_b : own_b;
    const bool side = opt.side_by_side && compare_side_by_side(a, b, (int)tokens.size());
    double ms[2] = {0, 0};
    std::exception_ptr failed[2];
    auto one = [&](int i) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
            if (i == 0) run_with_lens(ra, top_a, prob_a, a, tokens, at, opt);
            else run_with_lens(rb, top_b, prob_b, b, tokens, at, opt);
        } catch (...) {
            failed[i] = std::current_exception();
        }
        ms[i] = ms_since(t0); // (with its lens)
    };
    if (side) {
#pragma omp parallel num_threads(2)
        one(omp_get_thread_num());
    } else {
        one(0);
        if (!failed[0]) one(1);
    }
    for (const std::exception_ptr& e : failed)
        if (e) std::rethrow_exception(e);
    out.forward_ms_a = ms[0], out.forward_ms_b = ms[1];
    auto t0 = std::chrono::steady_clock::now();
    compare_streams_logits_heads(out, ra, a, rb, b);
    out.lens_position = at;
    out.lens_top_a = top_a, out.lens_prob_a = prob_a, out.lens_top_b = top_b, out.lens_prob_b = prob_b;
    first_disagreement(out);
    out.side_by_side = side; // (after compare_streams_logits_heads, which starts out afresh)
    out.analysis_ms = ms_since(t0);
}

} // namespace gb
