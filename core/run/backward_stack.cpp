// The backward pass of the kinds beyond decoder-only models (backward.h): a stack's layers with Post-LN sums
// (BERT, BART, Marian), bidirectional attention and an encoder–decoder's cross-attention, and the heads of an
// encoder (the masked-LM head) and an image classifier (the class head at [CLS], DeiT's two heads averaged).
// The self-attention and MLP sublayers are the decoder's (backward.cpp), shared through backward_pass.h.
//
// Sections: what the record holds | the heads | the cross-attention | the layers | encoders and image classifiers
#include <algorithm>
#include <cmath>

#include "kernels/grad.h"
#include "kernels/ops.h"
#include "run/backward_pass.h"
#include "run/predict.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// What the record holds
// ---------------------------------------------------------------------------------------------
void other_kinds_keep(record_request& rq, const model_config& c) {
    const arch_info& a = arch_table(c.arch);
    if (a.post_ln) rq.points |= hook_bit(HOOK_ATTN_OUT) | hook_bit(HOOK_MLP_OUT); // a norm's input: stream + output
    if (a.cross) rq.points |= hook_bit(HOOK_CROSS_IN) | hook_bit(HOOK_CROSS_PATTERN) | hook_bit(HOOK_CROSS_OUT);
}

// ---------------------------------------------------------------------------------------------
// The heads
// ---------------------------------------------------------------------------------------------
void final_norm_backward(bctx& b, float* gx, const float* x, const float* gy, int n, bool identity) {
    const std::vector<float>* g = identity || b.w.normf_g.empty() ? nullptr : &b.w.normf_g;
    if (!b.arch.mlm_head) {
        norm_backward(gx, x, gy, g, b.arch.norm, b.c.norm_eps, n, b.d);
        return;
    }
    // out = LN(GELU(x W_t + b_t)): the transform's pre-activations and the LayerNorm's input, recomputed
    const size_t nd = (size_t)n * b.d;
    std::vector<float> pre(nd), y(nd), gpre(nd);
    gemm(pre.data(), x, b.w.head_dense, b.w.head_dense_b, n, b.gs);
    std::copy(pre.begin(), pre.end(), y.begin());
    gelu_erf_forward(y.data(), nd);
    norm_backward(gpre.data(), y.data(), gy, g, b.arch.norm, b.c.norm_eps, n, b.d);
    gelu_erf_backward(gpre.data(), pre.data(), nd);
    gemm_backward(gx, gpre.data(), b.w.head_dense, n, b.gs);
}

// dl [V] = d metric / d logits [V]
static void metric_gradient(std::vector<float>& dl, const float* logits, int V, const metric_spec& metric) {
    dl.assign(V, 0.0f);
    dl[metric.target] += 1.0f;
    if (metric.kind == metric_spec::LOGIT_DIFF && metric.contrast >= 0) dl[metric.contrast] -= 1.0f;
    if (metric.kind != metric_spec::LOGPROB) return;
    float mx = logits[0];
    for (int v = 1; v < V; v++) mx = std::max(mx, logits[v]);
    double s = 0;
    for (int v = 0; v < V; v++) s += std::exp((double)logits[v] - mx);
    const double lse = mx + std::log(s);
    for (int v = 0; v < V; v++) dl[v] -= (float)std::exp((double)logits[v] - lse);
}

// gx [d] += sum over v of dl[v] * scale * row v of table
static void through_table(float* gx, const std::vector<float>& dl, const row_table& table, float scale, int d) {
    std::vector<float> row(d);
    for (size_t v = 0; v < dl.size(); v++) {
        if (dl[v] == 0.0f) continue;
        table_row(row.data(), table, (int)v);
        for (int i = 0; i < d; i++) gx[i] += scale * dl[v] * row[i];
    }
}

// DeiT with a teacher: the prediction is (class head at [CLS] + distillation head at [DIST]) / 2, so the metric's
// gradient reaches the last stream at rows 0 and 1. Returns the metric; g [T][d] gets its gradient.
static double distilled_head_backward(bctx& b, const metric_spec& metric, float* g) {
    for (const intervention& v : b.opt.interventions)
        if ((v.kind == INTERVENE_ZERO || v.kind == INTERVENE_SET) && hook_is_final(v.point))
            throw error("gradients of a distilled image classifier do not take interventions at its final norm or logits");
    const int d = b.d, V = b.c.vocab_size, L = b.c.n_layer;
    const bool identity = b.plan.identity_norm[L];
    const float* x = kept(b, HOOK_RESID_POST, L - 1); // rows 0 ([CLS]) and 1 ([DIST])
    std::vector<float> xn(2 * d), logits(V), dl, gxn(2 * d, 0.0f);
    final_norm_forward(xn.data(), x, 2, b.m, identity, b.gs);
    lm_head_forward(logits.data(), xn.data(), 1, b.m, b.gs);
    distill_average(logits.data(), xn.data() + d, b.m);
    const double value = metric_of(logits.data(), V, metric);
    metric_gradient(dl, logits.data(), V, metric);
    through_table(gxn.data(), dl, b.w.unembedding(), 0.5f, d);
    through_table(gxn.data() + d, dl, b.w.dist_head, 0.5f, d);
    std::fill_n(g, (size_t)b.T * d, 0.0f);
    final_norm_backward(b, g, x, gxn.data(), 2, identity);
    return value;
}

// ---------------------------------------------------------------------------------------------
// The cross-attention of decoder layer l: y = LN3(s + cross) (Post-LN) or s + cross(LN3(s)) (Pre-LN), s the
// stream at resid_mid. In place, g [T][d] at y -> the gradient at s; the keys' and values' gradient passes into
// g_source [S][d] at the encoder's output.
// ---------------------------------------------------------------------------------------------
// The stream after the cross-attention, recomputed into y [T][d]; u [T][d] gets the sum before a Post-LN norm.
static void cross_stream(bctx& b, int l, float* u, float* y) {
    const layer_weights& lw = b.w.layers[l];
    const size_t Td = (size_t)b.T * b.d;
    const bool drop = b.plan.no_residual[l] & SKIP_RESID_MID, no_norm = b.plan.identity_norm[l] != 0;
    const float *s = kept(b, HOOK_RESID_MID, l), *co = kept(b, HOOK_CROSS_OUT, l);
    for (size_t i = 0; i < Td; i++) u[i] = (drop ? 0.0f : s[i]) + co[i];
    if (b.arch.post_ln && !no_norm) norm_forward(y, u, &lw.norm3_g, &lw.norm3_b, b.arch.norm, b.c.norm_eps, b.T, b.d);
    else std::copy_n(u, Td, y);
}

static void cross_backward(bctx& b, int l, float* g, float* g_source) {
    const layer_weights& lw = b.w.layers[l];
    const int T = b.T, d = b.d, H = b.H, dh = b.dh, S = b.S, w = H * dh;
    const size_t Td = (size_t)T * d;
    const bool drop = b.plan.no_residual[l] & SKIP_RESID_MID, no_norm = b.plan.identity_norm[l] != 0;
    std::vector<float> u(Td), y(Td), gu(Td);
    if (b.arch.post_ln && !no_norm) {
        cross_stream(b, l, u.data(), y.data());
        norm_backward(gu.data(), u.data(), g, &lw.norm3_g, b.arch.norm, b.c.norm_eps, T, d);
    } else {
        std::copy_n(g, Td, gu.data());
    }
    if (drop) std::fill_n(g, Td, 0.0f); // g becomes the gradient at s: the skip path, then the queries' share
    else std::copy_n(gu.data(), Td, g);
    zero_covered(b, HOOK_CROSS_OUT, l, gu.data(), T, d, d);
    std::vector<float> gz((size_t)T * w), xq((size_t)T * w), kv((size_t)S * 2 * w), gp((size_t)H * T * S);
    std::vector<float> gq((size_t)T * w), gkv((size_t)S * 2 * w), g_in(Td);
    gemm_backward(gz.data(), gu.data(), lw.x_o, T, b.gs);
    zero_covered(b, HOOK_CROSS_Z, l, gz.data(), T, w, w);
    gemm(xq.data(), kept(b, HOOK_CROSS_IN, l), lw.x_q, lw.x_q_b, T, b.gs); // the queries, keys and values again
    gemm(kv.data(), b.source, lw.x_kv, lw.x_kv_b, S, b.gs);
    const attention_args a = cross_attention_args(xq.data(), kv.data(), T, S, H, dh,
                                                  const_cast<float*>(kept(b, HOOK_CROSS_PATTERN, l)), nullptr); // read only
    attention_backward_probs(gp.data(), a, gz.data());
    zero_covered(b, HOOK_CROSS_PATTERN, l, gp.data(), T, S, S);
    attention_backward_inputs(gq.data(), w, gkv.data(), gkv.data() + w, 2 * w, a, gp.data(), gz.data());
    gemm_backward(g_source, gkv.data(), lw.x_kv, S, b.gs, true);
    gemm_backward(g_in.data(), gq.data(), lw.x_q, T, b.gs);
    zero_covered(b, HOOK_CROSS_IN, l, g_in.data(), T, d, d);
    norm_backward(g, kept(b, HOOK_RESID_MID, l), g_in.data(), b.arch.pre_norm && !no_norm ? &lw.norm3_g : nullptr,
                  b.arch.norm, b.c.norm_eps, T, d, true);
}

// ---------------------------------------------------------------------------------------------
// The layers
// ---------------------------------------------------------------------------------------------
// In place, g [T][d] at a Post-LN residual point -> the gradient at the sum it normed: (dropped ? 0 : stream) +
// out, out the sublayer's output as it flowed.
static void post_ln_backward(bctx& b, float* g, const float* stream, const float* out, const std::vector<float>& gain) {
    const size_t Td = (size_t)b.T * b.d;
    std::vector<float> u(Td), gu(Td);
    for (size_t i = 0; i < Td; i++) u[i] = (stream ? stream[i] : 0.0f) + out[i];
    norm_backward(gu.data(), u.data(), g, &gain, b.arch.norm, b.c.norm_eps, b.T, b.d);
    std::copy(gu.begin(), gu.end(), g);
}

void stack_backward(bctx& b, std::vector<float>& g, float* resid, float* z, float* g_source) {
    const int L = b.c.n_layer, T = b.T, d = b.d, zw = b.H * b.dh;
    const size_t Td = (size_t)T * d;
    std::vector<float> g_mid(Td), g_pre(Td), g_sub(Td), u, after_cross;
    for (int l = L - 1; l >= 0; l--) {
        const layer_weights& lw = b.w.layers[l];
        std::copy_n(g.data(), Td, resid + (size_t)(2 * l + 2) * Td);
        zero_covered(b, HOOK_RESID_POST, l, g.data(), T, d, d);
        // the stream the MLP read and is added to: resid_mid, or the stream after the cross-attention
        const float* stream = kept(b, HOOK_RESID_MID, l);
        if (b.arch.cross) {
            u.resize(Td), after_cross.resize(Td);
            cross_stream(b, l, u.data(), after_cross.data());
            stream = after_cross.data();
        }
        const bool drop_post = b.plan.no_residual[l] & SKIP_RESID_POST, drop_mid = b.plan.no_residual[l] & SKIP_RESID_MID;
        if (b.arch.post_ln && !(b.plan.identity_norm[l] & NORM_MLP_IN))
            post_ln_backward(b, g.data(), drop_post ? nullptr : stream, kept(b, HOOK_MLP_OUT, l), lw.norm2_g);
        if (drop_post) std::fill(g_mid.begin(), g_mid.end(), 0.0f);
        else g_mid = g;
        g_sub = g;
        b.mlp_stream = b.arch.cross ? stream : nullptr;
        mlp_backward(b, l, g_sub.data(), g_mid.data());
        b.mlp_stream = nullptr;
        if (b.arch.cross) cross_backward(b, l, g_mid.data(), g_source);
        std::copy_n(g_mid.data(), Td, resid + (size_t)(2 * l + 1) * Td);
        zero_covered(b, HOOK_RESID_MID, l, g_mid.data(), T, d, d);
        if (b.arch.post_ln && !(b.plan.identity_norm[l] & NORM_ATTN_IN))
            post_ln_backward(b, g_mid.data(), drop_mid ? nullptr : kept(b, HOOK_RESID_PRE, l), kept(b, HOOK_ATTN_OUT, l),
                             lw.norm1_g);
        if (drop_mid) std::fill(g_pre.begin(), g_pre.end(), 0.0f);
        else g_pre = g_mid;
        attention_backward(b, l, g_mid.data(), z + (size_t)l * T * zw, g_pre.data());
        if (l == 0) std::copy_n(g_pre.data(), Td, resid); // point 0: the embeddings (after an embedding LayerNorm)
        zero_covered(b, HOOK_RESID_PRE, l, g_pre.data(), T, d, d);
        g.swap(g_pre);
    }
}

// ---------------------------------------------------------------------------------------------
// Encoders and image classifiers
// ---------------------------------------------------------------------------------------------
void single_stack_backward(gradients& out, bctx& b, const metric_spec& metric) {
    const model_config& c = b.c;
    if (b.arch.cross || b.arch.no_head)
        throw error("internal: an encoder–decoder's gradients need its source: run_seq2seq_gradients");
    const int L = c.n_layer, T = b.T, d = b.d;
    const bool vision = b.arch.kind == KIND_VISION;
    const int p = metric.position < 0 ? prediction_position(b.m, b.rec) : metric.position;
    if (vision && p != 0)
        throw error("an image classifier's classes are read at [CLS]: the metric's position is 0, not " + std::to_string(p));
    out.n_layer = L, out.n_tokens = T, out.d_model = d, out.n_head = b.H, out.d_head = b.dh;
    out.position = p;
    out.resid.assign((size_t)(2 * L + 1) * T * d, 0.0f);
    out.z.assign((size_t)L * T * b.H * b.dh, 0.0f);
    std::vector<float> g((size_t)T * d);
    out.metric_value = vision && !b.w.dist_head.empty() ? distilled_head_backward(b, metric, g.data())
                                                        : head_backward(b, metric, p, g.data());
    stack_backward(b, g, out.resid.data(), out.z.data(), nullptr);
}

} // namespace gb
