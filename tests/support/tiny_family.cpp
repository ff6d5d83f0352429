// Tiny random models of the newer architecture families in HF and GGUF form, and the double-precision reference
// forward for them. Written from the families' published semantics, not from core/:
// - Hugging Face transformers modeling code: modeling_gpt_neox.py (fused query_key_value grouped per head
//   [H][q k v][dh], rotary on the first rotary_pct of each head with rotate-half inside those dims, base
//   rotary_emb_base, parallel residual x + attn(ln1 x) + mlp(ln2 x), exact-erf GELU, biases everywhere),
//   modeling_gemma.py / modeling_gemma2.py (RMSNorm x * rsqrt(mean x^2 + eps) * (1 + w), embeddings times
//   sqrt(hidden_size), GeGLU with tanh GELU, explicit head_dim; Gemma 2: norms after attention and the MLP,
//   scores times query_pre_attn_scalar^-1/2, cap * tanh(s / cap) before the mask, final logit cap, a sliding
//   window on layers with layer_idx % 2 == 0), modeling_phi3.py (qkv_proj q|k|v, gate_up_proj gate|up, window on
//   every layer), modeling_olmo2.py (no pre-norms; post norms; q_norm over H*dh and k_norm over KV*dh before RoPE),
//   modeling_qwen3.py (q_norm / k_norm over each head's dh values), modeling_mistral.py / modeling_qwen2.py
//   (window: key j seen from query i when i - j < window; Qwen2 with use_sliding_window on layers >=
//   max_window_layers), modeling_mixtral.py (softmax over all experts, top-k, renormalised; w1 gate, w3 up,
//   w2 down), modeling_qwen2_moe.py (norm_topk_prob, shared expert scaled by sigmoid(x . shared_expert_gate)),
//   modeling_qwen3_moe.py, modeling_olmoe.py (full-width q/k norms, pre-norms).
// - llama.cpp's convert_hf_to_gguf.py, gguf-py (constants.py, tensor_mapping.py) and src/llama-arch.cpp for the
//   GGUF side: names (blk.N.post_attention_norm, blk.N.post_ffw_norm, ffn_gate_inp, ffn_*_exps, *_shexp), the
//   metadata keys, q/k rows permuted only for arch "llama" (Llama, Mistral, Mixtral), Gemma norms stored as
//   w + 1, GPT-NeoX's qkv rows regrouped into q | k | v, experts stacked into [E][rows][cols].
//
// Sections: spec and weights | HF folder | GGUF file (the family table: tiny_family_traits.h; the reference forward
// and the ablations: tiny_family_reference.cpp)
#include "tiny_family.h"
#include "tiny_family_traits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <stdexcept>

#include "io/safetensors.h"
#include "io/writers.h"
#include "model/quant.h"
#include "run/hooks.h"
#include "test_util.h"
#include "util/error.h"

using namespace tiny_family_detail;

// ---------------------------------------------------------------------------------------------
// Spec and weights
// ---------------------------------------------------------------------------------------------
family_spec resolve_family_spec(const family_spec& in) {
    family_spec s = in;
    const family_traits& t = traits_of(s.family);
    if (s.head_dim == 0) s.head_dim = s.d_model / s.n_head;
    if (s.family == "gpt_neox") s.n_kv_head = s.n_head; // GPT-NeoX has no grouped-query attention
    if (!s.tied) s.tied = t.tied;
    if (!s.norm_topk) s.norm_topk = t.norm_topk;
    if (!s.qkv_bias) s.qkv_bias = t.qkv_bias;
    if (s.family == "gemma2" && s.query_pre_attn_scalar == 0) s.query_pre_attn_scalar = (float)s.head_dim;
    if (s.norm_eps == 0) s.norm_eps = t.eps;
    if (t.window == WIN_NONE) s.sliding_window = 0;
    if (!t.moe) s.n_expert = s.n_expert_used = 0;
    if (s.family != "qwen2_moe") s.d_ff_shared = 0;
    return s;
}

const std::vector<float>& tiny_family::at(const std::string& name) const {
    auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("tiny_family: no weight " + name);
    return it->second;
}

namespace {

struct hf_tensor {
    std::string name;
    std::vector<int64_t> shape;
    float mean, std;
};

// Every HF tensor of the family in file order (which is also the order the values are drawn in).
std::vector<hf_tensor> hf_tensor_list(const family_spec& s) {
    const family_traits& t = traits_of(s.family);
    const int64_t d = s.d_model, H = s.n_head, KV = s.n_kv_head, dh = s.head_dim, ff = s.d_ff, V = s.vocab;
    const float gain_mean = t.plus_one ? 0.0f : 1.0f, sd = s.std;
    std::vector<hf_tensor> v;
    auto add = [&](const std::string& n, std::vector<int64_t> shape, float mean, float std) { v.push_back({n, shape, mean, std}); };
    if (s.family == "gpt_neox") {
        const std::string p = "gpt_neox.";
        add(p + "embed_in.weight", {V, d}, 0, 0.5f);
        for (int l = 0; l < s.n_layer; l++) {
            add(lname(p, l, "input_layernorm.weight"), {d}, 1, 0.1f);
            add(lname(p, l, "input_layernorm.bias"), {d}, 0, 0.1f);
            add(lname(p, l, "attention.query_key_value.weight"), {3 * d, d}, 0, sd);
            add(lname(p, l, "attention.query_key_value.bias"), {3 * d}, 0, 0.3f);
            add(lname(p, l, "attention.dense.weight"), {d, d}, 0, sd);
            add(lname(p, l, "attention.dense.bias"), {d}, 0, 0.1f);
            add(lname(p, l, "post_attention_layernorm.weight"), {d}, 1, 0.1f);
            add(lname(p, l, "post_attention_layernorm.bias"), {d}, 0, 0.1f);
            add(lname(p, l, "mlp.dense_h_to_4h.weight"), {ff, d}, 0, sd);
            add(lname(p, l, "mlp.dense_h_to_4h.bias"), {ff}, 0, 0.1f);
            add(lname(p, l, "mlp.dense_4h_to_h.weight"), {d, ff}, 0, sd);
            add(lname(p, l, "mlp.dense_4h_to_h.bias"), {d}, 0, 0.1f);
        }
        add(p + "final_layer_norm.weight", {d}, 1, 0.1f);
        add(p + "final_layer_norm.bias", {d}, 0, 0.1f);
        add("embed_out.weight", {V, d}, 0, 0.3f);
        return v;
    }
    const std::string p = "model.";
    add(p + "embed_tokens.weight", {V, d}, 0, 0.5f);
    for (int l = 0; l < s.n_layer; l++) {
        if (t.pre_norm) add(lname(p, l, "input_layernorm.weight"), {d}, gain_mean, 0.1f);
        if (s.family == "phi3") {
            add(lname(p, l, "self_attn.qkv_proj.weight"), {(H + 2 * KV) * dh, d}, 0, sd);
        } else {
            add(lname(p, l, "self_attn.q_proj.weight"), {H * dh, d}, 0, sd);
            add(lname(p, l, "self_attn.k_proj.weight"), {KV * dh, d}, 0, sd);
            add(lname(p, l, "self_attn.v_proj.weight"), {KV * dh, d}, 0, sd);
            if (*s.qkv_bias) {
                add(lname(p, l, "self_attn.q_proj.bias"), {H * dh}, 0, 0.3f);
                add(lname(p, l, "self_attn.k_proj.bias"), {KV * dh}, 0, 0.3f);
                add(lname(p, l, "self_attn.v_proj.bias"), {KV * dh}, 0, 0.3f);
            }
        }
        add(lname(p, l, "self_attn.o_proj.weight"), {d, H * dh}, 0, sd);
        if (t.qk_norm != QKN_NONE) {
            add(lname(p, l, "self_attn.q_norm.weight"), {t.qk_norm == QKN_FULL ? H * dh : dh}, 1, 0.1f);
            add(lname(p, l, "self_attn.k_norm.weight"), {t.qk_norm == QKN_FULL ? KV * dh : dh}, 1, 0.1f);
        }
        // HF's post_attention_layernorm is the MLP's input norm in Llama-style layers, the attention output's norm
        // in Gemma 2 and OLMo 2
        add(lname(p, l, "post_attention_layernorm.weight"), {d}, gain_mean, 0.1f);
        if (s.family == "gemma2") add(lname(p, l, "pre_feedforward_layernorm.weight"), {d}, gain_mean, 0.1f);
        if (t.post_norm) add(lname(p, l, "post_feedforward_layernorm.weight"), {d}, gain_mean, 0.1f);
        if (!t.moe) {
            if (s.family == "phi3") {
                add(lname(p, l, "mlp.gate_up_proj.weight"), {2 * ff, d}, 0, sd);
            } else {
                add(lname(p, l, "mlp.gate_proj.weight"), {ff, d}, 0, sd);
                add(lname(p, l, "mlp.up_proj.weight"), {ff, d}, 0, sd);
            }
            add(lname(p, l, "mlp.down_proj.weight"), {d, ff}, 0, sd);
            continue;
        }
        const int64_t E = s.n_expert, fe = s.d_ff_expert;
        if (s.family == "mixtral") {
            add(lname(p, l, "block_sparse_moe.gate.weight"), {E, d}, 0, sd);
            for (int e = 0; e < E; e++) {
                const std::string x = "block_sparse_moe.experts." + std::to_string(e) + ".";
                add(lname(p, l, x + "w1.weight"), {fe, d}, 0, sd);
                add(lname(p, l, x + "w2.weight"), {d, fe}, 0, sd);
                add(lname(p, l, x + "w3.weight"), {fe, d}, 0, sd);
            }
            continue;
        }
        add(lname(p, l, "mlp.gate.weight"), {E, d}, 0, sd);
        for (int e = 0; e < E; e++) {
            const std::string x = "mlp.experts." + std::to_string(e) + ".";
            add(lname(p, l, x + "gate_proj.weight"), {fe, d}, 0, sd);
            add(lname(p, l, x + "up_proj.weight"), {fe, d}, 0, sd);
            add(lname(p, l, x + "down_proj.weight"), {d, fe}, 0, sd);
        }
        if (t.shared_expert) {
            const int64_t fs = s.d_ff_shared;
            add(lname(p, l, "mlp.shared_expert.gate_proj.weight"), {fs, d}, 0, sd);
            add(lname(p, l, "mlp.shared_expert.up_proj.weight"), {fs, d}, 0, sd);
            add(lname(p, l, "mlp.shared_expert.down_proj.weight"), {d, fs}, 0, sd);
            add(lname(p, l, "mlp.shared_expert_gate.weight"), {1, d}, 0, 0.5f);
        }
    }
    add(p + "norm.weight", {d}, gain_mean, 0.1f);
    if (!*s.tied) add("lm_head.weight", {V, d}, 0, 0.3f);
    return v;
}

// The byte-level vocabulary of V tokens the HF folder (vocab.json + merges.txt) and the GGUF (tokenizer.ggml.*)
// both carry: ids 0..255 are the bytes, the rest unreachable fillers and <|endoftext|>. The tests feed ids.
std::vector<std::string> byte_vocab(int V) {
    gb::model_config c;
    c.n_layer = 1, c.n_head = 1, c.d_model = 4, c.vocab_size = V, c.n_ctx = 4;
    return gb::random_gpt2(c, 1).tok.vocab;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// HF folder
// ---------------------------------------------------------------------------------------------
std::string family_hf_config(const tiny_family& m) {
    const family_spec& s = m.spec;
    const family_traits& t = traits_of(s.family);
    using json = nlohmann::json;
    json c = {{"model_type", s.family},
              {"architectures", {t.hf_class}},
              {"hidden_size", s.d_model},
              {"intermediate_size", s.d_ff},
              {"num_hidden_layers", s.n_layer},
              {"num_attention_heads", s.n_head},
              {"vocab_size", s.vocab},
              {"max_position_embeddings", s.n_ctx},
              {"tie_word_embeddings", *s.tied},
              {"torch_dtype", "float32"}};
    if (s.family == "gpt_neox") {
        c["rotary_pct"] = s.rotary_pct;
        c["partial_rotary_factor"] = s.rotary_pct; // newer transformers' name for it
        c["rotary_emb_base"] = s.rope_theta;
        c["rope_theta"] = s.rope_theta;
        c["use_parallel_residual"] = s.parallel;
        c["layer_norm_eps"] = m.spec.norm_eps;
        c["hidden_act"] = "gelu";
        c["attention_bias"] = true;
        return c.dump(2);
    }
    c["num_key_value_heads"] = s.n_kv_head;
    c["rms_norm_eps"] = m.spec.norm_eps;
    c["rope_theta"] = s.rope_theta;
    c["hidden_act"] = t.act == ACT_GEGLU_TANH ? "gelu_pytorch_tanh" : "silu";
    if (s.head_dim != s.d_model / s.n_head || s.family == "gemma" || s.family == "gemma2" || s.family == "qwen3" ||
        s.family == "qwen3_moe")
        c["head_dim"] = s.head_dim;
    if (s.family == "gemma" || s.family == "gemma2") {
        c["hidden_activation"] = "gelu_pytorch_tanh";
        c["attention_bias"] = false;
    }
    if (s.family == "gemma2") {
        c["query_pre_attn_scalar"] = s.query_pre_attn_scalar;
        c["attn_logit_softcapping"] = s.attn_softcap > 0 ? json(s.attn_softcap) : json(nullptr);
        c["final_logit_softcapping"] = s.final_softcap > 0 ? json(s.final_softcap) : json(nullptr);
        c["sliding_window"] = s.sliding_window > 0 ? s.sliding_window : 4096; // Gemma 2 always has one
        c["cache_implementation"] = "hybrid";
    }
    if (s.family == "phi3") {
        c["sliding_window"] = s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr);
        c["original_max_position_embeddings"] = s.n_ctx;
        c["partial_rotary_factor"] = 1.0;
        c["rope_scaling"] = nullptr;
    }
    if (s.family == "mistral" || s.family == "mixtral")
        c["sliding_window"] = s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr);
    if (s.family == "qwen2" || s.family == "qwen3" || s.family == "qwen2_moe" || s.family == "qwen3_moe") {
        c["use_sliding_window"] = s.sliding_window > 0;
        c["sliding_window"] = s.sliding_window > 0 ? s.sliding_window : s.n_ctx;
        c["max_window_layers"] = 0; // every layer from 0 on slides when use_sliding_window
    }
    if (s.family == "olmo2" || s.family == "qwen3" || s.family == "qwen3_moe" || s.family == "olmoe")
        c["attention_bias"] = false;
    if (s.family == "mixtral") {
        c["num_local_experts"] = s.n_expert;
        c["num_experts_per_tok"] = s.n_expert_used;
        c["intermediate_size"] = s.d_ff_expert; // Mixtral's experts are its only MLPs
    }
    if (s.family == "qwen2_moe" || s.family == "qwen3_moe") {
        c["num_experts"] = s.n_expert;
        c["num_experts_per_tok"] = s.n_expert_used;
        c["moe_intermediate_size"] = s.d_ff_expert;
        c["norm_topk_prob"] = *s.norm_topk;
        c["decoder_sparse_step"] = 1;
        c["mlp_only_layers"] = json::array();
        if (s.family == "qwen2_moe") c["shared_expert_intermediate_size"] = s.d_ff_shared;
    }
    if (s.family == "olmoe") {
        c["num_experts"] = s.n_expert;
        c["num_experts_per_tok"] = s.n_expert_used;
        c["intermediate_size"] = s.d_ff_expert;
        c["norm_topk_prob"] = *s.norm_topk;
        c["clip_qkv"] = nullptr;
    }
    return c.dump(2);
}

std::vector<gb::st_out> family_hf_tensors(const tiny_family& m) {
    std::vector<gb::st_out> out;
    for (const hf_tensor& t : hf_tensor_list(m.spec)) out.push_back({t.name, t.shape, m.at(t.name), gb::ST_F32});
    return out;
}

namespace {

void write_hf_folder(const std::string& dir, const tiny_family& m) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << family_hf_config(m);
    gb::write_safetensors(dir + "/model.safetensors", family_hf_tensors(m));
    // vocab.json (token -> id) and a merges.txt with no merges: GPT-2's byte-level BPE files
    nlohmann::json vocab = nlohmann::json::object();
    const std::vector<std::string> toks = byte_vocab(m.spec.vocab);
    for (size_t i = 0; i < toks.size(); i++) vocab[toks[i]] = (int)i;
    std::ofstream(dir + "/vocab.json") << vocab.dump();
    std::ofstream(dir + "/merges.txt") << "#version: 0.2\n";
}

// llama.cpp's permutation of q/k rows for arch "llama": within each head, HF row (half b, index i) -> row 2i + b
// (HF rotates halves, llama.cpp's Llama graph adjacent pairs). Works on biases too (cols = 1).
std::vector<float> permute_rows(const std::vector<float>& w, int heads, int dh, int cols) {
    std::vector<float> out(w.size());
    for (int h = 0; h < heads; h++)
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < dh / 2; i++) {
                const float* src = &w[((size_t)h * dh + (size_t)b * dh / 2 + i) * cols];
                std::copy(src, src + cols, &out[((size_t)h * dh + 2 * i + b) * cols]);
            }
    return out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// GGUF file
// ---------------------------------------------------------------------------------------------
namespace {

// The family's metadata, as convert_hf_to_gguf.py writes it, with the byte vocabulary
void write_family_metadata(family_gguf& fg, const tiny_family& m) {
    const family_spec& s = m.spec;
    const family_traits& t = traits_of(s.family);
    const int d = s.d_model, H = s.n_head, KV = s.n_kv_head, dh = s.head_dim, ff = s.d_ff, V = s.vocab;
    const std::string A = t.gguf_arch;
    gguf_out& g = fg.g;
    g.str("general.architecture", A);
    g.str("general.name", "tiny " + s.family);
    g.u32(A + ".block_count", (uint32_t)s.n_layer);
    g.u32(A + ".context_length", (uint32_t)s.n_ctx);
    g.u32(A + ".embedding_length", (uint32_t)d);
    // Mixtral and OLMoE write intermediate_size (their experts' width) here; Qwen's MoE files their dense width
    const bool ff_is_expert = s.family == "mixtral" || s.family == "olmoe";
    g.u32(A + ".feed_forward_length", (uint32_t)(ff_is_expert ? s.d_ff_expert : ff));
    g.u32(A + ".attention.head_count", (uint32_t)H);
    if (s.family != "gpt_neox") g.u32(A + ".attention.head_count_kv", (uint32_t)KV);
    g.f32(A + ".rope.freq_base", (float)s.rope_theta);
    if (t.layernorm) g.f32(A + ".attention.layer_norm_epsilon", (float)m.spec.norm_eps);
    else g.f32(A + ".attention.layer_norm_rms_epsilon", (float)m.spec.norm_eps);
    if (s.family == "gpt_neox") {
        g.u32(A + ".rope.dimension_count", (uint32_t)(int)(s.rotary_pct * dh));
        fg.bools.push_back({A + ".use_parallel_residual", s.parallel});
    }
    if (A == "llama") {
        g.u32(A + ".vocab_size", (uint32_t)V);
        g.u32(A + ".rope.dimension_count", (uint32_t)dh);
    }
    if (s.family == "phi3") {
        g.u32(A + ".rope.dimension_count", (uint32_t)dh);
        g.u32(A + ".rope.scaling.original_context_length", (uint32_t)s.n_ctx);
        g.u32(A + ".attention.sliding_window", (uint32_t)s.sliding_window); // 0: none (how the converter says it)
    }
    if (s.family == "gemma" || s.family == "gemma2" || dh != d / H) {
        g.u32(A + ".attention.key_length", (uint32_t)dh);
        g.u32(A + ".attention.value_length", (uint32_t)dh);
    }
    if (s.family == "gemma2") {
        // 0 says "none": a missing key means llama.cpp's defaults, 50 and 30
        g.f32(A + ".attn_logit_softcapping", s.attn_softcap);
        g.f32(A + ".final_logit_softcapping", s.final_softcap);
        g.u32(A + ".attention.sliding_window", (uint32_t)(s.sliding_window > 0 ? s.sliding_window : 4096));
    }
    if (t.moe) {
        g.u32(A + ".expert_count", (uint32_t)s.n_expert);
        g.u32(A + ".expert_used_count", (uint32_t)s.n_expert_used);
        if (s.family == "qwen2_moe" || s.family == "qwen3_moe")
            g.u32(A + ".expert_feed_forward_length", (uint32_t)s.d_ff_expert);
        if (s.family == "qwen2_moe") g.u32(A + ".expert_shared_feed_forward_length", (uint32_t)s.d_ff_shared);
    }
    const std::vector<std::string> toks = byte_vocab(V);
    g.str("tokenizer.ggml.model", "gpt2");
    g.strs("tokenizer.ggml.tokens", toks);
    g.u32("tokenizer.ggml.bos_token_id", (uint32_t)(V - 1));
    g.u32("tokenizer.ggml.eos_token_id", (uint32_t)(V - 1));
}

// Writes tensors: GGUF ne lists the fastest dimension first, so an HF [rows][cols] matrix is {cols, rows}
struct tensor_writer {
    gguf_out& g;
    bool plus_one; // Gemma's converter adds 1 to norm gains
    void mat(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v) {
        g.f32_tensor(name, {cols, rows}, v);
    }
    void vecw(const std::string& name, const std::vector<float>& v) { g.f32_tensor(name, {(int64_t)v.size()}, v); }
    void gain(const std::string& name, const std::vector<float>& w) {
        std::vector<float> v = w;
        if (plus_one)
            for (float& x : v) x += 1.0f;
        vecw(name, v);
    }
};
std::string blk(int l, const std::string& rest) { return "blk." + std::to_string(l) + "." + rest; }

// GPT-NeoX's tensors: its fused qkv regrouped, its biases, its untied unembedding
void write_neox_tensors(tensor_writer& w, const tiny_family& m) {
    const family_spec& s = m.spec;
    const int d = s.d_model, H = s.n_head, dh = s.head_dim, ff = s.d_ff, V = s.vocab;
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v) { w.mat(name, rows, cols, v); };
    auto vecw = [&](const std::string& name, const std::vector<float>& v) { w.vecw(name, v); };
    const std::string p = "gpt_neox.";
    mat("token_embd.weight", V, d, m.at(p + "embed_in.weight"));
    for (int l = 0; l < s.n_layer; l++) {
        auto W = [&](const std::string& r) -> const std::vector<float>& { return m.at(lname(p, l, r)); };
        vecw(blk(l, "attn_norm.weight"), W("input_layernorm.weight"));
        vecw(blk(l, "attn_norm.bias"), W("input_layernorm.bias"));
        // HF rows [H][q k v][dh] -> q rows of every head, then k, then v (weight and bias alike)
        auto regroup = [&](const std::vector<float>& x, int cols) {
            std::vector<float> o(x.size());
            for (int h = 0; h < H; h++)
                for (int part = 0; part < 3; part++)
                    for (int e = 0; e < dh; e++)
                        std::copy_n(&x[(((size_t)h * 3 + part) * dh + e) * cols], cols,
                                    &o[(((size_t)part * H + h) * dh + e) * cols]);
            return o;
        };
        mat(blk(l, "attn_qkv.weight"), 3 * d, d, regroup(W("attention.query_key_value.weight"), d));
        vecw(blk(l, "attn_qkv.bias"), regroup(W("attention.query_key_value.bias"), 1));
        mat(blk(l, "attn_output.weight"), d, d, W("attention.dense.weight"));
        vecw(blk(l, "attn_output.bias"), W("attention.dense.bias"));
        vecw(blk(l, "ffn_norm.weight"), W("post_attention_layernorm.weight"));
        vecw(blk(l, "ffn_norm.bias"), W("post_attention_layernorm.bias"));
        mat(blk(l, "ffn_up.weight"), ff, d, W("mlp.dense_h_to_4h.weight"));
        vecw(blk(l, "ffn_up.bias"), W("mlp.dense_h_to_4h.bias"));
        mat(blk(l, "ffn_down.weight"), d, ff, W("mlp.dense_4h_to_h.weight"));
        vecw(blk(l, "ffn_down.bias"), W("mlp.dense_4h_to_h.bias"));
    }
    vecw("output_norm.weight", m.at(p + "final_layer_norm.weight"));
    vecw("output_norm.bias", m.at(p + "final_layer_norm.bias"));
    mat("output.weight", V, d, m.at("embed_out.weight"));
}

// The other families' tensors: attention (q/k permuted as the converter does), norms, dense or expert MLPs
void write_decoder_tensors(tensor_writer& w, const tiny_family& m) {
    const family_spec& s = m.spec;
    const family_traits& t = traits_of(s.family);
    const int d = s.d_model, H = s.n_head, KV = s.n_kv_head, dh = s.head_dim, ff = s.d_ff, V = s.vocab;
    gguf_out& g = w.g;
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v) { w.mat(name, rows, cols, v); };
    auto vecw = [&](const std::string& name, const std::vector<float>& v) { w.vecw(name, v); };
    auto gain = [&](const std::string& name, const std::vector<float>& v) { w.gain(name, v); };
    const std::string p = "model.";
    mat("token_embd.weight", V, d, m.at(p + "embed_tokens.weight"));
    for (int l = 0; l < s.n_layer; l++) {
        auto W = [&](const std::string& r) -> const std::vector<float>& { return m.at(lname(p, l, r)); };
        if (t.pre_norm) gain(blk(l, "attn_norm.weight"), W("input_layernorm.weight"));
        if (s.family == "phi3") {
            mat(blk(l, "attn_qkv.weight"), (int64_t)(H + 2 * KV) * dh, d, W("self_attn.qkv_proj.weight"));
        } else {
            auto qk = [&](const std::vector<float>& x, int heads, int cols) {
                return t.gguf_permute_qk ? permute_rows(x, heads, dh, cols) : x;
            };
            mat(blk(l, "attn_q.weight"), (int64_t)H * dh, d, qk(W("self_attn.q_proj.weight"), H, d));
            mat(blk(l, "attn_k.weight"), (int64_t)KV * dh, d, qk(W("self_attn.k_proj.weight"), KV, d));
            mat(blk(l, "attn_v.weight"), (int64_t)KV * dh, d, W("self_attn.v_proj.weight"));
            if (*s.qkv_bias) {
                vecw(blk(l, "attn_q.bias"), qk(W("self_attn.q_proj.bias"), H, 1));
                vecw(blk(l, "attn_k.bias"), qk(W("self_attn.k_proj.bias"), KV, 1));
                vecw(blk(l, "attn_v.bias"), W("self_attn.v_proj.bias"));
            }
        }
        mat(blk(l, "attn_output.weight"), d, (int64_t)H * dh, W("self_attn.o_proj.weight"));
        if (t.qk_norm != QKN_NONE) {
            vecw(blk(l, "attn_q_norm.weight"), W("self_attn.q_norm.weight"));
            vecw(blk(l, "attn_k_norm.weight"), W("self_attn.k_norm.weight"));
        }
        if (t.post_norm) { // llama.cpp's ATTN_POST_NORM and FFN_POST_NORM (gguf-py constants.py)
            gain(blk(l, "post_attention_norm.weight"), W("post_attention_layernorm.weight"));
            if (s.family == "gemma2") gain(blk(l, "ffn_norm.weight"), W("pre_feedforward_layernorm.weight"));
            gain(blk(l, "post_ffw_norm.weight"), W("post_feedforward_layernorm.weight"));
        } else {
            gain(blk(l, "ffn_norm.weight"), W("post_attention_layernorm.weight"));
        }
        if (!t.moe) {
            if (s.family == "phi3") {
                mat(blk(l, "ffn_up.weight"), 2 * ff, d, W("mlp.gate_up_proj.weight")); // gate rows, then up rows
            } else {
                mat(blk(l, "ffn_gate.weight"), ff, d, W("mlp.gate_proj.weight"));
                mat(blk(l, "ffn_up.weight"), ff, d, W("mlp.up_proj.weight"));
            }
            mat(blk(l, "ffn_down.weight"), d, ff, W("mlp.down_proj.weight"));
            continue;
        }
        const int E = s.n_expert, fe = s.d_ff_expert;
        const bool mx = s.family == "mixtral";
        mat(blk(l, "ffn_gate_inp.weight"), E, d, W(mx ? "block_sparse_moe.gate.weight" : "mlp.gate.weight"));
        // each expert's HF matrix, stacked in expert order: [E][rows][cols] is ne {cols, rows, E}
        auto stack = [&](const std::string& gguf_name, const char* mixtral_w, const char* qwen_w, int64_t rows, int64_t cols) {
            std::vector<float> all;
            for (int e = 0; e < E; e++) {
                const std::string x = mx ? "block_sparse_moe.experts." + std::to_string(e) + "." + mixtral_w + ".weight"
                                         : "mlp.experts." + std::to_string(e) + "." + qwen_w + ".weight";
                const std::vector<float>& v = W(x);
                all.insert(all.end(), v.begin(), v.end());
            }
            g.f32_tensor(blk(l, gguf_name), {cols, rows, (int64_t)E}, all);
        };
        stack("ffn_gate_exps.weight", "w1", "gate_proj", fe, d);
        stack("ffn_down_exps.weight", "w2", "down_proj", d, fe);
        stack("ffn_up_exps.weight", "w3", "up_proj", fe, d);
        if (t.shared_expert) {
            const int fs = s.d_ff_shared;
            mat(blk(l, "ffn_gate_inp_shexp.weight"), 1, d, W("mlp.shared_expert_gate.weight"));
            mat(blk(l, "ffn_gate_shexp.weight"), fs, d, W("mlp.shared_expert.gate_proj.weight"));
            mat(blk(l, "ffn_up_shexp.weight"), fs, d, W("mlp.shared_expert.up_proj.weight"));
            mat(blk(l, "ffn_down_shexp.weight"), d, fs, W("mlp.shared_expert.down_proj.weight"));
        }
    }
    gain("output_norm.weight", m.at(p + "norm.weight"));
    if (!*s.tied) mat("output.weight", V, d, m.at("lm_head.weight"));
}

family_gguf build_family_gguf(const tiny_family& m) {
    family_gguf fg;
    write_family_metadata(fg, m);
    tensor_writer w{fg.g, traits_of(m.spec.family).plus_one};
    if (m.spec.family == "gpt_neox") write_neox_tensors(w, m);
    else write_decoder_tensors(w, m);
    return fg;
}

// Values per block of a stored type (1 for F32).
int64_t block_of(uint32_t type) {
    int64_t values = 1, bytes = 4;
    if (type != gb::GGML_F32 && !gb::ggml_block(type, values, bytes))
        throw std::runtime_error("tiny_family: unknown type " + std::to_string(type));
    return values;
}

// Whether a matrix is stored in the quantized type: whole blocks along its rows, and not a router (llama.cpp's
// converter keeps ffn_gate_inp in F32). HF names (router: *.gate.weight, shared_expert_gate.weight) or GGUF names.
bool stored_quantized(const std::string& name, size_t dims, int64_t row, uint32_t type) {
    if (type == gb::GGML_F32 || dims < 2 || row % block_of(type) != 0) return false;
    auto ends = [&](const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return !ends(".gate.weight") && !ends("shared_expert_gate.weight") && name.find("ffn_gate_inp") == std::string::npos;
}

} // namespace

family_gguf make_family_gguf(const tiny_family& m, uint32_t type) {
    family_gguf fg = build_family_gguf(m);
    for (gguf_out::tensor& t : fg.g.tensors) {
        if (!stored_quantized(t.name, t.ne.size(), t.ne[0], type)) continue;
        const int64_t n = (int64_t)(t.bytes.size() / 4);
        std::vector<float> v(n);
        std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
        t.bytes.assign(gb::ggml_bytes(type, n), 0);
        gb::quantize(t.bytes.data(), v.data(), type, n);
        t.type = type;
    }
    return fg;
}

tiny_family quantized_family(const tiny_family& m, uint32_t type) {
    tiny_family q = m;
    for (const hf_tensor& t : hf_tensor_list(m.spec)) {
        if (!stored_quantized(t.name, t.shape.size(), t.shape.back(), type)) continue;
        std::vector<float>& v = q.w.at(t.name);
        std::vector<uint8_t> bytes(gb::ggml_bytes(type, (int64_t)v.size()));
        gb::quantize(bytes.data(), v.data(), type, (int64_t)v.size());
        gb::dequantize(v.data(), bytes.data(), type, (int64_t)v.size());
    }
    return q;
}

bool family_gguf::remove_tensor(const std::string& name) {
    auto it = std::find_if(g.tensors.begin(), g.tensors.end(), [&](const gguf_out::tensor& t) { return t.name == name; });
    if (it == g.tensors.end()) return false;
    g.tensors.erase(it);
    return true;
}

// gguf_out writes no booleans (type 7): the file is written without them, then they are spliced in after the
// other metadata (tensor offsets count from the data section, so only the padding before it changes).
void family_gguf::write(const std::string& path) const {
    if (g.alignment != 32 || g.version != 3) throw std::runtime_error("family_gguf: v3 with 32-byte alignment only");
    const size_t header = g.write(path);
    if (bools.empty()) return;
    gguf_out meta_only = g;
    meta_only.tensors.clear();
    const std::string tmp = path + ".meta";
    const size_t kv_end = meta_only.write(tmp); // 24 bytes + every key/value: where the tensor infos start
    std::filesystem::remove(tmp);
    std::ifstream in(path, std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t align = 32, data_start = (header + align - 1) / align * align;
    std::string kv;
    for (const auto& [key, value] : bools) {
        const uint64_t n = key.size();
        const uint32_t type = 7;
        const uint8_t v = value ? 1 : 0;
        kv.append((const char*)&n, 8);
        kv += key;
        kv.append((const char*)&type, 4);
        kv.append((const char*)&v, 1);
    }
    std::string out = file.substr(0, kv_end) + kv + file.substr(kv_end, header - kv_end);
    uint64_t n_kv;
    std::memcpy(&n_kv, &out[16], 8); // magic, version, tensor count, then the key/value count
    n_kv += bools.size();
    std::memcpy(&out[16], &n_kv, 8);
    out.append((align - out.size() % align) % align, '\0');
    out += file.substr(data_start);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
}

tiny_family write_tiny_family(const std::string& dir, const family_spec& in) {
    tiny_family m;
    m.spec = resolve_family_spec(in);
    std::mt19937 rng(m.spec.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const hf_tensor& ht : hf_tensor_list(m.spec)) {
        size_t n = 1;
        for (int64_t v : ht.shape) n *= (size_t)v;
        std::vector<float> v(n);
        for (float& x : v) x = ht.mean + ht.std * nd(rng);
        m.w[ht.name] = std::move(v);
    }
    std::filesystem::create_directories(dir);
    m.hf_dir = dir + "/hf";
    m.gguf_path = dir + "/model.gguf";
    write_hf_folder(m.hf_dir, m);
    make_family_gguf(m).write(m.gguf_path);
    return m;
}

