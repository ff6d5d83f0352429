// Weights by the architecture table's names, whatever the file format: the loaders (HF safetensors, GGUF)
// only provide the bytes (tensor_reader).
#include "io/load_weights.h"

#include <algorithm>
#include <cmath>

#include "io/loader.h"
#include "kernels/gemm.h"
#include "model/arch.h"
#include "util/error.h"

namespace gb {

std::vector<float> tensor_reader::floats_shaped(const std::string& name, const std::vector<int64_t>&) const {
    throw error(path() + ": tensor " + name + ": only Hugging Face safetensors folders hold the vision models' tensors");
}

namespace {

// Rows r0 .. r0 + n of an [out][in] matrix stored out-major: a part of its own, still the file's bytes
matrix_part rows_of(const matrix_part& p, int64_t in, int64_t r0, int64_t n) {
    matrix_part s = p;
    s.data = p.data + ggml_bytes(p.type, r0 * in);
    s.out = n;
    return s;
}

struct weight_reader {
    const arch_info& arch;
    const model_config& c;
    const tensor_reader& r;

    std::string name(tensor_id t, int l = -1, int e = -1) const {
        std::string n = tensor_name(arch, r.gguf, t, l, e);
        if (n.empty())
            throw error("internal: the " + std::string(arch.name) + " table names no " + tensor_id_name(t) + " tensor");
        return n;
    }
    bool named(tensor_id t) const { return !tensor_name(arch, r.gguf, t, 0, 0).empty(); }
    bool present(tensor_id t, int l = -1) const { return named(t) && r.has(name(t, l)); }
    std::vector<float> vec(tensor_id t, int l, int64_t n) const { return r.floats(name(t, l), n); }
    matrix_part part(tensor_id t, int l, int64_t in, int64_t out) const { return r.part(name(t, l), in, out); }
    weight_matrix matrix(tensor_id t, int l, int64_t in, int64_t out) const { return r.matrix({part(t, l, in, out)}, in); }
};

// The original Transformer's fixed positions as Marian lays them out: row t, column i < half = ceil(d/2) is
// sin(t / 10000^(2i/d)), column half + i the cos of the same angle (halves, not interleaved); in double, then float
std::vector<float> sinusoid_table(int64_t rows, int64_t d) {
    const int64_t half = (d + 1) / 2;
    std::vector<float> p((size_t)(rows * d));
    for (int64_t t = 0; t < rows; t++)
        for (int64_t i = 0; i < half; i++) {
            const double angle = t / std::pow(10000.0, 2.0 * i / d);
            p[(size_t)(t * d + i)] = (float)std::sin(angle);
            if (half + i < d) p[(size_t)(t * d + half + i)] = (float)std::cos(angle);
        }
    return p;
}

void add_one(std::vector<float>& g) {
    for (float& v : g) v += 1.0f;
}

// The embeddings: a vision model's [CLS] (+ [DIST]) tokens, positions and patch projection, or the token table
// [V][d]; learned or sinusoid positions, token types, the embedding norm
void load_embeddings(model_weights& w, const weight_reader& in) {
    const arch_info& arch = in.arch;
    const model_config& c = in.c;
    const tensor_reader& r = in.r;
    const int64_t d = c.d_model, V = c.vocab_size;
    if (arch.kind == KIND_VISION) {
        // [CLS] (+ [DIST]) and one position row per token are stored [1][n][d]; the patch convolution
        // [d][C][P][P] is the [C*P*P][d] product of each patch's pixels, channel-major as the kernel's
        const int64_t cpp = (int64_t)c.n_channels * c.patch_size * c.patch_size;
        w.cls_tok = r.floats_shaped(in.name(T_CLS_TOK), {1, 1, d});
        if (c.n_prefix > 1) w.dist_tok = r.floats_shaped(in.name(T_DIST_TOK), {1, 1, d});
        w.pos_emb = r.floats_shaped(in.name(T_POS_EMB), {1, c.n_ctx, d});
        const std::vector<float> k = r.floats_shaped(in.name(T_PATCH), {d, c.n_channels, c.patch_size, c.patch_size});
        std::vector<float> kt((size_t)cpp * d); // [in][out]
        for (int64_t o = 0; o < d; o++)
            for (int64_t i = 0; i < cpp; i++) kt[(size_t)i * d + o] = k[(size_t)o * cpp + i];
        w.patch = pack_matrix(kt, cpp, d);
        w.patch_b = in.vec(T_PATCH_B, -1, d);
    } else if (arch.no_head) {
        // an encoder stack reads the decoder's token table (one shared embedding in BART, mBART, Marian): the
        // loader hands it over
    } else if (!in.present(T_TOK_EMB) && in.present(T_TOK_EMB_ALT)) { // BART files that keep only a stack's copy
        w.tok_emb = r.table(in.name(T_TOK_EMB_ALT), V, d);
    } else {
        w.tok_emb = r.table(in.name(T_TOK_EMB), V, d);
    }
    if (arch.pos == POS_LEARNED && arch.kind != KIND_VISION) w.pos_emb = r.floats2(in.name(T_POS_EMB), c.pos_offset + c.n_ctx, d);
    if (arch.pos == POS_SINUSOID) w.pos_emb = sinusoid_table(c.pos_offset + c.n_ctx, d);
    if (c.n_token_type > 0) w.type_emb = r.floats2(in.name(T_TYPE_EMB), c.n_token_type, d);
    if (in.named(T_EMB_NORM)) {
        w.emb_norm_g = in.vec(T_EMB_NORM, -1, d);
        w.emb_norm_b = in.vec(T_EMB_NORM_B, -1, d);
    }
}

// Layer l's attention: its norm, q | k | v as one [d][q + 2 kv] matrix (fused in the file or not), the output
// projection, q/k norms and the norm after it
void load_attention(layer_weights& L, const weight_reader& in, int l) {
    const arch_info& arch = in.arch;
    const model_config& c = in.c;
    const tensor_reader& r = in.r;
    const int64_t d = c.d_model, H = c.n_head, dh = c.d_head;
    const int64_t q = H * dh, kv = c.n_kv_head * dh, qkv_w = q + 2 * kv;
    if (arch.pre_norm || arch.post_ln) {
        L.norm1_g = in.vec(T_ATTN_NORM, l, d);
        if (arch.norm == NORM_LAYERNORM) L.norm1_b = in.vec(T_ATTN_NORM_B, l, d);
    }
    if (in.present(T_QKV, l)) { // fused
        matrix_part f = in.part(T_QKV, l, d, qkv_w);
        if (arch.names->hf_qkv_per_head && !r.gguf) { // rows [H][q k v][dh]: regroup as all q, all k, all v
            std::vector<matrix_part> parts;
            for (int which = 0; which < 3; which++)
                for (int64_t h = 0; h < H; h++) parts.push_back(rows_of(f, d, (3 * h + which) * dh, dh));
            L.w_qkv = r.matrix(parts, d);
        } else {
            L.w_qkv = r.matrix({f}, d);
        }
        if (c.qkv_bias) {
            std::vector<float> b = in.vec(T_QKV_B, l, qkv_w);
            if (arch.names->hf_qkv_per_head && !r.gguf) {
                L.b_qkv.resize(b.size());
                for (int which = 0; which < 3; which++)
                    for (int64_t h = 0; h < H; h++)
                        std::copy_n(&b[(3 * h + which) * dh], dh, &L.b_qkv[which * q + h * dh]);
            } else {
                L.b_qkv = b;
            }
        }
    } else {
        L.w_qkv = r.matrix({in.part(T_Q, l, d, q), in.part(T_K, l, d, kv), in.part(T_V, l, d, kv)}, d);
        if (c.qkv_bias) {
            L.b_qkv = in.vec(T_Q_B, l, q);
            for (tensor_id b : {T_K_B, T_V_B}) {
                std::vector<float> v = in.vec(b, l, kv);
                L.b_qkv.insert(L.b_qkv.end(), v.begin(), v.end());
            }
        }
    }
    L.w_o = in.matrix(T_O, l, q, d);
    if (in.named(T_O_B)) L.b_o = in.vec(T_O_B, l, d);
    if (arch.qk_norm != QK_NORM_NONE) {
        const bool full = arch.qk_norm == QK_NORM_FULL;
        L.q_norm = in.vec(T_Q_NORM, l, full ? q : dh);
        L.k_norm = in.vec(T_K_NORM, l, full ? kv : dh);
    }
    if (arch.post_norm) L.post_attn_norm = in.vec(T_ATTN_POST_NORM, l, d);
}

// Layer l's cross-attention (encoder–decoders' decoder layers): its norm, q, keys and values fused k | v
// ([d][2q]), the output projection, each with its bias
void load_cross_attention(layer_weights& L, const weight_reader& in, int l) {
    const int64_t d = in.c.d_model, q = (int64_t)in.c.n_head * in.c.d_head;
    L.norm3_g = in.vec(T_XNORM, l, d);
    L.norm3_b = in.vec(T_XNORM_B, l, d);
    L.x_q = in.matrix(T_XQ, l, d, q);
    L.x_q_b = in.vec(T_XQ_B, l, q);
    L.x_kv = in.r.matrix({in.part(T_XK, l, d, q), in.part(T_XV, l, d, q)}, d);
    L.x_kv_b = in.vec(T_XK_B, l, q);
    const std::vector<float> vb = in.vec(T_XV_B, l, q);
    L.x_kv_b.insert(L.x_kv_b.end(), vb.begin(), vb.end());
    L.x_o = in.matrix(T_XO, l, q, d);
    L.x_o_b = in.vec(T_XO_B, l, d);
}

// Layer l's experts: the router [d][E], each expert's gate, up [d][d_ff_expert] and down, and the shared expert
// where the family has one
void load_experts(layer_weights& L, const weight_reader& in, int l) {
    const model_config& c = in.c;
    const tensor_reader& r = in.r;
    const int64_t d = c.d_model, E = c.n_expert, fe = c.d_ff_expert;
    L.router = in.matrix(T_ROUTER, l, d, E);
    L.exp_gate.resize(E), L.exp_up.resize(E), L.exp_down.resize(E);
    for (int e = 0; e < E; e++) {
        // HF: a tensor per expert; GGUF: one stacked tensor per kind
        auto expert = [&](tensor_id t, int64_t n_in, int64_t n_out) {
            matrix_part p = r.gguf ? r.expert_part(in.name(t, l), n_in, n_out, E, e)
                                   : r.part(in.name(t, l, e), n_in, n_out);
            return r.matrix({p}, n_in);
        };
        L.exp_gate[e] = expert(T_EXP_GATE, d, fe);
        L.exp_up[e] = expert(T_EXP_UP, d, fe);
        L.exp_down[e] = expert(T_EXP_DOWN, fe, d);
    }
    if (c.d_ff_shared > 0) {
        const int64_t fs = c.d_ff_shared;
        L.w_gate = in.matrix(T_SH_GATE, l, d, fs);
        L.w_up = in.matrix(T_SH_UP, l, d, fs);
        L.w_down = in.matrix(T_SH_DOWN, l, fs, d);
        L.shared_gate = in.vec(T_SH_ROUTER, l, d);
    }
}

// Layer l's MLP: its norms, then the experts, or gate (gated MLPs; fused with up in some files), up and down with
// their biases
void load_mlp(layer_weights& L, const weight_reader& in, int l) {
    const arch_info& arch = in.arch;
    const model_config& c = in.c;
    const tensor_reader& r = in.r;
    const int64_t d = c.d_model, ff = c.d_ff;
    if (arch.pre_norm || arch.post_ln) {
        L.norm2_g = in.vec(T_FFN_NORM, l, d);
        if (arch.norm == NORM_LAYERNORM) L.norm2_b = in.vec(T_FFN_NORM_B, l, d);
    }
    if (arch.post_norm) L.post_mlp_norm = in.vec(T_FFN_POST_NORM, l, d);
    const bool gated = arch.mlp == MLP_SWIGLU || arch.mlp == MLP_GEGLU;
    if (arch.kind == KIND_MOE) {
        load_experts(L, in, l);
    } else if (gated && in.present(T_GATE_UP, l)) { // fused rows: gate, then up
        matrix_part f = in.part(T_GATE_UP, l, d, 2 * ff);
        L.w_gate = r.matrix({rows_of(f, d, 0, ff)}, d);
        L.w_up = r.matrix({rows_of(f, d, ff, ff)}, d);
        L.w_down = in.matrix(T_DOWN, l, ff, d);
    } else {
        if (gated) L.w_gate = in.matrix(T_GATE, l, d, ff);
        L.w_up = in.matrix(T_UP, l, d, ff);
        if (in.named(T_UP_B) && c.mlp_bias) L.b_up = in.vec(T_UP_B, l, ff);
        L.w_down = in.matrix(T_DOWN, l, ff, d);
        if (in.named(T_DOWN_B) && c.mlp_bias) L.b_down = in.vec(T_DOWN_B, l, d);
    }
}

// After the layers: the final norm, then the head: the masked-LM transform, a classifier's (DeiT's two) or the
// LM head [V][d] (none where it is tied to the token table)
void load_head(model_weights& w, const weight_reader& in) {
    const arch_info& arch = in.arch;
    const model_config& c = in.c;
    const tensor_reader& r = in.r;
    const int64_t d = c.d_model, V = c.vocab_size;
    if (in.named(T_NORM_F)) { // BART's and Marian's stacks end in a layer's own Post-LN: no final norm
        w.normf_g = in.vec(T_NORM_F, -1, d);
        if (arch.norm == NORM_LAYERNORM) w.normf_b = in.vec(T_NORM_F_B, -1, d);
    }
    if (arch.no_head) return; // an encoder stack: its output goes to the decoder's cross-attention
    if (arch.cross && in.present(T_LM_HEAD_B)) w.lm_head_b = in.vec(T_LM_HEAD_B, -1, V); // absent: zeros, as in HF
    if (arch.gain_plus_one && !r.gguf) add_one(w.normf_g);
    if (arch.mlm_head) {
        w.head_dense = in.matrix(T_HEAD_DENSE, -1, d, d);
        w.head_dense_b = in.vec(T_HEAD_DENSE_B, -1, d);
        w.lm_head_b = in.vec(T_LM_HEAD_B, -1, V);
    }
    std::string head = in.name(T_LM_HEAD);
    if (arch.kind == KIND_VISION) {
        // DeiT: two heads (with a teacher) or DeiTForImageClassification's one "classifier"
        if (c.arch == ARCH_DEIT && !r.has(head) && r.has("classifier.weight")) head = "classifier.weight";
        if (!r.has(head))
            throw error(r.path() + ": missing tensor " + head + " (a bare " + arch.name +
                        " model has no classifier: Glassbox opens the ForImageClassification checkpoints)");
        if (head == "classifier.weight" && c.arch == ARCH_DEIT) {
            w.lm_head_b = r.floats("classifier.bias", V);
        } else {
            w.lm_head_b = in.vec(T_LM_HEAD_B, -1, V);
            if (in.present(T_DIST_HEAD)) {
                w.dist_head = r.table(in.name(T_DIST_HEAD), V, d);
                w.dist_head_b = in.vec(T_DIST_HEAD_B, -1, V);
            }
        }
    }
    if (r.has(head)) w.lm_head = r.table(head, V, d);
    else if (!c.tied_lm_head) throw error(r.path() + ": missing tensor " + head + " (the config says the head is not tied)");
}

} // namespace

void load_weights(model_weights& w, const model_config& c, const tensor_reader& r, const progress_fn& progress) {
    const arch_info& arch = arch_table(c.arch);
    const weight_reader in{arch, c, r};
    load_embeddings(w, in);
    w.layers.assign(c.n_layer, layer_weights{});
    for (int l = 0; l < c.n_layer; l++) {
        layer_weights& L = w.layers[l];
        load_attention(L, in, l);
        if (arch.cross) load_cross_attention(L, in, l);
        load_mlp(L, in, l);
        // Gemma's HF files store w of a norm that multiplies by 1 + w; GGUF files already hold 1 + w
        if (arch.gain_plus_one && !r.gguf)
            for (std::vector<float>* g : {&L.norm1_g, &L.norm2_g, &L.post_attn_norm, &L.post_mlp_norm}) add_one(*g);
        if (progress) progress(0.1f + 0.85f * (l + 1) / c.n_layer, "layer " + std::to_string(l));
    }
    load_head(w, in);
}

} // namespace gb
