// The double-precision reference forward of the tiny family models (tiny_family.h), written from the families'
// published semantics (the sources tiny_family.cpp lists), not from core/; and the ablation cases and checks the
// family tests share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "model/quant.h"
#include "run/hooks.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_family_traits.h"
#include "util/error.h"

using namespace tiny_family_detail;

// ---------------------------------------------------------------------------------------------
// Reference forward
// ---------------------------------------------------------------------------------------------
namespace {

using vec = std::vector<double>;

// y [T][out] = x [T][in] times rows row0 .. row0+out of w ([rows][in]), plus bias[row0 ..] when given
vec linear(const std::vector<float>& w, const std::vector<float>* bias, const vec& x, int T, int out, int in, int row0 = 0) {
    vec y((size_t)T * out, 0.0);
    for (int t = 0; t < T; t++)
        for (int o = 0; o < out; o++) {
            double acc = bias ? (double)(*bias)[row0 + o] : 0.0;
            const float* wr = &w[(size_t)(row0 + o) * in];
            for (int i = 0; i < in; i++) acc += (double)wr[i] * x[(size_t)t * in + i];
            y[(size_t)t * out + o] = acc;
        }
    return y;
}

// One row of width n in place: LayerNorm ((x - mean) / sqrt(var + eps) * g + b) or RMSNorm (x / sqrt(mean x^2 +
// eps) * g, or * (1 + g)); g and b may be null (identity gain / no bias).
void norm_row(double* x, int n, const float* g, const float* b, bool layernorm, bool plus_one, double eps) {
    double mean = 0, var = 0;
    if (layernorm) {
        for (int i = 0; i < n; i++) mean += x[i];
        mean /= n;
    }
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    const double inv = 1.0 / std::sqrt(var / n + eps);
    for (int i = 0; i < n; i++) {
        const double gain = g ? (plus_one ? 1.0 + (double)g[i] : (double)g[i]) : 1.0;
        x[i] = (x[i] - mean) * inv * gain + (b ? (double)b[i] : 0.0);
    }
}

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The reference forward's constants and steps, for one model, one prompt of n tokens and one ablation; every
// tensor is [T][width] row-major, as the hook points lay them out
struct family_forward {
    const tiny_family& m;
    const family_spec& s;
    const family_traits& tr;
    const gb::ablation& ab;
    const int n, d, H, KV, dh, qd, kvd, group;
    const int rot;     // rotating dims of each head
    const double eps;
    const std::string p; // the weights' prefix

    family_forward(const tiny_family& m_, int n_, const gb::ablation& ab_)
        : m(m_), s(m_.spec), tr(traits_of(m_.spec.family)), ab(ab_), n(n_), d(s.d_model), H(s.n_head), KV(s.n_kv_head),
          dh(s.head_dim), qd(H * dh), kvd(KV * dh), group(H / KV),
          rot(s.family == "gpt_neox" ? (int)(s.rotary_pct * dh) : dh), eps(s.norm_eps),
          p(s.family == "gpt_neox" ? "gpt_neox." : "model.") {}

    const std::vector<float>& W(int l, const std::string& rest) const { return m.at(lname(p, l, rest)); }

    // the family's norm of each row of a [T][d] tensor with gain g (and bias b for LayerNorm); identity when off
    vec norm_d(const vec& v, const std::vector<float>& g, const std::vector<float>* b, bool off) const {
        vec o = v;
        if (off) return o;
        for (int t = 0; t < n; t++) norm_row(&o[(size_t)t * d], d, g.data(), b ? b->data() : nullptr, tr.layernorm, tr.plus_one, eps);
        return o;
    }

    void rope(vec& v, int heads) const { // pairs (i, i + rot/2) of each head's first rot dims, row t at position t
        for (int t = 0; t < n; t++)
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < rot / 2; i++) {
                    const double a = t * std::pow(s.rope_theta, -2.0 * i / rot);
                    double* row = &v[((size_t)t * heads + h) * dh];
                    const double x0 = row[i], x1 = row[i + rot / 2];
                    row[i] = x0 * std::cos(a) - x1 * std::sin(a);
                    row[i + rot / 2] = x1 * std::cos(a) + x0 * std::sin(a);
                }
    }

    vec dense_mlp(const vec& h, int l, const char* gate, const char* up, const char* down, int width, vec* post) const {
        vec a;
        if (s.family == "phi3" && !tr.moe && !gate) { // fused gate_up_proj: gate rows first, then up rows
            const std::vector<float>& gu = W(l, "mlp.gate_up_proj.weight");
            vec g = linear(gu, nullptr, h, n, width, d, 0), u = linear(gu, nullptr, h, n, width, d, width);
            a.resize(g.size());
            for (size_t i = 0; i < a.size(); i++) a[i] = silu(g[i]) * u[i];
        } else {
            vec g = linear(W(l, gate), nullptr, h, n, width, d), u = linear(W(l, up), nullptr, h, n, width, d);
            a.resize(g.size());
            for (size_t i = 0; i < a.size(); i++) a[i] = (tr.act == ACT_GEGLU_TANH ? gelu_tanh(g[i]) : silu(g[i])) * u[i];
        }
        if (post) *post = a;
        return linear(W(l, down), nullptr, a, n, d, width);
    }

    // q [T][H*dh], k and v [T][KV*dh] of the attention's input h, as the family projects them
    void qkv(int l, const vec& h, vec& q, vec& k, vec& v) const {
        if (s.family == "gpt_neox") { // rows grouped per head: [H][q k v][dh]
            vec fused = linear(W(l, "attention.query_key_value.weight"), &W(l, "attention.query_key_value.bias"), h, n, 3 * d, d);
            q.assign((size_t)n * qd, 0), k.assign((size_t)n * kvd, 0), v.assign((size_t)n * kvd, 0);
            for (int t = 0; t < n; t++)
                for (int hd = 0; hd < H; hd++)
                    for (int e = 0; e < dh; e++) {
                        const double* src = &fused[(size_t)t * 3 * d + (size_t)hd * 3 * dh];
                        q[(size_t)t * qd + hd * dh + e] = src[e];
                        k[(size_t)t * kvd + hd * dh + e] = src[dh + e];
                        v[(size_t)t * kvd + hd * dh + e] = src[2 * dh + e];
                    }
        } else if (s.family == "phi3") { // q | k | v
            const std::vector<float>& wqkv = W(l, "self_attn.qkv_proj.weight");
            q = linear(wqkv, nullptr, h, n, qd, d, 0);
            k = linear(wqkv, nullptr, h, n, kvd, d, qd);
            v = linear(wqkv, nullptr, h, n, kvd, d, qd + kvd);
        } else {
            const bool b = *s.qkv_bias;
            q = linear(W(l, "self_attn.q_proj.weight"), b ? &W(l, "self_attn.q_proj.bias") : nullptr, h, n, qd, d);
            k = linear(W(l, "self_attn.k_proj.weight"), b ? &W(l, "self_attn.k_proj.bias") : nullptr, h, n, kvd, d);
            v = linear(W(l, "self_attn.v_proj.weight"), b ? &W(l, "self_attn.v_proj.bias") : nullptr, h, n, kvd, d);
        }
    }

    // the q/k norms of the families that have them (off: q and k as projected)
    void qk_norm(int l, vec& q, vec& k, bool off) const {
        if (off) return;
        if (tr.qk_norm == QKN_FULL) { // OLMo 2, OLMoE: one RMSNorm over all heads' q (and k)
            const std::vector<float>&gq = W(l, "self_attn.q_norm.weight"), &gk = W(l, "self_attn.k_norm.weight");
            for (int t = 0; t < n; t++) {
                norm_row(&q[(size_t)t * qd], qd, gq.data(), nullptr, false, false, eps);
                norm_row(&k[(size_t)t * kvd], kvd, gk.data(), nullptr, false, false, eps);
            }
        } else if (tr.qk_norm == QKN_HEAD) { // Qwen3: each head's dh values, one gain shared by the heads
            const std::vector<float>&gq = W(l, "self_attn.q_norm.weight"), &gk = W(l, "self_attn.k_norm.weight");
            for (int t = 0; t < n; t++) {
                for (int hd = 0; hd < H; hd++) norm_row(&q[(size_t)t * qd + hd * dh], dh, gq.data(), nullptr, false, false, eps);
                for (int g = 0; g < KV; g++) norm_row(&k[(size_t)t * kvd + g * dh], dh, gk.data(), nullptr, false, false, eps);
            }
        }
    }

    // the causal pattern [H][T][T] of layer l: Gemma 2's scale and soft cap, the sliding window where the family has it
    vec pattern(int l, const vec& q, const vec& k) const {
        const double scale = s.family == "gemma2" ? 1.0 / std::sqrt((double)s.query_pre_attn_scalar) : 1.0 / std::sqrt((double)dh);
        const bool windowed = s.sliding_window > 0 && (tr.window == WIN_ALL || (tr.window == WIN_EVEN && l % 2 == 0));
        vec pat((size_t)H * n * n, 0.0);
        for (int hd = 0; hd < H; hd++) {
            const int g = hd / group; // grouped-query attention: query head hd reads kv head g
            for (int t = 0; t < n; t++) {
                const int j0 = windowed ? std::max(0, t - s.sliding_window + 1) : 0; // key j seen when t - j < window
                vec sc(n, 0.0);
                double mx = -1e300, sum = 0;
                for (int j = j0; j <= t; j++) {
                    double dot = 0;
                    for (int e = 0; e < dh; e++) dot += q[(size_t)t * qd + hd * dh + e] * k[(size_t)j * kvd + g * dh + e];
                    sc[j] = dot * scale;
                    if (s.family == "gemma2" && s.attn_softcap > 0) sc[j] = s.attn_softcap * std::tanh(sc[j] / s.attn_softcap);
                    mx = std::max(mx, sc[j]);
                }
                for (int j = j0; j <= t; j++) sum += (sc[j] = std::exp(sc[j] - mx));
                for (int j = j0; j <= t; j++) pat[((size_t)hd * n + t) * n + j] = sc[j] / sum;
            }
        }
        return pat;
    }

    // z [T][H*dh]: each head's pattern over v; a head the ablation removes stays 0
    vec heads_z(int l, const vec& pat, const vec& v) const {
        vec z((size_t)n * qd, 0.0);
        for (int hd = 0; hd < H; hd++) {
            const int g = hd / group;
            if (std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{l, hd}) != ab.heads.end()) continue; // z stays 0
            for (int t = 0; t < n; t++)
                for (int j = 0; j < n; j++) // every key: the (maybe edited) pattern says which count
                    for (int e = 0; e < dh; e++)
                        z[(size_t)t * qd + hd * dh + e] += pat[((size_t)hd * n + t) * n + j] * v[(size_t)j * kvd + g * dh + e];
        }
        return z;
    }

    // the attention sublayer of layer l on the stream x: its output a [T][d], its points kept by at
    vec attention(int l, const vec& x, ref_points& at, bool no_norm, bool no_attn) const {
        vec h = x;
        if (tr.pre_norm)
            h = s.family == "gpt_neox" ? norm_d(x, W(l, "input_layernorm.weight"), &W(l, "input_layernorm.bias"), no_norm)
                                       : norm_d(x, W(l, "input_layernorm.weight"), nullptr, no_norm);
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec q, k, v;
        qkv(l, h, q, k, v);
        qk_norm(l, q, k, no_norm);
        rope(q, H);
        rope(k, KV);
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, k);
        at.at(gb::HOOK_V, l, v);
        vec pat = pattern(l, q, k);
        at.at(gb::HOOK_PATTERN, l, pat);
        vec z = heads_z(l, pat, v);
        at.at(gb::HOOK_Z, l, z);
        const std::vector<float>& wo = s.family == "gpt_neox" ? W(l, "attention.dense.weight") : W(l, "self_attn.o_proj.weight");
        vec head_out = ref_head_outputs(wo, z, n, H, dh, d);
        at.at(gb::HOOK_HEAD_OUT, l, head_out);
        vec a((size_t)n * d, 0.0);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < d; i++) {
                double acc = s.family == "gpt_neox" ? (double)W(l, "attention.dense.bias")[i] : 0.0;
                for (int hd = 0; hd < H; hd++) acc += head_out[((size_t)t * H + hd) * d + i];
                a[(size_t)t * d + i] = acc;
            }
        if (tr.post_norm) a = norm_d(a, W(l, "post_attention_layernorm.weight"), nullptr, no_norm);
        if (no_attn) std::fill(a.begin(), a.end(), 0.0);
        at.at(gb::HOOK_ATTN_OUT, l, a);
        return a;
    }

    // the MLP's input: the family's norm before the MLP of src (OLMo 2: none)
    vec mlp_in(int l, const vec& src, bool no_norm) const {
        if (s.family == "gpt_neox")
            return norm_d(src, W(l, "post_attention_layernorm.weight"), &W(l, "post_attention_layernorm.bias"), no_norm);
        if (s.family == "gemma2") return norm_d(src, W(l, "pre_feedforward_layernorm.weight"), nullptr, no_norm);
        if (tr.pre_norm) return norm_d(src, W(l, "post_attention_layernorm.weight"), nullptr, no_norm);
        return src;
    }

    // the experts' MLP: router softmax over every expert, the top n_expert_used kept (renormalised when norm_topk),
    // then the ablated experts' weights zeroed without renormalising the others; Qwen's shared expert beside them
    vec moe(int l, const vec& h, const std::vector<std::pair<int, int>>& ablated, ref_points& at,
            family_ref_extra* extra) const {
        const int E = s.n_expert, K = s.n_expert_used, router_hook = router_point();
        const bool mx = s.family == "mixtral";
        vec logits = linear(W(l, mx ? "block_sparse_moe.gate.weight" : "mlp.gate.weight"), nullptr, h, n, E, d);
        vec wts((size_t)n * E, 0.0);
        for (int t = 0; t < n; t++) {
            double* lg = &logits[(size_t)t * E];
            const double mxl = *std::max_element(lg, lg + E);
            double sum = 0;
            vec prob(E);
            for (int e = 0; e < E; e++) sum += (prob[e] = std::exp(lg[e] - mxl));
            for (double& pe : prob) pe /= sum;
            std::vector<int> idx(E);
            std::iota(idx.begin(), idx.end(), 0);
            std::stable_sort(idx.begin(), idx.end(), [&](int a1, int b1) { return prob[a1] > prob[b1]; });
            double chosen = 0;
            for (int k2 = 0; k2 < K; k2++) chosen += prob[idx[k2]];
            for (int k2 = 0; k2 < K; k2++) wts[(size_t)t * E + idx[k2]] = *s.norm_topk ? prob[idx[k2]] / chosen : prob[idx[k2]];
            for (const auto& [al, ae] : ablated)
                if (al == l && ae >= 0 && ae < E) wts[(size_t)t * E + ae] = 0.0;
        }
        if (router_hook >= 0) at.at((gb::hook_point)router_hook, l, wts);
        if (extra) extra->router[l] = wts;
        vec o((size_t)n * d, 0.0);
        for (int e = 0; e < E; e++) {
            const std::string ex = mx ? "block_sparse_moe.experts." + std::to_string(e) + "." : "mlp.experts." + std::to_string(e) + ".";
            vec y = mx ? dense_mlp(h, l, (ex + "w1.weight").c_str(), (ex + "w3.weight").c_str(), (ex + "w2.weight").c_str(), s.d_ff_expert, nullptr)
                       : dense_mlp(h, l, (ex + "gate_proj.weight").c_str(), (ex + "up_proj.weight").c_str(), (ex + "down_proj.weight").c_str(),
                                   s.d_ff_expert, nullptr);
            for (int t = 0; t < n; t++)
                for (int i = 0; i < d; i++) o[(size_t)t * d + i] += wts[(size_t)t * E + e] * y[(size_t)t * d + i];
        }
        if (tr.shared_expert) { // always on, scaled by sigmoid(h . shared_expert_gate)
            vec y = dense_mlp(h, l, "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                              "mlp.shared_expert.down_proj.weight", s.d_ff_shared, nullptr);
            vec gl = linear(W(l, "mlp.shared_expert_gate.weight"), nullptr, h, n, 1, d);
            for (int t = 0; t < n; t++) {
                const double gate = 1.0 / (1.0 + std::exp(-gl[t]));
                for (int i = 0; i < d; i++) o[(size_t)t * d + i] += gate * y[(size_t)t * d + i];
            }
        }
        return o;
    }

    // the MLP sublayer's output [T][d] of its input h: GPT-NeoX's GELU, the gated MLPs, or the experts
    vec mlp(int l, const vec& h, ref_points& at, const std::vector<std::pair<int, int>>& ablated, family_ref_extra* extra,
            bool no_norm) const {
        vec o;
        if (s.family == "gpt_neox") {
            vec u = linear(W(l, "mlp.dense_h_to_4h.weight"), &W(l, "mlp.dense_h_to_4h.bias"), h, n, s.d_ff, d);
            for (double& e : u) e = gelu_erf(e);
            at.at(gb::HOOK_MLP_POST, l, u);
            o = linear(W(l, "mlp.dense_4h_to_h.weight"), &W(l, "mlp.dense_4h_to_h.bias"), u, n, d, s.d_ff);
        } else if (!tr.moe) {
            vec post;
            if (s.family == "phi3") o = dense_mlp(h, l, nullptr, nullptr, "mlp.down_proj.weight", s.d_ff, &post);
            else o = dense_mlp(h, l, "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", s.d_ff, &post);
            at.at(gb::HOOK_MLP_POST, l, post);
        } else {
            o = moe(l, h, ablated, at, extra);
        }
        if (tr.post_norm) o = norm_d(o, W(l, "post_feedforward_layernorm.weight"), nullptr, no_norm);
        return o;
    }
};

} // namespace

ref_trace reference_family(const tiny_family& m, const std::vector<int>& tokens, const gb::ablation& ab,
                           const family_ref_options& fo, family_ref_extra* extra) {
    const family_spec& s = m.spec;
    const family_traits& tr = traits_of(s.family);
    const int n = (int)tokens.size(), d = s.d_model, H = s.n_head, dh = s.head_dim, L = s.n_layer, V = s.vocab;
    const family_forward f(m, n, ab);
    const std::string& p = f.p;
    std::vector<std::pair<int, int>> ablated = fo.experts, from_ab = experts_of(ab, 0);
    ablated.insert(ablated.end(), from_ab.begin(), from_ab.end());
    if (extra) extra->router.assign(L, {});

    ref_trace r;
    ref_points at(r, fo.base, L, n, d, dh);
    vec x((size_t)n * d);
    const std::vector<float>& emb = m.at(p + (s.family == "gpt_neox" ? "embed_in.weight" : "embed_tokens.weight"));
    const double emb_scale = tr.embed_scale ? std::sqrt((double)d) : 1.0;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = emb.at((size_t)tokens[t] * d + i) * emb_scale;
    at.at(gb::HOOK_RESID_PRE, 0, x);
    for (int l = 0; l < L; l++) {
        // no-layernorm: every norm of the layer is the identity; the attention sublayer's (its pre-norm, the q/k
        // norms, its post-norm) and the MLP's (its pre-norm, its post-norm)
        const bool no_norm = in_set(ab.no_layernorm, l), no_res = in_set(ab.no_residual, l), no_attn = in_set(ab.no_attention, l);
        if (l > 0) at.at(gb::HOOK_RESID_PRE, l, x);
        const vec x_in = x; // the layer's input (GPT-NeoX's parallel MLP reads it)
        const vec a = f.attention(l, x, at, no_norm, no_attn);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        at.at(gb::HOOK_RESID_MID, l, x);
        // parallel: the MLP reads the layer's input, and resid_post = resid_mid + mlp_out whether or not the
        // layer's input was dropped at resid_mid
        const bool parallel = s.family == "gpt_neox" && s.parallel;
        vec h = f.mlp_in(l, parallel ? x_in : x, no_norm);
        at.at(gb::HOOK_MLP_IN, l, h);
        vec o = f.mlp(l, h, at, ablated, extra, no_norm);
        at.at(gb::HOOK_MLP_OUT, l, o);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res && !parallel ? o[i] : x[i] + o[i];
        at.at(gb::HOOK_RESID_POST, l, x);
    }
    const bool final_off = in_all(ab.no_layernorm, L);
    vec xf = s.family == "gpt_neox" ? f.norm_d(x, m.at(p + "final_layer_norm.weight"), &m.at(p + "final_layer_norm.bias"), final_off)
                                    : f.norm_d(x, m.at(p + "norm.weight"), nullptr, final_off);
    at.at(gb::HOOK_FINAL_NORM, L, xf);
    const std::vector<float>& un = s.family == "gpt_neox" ? m.at("embed_out.weight") : *s.tied ? emb : m.at("lm_head.weight");
    vec logits = linear(un, nullptr, xf, n, V, d);
    if (s.family == "gemma2" && s.final_softcap > 0)
        for (double& v : logits) v = s.final_softcap * std::tanh(v / s.final_softcap);
    at.at(gb::HOOK_LOGITS, L, logits);
    at.finish(H);
    return r;
}

// ---------------------------------------------------------------------------------------------
// Ablations and checks
// ---------------------------------------------------------------------------------------------
std::vector<std::pair<int, int>> ablated_experts(const gb::ablation& ab) { return experts_of(ab, 0); }
bool set_ablated_expert(gb::ablation& ab, int layer, int expert) { return add_expert(ab, layer, expert, 0); }

std::vector<std::pair<std::string, gb::ablation>> family_ablation_cases(const family_spec& in) {
    const family_spec s = resolve_family_spec(in);
    const family_traits& t = traits_of(s.family);
    const auto on = layers_on;
    std::vector<std::pair<std::string, gb::ablation>> cases;
    auto add = [&](const std::string& name) -> gb::ablation& {
        cases.push_back({name, gb::ablation{}});
        return cases.back().second;
    };
    add("none");
    add("no-attention").no_attention = on({});
    add("no-residual[1]").no_residual = on({1});
    add("no-residual").no_residual = on({});
    add("heads 0.1 1.3").heads = {{0, 1}, {1, 3}};
    add("no-layernorm").no_layernorm = on({});
    add("no-layernorm[0]").no_layernorm = on({0});
    add("no-layernorm[1]").no_layernorm = on({1});
    gb::ablation& all = add("everything at layer 0");
    all.no_attention = all.no_residual = all.no_layernorm = on({0});
    all.heads = {{1, 2}};
    // (without biases the case above leaves an empty stream after layer 0: all logits 0); the switches at once on
    // a stream that keeps something
    gb::ablation& mixed = add("no-attention[0] no-layernorm[0] no-residual[1] head 1.2");
    mixed.no_attention = mixed.no_layernorm = on({0});
    mixed.no_residual = on({1});
    mixed.heads = {{1, 2}};
    if (t.moe) {
        gb::ablation ex;
        if (set_ablated_expert(ex, 0, 1) && set_ablated_expert(ex, 1, 2)) cases.push_back({"experts 0.1 1.2", ex});
    }
    return cases;
}

void expect_family_matches_reference(const gb::model& m, const tiny_family& tm, const std::vector<int>& tokens,
                                     const std::string& label) {
    const int router = traits_of(tm.spec.family).moe ? router_point() : -1;
    for (const auto& [name, ab] : family_ablation_cases(tm.spec)) {
        gb::record cap;
        gb::forward_options opt;
        opt.all_logits = true;
        // the sublayers' outputs: after the post-norms of Gemma 2 and OLMo 2, what reaches the stream
        opt.keep.points |= gb::hook_bit(gb::HOOK_ATTN_OUT) | gb::hook_bit(gb::HOOK_MLP_OUT);
        if (router >= 0) opt.keep.points |= gb::hook_bit((gb::hook_point)router);
        try {
            gb::run_forward(cap, m, tokens, ab, opt);
        } catch (const gb::error& e) {
            ADD_FAILURE() << label << ", " << name << ": " << e.what();
            continue;
        }
        family_ref_extra extra;
        const ref_trace ref = reference_family(tm, tokens, ab, {}, &extra);
        expect_record_matches(cap, ref, label + ", " + name);
        if (router >= 0) { // the router's mixing weights [L][T][E], when core/run/hooks.h has the point
            std::vector<double> want;
            for (const auto& layer : extra.router) want.insert(want.end(), layer.begin(), layer.end());
            EXPECT_LT(max_scaled_error(cap.flat((gb::hook_point)router), want), 1e-4) << label << ", " << name << ": router";
        }
    }
}

double family_reference_gap(const tiny_family& a, const tiny_family& b, const std::vector<int>& tokens) {
    const ref_trace ra = reference_family(a, tokens, {}), rb = reference_family(b, tokens, {});
    return max_scaled_error(std::vector<float>(ra.logits.begin(), ra.logits.end()), rb.logits);
}
