// glassbox-cli make-random: the HF folders and GGUF files it writes open, have the shape asked for, and run
// (llama.cpp's side of the GGUF files is in test_llama_cpp.cpp).
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
#include "io/loader.h"
#include "io/writers.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "run/generate.h"
#include "test_util.h"
#include "tiny_model.h"

// make-random --arch llama writes a HF Llama folder the loader opens: the shape asked for (grouped-query
// attention, an untied head as lm_head.weight), info and run read it back, and a forward is finite. Options
// that only Llama has are refused for GPT-2.
TEST(Cli, MakeRandomLlamaOpensAndRuns) {
    const std::string dir = test_temp_dir("cli_llama");
    // per layer: q, o [d][d] and k, v [d/2][d] (2 of 4 heads); gate, up, down with ff 96; two norm gains
    const int64_t V = 300, d = 64, layer = 3 * d * d + 3 * d * 96 + 2 * d;
    for (int tied : {1, 0}) {
        const std::string m = dir + "/m" + std::to_string(tied);
        command_result mk = run_cli("make-random --arch llama --layers-n 2 --d-model 64 --heads-n 4 --kv-heads-n 2 --ff 96 "
                                "--vocab 300 --ctx 32 --dtype F16 --tied " + std::to_string(tied) + " --out " + m);
        ASSERT_EQ(mk.code, 0) << mk.err;
        auto cfg = nlohmann::json::parse(read_file(m + "/config.json"));
        EXPECT_EQ(cfg["model_type"], "llama");
        EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
        EXPECT_EQ(cfg["num_key_value_heads"], 2);
        EXPECT_EQ(cfg["max_position_embeddings"], 32);
        EXPECT_EQ(cfg["rope_theta"], 500000.0);
        EXPECT_EQ(cfg["tie_word_embeddings"], tied == 1);
        EXPECT_EQ(read_file(m + "/model.safetensors").find("lm_head.weight") != std::string::npos, tied == 0);

        command_result info = run_cli("info --model " + m);
        ASSERT_EQ(info.code, 0) << info.err;
        auto j = nlohmann::json::parse(info.out);
        EXPECT_EQ(j["arch"], "llama");
        EXPECT_EQ(j["n_layer"], 2);
        EXPECT_EQ(j["n_head"], 4);
        EXPECT_EQ(j["n_kv_head"], 2);
        EXPECT_EQ(j["d_model"], d);
        EXPECT_EQ(j["d_ff"], 96);
        EXPECT_EQ(j["vocab_size"], V);
        EXPECT_EQ(j["n_ctx"], 32);
        EXPECT_EQ(j["n_params"], (2 - tied) * V * d + 2 * layer + d);
        EXPECT_TRUE(j["nonfinite_tensor"].is_null());

        command_result run = run_cli("run --model " + m + " --prompt 'the cat sat' --top-k 3 --json " + m + "/run.json");
        ASSERT_EQ(run.code, 0) << run.err;
        EXPECT_TRUE(run.err.empty()) << run.err;
        EXPECT_EQ(run.out.find("non-finite"), std::string::npos) << run.out;
        auto r = nlohmann::json::parse(read_file(m + "/run.json"));
        EXPECT_EQ(r["model"]["arch"], "llama");
        EXPECT_EQ(r["model"]["n_kv_head"], 2);
        EXPECT_EQ(r["tokens"].size(), 11u) << "the byte-level tokenizer: one token per byte";
        double sum = 0;
        for (const auto& t : r["top_k"]) {
            ASSERT_TRUE(t["prob"].is_number()) << t; // NaN would be written as null
            sum += t["prob"].get<double>();
        }
        EXPECT_GT(sum, 0.0);
        EXPECT_LE(sum, 1.0 + 1e-6);
        for (const auto& row : r["residual_norms"]["values"])
            for (const auto& v : row) ASSERT_TRUE(v.is_number() && std::isfinite(v.get<double>())) << v;
    }
    // one GGUF file in a quantised type: kept as stored, runs
    {
        const std::string g = dir + "/m.gguf";
        command_result mk = run_cli("make-random --arch llama --layers-n 2 --d-model 256 --heads-n 4 --kv-heads-n 2 --ff 512 "
                                "--vocab 300 --ctx 32 --dtype Q4_K --out " + g);
        ASSERT_EQ(mk.code, 0) << mk.err;
        command_result info = run_cli("info --model " + g);
        ASSERT_EQ(info.code, 0) << info.err;
        auto j = nlohmann::json::parse(info.out);
        EXPECT_EQ(j["stored_types"]["mlp"], "Q4_K");
        EXPECT_EQ(j["stored_types"]["head"], "tied");
        EXPECT_GT(j["resident_bytes"].get<int64_t>(), 0);
        command_result run = run_cli("run --model " + g + " --prompt 'the cat'");
        EXPECT_EQ(run.code, 0) << run.err;
        // --weights f32: the old path, every weight dequantised at load, more memory, the same top tokens
        command_result f32 = run_cli("info --weights f32 --model " + g);
        ASSERT_EQ(f32.code, 0) << f32.err;
        auto jf = nlohmann::json::parse(f32.out);
        EXPECT_EQ(jf["stored_types"]["mlp"], "F32");
        EXPECT_GT(jf["resident_bytes"].get<int64_t>(), 3 * j["resident_bytes"].get<int64_t>());
        command_result run32 = run_cli("run --weights f32 --matmul fp32 --model " + g + " --prompt 'the cat'");
        EXPECT_EQ(run32.code, 0) << run32.err;
        auto top_lines = [](const std::string& out) { // the top-k lines: "  1. "tok"  0.0123  (id 7)"
            std::string keep, line;
            std::istringstream in(out);
            while (std::getline(in, line))
                if (line.find("(id ") != std::string::npos) keep += line + "\n";
            return keep;
        };
        const std::string stored_top = top_lines(run_cli("run --matmul fp32 --model " + g + " --prompt 'the cat'").out);
        EXPECT_FALSE(stored_top.empty());
        EXPECT_EQ(top_lines(run32.out), stored_top); // bit for bit the same logits on the fp32 kernel
        command_result bogus = run_cli("info --weights f16 --model " + g);
        EXPECT_EQ(bogus.code, 2);
        EXPECT_NE(bogus.err.find("--weights"), std::string::npos) << bogus.err;
        command_result bad = run_cli("make-random --arch llama --dtype Q3_K --out " + dir + "/bad.gguf");
        EXPECT_EQ(bad.code, 2);
        EXPECT_NE(bad.err.find("--dtype: expected F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"),
                  std::string::npos) << bad.err;
        command_result marian = run_cli("make-random --arch marian --out " + dir + "/m.gguf");
        EXPECT_EQ(marian.code, 2);
        EXPECT_NE(marian.err.find("--arch: a .gguf is written for gpt2, llama, mistral"), std::string::npos) << marian.err;
    }
    // a seed names one model
    ASSERT_EQ(run_cli("make-random --arch llama --layers-n 2 --d-model 64 --heads-n 4 --kv-heads-n 2 --ff 96 --vocab 300 "
                  "--ctx 32 --dtype F16 --out " + dir + "/again").code, 0);
    EXPECT_EQ(read_file(dir + "/again/model.safetensors"), read_file(dir + "/m1/model.safetensors"));

    auto refused = [&](const std::string& args, const std::string& needle) {
        command_result r = run_cli("make-random --out " + dir + "/bad " + args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
    };
    refused("--tied 0", "--tied goes with --arch llama");
    refused("--kv-heads-n 4", "--kv-heads-n goes with --arch llama");
    refused("--arch bert", "--arch: expected gpt2, llama or marian");
    refused("--arch llama --heads-n 4 --kv-heads-n 3 --d-model 64", "--heads-n must be a multiple of --kv-heads-n");
    refused("--arch llama --heads-n 4 --d-model 36", "odd");
}

// make-random --out X.gguf writes any family llama.cpp runs, in any type: info reads back the family's shape (a
// Qwen2-MoE's experts and shared expert, Gemma 2's window and caps), --dequantised writes the same weights as F32,
// and options a family cannot take are refused with the reason
TEST(Cli, MakeRandomGgufFamilies) {
    const std::string dir = test_temp_dir("cli_gguf_families");
    const std::string shape = "--layers-n 1 --d-model 256 --heads-n 4 --ff 256 --vocab 300 --ctx 32 ";
    command_result moe = run_cli("make-random --arch qwen2_moe --kv-heads-n 2 --experts-n 3 --experts-used-n 2 --dtype Q4_0 " +
                             shape + "--out " + dir + "/moe.gguf");
    ASSERT_EQ(moe.code, 0) << moe.err;
    EXPECT_NE(moe.out.find("wrote a random qwen2_moe GGUF (1 layers, d 256, 4 heads, 2 kv heads, ff 256, vocab 300, untied "
                           "head, 3 experts, top 2,"), std::string::npos) << moe.out;
    command_result info = run_cli("info --model " + dir + "/moe.gguf");
    ASSERT_EQ(info.code, 0) << info.err;
    auto j = nlohmann::json::parse(info.out);
    EXPECT_EQ(j["arch"], "qwen2moe"); // as the file names it
    EXPECT_EQ(j["n_kv_head"], 2);
    EXPECT_EQ(j["stored_types"]["mlp"], "Q4_0");
    EXPECT_EQ(j["experts"]["n_expert"], 3) << info.out;
    EXPECT_EQ(j["experts"]["d_ff_shared"], 256) << info.out;
    ASSERT_EQ(run_cli("make-random --arch gemma2 --dtype Q6_K --seed 5 " + shape + "--out " + dir + "/g.gguf").code, 0);
    ASSERT_EQ(run_cli("make-random --arch gemma2 --dtype Q6_K --seed 5 --dequantised " + shape + "--out " + dir + "/gf.gguf").code, 0);
    auto top = [&](const std::string& path) { // the top-k of a run on the fp32 kernel: the same weights, the same numbers
        command_result r = run_cli("run --matmul fp32 --model " + path + " --prompt 'the cat' --json " + path + ".json");
        EXPECT_EQ(r.code, 0) << r.err;
        return nlohmann::json::parse(read_file(path + ".json"))["top_k"];
    };
    EXPECT_EQ(top(dir + "/g.gguf"), top(dir + "/gf.gguf"));
    auto gi = nlohmann::json::parse(run_cli("info --model " + dir + "/gf.gguf").out);
    EXPECT_EQ(gi["stored_types"]["mlp"], "F32");
    EXPECT_EQ(gi["sliding_window"]["tokens"], 4096);
    EXPECT_FLOAT_EQ(gi["attn_softcap"].get<float>(), 50.0f);
    auto refused = [&](const std::string& args, const std::string& needle) {
        command_result r = run_cli("make-random " + shape + args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
    };
    refused("--arch gemma --tied 0 --out " + dir + "/x.gguf", "--tied: llama.cpp reads gemma's head as the embedding (tied)");
    refused("--arch olmo2 --tied 1 --out " + dir + "/x.gguf", "--tied: llama.cpp reads olmo2's head as its own matrix");
    refused("--arch gpt_neox --kv-heads-n 2 --out " + dir + "/x.gguf", "--kv-heads-n: gpt_neox has one K/V head per head");
    refused("--arch llama --experts-n 4 --out " + dir + "/x.gguf", "--experts-n goes with the MoE families");
    refused("--arch llama --dequantised --out " + dir + "/x", "--dequantised goes with --out FILE.gguf");
    refused("--arch olmoe --kv-heads-n 2 --out " + dir + "/x.gguf", "llama.cpp's OLMoE needs as many K/V heads as heads");
    refused("--arch bert --out " + dir + "/x.gguf", "--arch: a .gguf is written for");
}

