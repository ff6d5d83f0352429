// Naive double-precision GPT-2 forward with ablations (the tests' independent reference).
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

bool in_set(const gb::layer_set& s, int l) {
    if (!s.on) return false;
    if (s.layers.empty()) return true;
    return std::find(s.layers.begin(), s.layers.end(), l) != s.layers.end();
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

ref_result reference_forward(const tiny_model& tm, const std::vector<int>& tokens, const gb::ablation& ab) {
    const gb::model_config& c = tm.config;
    const int n = (int)tokens.size(), d = c.d_model, H = c.n_head, dh = d / H, L = c.n_layer, V = c.vocab_size;
    const int ff = c.d_ff;
    const double eps = c.norm_eps;
    ref_result r;
    r.attention.assign((size_t)L * H * n * n, 0.0);
    r.resid_norm.assign((size_t)(2 * L + 1) * n, 0.0);
    auto record = [&](int point, const vec& x) {
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int i = 0; i < d; i++) s += x[t * d + i] * x[t * d + i];
            r.resid_norm[(size_t)point * n + t] = std::sqrt(s);
        }
    };

    const auto& wte = T(tm, "wte.weight");
    const auto& wpe = T(tm, "wpe.weight");
    vec x((size_t)n * d);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[t * d + i] = (double)wte[(size_t)tokens[t] * d + i] + wpe[(size_t)t * d + i];
    record(0, x);

    for (int l = 0; l < L; l++) {
        std::string p = "h." + std::to_string(l) + ".";
        bool no_norm = in_set(ab.no_layernorm, l), no_res = in_set(ab.no_residual, l);
        bool no_attn = in_set(ab.no_attention, l);

        vec h = layer_norm(x, n, d, T(tm, p + "ln_1.weight"), T(tm, p + "ln_1.bias"), eps, no_norm);
        vec qkv = linear(h, n, d, 3 * d, T(tm, p + "attn.c_attn.weight"), T(tm, p + "attn.c_attn.bias"));
        vec heads((size_t)n * d, 0.0);
        for (int hd = 0; hd < H; hd++) {
            bool head_off = false;
            for (auto& hr : ab.heads) head_off |= hr.layer == l && hr.head == hd;
            for (int i = 0; i < n; i++) {
                vec s(i + 1);
                double mx = -1e300;
                for (int j = 0; j <= i; j++) {
                    double dot = 0;
                    for (int e = 0; e < dh; e++)
                        dot += qkv[(size_t)i * 3 * d + hd * dh + e] * qkv[(size_t)j * 3 * d + d + hd * dh + e];
                    s[j] = dot / std::sqrt((double)dh);
                    mx = std::max(mx, s[j]);
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) sum += (s[j] = std::exp(s[j] - mx));
                for (int j = 0; j <= i; j++) {
                    double pr = s[j] / sum;
                    r.attention[(((size_t)l * H + hd) * n + i) * n + j] = pr;
                    if (head_off) continue;
                    for (int e = 0; e < dh; e++)
                        heads[(size_t)i * d + hd * dh + e] += pr * qkv[(size_t)j * 3 * d + 2 * d + hd * dh + e];
                }
            }
        }
        vec a = linear(heads, n, d, d, T(tm, p + "attn.c_proj.weight"), T(tm, p + "attn.c_proj.bias"));
        if (no_attn) std::fill(a.begin(), a.end(), 0.0);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        record(2 * l + 1, x);

        h = layer_norm(x, n, d, T(tm, p + "ln_2.weight"), T(tm, p + "ln_2.bias"), eps, no_norm);
        vec u = linear(h, n, d, ff, T(tm, p + "mlp.c_fc.weight"), T(tm, p + "mlp.c_fc.bias"));
        for (double& v : u) v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
        vec m = linear(u, n, ff, d, T(tm, p + "mlp.c_proj.weight"), T(tm, p + "mlp.c_proj.bias"));
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? m[i] : x[i] + m[i];
        record(2 * l + 2, x);
    }

    bool all_off = ab.no_layernorm.on;
    for (int l = 0; l < L; l++) all_off = all_off && in_set(ab.no_layernorm, l);
    vec xf = layer_norm(x, n, d, T(tm, "ln_f.weight"), T(tm, "ln_f.bias"), eps, all_off);
    const auto& head = tm.tensors.count("lm_head.weight") ? T(tm, "lm_head.weight") : wte;
    r.logits.assign((size_t)n * V, 0.0);
    for (int t = 0; t < n; t++)
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int i = 0; i < d; i++) s += xf[t * d + i] * head[(size_t)v * d + i];
            r.logits[(size_t)t * V + v] = s;
        }
    return r;
}
