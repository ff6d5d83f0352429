// Naive double-precision GPT-2 forward with ablations, patches and edits at every hook point (the tests'
// independent reference).
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace {

using vec = std::vector<double>;

const std::vector<float>& T(const tiny_model& tm, const std::string& name) {
    auto it = tm.tensors.find(name);
    if (it == tm.tensors.end()) throw std::runtime_error("reference: missing tensor " + name);
    return it->second;
}

// x [n][d] -> LayerNorm(x) (identity when off)
vec layer_norm(const vec& x, int n, int d, const std::vector<float>& g, const std::vector<float>& b, double eps,
               bool off) {
    if (off) return x;
    vec y(x.size());
    for (int t = 0; t < n; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += x[t * d + i];
        mean /= d;
        for (int i = 0; i < d; i++) var += (x[t * d + i] - mean) * (x[t * d + i] - mean);
        var /= d;
        for (int i = 0; i < d; i++) y[t * d + i] = (x[t * d + i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
    }
    return y;
}

// y [n][out] = x [n][in] * W [in][out] + b (Conv1D layout)
vec linear(const vec& x, int n, int in, int out, const std::vector<float>& W, const std::vector<float>& b) {
    vec y((size_t)n * out);
    for (int t = 0; t < n; t++)
        for (int j = 0; j < out; j++) {
            double s = b.empty() ? 0.0 : b[j];
            for (int i = 0; i < in; i++) s += x[(size_t)t * in + i] * W[(size_t)i * out + j];
            y[(size_t)t * out + j] = s;
        }
    return y;
}

} // namespace

ref_result reference_forward(const tiny_model& tm, const std::vector<int>& tokens, const gb::ablation& ab,
                             const ref_options& opt) {
    const gb::model_config& c = tm.config;
    const int n = (int)tokens.size(), d = c.d_model, H = c.n_head, dh = d / H, L = c.n_layer, V = c.vocab_size;
    const int ff = c.d_ff;
    const double eps = c.norm_eps;
    ref_result r;
    ref_points at(r, opt, L, n, d, dh);

    const auto& wte = T(tm, "wte.weight");
    const auto& wpe = T(tm, "wpe.weight");
    vec x((size_t)n * d);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[t * d + i] = (double)wte[(size_t)tokens[t] * d + i] + wpe[(size_t)t * d + i];
    at.at(gb::HOOK_RESID_PRE, 0, x);

    for (int l = 0; l < L; l++) {
        std::string p = "h." + std::to_string(l) + ".";
        bool no_norm = in_set(ab.no_layernorm, l), no_res = in_set(ab.no_residual, l);
        bool no_attn = in_set(ab.no_attention, l);
        if (l > 0) at.at(gb::HOOK_RESID_PRE, l, x);

        vec h = layer_norm(x, n, d, T(tm, p + "ln_1.weight"), T(tm, p + "ln_1.bias"), eps, no_norm);
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec qkv = linear(h, n, d, 3 * d, T(tm, p + "attn.c_attn.weight"), T(tm, p + "attn.c_attn.bias"));
        vec q((size_t)n * d), k((size_t)n * d), v((size_t)n * d); // [T][H*dh] each
        for (int t = 0; t < n; t++)
            for (int i = 0; i < d; i++) {
                q[(size_t)t * d + i] = qkv[(size_t)t * 3 * d + i];
                k[(size_t)t * d + i] = qkv[(size_t)t * 3 * d + d + i];
                v[(size_t)t * d + i] = qkv[(size_t)t * 3 * d + 2 * d + i];
            }
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, k);
        at.at(gb::HOOK_V, l, v);
        vec pattern((size_t)H * n * n, 0.0); // [H][T][T]
        for (int hd = 0; hd < H; hd++)
            for (int i = 0; i < n; i++) {
                vec s(i + 1);
                double mx = -1e300;
                for (int j = 0; j <= i; j++) {
                    double dot = 0;
                    for (int e = 0; e < dh; e++) dot += q[(size_t)i * d + hd * dh + e] * k[(size_t)j * d + hd * dh + e];
                    s[j] = dot / std::sqrt((double)dh);
                    mx = std::max(mx, s[j]);
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) sum += (s[j] = std::exp(s[j] - mx));
                for (int j = 0; j <= i; j++) pattern[((size_t)hd * n + i) * n + j] = s[j] / sum;
            }
        at.at(gb::HOOK_PATTERN, l, pattern);
        vec z((size_t)n * d, 0.0); // [T][H*dh]
        for (int hd = 0; hd < H; hd++) {
            bool head_off = false;
            for (auto& hr : ab.heads) head_off |= hr.layer == l && hr.head == hd;
            if (head_off) continue; // the ablated head's z stays 0
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) // all keys: the pattern (maybe edited) says which count
                    for (int e = 0; e < dh; e++)
                        z[(size_t)i * d + hd * dh + e] += pattern[((size_t)hd * n + i) * n + j] * v[(size_t)j * d + hd * dh + e];
        }
        at.at(gb::HOOK_Z, l, z);
        // head_out [T][H*d]: head hd's z times rows hd*dh .. of c_proj [d][d], no bias
        const auto& wo = T(tm, p + "attn.c_proj.weight");
        vec head_out((size_t)n * H * d, 0.0);
        for (int t = 0; t < n; t++)
            for (int hd = 0; hd < H; hd++)
                for (int j = 0; j < d; j++) {
                    double s = 0;
                    for (int e = 0; e < dh; e++) s += z[(size_t)t * d + hd * dh + e] * wo[(size_t)(hd * dh + e) * d + j];
                    head_out[((size_t)t * H + hd) * d + j] = s;
                }
        at.at(gb::HOOK_HEAD_OUT, l, head_out);
        const auto& bo = T(tm, p + "attn.c_proj.bias");
        vec a((size_t)n * d);
        for (int t = 0; t < n; t++)
            for (int j = 0; j < d; j++) {
                double s = bo[j];
                for (int hd = 0; hd < H; hd++) s += head_out[((size_t)t * H + hd) * d + j];
                a[(size_t)t * d + j] = no_attn ? 0.0 : s;
            }
        at.at(gb::HOOK_ATTN_OUT, l, a);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        at.at(gb::HOOK_RESID_MID, l, x);

        h = layer_norm(x, n, d, T(tm, p + "ln_2.weight"), T(tm, p + "ln_2.bias"), eps, no_norm);
        at.at(gb::HOOK_MLP_IN, l, h);
        vec u = linear(h, n, d, ff, T(tm, p + "mlp.c_fc.weight"), T(tm, p + "mlp.c_fc.bias"));
        for (double& e : u) e = 0.5 * e * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (e + 0.044715 * e * e * e)));
        at.at(gb::HOOK_MLP_POST, l, u);
        vec m = linear(u, n, ff, d, T(tm, p + "mlp.c_proj.weight"), T(tm, p + "mlp.c_proj.bias"));
        at.at(gb::HOOK_MLP_OUT, l, m);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? m[i] : x[i] + m[i];
        at.at(gb::HOOK_RESID_POST, l, x);
    }

    bool all_off = ab.no_layernorm.on;
    for (int l = 0; l < L; l++) all_off = all_off && in_set(ab.no_layernorm, l);
    vec xf = layer_norm(x, n, d, T(tm, "ln_f.weight"), T(tm, "ln_f.bias"), eps, all_off);
    at.at(gb::HOOK_FINAL_NORM, L, xf);
    const auto& head = tm.tensors.count("lm_head.weight") ? T(tm, "lm_head.weight") : wte;
    vec logits((size_t)n * V, 0.0);
    for (int t = 0; t < n; t++)
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int i = 0; i < d; i++) s += xf[t * d + i] * head[(size_t)v * d + i];
            logits[(size_t)t * V + v] = s;
        }
    at.at(gb::HOOK_LOGITS, L, logits);
    at.finish(H);
    return r;
}

ref_readout reference_readout(const tiny_model& tm) {
    const gb::model_config& c = tm.config;
    ref_readout r;
    r.layernorm = true;
    r.eps = c.norm_eps;
    r.d = c.d_model;
    r.V = c.vocab_size;
    const auto& g = T(tm, "ln_f.weight");
    const auto& b = T(tm, "ln_f.bias");
    r.g.assign(g.begin(), g.end());
    r.b.assign(b.begin(), b.end());
    const auto& head = tm.tensors.count("lm_head.weight") ? T(tm, "lm_head.weight") : T(tm, "wte.weight");
    r.unembed.assign(head.begin(), head.end());
    for (int l = 0; l < c.n_layer; l++) {
        const auto& bo = T(tm, "h." + std::to_string(l) + ".attn.c_proj.bias");
        r.b_o.emplace_back(bo.begin(), bo.end());
    }
    return r;
}
