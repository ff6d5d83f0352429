// Llama family through llama2.c files: loader, tokenizer, and the forward vs a double-precision reference
// (RMSNorm, RoPE on adjacent pairs, grouped-query attention, SwiGLU) for every ablation; malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "error.h"
#include "safetensors.h"
#include "forward.h"
#include "test_util.h"
#include "tiny_llama.h"
#include "tiny_model.h"

namespace {

gb::layer_set on(std::vector<int> layers = {}) {
    gb::layer_set s;
    s.on = true;
    s.layers = std::move(layers);
    return s;
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
            EXPECT_LT(max_scaled_error(cap.logits, ref.logits), 1e-4) << name << (shared ? " shared" : " separate") << ": logits";
            EXPECT_LT(max_scaled_error(cap.attention, ref.attention), 1e-4) << name << ": attention";
            EXPECT_LT(max_scaled_error(cap.resid_norm, ref.resid_norm), 1e-4) << name << ": residual norms";
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
    expect_gb_error([&] { gb::load_model(with(raw.substr(0, raw.size() - 100)), lo); }, "truncated");
    expect_gb_error([&] { gb::load_model(with(raw.substr(0, 10)), lo); }, "header needs 28");
    std::string huge = raw;
    int32_t big = 2000000000;
    std::memcpy(&huge[4], &big, 4); // hidden_dim absurd: refused before any allocation
    expect_gb_error([&] { gb::load_model(with(huge), lo); }, "hidden_dim");
    std::string heads = raw;
    int32_t three = 3;
    std::memcpy(&heads[12], &three, 4); // 32 not divisible by 3 heads
    expect_gb_error([&] { gb::load_model(with(heads), lo); }, "not divisible");
    std::string extra = raw + std::string(64, '\0');
    expect_gb_error([&] { gb::load_model(with(extra), lo); }, "wrong header");
    gb::load_options none;
    std::filesystem::create_directories(dir + "/alone");
    std::ofstream(dir + "/alone/m.bin", std::ios::binary) << raw;
    expect_gb_error([&] { gb::load_model(dir + "/alone/m.bin", none); }, "no tokenizer");
    // tokenizer.bin: truncated, absurd lengths, too few tokens
    std::string tok = read(tm.tokenizer_path);
    std::ofstream(dir + "/t1.bin", std::ios::binary) << tok.substr(0, tok.size() / 2);
    expect_gb_error([&] { gb::load_llama2c_tokenizer(dir + "/t1.bin", 300); }, "t1.bin");
    std::string bad_len = tok;
    int32_t neg = -5;
    std::memcpy(&bad_len[8], &neg, 4); // first token's length
    std::ofstream(dir + "/t2.bin", std::ios::binary) << bad_len;
    expect_gb_error([&] { gb::load_llama2c_tokenizer(dir + "/t2.bin", 300); }, "length -5");
    expect_gb_error([&] { gb::load_llama2c_tokenizer(tm.tokenizer_path, 100000000); }, "too small");
}

// The same weights as a Hugging Face folder: q/k rows permuted as HF's converter does, so that rotating
// halves (i, i + d/2) there equals rotating adjacent pairs (2i, 2i+1) in the llama2.c file.
namespace {

std::vector<float> to_hf_rows(const std::vector<float>& w, int heads, int dh, int in) {
    std::vector<float> out(w.size());
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < dh / 2; i++)
            for (int b = 0; b < 2; b++)
                std::copy(&w[((size_t)h * dh + 2 * i + b) * in], &w[((size_t)h * dh + 2 * i + b) * in] + in,
                          &out[((size_t)h * dh + b * dh / 2 + i) * in]);
    return out;
}

void write_hf_llama(const std::string& dir, const tiny_llama& tm, bool sharded) {
    const tiny_llama_spec& s = tm.spec;
    const int d = s.dim, dh = d / s.n_head;
    nlohmann::json cfg = {{"model_type", "llama"},       {"hidden_size", d},         {"intermediate_size", s.hidden},
                          {"num_hidden_layers", s.n_layer}, {"num_attention_heads", s.n_head},
                          {"num_key_value_heads", s.n_kv_head}, {"vocab_size", s.vocab},
                          {"max_position_embeddings", s.seq_len}, {"rms_norm_eps", 1e-5},
                          {"rope_theta", 10000.0}, {"tie_word_embeddings", s.shared_classifier}};
    std::ofstream(dir + "/config.json") << cfg.dump();
    std::vector<gb::st_out> a, b;
    auto put = [&](std::vector<gb::st_out>& v, const std::string& n, std::vector<int64_t> shape, std::vector<float> data) {
        v.push_back({n, std::move(shape), std::move(data), gb::ST_F32});
    };
    put(a, "model.embed_tokens.weight", {s.vocab, d}, tm.w.at("emb"));
    for (int l = 0; l < s.n_layer; l++) {
        std::string p = "model.layers." + std::to_string(l) + ".", k = "." + std::to_string(l);
        auto& v = l % 2 ? b : a;
        put(v, p + "input_layernorm.weight", {d}, tm.w.at("rms_att" + k));
        put(v, p + "post_attention_layernorm.weight", {d}, tm.w.at("rms_ffn" + k));
        put(v, p + "self_attn.q_proj.weight", {d, d}, to_hf_rows(tm.w.at("wq" + k), s.n_head, dh, d));
        put(v, p + "self_attn.k_proj.weight", {s.n_kv_head * dh, d}, to_hf_rows(tm.w.at("wk" + k), s.n_kv_head, dh, d));
        put(v, p + "self_attn.v_proj.weight", {s.n_kv_head * dh, d}, tm.w.at("wv" + k));
        put(v, p + "self_attn.o_proj.weight", {d, d}, tm.w.at("wo" + k));
        put(v, p + "mlp.gate_proj.weight", {s.hidden, d}, tm.w.at("w1" + k));
        put(v, p + "mlp.up_proj.weight", {s.hidden, d}, tm.w.at("w3" + k));
        put(v, p + "mlp.down_proj.weight", {d, s.hidden}, tm.w.at("w2" + k));
    }
    put(b, "model.norm.weight", {d}, tm.w.at("rms_final"));
    if (!s.shared_classifier) put(b, "lm_head.weight", {s.vocab, d}, tm.w.at("wcls"));
    if (sharded) {
        gb::write_safetensors(dir + "/model-00001-of-00002.safetensors", a);
        gb::write_safetensors(dir + "/model-00002-of-00002.safetensors", b);
        nlohmann::json map = nlohmann::json::object();
        for (auto& t : a) map[t.name] = "model-00001-of-00002.safetensors";
        for (auto& t : b) map[t.name] = "model-00002-of-00002.safetensors";
        std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json({{"weight_map", map}}).dump();
    } else {
        a.insert(a.end(), b.begin(), b.end());
        gb::write_safetensors(dir + "/model.safetensors", a);
    }
    // a byte-level tokenizer.json (256 tokens) is enough here: the test feeds ids
    nlohmann::json vocab = nlohmann::json::object();
    gb::model g = gb::random_gpt2([] {
        gb::model_config c;
        c.n_layer = 1, c.n_head = 1, c.d_model = 4, c.vocab_size = 257, c.n_ctx = 4;
        return c;
    }(), 1);
    for (int i = 0; i < 256; i++) vocab[g.tok.vocab[i]] = i;
    nlohmann::json tj = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                         {"pre_tokenizer", {{"type", "ByteLevel"}}}};
    std::ofstream(dir + "/tokenizer.json") << tj.dump();
}

} // namespace

TEST(HfLlama, SameWeightsAsLlama2cGiveSameOutputs) {
    for (bool sharded : {false, true})
        for (bool shared : {true, false}) {
            tiny_llama_spec s;
            s.shared_classifier = shared;
            s.seed = 9;
            tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_llama_c"), s);
            std::string dir = test_temp_dir("hf_llama_hf");
            write_hf_llama(dir, tm, sharded);
            gb::load_options lo;
            lo.tokenizer_path = tm.tokenizer_path;
            gb::model a = gb::load_model(tm.model_path, lo), b = gb::load_model(dir);
            EXPECT_EQ(b.config.rope, gb::ROPE_HALF);
            EXPECT_EQ(b.config.n_kv_head, s.n_kv_head);
            std::vector<int> tokens = {5, 17, 200, 3, 99, 42, 7, 150, 11};
            gb::ablation ab;
            ab.heads = {{1, 2}};
            ab.no_layernorm.on = true;
            ab.no_layernorm.layers = {0};
            for (const gb::ablation& x : {gb::ablation{}, ab}) {
                gb::capture ca, cb;
                gb::forward_options opt;
                opt.all_logits = true;
                gb::run_forward(ca, a, tokens, x, opt);
                gb::run_forward(cb, b, tokens, x, opt);
                ASSERT_EQ(ca.logits.size(), cb.logits.size());
                for (size_t i = 0; i < ca.logits.size(); i++) ASSERT_NEAR(ca.logits[i], cb.logits[i], 1e-4) << i;
                for (size_t i = 0; i < ca.attention.size(); i++) ASSERT_NEAR(ca.attention[i], cb.attention[i], 1e-5) << i;
                llama_ref ref = reference_llama(tm, tokens, x);
                EXPECT_LT(max_scaled_error(cb.logits, ref.logits), 1e-4);
            }
        }
}

TEST(HfLlama, BadConfigsAndMissingShards) {
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_llama_bad_c"), tiny_llama_spec{});
    std::string dir = test_temp_dir("hf_llama_bad");
    write_hf_llama(dir, tm, true);
    std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
    expect_gb_error([&] { gb::load_model(dir); }, "model-00002-of-00002.safetensors");
    write_hf_llama(dir, tm, false);
    auto cfg = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
    cfg["num_key_value_heads"] = 3;
    std::ofstream(dir + "/config.json") << cfg.dump();
    expect_gb_error([&] { gb::load_model(dir); }, "num_key_value_heads");
}
