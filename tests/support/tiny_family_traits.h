// What each family of tests/support/tiny_family.cpp computes and how its files name things: the family table and
// the small helpers that the writers (tiny_family.cpp) and the reference forward (tiny_family_reference.cpp) share.
// Test support only; see tiny_family.cpp for the sources it was read from.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "run/ablation.h"
#include "run/hooks.h"
#include "util/error.h"
#include "reference.h" // in_set

namespace tiny_family_detail {

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

inline const family_traits families[] = {
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

inline const family_traits& traits_of(const std::string& family) {
    for (const family_traits& t : families)
        if (family == t.family) return t;
    throw std::runtime_error("tiny_family: unknown family '" + family + "'");
}

inline bool in_all(const gb::layer_set& s, int L) {
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
inline int router_point() {
    try {
        return (int)gb::parse_hook_point("router");
    } catch (const gb::error&) {
        return -1;
    }
}

inline std::string lname(const std::string& prefix, int l, const std::string& rest) {
    return prefix + "layers." + std::to_string(l) + "." + rest;
}

} // namespace tiny_family_detail
