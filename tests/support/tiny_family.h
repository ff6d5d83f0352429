// Tiny random models of the architecture families beyond GPT-2 and Llama, written by the tests in both Hugging
// Face form (config.json, model.safetensors, vocab.json + merges.txt) and GGUF form (llama.cpp's names, metadata
// and conversions), and a plain double-precision reference forward for them written from the families' published
// semantics (the HF modeling code; llama.cpp's converter for the GGUF side), not from core/.
//
// Families (HF model_type): gpt_neox, gemma, gemma2, phi3, olmo2, qwen3, llama, mistral, qwen2, and the
// mixtures of experts mixtral, qwen2_moe, qwen3_moe, olmoe.
//
// Hook-point conventions the reference uses where docs/models.md does not (yet) say (see tiny_family.cpp's top):
// - parallel residual (GPT-NeoX): mlp_in = norm2(resid_pre of the layer); resid_mid = resid_pre + attn_out;
//   resid_post = resid_mid + mlp_out. no-residual drops resid_pre only: resid_mid = attn_out, resid_post =
//   attn_out + mlp_out.
// - post-norm families (Gemma 2, OLMo 2): attn_out and mlp_out are the sublayer outputs after their post norm
//   (what is added to the stream).
// - no-layernorm at a layer makes every norm of it the identity: the pre-norms (where the family has them), the
//   q/k norms (OLMo 2, Qwen3, Qwen3-MoE, OLMoE), the post-norms on the sublayer outputs (Gemma 2, OLMo 2); the
//   final norm too when it covers every layer (docs/models.md "Families", docs/interpretability.md "Ablations").
// - MoE: mlp_post is not kept (no single width); the router's mixing weights [T][E] (0 for unchosen experts,
//   after expert ablation) come back through family_ref_extra.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf_writer.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "ref_trace.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "run/record.h"
#include "tiny_llama.h" // expect_record_matches: one comparison of a record with a reference for every family

struct family_spec {
    std::string family = "llama"; // HF model_type
    int n_layer = 2, d_model = 32, n_head = 4, n_kv_head = 2, head_dim = 0 /*0: d_model / n_head*/, d_ff = 48,
        vocab = 300, n_ctx = 64;
    int n_expert = 4, n_expert_used = 2, d_ff_expert = 24, d_ff_shared = 32; // MoE families only
    int sliding_window = 0;           // mistral / qwen2 (use_sliding_window, all layers) / phi3 / gemma2 (even layers)
    float rotary_pct = 1.0f;          // gpt_neox: leading fraction of each head's dimensions that rotates
    bool parallel = true;             // gpt_neox: use_parallel_residual
    float attn_softcap = 0, final_softcap = 0; // gemma2 (0: none)
    float query_pre_attn_scalar = 0;  // gemma2: scores scaled by this^-1/2 (0: head_dim, as llama.cpp assumes)
    double rope_theta = 10000;
    double norm_eps = 0;              // 0: the family's usual epsilon (1e-5 or 1e-6)
    std::optional<bool> norm_topk;    // MoE: renormalise the chosen experts' weights (unset: the family's default)
    std::optional<bool> tied;         // lm head is the embedding (unset: the family's default)
    std::optional<bool> qkv_bias;     // q/k/v biases (unset: qwen2 and qwen2_moe yes, the others no; gpt_neox always)
    uint32_t seed = 1;
    float std = 0.25f;                // standard deviation of the weight matrices
};

// The family's defaults filled in (head_dim, tied, norm_topk, qkv_bias, norm_eps, kv heads for gpt_neox, the
// scalar); the window and the experts are cleared for families that have none.
family_spec resolve_family_spec(const family_spec& s);

struct tiny_family {
    std::string hf_dir, gguf_path;                // both written
    family_spec spec;                             // resolved: every optional set
    std::map<std::string, std::vector<float>> w;  // the weights under their HF names and HF layouts ([out][in])
    const std::vector<float>& at(const std::string& name) const;
};

// dir/hf/ (config.json, model.safetensors, vocab.json + merges.txt) and dir/model.gguf (F32, llama.cpp's layout).
tiny_family write_tiny_family(const std::string& dir, const family_spec& s);

// The pieces write_tiny_family writes, for tests that change one before writing.
// config.json as the family's HF config class reads it, and model.safetensors' tensors (HF names, F32)
std::string family_hf_config(const tiny_family& m);
std::vector<gb::st_out> family_hf_tensors(const tiny_family& m);
// The GGUF: metadata, tensors, and the boolean keys (written after the others; gguf_out has no boolean type).
struct family_gguf {
    gguf_out g;
    std::vector<std::pair<std::string, bool>> bools;
    void write(const std::string& path) const;
    bool remove_tensor(const std::string& name); // false when there is none of that name
};
// type: the matrices with whole blocks along their rows are stored in it (F32, F16, BF16, Q8_0, Q4_K; routers stay
// F32, as llama.cpp's converter keeps them); norms, biases and the rest F32.
family_gguf make_family_gguf(const tiny_family& m, uint32_t type = gb::GGML_F32);
// m with the weights make_family_gguf(m, type) stores in type rounded through it: what that GGUF holds.
tiny_family quantized_family(const tiny_family& m, uint32_t type);

// Expert ablation and the router's output, beside gb::ablation until it carries experts itself.
struct family_ref_options {
    ref_options base;                            // patches and edits (ref_trace.h)
    std::vector<std::pair<int, int>> experts;    // (layer, expert): its mixing weight is 0 for every token,
                                                 // the others are not renormalised (added to ab's own, if any)
};
struct family_ref_extra {
    std::vector<std::vector<double>> router;     // [L][T][E] mixing weights (0: not chosen or ablated)
};
// logits [T][V], attention [L][H][T][T], resid_norm [2L+1][T] and the intermediates (ref_trace.h) of m on tokens.
ref_trace reference_family(const tiny_family& m, const std::vector<int>& tokens, const gb::ablation& ab,
                           const family_ref_options& opt = {}, family_ref_extra* extra = nullptr);

// The (layer, expert) pairs gb::ablation names, once it has an `experts` member ({layer, expert} items); empty
// before. set_ablated_expert adds one and returns false when gb::ablation cannot carry it yet.
std::vector<std::pair<int, int>> ablated_experts(const gb::ablation& ab);
bool set_ablated_expert(gb::ablation& ab, int layer, int expert);

// The ablations every family runs (2 layers, 4 heads): none, no-attention, no-residual (all, one layer), heads,
// no-layernorm (all layers, layer 0, layer 1), everything at layer 0, the switches at once on layers 0 and 1, and
// for MoE families two experts.
std::vector<std::pair<std::string, gb::ablation>> family_ablation_cases(const family_spec& s);

// Runs m under every family_ablation_cases case and expects the record, attn_out and mlp_out kept too, to match
// reference_family(tm) (expect_record_matches, tiny_llama.h), and the router's mixing weights for MoE families.
void expect_family_matches_reference(const gb::model& m, const tiny_family& tm, const std::vector<int>& tokens,
                                     const std::string& label);
// How far two references' logits are apart (scaled like the tolerance): a setting a test relies on must move
// the logits far more than 1e-4, or a loader ignoring it would pass unnoticed.
double family_reference_gap(const tiny_family& a, const tiny_family& b, const std::vector<int>& tokens);
