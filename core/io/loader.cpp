// Model loading: format detection, config parsing, tensor tables per architecture, default model lookup.
//
// Sections: memory | config.json | HF safetensors folder | load_model | default model and its SAE
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "io/gguf.h"
#include "io/llama2c.h"
#include "io/model_sources.h"
#include "io/load_weights.h"
#include "io/safetensors.h"
#include "kernels/gemm.h"
#include "model/arch.h"
#include "model/model.h"
#include "util/error.h"
#include "util/json_util.h"

namespace fs = std::filesystem;

namespace gb {

// MemAvailable from /proc/meminfo in bytes; -1 when it cannot be read (no check then)
static int64_t mem_available() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    int64_t kb;
    std::string unit;
    while (f >> key >> kb) {
        std::getline(f, unit);
        if (key == "MemAvailable:") return kb * 1024;
    }
    return -1;
}

void check_memory(const std::string& path, int64_t need, const load_options& opt) {
    const int64_t avail = opt.mem_available >= 0 ? opt.mem_available : mem_available();
    if (avail < 0 || need <= avail) return;
    char msg[128];
    std::snprintf(msg, sizeof msg, ": the model needs %.1f GB of memory, %.1f GB available", need / 1e9, avail / 1e9);
    throw error(path + msg);
}

int64_t resident_estimate(uint32_t type, int64_t values, bool keep_stored) {
    if (type == GGML_F32 || !keep_stored || !kept_as_stored(type)) return values * 4;
    // stored panels: Q8_0 with a float scale per 32 values (9 bits a value), the rest as on disk
    return type == GGML_Q8_0 ? values + values / 8 : (int64_t)ggml_bytes(type, values);
}

// ---------------------------------------------------------------------------------------------
// config.json
// ---------------------------------------------------------------------------------------------
// nesting bounded (json_util.h): a deeply nested file is an error, not a stack overflow
static nlohmann::json read_json(const std::string& path) { return read_json_file(path); }

static int json_int(const nlohmann::json& j, const std::string& path, std::initializer_list<const char*> keys,
                    int lo, int hi, int def = -1) {
    for (const char* k : keys) {
        if (!j.contains(k) || j[k].is_null()) continue;
        if (!j[k].is_number_integer()) throw error(path + ": " + k + " must be an integer");
        int64_t v = j[k].get<int64_t>();
        if (v < lo || v > hi)
            throw error(path + ": " + k + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
        return (int)v;
    }
    if (def >= 0) return def;
    throw error(path + ": missing key " + *keys.begin());
}

static float json_float(const nlohmann::json& j, const char* key, float def, const std::string& path) {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) throw error(path + ": " + key + " must be a number");
    double v = j[key].get<double>();
    if (!(v > 0) || v > 1e9) throw error(path + ": " + key + " = " + std::to_string(v) + " must be positive");
    return (float)v;
}

// rope_scaling: null, {"rope_type" (older configs: "type"): "linear", "factor"}, or Llama 3.1/3.2's
// {"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}.
// Other types (yarn, dynamic, longrope, ...) change the maths in ways not implemented here: refused by name.
static void parse_rope_scaling(model_config& c, const nlohmann::json& j, const std::string& path) {
    if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return;
    const nlohmann::json& rs = j["rope_scaling"];
    const std::string where = path + ": rope_scaling";
    if (!rs.is_object()) throw error(where + " must be an object or null");
    std::string type;
    for (const char* k : {"rope_type", "type"})
        if (rs.contains(k) && rs[k].is_string()) {
            type = rs[k].get<std::string>();
            break;
        }
    auto need = [&](const char* key) {
        if (!rs.contains(key) || rs[key].is_null()) throw error(where + " (" + type + "): missing " + key);
        return json_float(rs, key, 0.0f, where);
    };
    if (type == "default") return; // HF's name for plain RoPE
    if (type == "linear") {
        c.rope_scaling = ROPE_SCALING_LINEAR;
        c.rope_factor = need("factor");
    } else if (type == "llama3") {
        c.rope_scaling = ROPE_SCALING_LLAMA3;
        c.rope_factor = need("factor");
        c.rope_low_freq_factor = need("low_freq_factor");
        c.rope_high_freq_factor = need("high_freq_factor");
        c.rope_orig_ctx = json_int(rs, where, {"original_max_position_embeddings"}, 1, 1 << 24);
        if (c.rope_high_freq_factor <= c.rope_low_freq_factor)
            throw error(where + " (llama3): high_freq_factor " + std::to_string(c.rope_high_freq_factor) +
                        " must exceed low_freq_factor " + std::to_string(c.rope_low_freq_factor));
    } else {
        throw error(where + " type '" + (type.empty() ? std::string("(none given)") : type) +
                    "' is not supported (supported: linear, llama3)");
    }
}

static std::string json_str(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// A float that may be 0 or absent (soft-caps, window); null counts as absent
static float json_float0(const nlohmann::json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || j[key].is_null()) return 0;
    return json_float(j, key, 0, path);
}

// An encoder–decoder's stack (BART, mBART, Marian config keys): the decoder's with the LM head, or (encoder) the
// encoder's. Both share d_model, the vocabulary and the positions; the layers, heads and MLP width are each stack's.
static model_config parse_seq2seq_config(const nlohmann::json& j, const std::string& path, arch_id arch, bool encoder) {
    model_config c;
    c.arch = encoder ? encoder_arch(arch) : arch;
    c.model_type = json_str(j, "model_type");
    const std::string side = encoder ? "encoder_" : "decoder_";
    c.d_model = json_int(j, path, {"d_model"}, 1, 65536);
    c.n_layer = json_int(j, path, {(side + "layers").c_str()}, 1, 1000);
    c.n_head = c.n_kv_head = json_int(j, path, {(side + "attention_heads").c_str()}, 1, 1024);
    c.d_ff = json_int(j, path, {(side + "ffn_dim").c_str()}, 1, 1 << 20);
    c.vocab_size = json_int(j, path, {"vocab_size"}, 1, 4000000);
    if (c.d_model % c.n_head)
        throw error(path + ": d_model " + std::to_string(c.d_model) + " is not a multiple of " + side +
                    "attention_heads " + std::to_string(c.n_head));
    c.n_ctx = json_int(j, path, {"max_position_embeddings"}, 1, 1 << 20);
    c.d_head = c.d_model / c.n_head;
    c.pos_offset = arch == ARCH_MARIAN ? 0 : 2; // BART's learned table starts 2 rows in (a fairseq legacy)
    c.norm_eps = 1e-5f;                         // nn.LayerNorm's default: the configs name none
    c.qkv_bias = c.mlp_bias = true;
    c.scale_embedding = json_bool(j, "scale_embedding", false, path);
    c.tied_lm_head = json_bool(j, "tie_word_embeddings", true, path);
    c.eos_id = json_int(j, path, {"eos_token_id"}, 0, c.vocab_size - 1, 2);
    c.decoder_start_id = json_int(j, path, {"decoder_start_token_id"}, 0, c.vocab_size - 1, c.eos_id);
    if (j.contains("forced_bos_token_id") && !j["forced_bos_token_id"].is_null()) // BART: <s> after the start token
        c.forced_bos_id = json_int(j, path, {"forced_bos_token_id"}, 0, c.vocab_size - 1);
    const std::string act = json_str(j, "activation_function");
    const std::string want = arch == ARCH_MARIAN ? "swish" : "gelu";
    if (!act.empty() && act != want && !(arch == ARCH_MARIAN && act == "silu"))
        throw error(path + ": activation_function " + act + " is not supported for " + c.model_type + " (expected " + want + ")");
    if (j.contains("decoder_vocab_size") && !j["decoder_vocab_size"].is_null() &&
        json_int(j, path, {"decoder_vocab_size"}, 1, 4000000) != c.vocab_size)
        throw error(path + ": decoder_vocab_size differs from vocab_size: Marian models with separate source and "
                           "target vocabularies are not supported");
    return c;
}

// GPT-2's keys (n_layer, n_head, n_embd ...): LayerNorm, learned positions, biases, a tied head
static void parse_gpt2_keys(model_config& c, const nlohmann::json& j, const std::string& path) {
    c.n_layer = json_int(j, path, {"n_layer"}, 1, 1000);
    c.n_head = json_int(j, path, {"n_head"}, 1, 1024);
    c.d_model = json_int(j, path, {"n_embd"}, 1, 65536);
    c.vocab_size = json_int(j, path, {"vocab_size"}, 1, 4000000);
    c.n_ctx = json_int(j, path, {"n_positions", "n_ctx"}, 1, 1 << 20);
    c.d_ff = json_int(j, path, {"n_inner"}, 1, 1 << 20, 4 * c.d_model);
    c.norm_eps = json_float(j, "layer_norm_epsilon", 1e-5f, path);
    c.n_kv_head = c.n_head;
    c.qkv_bias = c.mlp_bias = true;
    c.tied_lm_head = true;
    const std::string act = json_str(j, "activation_function");
    if (!act.empty() && act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu")
        throw error(path + ": activation_function " + act + " is not supported (expected gelu_new)");
}

// The encoders' keys: BERT, RoBERTa (BERT's keys, positions offset past the padding index) and DistilBERT (its own)
static void parse_encoder_keys(model_config& c, const nlohmann::json& j, const std::string& path) {
    const bool distil = c.arch == ARCH_DISTILBERT;
    c.n_layer = json_int(j, path, {distil ? "n_layers" : "num_hidden_layers"}, 1, 1000);
    c.n_head = c.n_kv_head = json_int(j, path, {distil ? "n_heads" : "num_attention_heads"}, 1, 1024);
    c.d_model = json_int(j, path, {distil ? "dim" : "hidden_size"}, 1, 65536);
    c.d_ff = json_int(j, path, {distil ? "hidden_dim" : "intermediate_size"}, 1, 1 << 20);
    c.vocab_size = json_int(j, path, {"vocab_size"}, 1, 4000000);
    const int n_pos = json_int(j, path, {"max_position_embeddings"}, 1, 1 << 20);
    c.norm_eps = distil ? 1e-12f : json_float(j, "layer_norm_eps", 1e-12f, path);
    c.n_token_type = distil ? 0 : json_int(j, path, {"type_vocab_size"}, 1, 1 << 16, 2);
    // RoBERTa numbers positions from its padding index + 1: rows 0 and 1 of the table are never used
    c.pos_offset = c.arch == ARCH_ROBERTA ? json_int(j, path, {"pad_token_id"}, 0, 1 << 20, 1) + 1 : 0;
    if (n_pos <= c.pos_offset)
        throw error(path + ": max_position_embeddings " + std::to_string(n_pos) + " leaves no position after the offset " +
                    std::to_string(c.pos_offset));
    c.n_ctx = n_pos - c.pos_offset;
    c.qkv_bias = c.mlp_bias = true;
    c.tied_lm_head = json_bool(j, distil ? "tie_weights_" : "tie_word_embeddings", true, path);
    const std::string act = json_str(j, distil ? "activation" : "hidden_act");
    if (!act.empty() && act != "gelu")
        throw error(path + ": " + (distil ? "activation " : "hidden_act ") + act + " is not supported for " + c.model_type +
                    " (expected gelu)");
    const std::string pos = json_str(j, "position_embedding_type");
    if (!pos.empty() && pos != "absolute")
        throw error(path + ": position_embedding_type " + pos + " is not supported (expected absolute)");
    if (json_bool(j, "is_decoder", false, path))
        throw error(path + ": is_decoder is true: a BERT used as a causal decoder is not supported");
}

// The vision models' keys (ViT, DeiT image classifiers): the image and patch sizes give the tokens (prefix + grid²),
// the classes take the vocabulary's place
static void parse_vision_keys(model_config& c, const nlohmann::json& j, const std::string& path) {
    c.n_layer = json_int(j, path, {"num_hidden_layers"}, 1, 1000);
    c.n_head = c.n_kv_head = json_int(j, path, {"num_attention_heads"}, 1, 1024);
    c.d_model = json_int(j, path, {"hidden_size"}, 1, 65536);
    c.d_ff = json_int(j, path, {"intermediate_size"}, 1, 1 << 20);
    c.norm_eps = json_float(j, "layer_norm_eps", 1e-12f, path);
    c.image_size = json_int(j, path, {"image_size"}, 1, 1 << 14, 224);
    c.patch_size = json_int(j, path, {"patch_size"}, 1, 1 << 14, 16);
    c.n_channels = json_int(j, path, {"num_channels"}, 1, 16, 3);
    if (c.image_size % c.patch_size)
        throw error(path + ": image_size " + std::to_string(c.image_size) + " is not a multiple of patch_size " +
                    std::to_string(c.patch_size));
    c.n_prefix = c.arch == ARCH_DEIT ? 2 : 1;
    c.n_ctx = c.n_prefix + c.grid() * c.grid();
    // the classes: id2label names them (num_labels alone gives their count)
    const bool named = j.contains("id2label") && j["id2label"].is_object() && !j["id2label"].empty();
    c.vocab_size = named ? (int)j["id2label"].size() : json_int(j, path, {"num_labels"}, 1, 1 << 20);
    c.qkv_bias = json_bool(j, "qkv_bias", true, path);
    c.mlp_bias = true;
    c.tied_lm_head = false;
    const std::string act = json_str(j, "hidden_act");
    if (!act.empty() && act != "gelu")
        throw error(path + ": hidden_act " + act + " is not supported for " + c.model_type + " (expected gelu)");
}

// The Llama-style keys every other family shares, RoPE's (theta, rope_scaling, the rotary fraction) included
static void parse_llama_keys(model_config& c, float& rotary_fraction, const nlohmann::json& j, const std::string& path) {
    const arch_info& arch = arch_table(c.arch);
    c.n_layer = json_int(j, path, {"num_hidden_layers"}, 1, 1000);
    c.n_head = json_int(j, path, {"num_attention_heads"}, 1, 1024);
    c.n_kv_head = json_int(j, path, {"num_key_value_heads"}, 1, 1024, c.n_head);
    c.d_model = json_int(j, path, {"hidden_size"}, 1, 65536);
    c.d_ff = json_int(j, path, {"intermediate_size"}, 1, 1 << 20, 0);
    c.vocab_size = json_int(j, path, {"vocab_size"}, 1, 4000000);
    c.n_ctx = json_int(j, path, {"max_position_embeddings"}, 1, 1 << 22);
    c.norm_eps = json_float(j, arch.norm == NORM_LAYERNORM ? "layer_norm_eps" : "rms_norm_eps",
                            arch.norm == NORM_LAYERNORM ? 1e-5f : 1e-6f, path);
    c.rope_theta = json_float(j, "rope_theta", 10000.0f, path);
    c.rope = ROPE_HALF; // HF checkpoints rotate halves (the converter permuted q/k rows for it)
    c.qkv_bias = c.model_type == "qwen2" || c.model_type == "qwen2_moe" || json_bool(j, "attention_bias", false, path);
    c.mlp_bias = false;
    // Gemma and Qwen3 name their head size; elsewhere it is hidden_size / heads
    if (j.contains("head_dim") && !j["head_dim"].is_null()) c.d_head = json_int(j, path, {"head_dim"}, 1, 4096);
    c.tied_lm_head = json_bool(j, "tie_word_embeddings", c.arch == ARCH_GEMMA || c.arch == ARCH_GEMMA2, path);
    if (c.n_head % c.n_kv_head)
        throw error(path + ": num_attention_heads " + std::to_string(c.n_head) + " is not a multiple of num_key_value_heads " +
                    std::to_string(c.n_kv_head));
    parse_rope_scaling(c, j, path);
    rotary_fraction = json_float(j, "partial_rotary_factor", 1, path);
}

// GPT-NeoX over the Llama keys: biases, the parallel block, its own names for RoPE's base and fraction
static void parse_neox_keys(model_config& c, float& rotary_fraction, const nlohmann::json& j, const std::string& path) {
    c.qkv_bias = json_bool(j, "attention_bias", true, path);
    c.mlp_bias = true;
    c.parallel = json_bool(j, "use_parallel_residual", true, path);
    c.rope_theta = json_float(j, "rotary_emb_base", c.rope_theta, path);
    rotary_fraction = json_float(j, "rotary_pct", 1, path);
    const std::string act = json_str(j, "hidden_act");
    if (!act.empty() && act != "gelu")
        throw error(path + ": hidden_act " + act + " is not supported for gpt_neox (expected gelu)");
}

// Gemma's activation; Gemma 2's attention scale, soft-caps and its sliding window on every other layer
static void parse_gemma_keys(model_config& c, const nlohmann::json& j, const std::string& path) {
    for (const char* k : {"hidden_activation", "hidden_act"}) {
        const std::string act = json_str(j, k);
        if (!act.empty() && act != "gelu_pytorch_tanh" && act != "gelu")
            throw error(path + ": " + k + " " + act + " is not supported for Gemma (expected gelu_pytorch_tanh)");
        if (!act.empty()) break;
    }
    if (c.arch == ARCH_GEMMA2) {
        const float qs = json_float0(j, "query_pre_attn_scalar", path);
        if (qs > 0) c.attn_scale = 1.0f / std::sqrt(qs);
        c.attn_softcap = json_float0(j, "attn_logit_softcapping", path);
        c.final_softcap = json_float0(j, "final_logit_softcapping", path);
        c.sliding_window = json_int(j, path, {"sliding_window"}, 1, 1 << 24, 0);
        c.window_every = 2; // even layers slide, odd layers see everything
    }
}

// The MoE families' experts: Mixtral's num_local_experts (experts as wide as d_ff), Qwen2-MoE's, Qwen3-MoE's and
// OLMoE's num_experts (Qwen2-MoE with a shared expert); the dense-layer options are refused
static void parse_moe_keys(model_config& c, const nlohmann::json& j, const std::string& path) {
    if (c.arch == ARCH_MIXTRAL) {
        c.n_expert = json_int(j, path, {"num_local_experts"}, 1, 4096);
        c.n_expert_used = json_int(j, path, {"num_experts_per_tok"}, 1, 4096);
        c.d_ff_expert = c.d_ff;
        c.norm_topk = true;
        return;
    }
    c.n_expert = json_int(j, path, {"num_experts"}, 1, 4096);
    c.n_expert_used = json_int(j, path, {"num_experts_per_tok"}, 1, 4096);
    c.d_ff_expert = c.arch == ARCH_OLMOE ? c.d_ff : json_int(j, path, {"moe_intermediate_size"}, 1, 1 << 20);
    if (c.arch == ARCH_QWEN2_MOE) c.d_ff_shared = json_int(j, path, {"shared_expert_intermediate_size"}, 0, 1 << 20, 0);
    c.norm_topk = json_bool(j, "norm_topk_prob", c.arch == ARCH_QWEN3_MOE, path);
    // every layer a MoE layer: Qwen's dense-layer options are refused, not silently ignored
    if (json_int(j, path, {"decoder_sparse_step"}, 0, 1000, 1) != 1)
        throw error(path + ": decoder_sparse_step other than 1 (dense layers between MoE layers) is not supported");
    if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() && !j["mlp_only_layers"].empty())
        throw error(path + ": mlp_only_layers (dense layers among MoE layers) is not supported");
    if (j.contains("clip_qkv") && !j["clip_qkv"].is_null())
        throw error(path + ": clip_qkv (OLMoE's q/k/v clipping) is not supported");
}

// Sliding windows: Mistral and Phi-3 on every layer; Qwen2 (and Qwen2-MoE) only with use_sliding_window, from
// layer max_window_layers on
static void parse_windows(model_config& c, const nlohmann::json& j, const std::string& path) {
    const std::string& type = c.model_type;
    if (type == "mistral" || c.arch == ARCH_PHI3 || c.arch == ARCH_MIXTRAL) {
        c.sliding_window = json_int(j, path, {"sliding_window"}, 1, 1 << 24, 0);
    } else if ((type == "qwen2" || type == "qwen2_moe") && json_bool(j, "use_sliding_window", false, path)) {
        c.sliding_window = json_int(j, path, {"sliding_window"}, 1, 1 << 24, 0);
        c.window_first = json_int(j, path, {"max_window_layers"}, 0, 1000, 0);
    }
}

static model_config parse_hf_config(const std::string& path) {
    nlohmann::json j = read_json(path);
    if (!j.is_object()) throw error(path + ": not a JSON object");
    model_config c;
    float rotary_fraction = 1; // of each head's dimensions that rotate (partial rotary)
    c.model_type = json_str(j, "model_type");
    c.arch = arch_from_hf(c.model_type, path);
    const arch_info& arch = arch_table(c.arch);
    if (arch.kind == KIND_SEQ2SEQ) return parse_seq2seq_config(j, path, c.arch, false);
    if (c.arch == ARCH_GPT2) parse_gpt2_keys(c, j, path);
    else if (arch.mlm_head) parse_encoder_keys(c, j, path);
    else if (arch.kind == KIND_VISION) parse_vision_keys(c, j, path);
    else parse_llama_keys(c, rotary_fraction, j, path);
    switch (c.arch) {
    case ARCH_GPT_NEOX: parse_neox_keys(c, rotary_fraction, j, path); break;
    case ARCH_GEMMA:
    case ARCH_GEMMA2: parse_gemma_keys(c, j, path); break;
    case ARCH_MIXTRAL:
    case ARCH_QWEN2_MOE:
    case ARCH_QWEN3_MOE:
    case ARCH_OLMOE: parse_moe_keys(c, j, path); break;
    default: break;
    }
    parse_windows(c, j, path);
    if (arch.kind == KIND_MOE) {
        if (c.n_expert_used > c.n_expert)
            throw error(path + ": num_experts_per_tok " + std::to_string(c.n_expert_used) + " exceeds the " +
                        std::to_string(c.n_expert) + " experts");
        c.d_ff = std::max(c.d_ff_expert, c.d_ff_shared);
    }
    if (c.d_ff <= 0) throw error(path + ": missing key intermediate_size");
    if (c.d_head == 0) {
        if (c.d_model % c.n_head != 0)
            throw error(path + ": hidden size " + std::to_string(c.d_model) + " is not divisible by " +
                        std::to_string(c.n_head) + " heads");
        c.d_head = c.d_model / c.n_head;
    }
    if (rotary_fraction < 1) { // a fraction of the head, rounded down to whole pairs (as int(d_head * fraction))
        c.rope_dims = (int)(c.d_head * (double)rotary_fraction) & ~1;
        if (c.rope_dims <= 0) throw error(path + ": the rotary fraction leaves no dimension to rotate");
    }
    if (c.parallel && !arch.parallel) throw error("internal: parallel blocks for " + std::string(arch.name));
    return c;
}

// ---------------------------------------------------------------------------------------------
// HF safetensors folder
// ---------------------------------------------------------------------------------------------
// An encoder's tensor name without its model's prefix ("bert.embeddings..." -> "embeddings..."), as a bare
// BertModel / RobertaModel / DistilBertModel saves them; "" for other names.
static std::string without_model_prefix(const std::string& name) {
    for (const char* p : {"bert.", "roberta.", "distilbert."})
        if (name.rfind(p, 0) == 0) return name.substr(std::string(p).size());
    return "";
}

// Looks a tensor up, in one file or the shards of a sharded checkpoint, with or without a prefix
// ("transformer." for GPT-2 exports, none for a bare encoder).
struct tensor_source : tensor_reader {
    std::vector<safetensors_file> files;
    bool keep_stored = true;
    const st_tensor* find(const std::string& name, const safetensors_file** in = nullptr) const {
        for (const safetensors_file& f : files)
            for (const std::string& n : {name, "transformer." + name, without_model_prefix(name)}) {
                auto it = f.tensors.find(n);
                if (it != f.tensors.end()) {
                    if (in) *in = &f;
                    return &it->second;
                }
            }
        return nullptr;
    }
    const st_tensor& need(const std::string& name, const std::vector<int64_t>& shape, const safetensors_file** in) const {
        const st_tensor* t = find(name, in);
        if (!t) throw error(files.front().file->path + ": missing tensor " + name);
        if (t->shape != shape)
            throw error((*in)->file->path + ": tensor " + name + ": expected shape " + shape_str(shape) + ", found " +
                        shape_str(t->shape));
        return *t;
    }
    static uint32_t type_of(const st_tensor& t) { return t.dtype == ST_F16 ? GGML_F16 : t.dtype == ST_BF16 ? GGML_BF16 : GGML_F32; }

    const std::string& path() const override { return files.front().file->path; }
    bool has(const std::string& name) const override { return find(name) != nullptr; }
    std::vector<float> floats(const std::string& name, int64_t n) const override {
        const safetensors_file* f = nullptr;
        const st_tensor* t = find(name, &f);
        if (!t) throw error(path() + ": missing tensor " + name);
        // a vector [n], or a [1][n] row (Qwen2-MoE's shared_expert_gate)
        const std::vector<int64_t> shape = t->shape.size() == 2 && t->shape[0] == 1 ? std::vector<int64_t>{1, n}
                                           : t->shape.size() == 2                  ? std::vector<int64_t>{n, 1}
                                                                                   : std::vector<int64_t>{n};
        const st_tensor& found = need(name, shape, &f); // (before *f: argument order is unspecified)
        return tensor_f32(*f, found, shape);
    }
    std::vector<float> floats2(const std::string& name, int64_t rows, int64_t cols) const override {
        const safetensors_file* f = nullptr;
        const st_tensor& t = need(name, {rows, cols}, &f);
        return tensor_f32(*f, t, {rows, cols});
    }
    std::vector<float> floats_shaped(const std::string& name, const std::vector<int64_t>& shape) const override {
        const safetensors_file* f = nullptr;
        const st_tensor& t = need(name, shape, &f);
        return tensor_f32(*f, t, shape);
    }
    // nn.Linear [out][in] (out_major), or Conv1D [in][out]
    matrix_part part(const std::string& name, int64_t in, int64_t out) const override {
        const safetensors_file* f = nullptr;
        const st_tensor& t = need(name, conv1d ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in}, &f);
        return {type_of(t), t.data, out, !conv1d};
    }
    matrix_part expert_part(const std::string& name, int64_t, int64_t, int64_t, int) const override {
        throw error("internal: " + name + ": HF checkpoints store a tensor per expert");
    }
    // read in place from the mapping (as f32 copy when !keep_stored)
    row_table table(const std::string& name, int64_t rows, int64_t cols) const override {
        const safetensors_file* f = nullptr;
        const st_tensor& t = need(name, {rows, cols}, &f);
        if (!keep_stored && type_of(t) != GGML_F32) return table_from_f32(tensor_f32(*f, t, {rows, cols}), rows, cols);
        return table_view(type_of(t), t.data, rows, cols, f->file);
    }
    weight_matrix matrix(const std::vector<matrix_part>& parts, int64_t in) const override {
        weight_matrix w = pack_parts(parts, in, keep_stored);
        for (const matrix_part& p : parts)
            for (const safetensors_file& f : files) f.file->release(p.data, ggml_bytes(p.type, in * p.out));
        return w;
    }
};

static bool path_exists(const fs::path& p) {
    std::error_code ec;
    return fs::exists(p, ec);
}

// An image classifier's "vocabulary": its classes, id2label's names in id order ("class 7" where none is given),
// shown wherever a decoder shows tokens (top-k, the logit lens); nothing is encoded with it.
static tokenizer class_labels(const std::string& config_path, int n) {
    nlohmann::json j = read_json(config_path);
    tokenizer t;
    t.kind = TOK_NONE;
    t.vocab.resize(n);
    for (int i = 0; i < n; i++) t.vocab[i] = "class " + std::to_string(i);
    if (!j.contains("id2label") || !j["id2label"].is_object()) return t;
    for (auto it = j["id2label"].begin(); it != j["id2label"].end(); ++it) {
        char* end = nullptr;
        const long id = std::strtol(it.key().c_str(), &end, 10);
        if (it.key().empty() || *end || id < 0 || id >= n || !it.value().is_string())
            throw error(config_path + ": id2label entry '" + it.key() + "' is not a class id 0.." + std::to_string(n - 1) +
                        " with a name");
        t.vocab[id] = it.value().get<std::string>();
    }
    return t;
}

// How the app and the CLI turn an image into the model's pixels: the folder's preprocessor_config.json, or
// ViTImageProcessor's defaults (resize to the model's size, bilinear, scale to 0..1, normalise by 0.5 / 0.5)
static image_preprocess vision_preprocess(const fs::path& dir, const model_config& c) {
    const fs::path p = dir / "preprocessor_config.json";
    image_preprocess ip;
    if (path_exists(p)) ip = read_preprocessor_config(p.string());
    else ip.resize_w = ip.resize_h = c.image_size;
    const int w = ip.do_center_crop ? ip.crop_w : ip.do_resize && !ip.shortest_edge ? ip.resize_w : 0;
    const int h = ip.do_center_crop ? ip.crop_h : ip.do_resize && !ip.shortest_edge ? ip.resize_h : 0;
    if (w != c.image_size || h != c.image_size)
        throw error(p.string() + ": the images it makes are " + std::to_string(w) + "x" + std::to_string(h) +
                    " pixels, the model reads " + std::to_string(c.image_size) + "x" + std::to_string(c.image_size));
    return ip;
}

static model load_hf_folder(const fs::path& dir, const load_options& opt) {
    model m;
    m.format = "hf-safetensors";
    const std::string config_path = (dir / "config.json").string();
    m.config = json_guard(config_path, [&] { return parse_hf_config(config_path); });
    if (opt.progress) opt.progress(0.02f, "config");
    tensor_source src;
    fs::path index = dir / "model.safetensors.index.json";
    if (path_exists(dir / "model.safetensors")) {
        src.files.push_back(open_safetensors((dir / "model.safetensors").string()));
    } else if (path_exists(index)) { // sharded: the index maps each tensor to its file
        nlohmann::json j = read_json(index.string());
        if (!j.contains("weight_map") || !j["weight_map"].is_object())
            throw error(index.string() + ": no weight_map object");
        std::vector<std::string> shards;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string()) throw error(index.string() + ": weight_map entry " + it.key() + " is not a file name");
            std::string f = it.value();
            if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
                throw error(index.string() + ": shard name '" + f + "' must be a plain file name");
            if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
        }
        if (shards.empty() || shards.size() > 10000) throw error(index.string() + ": no shards listed");
        for (const std::string& f : shards) src.files.push_back(open_safetensors((dir / f).string()));
    } else {
        throw error(dir.string() + ": no model.safetensors (or model.safetensors.index.json)");
    }
    src.keep_stored = opt.keep_stored;
    int64_t need = 0; // before anything large is allocated
    for (const safetensors_file& f : src.files)
        for (const auto& [name, t] : f.tensors) {
            int64_t values = 1;
            for (int64_t v : t.shape) values *= v;
            need += resident_estimate(tensor_source::type_of(t), values, opt.keep_stored);
        }
    check_memory(dir.string(), need, opt);
    if (opt.progress) opt.progress(0.08f, "tensors");
    src.conv1d = arch_table(m.config.arch).names->hf_conv1d;
    load_weights(m.weights, m.config, src, opt.progress);
    m.config.tied_lm_head = m.weights.lm_head.empty();
    std::shared_ptr<model> enc;
    if (kind_of(m.config) == KIND_SEQ2SEQ) { // the encoder stack: its own layers from the same files
        enc = std::make_shared<model>();
        enc->format = m.format;
        enc->config = json_guard(config_path, [&] {
            return parse_seq2seq_config(read_json(config_path), config_path, m.config.arch, true);
        });
        load_weights(enc->weights, enc->config, src, {});
        enc->weights.tok_emb = m.weights.tok_emb; // one table, shared
    }
    for (const safetensors_file& f : src.files) f.file->release();
    if (kind_of(m.config) == KIND_VISION) {
        m.tok = class_labels(config_path, m.config.vocab_size);
        m.image_prep = vision_preprocess(dir, m.config);
        return m;
    }
    m.tok = load_folder_tokenizer(dir.string(), m.config.model_type);
    if (enc) { // the source's pieces come from the same tokenizer
        enc->tok = m.tok;
        enc->path = dir.string();
        m.encoder = std::move(enc);
    }
    if ((int)m.tok.vocab.size() > m.config.vocab_size)
        throw error(dir.string() + ": tokenizer has " + std::to_string(m.tok.vocab.size()) +
                    " tokens but the model's vocab_size is " + std::to_string(m.config.vocab_size));
    return m;
}

static bool all_finite(const std::vector<float>& v) { return all_finite(v.data(), v.size()); }

static bool all_finite(const row_table& t) { return stored_finite(t.data, t.type, (int64_t)t.size()); }

static std::string first_nonfinite_weight(const model_weights& w) {
    if (!all_finite(w.tok_emb)) return "token embedding";
    if (!all_finite(w.pos_emb)) return "position embedding";
    for (size_t l = 0; l < w.layers.size(); l++) {
        const layer_weights& L = w.layers[l];
        // matrices were checked when packed (pack_matrix), vectors are checked here; in the forward's order
        const std::pair<const char*, bool> parts[] = {
            {"norm1 gain", all_finite(L.norm1_g)}, {"norm1 bias", all_finite(L.norm1_b)}, {"w_qkv", L.w_qkv.finite},
            {"b_qkv", all_finite(L.b_qkv)},        {"w_o", L.w_o.finite},                 {"b_o", all_finite(L.b_o)},
            {"norm2 gain", all_finite(L.norm2_g)}, {"norm2 bias", all_finite(L.norm2_b)}, {"w_gate", L.w_gate.finite},
            {"w_up", L.w_up.finite},               {"b_up", all_finite(L.b_up)},          {"w_down", L.w_down.finite},
            {"b_down", all_finite(L.b_down)},      {"q_norm", all_finite(L.q_norm)},     {"k_norm", all_finite(L.k_norm)},
            {"post-attention norm", all_finite(L.post_attn_norm)}, {"post-MLP norm", all_finite(L.post_mlp_norm)},
            {"router", L.router.finite},           {"shared expert gate", all_finite(L.shared_gate)}};
        for (const auto& [name, finite] : parts)
            if (!finite) return "layer " + std::to_string(l) + " " + name;
        for (size_t e = 0; e < L.exp_gate.size(); e++)
            if (!L.exp_gate[e].finite || !L.exp_up[e].finite || !L.exp_down[e].finite)
                return "layer " + std::to_string(l) + " expert " + std::to_string(e);
    }
    if (!all_finite(w.normf_g)) return "final norm gain";
    if (!all_finite(w.normf_b)) return "final norm bias";
    if (!all_finite(w.lm_head)) return "lm_head";
    return "";
}

model_config read_hf_config(const std::string& config_path) {
    return json_guard(config_path, [&] { return parse_hf_config(config_path); });
}

bool is_gguf_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char magic[4] = {0, 0, 0, 0};
    return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

// A name's download, reported through load_options' progress as "downloading FILE" with its fraction
static std::string resolve_name(const std::string& name, const load_options& opt) {
    resolve_options ro;
    if (opt.progress)
        ro.progress = [&](const download_progress& d) {
            opt.progress(d.total > 0 ? (float)((double)d.done / (double)d.total) : 0.0f, "downloading " + d.file);
            return true;
        };
    return resolve_model(name, ro);
}

model load_model(const std::string& path, const load_options& opt) {
    if (path.empty()) throw error("no model path given");
    if (is_model_name(path)) return load_model(resolve_name(path, opt), opt);
    fs::path p(path);
    std::error_code ec;
    if (!fs::exists(p, ec)) throw error("cannot open " + path + ": no such file or directory");
    if (opt.progress) opt.progress(0.0f, "opening");
    model m;
    if (fs::is_directory(p, ec)) {
        m = load_hf_folder(p, opt);
    } else if (p.filename() == "model.safetensors" || p.filename() == "config.json") {
        m = load_hf_folder(p.parent_path().empty() ? fs::path(".") : p.parent_path(), opt);
    } else if (p.extension() == ".gguf" || is_gguf_file(path)) {
        m = load_gguf(path, opt);
    } else if (p.extension() == ".bin") {
        m = load_llama2c(path, opt.tokenizer_path, opt.progress);
    } else {
        throw error(path + ": unknown model format (expected a Hugging Face folder with config.json, a GGUF file, a "
                           "llama2.c .bin, or a name: hf:ORG/NAME, ollama:NAME:TAG)");
    }
    if (arch_table(m.config.arch).pos == POS_ROPE && m.config.rope_freq.empty()) { // GGUF may have filled it
        if (m.config.d_head % 2) throw error(path + ": head size " + std::to_string(m.config.d_head) + " is odd (RoPE rotates pairs)");
        rope_init_freqs(m.config);
    }
    m.path = path;
    m.nonfinite_tensor = first_nonfinite_weight(m.weights);
    const model_weights& w = m.weights;
    if (kind_of(m.config) != KIND_VISION && (w.tok_emb.rows != m.config.vocab_size || w.tok_emb.cols != m.config.d_model))
        throw error("internal: token embedding table shape");
    m.weights.head = pack_head(w.unembedding());
    if (opt.progress) opt.progress(1.0f, "done");
    return m;
}

// ---------------------------------------------------------------------------------------------
// The default model shipped in assets/models/
// ---------------------------------------------------------------------------------------------
static std::string find_in_assets(const fs::path& assets) {
    fs::path models = assets / "models";
    if (!path_exists(models)) return "";
    std::ifstream def(models / "DEFAULT");
    std::string name;
    if (def && std::getline(def, name)) {
        while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
        if (!name.empty() && path_exists(models / name / "config.json")) return (models / name).string();
    }
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(models, ec))
        if (path_exists(e.path() / "config.json")) found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    return found.empty() ? "" : found.front();
}

std::string default_model_path() {
    std::vector<fs::path> roots;
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        fs::path exe_dir = fs::path(std::string(buf, (size_t)n)).parent_path();
        roots.push_back(exe_dir / "assets");
        roots.push_back(exe_dir.parent_path() / "assets");
        roots.push_back(exe_dir.parent_path() / "share" / "glassbox" / "assets");
    }
#ifdef GLASSBOX_ASSETS_DIR
    roots.push_back(GLASSBOX_ASSETS_DIR);
#endif
    for (const fs::path& r : roots) {
        std::string s = find_in_assets(r);
        if (!s.empty()) return s;
    }
    throw error("no default model found in assets/models/ (pass --model PATH, or see tools/train_default_model.py)");
}

// <assets>/models/<name> of the default model when m is it (the paths compared canonically), else empty
static fs::path default_model_folder(const model& m) {
    if (m.path.empty()) return {};
    std::string def;
    try {
        def = default_model_path();
    } catch (const error&) {
        return {};
    }
    std::error_code e1, e2;
    const fs::path a = fs::weakly_canonical(fs::path(m.path), e1), b = fs::weakly_canonical(fs::path(def), e2);
    return e1 || e2 || a != b ? fs::path() : b;
}

std::string default_sae_path(const model& m) {
    const fs::path folder = default_model_folder(m);
    if (folder.empty()) return "";
    const fs::path saes = folder.parent_path().parent_path() / "saes"; // <assets>/models/<name> -> <assets>/saes
    std::ifstream f(saes / "DEFAULT");
    std::string name;
    if (!f || !std::getline(f, name)) return "";
    while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
    if (name.empty() || !path_exists(saes / name / "cfg.json")) return "";
    return (saes / name).string();
}

std::string default_transcoders_path(const model& m) {
    const fs::path folder = default_model_folder(m);
    if (folder.empty()) return "";
    const fs::path set = folder.parent_path().parent_path() / "transcoders" / folder.filename();
    return path_exists(set / "layer_0.safetensors") ? set.string() : "";
}

} // namespace gb
