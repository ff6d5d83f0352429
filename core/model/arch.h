// The architecture table's names: every logical tensor of a model, and what each family calls it in a Hugging
// Face checkpoint and in a GGUF file (llama.cpp's names). The loaders read bytes by these names; the forward
// reads the weights they fill (model.h). What the families compute differently is arch_info (model.h).
#pragma once
#include <string>

#include "model/model.h"

namespace gb {

// "{l}" in a name is the layer, "{e}" the expert.
enum tensor_id {
    T_TOK_EMB,        // [V][d]
    T_POS_EMB,        // [n_ctx][d] learned positions
    T_NORM_F,         // [d] final norm gain
    T_NORM_F_B,       // [d] final norm bias (LayerNorm)
    T_LM_HEAD,        // [V][d] (absent: tied to the embedding)
    T_ATTN_NORM,      // [d] the norm before attention (Llama's input_layernorm)
    T_ATTN_NORM_B,    // [d]
    T_Q, T_K, T_V,    // [H*dh][d], [KV*dh][d], [KV*dh][d] (HF nn.Linear and GGUF: rows are outputs)
    T_QKV,            // fused [(H + 2 KV) dh][d], q | k | v (GPT-NeoX's HF file: per head, see qkv_per_head)
    T_Q_B, T_K_B, T_V_B, T_QKV_B,
    T_O,              // [d][H*dh]
    T_O_B,            // [d]
    T_Q_NORM,         // [H*dh] or [dh] (qk_norm_kind)
    T_K_NORM,         // [KV*dh] or [dh]
    T_ATTN_POST_NORM, // [d] on the attention output (Gemma 2, OLMo 2)
    T_FFN_NORM,       // [d] the norm before the MLP (Llama's post_attention_layernorm)
    T_FFN_NORM_B,     // [d]
    T_GATE, T_UP,     // [ff][d]
    T_GATE_UP,        // fused [2 ff][d]: gate rows, then up rows (Phi-3)
    T_UP_B,           // [ff]
    T_DOWN,           // [d][ff]
    T_DOWN_B,         // [d]
    T_FFN_POST_NORM,  // [d] on the MLP output (Gemma 2, OLMo 2)
    T_ROUTER,         // [E][d] router logits
    T_EXP_GATE,       // HF: per expert ({e}) [ff_e][d]; GGUF: all experts in one [E][ff_e][d] tensor
    T_EXP_UP,         // as T_EXP_GATE
    T_EXP_DOWN,       // HF: [d][ff_e] per expert; GGUF: [E][d][ff_e]
    T_SH_GATE, T_SH_UP, T_SH_DOWN, // Qwen2-MoE's shared expert, [ff_s][d] / [d][ff_s]
    T_SH_ROUTER,      // [1][d] the shared expert's sigmoid gate
    T_TYPE_EMB,       // [types][d] BERT's token-type embedding
    T_EMB_NORM, T_EMB_NORM_B, // [d] the embeddings' LayerNorm (encoders)
    T_HEAD_DENSE,     // [d][d] masked-LM head transform
    T_HEAD_DENSE_B,   // [d]
    T_LM_HEAD_B,      // [V] masked-LM decoder bias, or an image classifier's
    T_CLS_TOK,        // [1][1][d] vision: [CLS]
    T_DIST_TOK,       // [1][1][d] DeiT: [DIST]
    T_PATCH,          // [d][C][P][P] vision: the patch embedding's convolution
    T_PATCH_B,        // [d]
    T_DIST_HEAD,      // [V][d] DeiT with a teacher: the distillation classifier
    T_DIST_HEAD_B,    // [V]
    T_TOK_EMB_ALT,    // [V][d] where else a file may store the token embedding (BART: the stack's embed_tokens)
    T_XQ, T_XK, T_XV, T_XO,           // encoder–decoders: cross-attention, [H*dh][d] and [d][H*dh]
    T_XQ_B, T_XK_B, T_XV_B, T_XO_B,
    T_XNORM, T_XNORM_B,               // [d] its LayerNorm (encoder_attn_layer_norm)
    T_COUNT
};
const char* tensor_id_name(tensor_id t); // "attn_q", for messages

struct tensor_names {
    const char* gguf_arch;      // general.architecture
    const char* hf[T_COUNT];    // nullptr: this family has no such tensor in that format
    const char* gguf[T_COUNT];
    bool hf_conv1d;             // HF matrices stored [in][out] (GPT-2's Conv1D), not nn.Linear's [out][in]
    bool hf_qkv_per_head;       // HF fused qkv rows grouped per head: [H][q k v][dh] (GPT-NeoX)
};

// The name of tensor t at layer l / expert e in a format ("" when the family has none).
std::string tensor_name(const arch_info& a, bool gguf, tensor_id t, int l = -1, int e = -1);

// The family of a config.json model_type or a GGUF general.architecture (GGUF "llama" with experts is Mixtral);
// throws naming the supported ones.
arch_id arch_from_hf(const std::string& model_type, const std::string& path);
arch_id arch_from_gguf(const std::string& arch, bool has_experts, const std::string& path);
// Whether llama.cpp's converter permuted q/k rows of this GGUF architecture so that RoPE rotates adjacent pairs
// (llama, which Mixtral is written as); every other rotates halves, as the HF checkpoints do.
bool gguf_rope_adjacent(const std::string& gguf_arch);
// "gpt2, llama, mistral, ..." for messages and the documents (docs/models.md)
std::string supported_hf_types();
std::string supported_gguf_archs();

} // namespace gb
