// Tiny random Llama models written by the tests in llama2.c layout, and a plain double-precision reference
// forward for them (RMSNorm, RoPE on adjacent pairs, grouped-query attention, SwiGLU), with ablations.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "forward.h"
#include "model.h"

struct tiny_llama_spec {
    int dim = 32, hidden = 48, n_layer = 2, n_head = 4, n_kv_head = 2, vocab = 300, seq_len = 32;
    bool shared_classifier = true;
    uint32_t seed = 1;
};

struct tiny_llama {
    std::string model_path, tokenizer_path;
    tiny_llama_spec spec;
    std::map<std::string, std::vector<float>> w; // llama2.c names and layouts ([out][in]), per layer "wq.0" ...
};

// Writes model.bin and tokenizer.bin (a vocabulary of <unk> <s> </s>, 256 byte tokens, then letters and merges).
tiny_llama write_tiny_llama2c(const std::string& dir, const tiny_llama_spec& s);

struct llama_ref {
    std::vector<double> logits;     // [T][V]
    std::vector<double> attention;  // [L][H][T][T]
    std::vector<double> resid_norm; // [2L+1][T]
};
llama_ref reference_llama(const tiny_llama& m, const std::vector<int>& tokens, const gb::ablation& ab);
