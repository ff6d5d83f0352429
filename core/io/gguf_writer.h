// Seeded random decoder models as GGUF files in llama.cpp's layout: every family of the architecture table that
// llama.cpp runs, in every stored type quantize() writes, with the metadata llama.cpp's loader reads and a
// byte-level tokenizer it accepts. Our loader and llama.cpp both open them (tests/test_llama_cpp.cpp compares
// the two on the same files). A loaded GPT-2-family model can be written the same way in another stored type.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/quant.h"

namespace gb {

// The families written, by Hugging Face model_type: gpt2, llama, mistral, qwen2, qwen3, gemma, gemma2, phi3, olmo2,
// gpt_neox, mixtral, qwen2_moe, qwen3_moe, olmoe. Mistral and Mixtral are written as llama.cpp's converter writes
// them, general.architecture "llama" (Mistral's sliding window has no key there: none is written).
const std::vector<std::string>& random_gguf_families();

// The complete config of a random `family` model of the given shape, as the GGUF loader will read it back. From
// shape: n_layer, d_model, n_head, n_kv_head (0: n_head), d_head (0: d_model / n_head), d_ff (0: 4 d_model),
// vocab_size (>= 257), n_ctx, norm_eps, rope_theta, rope_dims (0: the whole head), tied_lm_head, sliding_window;
// MoE families also n_expert (0: 4), n_expert_used (0: 2), d_ff_expert (0: d_ff), d_ff_shared (Qwen2-MoE, 0:
// d_ff). The family sets the rest: biases (GPT-2, GPT-NeoX, Qwen2, Qwen2-MoE), GPT-NeoX's parallel blocks,
// Gemma 2's soft caps (50, 30) and window (4096 unless given, every other layer), the MoE families' top-k
// renormalisation (Mixtral and Qwen3-MoE), a tied head for Gemma and Gemma 2 and an untied one for Phi-3, GPT-NeoX,
// OLMo 2, Qwen2-MoE and OLMoE (what llama.cpp reads for them). Throws naming what llama.cpp or our loader would
// refuse (OLMoE: llama.cpp's has no grouped-query attention).
model_config random_gguf_config(const std::string& family, const model_config& shape);

struct random_gguf_options {
    uint32_t type = GGML_F32;   // the matrices' stored type (any type quantize() writes); each row must be whole
                                // blocks. Norms, biases, routers and learned positions stay F32.
    bool dequantised = false;   // every matrix in F32, holding what `type` would store (dequantize(quantize(x))): the
                                // same model for a reader computing in f32 (llama.cpp's reference for a quantised file)
    double std = 0.02;          // matrices and embeddings N(0, std)
    double aux_std = 0;         // norm gains 1 + N(0, aux_std), biases N(0, aux_std) (0: gains 1, biases 0)
    uint64_t seed = 1;
    std::vector<std::string> omit; // metadata keys left out ("qwen3.rope.freq_base"): files that lean on a
                                   // reader's defaults, for tests of them
};

// Writes c (random_gguf_config's, possibly changed after) as a GGUF v3 file: llama.cpp's tensor names from the
// architecture table, the family's hyperparameter keys, and tokenizer.ggml.* (model "gpt2", pre "gpt-2", the
// byte-level tokens with their types, no merges, <|endoftext|> as BOS and EOS). The weights are drawn a row at
// a time in file order and written as drawn, so a seed names one model and memory stays a row, whatever the
// model's size. Returns the parameter count.
int64_t write_random_gguf(const std::string& path, const model_config& c, const random_gguf_options& opt);

// Writes a loaded model as a GGUF v3 file with its matrices (embeddings, projections, MLP, an untied head) in
// `type` and the rest (norms, biases, learned positions) in F32, and its own tokenizer (vocabulary, merges in rank
// order, BOS and EOS): `glassbox-cli quantize`. GPT-2-family models so far (the RoPE families' GGUF files hold
// q and k in llama.cpp's converted order). Throws naming a matrix whose rows are not whole blocks of the type.
// Returns the parameter count.
int64_t write_model_gguf(const std::string& path, const model& m, uint32_t type);

} // namespace gb
