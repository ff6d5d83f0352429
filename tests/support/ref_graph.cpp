// The double-precision reference of attribution graphs (ref_graph.h).
#include "ref_graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>

#include "kernels/gemm.h"
#include "run/forward.h"
#include "run/record.h"

using gb::active_feature;

gb::transcoder_set random_transcoders(const tc_spec& s) {
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.0f, 1.0f);
    gb::transcoder_set t;
    t.path = "random";
    t.cross_layer = s.cross;
    t.arch = s.arch;
    t.k = s.k;
    t.n_layer = s.n_layer, t.d_model = s.d_model, t.d_tc = s.d_tc;
    const int d = s.d_model, n = s.d_tc;
    const float enc = 1.0f / std::sqrt((float)d), dec = 0.5f / std::sqrt((float)d);
    t.layers.resize(s.n_layer);
    for (int l = 0; l < s.n_layer; l++) {
        gb::transcoder_layer& x = t.layers[l];
        const int n_out = s.cross ? s.n_layer - l : 1;
        x.W_enc.resize((size_t)n * d);
        for (float& v : x.W_enc) v = enc * nd(rng);
        x.b_enc.resize(n);
        for (float& v : x.b_enc) v = s.bias + 0.1f * nd(rng);
        if (s.arch == gb::SAE_JUMPRELU) {
            x.threshold.resize(n);
            for (float& v : x.threshold) v = 0.3f * ud(rng);
        }
        x.W_dec.resize((size_t)n * n_out * d);
        for (float& v : x.W_dec) v = dec * nd(rng);
        x.b_dec.resize(d);
        for (float& v : x.b_dec) v = 0.05f * nd(rng);
        if (s.skip) {
            x.skip.resize((size_t)d * d);
            for (float& v : x.skip) v = 0.3f / std::sqrt((float)d) * nd(rng);
        }
    }
    return t;
}

namespace {

struct frozen_model {
    int L, T, d, H, KV, dh, V;
    bool ln, parallel, normed, pre, post; // pre: norms before the sublayers; post: on their outputs (Gemma 2, OLMo 2)
    std::vector<double> s1, s2, sF;      // frozen scales
    std::vector<double> sPA, sPM;        // [L][T] post: the frozen scales of the attention's and the MLP's output
    std::vector<std::vector<double>> gPA, gPM; // [L][d] post: their gains
    std::vector<double> P;               // [L][H][T][T]
    std::vector<std::vector<double>> Wv, bv, Wo, bo, g1, b1, g2, b2;
    std::vector<double> gF, bF, pos;     // pos [T][d] (empty for RoPE)
    template <class X> double scale(const X* x, bool layernorm, double eps, int dd) const {
        double mu = 0, v = 0;
        if (layernorm) {
            for (int i = 0; i < dd; i++) mu += x[i];
            mu /= dd;
        }
        for (int i = 0; i < dd; i++) v += (x[i] - mu) * (x[i] - mu);
        return 1.0 / std::sqrt(v / dd + eps);
    }
    // y = g (x - mean) s + b (LayerNorm) or g x s (RMSNorm), the scale frozen
    std::vector<double> norm(const double* x, double s, const std::vector<double>& g, const std::vector<double>& b) const {
        double mu = 0;
        if (ln) {
            for (int i = 0; i < d; i++) mu += x[i];
            mu /= d;
        }
        std::vector<double> y(d);
        for (int i = 0; i < d; i++) y[i] = g[i] * (x[i] - mu) * s + (b.empty() ? 0.0 : b[i]);
        return y;
    }
};

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }


// Everything the reference reads of one run: the frozen quantities, the transcoders' input, activations and errors.
struct ref_ctx {
    const gb::model& m;
    const gb::transcoder_set& t;
    const gb::attribution_graph& g;
    const std::vector<int>& tokens;
    int fp = 0;
    frozen_model R;
    gb::record rec;
    std::vector<double> xin, acts, err, umean; // [L][T][d], [L][T][d_tc], [L][T][d], [d]
    std::vector<double> mlp_raw;               // [L][T][d] post-norm families: the MLP's output before its norm
    ref_ctx(const gb::model& m_, const gb::transcoder_set& t_, const gb::attribution_graph& g_, const std::vector<int>& tk)
        : m(m_), t(t_), g(g_), tokens(tk) {}
    const float* dec(int layer, int f, int target) const {
        const int n_out = t.cross_layer ? R.L - layer : 1;
        return t.layers[layer].W_dec.data() + ((size_t)f * n_out + (target - layer)) * R.d;
    }
    void skip(int l, const double* x, double* y) const {
        if (t.layers[l].skip.empty()) return;
        for (int i = 0; i < R.d; i++)
            for (int o = 0; o < R.d; o++) y[o] += x[i] * t.layers[l].skip[(size_t)i * R.d + o];
    }
    int node_of(int l, int p, int f) const { // the feature node (layer, pos, index), -1 when it is none
        for (int i = 0; i < g.n_features(); i++)
            if (g.features[i].layer == l && g.features[i].pos == p && g.features[i].index == f) return i;
        return -1;
    }
};

// The run, its frozen scales and patterns, and the weights in double.
void ref_frozen(ref_ctx& x) {
    const gb::model& m = x.m;
    const gb::model_config& c = m.config;
    frozen_model& R = x.R;
    R.L = c.n_layer, R.T = (int)x.tokens.size(), R.d = c.d_model, R.H = c.n_head, R.KV = c.n_kv_head, R.dh = c.d_head;
    R.V = c.vocab_size;
    R.ln = gb::arch_table(c.arch).norm == gb::NORM_LAYERNORM;
    R.parallel = c.parallel;
    R.normed = x.t.input_normed;
    R.pre = gb::arch_table(c.arch).pre_norm;
    R.post = gb::arch_table(c.arch).post_norm;
    const int L = R.L, T = R.T, d = R.d, H = R.H, KV = R.KV, dh = R.dh;
    gb::forward_options opt;
    opt.keep.resid_stream = true;
    opt.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_MLP_IN) | gb::hook_bit(gb::HOOK_MLP_OUT) |
                      gb::hook_bit(gb::HOOK_RESID_PRE) | gb::hook_bit(gb::HOOK_RESID_MID) | gb::hook_bit(gb::HOOK_RESID_POST) |
                      gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_POST);
    gb::run_forward(x.rec, m, x.tokens, {}, opt);
    const gb::record& rec = x.rec;
    R.s1.resize((size_t)L * T), R.s2.resize((size_t)L * T), R.sF.resize(T), R.P.resize((size_t)L * H * T * T);
    for (int l = 0; l < L; l++) {
        const gb::layer_weights& lw = m.weights.layers[l];
        for (int p = 0; p < T; p++) {
            R.s1[(size_t)l * T + p] = R.scale(rec.resid(2 * l) + (size_t)p * d, R.ln, c.norm_eps, d);
            R.s2[(size_t)l * T + p] = R.scale(rec.resid(c.parallel ? 2 * l : 2 * l + 1) + (size_t)p * d, R.ln, c.norm_eps, d);
        }
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T * T; i++) R.P[((size_t)l * H + h) * T * T + i] = rec.head(l, h)[i];
        const std::vector<float> qkv = gb::unpack_matrix(lw.w_qkv);
        const int cols = (H + 2 * KV) * dh;
        std::vector<double> wv((size_t)d * KV * dh), bv(KV * dh, 0.0);
        for (int i = 0; i < d; i++)
            for (int j = 0; j < KV * dh; j++) wv[(size_t)i * KV * dh + j] = qkv[(size_t)i * cols + (H + KV) * dh + j];
        if (!lw.b_qkv.empty())
            for (int j = 0; j < KV * dh; j++) bv[j] = lw.b_qkv[(H + KV) * dh + j];
        R.Wv.push_back(wv), R.bv.push_back(bv);
        R.Wo.push_back(to_double(gb::unpack_matrix(lw.w_o)));
        R.bo.push_back(lw.b_o.empty() ? std::vector<double>(d, 0.0) : to_double(lw.b_o));
        R.g1.push_back(to_double(lw.norm1_g)), R.b1.push_back(to_double(lw.norm1_b));
        R.g2.push_back(to_double(lw.norm2_g)), R.b2.push_back(to_double(lw.norm2_b));
        if (!R.post) continue;
        // the sublayers' outputs before their post-norms, in double from the run's z and MLP activations
        R.gPA.push_back(to_double(lw.post_attn_norm)), R.gPM.push_back(to_double(lw.post_mlp_norm));
        const std::vector<float> wo = gb::unpack_matrix(lw.w_o), wd = gb::unpack_matrix(lw.w_down);
        const int ff = c.d_ff;
        for (int p = 0; p < T; p++) {
            std::vector<double> a(d), o(d);
            const float* z = rec.get(gb::HOOK_Z, l) + (size_t)p * H * dh;
            const float* hm = rec.get(gb::HOOK_MLP_POST, l) + (size_t)p * ff;
            for (int j = 0; j < d; j++) {
                double sa = lw.b_o.empty() ? 0.0 : lw.b_o[j], sm = lw.b_down.empty() ? 0.0 : lw.b_down[j];
                for (int k = 0; k < H * dh; k++) sa += (double)z[k] * wo[(size_t)k * d + j];
                for (int k = 0; k < ff; k++) sm += (double)hm[k] * wd[(size_t)k * d + j];
                a[j] = sa, o[j] = sm;
            }
            R.sPA.push_back(R.scale(a.data(), R.ln, c.norm_eps, d));
            R.sPM.push_back(R.scale(o.data(), R.ln, c.norm_eps, d));
            x.mlp_raw.insert(x.mlp_raw.end(), o.begin(), o.end());
        }
    }
    for (int p = 0; p < T; p++) R.sF[p] = R.scale(rec.resid(2 * L) + (size_t)p * d, R.ln, c.norm_eps, d);
    R.gF = to_double(m.weights.normf_g), R.bF = to_double(m.weights.normf_b);
    if (!m.weights.pos_emb.empty())
        for (int p = 0; p < T; p++)
            for (int i = 0; i < d; i++) R.pos.push_back(m.weights.pos_emb[(size_t)(p + c.pos_offset) * d + i]);
    x.umean.assign(d, 0.0);
    std::vector<float> row(d);
    for (int v = 0; v < R.V; v++) {
        gb::table_row(row.data(), m.weights.unembedding(), v);
        for (int i = 0; i < d; i++) x.umean[i] += row[i];
    }
    for (double& u : x.umean) u /= R.V;
}

// The transcoders' input, every activation (double), and the errors; the active features into active.
void ref_transcode(ref_ctx& x, std::vector<active_feature>& active) {
    const gb::transcoder_set& t = x.t;
    const int L = x.R.L, T = x.R.T, d = x.R.d, fp = x.fp;
    x.xin.resize((size_t)L * T * d), x.acts.assign((size_t)L * T * t.d_tc, 0.0), x.err.resize((size_t)L * T * d);
    for (int l = 0; l < L; l++) {
        const float* src = t.input_normed ? x.rec.get(gb::HOOK_MLP_IN, l) : x.rec.resid(2 * l + 1);
        for (int i = 0; i < T * d; i++) x.xin[(size_t)l * T * d + i] = src[i];
        for (int p = fp; p < T; p++) {
            std::vector<double> pre(t.d_tc);
            for (int f = 0; f < t.d_tc; f++) {
                double s = t.layers[l].b_enc[f];
                for (int i = 0; i < d; i++) s += (double)t.layers[l].W_enc[(size_t)f * d + i] * x.xin[((size_t)l * T + p) * d + i];
                pre[f] = s;
            }
            std::vector<int> order(t.d_tc);
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pre[a] > pre[b]; });
            for (int r = 0; r < t.d_tc; r++) {
                const int f = order[r];
                double v = 0;
                if (t.arch == gb::SAE_RELU) v = std::max(pre[f], 0.0);
                if (t.arch == gb::SAE_TOPK) v = r < t.k ? std::max(pre[f], 0.0) : 0.0;
                if (t.arch == gb::SAE_JUMPRELU) v = pre[f] > t.layers[l].threshold[f] && pre[f] > 0 ? pre[f] : 0.0;
                x.acts[((size_t)l * T + p) * t.d_tc + f] = v;
                if (v != 0) active.push_back({l, p, f, (float)v});
            }
        }
    }
    std::sort(active.begin(), active.end(), [](const active_feature& a, const active_feature& b) {
        return std::tie(a.layer, a.pos, a.index) < std::tie(b.layer, b.pos, b.index);
    });
    for (int k = 0; k < L; k++)
        for (int p = 0; p < T; p++) {
            std::vector<double> rc(t.layers[k].b_dec.begin(), t.layers[k].b_dec.end());
            x.skip(k, x.xin.data() + ((size_t)k * T + p) * d, rc.data());
            for (int i = 0; i <= k; i++) {
                if (!t.cross_layer && i != k) continue;
                for (int f = 0; f < t.d_tc; f++) {
                    const double a = x.acts[((size_t)i * T + p) * t.d_tc + f];
                    if (a == 0) continue;
                    const float* w = x.dec(i, f, k);
                    for (int j = 0; j < d; j++) rc[j] += a * w[j];
                }
            }
            const float* mo = x.rec.get(gb::HOOK_MLP_OUT, k) + (size_t)p * d;
            for (int j = 0; j < d; j++)
                x.err[((size_t)k * T + p) * d + j] = (x.R.post && !x.t.output_normed ? x.mlp_raw[((size_t)k * T + p) * d + j] : mo[j]) - rc[j];
        }
}

// One layer's attention output [T][d] on the stream x, the pattern and the scales frozen.
std::vector<double> ref_attention(const frozen_model& R, int l, const std::vector<double>& x) {
    const int T = R.T, d = R.d, H = R.H, KV = R.KV, dh = R.dh;
    std::vector<double> v((size_t)T * KV * dh), attn((size_t)T * d);
    for (int p = 0; p < T; p++) {
        const std::vector<double> a = R.pre ? R.norm(x.data() + (size_t)p * d, R.s1[(size_t)l * T + p], R.g1[l], R.b1[l])
                                            : std::vector<double>(x.begin() + (size_t)p * d, x.begin() + (size_t)(p + 1) * d);
        for (int j = 0; j < KV * dh; j++) {
            double s = R.bv[l][j];
            for (int i = 0; i < d; i++) s += a[i] * R.Wv[l][(size_t)i * KV * dh + j];
            v[(size_t)p * KV * dh + j] = s;
        }
    }
    for (int i = 0; i < T; i++) {
        std::vector<double> z((size_t)H * dh, 0.0);
        for (int h = 0; h < H; h++)
            for (int j = 0; j < T; j++) {
                const double pr = R.P[(((size_t)l * H + h) * T + i) * T + j];
                for (int e = 0; e < dh; e++) z[(size_t)h * dh + e] += pr * v[(size_t)j * KV * dh + (h / (H / KV)) * dh + e];
            }
        for (int o = 0; o < d; o++) {
            double s = R.bo[l][o];
            for (int k = 0; k < H * dh; k++) s += z[k] * R.Wo[l][(size_t)k * d + o];
            attn[(size_t)i * d + o] = s;
        }
        if (R.post) {
            const std::vector<double> y = R.norm(attn.data() + (size_t)i * d, R.sPA[(size_t)l * T + i], R.gPA[l], {});
            std::copy(y.begin(), y.end(), attn.begin() + (size_t)i * d);
        }
    }
    return attn;
}

// The replacement model forward, affine, leaving out node skip_node's write (-1: none): every target's read [N].
std::vector<double> ref_forward(const ref_ctx& c, int skip_node) {
    const frozen_model& R = c.R;
    const gb::transcoder_set& t = c.t;
    const gb::attribution_graph& g = c.g;
    const int L = R.L, T = R.T, d = R.d, N = g.n_nodes(), nf = g.n_features();
    const gb::model_config& mc = c.m.config;
    const double emb_scale = gb::arch_table(mc.arch).embed_scale || mc.scale_embedding ? std::sqrt((double)d) : 1.0;
    std::vector<double> reads(N, 0.0), x((size_t)T * d, 0.0);
    std::vector<float> row(d);
    for (int p = 0; p < T; p++) {
        gb::table_row(row.data(), c.m.weights.tok_emb, c.tokens[p]);
        if (g.token_index(p) != skip_node)
            for (int i = 0; i < d; i++) x[(size_t)p * d + i] += row[i] * emb_scale;
        if (!R.pos.empty())
            for (int i = 0; i < d; i++) x[(size_t)p * d + i] += R.pos[(size_t)p * d + i];
    }
    for (int l = 0; l < L; l++) {
        const std::vector<double> attn = ref_attention(R, l, x);
        std::vector<double> mid = x;
        for (size_t i = 0; i < mid.size(); i++) mid[i] += attn[i];
        const std::vector<double>& base = R.parallel ? x : mid;
        for (int p = 0; p < T; p++) {
            std::vector<double> in(base.begin() + (size_t)p * d, base.begin() + (size_t)(p + 1) * d);
            if (R.normed && R.pre) in = R.norm(in.data(), R.s2[(size_t)l * T + p], R.g2[l], R.b2[l]);
            for (int i = 0; i < nf; i++) { // the feature nodes of layer l read here
                const active_feature& f = g.features[i];
                if (f.layer != l || f.pos != p) continue;
                double s = t.layers[l].b_enc[f.index];
                for (int j = 0; j < d; j++) s += t.layers[l].W_enc[(size_t)f.index * d + j] * in[j];
                reads[i] = s;
            }
            std::vector<double> mlp(t.layers[l].b_dec.begin(), t.layers[l].b_dec.end());
            c.skip(l, in.data(), mlp.data());
            for (int i = 0; i <= l; i++) {
                if (!t.cross_layer && i != l) continue;
                for (int f = 0; f < t.d_tc; f++) {
                    const double a = c.acts[((size_t)i * T + p) * t.d_tc + f];
                    if (a == 0 || (skip_node >= 0 && c.node_of(i, p, f) == skip_node)) continue;
                    const float* w = c.dec(i, f, l);
                    for (int j = 0; j < d; j++) mlp[j] += a * w[j];
                }
            }
            if (p < c.fp || g.error_index(l, p) != skip_node)
                for (int j = 0; j < d; j++) mlp[j] += c.err[((size_t)l * T + p) * d + j];
            if (R.post && !t.output_normed) // a set that writes after the post-norm replaces it too
                mlp = R.norm(mlp.data(), R.sPM[(size_t)l * T + p], R.gPM[l], {});
            for (int j = 0; j < d; j++) x[(size_t)p * d + j] = mid[(size_t)p * d + j] + mlp[j];
        }
    }
    const std::vector<double> fo = R.norm(x.data() + (size_t)(T - 1) * d, R.sF[T - 1], R.gF, R.bF);
    for (int k = 0; k < g.n_logits(); k++) {
        gb::table_row(row.data(), c.m.weights.unembedding(), g.logit_tokens[k]);
        double s = 0;
        for (int i = 0; i < d; i++) s += (row[i] - c.umean[i]) * fo[i];
        reads[g.logit_index(k)] = s;
    }
    return reads;
}

} // namespace

ref_graph reference_graph(const gb::model& m, const gb::transcoder_set& t, const std::vector<int>& tokens, bool bos,
                          const gb::attribution_graph& g) {
    ref_ctx c(m, t, g, tokens);
    c.fp = bos ? 1 : 0;
    ref_frozen(c);
    ref_graph out;
    ref_transcode(c, out.active);
    const int N = g.n_nodes(), nf = g.n_features(), d = c.R.d, T = c.R.T;
    out.reads_all = ref_forward(c, -1);
    out.A.assign((size_t)N * N, 0.0);
    for (int s = 0; s < N - g.n_logits(); s++) {
        const std::vector<double> without = ref_forward(c, s);
        for (int r = 0; r < N; r++) out.A[(size_t)r * N + s] = out.reads_all[r] - without[r];
    }
    // the model's own reads
    out.true_reads.assign(N, 0.0);
    for (int i = 0; i < nf; i++) {
        const active_feature& f = g.features[i];
        double s = t.layers[f.layer].b_enc[f.index];
        for (int j = 0; j < d; j++)
            s += t.layers[f.layer].W_enc[(size_t)f.index * d + j] * c.xin[((size_t)f.layer * T + f.pos) * d + j];
        out.true_reads[i] = s;
    }
    double lmean = 0;
    for (float v : c.rec.logits) lmean += v;
    lmean /= (double)c.rec.logits.size();
    for (int k = 0; k < g.n_logits(); k++) out.true_reads[g.logit_index(k)] = c.rec.logits[g.logit_tokens[k]] - lmean;
    return out;
}

ref_prune reference_prune(const std::vector<float>& A, int nf, int ne, int nt, int nl, const std::vector<float>& probs,
                          double node_threshold, double edge_threshold) {
    const int N = nf + ne + nt + nl;
    auto normalized = [&](const std::vector<double>& M) {
        std::vector<double> out(M.size());
        for (int r = 0; r < N; r++) {
            double s = 0;
            for (int c = 0; c < N; c++) s += std::fabs(M[(size_t)r * N + c]);
            for (int c = 0; c < N; c++) out[(size_t)r * N + c] = std::fabs(M[(size_t)r * N + c]) / std::max(s, 1e-10);
        }
        return out;
    };
    // w Â (I - Â)^-1, the inverse by Gauss-Jordan with partial pivoting
    auto infl = [&](const std::vector<double>& Ah, const std::vector<double>& w) {
        std::vector<double> M((size_t)N * 2 * N, 0.0);
        for (int r = 0; r < N; r++) {
            for (int c = 0; c < N; c++) M[(size_t)r * 2 * N + c] = (r == c) - Ah[(size_t)r * N + c];
            M[(size_t)r * 2 * N + N + r] = 1;
        }
        for (int col = 0; col < N; col++) {
            int piv = col;
            for (int r = col + 1; r < N; r++)
                if (std::fabs(M[(size_t)r * 2 * N + col]) > std::fabs(M[(size_t)piv * 2 * N + col])) piv = r;
            for (int c = 0; c < 2 * N; c++) std::swap(M[(size_t)col * 2 * N + c], M[(size_t)piv * 2 * N + c]);
            const double dv = M[(size_t)col * 2 * N + col];
            for (int c = 0; c < 2 * N; c++) M[(size_t)col * 2 * N + c] /= dv;
            for (int r = 0; r < N; r++) {
                if (r == col) continue;
                const double f = M[(size_t)r * 2 * N + col];
                if (f == 0) continue;
                for (int c = 0; c < 2 * N; c++) M[(size_t)r * 2 * N + c] -= f * M[(size_t)col * 2 * N + c];
            }
        }
        std::vector<double> wa(N, 0.0), out(N, 0.0);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < N; c++) wa[c] += w[r] * Ah[(size_t)r * N + c];
        for (int r = 0; r < N; r++)
            for (int c = 0; c < N; c++) out[c] += wa[r] * M[(size_t)r * 2 * N + N + c];
        return out;
    };
    auto threshold = [](std::vector<double> s, double th) {
        std::sort(s.begin(), s.end(), std::greater<double>());
        double total = 0;
        for (double v : s) total += v;
        int nonzero = 0;
        for (double v : s) nonzero += v > 0;
        size_t idx = s.size();
        double cum = 0;
        for (size_t i = 0; i < s.size(); i++) {
            cum += s[i];
            if (cum / total >= th) {
                idx = i;
                break;
            }
        }
        idx = std::min(idx, (size_t)std::max(nonzero - 1, 0));
        return s[idx];
    };
    ref_prune r;
    std::vector<double> Ad(A.begin(), A.end()), w(N, 0.0);
    for (int i = 0; i < nl; i++) w[N - nl + i] = probs[i];
    const std::vector<double> Ah = normalized(Ad);
    r.influence = infl(Ah, w);
    // influences that are zero in exact arithmetic come back as rounding noise from the inverse
    for (double& v : r.influence)
        if (std::fabs(v) < 1e-13) v = 0;
    r.node_cutoff = threshold(r.influence, node_threshold);
    r.node_mask.assign(N, 0);
    for (int i = 0; i < N; i++) r.node_mask[i] = r.influence[i] >= r.node_cutoff || i >= N - nl - nt;
    std::vector<double> pr = Ad;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            if (!r.node_mask[a] || !r.node_mask[b]) pr[(size_t)a * N + b] = 0;
    const std::vector<double> ph = normalized(pr);
    std::vector<double> pi = infl(ph, w);
    for (int i = 0; i < N; i++) pi[i] = (std::fabs(pi[i]) < 1e-13 ? 0.0 : pi[i]) + w[i];
    std::vector<double> scores((size_t)N * N);
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) scores[(size_t)a * N + b] = ph[(size_t)a * N + b] * pi[a];
    r.edge_cutoff = threshold(scores, edge_threshold);
    r.edge_mask.assign((size_t)N * N, 0);
    for (size_t i = 0; i < scores.size(); i++) r.edge_mask[i] = scores[i] >= r.edge_cutoff;
    const int nfe = nf + ne;
    for (bool changed = true; changed;) {
        changed = false;
        for (int s = 0; s < nfe; s++) {
            if (!r.node_mask[s]) continue;
            bool out_edge = false;
            for (int a = 0; a < N; a++) out_edge |= r.edge_mask[(size_t)a * N + s] && r.node_mask[a];
            bool in_edge = s >= nf;
            for (int b = 0; b < N && !in_edge; b++) in_edge = r.edge_mask[(size_t)s * N + b] && r.node_mask[b];
            if (!out_edge || !in_edge) r.node_mask[s] = 0, changed = true;
        }
    }
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            if (!r.node_mask[a] || !r.node_mask[b]) r.edge_mask[(size_t)a * N + b] = 0;
    std::vector<int> order(N);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r.influence[a] > r.influence[b]; });
    double total = 0, cum = 0;
    for (double v : r.influence) total += v;
    r.cumulative.assign(N, 0.0);
    for (int i : order) r.cumulative[i] = (cum += r.influence[i]) / total;
    double tok = 0, err = 0, num = 0, den = 0;
    for (int i = nf; i < nfe; i++) err += r.influence[i];
    for (int i = nfe; i < nfe + nt; i++) tok += r.influence[i];
    r.replacement = tok / (tok + err);
    for (int a = 0; a < N; a++) {
        double e = 0;
        for (int b = nf; b < nfe; b++) e += Ah[(size_t)a * N + b];
        num += (1 - e) * (r.influence[a] + w[a]);
        den += r.influence[a] + w[a];
    }
    r.completeness = num / den;
    return r;
}
