// The references' shared bookkeeping at each point (patches, edits, what they keep) and the final readout.
#include "ref_trace.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

ref_points::ref_points(ref_trace& o, const ref_options& op, int L_, int T_, int d_, int dh_)
    : out(o), opt(op), L(L_), T(T_), d(d_), dh(dh_) {
    out.n_layer = L;
    out.n_tokens = T;
    out.d_model = d;
    for (int p = 0; p < gb::HOOK_COUNT; p++) out.act[p].assign(gb::hook_is_final((gb::hook_point)p) ? 1 : L, {});
    out.resid.assign((size_t)(2 * L + 1) * T * d, 0.0);
    out.resid_norm.assign((size_t)(2 * L + 1) * T, 0.0);
}

void ref_points::at(gb::hook_point p, int layer, std::vector<double>& x) {
    // the residual point this is, -1 for none (resid_pre of a later layer is resid_post of the one before)
    const int point = p == gb::HOOK_RESID_PRE && layer == 0 ? 0
                      : p == gb::HOOK_RESID_MID             ? 2 * layer + 1
                      : p == gb::HOOK_RESID_POST            ? 2 * layer + 2
                                                            : -1;
    for (const ref_resid_patch& rp : opt.resid_patches)
        if (rp.point == point) {
            if ((int)rp.values.size() != d) throw std::runtime_error("reference: a residual patch needs d values");
            for (int i = 0; i < d; i++) x[(size_t)rp.position * d + i] = rp.values[i];
        }
    if (p == gb::HOOK_Z)
        for (const ref_z_patch& zp : opt.z_patches)
            if (zp.layer == layer) {
                if ((int)zp.values.size() != T * dh) throw std::runtime_error("reference: a z patch needs T*dh values");
                const int H = (int)(x.size() / ((size_t)T * dh));
                for (int t = 0; t < T; t++)
                    for (int e = 0; e < dh; e++) x[((size_t)t * H + zp.head) * dh + e] = zp.values[(size_t)t * dh + e];
            }
    if (opt.edit) opt.edit(p, layer, x);
    out.act[p][gb::hook_is_final(p) ? 0 : layer] = x;
    if (point >= 0)
        for (int t = 0; t < T; t++) {
            double ss = 0;
            for (int i = 0; i < d; i++) {
                const double v = x[(size_t)t * d + i];
                out.resid[((size_t)point * T + t) * d + i] = v;
                ss += v * v;
            }
            out.resid_norm[(size_t)point * T + t] = std::sqrt(ss);
        }
}

void ref_points::finish(int H) {
    out.attention.assign((size_t)L * H * T * T, 0.0);
    for (int l = 0; l < L; l++)
        for (size_t i = 0; i < (size_t)H * T * T; i++) out.attention[(size_t)l * H * T * T + i] = out.act[gb::HOOK_PATTERN][l][i];
    out.logits = out.act[gb::HOOK_LOGITS][0];
}

gb::layer_set layers_on(std::vector<int> layers) {
    gb::layer_set ls;
    ls.on = true;
    ls.layers = std::move(layers);
    return ls;
}

std::vector<double> ref_head_outputs(const std::vector<float>& wo, const std::vector<double>& z, int T, int H, int dh, int d) {
    const size_t q = (size_t)H * dh;
    std::vector<double> out((size_t)T * H * d, 0.0);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < d; i++) {
                double acc = 0;
                for (int e = 0; e < dh; e++) acc += (double)wo[i * q + h * dh + e] * z[t * q + h * dh + e];
                out[((size_t)t * H + h) * d + i] = acc;
            }
    return out;
}

std::vector<double> ref_layernorm(const std::vector<double>& v, const std::vector<float>& g, const std::vector<float>& b,
                                  int n, int d, double eps, bool off) {
    if (off) return v;
    std::vector<double> o(v.size());
    for (int t = 0; t < n; t++) {
        const double* x = &v[(size_t)t * d];
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += x[i];
        mean /= d;
        for (int i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
        const double inv = 1.0 / std::sqrt(var / d + eps);
        for (int i = 0; i < d; i++) o[(size_t)t * d + i] = (x[i] - mean) * inv * g[i] + b[i];
    }
    return o;
}

std::vector<double> ref_linear(const std::vector<float>& w, const std::vector<float>& b, const std::vector<double>& v,
                               int n, int out, int in) {
    std::vector<double> o((size_t)n * out);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < out; i++) {
            double acc = b[i];
            for (int j = 0; j < in; j++) acc += (double)w[(size_t)i * in + j] * v[(size_t)t * in + j];
            o[(size_t)t * out + i] = acc;
        }
    return o;
}

std::vector<double> ref_full_pattern(const std::vector<double>& q, const std::vector<double>& k, int n, int H, int dh) {
    const int d = H * dh;
    std::vector<double> pattern((size_t)H * n * n, 0.0);
    for (int hd = 0; hd < H; hd++)
        for (int t = 0; t < n; t++) {
            std::vector<double> sc(n);
            double mx = -1e300, sum = 0;
            for (int j = 0; j < n; j++) {
                double dot = 0;
                for (int e = 0; e < dh; e++) dot += q[(size_t)t * d + hd * dh + e] * k[(size_t)j * d + hd * dh + e];
                sc[j] = dot / std::sqrt((double)dh);
                mx = std::max(mx, sc[j]);
            }
            for (int j = 0; j < n; j++) sum += (sc[j] = std::exp(sc[j] - mx));
            for (int j = 0; j < n; j++) pattern[((size_t)hd * n + t) * n + j] = sc[j] / sum;
        }
    return pattern;
}

std::vector<double> ref_pattern_values(const std::vector<double>& pattern, const std::vector<double>& v, int n, int H,
                                       int dh, int l, const gb::ablation& ab) {
    const int d = H * dh;
    std::vector<double> z((size_t)n * d, 0.0);
    for (int hd = 0; hd < H; hd++) {
        if (std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{l, hd}) != ab.heads.end()) continue;
        for (int t = 0; t < n; t++)
            for (int j = 0; j < n; j++)
                for (int e = 0; e < dh; e++)
                    z[(size_t)t * d + hd * dh + e] += pattern[((size_t)hd * n + t) * n + j] * v[(size_t)j * d + hd * dh + e];
    }
    return z;
}

double ref_readout::inv_sigma(const double* x) const {
    double mean = 0, var = 0;
    if (layernorm) {
        for (int i = 0; i < d; i++) mean += x[i];
        mean /= d;
    }
    for (int i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
    return 1.0 / std::sqrt(var / d + eps);
}

std::vector<double> ref_readout::logits(const double* x, bool identity) const {
    std::vector<double> xn(x, x + d);
    if (!identity) {
        double mean = 0;
        if (layernorm) {
            for (int i = 0; i < d; i++) mean += x[i];
            mean /= d;
        }
        const double s = inv_sigma(x);
        for (int i = 0; i < d; i++) xn[i] = (x[i] - mean) * s * g[i] + (b.empty() ? 0.0 : b[i]);
    }
    std::vector<double> out(V, 0.0);
    for (int v = 0; v < V; v++)
        for (int i = 0; i < d; i++) out[v] += xn[i] * unembed[(size_t)v * d + i];
    return out;
}
