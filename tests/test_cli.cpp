// glassbox-cli end to end on a tiny model: outputs, formats (.npy, JSON), exit codes and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "forward.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

// Runs the CLI with arguments already shell-quoted by the caller.
command_result cli(const std::string& args) { return run_command(std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli " + args); }

const tiny_model& model_dir() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 2;
        s.n_head = 3;
        s.d_model = 24;
        s.n_ctx = 40;
        return write_tiny_gpt2(test_temp_dir("cli_model"), s);
    }();
    return tm;
}

std::string M() { return "--model '" + model_dir().dir + "'"; }

// .npy header: returns the shape tuple text and checks the magic and dtype
std::string npy_shape(const std::string& bytes, const std::string& descr) {
    EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
    size_t hl = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    EXPECT_EQ((10 + hl) % 64, 0u) << "header padded to 64 bytes";
    std::string header = bytes.substr(10, hl);
    EXPECT_NE(header.find("'descr': '" + descr + "'"), std::string::npos) << header;
    EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
    size_t a = header.find("'shape': (") + 10, b = header.find(')', a);
    return header.substr(a, b - a);
}

} // namespace

TEST(Cli, RunPrintsTokensAndTopK) {
    command_result r = cli("run " + M() + " --prompt 'the cat' --top-k 5");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("tokens ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("top 5 next tokens"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("   5. "), std::string::npos) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Cli, JsonAndNpyMatchTheContract) {
    std::string dir = test_temp_dir("cli_npy");
    command_result r = cli("run " + M() + " --prompt 'the cat sat' --all-logits --bos --top-k 4 --json " + dir +
                   "/out.json --npy-dir " + dir + "/npy --ablate no-layernorm --layers 1 --heads 0.2");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(slurp(dir + "/out.json"));
    for (const char* k : {"arch", "n_layer", "n_head", "n_kv_head", "d_model", "vocab_size", "n_ctx", "n_params"})
        EXPECT_TRUE(j["model"].contains(k)) << k;
    EXPECT_EQ(j["model"]["n_layer"], 2);
    const int T = (int)j["tokens"].size();
    ASSERT_GE(T, 2);
    EXPECT_EQ(j["tokens"][0]["id"], model_dir().config.vocab_size - 1) << "--bos prepends <|endoftext|>";
    EXPECT_EQ(j["top_k"].size(), 4u);
    EXPECT_EQ(j["residual_norms"]["labels"].size(), 5u);
    EXPECT_EQ(j["residual_norms"]["values"].size(), 5u);
    EXPECT_EQ(j["residual_norms"]["values"][0].size(), (size_t)T);
    EXPECT_TRUE(j["timing_ms"].contains("total"));
    EXPECT_EQ(j["ablation"], "no-layernorm[1] heads 0.2");
    const int V = model_dir().config.vocab_size;
    std::string t = std::to_string(T);
    EXPECT_EQ(npy_shape(slurp(dir + "/npy/tokens.npy"), "<i4"), t + ",");
    EXPECT_EQ(npy_shape(slurp(dir + "/npy/logits.npy"), "<f4"), t + ", " + std::to_string(V));
    EXPECT_EQ(npy_shape(slurp(dir + "/npy/attention.npy"), "<f4"), "2, 3, " + t + ", " + t);
    EXPECT_EQ(npy_shape(slurp(dir + "/npy/residual_norms.npy"), "<f4"), "5, " + t);
    // the .npy payload is the capture itself: compare attention with an in-process run
    gb::model m = gb::load_model(model_dir().dir);
    std::vector<int> ids;
    for (auto& tok : j["tokens"]) ids.push_back(tok["id"]);
    gb::ablation ab;
    ab.no_layernorm.on = true;
    ab.no_layernorm.layers = {1};
    ab.heads = {{0, 2}};
    gb::capture cap;
    gb::run_forward(cap, m, ids, ab);
    std::string att = slurp(dir + "/npy/attention.npy");
    size_t hl = (unsigned char)att[8] | ((unsigned char)att[9] << 8);
    ASSERT_EQ(att.size(), 10 + hl + cap.attention.size() * 4);
    EXPECT_EQ(0, std::memcmp(att.data() + 10 + hl, cap.attention.data(), cap.attention.size() * 4));
    // top-1 of the JSON equals the in-process prediction
    auto top = gb::top_k_probs(cap.last_logits(), cap.vocab, 1);
    EXPECT_EQ(j["top_k"][0]["id"], top[0].id);
}

TEST(Cli, GenerateGreedyIsDeterministicAndWritesJson) {
    std::string dir = test_temp_dir("cli_gen");
    command_result a = cli("generate " + M() + " --prompt 'the' --max-new-tokens 8 --json " + dir + "/g.json");
    ASSERT_EQ(a.code, 0) << a.err;
    auto j = nlohmann::json::parse(slurp(dir + "/g.json"));
    for (const char* k : {"prompt", "prompt_ids", "generated_ids", "generated_text"}) EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["prompt"], "the");
    command_result b = cli("generate " + M() + " --prompt 'the' --max-new-tokens 8");
    EXPECT_EQ(a.out, b.out);
    command_result s1 = cli("generate " + M() + " --prompt 'the' --max-new-tokens 8 --temperature 1 --top-p 0.9 --seed 3");
    command_result s2 = cli("generate " + M() + " --prompt 'the' --max-new-tokens 8 --temperature 1 --top-p 0.9 --seed 3");
    ASSERT_EQ(s1.code, 0) << s1.err;
    EXPECT_EQ(s1.out, s2.out) << "same seed, same text";
}

TEST(Cli, TokenizeRoundTrip) {
    command_result enc = cli("tokenize " + M() + " --text 'the cat'");
    ASSERT_EQ(enc.code, 0) << enc.err;
    auto ids = nlohmann::json::parse(enc.out);
    ASSERT_TRUE(ids.is_array());
    std::string list;
    for (auto& id : ids) list += (list.empty() ? "" : ",") + std::to_string((int)id);
    command_result dec = cli("tokenize --tokenizer '" + model_dir().dir + "' --decode " + list);
    ASSERT_EQ(dec.code, 0) << dec.err;
    EXPECT_EQ(dec.out, "the cat\n");
}

TEST(Cli, BenchWritesJson) {
    std::string dir = test_temp_dir("cli_bench");
    command_result r = cli("bench " + M() + " --tokens 8 --repeat 3 --json " + dir + "/b.json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(slurp(dir + "/b.json"));
    EXPECT_EQ(j["tokens"], 8);
    for (const char* k : {"median_ms", "min_ms", "max_ms"}) EXPECT_GT(j[k].get<double>(), 0.0) << k;
    EXPECT_LE(j["min_ms"].get<double>(), j["median_ms"].get<double>());
    for (const char* k : {"matmul", "attention", "rest"}) EXPECT_TRUE(j["split_ms"].contains(k)) << k;
}

TEST(Cli, ErrorsAreOneLineWithExitCodes) {
    auto expect_error = [](const std::string& args, int code, const std::string& needle) {
        command_result r = cli(args);
        EXPECT_EQ(r.code, code) << args << "\n" << r.err;
        EXPECT_EQ(r.err.rfind("error:", 0), 0u) << args << ": " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    };
    expect_error("frobnicate", 2, "unknown command");
    expect_error("run " + M(), 2, "--prompt");
    expect_error("run " + M() + " --prompt x --bogus 1", 2, "--bogus");
    expect_error("run --model /nonexistent/model --prompt x", 2, "/nonexistent/model");
    expect_error("run " + M() + " --prompt x --ablate no-brain", 2, "no-brain");
    expect_error("run " + M() + " --prompt x --heads 9.0", 2, "9.0");
    expect_error("run " + M() + " --prompt x --heads 1", 2, "--heads");
    expect_error("run " + M() + " --prompt x --layers 1", 2, "--ablate");
    expect_error("run " + M() + " --prompt \"$(printf '\\377\\376')\"", 2, "UTF-8");
    std::string long_prompt(200, 'a');
    for (size_t i = 1; i < long_prompt.size(); i += 2) long_prompt[i] = ' ';
    expect_error("run " + M() + " --prompt '" + long_prompt + "'", 2, "too long");
    expect_error("generate " + M() + " --prompt x --max-new-tokens -3", 2, "--max-new-tokens");
}

TEST(Cli, CaptureBudgetKeepsSomeLayersAndSaysSo) {
    std::string dir = test_temp_dir("cli_budget");
    gb::model_config c;
    c.n_layer = 4, c.n_head = 8, c.d_model = 32, c.vocab_size = 300, c.n_ctx = 512;
    gb::save_hf_gpt2(dir + "/m", gb::random_gpt2(c, 3));
    std::string prompt(400, 'a'); // 400 byte tokens: 4 * 8 * 400^2 floats = 20 MB
    command_result r = cli("run --model '" + dir + "/m' --prompt '" + prompt + "' --capture-budget 6 --npy-dir " + dir + "/npy");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("budget"), std::string::npos) << r.err;
    std::string att = slurp(dir + "/npy/attention.npy");
    size_t hl = (unsigned char)att[8] | ((unsigned char)att[9] << 8);
    const float* p = (const float*)(att.data() + 10 + hl);
    const size_t per_layer = 8 * 400 * 400;
    EXPECT_EQ(p[0], 1.0f) << "layer 0 kept: its first row attends to itself";
    EXPECT_EQ(p[3 * per_layer], 0.0f) << "layer 3 left out: zeros";
}
