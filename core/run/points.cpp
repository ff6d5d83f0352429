// What happens at the hook points of one forward call: the plan (which points change, are hooked or kept),
// applying interventions, calling hooks, copying into the record, and the residual points' add-and-measure.
#include <algorithm>

#include "kernels/ops.h"
#include "run/pass.h"
#include "util/error.h"
#include "util/lanes.h"

namespace gb {

static bool covers_layer(int want, hook_point p, int l) { return hook_is_final(p) || want < 0 || want == l; }

point_plan make_plan(std::vector<uint8_t>& buf, const forward_options& opt, const record_plan* rp, int L) {
    buf.assign((size_t)HOOK_COUNT * L + 2 * L + 1, 0); // keeps its capacity: no allocation after the first call
    point_plan pl;
    pl.n_layer = L;
    pl.flags = buf.data();
    pl.identity_norm = pl.flags + (size_t)HOOK_COUNT * L;
    pl.no_residual = pl.identity_norm + L + 1;
    for (const intervention& v : opt.interventions)
        for (int l = 0; l < L; l++) {
            if (!covers_layer(v.layer, v.point, l)) continue;
            if (v.kind == INTERVENE_IDENTITY_NORM)
                pl.identity_norm[v.point == HOOK_FINAL_NORM ? L : l] |= v.point == HOOK_MLP_IN ? NORM_MLP_IN : NORM_ATTN_IN;
            else if (v.kind == INTERVENE_NO_RESIDUAL)
                pl.no_residual[l] |= v.point == HOOK_RESID_POST ? SKIP_RESID_POST : SKIP_RESID_MID;
            else
                pl.at(v.point, l) |= PT_CHANGE;
        }
    for (const hook& h : opt.hooks)
        for (int l = 0; l < L; l++)
            if (covers_layer(h.layer, h.point, l)) pl.at(h.point, l) |= PT_HOOK;
    if (rp)
        for (int p = 0; p < HOOK_COUNT; p++)
            for (int l = 0; l < (int)rp->keep[p].size(); l++)
                if (rp->keep[p][l] && p != HOOK_LOGITS) pl.at((hook_point)p, l) |= PT_KEEP;
    return pl;
}

// The rows of t an intervention covers: its position's row or all; its head's slice or whole rows. A pattern is
// [H][n][keys]: a block of n rows per head.
void apply_intervention(const intervention& v, hook_tensor& t, const model_config& c) {
    const bool per_head = v.head >= 0, pattern = hook_is_pattern(t.point);
    const int slice = per_head ? hook_head_width(t.point, c, t.width) : t.width;
    const int col0 = per_head && !pattern ? v.head * slice : 0;
    int r0 = v.position >= 0 ? v.position - t.pos0 : 0;
    const int r1 = v.position >= 0 ? r0 + 1 : t.n;
    if (v.kind == INTERVENE_ADD && v.position < 0) r0 = std::max(0, v.from - t.pos0); // rows from position `from` on
    if (r0 < 0 || r0 >= t.n) return; // this call does not hold that position
    const int blocks = pattern ? (per_head ? 1 : c.n_head) : 1;
    const int block0 = pattern && per_head ? v.head : 0;
    for (int b = 0; b < blocks; b++)
        for (int r = r0; r < r1; r++) {
            float* dst = t.row((block0 + b) * (pattern ? t.n : 0) + r) + col0;
            if (v.kind == INTERVENE_ZERO) {
                std::fill_n(dst, slice, 0.0f);
            } else if (v.kind == INTERVENE_ADD) { // one row [slice], added to each covered row
                for (int i = 0; i < slice; i++) dst[i] += v.scale * v.values[i];
            } else { // SET: one row given, or a row per position from 0
                const float* src = v.position >= 0 ? v.values : v.values + (size_t)(t.pos0 + r) * slice;
                std::copy_n(src, slice, dst);
            }
        }
}

// Whether knockout v stops query position q of head h from reading key j.
static bool knocks(const intervention& v, int h, int q, int j) {
    return (v.head < 0 || v.head == h) && (v.position < 0 || v.position == q) && (v.key < 0 || v.key == j);
}

// The KNOCKOUT interventions at the pattern t of layer l, all at once: the keys they name get probability 0 and
// each row they touch is renormalised over the keys left (the softmax with those scores at -inf). Throws
// gb::error for a query left no key, or left only keys whose probability underflowed to 0. Returns whether any
// row changed (a knockout of keys after the query, already masked, changes none).
static bool apply_knockouts(pass& f, hook_tensor& t, int l) {
    std::vector<const intervention*> ko;
    for (const intervention& v : f.opt.interventions)
        if (v.kind == INTERVENE_KNOCKOUT && v.point == HOOK_PATTERN && covers_layer(v.layer, HOOK_PATTERN, l)) ko.push_back(&v);
    if (ko.empty()) return false;
    const int window = f.c.window_at(l);
    bool touched = false;
    for (int h = 0; h < f.c.n_head; h++)
        for (int r = 0; r < t.n; r++) {
            const int q = t.pos0 + r;
            bool row_named = false;
            for (const intervention* v : ko) row_named |= (v->head < 0 || v->head == h) && (v->position < 0 || v->position == q);
            if (!row_named) continue;
            float* row = t.row(h * t.n + r);
            // the keys the query sees at all: causal (and a window), or every key in an encoder
            const int j0 = window > 0 && q >= window ? q - window + 1 : 0;
            const int j1 = f.arch.bidirectional ? t.width : q + 1;
            double sum = 0;
            int left = 0, knocked = 0;
            for (int j = j0; j < j1; j++) {
                bool off = false;
                for (const intervention* v : ko) off |= knocks(*v, h, q, j);
                if (off) row[j] = 0.0f, knocked++;
                else sum += row[j], left++;
            }
            if (knocked == 0) continue; // only keys the query never sees: the row stays as it is, bit for bit
            if (left == 0 || !(sum > 0))
                throw error("knockout at layer " + std::to_string(l) + ": query " + std::to_string(q) + " of head " +
                            std::to_string(l) + "." + std::to_string(h) +
                            (left == 0 ? " has no key left to read" : " is left only keys whose probability is 0 in float (underflow)"));
            for (int j = j0; j < j1; j++) row[j] = (float)(row[j] / sum);
            touched = true;
        }
    return touched;
}

bool visit(pass& f, hook_point p, int l, float* data, int n, int width, int stride) {
    const uint8_t flags = f.plan.at(p, l);
    if (!flags) return false;
    hook_tensor t{p, hook_is_final(p) ? f.c.n_layer : l, data, n, f.pos0, width, stride};
    bool wrote = false;
    if ((flags & PT_CHANGE) && p == HOOK_PATTERN) wrote = apply_knockouts(f, t, l); // before ZERO (its rows stay 0)
    if (flags & PT_CHANGE)
        for (const intervention& v : f.opt.interventions)
            if ((v.kind == INTERVENE_ZERO || v.kind == INTERVENE_SET || v.kind == INTERVENE_ADD) && v.point == p &&
                covers_layer(v.layer, p, l)) {
                apply_intervention(v, t, f.c);
                wrote = true;
            }
    if (flags & PT_HOOK)
        for (const hook& h : f.opt.hooks)
            if (h.point == p && covers_layer(h.layer, p, l) && h.fn && h.fn(t)) wrote = true;
    // a pattern is kept where the attention wrote it (blocks.cpp); other points are copied, rows packed
    if ((flags & PT_KEEP) && f.rec && !hook_is_pattern(p)) {
        // record rows are positions, except a final point's single row when only the last logits are kept
        const int row0 = hook_is_final(p) && !f.rec->all_logits ? 0 : f.pos0;
        float* dst = f.rec->get_mut(p, l) + (size_t)row0 * width;
        // split over the threads: a serial copy this long would let OpenMP's other thread fall asleep (threads.h),
        // and waking it for the next product costs more than the copy
#pragma omp parallel for schedule(static) if ((int64_t)n * width >= parallel_min_rows)
        for (int r = 0; r < n; r++) std::copy_n(data + (size_t)r * stride, width, dst + (size_t)r * width);
    }
    return wrote;
}

void residual_point(pass& f, const float* add, bool replace, int q, hook_point hp, int l, const char* where,
                    const std::vector<float>* ln_g, const std::vector<float>* ln_b) {
    const int d = f.c.d_model;
    float* pn = f.norms ? f.norms + (size_t)q * f.norm_row + f.n0 : nullptr;
    // with nothing to do at the point, the norms are measured in the add itself
    const bool fused = !f.plan.at(hp, l) && !ln_g;
    bool finite = residual_step(f.x, add, replace, fused ? pn : nullptr, f.n, d);
    if (ln_g) norm_forward(f.x, f.x, ln_g, ln_b, f.arch.norm, f.c.norm_eps, f.n, d);
    if (!fused) {
        visit(f, hp, l, f.x, f.n, d, d);
        finite = residual_step(f.x, nullptr, false, pn, f.n, d);
    }
    if (f.rec && f.rec->nonfinite_layer < 0 && !finite) {
        f.rec->nonfinite_layer = std::max(l, 0);
        f.rec->nonfinite_where = q == 0 ? std::string(where) : "L" + std::to_string(l) + " " + where;
    }
}

} // namespace gb
