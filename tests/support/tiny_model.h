// Tiny random GPT-2 models written by the tests themselves in Hugging Face layout.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"

struct tiny_spec {
    int n_layer = 2, n_head = 2, d_model = 16, n_ctx = 32;
    int n_merges = 8;
    uint32_t seed = 1;
    std::string dtype = "F32"; // F32, F16, BF16
    bool prefix = false;       // write names with "transformer."
    bool tied = true;          // no lm_head.weight
    float std = 0.3f;          // weight scale: large enough for non-trivial attention
};

struct tiny_model {
    std::string dir;
    gb::model_config config;
    std::map<std::string, std::vector<float>> tensors; // HF names without prefix, HF layout, values as stored
};

// Creates dir and writes config.json, model.safetensors, vocab.json, merges.txt.
tiny_model write_tiny_gpt2(const std::string& dir, const tiny_spec& s);
// The small GPT-2 the CLI tests share (2 layers, 3 heads, d 24, 40 positions), written once per test binary, and
// "--model '<its folder>'" for a command line.
const tiny_model& cli_test_model();
std::string cli_test_model_arg();
// The same, as the CLI tests spell it
inline std::string M() { return cli_test_model_arg(); }
// text's ids under m's tokenizer, without a BOS
std::vector<int> ids_of(const gb::model& m, const std::string& text);

// A fresh, empty directory under the build tree: GLASSBOX_BINARY_DIR/test_tmp/name-PID (unique per process).
std::string test_temp_dir(const std::string& name);
