// The forward pass's blocks, in the order a token meets them: embeddings, then per layer self-attention,
// cross-attention (encoder–decoders' decoder layers) and the MLP (dense or mixture of experts), then the head.
// Each block reads and writes the call's stream (pass::x) and passes every intermediate through its hook point;
// what the families compute differently comes from the architecture table (arch_info).
#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "run/pass.h"
#include "util/lanes.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// embeddings: the token's row (a vision model: [CLS] and the patches' products), scaled where the family scales
// it, plus the position's row (learned or sinusoidal; RoPE adds nothing here) and BERT's type-0 row, normed by the
// encoders' embedding LayerNorm (part of the embedding: no ablation removes it). Residual point 0.
// ---------------------------------------------------------------------------------------------
void embed_block(pass& f, const int* tokens) {
    stopwatch sw(f.tm.rest_ms);
    const model_config& c = f.c;
    const model_weights& w = f.w;
    const int d = c.d_model;
    const bool vision = f.arch.kind == KIND_VISION;
    if (vision) patch_embed_forward(f.x, f.opt.pixels, f.m, f.s.gemm);
    const float scale = f.arch.embed_scale || c.scale_embedding ? std::sqrt((float)d) : 1.0f; // Gemma, BART
    for (int t = 0; t < f.n; t++) {
        float* xt = f.x + (size_t)t * d;
        if (!vision) table_row(xt, w.tok_emb, tokens[t]);
        if (scale != 1.0f)
            for (int i = 0; i < d; i++) xt[i] *= scale;
        if (f.arch.pos != POS_ROPE) { // a learned table, or the fixed sinusoids made at load
            const float* pe = &w.pos_emb[(size_t)(c.pos_offset + f.n0 + t) * d];
            for (int i = 0; i < d; i++) xt[i] += pe[i];
        }
        if (!w.type_emb.empty()) // BERT: one segment, type 0, for the whole prompt
            for (int i = 0; i < d; i++) xt[i] += w.type_emb[i];
    }
    if (!w.emb_norm_g.empty()) norm_forward(f.x, f.x, &w.emb_norm_g, &w.emb_norm_b, f.arch.norm, c.norm_eps, f.n, d);
    residual_point(f, nullptr, false, 0, HOOK_RESID_PRE, 0, "embed");
}

// ---------------------------------------------------------------------------------------------
// self-attention
// ---------------------------------------------------------------------------------------------
// q | k | v of this call's rows from the normed stream (s.xn), with the q/k norms and RoPE; appended to the cache.
static void qkv_block(pass& f, int l, bool no_norm, stopwatch& sw) {
    const model_config& c = f.c;
    const layer_weights& lw = f.w.layers[l];
    const int H = c.n_head, KV = c.n_kv_head, dh = c.d_head, n = f.n, kv_w = KV * dh, qkv_w = (H + 2 * KV) * dh;
    sw.to(f.tm.matmul_ms);
    gemm(f.s.qkv.data(), f.s.xn.data(), lw.w_qkv, lw.b_qkv, n, f.s.gemm);
    sw.to(f.tm.rest_ms);
    float* q = f.s.qkv.data();
    float* k = q + H * dh;
    float* v = k + kv_w;
    if (f.arch.qk_norm != QK_NORM_NONE && !no_norm) { // RMSNorm of q and k before the rotation: all heads at once, or each
        const bool full = f.arch.qk_norm == QK_NORM_FULL;
        rms_groups(q, qkv_w, n, full ? 1 : H, full ? H * dh : dh, lw.q_norm, c.norm_eps);
        rms_groups(k, qkv_w, n, full ? 1 : KV, full ? KV * dh : dh, lw.k_norm, c.norm_eps);
    }
    if (f.arch.pos == POS_ROPE) {
        rope_forward(q, qkv_w, n, H, dh, f.n0, c.rope_freq, c.rope);
        rope_forward(k, qkv_w, n, KV, dh, f.n0, c.rope_freq, c.rope);
    }
    visit(f, HOOK_Q, l, q, n, H * dh, qkv_w);
    visit(f, HOOK_K, l, k, n, kv_w, qkv_w);
    visit(f, HOOK_V, l, v, n, kv_w, qkv_w);
    if (!f.use_cache) return;
    float* k_cache = &f.s.k_cache[(size_t)l * f.s.n_ctx * kv_w];
    float* v_cache = &f.s.v_cache[(size_t)l * f.s.n_ctx * kv_w];
    // split over the threads: serial, a prompt's copy is long enough for OpenMP's other thread to fall asleep
#pragma omp parallel for schedule(static) if ((int64_t)n * kv_w >= parallel_min_rows)
    for (int t = 0; t < n; t++) {
        std::copy_n(k + (size_t)t * qkv_w, kv_w, k_cache + (size_t)(f.n0 + t) * kv_w);
        std::copy_n(v + (size_t)t * qkv_w, kv_w, v_cache + (size_t)(f.n0 + t) * kv_w);
    }
}

// Where a pattern's probabilities go: straight into the record when it keeps them and the call starts at
// position 0 (one block per head, as kept; a part layer's kept heads only, a.probs_head0/probs_heads); else the
// scratch when a hook, an intervention or the record needs them; else nowhere (the attention keeps its own).
static float* pattern_target(pass& f, hook_point p, int l, size_t floats, attention_args* a = nullptr) {
    const uint8_t flags = f.plan.at(p, l);
    const bool part = f.rec && p == HOOK_PATTERN && l == f.rec->part.layer;
    if (f.rec && (flags & PT_KEEP) && f.n0 == 0 && !part) return f.rec->get_mut(p, l);
    if (part && a && (flags & PT_KEEP) && f.n0 == 0 && !(flags & (PT_HOOK | PT_CHANGE))) {
        a->probs_head0 = f.rec->part.head0, a->probs_heads = f.rec->part.count;
        return f.rec->get_mut(p, l);
    }
    if (!flags) return nullptr;
    grow(f.s.probs, floats);
    return f.s.probs.data();
}

// The record's rows n0.. of each kept head's block from a call's [H][n][keys] probabilities, when the call did
// not write them there itself (a continued record, or a part layer whose pattern a hook needed whole).
static void keep_pattern_rows(pass& f, hook_point p, int l, const float* probs, int keys) {
    if (!f.rec || !(f.plan.at(p, l) & PT_KEEP) || probs == f.rec->get(p, l)) return;
    float* dst = f.rec->get_mut(p, l);
    const int T = f.rec->n_tokens;
    for (int h = 0; h < f.c.n_head; h++) // (a part layer: its kept heads, in their places)
        if (const int k = p == HOOK_PATTERN ? f.rec->part.slot(l, h) : h; k >= 0)
            std::copy_n(probs + (size_t)h * f.n * keys, (size_t)f.n * keys, dst + ((size_t)k * T + f.n0) * keys);
}

// The attention itself: scores, softmax, weighted values into s.att_out (z), the pattern through its point.
static void attend_block(pass& f, int l) {
    const model_config& c = f.c;
    const int H = c.n_head, KV = c.n_kv_head, dh = c.d_head, kv_w = KV * dh, qkv_w = (H + 2 * KV) * dh;
    attention_args aa;
    aa.q = f.s.qkv.data();
    aa.q_stride = qkv_w;
    aa.k = f.use_cache ? &f.s.k_cache[(size_t)l * f.s.n_ctx * kv_w] : aa.q + H * dh;
    aa.v = f.use_cache ? &f.s.v_cache[(size_t)l * f.s.n_ctx * kv_w] : aa.q + H * dh + kv_w;
    aa.kv_stride = f.use_cache ? kv_w : qkv_w;
    aa.n_q = f.n;
    aa.n_past = f.n0;
    aa.n_head = H;
    aa.n_kv_head = KV;
    aa.d_head = dh;
    aa.scale = c.attn_scale;
    aa.softcap = c.attn_softcap;
    aa.window = c.window_at(l);
    aa.causal = !f.arch.bidirectional;
    aa.probs = pattern_target(f, HOOK_PATTERN, l, (size_t)H * f.n * f.n_keys, &aa);
    aa.out = f.s.att_out.data();
    aa.out_stride = H * dh;
    if (f.opt.attention && aa.probs_heads < 0) f.opt.attention(aa); // (a backend writes every head's probabilities)
    else attention_cpu(aa);
    if (visit(f, HOOK_PATTERN, l, aa.probs, f.n, f.n_keys, f.n_keys)) attention_values_cpu(aa);
    keep_pattern_rows(f, HOOK_PATTERN, l, aa.probs, f.n_keys);
    visit(f, HOOK_Z, l, f.s.att_out.data(), f.n, H * dh, H * dh);
}

// Self-attention of layer l: norm, q | k | v, attention, W_o, (Gemma 2 / OLMo 2: the output's norm), the add.
void attention_block(pass& f, int l) {
    const model_config& c = f.c;
    const layer_weights& lw = f.w.layers[l];
    const int d = c.d_model, n = f.n, H = c.n_head, dh = c.d_head;
    const bool no_norm = f.plan.identity_norm[l] & NORM_ATTN_IN; // no-layernorm: every norm of the sublayer is the identity
    stopwatch sw(f.tm.rest_ms);
    if (l > 0) visit(f, HOOK_RESID_PRE, l, f.x, n, d, d);
    if (c.parallel) std::copy_n(f.x, (size_t)n * d, f.s.x_in.data()); // the MLP reads the layer's input too
    // OLMo 2 has no norm before the sublayers: attn_in is the stream itself
    norm_forward(f.s.xn.data(), f.x, no_norm || !f.arch.pre_norm ? nullptr : &lw.norm1_g, &lw.norm1_b, f.arch.norm,
                 c.norm_eps, n, d);
    visit(f, HOOK_ATTN_IN, l, f.s.xn.data(), n, d, d);
    qkv_block(f, l, no_norm, sw);
    sw.to(f.tm.attention_ms);
    attend_block(f, l);
    sw.to(f.tm.matmul_ms);
    // per head, then summed only when an intervention or hook changed a head's output: observing head_out (a
    // read-only hook, the record) keeps attn_out W_o's one product, so it never changes the run's numbers
    bool heads_changed = false;
    if (f.plan.at(HOOK_HEAD_OUT, l)) {
        grow(f.s.head_out, (size_t)n * H * d);
        head_outputs(f.s.head_out.data(), f.s.att_out.data(), H * dh, lw.w_o, n, H, dh, f.s.blocks, f.s.gemm);
        heads_changed = visit(f, HOOK_HEAD_OUT, l, f.s.head_out.data(), n, H * d, H * d);
    }
    if (heads_changed) sum_heads(f.s.sub_out.data(), f.s.head_out.data(), lw.b_o, n, H, d);
    else gemm(f.s.sub_out.data(), f.s.att_out.data(), lw.w_o, lw.b_o, n, f.s.gemm);
    sw.to(f.tm.rest_ms);
    if (f.arch.post_norm && !no_norm) // Gemma 2 and OLMo 2 norm the sublayer's output: attn_out reaches the stream
        norm_forward(f.s.sub_out.data(), f.s.sub_out.data(), &lw.post_attn_norm, nullptr, f.arch.norm, c.norm_eps, n, d);
    visit(f, HOOK_ATTN_OUT, l, f.s.sub_out.data(), n, d, d);
    residual_point(f, f.s.sub_out.data(), f.plan.no_residual[l] & SKIP_RESID_MID, 2 * l + 1, HOOK_RESID_MID, l, "attn",
                   f.arch.post_ln && !no_norm ? &lw.norm1_g : nullptr, &lw.norm1_b);
}

// ---------------------------------------------------------------------------------------------
// cross-attention (an encoder–decoder's decoder layer): queries from the target's stream, keys and values from
// the encoder's output (made once per target, forward.cpp), every source position seen. Its output is added to
// the stream before the MLP, with no residual point of its own: point 2l+2 follows the MLP. The layer's
// ablations reach it: no-attention zeroes cross_out, no-residual drops the stream from its sum too, no-layernorm
// makes its norm the identity.
// ---------------------------------------------------------------------------------------------
void cross_attention_block(pass& f, int l) {
    const model_config& c = f.c;
    const layer_weights& lw = f.w.layers[l];
    const int d = c.d_model, n = f.n, H = c.n_head, dh = c.d_head, S = f.n_source, xq_w = H * dh;
    const bool no_norm = f.plan.identity_norm[l] != 0;
    stopwatch sw(f.tm.rest_ms);
    // Pre-LN (mBART) norms the queries' input; Post-LN (BART, Marian) the sum, below
    norm_forward(f.s.xn.data(), f.x, f.arch.pre_norm && !no_norm ? &lw.norm3_g : nullptr, &lw.norm3_b, f.arch.norm,
                 c.norm_eps, n, d);
    visit(f, HOOK_CROSS_IN, l, f.s.xn.data(), n, d, d);
    sw.to(f.tm.matmul_ms);
    gemm(f.s.xq.data(), f.s.xn.data(), lw.x_q, lw.x_q_b, n, f.s.gemm);
    sw.to(f.tm.attention_ms);
    const float* kv = &f.s.cross_kv[(size_t)l * S * 2 * xq_w]; // [S][k | v]
    const attention_args aa = cross_attention_args(f.s.xq.data(), kv, n, S, H, dh,
                                                   pattern_target(f, HOOK_CROSS_PATTERN, l, (size_t)H * n * S),
                                                   f.s.att_out.data());
    attention_cpu(aa);
    if (visit(f, HOOK_CROSS_PATTERN, l, aa.probs, n, S, S)) attention_values_cpu(aa);
    keep_pattern_rows(f, HOOK_CROSS_PATTERN, l, aa.probs, S);
    visit(f, HOOK_CROSS_Z, l, f.s.att_out.data(), n, xq_w, xq_w);
    sw.to(f.tm.matmul_ms);
    gemm(f.s.sub_out.data(), f.s.att_out.data(), lw.x_o, lw.x_o_b, n, f.s.gemm);
    sw.to(f.tm.rest_ms);
    visit(f, HOOK_CROSS_OUT, l, f.s.sub_out.data(), n, d, d);
    const bool drop = f.plan.no_residual[l] & SKIP_RESID_MID;
    const size_t nd = (size_t)n * d;
    for (size_t i = 0; i < nd; i++) f.x[i] = (drop ? 0.0f : f.x[i]) + f.s.sub_out[i];
    if (f.arch.post_ln && !no_norm) norm_forward(f.x, f.x, &lw.norm3_g, &lw.norm3_b, f.arch.norm, c.norm_eps, n, d);
}

// ---------------------------------------------------------------------------------------------
// MLP: norm, then a dense MLP (GPT-2's GELU, GPT-NeoX's exact GELU, Llama's SwiGLU, Gemma's GeGLU, Marian's
// swish) or a mixture of experts, (Gemma 2 / OLMo 2: the output's norm), the add.
// ---------------------------------------------------------------------------------------------
static void dense_mlp(pass& f, int l, stopwatch& sw) {
    static const std::vector<float> no_bias; // a gated MLP's gate has none
    const model_config& c = f.c;
    const layer_weights& lw = f.w.layers[l];
    const mlp_kind kind = f.arch.mlp;
    sw.to(f.tm.matmul_ms);
    // GPT-2's GELU is applied inside the product, to each output tile while it is in cache, unless the record keeps
    // the pre-activations (for the backward): then after them, with the same lanes
    const bool keep_pre = f.rec && !f.rec->mlp_pre.empty();
    gemm(f.s.ff.data(), f.s.xn.data(), lw.w_up, lw.b_up, f.n, f.s.gemm,
         kind == MLP_GELU && !keep_pre ? EPILOGUE_GELU : EPILOGUE_NONE);
    if (kind == MLP_SWIGLU || kind == MLP_GEGLU) gemm(f.s.ff2.data(), f.s.xn.data(), lw.w_gate, no_bias, f.n, f.s.gemm);
    sw.to(f.tm.rest_ms);
    const size_t n_ff = (size_t)f.n * c.d_ff;
    if (keep_pre) { // this call's rows n0.. of each part, [L][parts][T][ff]
        record& r = *f.rec;
        for (int part = 0; part < r.mlp_pre_parts; part++)
            copy_floats(r.mlp_pre.data() + (((size_t)l * r.mlp_pre_parts + part) * r.n_tokens + f.n0) * c.d_ff,
                        part ? f.s.ff2.data() : f.s.ff.data(), n_ff);
        if (kind == MLP_GELU) gelu_forward(f.s.ff.data(), n_ff);
    }
    if (kind == MLP_SWIGLU) swiglu_forward(f.s.ff.data(), f.s.ff2.data(), n_ff);
    else if (kind == MLP_GEGLU) geglu_forward(f.s.ff.data(), f.s.ff2.data(), n_ff);
    else if (kind == MLP_GELU_ERF) gelu_erf_forward(f.s.ff.data(), n_ff);
    else if (kind == MLP_SILU) silu_forward(f.s.ff.data(), n_ff);
    visit(f, HOOK_MLP_POST, l, f.s.ff.data(), f.n, c.d_ff, c.d_ff);
    sw.to(f.tm.matmul_ms);
    gemm(f.s.sub_out.data(), f.s.ff.data(), lw.w_down, lw.b_down, f.n, f.s.gemm);
}

void mlp_block(pass& f, int l) {
    const model_config& c = f.c;
    const layer_weights& lw = f.w.layers[l];
    const int d = c.d_model, n = f.n;
    const bool no_norm = f.plan.identity_norm[l] & NORM_MLP_IN;
    stopwatch sw(f.tm.rest_ms);
    // a parallel block (GPT-NeoX) reads the layer's input, not the stream after attention
    const float* in = c.parallel ? f.s.x_in.data() : f.x;
    norm_forward(f.s.xn.data(), in, no_norm || !f.arch.pre_norm ? nullptr : &lw.norm2_g, &lw.norm2_b, f.arch.norm,
                 c.norm_eps, n, d);
    visit(f, HOOK_MLP_IN, l, f.s.xn.data(), n, d, d);
    if (f.arch.kind == KIND_MOE) { // core/kernels/moe.h; its mixing weights pass the point "router"
        sw.to(f.tm.matmul_ms);
        moe_forward(f.s.sub_out.data(), f.s.xn.data(), n, lw, c, f.s.moe, f.s.gemm,
                    [&f, l](float* weights) { visit(f, HOOK_ROUTER, l, weights, f.n, f.c.n_expert, f.c.n_expert); });
    } else {
        dense_mlp(f, l, sw);
    }
    sw.to(f.tm.rest_ms);
    if (f.arch.post_norm && !no_norm)
        norm_forward(f.s.sub_out.data(), f.s.sub_out.data(), &lw.post_mlp_norm, nullptr, f.arch.norm, c.norm_eps, n, d);
    visit(f, HOOK_MLP_OUT, l, f.s.sub_out.data(), n, d, d);
    // a parallel block's stream is dropped once, at resid_mid: resid_post adds the MLP to attention's output
    residual_point(f, f.s.sub_out.data(), (f.plan.no_residual[l] & SKIP_RESID_POST) && !c.parallel, 2 * l + 2, HOOK_RESID_POST, l, "mlp",
                   f.arch.post_ln && !no_norm ? &lw.norm2_g : nullptr, &lw.norm2_b);
}

// ---------------------------------------------------------------------------------------------
// head: the final norm and the LM head (or the classifier, or the masked-LM head), only for the positions whose
// logits are wanted; an encoder stack of an encoder–decoder hands out its normed output instead
// ---------------------------------------------------------------------------------------------
// A few rows of the LM head (opt.logit_ids), in double: out [n_out][ids].
static void selected_logits(pass& f, std::vector<float>& out) {
    const model_config& c = f.c;
    const std::vector<int>& ids = f.opt.logit_ids;
    const int d = c.d_model, k = (int)ids.size();
    out.resize((size_t)f.n_out * k);
    std::vector<float> e(d);
    for (int j = 0; j < k; j++)
        for (int r = 0; r < f.n_out; r++) {
            const double sum = lm_head_logit(e.data(), f.s.xn.data() + (size_t)r * d, ids[j], f.m);
            out[(size_t)r * k + j] = c.final_softcap > 0 ? (float)(c.final_softcap * std::tanh(sum / c.final_softcap)) : (float)sum;
        }
}

void head_block(pass& f, std::vector<float>& out) {
    const model_config& c = f.c;
    const int d = c.d_model, L = c.n_layer, V = c.vocab_size;
    stopwatch sw(f.tm.rest_ms);
    const float* last = f.x + (size_t)(f.n - f.n_out) * d;
    final_norm_forward(f.s.xn.data(), last, f.n_out, f.m, f.plan.identity_norm[L], f.s.gemm);
    // the final points' rows are the last n_out positions: interventions by position and hooks read pos0
    f.pos0 = f.n0 + f.n - f.n_out;
    visit(f, HOOK_FINAL_NORM, L, f.s.xn.data(), f.n_out, d, d);
    sw.to(f.tm.matmul_ms);
    if (f.arch.no_head) { // an encoder stack: its output is what the decoder's cross-attention reads
        out.assign(f.s.xn.begin(), f.s.xn.begin() + (size_t)f.n_out * d);
    } else if (!f.opt.logit_ids.empty()) {
        selected_logits(f, out);
    } else {
        out.resize((size_t)f.n_out * V);
        lm_head_forward(out.data(), f.s.xn.data(), f.n_out, f.m, f.s.gemm);
        if (!f.w.dist_head.empty()) distill_average(out.data(), f.s.xn.data() + d, f.m); // DeiT: row 0 is the prediction
        if (c.final_softcap > 0) softcap_forward(out.data(), out.size(), c.final_softcap); // Gemma 2
        visit(f, HOOK_LOGITS, L, out.data(), f.n_out, V, V);
    }
    if (f.rec && f.rec->nonfinite_layer < 0 && !all_finite(out.data(), out.size())) {
        f.rec->nonfinite_layer = L - 1;
        f.rec->nonfinite_where = "logits";
    }
}

} // namespace gb
