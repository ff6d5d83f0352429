// Llama family through llama2.c files: loader, tokenizer, and the forward vs a double-precision reference
// (RMSNorm, RoPE on adjacent pairs, grouped-query attention, SwiGLU) for every ablation; malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "error.h"
#include "forward.h"
#include "tiny_llama.h"
#include "tiny_model.h"

namespace {

double worst(const std::vector<float>& got, const std::vector<double>& want) {
    EXPECT_EQ(got.size(), want.size());
    double w = 0, scale = 1;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < std::min(got.size(), want.size()); i++) w = std::max(w, std::abs(got[i] - want[i]));
    return w / scale;
}

gb::layer_set on(std::vector<int> layers = {}) {
    gb::layer_set s;
    s.on = true;
    s.layers = std::move(layers);
    return s;
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
    try {
        fn();
        FAIL() << "expected an error containing '" << needle << "'";
    } catch (const gb::error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

} // namespace

TEST(Llama2c, ForwardMatchesReferenceForEveryAblation) {
    for (bool shared : {true, false}) {
        tiny_llama_spec s;
        s.shared_classifier = shared;
        s.seed = shared ? 3 : 4;
        tiny_llama tm = write_tiny_llama2c(test_temp_dir("llama_ref"), s);
        gb::load_options lo;
        lo.tokenizer_path = tm.tokenizer_path;
        gb::model m = gb::load_model(tm.model_path, lo);
        EXPECT_EQ(m.config.arch, gb::ARCH_LLAMA);
        EXPECT_EQ(m.config.n_kv_head, 2);
        EXPECT_EQ(m.config.rope, gb::ROPE_ADJACENT);
        EXPECT_EQ(m.config.tied_lm_head, shared);
        std::mt19937 rng(5);
        std::vector<int> tokens(19);
        for (int& t : tokens) t = (int)(rng() % s.vocab);
        std::vector<std::pair<std::string, gb::ablation>> cases(8);
        cases[0].first = "none";
        cases[1].first = "no-attention", cases[1].second.no_attention = on();
        cases[2].first = "no-residual[1]", cases[2].second.no_residual = on({1});
        cases[3].first = "no-layernorm (RMSNorm)", cases[3].second.no_layernorm = on();
        cases[4].first = "no-layernorm[0]", cases[4].second.no_layernorm = on({0});
        cases[5].first = "heads 0.1 1.3", cases[5].second.heads = {{0, 1}, {1, 3}};
        cases[6].first = "all", cases[6].second.no_attention = cases[6].second.no_residual = cases[6].second.no_layernorm = on({0});
        cases[7].first = "no-residual", cases[7].second.no_residual = on();
        for (const auto& [name, ab] : cases) {
            gb::capture cap;
            gb::forward_options opt;
            opt.all_logits = true;
            gb::run_forward(cap, m, tokens, ab, opt);
            llama_ref ref = reference_llama(tm, tokens, ab);
            EXPECT_LT(worst(cap.logits, ref.logits), 1e-4) << name << (shared ? " shared" : " separate") << ": logits";
            EXPECT_LT(worst(cap.attention, ref.attention), 1e-4) << name << ": attention";
            EXPECT_LT(worst(cap.resid_norm, ref.resid_norm), 1e-4) << name << ": residual norms";
        }
    }
}

TEST(Llama2c, KvCacheGenerationEqualsFullRecompute) {
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("llama_gen"), tiny_llama_spec{});
    gb::load_options lo;
    lo.tokenizer_path = tm.tokenizer_path;
    gb::model m = gb::load_model(tm.model_path, lo);
    std::vector<int> prompt = {1, 40, 77, 120};
    gb::generation g = gb::generate(m, prompt, 12, gb::sampling{});
    std::vector<int> seq = prompt;
    for (size_t i = 0; i < g.ids.size(); i++) {
        gb::capture cap;
        gb::run_forward(cap, m, seq);
        const float* lg = cap.last_logits();
        int best = (int)(std::max_element(lg, lg + m.config.vocab_size) - lg);
        ASSERT_EQ(g.ids[i], best) << "step " << i;
        seq.push_back(best);
    }
}

TEST(Llama2c, TokenizerEncodesLikeLlama2c) {
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("llama_tok"), tiny_llama_spec{});
    gb::tokenizer t = gb::load_llama2c_tokenizer(tm.tokenizer_path, 300);
    EXPECT_EQ(t.bos_id, 1);
    EXPECT_EQ(t.eos_id, 2);
    // " the cat": dummy prefix space, then merges by best score: " t" (-1), "he" (-2), " the" (-3) ...
    std::vector<int> ids = gb::encode_prompt(t, "the cat", false);
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids[0], 1) << "llama2.c prepends BOS";
    EXPECT_EQ(t.vocab[ids[1]], " the");
    EXPECT_EQ(t.vocab[ids[2]], " cat");
    EXPECT_EQ(gb::decode(t, ids), "the cat");
    // bytes not in the vocabulary fall back to <0xXX> tokens and decode back exactly
    std::string text = "the Z\xc3\xa9 \xe6\x97\xa5!";
    std::vector<int> enc = gb::encode_prompt(t, text, false);
    EXPECT_EQ(gb::decode(t, enc), text);
    EXPECT_NE(std::find(enc.begin(), enc.end(), 3 + 0xc3), enc.end()) << "é falls back to bytes";
    EXPECT_EQ(gb::token_text(t, 3 + 'Z'), "Z");
}

TEST(Llama2c, MalformedFilesGiveClearErrors) {
    std::string dir = test_temp_dir("llama_bad");
    tiny_llama tm = write_tiny_llama2c(dir + "/ok", tiny_llama_spec{});
    gb::load_options lo;
    lo.tokenizer_path = tm.tokenizer_path;
    auto read = [](const std::string& p) {
        std::ifstream f(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    std::string raw = read(tm.model_path);
    auto with = [&](const std::string& bytes) {
        std::ofstream(dir + "/m.bin", std::ios::binary) << bytes;
        return dir + "/m.bin";
    };
    expect_error([&] { gb::load_model(with(raw.substr(0, raw.size() - 100)), lo); }, "truncated");
    expect_error([&] { gb::load_model(with(raw.substr(0, 10)), lo); }, "header needs 28");
    std::string huge = raw;
    int32_t big = 2000000000;
    std::memcpy(&huge[4], &big, 4); // hidden_dim absurd: refused before any allocation
    expect_error([&] { gb::load_model(with(huge), lo); }, "hidden_dim");
    std::string heads = raw;
    int32_t three = 3;
    std::memcpy(&heads[12], &three, 4); // 32 not divisible by 3 heads
    expect_error([&] { gb::load_model(with(heads), lo); }, "not divisible");
    std::string extra = raw + std::string(64, '\0');
    expect_error([&] { gb::load_model(with(extra), lo); }, "wrong header");
    gb::load_options none;
    std::filesystem::create_directories(dir + "/alone");
    std::ofstream(dir + "/alone/m.bin", std::ios::binary) << raw;
    expect_error([&] { gb::load_model(dir + "/alone/m.bin", none); }, "no tokenizer");
    // tokenizer.bin: truncated, absurd lengths, too few tokens
    std::string tok = read(tm.tokenizer_path);
    std::ofstream(dir + "/t1.bin", std::ios::binary) << tok.substr(0, tok.size() / 2);
    expect_error([&] { gb::load_llama2c_tokenizer(dir + "/t1.bin", 300); }, "t1.bin");
    std::string bad_len = tok;
    int32_t neg = -5;
    std::memcpy(&bad_len[8], &neg, 4); // first token's length
    std::ofstream(dir + "/t2.bin", std::ios::binary) << bad_len;
    expect_error([&] { gb::load_llama2c_tokenizer(dir + "/t2.bin", 300); }, "length -5");
    expect_error([&] { gb::load_llama2c_tokenizer(tm.tokenizer_path, 100000000); }, "too small");
}
