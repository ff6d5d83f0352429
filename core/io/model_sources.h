// Models already on this machine (the Hugging Face hub cache, Ollama, LM Studio, llama.cpp's cache, recent
// files), found without loading weights and without the network; and model names ("hf:ORG/NAME",
// "ollama:NAME:TAG") resolved to a local path, from the cache first, downloading from the Hub when allowed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/hub_download.h"

namespace gb {

// One model found on this machine.
struct found_model {
    std::string source;       // "hf" | "ollama" | "lmstudio" | "llamacpp" | "recent"
    std::string name;         // "openai-community/gpt2", "llama3.2:latest", "publisher/repo/file.gguf", ...
    std::string path;         // what load_model opens (snapshot folder, blob file, .gguf, .bin)
    std::string format;       // "hf" | "gguf" | "llama2c"
    std::string family;       // "gpt2", "llama", ... ("" when unknown)
    std::string kind;         // the kind table's name for its kind ("" when unknown)
    int64_t n_params = -1;    // from the header/config, without loading weights; -1 when unknown
    int64_t bytes = 0;        // bytes on disk (blobs counted once)
    bool openable = false;    // Glassbox can open it
    std::string reason;       // one line, why not (empty when openable)
};

struct scan_options {
    std::vector<std::string> recent; // the app's / CLI's recent model paths (listed as source "recent")
};

// Every model found in the places docs/models.md "Opening a model" lists, in the order hf, ollama, lmstudio,
// llamacpp, recent (sorted by name within a source). Reads only headers and configs; never the network.
// Directories come from the environment: HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME, OLLAMA_MODELS, LLAMA_CACHE,
// HOME. A folder that cannot be read is skipped; an entry that cannot be read is listed with its reason.
std::vector<found_model> scan_models(const scan_options& opt = {});

// Describes one local path (a HF folder, a GGUF file with or without extension, a llama2.c .bin) the way
// scan_models does; source and name are left for the caller to fill.
found_model describe_model_path(const std::string& path);

// Model names: "hf:ORG/NAME[@REV][:FILE_OR_QUANT]", "ollama:NAME[:TAG]". True when s has one of these prefixes
// (whether it is well formed is resolve_model's business).
bool is_model_name(const std::string& s);

// A parsed "hf:" name. file_or_quant: a file path in the repo ("model-Q4_K_M.gguf") or a quant ("Q4_K_M").
struct hf_name {
    std::string repo;          // "ORG/NAME" (or "NAME")
    std::string revision;      // "main" when not given
    std::string file_or_quant; // "" when not given
};
// Throws one line naming spec when it is not a well-formed "hf:" name.
hf_name parse_hf_name(const std::string& spec);

struct resolve_options {
    bool allow_download = true; // false: only the cache (HF_HUB_OFFLINE=1 has the same effect)
    download_fn progress;       // optional, as hub_download's
};

// The local path a name stands for: "hf:" from the hub cache when its revision (and the chosen file) are there,
// else downloaded with hub_download; "ollama:" from the Ollama manifests (never downloaded). A plain path is
// returned unchanged. Throws one line ("ollama:llama3.2:latest: not found in ~/.ollama/models ...").
std::string resolve_model(const std::string& spec, const resolve_options& opt = {});

} // namespace gb
