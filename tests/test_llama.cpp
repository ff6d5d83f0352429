// Llama family through llama2.c files and HF folders (llama, qwen2, mistral): loader, tokenizer, and the forward
// vs a double-precision reference (RMSNorm, RoPE on adjacent pairs or halves with rope_theta and linear / llama3
// scaling, grouped-query attention, q/k/v biases, SwiGLU) for every ablation; malformed files and configs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "io/loader.h"
#include "io/safetensors.h"
#include "io/writers.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "run/generate.h"
#include "test_util.h"
#include "tiny_llama.h"
#include "tiny_model.h"
#include "util/error.h"

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
        expect_matches_reference(m, tm, tokens, shared ? "llama2.c shared" : "llama2.c separate");
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
        gb::record cap;
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

// The same weights as a Hugging Face folder. permute: q/k rows permuted as HF's converter does, so that
// rotating halves (i, i + d/2) there equals rotating adjacent pairs (2i, 2i+1) in the llama2.c file; without it
// the folder holds the weights as they are, and equals the reference with rope_half. The config says the
// spec's rope_theta and rope_scaling; biases are written when the spec has them; extra is merged into config.json.
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

void write_hf_llama(const std::string& dir, const tiny_llama& tm, bool sharded, bool permute = true,
                    const std::string& model_type = "llama", const nlohmann::json& extra = nlohmann::json::object()) {
    const tiny_llama_spec& s = tm.spec;
    const int d = s.dim, dh = d / s.n_head;
    nlohmann::json cfg = {{"model_type", model_type},    {"hidden_size", d},         {"intermediate_size", s.hidden},
                          {"num_hidden_layers", s.n_layer}, {"num_attention_heads", s.n_head},
                          {"num_key_value_heads", s.n_kv_head}, {"vocab_size", s.vocab},
                          {"max_position_embeddings", s.seq_len}, {"rms_norm_eps", 1e-5},
                          {"rope_theta", s.rope_theta}, {"tie_word_embeddings", s.shared_classifier}};
    if (s.rope_scaling == "linear") cfg["rope_scaling"] = {{"type", "linear"}, {"factor", s.rope_factor}};
    if (s.rope_scaling == "llama3")
        cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", s.rope_factor},
                               {"low_freq_factor", s.rope_low_freq_factor}, {"high_freq_factor", s.rope_high_freq_factor},
                               {"original_max_position_embeddings", s.rope_orig_ctx}};
    cfg.update(extra);
    std::ofstream(dir + "/config.json") << cfg.dump();
    auto rows = [&](const std::vector<float>& w, int heads, int in) { return permute ? to_hf_rows(w, heads, dh, in) : w; };
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
        put(v, p + "self_attn.q_proj.weight", {d, d}, rows(tm.w.at("wq" + k), s.n_head, d));
        put(v, p + "self_attn.k_proj.weight", {s.n_kv_head * dh, d}, rows(tm.w.at("wk" + k), s.n_kv_head, d));
        put(v, p + "self_attn.v_proj.weight", {s.n_kv_head * dh, d}, tm.w.at("wv" + k));
        if (s.qkv_bias) { // a bias is a one-column matrix: permuted like its rows
            put(v, p + "self_attn.q_proj.bias", {d}, rows(tm.w.at("bq" + k), s.n_head, 1));
            put(v, p + "self_attn.k_proj.bias", {s.n_kv_head * dh}, rows(tm.w.at("bk" + k), s.n_kv_head, 1));
            put(v, p + "self_attn.v_proj.bias", {s.n_kv_head * dh}, tm.w.at("bv" + k));
        }
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
                gb::record ca, cb;
                gb::forward_options opt;
                opt.all_logits = true;
                gb::run_forward(ca, a, tokens, x, opt);
                gb::run_forward(cb, b, tokens, x, opt);
                ASSERT_EQ(ca.logits.size(), cb.logits.size());
                for (size_t i = 0; i < ca.logits.size(); i++) ASSERT_NEAR(ca.logits[i], cb.logits[i], 1e-4) << i;
                const std::vector<float> pa = ca.flat(gb::HOOK_PATTERN), pb = cb.flat(gb::HOOK_PATTERN);
                for (size_t i = 0; i < pa.size(); i++) ASSERT_NEAR(pa[i], pb[i], 1e-5) << i;
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

// "abc" with the pieces "ab" (score -5) and "bc" (score -1): llama2.c merges the best-scoring pair first, so "bc"
// wins although "ab" comes first both in the text and in the vocabulary; "z" is no piece: byte token <0x7A>.
TEST(Llama2c, TokenizerMergesBestScoreFirstAndFallsBackToBytes) {
    std::vector<std::string> vocab = {"<unk>", "\n<s>\n", "\n</s>\n"};
    std::vector<float> scores = {0, 0, 0};
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        vocab.push_back(name), scores.push_back(0);
    }
    const int sp = (int)vocab.size(), a = sp + 1, b = sp + 2, c = sp + 3, ab = sp + 4, bc = sp + 5;
    for (const char* p : {" ", "a", "b", "c"}) vocab.push_back(p), scores.push_back(-100);
    vocab.push_back("ab"), scores.push_back(-5);
    vocab.push_back("bc"), scores.push_back(-1);
    std::string path = test_temp_dir("llama_tok_order") + "/tokenizer.bin";
    write_llama2c_tokenizer(path, vocab, scores);
    gb::tokenizer t = gb::load_llama2c_tokenizer(path, (int)vocab.size());
    // BOS, the dummy-prefix space, then the pieces
    EXPECT_EQ(gb::encode_prompt(t, "abc", false), (std::vector<int>{1, sp, a, bc}));
    EXPECT_EQ(gb::encode_prompt(t, "abcabc", false), (std::vector<int>{1, sp, a, bc, a, bc}));
    EXPECT_EQ(gb::encode_prompt(t, "cab", false), (std::vector<int>{1, sp, c, ab}));
    EXPECT_EQ(gb::encode_prompt(t, "abz", false), (std::vector<int>{1, sp, ab, 3 + 'z'}));
    EXPECT_EQ(gb::encode_prompt(t, "bz\xc3\xa9", false), (std::vector<int>{1, sp, b, 3 + 'z', 3 + 0xc3, 3 + 0xa9}));
    EXPECT_EQ(gb::decode(t, {1, sp, ab, 3 + 'z'}), "abz");
}

namespace {


// How far apart two references are (scaled like the tests' tolerance): a setting the tests rely on must move
// the logits far more than the 1e-4 the tests allow, or a loader ignoring it would pass unnoticed.
double reference_gap(const tiny_llama& a, const tiny_llama& b, const std::vector<int>& tokens) {
    llama_ref ra = reference_llama(a, tokens, {}), rb = reference_llama(b, tokens, {});
    return max_scaled_error(std::vector<float>(ra.logits.begin(), ra.logits.end()), rb.logits);
}

} // namespace

// HF checkpoints rotate halves: the weights written as they are (no permutation) equal the reference rotating
// halves, for every ablation; the reference on adjacent pairs is far from it, so a pairing mix-up fails.
TEST(HfLlama, RotateHalfMatchesReferenceForEveryAblation) {
    tiny_llama_spec s;
    s.rope_half = true;
    s.seed = 31;
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_half_c"), s);
    std::string dir = test_temp_dir("hf_half");
    write_hf_llama(dir, tm, false, false);
    gb::model m = gb::load_model(dir);
    EXPECT_EQ(m.config.rope, gb::ROPE_HALF);
    std::vector<int> tokens = random_tokens(19, 256, 6);
    expect_matches_reference(m, tm, tokens, "HF llama, rotate-half");
    tiny_llama adjacent = tm;
    adjacent.spec.rope_half = false;
    EXPECT_GT(reference_gap(adjacent, tm, tokens), 1e-2);
}

// Frequencies worked out by hand for head size 8 (pairs i = 0..3, theta^(-2i/8)):
// - theta 1e6: 1, 1e6^-0.25 = 0.0316227766, 1e-3, 3.16227766e-5; rope_type "default": theta 10000 unchanged.
// - linear, factor 2 (theta 10000): 0.5, 0.05, 0.005, 0.0005.
// - llama3, theta 10000, factor 8, low 1, high 4, original context 128: wavelengths 2π/f = 6.28, 62.8, 628, 6283
//   against 128/4 = 32 and 128/1 = 128. Pair 0 (6.28 < 32) is kept: 1. Pair 1 is between: smooth =
//   (128/62.832 - 1)/(4 - 1) = 0.345728, (1 - smooth) * 0.1/8 + smooth * 0.1 = 0.0427511788. Pairs 2 and 3
//   (> 128) are divided by 8: 0.00125, 0.000125.
TEST(HfLlama, RopeFrequencyTablesWorkedOutByHand) {
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_rope_table_c"), tiny_llama_spec{});
    std::string dir = test_temp_dir("hf_rope_table");
    auto load_with = [&](const nlohmann::json& extra) {
        write_hf_llama(dir, tm, false, false, "llama", extra);
        return gb::load_model(dir).config;
    };
    auto expect_table = [](const gb::model_config& c, const std::vector<double>& want, const std::string& what) {
        ASSERT_EQ(c.rope_freq.size(), want.size()) << what;
        for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(c.rope_freq[i], want[i], 1e-9 * want[i]) << what << ", pair " << i;
    };
    expect_table(load_with({{"rope_theta", 1e6}}), {1, 0.0316227766017, 1e-3, 3.16227766017e-5}, "theta 1e6");
    expect_table(load_with({{"rope_scaling", {{"rope_type", "default"}}}}), {1, 0.1, 0.01, 0.001}, "default");
    gb::model_config lin = load_with({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}});
    EXPECT_EQ(lin.rope_scaling, gb::ROPE_SCALING_LINEAR);
    expect_table(lin, {0.5, 0.05, 0.005, 0.0005}, "linear, factor 2");
    gb::model_config l3 = load_with({{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 128}}}});
    EXPECT_EQ(l3.rope_scaling, gb::ROPE_SCALING_LLAMA3);
    EXPECT_EQ(l3.rope_orig_ctx, 128);
    expect_table(l3, {1, 0.0427511787543, 0.00125, 0.000125}, "llama3");
}

// Llama 3.1/3.2 configs: rope_scaling llama3 with theta 500000. With head size 8 the pairs' wavelengths (6.3,
// 167, 4443, 118000) against an original context of 512 (512/4 = 128, 512/1 = 512) hit all three cases.
TEST(HfLlama, Llama3RopeScalingMatchesReferenceForEveryAblation) {
    tiny_llama_spec s;
    s.rope_half = true, s.seed = 32, s.rope_theta = 500000;
    s.rope_scaling = "llama3", s.rope_factor = 8, s.rope_low_freq_factor = 1, s.rope_high_freq_factor = 4, s.rope_orig_ctx = 512;
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_llama3_c"), s);
    std::string dir = test_temp_dir("hf_llama3");
    write_hf_llama(dir, tm, false, false, "llama", {{"head_dim", s.dim / s.n_head}});
    gb::model m = gb::load_model(dir);
    EXPECT_EQ(m.config.rope_scaling, gb::ROPE_SCALING_LLAMA3);
    EXPECT_EQ(m.config.rope_theta, 500000.0f);
    ASSERT_EQ(m.config.rope_freq.size(), 4u);
    for (int i = 0; i < 4; i++) EXPECT_NEAR(m.config.rope_freq[i], reference_rope_freq(s, i), 1e-12) << "pair " << i;
    std::vector<int> tokens = random_tokens(30, 256, 7);
    expect_matches_reference(m, tm, tokens, "HF llama3 rope_scaling");
    tiny_llama unscaled = tm, theta10k = tm;
    unscaled.spec.rope_scaling = "none";
    theta10k.spec.rope_theta = 10000;
    EXPECT_GT(reference_gap(unscaled, tm, tokens), 1e-2) << "ignoring rope_scaling must fail this test";
    EXPECT_GT(reference_gap(theta10k, tm, tokens), 1e-2) << "ignoring rope_theta must fail this test";
}

TEST(HfLlama, RopeScalingItCannotComputeIsRefusedByName) {
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_rope_bad_c"), tiny_llama_spec{});
    std::string dir = test_temp_dir("hf_rope_bad");
    auto load_with = [&](const nlohmann::json& scaling) {
        write_hf_llama(dir, tm, false, false, "llama", {{"rope_scaling", scaling}});
        gb::load_model(dir);
    };
    for (const char* type : {"yarn", "dynamic", "longrope"})
        expect_gb_error([&] { load_with({{"rope_type", type}, {"factor", 4.0}}); }, std::string("'") + type + "' is not supported");
    expect_gb_error([&] { load_with({{"type", "su"}, {"factor", 4.0}}); }, "'su'");
    expect_gb_error([&] { load_with({{"factor", 4.0}}); }, "(none given)");
    expect_gb_error([&] { load_with("llama3"); }, "must be an object");
    nlohmann::json l3 = {{"rope_type", "llama3"}, {"factor", 8.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
    expect_gb_error([&] { load_with(l3); }, "missing low_freq_factor");
    l3["low_freq_factor"] = 4.0;
    expect_gb_error([&] { load_with(l3); }, "must exceed low_freq_factor");
    expect_gb_error([&] { load_with({{"type", "linear"}, {"factor", -2.0}}); }, "factor");
}

// Qwen2: q/k/v biases, rope_theta 1e6, rotate-half, the weights as they are. The reference without biases or
// with theta 10000 is far away, so a loader ignoring either would fail.
TEST(HfQwen2, MatchesReferenceForEveryAblation) {
    for (bool shared : {true, false}) {
        tiny_llama_spec s;
        s.rope_half = true, s.rope_theta = 1e6, s.qkv_bias = true, s.shared_classifier = shared, s.seed = shared ? 33 : 34;
        tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_qwen2_c"), s);
        std::string dir = test_temp_dir("hf_qwen2");
        write_hf_llama(dir, tm, false, false, "qwen2", {{"use_sliding_window", false}, {"sliding_window", 8}});
        gb::model m = gb::load_model(dir);
        EXPECT_EQ(m.config.model_type, "qwen2");
        EXPECT_TRUE(m.config.qkv_bias);
        EXPECT_EQ(m.config.rope_theta, 1e6f);
        EXPECT_EQ(m.config.n_ctx, s.seq_len) << "Qwen2 ignores sliding_window unless use_sliding_window";
        EXPECT_EQ(m.config.tied_lm_head, shared);
        std::vector<int> tokens = random_tokens(19, 256, 8);
        expect_matches_reference(m, tm, tokens, shared ? "HF qwen2 tied" : "HF qwen2");
        tiny_llama theta10k = tm, nobias = tm;
        theta10k.spec.rope_theta = 10000;
        nobias.spec.qkv_bias = false;
        EXPECT_GT(reference_gap(theta10k, tm, tokens), 1e-2);
        EXPECT_GT(reference_gap(nobias, tm, tokens), 1e-2);
    }
}

// Mistral: grouped-query attention, rotate-half, sliding_window. Window attention is not implemented: the
// context is capped to the window, where full causal attention is the same thing, so prompts up to the window
// match the reference and a longer one is refused. sliding_window null (Mistral v0.2 on) leaves the context.
// The window is applied (tests/test_families.cpp checks it against a windowed reference); the context is not
// capped to it any more.
TEST(HfMistral, SlidingWindowIsReadAndTheContextIsNotCapped) {
    tiny_llama_spec s;
    s.rope_half = true, s.seed = 35, s.n_head = 4, s.n_kv_head = 2;
    tiny_llama tm = write_tiny_llama2c(test_temp_dir("hf_mistral_c"), s);
    std::string dir = test_temp_dir("hf_mistral");
    write_hf_llama(dir, tm, false, false, "mistral", {{"sliding_window", 12}});
    gb::model m = gb::load_model(dir);
    EXPECT_EQ(m.config.model_type, "mistral");
    EXPECT_EQ(m.config.n_kv_head, 2);
    EXPECT_EQ(m.config.sliding_window, 12);
    EXPECT_EQ(m.config.n_ctx, s.seq_len);
    // up to the window, the window changes nothing
    expect_matches_reference(m, tm, random_tokens(12, 256, 9), "HF mistral, window 12");
    write_hf_llama(dir, tm, false, false, "mistral", {{"sliding_window", nullptr}});
    gb::model full = gb::load_model(dir);
    EXPECT_EQ(full.config.n_ctx, s.seq_len);
    EXPECT_EQ(full.config.sliding_window, 0);
    expect_matches_reference(full, tm, random_tokens(25, 256, 10), "HF mistral, no window");
    // past it, the first 12 positions are the same and the last is not
    gb::record a, b;
    gb::forward_options o;
    o.all_logits = true;
    const std::vector<int> toks = random_tokens(25, 256, 10);
    gb::run_forward(a, m, toks, {}, o);
    gb::run_forward(b, full, toks, {}, o);
    const size_t V = m.config.vocab_size;
    for (size_t i = 0; i < 12 * V; i++) ASSERT_EQ(a.logits[i], b.logits[i]) << i;
    EXPECT_GT(max_scaled_error(std::vector<float>(a.logits.end() - V, a.logits.end()),
                               std::vector<double>(b.logits.end() - V, b.logits.end())), 1e-3);
}
