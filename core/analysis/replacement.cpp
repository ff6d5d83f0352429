// The frozen replacement model and the backward of reads through it (replacement.h).
#include "analysis/replacement.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>

#include "kernels/gemm.h"
#include "run/forward.h"
#include "run/record.h"
#include "util/error.h"

namespace gb {

namespace {

// 1/std (LayerNorm) or 1/rms (RMSNorm) of each row of x [T][d], in double, as the model's norm divides.
void norm_scales(float* s, const float* x, int T, int d, bool layernorm, float eps) {
    for (int t = 0; t < T; t++) {
        const float* r = x + (size_t)t * d;
        double mean = 0;
        if (layernorm) {
            for (int i = 0; i < d; i++) mean += r[i];
            mean /= d;
        }
        double v = 0;
        for (int i = 0; i < d; i++) v += (r[i] - mean) * (r[i] - mean);
        s[t] = (float)(1.0 / std::sqrt(v / d + eps));
    }
}

void check_family(const model& m, const transcoder_set& t) {
    const model_config& c = m.config;
    const arch_info& a = arch_table(c.arch);
    if (a.bidirectional || a.cross || a.post_ln || a.mlm_head || a.no_head || c.patch_size > 0)
        throw error(std::string("attribution graphs need a causal decoder; ") + a.name + " is not one");
    if (a.post_norm && (c.parallel || a.kind == KIND_MOE))
        throw error(std::string("attribution graphs: ") + a.name + ": post-norms on parallel blocks or MoE layers are "
                    "not handled");
    if (t.n_layer != c.n_layer)
        throw error("transcoders " + t.path + ": " + std::to_string(t.n_layer) + " layers, the model has " +
                    std::to_string(c.n_layer));
    if (t.d_model != c.d_model)
        throw error("transcoders " + t.path + ": d_model " + std::to_string(t.d_model) + ", the model's is " +
                    std::to_string(c.d_model));
    if (!t.input_normed && c.parallel)
        throw error("transcoders " + t.path + " read resid_mid, which no MLP of a parallel-block model reads");
}

} // namespace

// The frozen scale of attention l's post-norm into r.s_post_attn, from its output before the norm (the model's own
// product of the kept z).
static void attn_post_scale(replacement& r, const record& rec, const model& m, int l) {
    const int T = r.n_tokens, d = r.d_model;
    const float* z = rec.get(HOOK_Z, l);
    if (!z) throw error("attribution graphs: the model's run did not keep layer " + std::to_string(l));
    const layer_weights& lw = m.weights.layers[l];
    gemm_scratch gs;
    std::vector<float> attn((size_t)T * d);
    gemm(attn.data(), z, lw.w_o, lw.b_o, T, gs);
    norm_scales(r.s_post_attn.data() + (size_t)l * T, attn.data(), T, d, r.layernorm, m.config.norm_eps);
}

// mlp_out [L][T][d]: each layer's MLP output as the transcoders replace it; with post-norms the output before its
// norm (the model's own products of the kept inputs) unless the set writes after it, and the post-norms' frozen
// scales into r.
static void mlp_outputs(std::vector<float>& mlp_out, replacement& r, const record& rec, const model& m) {
    const model_config& c = m.config;
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model;
    for (int l = 0; l < L; l++) {
        if (!r.mlp_post_norm()) { // the MLP's output as the model adds it
            if (r.post_norm) attn_post_scale(r, rec, m, l);
            if (!rec.has(HOOK_MLP_OUT, l)) throw error("attribution graphs: the model's run did not keep layer " + std::to_string(l));
            std::copy_n(rec.get(HOOK_MLP_OUT, l), (size_t)T * d, mlp_out.begin() + (size_t)l * T * d);
            continue;
        }
        attn_post_scale(r, rec, m, l);
        const float* h = rec.get(HOOK_MLP_POST, l);
        if (!h) throw error("attribution graphs: the model's run did not keep layer " + std::to_string(l));
        const layer_weights& lw = m.weights.layers[l];
        gemm_scratch gs;
        gemm(mlp_out.data() + (size_t)l * T * d, h, lw.w_down, lw.b_down, T, gs);
        norm_scales(r.s_post_mlp.data() + (size_t)l * T, mlp_out.data() + (size_t)l * T * d, T, d, r.layernorm, c.norm_eps);
    }
}

// The active features (in order of layer, position, index), the reconstruction (b_dec, the skip, every feature's
// write into each layer it reaches) and the errors: the true MLP output (mlp_out) minus that reconstruction.
static void features_and_errors(replacement& r, const transcoder_set& t, const std::vector<float>& mlp_out) {
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model;
    std::vector<float> acts;
    for (int l = 0; l < L; l++) {
        const float* x = r.mlp_input.data() + (size_t)l * T * d;
        transcoder_encode(acts, t, l, x, T);
        for (int p = r.first_pos; p < T; p++)
            for (int f = 0; f < t.d_tc; f++) {
                const float a = acts[(size_t)p * t.d_tc + f];
                if (a != 0) r.active.push_back({l, p, f, a});
            }
        for (int p = 0; p < T; p++) {
            float* out = r.recon.data() + ((size_t)l * T + p) * d;
            for (int i = 0; i < d; i++) out[i] += t.layers[l].b_dec[i];
            if (!t.layers[l].skip.empty())
                for (int i = 0; i < d; i++) {
                    const float xi = x[(size_t)p * d + i];
                    const float* srow = t.layers[l].skip.data() + (size_t)i * d;
                    for (int o = 0; o < d; o++) out[o] += xi * srow[o];
                }
        }
    }
    for (const active_feature& a : r.active)
        for (int k = a.layer; k < a.layer + t.n_out(a.layer); k++) {
            const float* dec = t.dec(a.layer, a.index, k);
            float* out = r.recon.data() + ((size_t)k * T + a.pos) * d;
            for (int i = 0; i < d; i++) out[i] += a.act * dec[i];
        }
    for (int l = 0; l < L; l++) {
        const float* mo = mlp_out.data() + (size_t)l * T * d;
        for (size_t i = 0; i < (size_t)T * d; i++) r.error[(size_t)l * T * d + i] = mo[i] - r.recon[(size_t)l * T * d + i];
    }

}

replacement build_replacement(const model& m, const transcoder_set& t, const std::vector<int>& tokens, bool bos) {
    check_family(m, t);
    const model_config& c = m.config;
    const int L = c.n_layer, T = (int)tokens.size(), d = c.d_model, H = c.n_head, KV = c.n_kv_head, dh = c.d_head;
    if (T < (bos ? 2 : 1)) throw error("attribution graphs need a prompt of at least one token (after the BOS)");
    replacement r;
    r.n_layer = L, r.n_tokens = T, r.d_model = d, r.n_head = H, r.n_kv_head = KV, r.d_head = dh, r.d_tc = t.d_tc;
    r.parallel = c.parallel;
    r.layernorm = arch_table(c.arch).norm == NORM_LAYERNORM;
    r.pre_norm = arch_table(c.arch).pre_norm;
    r.post_norm = arch_table(c.arch).post_norm;
    r.input_normed = t.input_normed;
    r.output_normed = r.post_norm && t.output_normed;
    r.first_pos = bos ? 1 : 0;
    r.tokens = tokens;

    forward_options opt;
    opt.keep.resid_stream = true;
    opt.keep.points = hook_bit(HOOK_PATTERN) | hook_bit(HOOK_MLP_IN) | hook_bit(HOOK_MLP_OUT) | hook_bit(HOOK_RESID_PRE) |
                      hook_bit(HOOK_RESID_MID) | hook_bit(HOOK_RESID_POST);
    if (r.post_norm) opt.keep.points |= hook_bit(HOOK_Z) | hook_bit(HOOK_MLP_POST); // the sublayers' outputs before
                                                                                    // their post-norms
    record rec;
    run_forward(rec, m, tokens, {}, opt);
    if (rec.nonfinite_layer >= 0) throw error("the model's run holds NaN or Inf at " + rec.nonfinite_where);
    r.logits.assign(rec.logits.end() - rec.vocab, rec.logits.end());

    r.s_attn.resize((size_t)L * T), r.s_mlp.resize((size_t)L * T), r.s_final.resize(T);
    r.pattern.resize((size_t)L * H * T * T);
    r.w_vT.resize(L), r.w_oT.resize(L), r.skip_t.resize(L);
    r.mlp_input.resize((size_t)L * T * d), r.error.resize((size_t)L * T * d), r.recon.assign((size_t)L * T * d, 0.0f);
    // post_norm: each sublayer's output before its norm (the model's own products), and that norm's frozen scale
    std::vector<float> mlp_out((size_t)L * T * d);
    if (r.post_norm) r.s_post_attn.resize((size_t)L * T), r.s_post_mlp.resize((size_t)L * T);
    mlp_outputs(mlp_out, r, rec, m);
    for (int l = 0; l < L; l++) {
        const float* pre = rec.resid(2 * l);
        const float* mid = rec.resid(2 * l + 1);
        const float* in = rec.get(HOOK_MLP_IN, l);
        if (!pre || !mid || !in || !rec.has_layer(l))
            throw error("attribution graphs: the model's run did not keep layer " + std::to_string(l));
        norm_scales(r.s_attn.data() + (size_t)l * T, pre, T, d, r.layernorm, c.norm_eps);
        norm_scales(r.s_mlp.data() + (size_t)l * T, c.parallel ? pre : mid, T, d, r.layernorm, c.norm_eps);
        for (int h = 0; h < H; h++)
            std::copy_n(rec.head(l, h), (size_t)T * T, r.pattern.begin() + ((size_t)l * H + h) * T * T);
        const layer_weights& lw = m.weights.layers[l];
        const std::vector<float> qkv = unpack_matrix(lw.w_qkv);
        const int cols = (H + 2 * KV) * dh;
        std::vector<float> vt((size_t)KV * dh * d); // [KV*dh][d]
        for (int i = 0; i < d; i++)
            for (int j = 0; j < KV * dh; j++) vt[(size_t)j * d + i] = qkv[(size_t)i * cols + (size_t)(H + KV) * dh + j];
        r.w_vT[l] = pack_matrix(vt, KV * dh, d, true);
        const std::vector<float> wo = unpack_matrix(lw.w_o); // [H*dh][d]
        std::vector<float> ot((size_t)d * H * dh);
        for (int i = 0; i < H * dh; i++)
            for (int j = 0; j < d; j++) ot[(size_t)j * H * dh + i] = wo[(size_t)i * d + j];
        r.w_oT[l] = pack_matrix(ot, d, H * dh, true);
        if (!t.layers[l].skip.empty()) {
            const std::vector<float>& sk = t.layers[l].skip; // [in][out]
            std::vector<float> st((size_t)d * d);
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) st[(size_t)j * d + i] = sk[(size_t)i * d + j];
            r.skip_t[l] = pack_matrix(st, d, d, true);
        }
        std::copy_n(t.input_normed ? in : mid, (size_t)T * d, r.mlp_input.begin() + (size_t)l * T * d);
    }
    norm_scales(r.s_final.data(), rec.resid(2 * L), T, d, r.layernorm, c.norm_eps);

    features_and_errors(r, t, mlp_out);

    r.tok_write.resize((size_t)T * d);
    const float scale = arch_table(c.arch).embed_scale || c.scale_embedding ? std::sqrt((float)d) : 1.0f;
    for (int p = 0; p < T; p++) {
        table_row(r.tok_write.data() + (size_t)p * d, m.weights.tok_emb, tokens[p]);
        for (int i = 0; i < d; i++) r.tok_write[(size_t)p * d + i] *= scale;
    }
    const row_table& U = m.weights.unembedding();
    r.unembed_mean.assign(d, 0.0);
    std::vector<float> row(d);
    for (int64_t v = 0; v < U.rows; v++) {
        table_row(row.data(), U, v);
        for (int i = 0; i < d; i++) r.unembed_mean[i] += row[i];
    }
    for (double& x : r.unembed_mean) x /= (double)U.rows;
    return r;
}

source_writes gather_writes(const model& m, const replacement& r, const transcoder_set& t,
                            const std::vector<int>& feature_src, const std::vector<int>& error_src,
                            const std::vector<int>& token_src, int n_src) {
    (void)m;
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model;
    source_writes w;
    w.n_src = n_src;
    std::vector<std::vector<std::vector<float>>> cols((size_t)L * T); // per (k, pos): columns [d]
    w.mlp_ids.assign((size_t)L * T, {});
    for (size_t j = 0; j < r.active.size(); j++) {
        const active_feature& a = r.active[j];
        if (feature_src[j] < 0) continue;
        for (int k = a.layer; k < a.layer + t.n_out(a.layer); k++) {
            const float* dec = t.dec(a.layer, a.index, k);
            std::vector<float> col(d);
            for (int i = 0; i < d; i++) col[i] = a.act * dec[i];
            cols[(size_t)k * T + a.pos].push_back(std::move(col));
            w.mlp_ids[(size_t)k * T + a.pos].push_back(feature_src[j]);
        }
    }
    for (int k = 0; k < L; k++)
        for (int p = 0; p < T; p++)
            if (error_src[(size_t)k * T + p] >= 0) {
                const float* e = r.error.data() + ((size_t)k * T + p) * d;
                cols[(size_t)k * T + p].emplace_back(e, e + d);
                w.mlp_ids[(size_t)k * T + p].push_back(error_src[(size_t)k * T + p]);
            }
    auto pack = [d](const std::vector<std::vector<float>>& cs) {
        std::vector<float> mat((size_t)d * cs.size());
        for (size_t c = 0; c < cs.size(); c++)
            for (int i = 0; i < d; i++) mat[(size_t)i * cs.size() + c] = cs[c][i];
        return pack_matrix(mat, d, (int64_t)cs.size(), true);
    };
    w.mlp.resize((size_t)L * T);
    for (size_t i = 0; i < cols.size(); i++)
        if (!cols[i].empty()) w.mlp[i] = pack(cols[i]);
    w.embed.resize(T), w.embed_ids.assign(T, {});
    for (int p = 0; p < T; p++)
        if (token_src[p] >= 0) {
            const float* e = r.tok_write.data() + (size_t)p * d;
            w.embed[p] = pack({std::vector<float>(e, e + d)});
            w.embed_ids[p].push_back(token_src[p]);
        }
    return w;
}

namespace {

// y [B*T][d] in place: the frozen norm's transpose at each row's position (row % T): y <- s (g y - mean(g y))
// for LayerNorm, s g y for RMSNorm.
void norm_back(float* y, int rows, int T, int d, const float* gain, const float* s, bool layernorm) {
    for (int r = 0; r < rows; r++) {
        float* v = y + (size_t)r * d;
        const float sc = s[r % T];
        double mean = 0;
        for (int i = 0; i < d; i++) {
            v[i] *= gain[i];
            mean += v[i];
        }
        mean = layernorm ? mean / d : 0.0;
        for (int i = 0; i < d; i++) v[i] = (float)((v[i] - mean) * sc);
    }
}

struct backward_scratch {
    std::vector<float> dz, dv, tmp, post;
    gemm_scratch gs;
};

// G [B*Tb][d] through a sublayer's frozen post-norm (gain, scales [T] of that layer), transposed, into s.post;
// without post-norms G itself.
const float* post_back(const float* G, int rows, int Tb, const replacement& r, const std::vector<float>& gain,
                       const std::vector<float>& scales, int l, backward_scratch& s) {
    if (!r.post_norm) return G;
    const int d = r.d_model;
    s.post.assign(G, G + (size_t)rows * d);
    norm_back(s.post.data(), rows, Tb, d, gain.data(), scales.data() + (size_t)l * r.n_tokens, r.layernorm);
    return s.post.data();
}

// out [B][T][d] += attention l's transpose (frozen) applied to G [B][T][d].
// only_head >= 0: that head's part alone.
void attn_back(float* out, const float* G, int B, int Tb, const model& m, const replacement& r, int l, backward_scratch& s,
               int only_head = -1) {
    const int T = r.n_tokens, d = r.d_model, H = r.n_head, KV = r.n_kv_head, dh = r.d_head, group = H / KV;
    const layer_weights& lw = m.weights.layers[l];
    G = post_back(G, B * Tb, Tb, r, lw.post_attn_norm, r.s_post_attn, l, s);
    s.dz.resize((size_t)B * Tb * H * dh);
    gemm(s.dz.data(), G, r.w_oT[l], {}, B * Tb, s.gs);
    s.dv.assign((size_t)B * Tb * KV * dh, 0.0f);
#pragma omp parallel for schedule(static) if (B > 1)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            if (only_head >= 0 && h != only_head) continue;
            const float* P = r.pattern.data() + ((size_t)l * H + h) * T * T;
            const int kv = h / group;
            for (int i = 0; i < Tb; i++) {
                const float* dzi = s.dz.data() + ((size_t)b * Tb + i) * H * dh + (size_t)h * dh;
                for (int j = 0; j <= i; j++) {
                    const float p = P[(size_t)i * T + j];
                    if (p == 0) continue;
                    float* dvj = s.dv.data() + ((size_t)b * Tb + j) * KV * dh + (size_t)kv * dh;
                    for (int e = 0; e < dh; e++) dvj[e] += p * dzi[e];
                }
            }
        }
    s.tmp.resize((size_t)B * Tb * d);
    gemm(s.tmp.data(), s.dv.data(), r.w_vT[l], {}, B * Tb, s.gs);
    if (r.pre_norm)
        norm_back(s.tmp.data(), B * Tb, Tb, d, lw.norm1_g.data(), r.s_attn.data() + (size_t)l * T, r.layernorm);
    for (size_t i = 0; i < (size_t)B * Tb * d; i++) out[i] += s.tmp[i];
}

// out += the skip of layer l's transpose applied to G (nothing without a skip); G: at the MLP's output (before a
// post-norm).
void skip_back(float* out, const float* G, int B, int Tb, const model& m, const replacement& r, int l, backward_scratch& s) {
    if (r.skip_t[l].empty()) return;
    const int T = r.n_tokens, d = r.d_model;
    s.tmp.resize((size_t)B * Tb * d);
    gemm(s.tmp.data(), G, r.skip_t[l], {}, B * Tb, s.gs);
    if (r.input_normed && r.pre_norm)
        norm_back(s.tmp.data(), B * Tb, Tb, d, m.weights.layers[l].norm2_g.data(), r.s_mlp.data() + (size_t)l * T, r.layernorm);
    for (size_t i = 0; i < (size_t)B * Tb * d; i++) out[i] += s.tmp[i];
}

// rows[b][id] += the dot of G[b][pos] with each write entering at pos (mat: the writes as columns).
void take_edges(float* rows, int n_src, const float* G, int B, int T, int d, int pos, const weight_matrix& mat,
                const std::vector<int>& ids, backward_scratch& s) {
    if (ids.empty()) return;
    std::vector<float> x((size_t)B * d), y((size_t)B * ids.size());
    for (int b = 0; b < B; b++) std::copy_n(G + ((size_t)b * T + pos) * d, d, x.begin() + (size_t)b * d);
    gemm(y.data(), x.data(), mat, {}, B, s.gs);
    for (int b = 0; b < B; b++)
        for (size_t c = 0; c < ids.size(); c++) rows[(size_t)b * n_src + ids[c]] += y[(size_t)b * ids.size() + c];
}

// The step down through layer k's MLP and attention of the gradients G [B][Tb][d] at resid_post(k), the writes into
// MLP output k taken on the way into rows; G ends at resid_pre(k). split(G at resid_mid, or after a parallel block's
// attention): called where head loadings split the edge (may be empty).
template <class F>
void layer_back(std::vector<float>& G, float* rows, int n_src, int B, int Tb, const model& m, const replacement& r,
                const source_writes& w, int k, backward_scratch& s, F&& split) {
    const int T = r.n_tokens, d = r.d_model;
    const layer_weights& lw = m.weights.layers[k];
    // at the MLP's output: through its post-norm where there is one (and the writes come before it)
    std::vector<float> Gm(G.begin(), G.end());
    if (r.mlp_post_norm()) {
        const float* p = post_back(G.data(), B * Tb, Tb, r, lw.post_mlp_norm, r.s_post_mlp, k, s);
        std::copy_n(p, Gm.size(), Gm.begin());
    }
    for (int p = 0; p < Tb; p++)
        take_edges(rows, n_src, Gm.data(), B, Tb, d, p, w.mlp[(size_t)k * T + p], w.mlp_ids[(size_t)k * T + p], s);
    std::vector<float> G2 = G;
    if (r.parallel) {
        split(G2);
        attn_back(G.data(), G2.data(), B, Tb, m, r, k, s);
        skip_back(G.data(), Gm.data(), B, Tb, m, r, k, s);
    } else {
        skip_back(G.data(), Gm.data(), B, Tb, m, r, k, s); // G: at resid_mid(k)
        split(G);
        G2 = G;
        attn_back(G.data(), G2.data(), B, Tb, m, r, k, s);
    }
}

// One batch of reads, all at the same layer l (n_layer: logits).
void batch_rows(float* rows, const model& m, const replacement& r, const source_writes& w, const graph_read* reads,
                int B, int l, backward_scratch& s, const std::function<bool()>& cancelled) {
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model;
    int Tb = 1; // positions the batch reaches: none after its last read (causal)
    for (int b = 0; b < B; b++) Tb = std::max(Tb, reads[b].pos + 1);
    std::vector<float> G((size_t)B * Tb * d, 0.0f), G2;
    for (int b = 0; b < B; b++) {
        float* g = G.data() + ((size_t)b * Tb + reads[b].pos) * d;
        std::copy_n(reads[b].vec, d, g);
        if (l == L) norm_back(g, 1, 1, d, m.weights.normf_g.data(), r.s_final.data() + reads[b].pos, r.layernorm);
        else if (r.input_normed && r.pre_norm)
            norm_back(g, 1, 1, d, m.weights.layers[l].norm2_g.data(), r.s_mlp.data() + (size_t)l * T + reads[b].pos,
                      r.layernorm);
    }
    if (l < L && !r.parallel) { // from resid_mid(l) to resid_pre(l) = resid_post(l - 1)
        G2 = G;
        attn_back(G.data(), G2.data(), B, Tb, m, r, l, s);
    }
    for (int k = l - 1; k >= 0; k--) { // G: at resid_post(k), where MLP k's writes enter
        if (cancelled && cancelled()) throw gb::cancelled();
        layer_back(G, rows, w.n_src, B, Tb, m, r, w, k, s, [](const std::vector<float>&) {});
    }
    for (int p = 0; p < Tb; p++) take_edges(rows, w.n_src, G.data(), B, Tb, d, p, w.embed[p], w.embed_ids[p], s);
}

} // namespace

void read_rows(float* rows, const model& m, const replacement& r, const source_writes& w,
               const std::vector<graph_read>& reads, int max_batch, const std::function<bool()>& cancelled) {
    std::vector<int> order(reads.size());
    for (size_t i = 0; i < reads.size(); i++) order[i] = (int)i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return reads[a].layer < reads[b].layer || (reads[a].layer == reads[b].layer && reads[a].pos < reads[b].pos);
    });
    // the batches: one layer, and positions close enough that the rows after each read's own position (zero, but
    // sent back with the batch's) stay within an eighth of the batch's
    struct job {
        size_t first = 0, end = 0; // order[first, end)
        double cost = 0;           // reads x positions reached x layers gone through
    };
    std::vector<job> jobs;
    for (size_t i = 0; i < order.size();) {
        const graph_read& first = reads[order[i]];
        size_t j = i;
        while (j < order.size() && reads[order[j]].layer == first.layer && (int)(j - i) < max_batch &&
               (reads[order[j]].pos - first.pos) * 8 <= reads[order[j]].pos + 1)
            j++;
        jobs.push_back({i, j, (double)(j - i) * (reads[order[j - 1]].pos + 1) * (first.layer + 1)});
        i = j;
    }
    // Two or more batches run side by side, one a thread, each product inside on its own thread: the backward's
    // copies, norms and small products between the large ones then overlap too (GPT-2-small shape on 2 cores: 1.56
    // cores busy with the threads inside the products, 1.71 side by side; the rows are the same bits). The largest
    // go first, so that the last to finish is a small one.
    std::stable_sort(jobs.begin(), jobs.end(), [](const job& a, const job& b) { return a.cost > b.cost; });
    auto run_job = [&](const job& jb, backward_scratch& s, std::vector<graph_read>& batch, std::vector<float>& out) {
        batch.clear();
        for (size_t k = jb.first; k < jb.end; k++) batch.push_back(reads[order[k]]);
        if (cancelled && cancelled()) throw gb::cancelled();
        out.assign(batch.size() * (size_t)w.n_src, 0.0f);
        batch_rows(out.data(), m, r, w, batch.data(), (int)batch.size(), batch[0].layer, s, cancelled);
        for (size_t b = 0; b < batch.size(); b++) { // each read its own row: no two batches write the same
            float* dst = rows + (size_t)order[jb.first + b] * w.n_src;
            const float* src = out.data() + b * w.n_src;
            for (int c = 0; c < w.n_src; c++) dst[c] += src[c];
        }
    };
    const int threads = std::min<int>(omp_get_max_threads(), (int)jobs.size());
    if (threads <= 1 || omp_in_parallel()) {
        backward_scratch s;
        std::vector<graph_read> batch;
        std::vector<float> out;
        for (const job& jb : jobs) run_job(jb, s, batch, out);
        return;
    }
    std::exception_ptr failed;
    std::atomic<bool> stop{false};
#pragma omp parallel num_threads(threads)
    {
        backward_scratch s;
        std::vector<graph_read> batch;
        std::vector<float> out;
#pragma omp for schedule(dynamic, 1)
        for (size_t k = 0; k < jobs.size(); k++) {
            if (stop) continue;
            try {
                run_job(jobs[k], s, batch, out);
            } catch (...) { // the first failure (or Cancel) is rethrown once every thread is out
#pragma omp critical(gb_read_rows_failed)
                if (!failed) failed = std::current_exception();
                stop = true;
            }
        }
    }
    if (failed) std::rethrow_exception(failed);
}

namespace {

// The edge to source src of one read whose gradient G [Tb][d] stands at resid_post(k0) (k0 = -1: the embeddings):
// the rest of the backward, as batch_rows goes on from there.
double edge_from(std::vector<float> G, int k0, int Tb, const model& m, const replacement& r, const source_writes& w,
                 int src, backward_scratch& s) {
    const int d = r.d_model;
    std::vector<float> row(w.n_src, 0.0f);
    for (int k = k0; k >= 0; k--) layer_back(G, row.data(), w.n_src, 1, Tb, m, r, w, k, s, [](const std::vector<float>&) {});
    for (int p = 0; p < Tb; p++) take_edges(row.data(), w.n_src, G.data(), 1, Tb, d, p, w.embed[p], w.embed_ids[p], s);
    return row[src];
}

} // namespace

std::vector<double> head_loadings(const model& m, const replacement& r, const source_writes& w, const graph_read& read,
                                  int src) {
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model, H = r.n_head, l0 = read.layer, Tb = read.pos + 1;
    std::vector<double> out((size_t)L * (H + 1), 0.0);
    backward_scratch s;
    std::vector<float> G((size_t)Tb * d, 0.0f), G2, part;
    float* g = G.data() + (size_t)read.pos * d;
    std::copy_n(read.vec, d, g);
    if (l0 == L) norm_back(g, 1, 1, d, m.weights.normf_g.data(), r.s_final.data() + read.pos, r.layernorm);
    else if (r.input_normed && r.pre_norm)
        norm_back(g, 1, 1, d, m.weights.layers[l0].norm2_g.data(), r.s_mlp.data() + (size_t)l0 * T + read.pos, r.layernorm);
    // above: the edge through the writes entering after the attention layer being split (a cross-layer feature
    // writes into several layers), which bypass it
    std::vector<float> above(w.n_src, 0.0f);
    // Gs stands after attention l (resid_mid, or resid_post of a parallel block, which has no post-norm): each
    // head's part and the rest, each sent on down to the source
    auto split = [&](int l, const std::vector<float>& Gs) {
        part = Gs;
        if (r.parallel) skip_back(part.data(), Gs.data(), 1, Tb, m, r, l, s);
        out[(size_t)l * (H + 1) + H] = edge_from(part, l - 1, Tb, m, r, w, src, s) + above[src];
        for (int h = 0; h < H; h++) {
            part.assign(Gs.size(), 0.0f);
            attn_back(part.data(), Gs.data(), 1, Tb, m, r, l, s, h);
            out[(size_t)l * (H + 1) + h] = edge_from(part, l - 1, Tb, m, r, w, src, s);
        }
    };
    if (l0 < L && !r.parallel) {
        split(l0, G);
        G2 = G;
        attn_back(G.data(), G2.data(), 1, Tb, m, r, l0, s);
    }
    for (int k = l0 - 1; k >= 0; k--)
        layer_back(G, above.data(), w.n_src, 1, Tb, m, r, w, k, s, [&](const std::vector<float>& Gs) { split(k, Gs); });
    return out;
}

} // namespace gb
