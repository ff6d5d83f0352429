// The backward pass of a decoder-only model (backward.h): from the metric's logit row back through the final
// norm, then per layer, last first, through the MLP and the self-attention to the embeddings' residual point.
//
// Sections: metrics | what the record holds | interventions in the backward | the MLP | the attention | the
// head and the loop | whole prompts
#include "run/backward.h"

#include <algorithm>
#include <cmath>

#include "kernels/grad.h"
#include "kernels/moe.h"
#include "kernels/ops.h"
#include "run/backward_pass.h"
#include "run/pass.h"
#include "util/error.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------------
const char* metric_name(metric_spec::kind_t k) {
    return k == metric_spec::LOGIT_DIFF ? "logit-diff" : k == metric_spec::LOGIT ? "logit" : "logprob";
}

metric_spec::kind_t parse_metric(const std::string& name) {
    if (name == "logit-diff") return metric_spec::LOGIT_DIFF;
    if (name == "logit") return metric_spec::LOGIT;
    if (name == "logprob") return metric_spec::LOGPROB;
    throw error("unknown metric '" + name + "' (logit-diff, logit, logprob)");
}

// log sum exp of logits [V] in double
static double log_sum_exp(const float* logits, int V) {
    float mx = logits[0];
    for (int v = 1; v < V; v++) mx = std::max(mx, logits[v]);
    double s = 0;
    for (int v = 0; v < V; v++) s += std::exp((double)logits[v] - mx);
    return mx + std::log(s);
}

double metric_of(const float* logits, int V, const metric_spec& metric, std::string* label) {
    const std::string t = std::to_string(metric.target);
    if (metric.kind == metric_spec::LOGPROB) {
        if (label) *label = "log p(" + t + ")";
        return logits[metric.target] - log_sum_exp(logits, V);
    }
    if (metric.kind == metric_spec::LOGIT || metric.contrast < 0) {
        if (label) *label = "logit(" + t + ")";
        return logits[metric.target];
    }
    if (label) *label = "logit(" + t + ") - logit(" + std::to_string(metric.contrast) + ")";
    return (double)logits[metric.target] - logits[metric.contrast];
}

// ---------------------------------------------------------------------------------------------
// What the record holds
// ---------------------------------------------------------------------------------------------
std::vector<int> metric_ids(const metric_spec& metric) {
    if (metric.kind == metric_spec::LOGPROB) throw error("internal: log p reads every logit, not a few");
    std::vector<int> ids{metric.target};
    if (metric.kind == metric_spec::LOGIT_DIFF && metric.contrast >= 0) ids.push_back(metric.contrast);
    return ids;
}

double metric_of_ids(const float* logits, const metric_spec& metric) {
    if (metric.kind == metric_spec::LOGPROB) throw error("internal: log p reads every logit, not a few");
    return metric.kind == metric_spec::LOGIT_DIFF && metric.contrast >= 0 ? (double)logits[0] - logits[1] : logits[0];
}

record_request backward_keep(const model_config& c) {
    record_request rq;
    rq.points = hook_bit(HOOK_RESID_PRE) | hook_bit(HOOK_Q) | hook_bit(HOOK_K) | hook_bit(HOOK_V) |
                hook_bit(HOOK_PATTERN) | hook_bit(HOOK_Z) | hook_bit(HOOK_MLP_IN) | hook_bit(HOOK_ROUTER);
    // Beyond these, only what a recomputation reads (no weight gradients: the products need no activations): the
    // MLP's hidden values before a post norm (mlp_sum; four times the stream's size, 1-2 ms of a 33 ms GPT-2-small
    // forward at T = 64 to copy), the attention's input before q/k norms (their inputs are recomputed from it).
    const arch_info& a = arch_table(c.arch);
    if (a.post_norm || a.kind != KIND_DECODER) rq.points |= hook_bit(HOOK_MLP_POST);
    if (a.qk_norm != QK_NORM_NONE || a.kind != KIND_DECODER) rq.points |= hook_bit(HOOK_ATTN_IN);
    rq.resid_stream = true;
    rq.mlp_pre = true; // so the backward does not redo x W_up (and x W_gate): a third of a GPT-2 forward's products
    other_kinds_keep(rq, c); // backward_stack.cpp: Post-LN sums and the cross-attention
    return rq;
}

// ---------------------------------------------------------------------------------------------
// Interventions in the backward
// ---------------------------------------------------------------------------------------------
// g [n][width] (rows stride apart; a pattern [H][n][width]) at point p of layer l, rows from position pos0: the
// part its ZERO and SET interventions cover becomes 0 (a constant passes no gradient back; an ADD adds a constant,
// so the gradient passes it unchanged, and the record holds the stream with it added). as: the layout to
// cover it in (head_out's interventions reach z's slices of the same heads).
void zero_covered(bctx& b, hook_point p, int l, float* g, int n, int width, int stride, int pos0, hook_point as) {
    if (!(b.plan.at(p, l) & PT_CHANGE)) return;
    hook_tensor t{as == HOOK_COUNT ? p : as, hook_is_final(p) ? b.c.n_layer : l, g, n, pos0, width, stride};
    for (const intervention& v : b.opt.interventions) {
        if ((v.kind != INTERVENE_ZERO && v.kind != INTERVENE_SET) || v.point != p) continue;
        if (!hook_is_final(p) && v.layer >= 0 && v.layer != l) continue;
        intervention z = v;
        z.kind = INTERVENE_ZERO;
        z.point = t.point;
        apply_intervention(z, t, b.c);
    }
}

// ---------------------------------------------------------------------------------------------
// The MLP: g [T][d] at mlp_out (as flowed) -> accumulated into gx [T][d] at the stream the MLP read
// ---------------------------------------------------------------------------------------------
// g_in [T][d] at mlp_in -> accumulated into gx [T][d] at the stream the MLP's norm read: the layer's input
// (parallel blocks) or resid_mid
static void mlp_input_backward(bctx& b, int l, float* g_in, float* gx) {
    const bool no_norm = b.plan.identity_norm[l] & NORM_MLP_IN;
    zero_covered(b, HOOK_MLP_IN, l, g_in, b.T, b.d, b.d);
    const float* x = b.mlp_stream ? b.mlp_stream : b.c.parallel ? kept(b, HOOK_RESID_PRE, l) : kept(b, HOOK_RESID_MID, l);
    norm_backward(gx, x, g_in, no_norm || !b.arch.pre_norm ? nullptr : &b.w.layers[l].norm2_g, b.arch.norm,
                  b.c.norm_eps, b.T, b.d, true);
}

// A mixture of experts: g [T][d] at its output -> g_in [T][d] at mlp_in, through the experts on their rows, the
// shared expert and its gate, and the router's mixing weights (as flowed; its interventions in force)
static void moe_backward(bctx& b, int l, const float* in, const float* g, float* g_in) {
    static const std::vector<float> no_bias;
    const layer_weights& lw = b.w.layers[l];
    const int T = b.T, E = b.c.n_expert;
    std::vector<float> dw((size_t)T * E), logits((size_t)T * E), dlogits((size_t)T * E);
    std::fill_n(g_in, (size_t)T * b.d, 0.0f);
    moe_experts_backward(g_in, dw.data(), g, in, kept(b, HOOK_ROUTER, l), T, lw, b.c, b.ms, b.gs);
    zero_covered(b, HOOK_ROUTER, l, dw.data(), T, E, E);
    gemm(logits.data(), in, lw.router, no_bias, T, b.gs);
    moe_route_backward(dlogits.data(), dw.data(), logits.data(), T, E, b.c.n_expert_used, b.c.norm_topk, b.ms.chosen);
    gemm_backward(g_in, dlogits.data(), lw.router, T, b.gs, true);
}

// The MLP's output before a post norm (Gemma 2, OLMo 2), recomputed into y [T][d]
static void mlp_sum(bctx& b, int l, const float* in, float* y) {
    const layer_weights& lw = b.w.layers[l];
    if (b.arch.kind != KIND_MOE) {
        gemm(y, kept(b, HOOK_MLP_POST, l), lw.w_down, lw.b_down, b.T, b.gs);
        return;
    }
    const float* w = kept(b, HOOK_ROUTER, l); // the mixing weights as they flowed
    const size_t TE = (size_t)b.T * b.c.n_expert;
    moe_forward(y, in, b.T, lw, b.c, b.ms, b.gs, [w, TE](float* weights) { std::copy_n(w, TE, weights); });
}

void mlp_backward(bctx& b, int l, float* g, float* gx) {
    static const std::vector<float> no_bias;
    const layer_weights& lw = b.w.layers[l];
    const int T = b.T, d = b.d, ff = b.c.d_ff;
    const size_t n_ff = (size_t)T * ff;
    const bool no_norm = b.plan.identity_norm[l] & NORM_MLP_IN;
    const mlp_kind kind = b.arch.mlp;
    const float* in = kept(b, HOOK_MLP_IN, l);
    zero_covered(b, HOOK_MLP_OUT, l, g, T, d, d);
    if (b.arch.post_norm && !no_norm) { // its input, recomputed
        float* y = grown(b.t1, (size_t)T * d);
        mlp_sum(b, l, in, y);
        float* gy = grown(b.t2, (size_t)T * d);
        norm_backward(gy, y, g, &lw.post_mlp_norm, b.arch.norm, b.c.norm_eps, T, d);
        std::copy_n(gy, (size_t)T * d, g);
    }
    float* g_in = grown(b.t4, (size_t)T * d);
    if (b.arch.kind == KIND_MOE) {
        moe_backward(b, l, in, g, g_in);
        mlp_input_backward(b, l, g_in, gx);
        return;
    }
    float* g_post = grown(b.t1, n_ff);
    gemm_backward(g_post, g, lw.w_down, T, b.gs);
    zero_covered(b, HOOK_MLP_POST, l, g_post, T, ff, ff);
    // the pre-activations: kept by the forward (record_request::mlp_pre), or recomputed from mlp_in
    const float* up = b.rec.mlp_pre_at(l, 0);
    if (!up) {
        float* u = grown(b.t2, n_ff);
        gemm(u, in, lw.w_up, lw.b_up, T, b.gs);
        up = u;
    }
    if (kind == MLP_SWIGLU || kind == MLP_GEGLU) {
        const float* gate = b.rec.mlp_pre_at(l, 1);
        if (!gate) {
            float* gt = grown(b.t3, n_ff);
            gemm(gt, in, lw.w_gate, no_bias, T, b.gs);
            gate = gt;
        }
        float* g_gate = grown(b.t5, n_ff);
        if (kind == MLP_SWIGLU) swiglu_backward(g_post, g_gate, g_post, up, gate, n_ff);
        else geglu_backward(g_post, g_gate, g_post, up, gate, n_ff);
        gemm_backward(g_in, g_post, lw.w_up, T, b.gs);
        gemm_backward(g_in, g_gate, lw.w_gate, T, b.gs, true);
    } else {
        if (kind == MLP_GELU) gelu_backward(g_post, up, n_ff);
        else if (kind == MLP_GELU_ERF) gelu_erf_backward(g_post, up, n_ff);
        else silu_backward(g_post, up, n_ff);
        gemm_backward(g_in, g_post, lw.w_up, T, b.gs);
    }
    mlp_input_backward(b, l, g_in, gx);
}

// ---------------------------------------------------------------------------------------------
// The attention: g [T][d] at attn_out (as flowed) -> gz [T][H*dh] kept, and accumulated into gx [T][d] at
// resid_pre
// ---------------------------------------------------------------------------------------------
// attn_out before its post norm (Gemma 2, OLMo 2): z times W_o, or the heads' outputs summed when an
// intervention changed them
static void attention_sum(bctx& b, int l, float* y) {
    const layer_weights& lw = b.w.layers[l];
    const float* z = kept(b, HOOK_Z, l);
    if (!(b.plan.at(HOOK_HEAD_OUT, l) & PT_CHANGE)) {
        gemm(y, z, lw.w_o, lw.b_o, b.T, b.gs);
        return;
    }
    std::vector<float> heads((size_t)b.T * b.H * b.d), blocks;
    head_outputs(heads.data(), z, b.H * b.dh, lw.w_o, b.T, b.H, b.dh, blocks, b.gs);
    hook_tensor t{HOOK_HEAD_OUT, l, heads.data(), b.T, 0, b.H * b.d, b.H * b.d};
    for (const intervention& v : b.opt.interventions)
        if ((v.kind == INTERVENE_ZERO || v.kind == INTERVENE_SET) && v.point == HOOK_HEAD_OUT &&
            (v.layer < 0 || v.layer == l))
            apply_intervention(v, t, b.c);
    sum_heads(y, heads.data(), lw.b_o, b.T, b.H, b.d);
}

// gq | gk | gv [T][qkv_w] from gz: through the pattern's softmax (its interventions in force), RoPE, q/k norms
static void attend_backward(bctx& b, int l, const float* gz, float* gqkv) {
    const layer_weights& lw = b.w.layers[l];
    const int T = b.T, H = b.H, KV = b.KV, dh = b.dh, qkv_w = b.qkv_w;
    attention_args a;
    a.q = kept(b, HOOK_Q, l);
    a.k = kept(b, HOOK_K, l);
    a.v = kept(b, HOOK_V, l);
    a.q_stride = H * dh;
    a.kv_stride = KV * dh;
    a.n_q = T;
    a.n_past = 0;
    a.n_head = H;
    a.n_kv_head = KV;
    a.d_head = dh;
    a.probs = const_cast<float*>(kept(b, HOOK_PATTERN, l)); // read only
    a.out = nullptr;
    a.out_stride = H * dh;
    a.scale = b.c.attn_scale;
    a.softcap = b.c.attn_softcap;
    a.window = b.c.window_at(l);
    a.causal = !b.arch.bidirectional;
    float* gp = grown(b.t3, (size_t)H * T * T);
    attention_backward_probs(gp, a, gz);
    zero_covered(b, HOOK_PATTERN, l, gp, T, T, T);
    float* gq = gqkv;
    float* gk = gqkv + H * dh;
    float* gv = gk + KV * dh;
    attention_backward_inputs(gq, qkv_w, gk, gv, qkv_w, a, gp, gz);
    zero_covered(b, HOOK_Q, l, gq, T, H * dh, qkv_w);
    zero_covered(b, HOOK_K, l, gk, T, KV * dh, qkv_w);
    zero_covered(b, HOOK_V, l, gv, T, KV * dh, qkv_w);
    if (b.arch.pos == POS_ROPE) {
        rope_backward(gq, qkv_w, T, H, dh, 0, b.c.rope_freq, b.c.rope);
        rope_backward(gk, qkv_w, T, KV, dh, 0, b.c.rope_freq, b.c.rope);
    }
    if (b.arch.qk_norm != QK_NORM_NONE && !(b.plan.identity_norm[l] & NORM_ATTN_IN)) { // their inputs: the product, recomputed
        float* pre = grown(b.t4, (size_t)T * qkv_w);
        gemm(pre, kept(b, HOOK_ATTN_IN, l), lw.w_qkv, lw.b_qkv, T, b.gs);
        const bool full = b.arch.qk_norm == QK_NORM_FULL;
        rms_groups_backward(gq, pre, qkv_w, T, full ? 1 : H, full ? H * dh : dh, lw.q_norm, b.c.norm_eps);
        rms_groups_backward(gk, pre + H * dh, qkv_w, T, full ? 1 : KV, full ? KV * dh : dh, lw.k_norm, b.c.norm_eps);
    }
}

// out [H][T][d]: each head's share of the gradient at resid_pre (gradients::head_in). The attention's backward is
// linear in gz, so head h's share is its backward with every other head's gz 0; the H shares go through W_qkv
// as one product of H*T rows.
static void head_inputs_backward(bctx& b, int l, const float* gz, float* out) {
    const layer_weights& lw = b.w.layers[l];
    const int T = b.T, d = b.d, H = b.H, dh = b.dh, qkv_w = b.qkv_w;
    const bool no_norm = b.plan.identity_norm[l] & NORM_ATTN_IN;
    std::vector<float> gzh((size_t)T * H * dh), rows((size_t)H * T * qkv_w), g_in((size_t)H * T * d);
    for (int h = 0; h < H; h++) {
        std::fill(gzh.begin(), gzh.end(), 0.0f);
        for (int t = 0; t < T; t++)
            std::copy_n(gz + (size_t)t * H * dh + h * dh, dh, gzh.data() + (size_t)t * H * dh + h * dh);
        attend_backward(b, l, gzh.data(), rows.data() + (size_t)h * T * qkv_w);
    }
    gemm_backward(g_in.data(), rows.data(), lw.w_qkv, H * T, b.gs);
    for (int h = 0; h < H; h++) {
        float* gi = g_in.data() + (size_t)h * T * d;
        zero_covered(b, HOOK_ATTN_IN, l, gi, T, d, d);
        norm_backward(out + (size_t)h * T * d, kept(b, HOOK_RESID_PRE, l), gi,
                      no_norm || !b.arch.pre_norm ? nullptr : &lw.norm1_g, b.arch.norm, b.c.norm_eps, T, d);
    }
}

void attention_backward(bctx& b, int l, float* g, float* gz_out, float* gx) {
    const layer_weights& lw = b.w.layers[l];
    const int T = b.T, d = b.d, H = b.H, dh = b.dh;
    const bool no_norm = b.plan.identity_norm[l] & NORM_ATTN_IN;
    zero_covered(b, HOOK_ATTN_OUT, l, g, T, d, d);
    if (b.arch.post_norm && !no_norm) {
        float* y = grown(b.t1, (size_t)T * d);
        attention_sum(b, l, y);
        float* gy = grown(b.t2, (size_t)T * d);
        norm_backward(gy, y, g, &lw.post_attn_norm, b.arch.norm, b.c.norm_eps, T, d);
        std::copy_n(gy, (size_t)T * d, g);
    }
    gemm_backward(gz_out, g, lw.w_o, T, b.gs); // every head's head_out has attn_out's gradient
    zero_covered(b, HOOK_HEAD_OUT, l, gz_out, T, H * dh, H * dh, 0, HOOK_Z);
    float* gz = grown(b.t5, (size_t)T * H * dh); // gz_out is kept as the gradient at z; what passes on below
    copy_floats(gz, gz_out, (size_t)T * H * dh);
    zero_covered(b, HOOK_Z, l, gz, T, H * dh, H * dh);
    if (b.head_in) head_inputs_backward(b, l, gz, b.head_in + (size_t)l * H * T * d);
    float* gqkv = grown(b.t2, (size_t)T * b.qkv_w); // every element written (attention_backward_inputs); t2 is
    attend_backward(b, l, gz, gqkv);                 // free again after the post norm's use above
    float* g_in = grown(b.t1, (size_t)T * d);
    gemm_backward(g_in, gqkv, lw.w_qkv, T, b.gs);
    zero_covered(b, HOOK_ATTN_IN, l, g_in, T, d, d);
    norm_backward(gx, kept(b, HOOK_RESID_PRE, l), g_in, no_norm || !b.arch.pre_norm ? nullptr : &lw.norm1_g,
                  b.arch.norm, b.c.norm_eps, T, d, true);
}

// ---------------------------------------------------------------------------------------------
// The head and the loop
// ---------------------------------------------------------------------------------------------
// The metric at position p from the stream at the last point, and its gradient there into g [T][d] (0 at the
// other positions).
double head_backward(bctx& b, const metric_spec& metric, int p, float* g) {
    const int d = b.d, V = b.c.vocab_size, L = b.c.n_layer;
    const float* x = kept(b, HOOK_RESID_POST, L - 1) + (size_t)p * d;
    const bool identity = b.plan.identity_norm[L];
    std::vector<float> xn(d), gxn(d, 0.0f), row(d), logits, dl; // logits and dl: the full-row metrics only
    final_norm_forward(xn.data(), x, 1, b.m, identity, b.gs);
    zero_covered(b, HOOK_FINAL_NORM, L, xn.data(), 1, d, d, p); // a ZERO there: the logits see 0 (SET: see below)
    for (const intervention& v : b.opt.interventions) // a SET at final_norm: its values, as the forward had them
        if (v.kind == INTERVENE_SET && v.point == HOOK_FINAL_NORM && (v.position < 0 || v.position == p)) {
            hook_tensor t{HOOK_FINAL_NORM, L, xn.data(), 1, p, d, d};
            apply_intervention(v, t, b.c);
        }
    bool logits_set = false; // an intervention on the logits: the whole row, as the forward had it
    for (const intervention& v : b.opt.interventions)
        logits_set |= (v.kind == INTERVENE_ZERO || v.kind == INTERVENE_SET) && v.point == HOOK_LOGITS;
    if (metric.kind != metric_spec::LOGPROB && !logits_set) {
        // A logit or a difference of two reads two rows of the unembedding, not all V (a full row is 154 MB of
        // reads on GPT-2 small, as long as a tenth of the backward): each in double, as the forward's
        // logit_ids computes them (lm_head_logit), and only they get a gradient.
        const int ids[2] = {metric.target, metric.kind == metric_spec::LOGIT_DIFF ? metric.contrast : -1};
        double value = 0;
        for (int j = 0; j < 2; j++) {
            if (ids[j] < 0) continue;
            double sum = lm_head_logit(row.data(), xn.data(), ids[j], b.m);
            double dz = j == 0 ? 1.0 : -1.0; // d metric / d logit
            if (b.c.final_softcap > 0) { // logit = cap tanh(sum / cap)
                const double th = std::tanh(sum / b.c.final_softcap);
                sum = b.c.final_softcap * th;
                dz *= 1.0 - th * th;
            }
            value += j == 0 ? sum : -sum;
            for (int i = 0; i < d; i++) gxn[i] += (float)dz * row[i];
        }
        zero_covered(b, HOOK_FINAL_NORM, L, gxn.data(), 1, d, d, p);
        std::fill_n(g, (size_t)b.T * d, 0.0f);
        final_norm_backward(b, g + (size_t)p * d, x, gxn.data(), 1, identity);
        return value;
    }
    logits.resize(V), dl.assign(V, 0.0f);
    lm_head_forward(logits.data(), xn.data(), 1, b.m, b.gs);
    if (b.c.final_softcap > 0) softcap_forward(logits.data(), V, b.c.final_softcap);
    for (const intervention& v : b.opt.interventions) // the logits' own interventions
        if ((v.kind == INTERVENE_ZERO || v.kind == INTERVENE_SET) && v.point == HOOK_LOGITS) {
            hook_tensor t{HOOK_LOGITS, L, logits.data(), 1, p, V, V};
            apply_intervention(v, t, b.c);
        }
    const double value = metric_of(logits.data(), V, metric);
    // d metric / d logits
    dl[metric.target] += 1.0f;
    if (metric.kind == metric_spec::LOGIT_DIFF && metric.contrast >= 0) dl[metric.contrast] -= 1.0f;
    if (metric.kind == metric_spec::LOGPROB) {
        const double lse = log_sum_exp(logits.data(), V);
        for (int v = 0; v < V; v++) dl[v] -= (float)std::exp((double)logits[v] - lse);
    }
    zero_covered(b, HOOK_LOGITS, L, dl.data(), 1, V, V, p);
    if (b.c.final_softcap > 0) softcap_backward(dl.data(), logits.data(), V, b.c.final_softcap);
    // through the unembedding: gxn = sum over tokens of dl[v] times row v
    for (int v = 0; v < V; v++) {
        if (dl[v] == 0.0f) continue;
        table_row(row.data(), b.w.unembedding(), v);
        for (int i = 0; i < d; i++) gxn[i] += dl[v] * row[i];
    }
    zero_covered(b, HOOK_FINAL_NORM, L, gxn.data(), 1, d, d, p);
    std::fill_n(g, (size_t)b.T * d, 0.0f);
    final_norm_backward(b, g + (size_t)p * d, x, gxn.data(), 1, identity);
    return value;
}

void check_backward(const model& m, const record& fwd, const metric_spec& metric, const forward_options& opt) {
    require(m, FEATURE_GRADIENTS);
    const model_config& c = m.config;
    if (!opt.hooks.empty()) throw error("gradients cannot pass through hooks: run the forward with interventions only");
    if (opt.start_resid) throw error("internal: the backward needs a forward from the embeddings");
    if (fwd.n_tokens <= 0 || fwd.n_layer != c.n_layer) throw error("internal: the record is not this model's run");
    const int V = c.vocab_size, T = fwd.n_tokens;
    if (metric.target < 0 || metric.target >= V)
        throw error("metric target " + std::to_string(metric.target) + " is outside the vocabulary (0.." +
                    std::to_string(V - 1) + ")");
    if (metric.kind == metric_spec::LOGIT_DIFF && metric.contrast >= V)
        throw error("metric contrast " + std::to_string(metric.contrast) + " is outside the vocabulary");
    if (metric.position < -1 || metric.position >= T)
        throw error("metric position " + std::to_string(metric.position) + " is outside the prompt's " +
                    std::to_string(T) + " tokens");
}

void backward(gradients& out, const model& m, const record& fwd, const metric_spec& metric, const forward_options& opt,
              bool readers) {
    check_backward(m, fwd, metric, opt);
    const model_config& c = m.config;
    const int L = c.n_layer, T = fwd.n_tokens, d = c.d_model, H = c.n_head, dh = c.d_head;
    bctx b{m, c, m.weights, arch_table(c.arch), fwd, opt, T, d, H, c.n_kv_head, dh, (H + 2 * c.n_kv_head) * dh,
           {}, {}, {}, {}, {}, {}, {}, {}, {}};
    b.plan = make_plan(b.plan_buf, opt, nullptr, L);
    if (kind_of(c) != KIND_DECODER && kind_of(c) != KIND_MOE) { // encoders and image classifiers: backward_stack.cpp
        single_stack_backward(out, b, metric);
        return;
    }
    const size_t Td = (size_t)T * d;
    out.n_layer = L, out.n_tokens = T, out.d_model = d, out.n_head = H, out.d_head = dh;
    out.position = metric.position < 0 ? T - 1 : metric.position;
    out.resid.assign((size_t)(2 * L + 1) * Td, 0.0f);
    out.z.assign((size_t)L * T * H * dh, 0.0f);
    out.head_in.clear(), out.mlp_in.clear();
    out.mlp_reads_layer_input = c.parallel;
    if (readers) {
        out.head_in.assign((size_t)L * H * Td, 0.0f);
        out.mlp_in.assign((size_t)L * Td, 0.0f);
        b.head_in = out.head_in.data();
    }
    std::vector<float> g(Td), g_mid(Td), g_pre(Td), g_sub(Td), g_mlp(Td);
    out.metric_value = head_backward(b, metric, out.position, g.data());
    for (int l = L - 1; l >= 0; l--) {
        // g: at resid_post of l as flowed (point 2l + 2)
        // (the [T][d] copies and adds are split over the threads: grad.h's copy_floats)
        copy_floats(out.resid.data() + (size_t)(2 * l + 2) * Td, g.data(), Td);
        zero_covered(b, HOOK_RESID_POST, l, g.data(), T, d, d);
        const bool drop_post = (b.plan.no_residual[l] & SKIP_RESID_POST) && !c.parallel;
        // a parallel block's MLP read the layer's input: its gradient joins at resid_pre
        fill_floats(g_pre.data(), 0.0f, Td);
        if (drop_post) fill_floats(g_mid.data(), 0.0f, Td);
        else copy_floats(g_mid.data(), g.data(), Td);
        copy_floats(g_sub.data(), g.data(), Td);
        fill_floats(g_mlp.data(), 0.0f, Td); // the MLP's own share, then added to the stream's
        mlp_backward(b, l, g_sub.data(), g_mlp.data());
        add_floats(c.parallel ? g_pre.data() : g_mid.data(), g_mlp.data(), Td);
        if (readers) copy_floats(out.mlp_in.data() + (size_t)l * Td, g_mlp.data(), Td);
        copy_floats(out.resid.data() + (size_t)(2 * l + 1) * Td, g_mid.data(), Td);
        zero_covered(b, HOOK_RESID_MID, l, g_mid.data(), T, d, d);
        if (!(b.plan.no_residual[l] & SKIP_RESID_MID)) add_floats(g_pre.data(), g_mid.data(), Td);
        attention_backward(b, l, g_mid.data(), out.z.data() + (size_t)l * T * H * dh, g_pre.data());
        // g_pre: at resid_pre of l as it flowed into the layer. Layer 0's is point 0; a later layer's point 2l
        // is the stream before resid_pre's interventions
        if (l == 0) copy_floats(out.resid.data(), g_pre.data(), Td);
        zero_covered(b, HOOK_RESID_PRE, l, g_pre.data(), T, d, d);
        g.swap(g_pre);
    }
}

// ---------------------------------------------------------------------------------------------
// Whole prompts
// ---------------------------------------------------------------------------------------------
void run_gradients(gradients& out, const model& m, const std::vector<int>& tokens, const metric_spec& metric,
                   const ablation& ab, const forward_options& opt, record* fwd, bool readers) {
    require(m, FEATURE_GRADIENTS);
    forward_options o = opt;
    std::vector<intervention> iv = ablation_interventions(ab, m.config);
    o.interventions.insert(o.interventions.begin(), iv.begin(), iv.end());
    o.keep = backward_keep(m.config);
    o.keep.points |= opt.keep.points; // and what the caller reads from fwd
    // The backward makes the metric's logits itself (head_backward): a decoder's forward then needs no LM head
    // beyond the metric's rows (fwd's logits are those rows, [1][ids]).
    const model_kind kind = kind_of(m.config);
    if ((kind == KIND_DECODER || kind == KIND_MOE) && metric.kind != metric_spec::LOGPROB && o.logit_ids.empty() &&
        !o.all_logits) {
        o.logit_ids = metric_ids(metric);
    }
    record local;
    record& rec = fwd ? *fwd : local;
    run_forward(rec, m, tokens, {}, o);
    backward(out, m, rec, metric, o, readers);
}

} // namespace gb
