// What a model is, computed from its config and weights: parameter counts, memory, stored types, RoPE
// frequencies, finiteness. No file format and no kernel here: the loaders (core/io) fill the structs.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "util/error.h"

namespace gb {

param_counts count_params(const model& m) {
    const model_weights& w = m.weights;
    param_counts p;
    p.embeddings = (int64_t)w.tok_emb.size() + (int64_t)w.pos_emb.size() + (int64_t)w.lm_head.size() +
                   (int64_t)(w.type_emb.size() + w.lm_head_b.size() + w.head_dense.size() + w.head_dense_b.size()) +
                   (int64_t)(w.patch.size() + w.patch_b.size() + w.cls_tok.size() + w.dist_tok.size() +
                             w.dist_head.size() + w.dist_head_b.size());
    for (const layer_weights& l : w.layers) {
        p.attention += (int64_t)(l.w_qkv.size() + l.b_qkv.size() + l.w_o.size() + l.b_o.size() + l.x_q.size() +
                                 l.x_q_b.size() + l.x_kv.size() + l.x_kv_b.size() + l.x_o.size() + l.x_o_b.size());
        p.mlp += (int64_t)(l.w_up.size() + l.b_up.size() + l.w_gate.size() + l.w_down.size() + l.b_down.size() +
                           l.router.size() + l.shared_gate.size());
        for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
            for (const weight_matrix& e : *experts) p.mlp += (int64_t)e.size();
        p.norms += (int64_t)(l.norm1_g.size() + l.norm1_b.size() + l.norm2_g.size() + l.norm2_b.size() + l.q_norm.size() +
                             l.k_norm.size() + l.post_attn_norm.size() + l.post_mlp_norm.size() + l.norm3_g.size() +
                             l.norm3_b.size());
    }
    p.norms += (int64_t)(w.normf_g.size() + w.normf_b.size() + w.emb_norm_g.size() + w.emb_norm_b.size());
    if (m.encoder) { // the encoder stack's own; the token embedding is shared
        const param_counts e = count_params(*m.encoder);
        p.embeddings += e.embeddings - (int64_t)m.encoder->weights.tok_emb.size();
        p.attention += e.attention, p.mlp += e.mlp, p.norms += e.norms;
    }
    return p;
}

int64_t weight_bytes(const model& m) {
    const model_weights& w = m.weights;
    auto vec = [](const std::vector<float>& v) { return (int64_t)v.size() * 4; };
    int64_t b = (int64_t)(w.tok_emb.bytes() + w.lm_head.bytes() + w.head.bytes() + w.head_dense.bytes()) + vec(w.pos_emb) +
                vec(w.normf_g) + vec(w.normf_b) + vec(w.type_emb) + vec(w.emb_norm_g) + vec(w.emb_norm_b) +
                vec(w.lm_head_b) + vec(w.head_dense_b) + (int64_t)(w.patch.bytes() + w.dist_head.bytes()) + vec(w.patch_b) +
                vec(w.cls_tok) + vec(w.dist_tok) + vec(w.dist_head_b);
    for (const layer_weights& l : w.layers)
        b += (int64_t)(l.w_qkv.bytes() + l.w_o.bytes() + l.w_up.bytes() + l.w_gate.bytes() + l.w_down.bytes()) +
             vec(l.norm1_g) + vec(l.norm1_b) + vec(l.norm2_g) + vec(l.norm2_b) + vec(l.b_qkv) + vec(l.b_o) +
             vec(l.b_up) + vec(l.b_down) + vec(l.q_norm) + vec(l.k_norm) + vec(l.post_attn_norm) + vec(l.post_mlp_norm) +
             vec(l.shared_gate) + (int64_t)l.router.bytes() + (int64_t)(l.x_q.bytes() + l.x_kv.bytes() + l.x_o.bytes()) +
             vec(l.x_q_b) + vec(l.x_kv_b) + vec(l.x_o_b) + vec(l.norm3_g) + vec(l.norm3_b);
    for (const layer_weights& l : w.layers)
        for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
            for (const weight_matrix& e : *experts) b += (int64_t)e.bytes();
    if (m.encoder) b += weight_bytes(*m.encoder) - (int64_t)m.encoder->weights.tok_emb.bytes(); // one shared table
    return b;
}

weight_types stored_types(const model& m) {
    auto join = [](std::vector<uint32_t> types) {
        std::sort(types.begin(), types.end());
        types.erase(std::unique(types.begin(), types.end()), types.end());
        std::string s;
        for (uint32_t t : types) s += (s.empty() ? "" : "+") + std::string(ggml_type_name(t));
        return s;
    };
    std::vector<uint32_t> att, mlp;
    for (const layer_weights& l : m.weights.layers) {
        att.push_back(l.w_qkv.type), att.push_back(l.w_o.type);
        for (const weight_matrix& p : l.w_qkv.parts) att.push_back(p.type);
        for (const weight_matrix* m : {&l.w_up, &l.w_down, &l.w_gate})
            if (!m->empty()) mlp.push_back(m->type);
        for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
            for (const weight_matrix& e : *experts) mlp.push_back(e.type);
    }
    weight_types t{join(att), join(mlp), ggml_type_name(m.weights.tok_emb.type),
                   m.weights.lm_head.empty() ? "tied" : ggml_type_name(m.weights.lm_head.type)};
    return t;
}

// ---------------------------------------------------------------------------------------------
// RoPE frequencies: one table per model, so the forward never calls pow
// ---------------------------------------------------------------------------------------------
void rope_init_freqs(model_config& c, const std::vector<float>& divisors) {
    const int rot = c.rope_dims > 0 ? c.rope_dims : c.d_head; // partial rotary: only the leading dimensions
    if (rot <= 0 || rot % 2 || rot > c.d_head) throw error("rotary dimensions " + std::to_string(rot) + " are odd or exceed the head size: RoPE rotates pairs");
    const int half = rot / 2;
    if (!divisors.empty() && (int)divisors.size() != half)
        throw error("RoPE frequency table has " + std::to_string(divisors.size()) + " entries, expected rotary dimensions / 2 = " +
                    std::to_string(half));
    if (!divisors.empty()) c.rope_scaling = ROPE_SCALING_FREQ_TABLE;
    else if (c.rope_scaling == ROPE_SCALING_FREQ_TABLE) throw error("internal: a RoPE frequency table needs its divisors");
    c.rope_freq.assign(half, 0.0);
    for (int i = 0; i < half; i++) {
        double f = std::pow((double)c.rope_theta, -2.0 * i / rot);
        switch (c.rope_scaling) {
        case ROPE_SCALING_NONE: break;
        case ROPE_SCALING_LINEAR: f /= c.rope_factor; break; // positions / factor
        case ROPE_SCALING_FREQ_TABLE: f /= divisors[i]; break;
        case ROPE_SCALING_LLAMA3: { // Meta's rule: keep short wavelengths, stretch long ones, blend between
            const double wavelen = 2 * M_PI / f, orig = c.rope_orig_ctx;
            const double low = c.rope_low_freq_factor, high = c.rope_high_freq_factor;
            if (wavelen > orig / low) {
                f /= c.rope_factor;
            } else if (wavelen >= orig / high) {
                double smooth = (orig / wavelen - low) / (high - low);
                f = (1 - smooth) * f / c.rope_factor + smooth * f;
            }
            break;
        }
        }
        c.rope_freq[i] = f;
    }
}

// ---------------------------------------------------------------------------------------------
// load_model: detect the format from the path
// ---------------------------------------------------------------------------------------------
// The first weight tensor holding a NaN or Inf, in the order the forward reads them ("" when all are finite):
// such a model still loads and runs (the display copes), but the user is told where the damage is.
bool all_finite(const float* x, size_t n) {
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= std::fabs(x[i]) <= 3.4028235e38f; // false for NaN and +-Inf; no early exit, so it vectorises
    return ok;
}

} // namespace gb
