// Tiny GPT-2 and GQA Llama fixtures with their references (written once per process and matmul kernel).
#include "ref_models.h"

#include <map>
#include <memory>
#include <random>

#include "io/loader.h"
#include "kernels/gemm.h"
#include "reference.h"
#include "tiny_llama.h"
#include "tiny_model.h"

std::vector<int> ref_model::tokens(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int> t(n);
    for (int& v : t) v = 3 + (int)(rng() % (uint32_t)(m.config.vocab_size - 4));
    return t;
}

static std::map<std::string, std::unique_ptr<ref_model>>& cache() {
    static std::map<std::string, std::unique_ptr<ref_model>> c;
    return c;
}

const ref_model& tiny_gpt2_ref() {
    auto& slot = cache()[std::string("gpt2/") + gb::matmul_name(gb::matmul_kind_now())];
    if (!slot) {
        tiny_spec s;
        s.n_layer = 3;
        s.n_head = 4;
        s.d_model = 32;
        s.n_ctx = 32;
        s.seed = 21;
        tiny_model tm = write_tiny_gpt2(test_temp_dir(std::string("ref_gpt2_") + gb::matmul_name(gb::matmul_kind_now())), s);
        slot = std::make_unique<ref_model>();
        slot->name = "gpt2";
        slot->m = gb::load_model(tm.dir);
        slot->readout = reference_readout(tm);
        slot->reference = [tm](const std::vector<int>& t, const gb::ablation& ab, const ref_options& o) {
            return reference_forward(tm, t, ab, o);
        };
    }
    return *slot;
}

const ref_model& tiny_llama_ref() {
    auto& slot = cache()[std::string("llama/") + gb::matmul_name(gb::matmul_kind_now())];
    if (!slot) {
        tiny_llama_spec s;
        s.n_layer = 3;
        s.n_head = 4;
        s.n_kv_head = 2;
        s.shared_classifier = false;
        s.seed = 22;
        s.std = 0.2f; // no-layernorm on 3 layers stays where float32 rounding is within the tests' 1e-4
        tiny_llama tl = write_tiny_llama2c(test_temp_dir(std::string("ref_llama_") + gb::matmul_name(gb::matmul_kind_now())), s);
        gb::load_options lo;
        lo.tokenizer_path = tl.tokenizer_path;
        slot = std::make_unique<ref_model>();
        slot->name = "llama-gqa";
        slot->m = gb::load_model(tl.model_path, lo);
        slot->readout = reference_readout(tl);
        slot->reference = [tl](const std::vector<int>& t, const gb::ablation& ab, const ref_options& o) {
            return reference_llama(tl, t, ab, o);
        };
    }
    return *slot;
}

std::vector<const ref_model*> ref_models() { return {&tiny_gpt2_ref(), &tiny_llama_ref()}; }
