// Writing models: GPT-2 as a HF folder, and seeded random models (GPT-2, Llama, Marian as HF folders) for
// benchmarks and tests; random models as GGUF files are gguf_writer.h's. The loader reads every one of them back
// like any other file.
#pragma once
#include <cstdint>
#include <string>

#include "model/model.h"

namespace gb {

// Writes a GPT-2 model as a HF folder: config.json, model.safetensors (dtype "F32" or "F16"), vocab.json,
// merges.txt. Used for random benchmark models; the loader reads it back like any HF folder.
void save_hf_gpt2(const std::string& dir, const model& m, const std::string& dtype = "F32");
// A GPT-2 model with N(0, 0.02) weights (seeded) and a byte-level vocabulary padded to c.vocab_size.
// Weights packed exactly (fp32 layout), so save_hf_gpt2 writes what was drawn; loading the file picks the kernel.
model random_gpt2(const model_config& c, uint64_t seed);
// Writes a seeded random Llama as a HF folder the loader opens: config.json (model_type "llama", plain RoPE at
// c.rope_theta), model.safetensors under HF's names (lm_head.weight only when !c.tied_lm_head), and the
// random_gpt2 byte-level tokenizer as vocab.json + merges.txt. From c: n_layer, n_head, n_kv_head (0 = n_head),
// d_model, d_ff (0 = 4 d_model), vocab_size (>= 257), n_ctx (max_position_embeddings), norm_eps, rope_theta.
// Norm gains 1, matrices N(0, 0.02); dtype "F32", "F16" or "BF16". The weights are drawn while the file is
// written, never held whole, so a 1B-parameter model costs megabytes of memory. Returns the parameter count.
int64_t write_random_llama_hf(const std::string& dir, const model_config& c, uint64_t seed,
                              const std::string& dtype = "F32");
// Writes a seeded random Marian encoder–decoder (MarianMTModel, Post-LN, swish, sinusoidal positions, one shared
// tied embedding) as a HF folder the loader opens, for benchmarks: c.n_layer decoder layers and encoder_layers
// encoder layers, n_head, d_model, d_ff (0 = 4 d_model), vocab_size (>= 258), n_ctx; matrices N(0, 0.02), biases 0,
// norms (1, 0), F32, streamed like write_random_llama_hf. The tokenizer is random_gpt2's byte-level one (a source
// text encodes byte by byte); <|endoftext|> is EOS, the id before it the decoder's start. Returns the parameter count.
int64_t write_random_marian_hf(const std::string& dir, const model_config& c, int encoder_layers, uint64_t seed);

} // namespace gb
