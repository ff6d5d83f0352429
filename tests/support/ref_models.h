// The two tiny models the hook and analysis tests run on, each with its double-precision reference: a GPT-2
// (LayerNorm, learned positions, biases everywhere) and a Llama with grouped-query attention (RMSNorm, RoPE,
// SwiGLU, 4 query heads sharing 2 key/value heads).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "ref_trace.h"
#include "run/ablation.h"

struct ref_model {
    std::string name;  // "gpt2", "llama-gqa"
    gb::model m;
    ref_readout readout;
    // the reference run of tokens under ab, with opt's patches and edit
    std::function<ref_trace(const std::vector<int>& tokens, const gb::ablation& ab, const ref_options& opt)> reference;
    // n random ids in 3 .. V-2 (never BOS, EOS or <unk>), seeded
    std::vector<int> tokens(int n, uint32_t seed) const;
};

// 3 layers each. Loaded once per matmul kernel (the kernel is chosen when the weights are packed).
const ref_model& tiny_gpt2_ref();
const ref_model& tiny_llama_ref();
// Both, for tests that run on each.
std::vector<const ref_model*> ref_models();
