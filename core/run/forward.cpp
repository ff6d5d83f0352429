// The forward pass: one per-layer loop, with every intermediate passing its hook point.
//
// Sections: what happens at each point (plan) | applying interventions, hooks and the record | eval
#include "run/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <malloc.h>

#include "kernels/ops.h"
#include "run/vision.h"
#include "util/error.h"

namespace gb {

using clock_type = std::chrono::steady_clock;
static double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

void state_init(forward_state& s, const model_config& c, int n_ctx) {
    if (n_ctx <= 0 || n_ctx > c.n_ctx) n_ctx = c.n_ctx;
    s.n_ctx = n_ctx;
    s.n_past = 0;
    // allocated by the first eval that keeps keys: one run that fills the whole context never needs them
    s.k_cache.clear();
    s.v_cache.clear();
}

// ---------------------------------------------------------------------------------------------
// Plan: what happens at each (point, layer) of one call, worked out once so that a point with nothing to do
// costs one byte read
// ---------------------------------------------------------------------------------------------
enum point_flag : uint8_t { PT_CHANGE = 1, PT_HOOK = 2, PT_KEEP = 4 };

// Three views of one buffer kept in forward_state, so that a call (a generated token) allocates nothing.
struct point_plan {
    int n_layer = 0;
    uint8_t* flags;         // [HOOK_COUNT][L] (final points at layer 0)
    uint8_t* identity_norm; // [L + 1]: attn_in and mlp_in of layer l (bit 0, bit 1); [L] final norm
    uint8_t* no_residual;   // [L]: resid_mid (bit 0), resid_post (bit 1)
    uint8_t* no_cross;      // [L]: the cross-attention's output is zero (attn_out zeroed whole: no-attention)
    uint8_t& at(hook_point p, int l) { return flags[(size_t)p * n_layer + (hook_is_final(p) ? 0 : l)]; }
};

static bool covers_layer(int want, hook_point p, int l) { return hook_is_final(p) || want < 0 || want == l; }

static point_plan make_plan(std::vector<uint8_t>& buf, const forward_options& opt, const record_plan* rp, int L) {
    buf.assign((size_t)HOOK_COUNT * L + 3 * L + 1, 0); // keeps its capacity: no allocation after the first call
    point_plan pl;
    pl.n_layer = L;
    pl.flags = buf.data();
    pl.identity_norm = pl.flags + (size_t)HOOK_COUNT * L;
    pl.no_residual = pl.identity_norm + L + 1;
    pl.no_cross = pl.no_residual + L;
    for (const intervention& v : opt.interventions)
        for (int l = 0; l < L; l++) {
            if (!covers_layer(v.layer, v.point, l)) continue;
            if (v.kind == INTERVENE_IDENTITY_NORM)
                pl.identity_norm[v.point == HOOK_FINAL_NORM ? L : l] |= v.point == HOOK_MLP_IN ? 2 : 1;
            else if (v.kind == INTERVENE_NO_RESIDUAL)
                pl.no_residual[l] |= v.point == HOOK_RESID_POST ? 2 : 1;
            else
                pl.at(v.point, l) |= PT_CHANGE;
            // cross-attention counts as attention: it goes with the whole attn_out (not with a head's or a position's)
            if (v.kind == INTERVENE_ZERO && v.point == HOOK_ATTN_OUT && v.head < 0 && v.position < 0) pl.no_cross[l] = 1;
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

// ---------------------------------------------------------------------------------------------
// At a point: interventions, then hooks, then the record's copy (so the record holds what flowed on)
// ---------------------------------------------------------------------------------------------
// The rows of t an intervention covers: its position's row or all; its head's slice or whole rows.
static void apply_intervention(const intervention& v, hook_tensor& t, const model_config& c) {
    const bool per_head = v.head >= 0;
    const int slice = per_head ? hook_head_width(t.point, c, t.width) : t.width;
    const int col0 = per_head && t.point != HOOK_PATTERN ? v.head * slice : 0;
    const int r0 = v.position >= 0 ? v.position - t.pos0 : 0;
    const int r1 = v.position >= 0 ? r0 + 1 : t.n;
    if (r0 < 0 || r0 >= t.n) return; // this call does not hold that position
    // the pattern is [H][n][n_keys]: head blocks of n rows
    const int blocks = t.point == HOOK_PATTERN ? (per_head ? 1 : c.n_head) : 1;
    const int block0 = t.point == HOOK_PATTERN && per_head ? v.head : 0;
    for (int b = 0; b < blocks; b++)
        for (int r = r0; r < r1; r++) {
            float* dst = t.row((block0 + b) * (t.point == HOOK_PATTERN ? t.n : 0) + r) + col0;
            if (v.kind == INTERVENE_ZERO) {
                std::fill_n(dst, slice, 0.0f);
            } else { // SET: one row given, or a row per position from 0
                const float* src = v.position >= 0 ? v.values : v.values + (size_t)(t.pos0 + r) * slice;
                std::copy_n(src, slice, dst);
            }
        }
}

// Everything that touches tensors at points during one eval call.
struct point_visitor {
    const forward_options& opt;
    const model_config& c;
    point_plan& plan;
    record* rec;
    int pos0;

    // Returns true when an intervention or hook wrote to the tensor.
    bool visit(hook_point p, int l, float* data, int n, int width, int stride) {
        const uint8_t f = plan.at(p, l);
        if (!f) return false;
        hook_tensor t{p, hook_is_final(p) ? c.n_layer : l, data, n, pos0, width, stride};
        bool wrote = false;
        if (f & PT_CHANGE)
            for (const intervention& v : opt.interventions)
                if ((v.kind == INTERVENE_ZERO || v.kind == INTERVENE_SET) && v.point == p && covers_layer(v.layer, p, l)) {
                    apply_intervention(v, t, c);
                    wrote = true;
                }
        if (f & PT_HOOK)
            for (const hook& h : opt.hooks)
                if (h.point == p && covers_layer(h.layer, p, l) && h.fn && h.fn(t)) wrote = true;
        // the pattern is kept where the attention wrote it; other points are copied, rows packed
        if ((f & PT_KEEP) && rec && p != HOOK_PATTERN) {
            // record rows are positions, except a final point's single row when only the last logits are kept
            const int row0 = hook_is_final(p) && !rec->all_logits ? 0 : pos0;
            float* dst = rec->get_mut(p, l) + (size_t)row0 * width;
            for (int r = 0; r < n; r++) std::copy_n(data + (size_t)r * stride, width, dst + (size_t)r * width);
        }
        return wrote;
    }
};

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------
void record_begin(record& rec, const model& m, const int* tokens, int n, bool all_logits, const record_plan& plan) {
    const model_config& c = m.config;
    rec.n_layer = c.n_layer;
    rec.n_head = c.n_head;
    rec.n_kv_head = c.n_kv_head;
    rec.d_model = c.d_model;
    rec.d_head = c.d_head;
    rec.d_ff = c.d_ff;
    rec.n_expert = c.n_expert;
    rec.window.resize(c.n_layer);
    for (int l = 0; l < c.n_layer; l++) rec.window[l] = c.window_at(l);
    rec.causal = !arch_table(c.arch).bidirectional;
    rec.n_tokens = n;
    rec.vocab = c.vocab_size;
    rec.all_logits = all_logits;
    rec.tokens.assign(tokens, tokens + n);
    rec.pieces.resize(n);
    for (int t = 0; t < n; t++) rec.pieces[t] = (kind_of(c) == KIND_VISION) ? vision_piece(c, t) : token_text(m.tok, tokens[t]);
    for (int p = 0; p < HOOK_COUNT; p++) {
        const std::vector<uint8_t>& keep = plan.keep[p];
        rec.slot[p].assign(keep.size(), -1);
        rec.acts[p].clear();
        for (size_t l = 0; l < keep.size(); l++)
            if (keep[l] && p != HOOK_LOGITS) {
                rec.slot[p][l] = (int)rec.acts[p].size();
                rec.acts[p].push_back(std::make_shared<tensor_buffer>(rec.layer_floats((hook_point)p)));
            }
    }
    rec.resid_norm.assign((size_t)(2 * c.n_layer + 1) * n, 0.0f);
    rec.nonfinite_layer = -1;
    rec.nonfinite_where.clear();
    rec.budget_note = plan.note;
}

record_plan plan_of(const record& rec) {
    record_plan pl;
    for (int p = 0; p < HOOK_COUNT; p++) {
        pl.keep[p].resize(rec.slot[p].size());
        for (size_t l = 0; l < rec.slot[p].size(); l++) pl.keep[p][l] = rec.slot[p][l] >= 0;
    }
    pl.note = rec.budget_note;
    return pl;
}

void eval(std::vector<float>& logits, record* rec, forward_state& s, const model& m, const int* tokens, int n,
          const forward_options& opt) {
    const model_config& c = m.config;
    const model_weights& w = m.weights;
    const arch_info& arch = arch_table(c.arch);
    const int d = c.d_model, dh = c.d_head, H = c.n_head, KV = c.n_kv_head, L = c.n_layer, V = c.vocab_size;
    const int qkv_w = (H + 2 * KV) * dh; // fused projection width
    const int kv_w = KV * dh;
    const int n0 = s.n_past;
    const int n_keys = n0 + n;
    const bool resume = opt.start_resid != nullptr;
    // an encoder predicts at every position (each [MASK]), a decoder the next token after the last
    const bool all_logits = opt.all_logits || arch.bidirectional;
    static const std::vector<float> no_bias; // SwiGLU's gate has none
    auto t_start = clock_type::now();
    forward_timing tm;

    if (n <= 0) throw error("empty prompt: nothing to run");
    if (arch.bidirectional && n0 > 0)
        throw error("internal: an encoder's every position sees every token: it runs the whole prompt at once");
    if (s.n_ctx == 0) state_init(s, c, c.n_ctx);
    if (n_keys > s.n_ctx)
        throw error("prompt too long: " + std::to_string(n_keys) + " tokens, the model's context is " +
                    std::to_string(s.n_ctx));
    if (rec && !opt.continue_record && (n0 != 0 || resume))
        throw error("internal: a record needs the prompt from position 0 and the embeddings");
    if (opt.continue_record && (!rec || rec->n_tokens != n_keys || all_logits != rec->all_logits))
        throw error("internal: a continued record must be laid out for the call's positions");
    if (opt.start_point < 0 || opt.start_point > 2 * L || (opt.start_point > 0 && !resume))
        throw error("internal: resuming at residual point " + std::to_string(opt.start_point) + " needs its stream");
    check_interventions(opt.interventions, c);
    if (arch.kind == KIND_VISION && (!opt.pixels || n0 != 0 || n != c.n_ctx))
        throw error("internal: a vision model runs its image's " + std::to_string(c.n_ctx) + " positions in one call");
    for (int t = 0; t < n && arch.kind == KIND_VISION; t++)
        if (tokens[t] != t) throw error("internal: a vision model's tokens are its positions");
    for (int t = 0; t < n && arch.kind != KIND_VISION; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            throw error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                        std::to_string(V - 1) + ")");
    for (int id : opt.logit_ids)
        if (id < 0 || id >= V) throw error("logit id " + std::to_string(id) + " is outside the vocabulary");
    if (arch.cross && (!opt.source || opt.n_source <= 0))
        throw error("internal: an encoder–decoder's decoder reads the encoder's output (forward_options::source)");
    if (arch.cross && opt.continue_record) throw error("internal: an encoder–decoder's record is made whole");
    if (arch.no_head && (rec || !opt.logit_ids.empty()) && opt.continue_record)
        throw error("internal: an encoder stack runs whole");

    // The cache is written only when a later call can read it: this call continues earlier ones, leaves room for
    // more, or the caller keeps it. Otherwise (a record of the whole context) attention reads keys and values in place.
    const bool use_cache = n0 > 0 || n_keys < s.n_ctx || s.keep_cache;
    if (use_cache) {
        grow(s.k_cache, (size_t)L * s.n_ctx * kv_w);
        grow(s.v_cache, (size_t)L * s.n_ctx * kv_w);
    }
    grow(s.x, (size_t)n * d);
    grow(s.xn, (size_t)n * d);
    grow(s.qkv, (size_t)n * qkv_w);
    grow(s.att_out, (size_t)n * H * dh);
    grow(s.att, (size_t)n * d);
    grow(s.ff, (size_t)n * c.d_ff);
    const bool gated = arch.mlp == MLP_SWIGLU || arch.mlp == MLP_GEGLU;
    if (gated) grow(s.ff2, (size_t)n * c.d_ff);
    if (c.parallel) grow(s.x_in, (size_t)n * d);
    float* x = s.x.data();
    const int S = opt.n_source, xq_w = H * dh;
    if (arch.cross) {
        grow(s.xq, (size_t)n * xq_w);
        if (n0 == 0) { // a new target: every layer's keys and values of the source, once
            s.cross_kv.resize((size_t)L * S * 2 * xq_w);
            for (int l = 0; l < L; l++)
                gemm(&s.cross_kv[(size_t)l * S * 2 * xq_w], opt.source, w.layers[l].x_kv, w.layers[l].x_kv_b, S, s.gemm);
        } else if (s.cross_kv.size() != (size_t)L * S * 2 * xq_w) {
            throw error("internal: a continued target must read the source it started with");
        }
    }

    const int n_out = all_logits ? n : 1;
    record_plan rp;
    if (rec && opt.continue_record) {
        rp = plan_of(*rec);
    } else if (rec) {
        rp = plan_record(opt.keep, c, n, n_out);
        record_begin(*rec, m, tokens, n, all_logits, rp);
        rec->logit_ids = opt.logit_ids;
        rec->n_source = arch.cross ? S : 0;
        if (arch.cross) rec->cross.assign((size_t)L * H * n * S, 0.0f);
        else rec->cross.clear();
    }
    point_plan plan = make_plan(s.plan, opt, rec ? &rp : nullptr, L);
    point_visitor at{opt, c, plan, rec, n0};
    // [2L+1][T]: this call's positions are columns n0.. of each point's row
    float* norms = rec && (opt.keep.resid_norms || opt.continue_record) ? rec->resid_norm.data() : nullptr;
    const size_t norm_row = rec ? (size_t)rec->n_tokens : (size_t)n;

    // residual point p: x <- x + f (f alone without the residual), Post-LN's norm of the sum (ln_g; null: none or
    // ablated), the point's interventions and hooks, then its norms and the first non-finite value (fused into the
    // add when nothing happens at the point)
    auto residual = [&](const float* f, bool replace, int point, hook_point hp, int layer, const char* where,
                        const std::vector<float>* ln_g = nullptr, const std::vector<float>* ln_b = nullptr) {
        float* pn = norms ? norms + (size_t)point * norm_row + n0 : nullptr;
        const bool fused = !plan.at(hp, layer) && !ln_g;
        bool finite = residual_step(x, f, replace, fused ? pn : nullptr, n, d);
        if (ln_g) norm_forward(x, x, ln_g, ln_b, arch.norm, c.norm_eps, n, d);
        if (!fused) {
            at.visit(hp, layer, x, n, d, d);
            finite = residual_step(x, nullptr, false, pn, n, d);
        }
        if (rec && rec->nonfinite_layer < 0 && !finite) {
            rec->nonfinite_layer = std::max(layer, 0);
            rec->nonfinite_where = point == 0 ? std::string(where) : "L" + std::to_string(layer) + " " + where;
        }
    };

    // the stream at the first point: embeddings (token row + learned position row), or the caller's
    auto t0 = clock_type::now();
    int first_layer = 0;
    bool skip_first_attention = false;
    if (resume) {
        std::copy_n(opt.start_resid, (size_t)n * d, x);
        const int p = opt.start_point;
        if (p == 0) {
            residual(nullptr, false, 0, HOOK_RESID_PRE, 0, "embed");
        } else if (p % 2) {
            if (c.parallel) throw error("internal: a parallel block resumes at its input, not after its attention");
            first_layer = (p - 1) / 2, skip_first_attention = true;
            at.visit(HOOK_RESID_MID, first_layer, x, n, d, d);
        } else {
            first_layer = p / 2;
            at.visit(HOOK_RESID_POST, first_layer - 1, x, n, d, d);
        }
    } else {
        if (arch.kind == KIND_VISION) patch_embed_forward(x, opt.pixels, m, s.gemm);
        for (int t = 0; t < n; t++) {
            float* xt = x + (size_t)t * d;
            if (arch.kind != KIND_VISION) table_row(xt, w.tok_emb, tokens[t]);
            if (arch.embed_scale || c.scale_embedding) { // Gemma, BART's scale_embedding: sqrt(d) times the table's
                const float k = std::sqrt((float)d);
                for (int i = 0; i < d; i++) xt[i] *= k;
            }
            if (arch.pos != POS_ROPE) { // a learned table, or the fixed sinusoids made at load
                const float* pe = &w.pos_emb[(size_t)(c.pos_offset + n0 + t) * d];
                for (int i = 0; i < d; i++) xt[i] += pe[i];
            }
            if (!w.type_emb.empty()) // BERT: one segment, type 0, for the whole prompt
                for (int i = 0; i < d; i++) xt[i] += w.type_emb[i];
        }
        // encoders norm the summed embeddings (part of the embedding: no ablation removes it)
        if (!w.emb_norm_g.empty()) norm_forward(x, x, &w.emb_norm_g, &w.emb_norm_b, arch.norm, c.norm_eps, n, d);
        residual(nullptr, false, 0, HOOK_RESID_PRE, 0, "embed");
    }
    tm.rest_ms += ms_since(t0);

    for (int l = first_layer; l < L; l++) {
        if (opt.cancelled && opt.cancelled()) throw cancelled();
        const layer_weights& lw = w.layers[l];
        const bool no_norm1 = plan.identity_norm[l] & 1, no_norm2 = plan.identity_norm[l] & 2;
        float* k_cache = use_cache ? &s.k_cache[(size_t)l * s.n_ctx * kv_w] : nullptr;
        float* v_cache = use_cache ? &s.v_cache[(size_t)l * s.n_ctx * kv_w] : nullptr;

        // ---- attention sublayer ----
        if (!(skip_first_attention && l == first_layer)) {
            t0 = clock_type::now();
            if (l > 0) at.visit(HOOK_RESID_PRE, l, x, n, d, d);
            if (c.parallel) std::copy_n(x, (size_t)n * d, s.x_in.data()); // the MLP reads the layer's input too
            // OLMo 2 has no norm before the sublayers: attn_in is the stream itself
            norm_forward(s.xn.data(), x, no_norm1 || !arch.pre_norm ? nullptr : &lw.norm1_g, &lw.norm1_b, arch.norm,
                         c.norm_eps, n, d);
            at.visit(HOOK_ATTN_IN, l, s.xn.data(), n, d, d);
            tm.rest_ms += ms_since(t0);
            t0 = clock_type::now();
            gemm(s.qkv.data(), s.xn.data(), lw.w_qkv, lw.b_qkv, n, s.gemm);
            tm.matmul_ms += ms_since(t0);
            t0 = clock_type::now();
            float* q = s.qkv.data();
            float* k_new = q + H * dh;
            float* v_new = k_new + kv_w;
            if (arch.qk_norm != QK_NORM_NONE && !no_norm1) { // RMSNorm of q and k before the rotation: all heads at once, or each
                const bool full = arch.qk_norm == QK_NORM_FULL;
                rms_groups(q, qkv_w, n, full ? 1 : H, full ? H * dh : dh, lw.q_norm, c.norm_eps);
                rms_groups(k_new, qkv_w, n, full ? 1 : KV, full ? KV * dh : dh, lw.k_norm, c.norm_eps);
            }
            if (arch.pos == POS_ROPE) {
                rope_forward(q, qkv_w, n, H, dh, n0, c.rope_freq, c.rope);
                rope_forward(k_new, qkv_w, n, KV, dh, n0, c.rope_freq, c.rope);
            }
            at.visit(HOOK_Q, l, q, n, H * dh, qkv_w);
            at.visit(HOOK_K, l, k_new, n, kv_w, qkv_w);
            at.visit(HOOK_V, l, v_new, n, kv_w, qkv_w);
            if (use_cache)
                for (int t = 0; t < n; t++) { // append this chunk's keys and values to the cache
                    std::copy_n(k_new + (size_t)t * qkv_w, kv_w, k_cache + (size_t)(n0 + t) * kv_w);
                    std::copy_n(v_new + (size_t)t * qkv_w, kv_w, v_cache + (size_t)(n0 + t) * kv_w);
                }
            tm.rest_ms += ms_since(t0);
            t0 = clock_type::now();
            attention_args aa;
            aa.q = q;
            aa.q_stride = qkv_w;
            aa.k = use_cache ? k_cache : k_new;
            aa.v = use_cache ? v_cache : v_new;
            aa.kv_stride = use_cache ? kv_w : qkv_w;
            aa.n_q = n;
            aa.n_past = n0;
            aa.n_head = H;
            aa.n_kv_head = KV;
            aa.d_head = dh;
            aa.scale = c.attn_scale;
            aa.softcap = c.attn_softcap;
            aa.window = c.window_at(l);
            aa.causal = !arch.bidirectional;
            // the probabilities go straight into the record when it keeps them; a hook or intervention on them
            // needs them somewhere too; otherwise the attention keeps them in its own scratch
            // (in place only from position 0: a continued record's rows for this call are not one block per head)
            const uint8_t pattern_flags = plan.at(HOOK_PATTERN, l);
            const bool keep_pattern = rec && (pattern_flags & PT_KEEP);
            aa.probs = nullptr;
            if (keep_pattern && n0 == 0) {
                aa.probs = rec->get_mut(HOOK_PATTERN, l);
            } else if (pattern_flags) {
                grow(s.probs, (size_t)H * n * n_keys);
                aa.probs = s.probs.data();
            }
            aa.out = s.att_out.data();
            aa.out_stride = H * dh;
            if (opt.attention) opt.attention(aa);
            else attention_cpu(aa);
            if (at.visit(HOOK_PATTERN, l, aa.probs, n, n_keys, n_keys)) attention_values_cpu(aa);
            if (keep_pattern && n0 > 0) { // rows n0.. of each head's [T][T] block (n_keys == T)
                float* dst = rec->get_mut(HOOK_PATTERN, l);
                for (int h = 0; h < H; h++)
                    std::copy_n(aa.probs + (size_t)h * n * n_keys, (size_t)n * n_keys,
                                dst + ((size_t)h * n_keys + n0) * n_keys);
            }
            at.visit(HOOK_Z, l, s.att_out.data(), n, H * dh, H * dh);
            tm.attention_ms += ms_since(t0);
            t0 = clock_type::now();
            // per head, then summed only when an intervention or hook changed a head's output: observing head_out
            // (a read-only hook, the record) keeps attn_out the one product, so it never changes the run's numbers
            bool heads_changed = false;
            if (plan.at(HOOK_HEAD_OUT, l)) {
                grow(s.head_out, (size_t)n * H * d);
                head_outputs(s.head_out.data(), s.att_out.data(), H * dh, lw.w_o, n, H, dh, s.blocks, s.gemm);
                heads_changed = at.visit(HOOK_HEAD_OUT, l, s.head_out.data(), n, H * d, H * d);
            }
            if (heads_changed) sum_heads(s.att.data(), s.head_out.data(), lw.b_o, n, H, d);
            else gemm(s.att.data(), s.att_out.data(), lw.w_o, lw.b_o, n, s.gemm);
            tm.matmul_ms += ms_since(t0);
            t0 = clock_type::now();
            // Gemma 2 and OLMo 2 norm the sublayer's output: attn_out is what reaches the stream
            // (no-layernorm makes every norm of the sublayer the identity: before, on q and k, and after)
            if (arch.post_norm && !no_norm1)
                norm_forward(s.att.data(), s.att.data(), &lw.post_attn_norm, nullptr, arch.norm, c.norm_eps, n, d);
            at.visit(HOOK_ATTN_OUT, l, s.att.data(), n, d, d);
            residual(s.att.data(), plan.no_residual[l] & 1, 2 * l + 1, HOOK_RESID_MID, l, "attn",
                     arch.post_ln && !no_norm1 ? &lw.norm1_g : nullptr, &lw.norm1_b);
            tm.rest_ms += ms_since(t0);
        }

        // ---- cross-attention sublayer (encoder–decoders' decoder layers): queries from the target's stream, keys
        // and values from the encoder's output, every source position seen. It has no hook point of its own: its
        // pattern goes to record::cross; no-attention zeroes its output, no-residual drops the stream from its sum,
        // no-layernorm makes its norm the identity (the layer's attention flags).
        if (arch.cross) {
            t0 = clock_type::now();
            const bool no_norm = no_norm1 || no_norm2;
            norm_forward(s.xn.data(), x, arch.pre_norm && !no_norm ? &lw.norm3_g : nullptr, &lw.norm3_b, arch.norm,
                         c.norm_eps, n, d);
            gemm(s.xq.data(), s.xn.data(), lw.x_q, lw.x_q_b, n, s.gemm);
            const float* kv = &s.cross_kv[(size_t)l * S * 2 * xq_w];
            attention_args aa;
            aa.q = s.xq.data();
            aa.q_stride = xq_w;
            aa.k = kv;
            aa.v = kv + xq_w;
            aa.kv_stride = 2 * xq_w;
            aa.n_q = n;
            aa.n_past = 0;
            aa.n_keys = S;
            aa.n_head = aa.n_kv_head = H;
            aa.d_head = dh;
            aa.causal = false;
            float* probs = nullptr; // rows of this call: [H][n][S] (position 0: straight into the record)
            if (rec && n0 == 0) probs = rec->cross.data() + (size_t)l * H * n * S;
            aa.probs = probs;
            aa.out = s.att_out.data();
            aa.out_stride = xq_w;
            attention_cpu(aa);
            tm.attention_ms += ms_since(t0);
            t0 = clock_type::now();
            gemm(s.att.data(), s.att_out.data(), lw.x_o, lw.x_o_b, n, s.gemm);
            const bool zero = plan.no_cross[l], drop = plan.no_residual[l] & 1;
            const size_t nd = (size_t)n * d;
            for (size_t i = 0; i < nd; i++) x[i] = (drop ? 0.0f : x[i]) + (zero ? 0.0f : s.att[i]);
            if (arch.post_ln && !no_norm) norm_forward(x, x, &lw.norm3_g, &lw.norm3_b, arch.norm, c.norm_eps, n, d);
            tm.matmul_ms += ms_since(t0);
        }

        // ---- MLP sublayer ----
        t0 = clock_type::now();
        // parallel blocks (GPT-NeoX): the MLP reads the layer's input, not the stream after attention
        const float* mlp_x = c.parallel ? s.x_in.data() : x;
        norm_forward(s.xn.data(), mlp_x, no_norm2 || !arch.pre_norm ? nullptr : &lw.norm2_g, &lw.norm2_b, arch.norm,
                     c.norm_eps, n, d);
        at.visit(HOOK_MLP_IN, l, s.xn.data(), n, d, d);
        tm.rest_ms += ms_since(t0);
        t0 = clock_type::now();
        if (c.n_expert > 0) { // mixture of experts (core/kernels/moe.h): its mixing weights pass the point "router"
            moe_forward(s.att.data(), s.xn.data(), n, lw, c, s.moe, s.gemm,
                        [&at, l, n](float* wts) { at.visit(HOOK_ROUTER, l, wts, n, at.c.n_expert, at.c.n_expert); });
            tm.matmul_ms += ms_since(t0);
        } else {
            // GPT-2's GELU is applied inside the product, to each output tile while it is in cache
            gemm(s.ff.data(), s.xn.data(), lw.w_up, lw.b_up, n, s.gemm,
                 arch.mlp == MLP_GELU ? EPILOGUE_GELU : EPILOGUE_NONE);
            if (gated) gemm(s.ff2.data(), s.xn.data(), lw.w_gate, no_bias, n, s.gemm);
            tm.matmul_ms += ms_since(t0);
            t0 = clock_type::now();
            const size_t n_ff = (size_t)n * c.d_ff;
            if (arch.mlp == MLP_SWIGLU) swiglu_forward(s.ff.data(), s.ff2.data(), n_ff);
            else if (arch.mlp == MLP_GEGLU) geglu_forward(s.ff.data(), s.ff2.data(), n_ff);
            else if (arch.mlp == MLP_GELU_ERF) gelu_erf_forward(s.ff.data(), n_ff);
            else if (arch.mlp == MLP_SILU) silu_forward(s.ff.data(), n_ff);
            at.visit(HOOK_MLP_POST, l, s.ff.data(), n, c.d_ff, c.d_ff);
            tm.rest_ms += ms_since(t0);
            t0 = clock_type::now();
            gemm(s.att.data(), s.ff.data(), lw.w_down, lw.b_down, n, s.gemm);
            tm.matmul_ms += ms_since(t0);
        }
        t0 = clock_type::now();
        if (arch.post_norm && !no_norm2)
            norm_forward(s.att.data(), s.att.data(), &lw.post_mlp_norm, nullptr, arch.norm, c.norm_eps, n, d);
        at.visit(HOOK_MLP_OUT, l, s.att.data(), n, d, d);
        // a parallel block's stream is dropped once, at resid_mid: resid_post adds the MLP to attention's output
        residual(s.att.data(), (plan.no_residual[l] & 2) && !c.parallel, 2 * l + 2, HOOK_RESID_POST, l, "mlp",
                 arch.post_ln && !no_norm2 ? &lw.norm2_g : nullptr, &lw.norm2_b);
        tm.rest_ms += ms_since(t0);
    }

    // final norm and LM head, only for the positions whose logits are wanted
    t0 = clock_type::now();
    const float* x_out = x + (size_t)(n - n_out) * d;
    final_norm_forward(s.xn.data(), x_out, n_out, m, plan.identity_norm[L], s.gemm);
    // the final points' rows are the last n_out positions: their first row's position is pos0 of the hook tensors
    // there (interventions by position and hooks read it)
    at.pos0 = n0 + n - n_out;
    at.visit(HOOK_FINAL_NORM, L, s.xn.data(), n_out, d, d);
    tm.rest_ms += ms_since(t0);
    t0 = clock_type::now();
    if (arch.no_head) { // an encoder stack: its output is what the decoder's cross-attention reads
        logits.assign(s.xn.begin(), s.xn.begin() + (size_t)n_out * d);
    } else if (!opt.logit_ids.empty()) { // a few rows of the LM head, in double
        const int k = (int)opt.logit_ids.size();
        logits.resize((size_t)n_out * k);
        std::vector<float> e(d);
        for (int j = 0; j < k; j++) {
            table_row(e.data(), w.unembedding(), opt.logit_ids[j]);
            for (int r = 0; r < n_out; r++) {
                const float* xr = s.xn.data() + (size_t)r * d;
                double sum = 0;
                for (int i = 0; i < d; i++) sum += (double)xr[i] * e[i];
                if (!w.lm_head_b.empty()) sum += w.lm_head_b[opt.logit_ids[j]];
                logits[(size_t)r * k + j] = c.final_softcap > 0 ? (float)(c.final_softcap * std::tanh(sum / c.final_softcap)) : (float)sum;
            }
        }
    } else {
        logits.resize((size_t)n_out * V);
        lm_head_forward(logits.data(), s.xn.data(), n_out, m, s.gemm);
        if (!w.dist_head.empty()) distill_average(logits.data(), s.xn.data() + d, m); // DeiT: row 0 is the prediction
        if (c.final_softcap > 0) softcap_forward(logits.data(), logits.size(), c.final_softcap); // Gemma 2
        at.visit(HOOK_LOGITS, L, logits.data(), n_out, V, V);
    }
    tm.matmul_ms += ms_since(t0);
    if (rec && rec->nonfinite_layer < 0 && !all_finite(logits.data(), logits.size())) {
        rec->nonfinite_layer = L - 1;
        rec->nonfinite_where = "logits";
    }

    s.n_past = n_keys;
    tm.total_ms = ms_since(t_start);
    if (rec) rec->timing = tm;
}

void keep_freed_buffers_in_heap() {
    mallopt(M_MMAP_THRESHOLD, 256 << 20); // blocks below this come from the heap, not a fresh mmap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap's top is not handed back after each forward
}

void run_forward(record& out, const model& m, const std::vector<int>& tokens, const ablation& ab,
                 const forward_options& opt) {
    if (tokens.empty()) throw error("empty prompt: nothing to run");
    if ((int)tokens.size() > m.config.n_ctx)
        throw error("prompt too long: " + std::to_string(tokens.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    forward_state s;
    state_init(s, m.config, (int)tokens.size());
    if (!ab.any()) {
        eval(out.logits, &out, s, m, tokens.data(), (int)tokens.size(), opt);
        return;
    }
    forward_options o = opt;
    std::vector<intervention> iv = ablation_interventions(ab, m.config);
    o.interventions.insert(o.interventions.begin(), iv.begin(), iv.end());
    eval(out.logits, &out, s, m, tokens.data(), (int)tokens.size(), o);
}

} // namespace gb
