// Model description: config, weights and the per-architecture table. Plain structs, no behaviour.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/kind.h"
#include "model/quant.h"
#include "tokenizer/tokenizer.h"
#include "util/aligned.h"
#include "util/image.h"

namespace gb {

// Everything that differs between architecture families lives in this table (see arch_table(), core/model/arch.cpp):
// what the forward does differently, and (arch.h) each logical tensor's name in HF and GGUF files.
enum norm_kind { NORM_LAYERNORM, NORM_RMSNORM };
// GELU: GPT-2's tanh approximation of x W_up; GELU_ERF: the exact erf GELU (GPT-NeoX / Pythia); SWIGLU:
// silu(x W_gate) * (x W_up) (Llama); GEGLU: tanh-GELU(x W_gate) * (x W_up) (Gemma)
// SILU: silu(x W_up + b), not gated (Marian's "swish")
enum mlp_kind { MLP_GELU, MLP_GELU_ERF, MLP_SWIGLU, MLP_GEGLU, MLP_SILU };
// SINUSOID: the original Transformer's fixed table, added like a learned one (Marian's layout: sin | cos halves)
enum pos_kind { POS_LEARNED, POS_ROPE, POS_SINUSOID };
// q/k norms after the projections: none, RMSNorm over all heads' q (and k) at once (OLMo 2, OLMoE), or over
// each head's d_head values with one shared gain (Qwen3, Qwen3-MoE)
enum qk_norm_kind { QK_NORM_NONE, QK_NORM_FULL, QK_NORM_HEAD };
// RoPE pairing: HF safetensors rotate halves (i, i + d/2); llama2.c and llama.cpp GGUF rotate adjacent pairs.
enum rope_pairing { ROPE_HALF, ROPE_ADJACENT };
// RoPE frequency scaling: HF config.json rope_scaling (rope_type "linear" or "llama3"), or GGUF's per-pair
// divisors in the tensor rope_freqs.weight (how llama.cpp stores Llama 3.1/3.2's llama3 scaling).
enum rope_scaling_kind { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3, ROPE_SCALING_FREQ_TABLE };

struct tensor_names; // core/model/arch.h

struct arch_info {
    const char* name;      // "gpt2", "llama", "gpt_neox", ...
    model_kind kind;       // what the model reads and predicts, and what it offers (core/model/kind.h)
    norm_kind norm;
    mlp_kind mlp;
    pos_kind pos;
    bool parallel;         // attention and MLP both read the layer's input: resid_post = resid_pre + attn + mlp
                           // (GPT-NeoX; a config may turn it off: model_config::parallel)
    bool pre_norm;         // a norm before each sublayer (all but OLMo 2)
    bool post_norm;        // a norm on each sublayer's output before the residual add (Gemma 2, OLMo 2)
    qk_norm_kind qk_norm;
    bool gain_plus_one;    // HF files store w, the norm multiplies by 1 + w (Gemma; GGUF files store 1 + w)
    bool embed_scale;      // token embeddings times sqrt(d_model) (Gemma)
    const tensor_names* names;
    // Encoders (BERT, RoBERTa, DistilBERT, and ViT's encoder): zero (causal, pre-norm decoders) for the other rows
    bool bidirectional;    // every query sees every key: no causal mask, no key/value cache to extend
    bool post_ln;          // LayerNorm after each residual add (the original Transformer's and BERT's Post-LN):
                           // resid_mid = LN1(x + attn), resid_post = LN2(resid_mid + mlp); the norms' gains are
                           // norm1 / norm2
    bool mlm_head;         // the masked-LM head: logits = LN(GELU(x W_t + b_t)) E^T + b (E tied to the token
                           // embedding); its LayerNorm is the "final norm"
    // Encoder–decoders (BART, mBART, Marian): the model is the decoder, model::encoder the encoder stack
    bool cross;            // each decoder layer reads the encoder's output through cross-attention, between its
                           // masked self-attention and its MLP (the encoder stacks' rows have it false)
    bool no_head;          // an encoder stack of an encoder–decoder: its output is the final norm's, no logits
};
// The norm's name as titles and formulas spell it: "RMSNorm" or "LayerNorm"
inline const char* norm_name(const arch_info& a) { return a.norm == NORM_RMSNORM ? "RMSNorm" : "LayerNorm"; }

enum arch_id {
    ARCH_GPT2, ARCH_LLAMA, ARCH_GPT_NEOX, ARCH_GEMMA, ARCH_GEMMA2, ARCH_PHI3, ARCH_OLMO2, ARCH_QWEN3,
    ARCH_MIXTRAL, ARCH_QWEN2_MOE, ARCH_QWEN3_MOE, ARCH_OLMOE, ARCH_BERT, ARCH_ROBERTA, ARCH_DISTILBERT, ARCH_VIT,
    ARCH_DEIT, ARCH_BART, ARCH_MBART, ARCH_MARIAN, ARCH_BART_ENCODER, ARCH_MBART_ENCODER,
    ARCH_MARIAN_ENCODER, ARCH_COUNT
};
const arch_info& arch_table(arch_id a);
// The encoder stack's row of an encoder–decoder's decoder row (ARCH_BART -> ARCH_BART_ENCODER); a itself otherwise
arch_id encoder_arch(arch_id a);

struct model_config {
    arch_id arch = ARCH_GPT2;
    std::string model_type = "gpt2"; // as named by the source file (gpt2, llama, mistral, qwen2)
    int n_layer = 0;
    int n_head = 0;
    int n_kv_head = 0;   // == n_head unless grouped-query attention
    int d_model = 0;
    int d_head = 0;      // d_model / n_head, unless the file names another (Gemma: head_dim)
    int d_ff = 0;
    int vocab_size = 0;
    int n_ctx = 0;       // maximum positions
    float norm_eps = 1e-5f;
    float rope_theta = 10000.0f;
    rope_pairing rope = ROPE_HALF;
    rope_scaling_kind rope_scaling = ROPE_SCALING_NONE;
    float rope_factor = 1.0f;           // LINEAR: positions / factor; LLAMA3: low frequencies / factor
    float rope_low_freq_factor = 1.0f;  // LLAMA3: wavelengths above orig_ctx / low are divided by factor
    float rope_high_freq_factor = 4.0f; // LLAMA3: wavelengths below orig_ctx / high are kept
    int rope_orig_ctx = 0;              // LLAMA3: original_max_position_embeddings
    std::vector<double> rope_freq;      // [d_head/2] angle per position of pair i, in radians, all scaling
                                        // included; filled once at load by rope_init_freqs()
    int rope_dims = 0;                  // leading dimensions of each head that rotate (GPT-NeoX's rotary_pct,
                                        // Phi's partial_rotary_factor); the rest pass unchanged. 0 = d_head
    float attn_scale = 0;               // scores = scale * q.k; 0 = 1/sqrt(d_head) (Gemma 2: query_pre_attn_scalar^-1/2)
    float attn_softcap = 0;             // Gemma 2: scores become cap * tanh(scores / cap) before the softmax; 0 = none
    float final_softcap = 0;            // Gemma 2: logits become cap * tanh(logits / cap); 0 = none
    int sliding_window = 0;             // keys each query sees, itself included (0 = all): key j is seen from
                                        // position i when i - j < sliding_window (Mistral, Qwen2, Phi-3, Gemma 2)
    int window_every = 1;               // layers with the window: 1 = all, 2 = every other from layer 0 (Gemma 2)
    int window_first = 0;               // layers before it see all keys (Qwen2's max_window_layers)
    bool parallel = false;              // arch_info::parallel unless the file says otherwise (use_parallel_residual)
    int n_expert = 0;                   // MoE: experts per layer (0 = a dense MLP)
    int n_expert_used = 0;              // MoE: experts each token is routed to (top-k)
    int d_ff_expert = 0;                // MoE: each expert's MLP width
    int d_ff_shared = 0;                // Qwen2-MoE: the shared expert's width (0 = none)
    bool norm_topk = true;              // MoE: the chosen experts' softmax weights are renormalised to sum to 1
    int n_token_type = 0;               // BERT: rows of the token-type (segment) embedding; every token is type 0
    int pos_offset = 0;                 // learned position row of position t is t + pos_offset (RoBERTa: padding
                                        // index + 1 = 2); n_ctx is what is left for the prompt
    int image_size = 0;                 // vision: the square image's side in pixels after preprocessing
    int patch_size = 0;                 // vision: a patch's side; the grid is image_size / patch_size square
    int n_channels = 0;                 // vision: 3 (RGB)
    int n_prefix = 0;                   // vision: rows before the patches, [CLS] (+ [DIST]); n_ctx = n_prefix + patches
    bool scale_embedding = false;       // token embeddings times sqrt(d_model) (BART family's config; Gemma by its row)
    int decoder_start_id = -1;          // encoder–decoders: the decoder's first input token (decoder_start_token_id)
    int eos_id = -1;                    // encoder–decoders: the token that ends a generated target (eos_token_id)
    int forced_bos_id = -1;             // encoder–decoders: the token generation puts first (BART's <s>:
                                        // forced_bos_token_id), -1 none
    int grid() const { return patch_size > 0 ? image_size / patch_size : 0; }
    int window_at(int layer) const {    // the keys layer l's queries see (0 = all)
        return sliding_window > 0 && layer >= window_first && (layer - window_first) % window_every == 0 ? sliding_window : 0;
    }
    bool qkv_bias = true;   // GPT-2 and Qwen2 have q/k/v biases
    bool mlp_bias = true;   // GPT-2 only
    bool tied_lm_head = true;
};

// A weight matrix of y = x * W, W being [in][out], packed once at load the way the forward's GEMM reads it
// (core/kernels/gemm.h). Column panels of weight_panel columns, each panel's rows contiguous, the last panel zero-padded,
// in one of these forms (type):
// - F32 on the fp32 kernel: data, floats;
// - F32 on the AMX kernel: every weight as four base-256 digits of a 31-bit fixed-point number, in AMX tile order;
// - F16, BF16, Q8_0 or another ggml block type, kept as the file stores them (stored, scale): the kernel turns
//   each panel slice into floats in cache just before it multiplies (or, for one row block of F16, BF16, Q8_0,
//   Q4_K or Q6_K, in registers as it multiplies), so the product equals the fp32 kernel's on the dequantised weights.
// pack_matrix / unpack_matrix (core/kernels/gemm.h) convert from / to the plain row-major [in][out] (exactly for fp32 and the stored
// types; for AMX to within 2^-31 of each row's and column's largest weight).
struct backward_tiles; // core/kernels/gemm_backward.cpp
struct weight_matrix {
    int in = 0, out = 0;
    uint32_t type = GGML_F32;      // the values' type as held: F32 (data or digits), or a stored type (stored)
    aligned_vector<float> data;    // F32, fp32 kernel: [ceil(out / weight_panel)][in][weight_panel]
    aligned_vector<uint8_t> stored; // F16/BF16: uint16 [panels][in][weight_panel]; Q8_0: int8 [panels][in][weight_panel];
                                    // Q4_K: [panels][in / 256] block rows, each d, dmin [weight_panel] (f16), then
                                    // scales [12][weight_panel], levels [128][weight_panel] (interleaved: gemm.cpp);
                                    // Q6_K likewise: d, scales [16], ql [128], qh [64], each [..][weight_panel];
                                    // other block types: whole blocks [panels][in / block][weight_panel][block bytes]
    aligned_vector<float> scale;   // Q8_0: [panels][in/32][weight_panel] each block's scale (GGUF's d)
    aligned_vector<int8_t> digits; // AMX: [ceil(out/16)][ceil(in/64)][3][16][64] (see core/kernels/gemm_amx.cpp)
    std::vector<float> row_exp;  // AMX: [ceil(in/64)*64] power of two taken out of each row, put into the inputs
    std::vector<float> col_exp;  // AMX: [ceil(out/16)*16] exponent of each column's fixed-point scale
    std::vector<weight_matrix> parts; // a fused matrix (q | k | v) whose parts have different stored types: each
                                      // part's columns, in order (type is then the first part's)
    bool finite = true;          // every weight finite (a NaN or Inf keeps a matrix off the AMX kernel)
    bool int8 = false;           // Q4_K as stored, packed under --matmul int8: products round x to 8 bits (gemm.h)
    // The backward's W^T packed for the kernel, made by its second product over this matrix and multiplied by in the
    // later ones (gemm.h gemm_backward; within a process-wide budget). A copy shares the pointer and rebuilds its
    // own, since the slot names the buffer it was made from.
    mutable std::shared_ptr<backward_tiles> backward;
    bool empty() const { return data.empty() && digits.empty() && stored.empty() && parts.empty(); }
    bool amx() const { return !digits.empty(); }
    size_t size() const { return (size_t)in * out; } // parameters, padding excluded
    size_t bytes() const { // memory held, padding and scales included
        size_t b = data.size() * 4 + stored.size() + scale.size() * 4 + digits.size() + (row_exp.size() + col_exp.size()) * 4;
        for (const weight_matrix& p : parts) b += p.bytes();
        return b;
    }
};
// No NaN or Inf among x [n] (core/io/loader.cpp).
bool all_finite(const float* x, size_t n);

// Weights are f32 for y = x * W with x [T][in]: every matrix is [in][out].
// (GPT-2's Conv1D already stores [in][out]; Linear layers [out][in] are transposed at load.)
struct layer_weights {
    std::vector<float> norm1_g;  // [d]
    std::vector<float> norm1_b;  // [d] (empty for RMSNorm)
    weight_matrix w_qkv;         // [d][(H + 2*KV) * dh]  columns: all q heads, then k heads, then v heads
    std::vector<float> b_qkv;    // [(H + 2*KV) * dh] (empty when no bias)
    weight_matrix w_o;           // [H*dh][d]
    std::vector<float> b_o;      // [d] (empty when no bias)
    std::vector<float> norm2_g;  // [d]
    std::vector<float> norm2_b;  // [d] (empty for RMSNorm)
    weight_matrix w_up;          // [d][ff]  GPT-2 c_fc / Llama up_proj
    std::vector<float> b_up;     // [ff] (empty when no bias)
    weight_matrix w_gate;        // [d][ff]  SwiGLU only (empty for GELU)
    weight_matrix w_down;        // [ff][d]  GPT-2 c_proj / Llama down_proj
    std::vector<float> b_down;   // [d] (empty when no bias)
    std::vector<float> q_norm;   // [H*dh] (QK_NORM_FULL) or [dh] (QK_NORM_HEAD); empty without
    std::vector<float> k_norm;   // [KV*dh] or [dh]
    std::vector<float> post_attn_norm; // [d] post_norm archs: the attention output's RMSNorm gain
    std::vector<float> post_mlp_norm;  // [d] post_norm archs: the MLP output's RMSNorm gain
    // MoE (n_expert > 0): w_up / w_gate / w_down above are then the shared expert (Qwen2-MoE) or empty
    weight_matrix router;              // [d][E] router logits
    std::vector<weight_matrix> exp_gate, exp_up; // [E] each [d][ff_expert]
    std::vector<weight_matrix> exp_down;         // [E] each [ff_expert][d]
    std::vector<float> shared_gate;    // [d] Qwen2-MoE: sigmoid(x . shared_gate) scales the shared expert
    // Encoder–decoders' decoder layers: cross-attention, queries from the stream, keys and values from the
    // encoder's output (Post-LN: norm3 after its residual add; Pre-LN: before its queries)
    std::vector<float> norm3_g, norm3_b; // [d] encoder_attn_layer_norm
    weight_matrix x_q;                   // [d][H*dh]
    std::vector<float> x_q_b;            // [H*dh]
    weight_matrix x_kv;                  // [d][2*H*dh] k | v
    std::vector<float> x_kv_b;           // [2*H*dh]
    weight_matrix x_o;                   // [H*dh][d]
    std::vector<float> x_o_b;            // [d]
};

struct model_weights {
    row_table tok_emb;           // [V][d] in its stored type (quant.h)
    std::vector<float> pos_emb;  // [pos_offset + n_ctx][d] (empty for RoPE)
    std::vector<float> type_emb; // [n_token_type][d] BERT's segment embedding (row 0 is added to every token)
    std::vector<float> emb_norm_g, emb_norm_b; // [d] the embeddings' LayerNorm (encoders), empty without
    std::vector<layer_weights> layers; // [L]
    std::vector<float> normf_g;  // [d] final norm (mlm_head: the head's LayerNorm after its transform)
    std::vector<float> normf_b;  // [d] (empty for RMSNorm)
    row_table lm_head;           // [V][d] in its stored type (empty when tied to tok_emb)
    std::vector<float> lm_head_b; // [V] the masked-LM decoder's bias, or a classifier's (empty without)
    weight_matrix patch;         // [C*P*P][d] vision: the patch embedding (a P-strided P x P convolution as a product)
    std::vector<float> patch_b;  // [d]
    std::vector<float> cls_tok;  // [d] vision: [CLS]'s embedding
    std::vector<float> dist_tok; // [d] DeiT: [DIST]'s embedding (empty for ViT)
    row_table dist_head;         // [V][d] DeiT with a teacher: the distillation classifier, read at [DIST]
    std::vector<float> dist_head_b; // [V]
    weight_matrix head_dense;    // [d][d] masked-LM head transform (before GELU and its LayerNorm)
    std::vector<float> head_dense_b; // [d]
    weight_matrix head;          // AMX kernel and an F32 table: lm_head (or tok_emb) as the [d][V] product, in digits;
                                 // otherwise empty (the LM head reads the table's rows)
    const row_table& unembedding() const { return lm_head.empty() ? tok_emb : lm_head; }
};

struct model {
    model_config config;
    model_weights weights;
    tokenizer tok;
    std::string path;        // what the user opened
    std::string format;      // "hf-safetensors", "gguf", "llama2c"
    std::string source_note; // e.g. "GGUF Q4_K dequantised to f32 (+380 MB)"; empty if nothing to say
    std::string nonfinite_tensor; // first weight holding NaN/Inf, e.g. "layer 3 w_qkv"; empty when all finite
    image_preprocess image_prep;  // vision: how an image becomes pixels (preprocessor_config.json, else HF's defaults)
    std::shared_ptr<const model> encoder; // encoder–decoders: the encoder stack (its own config and weights, the
                                          // same tokenizer); this model is the decoder with the LM head
};

// Parameter counts per component, for the model panel and --json.
struct param_counts {
    int64_t embeddings = 0; // token + position embeddings (+ untied lm_head)
    int64_t attention = 0;  // qkv + output projections, with biases
    int64_t mlp = 0;
    int64_t norms = 0;
    int64_t total() const { return embeddings + attention + mlp + norms; }
};
param_counts count_params(const model& m);

// Bytes the weights hold in memory: matrices, tables (a table mapped from the file counts: its pages are read
// in when used), vectors.
int64_t weight_bytes(const model& m);
// "F16" when every matrix of a class has one type, else "F16+Q8_0"; classes: attention (qkv, o), mlp, embedding,
// head ("tied" when the head is the embedding).
struct weight_types {
    std::string attention, mlp, embedding, head;
};
weight_types stored_types(const model& m);

// Fills c.rope_freq [d_head/2] from rope_theta, d_head and the scaling fields: theta^(-2i/d_head), then
// LINEAR divides by rope_factor and LLAMA3 applies Meta's rule per wavelength. divisors ([d_head/2], GGUF
// rope_freqs.weight), when given, divide each pair's frequency instead (and set ROPE_SCALING_FREQ_TABLE).
void rope_init_freqs(model_config& c, const std::vector<float>& divisors = {});

} // namespace gb
