// Direct logit attribution from the record's z, MLP outputs and residual stream.
#include "analysis/attribution.h"

#include <cmath>

#include "kernels/ops.h"
#include "util/error.h"

namespace gb {

double attribution::sum() const {
    double s = embed + bias;
    for (double v : heads) s += v;
    for (double v : attn_bias) s += v;
    for (double v : mlp) s += v;
    return s;
}

// A post-normed sublayer's parts (H head outputs [H][d] and the bias [d]) as they reach the stream: each times
// gain_i / rms(sum), the RMS of what the norm saw (their sum), so that the parts still add up to the norm's output.
static void post_norm_parts(float* heads, float* bias, const std::vector<float>& gain, int H, int d, float eps) {
    double ss = 0;
    for (int i = 0; i < d; i++) {
        double s = bias[i];
        for (int h = 0; h < H; h++) s += heads[(size_t)h * d + i];
        ss += s * s;
    }
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; i++) {
        const float f = (float)(gain[i] * inv);
        bias[i] *= f;
        for (int h = 0; h < H; h++) heads[(size_t)h * d + i] *= f;
    }
}

attribution attribute(const record& r, const model& m, const ablation& ab, int target, int contrast, int position) {
    const model_config& c = m.config;
    const model_weights& w = m.weights;
    const int L = r.n_layer, H = r.n_head, d = r.d_model, T = r.n_tokens, V = r.vocab, dh = r.d_head;
    if (L != c.n_layer || d != c.d_model || V != c.vocab_size) throw error("internal: the record is of another model");
    if (target < 0 || target >= V) throw error("target id " + std::to_string(target) + " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
    if (contrast >= V) throw error("contrast id " + std::to_string(contrast) + " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
    if (position < 0 || position >= T)
        throw error("position " + std::to_string(position) + " is outside the prompt (0.." + std::to_string(T - 1) + ")");
    if (arch_table(c.arch).post_ln)
        throw error(std::string("direct logit attribution sums the sublayers' writes to the stream, but ") +
                    arch_table(c.arch).name + " normalises the stream after every residual add (Post-LN), so they do not sum to it");
    if (ab.no_residual.on)
        throw error("direct logit attribution needs the residual stream, but no-residual replaces it: turn that ablation off");
    int missing = 0;
    for (int l = 0; l < L; l++) missing += !r.get(HOOK_Z, l) || !r.get(HOOK_MLP_OUT, l);
    if (missing || !r.resid(0) || !r.resid(2 * L))
        throw error("direct logit attribution needs z and the MLP output of every layer and the residual stream, and this "
                    "run did not keep them all (the memory budget left layers out: " + std::to_string(missing) + " of " +
                    std::to_string(L) + " layers' z and MLP output; raise the capture budget to keep them)");

    // u = W_U[target] - W_U[contrast], times the final norm's gain; the final norm's scale from the final stream
    std::vector<float> target_row(d), contrast_row(d, 0.0f);
    table_row(target_row.data(), w.unembedding(), target);
    if (contrast >= 0) table_row(contrast_row.data(), w.unembedding(), contrast);
    const bool identity = ab.no_layernorm.covers_all(L);
    const bool layernorm = arch_table(c.arch).norm == NORM_LAYERNORM && !identity;
    std::vector<double> u(d), gu(d);
    for (int i = 0; i < d; i++) {
        u[i] = (double)target_row[i] - (double)contrast_row[i];
        gu[i] = identity ? u[i] : u[i] * w.normf_g[i];
    }
    const float* xf = r.resid(2 * L) + (size_t)position * d;
    double mean = 0, var = 0;
    if (layernorm) {
        for (int i = 0; i < d; i++) mean += xf[i];
        mean /= d;
    }
    for (int i = 0; i < d; i++) var += (xf[i] - mean) * (xf[i] - mean);
    var /= d;
    const double scale = identity ? 1.0 : 1.0 / std::sqrt(var + c.norm_eps);
    // a component's share: centred (LayerNorm), scaled, dotted with g * u
    auto share = [&](const float* comp) {
        double cm = 0;
        if (layernorm) {
            for (int i = 0; i < d; i++) cm += comp[i];
            cm /= d;
        }
        double s = 0;
        for (int i = 0; i < d; i++) s += (comp[i] - cm) * gu[i];
        return s * scale;
    };

    attribution a;
    a.n_layer = L;
    a.n_head = H;
    a.position = position;
    a.target = target;
    a.contrast = contrast;
    a.heads.assign((size_t)L * H, 0.0);
    a.attn_bias.assign(L, 0.0);
    a.mlp.assign(L, 0.0);
    a.embed = share(r.resid(0) + (size_t)position * d);
    a.has_final_bias = layernorm && !w.normf_b.empty();
    if (a.has_final_bias)
        for (int i = 0; i < d; i++) a.bias += w.normf_b[i] * u[i];
    // Gemma 2 and OLMo 2 norm the attention's output before the add: with that norm's scale frozen at its value
    // in the run, each head's write is its output times gain / rms, and the heads still sum to what was added
    const bool post_norm = arch_table(c.arch).post_norm;
    std::vector<float> hout((size_t)H * d), bias_out(d), blocks;
    gemm_scratch gs;
    for (int l = 0; l < L; l++) {
        const layer_weights& lw = w.layers[l];
        a.has_attn_bias |= !lw.b_o.empty();
        a.mlp[l] = share(r.get(HOOK_MLP_OUT, l) + (size_t)position * d);
        if (ab.no_attention.covers(l)) continue; // the sublayer's output was zero: heads and bias wrote nothing
        head_outputs(hout.data(), r.get(HOOK_Z, l) + (size_t)position * H * dh, H * dh, lw.w_o, 1, H, dh, blocks, gs);
        if (!lw.b_o.empty()) std::copy(lw.b_o.begin(), lw.b_o.end(), bias_out.begin());
        else std::fill(bias_out.begin(), bias_out.end(), 0.0f);
        if (post_norm && !ab.no_layernorm.covers(l)) post_norm_parts(hout.data(), bias_out.data(), lw.post_attn_norm, H, d, c.norm_eps);
        for (int h = 0; h < H; h++) a.heads[(size_t)l * H + h] = share(&hout[(size_t)h * d]);
        if (!lw.b_o.empty()) a.attn_bias[l] = share(bias_out.data());
    }
    // the run's own logits at that position (from the record when it has them, else the same final norm and rows)
    // (Gemma 2's final softcap bends the logits: the components sum to the logit difference before the cap)
    const bool have_row = c.final_softcap <= 0 && r.logit_ids.empty() && (position == T - 1 || r.all_logits) && !r.logits.empty();
    if (have_row) {
        const float* lg = r.all_logits ? &r.logits[(size_t)position * V] : r.last_logits();
        a.total = (double)lg[target] - (contrast >= 0 ? (double)lg[contrast] : 0.0);
        return a;
    }
    std::vector<float> xn(d);
    norm_forward(xn.data(), xf, identity ? nullptr : &w.normf_g, &w.normf_b, arch_table(c.arch).norm, c.norm_eps, 1, d);
    for (int i = 0; i < d; i++) a.total += (double)xn[i] * u[i];
    return a;
}

} // namespace gb
