// Writes tiny random GPT-2 folders (weights, config, byte-level BPE vocabulary with a few merges).
#include "tiny_model.h"

#include "test_paths.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "io/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "util/half.h"

namespace {

// GPT-2's byte stand-ins, written independently of core/tokenizer/tokenizer.cpp
std::vector<std::string> byte_symbols() {
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; b++) bs.push_back(b);
    for (int b = 0xa1; b <= 0xac; b++) bs.push_back(b);
    for (int b = 0xae; b <= 0xff; b++) bs.push_back(b);
    std::vector<int> cps(bs.begin(), bs.end());
    int n = 0;
    for (int b = 0; b < 256; b++)
        if (std::find(bs.begin(), bs.end(), b) == bs.end()) bs.push_back(b), cps.push_back(256 + n++);
    std::vector<std::string> sym(256);
    for (size_t i = 0; i < bs.size(); i++) {
        int cp = cps[i];
        std::string u;
        if (cp < 0x80) u += (char)cp;
        else u += (char)(0xc0 | (cp >> 6)), u += (char)(0x80 | (cp & 0x3f));
        sym[bs[i]] = u;
    }
    return sym;
}

} // namespace

std::string test_temp_dir(const std::string& name) {
    // ctest runs each test in its own process, several at once: the pid keeps their directories apart
    std::filesystem::path p = std::filesystem::path(GLASSBOX_BINARY_DIR) / "test_tmp" / (name + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p.string();
}

tiny_model write_tiny_gpt2(const std::string& dir, const tiny_spec& s) {
    std::filesystem::create_directories(dir);
    // vocabulary: 256 bytes, merges of common English pairs, then <|endoftext|>
    std::vector<std::string> sym = byte_symbols();
    const std::string G = sym[' ']; // "Ġ"
    std::vector<std::pair<std::string, std::string>> all_merges = {
        {G, "t"}, {"h", "e"}, {G + "t", "he"}, {G, "c"}, {"a", "t"}, {G + "c", "at"}, {G, "s"}, {"i", "n"},
        {G + "s", "at"}, {G, "o"}, {G + "o", "n"}, {"e", "r"}};
    int n_merges = std::min<int>(s.n_merges, (int)all_merges.size());
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; b++) vocab[sym[b]] = b;
    std::ofstream merges(dir + "/merges.txt");
    merges << "#version: 0.2\n";
    for (int i = 0; i < n_merges; i++) {
        vocab[all_merges[i].first + all_merges[i].second] = 256 + i;
        merges << all_merges[i].first << " " << all_merges[i].second << "\n";
    }
    const int V = 256 + n_merges + 1;
    vocab["<|endoftext|>"] = V - 1;
    std::ofstream(dir + "/vocab.json") << vocab.dump();

    tiny_model tm;
    tm.dir = dir;
    gb::model_config& c = tm.config;
    c.n_layer = s.n_layer;
    c.n_head = s.n_head;
    c.n_kv_head = s.n_head;
    c.d_model = s.d_model;
    c.d_head = s.d_model / s.n_head;
    c.d_ff = 4 * s.d_model;
    c.vocab_size = V;
    c.n_ctx = s.n_ctx;
    c.norm_eps = 1e-5f;
    nlohmann::json cfg = {{"model_type", "gpt2"}, {"n_layer", c.n_layer}, {"n_head", c.n_head},
                          {"n_embd", c.d_model},  {"vocab_size", V},      {"n_positions", c.n_ctx},
                          {"layer_norm_epsilon", 1e-5}};
    std::ofstream(dir + "/config.json") << cfg.dump(2);

    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    gb::st_dtype dt = s.dtype == "F16" ? gb::ST_F16 : s.dtype == "BF16" ? gb::ST_BF16 : gb::ST_F32;
    // values are rounded to the stored dtype so the reference sees exactly what the file holds
    auto round = [&](float x) {
        if (dt == gb::ST_F16) return gb::f16_to_f32(gb::f32_to_f16(x));
        if (dt == gb::ST_BF16) return gb::bf16_to_f32(gb::f32_to_bf16(x));
        return x;
    };
    std::vector<gb::st_out> out;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std) {
        size_t n = 1;
        for (int64_t v : shape) n *= (size_t)v;
        std::vector<float> data(n);
        for (float& x : data) x = round(mean + std * nd(rng));
        tm.tensors[name] = data;
        out.push_back({(s.prefix ? "transformer." : "") + name, shape, data, dt});
    };
    const int64_t d = c.d_model, ff = c.d_ff;
    add("wte.weight", {V, d}, 0, s.std * 2);
    add("wpe.weight", {c.n_ctx, d}, 0, s.std);
    for (int l = 0; l < c.n_layer; l++) {
        std::string p = "h." + std::to_string(l) + ".";
        add(p + "ln_1.weight", {d}, 1.0f, 0.1f);
        add(p + "ln_1.bias", {d}, 0.0f, 0.1f);
        add(p + "attn.c_attn.weight", {d, 3 * d}, 0, s.std);
        add(p + "attn.c_attn.bias", {3 * d}, 0, 0.1f);
        add(p + "attn.c_proj.weight", {d, d}, 0, s.std);
        add(p + "attn.c_proj.bias", {d}, 0, 0.1f);
        add(p + "ln_2.weight", {d}, 1.0f, 0.1f);
        add(p + "ln_2.bias", {d}, 0.0f, 0.1f);
        add(p + "mlp.c_fc.weight", {d, ff}, 0, s.std);
        add(p + "mlp.c_fc.bias", {ff}, 0, 0.1f);
        add(p + "mlp.c_proj.weight", {ff, d}, 0, s.std);
        add(p + "mlp.c_proj.bias", {d}, 0, 0.1f);
    }
    add("ln_f.weight", {d}, 1.0f, 0.1f);
    add("ln_f.bias", {d}, 0.0f, 0.1f);
    if (!s.tied) add("lm_head.weight", {V, d}, 0, s.std);
    gb::write_safetensors(dir + "/model.safetensors", out);
    return tm;
}

const tiny_model& cli_test_model() {
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

std::string cli_test_model_arg() { return "--model '" + cli_test_model().dir + "'"; }

std::vector<int> ids_of(const gb::model& m, const std::string& text) { return gb::encode_prompt(m.tok, text, false); }
