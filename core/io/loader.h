// Opening a model: a HF folder (config.json + safetensors), a GGUF file or a llama2.c checkpoint, checked
// against the memory it needs; and where the embedded default model lives.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "model/model.h"

namespace gb {

// Progress in [0,1] with a short label; may be called from the loading thread.
using progress_fn = std::function<void(float, const std::string&)>;

struct load_options {
    std::string tokenizer_path; // llama2.c tokenizer.bin; empty = look next to the model
    progress_fn progress;       // optional
    bool keep_stored = true;    // F16/BF16/Q8_0 weights stay as stored; false: every weight dequantised to f32
                                // and packed for the matmul kernel (what Glassbox did before 0.4)
    int64_t mem_available = -1; // bytes the model may take; -1: the system's MemAvailable (tests set it)
};

// Throws "PATH: the model needs 31.8 GB of memory, 22.9 GB available" when need bytes exceed what is available
// (opt.mem_available, or MemAvailable): loaders call it from the file's headers, before allocating.
void check_memory(const std::string& path, int64_t need, const load_options& opt);
// Bytes that values of a stored type take in memory once loaded (kept as stored, or dequantised to f32).
int64_t resident_estimate(uint32_t type, int64_t values, bool keep_stored);

// Loads a HF folder (config.json + safetensors), a GGUF file (known by its magic, whatever its name: Ollama's
// blobs have none) or a llama2.c .bin; or a model name ("hf:ORG/NAME[@REV][:FILE_OR_QUANT]", "ollama:NAME[:TAG]",
// io/model_sources.h), resolved to its local path first (downloading from the Hub when it is not in the cache;
// opt.progress then reports the download). m.path is the local path.
// Throws gb::error naming the file, tensor and expected vs found on any problem.
model load_model(const std::string& path, const load_options& opt = {});

// The model config a Hugging Face config.json gives, with the checks load_model makes (family, sizes, RoPE
// scaling), without reading any weights. Throws gb::error as load_model would.
model_config read_hf_config(const std::string& config_path);

// Whether the file starts with the GGUF magic "GGUF"
bool is_gguf_file(const std::string& path);

// The default model shipped in assets/models/; throws if it cannot be found.
std::string default_model_path();
// The SAE shipped for the default model (assets/saes/<the name in assets/saes/DEFAULT>/, beside the model's
// assets/models/) when m is the default model (the paths compared canonically), else "" (also when the default
// model or its SAE is not installed).
std::string default_sae_path(const model& m);
// The transcoder set shipped for the default model (assets/transcoders/<the default model's folder name>/, with
// layer_0.safetensors) when m is the default model, else "" (also when it is not installed).
std::string default_transcoders_path(const model& m);

} // namespace gb
