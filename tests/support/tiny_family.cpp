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
// Sections: family table | spec and weights | HF folder | GGUF file | reference forward | ablations and checks
#include "tiny_family.h"

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

namespace {

// ---------------------------------------------------------------------------------------------
// Family table: what each family computes and how its files name things (our own reading of the sources above)
// ---------------------------------------------------------------------------------------------
enum mlp_act { ACT_GELU_ERF, ACT_GEGLU_TANH, ACT_SWIGLU };
enum qk_norm_type { QKN_NONE, QKN_FULL, QKN_HEAD };
enum window_rule { WIN_NONE, WIN_ALL, WIN_EVEN }; // which layers the sliding window applies to

struct family_traits {
    const char* family;
    const char* hf_class;      // config.json architectures[0]
    const char* gguf_arch;     // general.architecture
    bool layernorm;            // LayerNorm with bias (GPT-NeoX), else RMSNorm
    bool plus_one;             // HF gains are w, the norm multiplies by 1 + w (Gemma); GGUF stores w + 1
    bool embed_scale;          // embeddings times sqrt(d_model) (Gemma)
    bool pre_norm;             // a norm before each sublayer (all but OLMo 2)
    bool post_norm;            // a norm on each sublayer's output (Gemma 2, OLMo 2)
    qk_norm_type qk_norm;
    mlp_act act;
    bool moe;
    bool shared_expert;        // Qwen2-MoE
    bool gguf_permute_qk;      // GGUF arch "llama": q/k rows permuted to rotate adjacent pairs
    window_rule window;
    bool tied, norm_topk, qkv_bias; // defaults
    double eps;                // default norm epsilon written to config.json
};

const family_traits families[] = {
    // family     HF class                  gguf        LN     +1     emb    pre    post   qk        act             moe    shexp  perm   window    tied   topk   bias   eps
    {"gpt_neox",  "GPTNeoXForCausalLM",     "gptneox",  true,  false, false, true,  false, QKN_NONE, ACT_GELU_ERF,   false, false, false, WIN_NONE, false, false, true,  1e-5},
    {"gemma",     "GemmaForCausalLM",       "gemma",    false, true,  true,  true,  false, QKN_NONE, ACT_GEGLU_TANH, false, false, false, WIN_NONE, true,  false, false, 1e-6},
    {"gemma2",    "Gemma2ForCausalLM",      "gemma2",   false, true,  true,  true,  true,  QKN_NONE, ACT_GEGLU_TANH, false, false, false, WIN_EVEN, true,  false, false, 1e-6},
    {"phi3",      "Phi3ForCausalLM",        "phi3",     false, false, false, true,  false, QKN_NONE, ACT_SWIGLU,     false, false, false, WIN_ALL,  false, false, false, 1e-5},
    {"olmo2",     "Olmo2ForCausalLM",       "olmo2",    false, false, false, false, true,  QKN_FULL, ACT_SWIGLU,     false, false, false, WIN_NONE, false, false, false, 1e-6},
    {"qwen3",     "Qwen3ForCausalLM",       "qwen3",    false, false, false, true,  false, QKN_HEAD, ACT_SWIGLU,     false, false, false, WIN_NONE, true,  false, false, 1e-6},
    {"llama",     "LlamaForCausalLM",       "llama",    false, false, false, true,  false, QKN_NONE, ACT_SWIGLU,     false, false, true,  WIN_NONE, false, false, false, 1e-5},
    {"mistral",   "MistralForCausalLM",     "llama",    false, false, false, true,  false, QKN_NONE, ACT_SWIGLU,     false, false, true,  WIN_ALL,  false, false, false, 1e-5},
    {"qwen2",     "Qwen2ForCausalLM",       "qwen2",    false, false, false, true,  false, QKN_NONE, ACT_SWIGLU,     false, false, false, WIN_ALL,  true,  false, true,  1e-6},
    {"mixtral",   "MixtralForCausalLM",     "llama",    false, false, false, true,  false, QKN_NONE, ACT_SWIGLU,     true,  false, true,  WIN_NONE, false, true,  false, 1e-5},
    {"qwen2_moe", "Qwen2MoeForCausalLM",    "qwen2moe", false, false, false, true,  false, QKN_NONE, ACT_SWIGLU,     true,  true,  false, WIN_NONE, false, false, true,  1e-6},
    {"qwen3_moe", "Qwen3MoeForCausalLM",    "qwen3moe", false, false, false, true,  false, QKN_HEAD, ACT_SWIGLU,     true,  false, false, WIN_NONE, false, true,  false, 1e-6},
    {"olmoe",     "OlmoeForCausalLM",       "olmoe",    false, false, false, true,  false, QKN_FULL, ACT_SWIGLU,     true,  false, false, WIN_NONE, false, false, false, 1e-5},
};

const family_traits& traits_of(const std::string& family) {
    for (const family_traits& t : families)
        if (family == t.family) return t;
    throw std::runtime_error("tiny_family: unknown family '" + family + "'");
}

bool in_set(const gb::layer_set& s, int l) {
    return s.on && (s.layers.empty() || std::find(s.layers.begin(), s.layers.end(), l) != s.layers.end());
}
bool in_all(const gb::layer_set& s, int L) {
    for (int l = 0; l < L; l++)
        if (!in_set(s, l)) return false;
    return s.on;
}

// gb::ablation's expert list, read without naming the member where it does not exist yet (the MoE work adds it)
template <class A>
auto experts_of(const A& ab, int) -> decltype((void)ab.experts, std::vector<std::pair<int, int>>()) {
    std::vector<std::pair<int, int>> out;
    for (const auto& e : ab.experts) out.push_back({e.layer, e.head}); // head_ref: head = expert
    return out;
}
template <class A> std::vector<std::pair<int, int>> experts_of(const A&, long) { return {}; }
template <class A> auto add_expert(A& ab, int l, int e, int) -> decltype((void)ab.experts, bool()) {
    ab.experts.push_back({l, e});
    return true;
}
template <class A> bool add_expert(A&, int, int, long) { return false; }

// The router's hook point once core/run/hooks.h has it ("router"), -1 before.
int router_point() {
    try {
        return (int)gb::parse_hook_point("router");
    } catch (const gb::error&) {
        return -1;
    }
}

std::string lname(const std::string& prefix, int l, const std::string& rest) {
    return prefix + "layers." + std::to_string(l) + "." + rest;
}

} // namespace

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

family_gguf build_family_gguf(const tiny_family& m) {
    const family_spec& s = m.spec;
    const family_traits& t = traits_of(s.family);
    const int d = s.d_model, H = s.n_head, KV = s.n_kv_head, dh = s.head_dim, ff = s.d_ff, V = s.vocab;
    const std::string A = t.gguf_arch;
    family_gguf fg;
    gguf_out& g = fg.g;
    // metadata, as convert_hf_to_gguf.py writes it for the family
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

    // tensors: GGUF ne lists the fastest dimension first, so an HF [rows][cols] matrix is {cols, rows}
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& v) {
        g.f32_tensor(name, {cols, rows}, v);
    };
    auto vecw = [&](const std::string& name, const std::vector<float>& v) { g.f32_tensor(name, {(int64_t)v.size()}, v); };
    auto gain = [&](const std::string& name, const std::vector<float>& w) { // Gemma's converter adds 1 to norm gains
        std::vector<float> v = w;
        if (t.plus_one)
            for (float& x : v) x += 1.0f;
        vecw(name, v);
    };
    auto blk = [](int l, const std::string& rest) { return "blk." + std::to_string(l) + "." + rest; };

    if (s.family == "gpt_neox") {
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
        return fg;
    }

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

} // namespace

ref_trace reference_family(const tiny_family& m, const std::vector<int>& tokens, const gb::ablation& ab,
                           const family_ref_options& fo, family_ref_extra* extra) {
    const family_spec& s = m.spec;
    const family_traits& tr = traits_of(s.family);
    const int n = (int)tokens.size(), d = s.d_model, H = s.n_head, KV = s.n_kv_head, dh = s.head_dim, L = s.n_layer;
    const int V = s.vocab, qd = H * dh, kvd = KV * dh, group = H / KV;
    const int rot = s.family == "gpt_neox" ? (int)(s.rotary_pct * dh) : dh; // rotating dims of each head
    const double eps = m.spec.norm_eps;
    const std::string p = s.family == "gpt_neox" ? "gpt_neox." : "model.";
    auto W = [&](int l, const std::string& rest) -> const std::vector<float>& { return m.at(lname(p, l, rest)); };
    std::vector<std::pair<int, int>> ablated = fo.experts, from_ab = experts_of(ab, 0);
    ablated.insert(ablated.end(), from_ab.begin(), from_ab.end());
    const int router_hook = router_point();
    if (extra) extra->router.assign(L, {});

    ref_trace r;
    ref_points at(r, fo.base, L, n, d, dh);
    // every tensor is [T][width] row-major, as the hook points lay them out
    vec x((size_t)n * d);
    const std::vector<float>& emb = m.at(p + (s.family == "gpt_neox" ? "embed_in.weight" : "embed_tokens.weight"));
    const double emb_scale = tr.embed_scale ? std::sqrt((double)d) : 1.0;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = emb.at((size_t)tokens[t] * d + i) * emb_scale;
    // the family's norm of each row of a [T][d] tensor with gain g (and bias b for LayerNorm); identity when off
    auto norm_d = [&](const vec& v, const std::vector<float>& g, const std::vector<float>* b, bool off) {
        vec o = v;
        if (off) return o;
        for (int t = 0; t < n; t++) norm_row(&o[(size_t)t * d], d, g.data(), b ? b->data() : nullptr, tr.layernorm, tr.plus_one, eps);
        return o;
    };
    auto rope = [&](vec& v, int heads) { // pairs (i, i + rot/2) of each head's first rot dims, row t at position t
        for (int t = 0; t < n; t++)
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < rot / 2; i++) {
                    const double a = t * std::pow(s.rope_theta, -2.0 * i / rot);
                    double* row = &v[((size_t)t * heads + h) * dh];
                    const double x0 = row[i], x1 = row[i + rot / 2];
                    row[i] = x0 * std::cos(a) - x1 * std::sin(a);
                    row[i + rot / 2] = x1 * std::cos(a) + x0 * std::sin(a);
                }
    };
    auto dense_mlp = [&](const vec& h, int l, const char* gate, const char* up, const char* down, int width, vec* post) {
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
    };

    at.at(gb::HOOK_RESID_PRE, 0, x);
    for (int l = 0; l < L; l++) {
        // no-layernorm: every norm of the layer is the identity; the attention sublayer's (its pre-norm, the q/k
        // norms, its post-norm) and the MLP's (its pre-norm, its post-norm)
        const bool no_norm = in_set(ab.no_layernorm, l), no_res = in_set(ab.no_residual, l), no_attn = in_set(ab.no_attention, l);
        if (l > 0) at.at(gb::HOOK_RESID_PRE, l, x);
        const vec x_in = x; // the layer's input (GPT-NeoX's parallel MLP reads it)

        // ---- attention ----
        vec h = x;
        if (tr.pre_norm)
            h = s.family == "gpt_neox" ? norm_d(x, W(l, "input_layernorm.weight"), &W(l, "input_layernorm.bias"), no_norm)
                                       : norm_d(x, W(l, "input_layernorm.weight"), nullptr, no_norm);
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec q, k, v;
        if (s.family == "gpt_neox") { // rows grouped per head: [H][q k v][dh]
            vec qkv = linear(W(l, "attention.query_key_value.weight"), &W(l, "attention.query_key_value.bias"), h, n, 3 * d, d);
            q.assign((size_t)n * qd, 0), k.assign((size_t)n * kvd, 0), v.assign((size_t)n * kvd, 0);
            for (int t = 0; t < n; t++)
                for (int hd = 0; hd < H; hd++)
                    for (int e = 0; e < dh; e++) {
                        const double* src = &qkv[(size_t)t * 3 * d + (size_t)hd * 3 * dh];
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
        if (no_norm) {
            // q and k as projected
        } else if (tr.qk_norm == QKN_FULL) { // OLMo 2, OLMoE: one RMSNorm over all heads' q (and k)
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
        rope(q, H);
        rope(k, KV);
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, k);
        at.at(gb::HOOK_V, l, v);

        const double scale = s.family == "gemma2" ? 1.0 / std::sqrt((double)s.query_pre_attn_scalar) : 1.0 / std::sqrt((double)dh);
        const bool windowed = s.sliding_window > 0 && (tr.window == WIN_ALL || (tr.window == WIN_EVEN && l % 2 == 0));
        vec pattern((size_t)H * n * n, 0.0); // [H][T][T]
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
                for (int j = j0; j <= t; j++) pattern[((size_t)hd * n + t) * n + j] = sc[j] / sum;
            }
        }
        at.at(gb::HOOK_PATTERN, l, pattern);
        vec z((size_t)n * qd, 0.0); // [T][H*dh]
        for (int hd = 0; hd < H; hd++) {
            const int g = hd / group;
            if (std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{l, hd}) != ab.heads.end()) continue; // z stays 0
            for (int t = 0; t < n; t++)
                for (int j = 0; j < n; j++) // every key: the (maybe edited) pattern says which count
                    for (int e = 0; e < dh; e++)
                        z[(size_t)t * qd + hd * dh + e] += pattern[((size_t)hd * n + t) * n + j] * v[(size_t)j * kvd + g * dh + e];
        }
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
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        at.at(gb::HOOK_RESID_MID, l, x);

        // ---- MLP ----
        const vec& mlp_src = s.family == "gpt_neox" && s.parallel ? x_in : x;
        if (s.family == "gpt_neox")
            h = norm_d(mlp_src, W(l, "post_attention_layernorm.weight"), &W(l, "post_attention_layernorm.bias"), no_norm);
        else if (s.family == "gemma2")
            h = norm_d(mlp_src, W(l, "pre_feedforward_layernorm.weight"), nullptr, no_norm);
        else if (tr.pre_norm)
            h = norm_d(mlp_src, W(l, "post_attention_layernorm.weight"), nullptr, no_norm);
        else
            h = mlp_src; // OLMo 2: no norm before the MLP
        at.at(gb::HOOK_MLP_IN, l, h);
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
            // router: softmax over every expert, the top n_expert_used kept (renormalised when norm_topk), then the
            // ablated experts' weights zeroed without renormalising the others
            const int E = s.n_expert, K = s.n_expert_used;
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
            o.assign((size_t)n * d, 0.0);
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
        }
        if (tr.post_norm) o = norm_d(o, W(l, "post_feedforward_layernorm.weight"), nullptr, no_norm);
        at.at(gb::HOOK_MLP_OUT, l, o);
        // parallel: resid_post = resid_mid + mlp_out whether or not the layer's input was dropped at resid_mid
        const bool parallel = s.family == "gpt_neox" && s.parallel;
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res && !parallel ? o[i] : x[i] + o[i];
        at.at(gb::HOOK_RESID_POST, l, x);
    }
    const bool final_off = in_all(ab.no_layernorm, L);
    vec xf = s.family == "gpt_neox" ? norm_d(x, m.at(p + "final_layer_norm.weight"), &m.at(p + "final_layer_norm.bias"), final_off)
                                    : norm_d(x, m.at(p + "norm.weight"), nullptr, final_off);
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
