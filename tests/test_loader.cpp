// Loader: HF GPT-2 folders in every dtype/naming variant, the random-model writer, and malformed files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "error.h"
#include "model.h"
#include "safetensors.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

void expect_load_error(const std::string& path, std::initializer_list<std::string> needles) {
    try {
        gb::load_model(path);
        FAIL() << "loading " << path << " should fail";
    } catch (const gb::error& e) {
        for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
}

std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}
void write(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A copy of a good tiny model whose safetensors header the test then edits
struct header_edit {
    std::string dir;
    nlohmann::json header;
    std::string data;
    explicit header_edit(const std::string& name) {
        dir = test_temp_dir("loader_" + name);
        write_tiny_gpt2(dir, tiny_spec{});
        std::string raw = read(dir + "/model.safetensors");
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)raw[i];
        header = nlohmann::json::parse(raw.substr(8, n));
        data = raw.substr(8 + n);
    }
    void save() {
        std::string h = header.dump();
        std::string len(8, '\0');
        for (int i = 0; i < 8; i++) len[i] = (char)((h.size() >> (8 * i)) & 0xff);
        write(dir + "/model.safetensors", len + h + data);
    }
};

} // namespace

TEST(Loader, LoadsEveryVariantExactly) {
    for (const char* dtype : {"F32", "F16", "BF16"})
        for (bool prefix : {false, true})
            for (bool tied : {true, false}) {
                tiny_spec s;
                s.dtype = dtype;
                s.prefix = prefix;
                s.tied = tied;
                tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_variant"), s);
                gb::model m = gb::load_model(tm.dir);
                SCOPED_TRACE(std::string(dtype) + (prefix ? " prefix" : "") + (tied ? " tied" : " untied"));
                EXPECT_EQ(m.config.n_layer, 2);
                EXPECT_EQ(m.config.d_model, 16);
                EXPECT_EQ(m.config.vocab_size, tm.config.vocab_size);
                EXPECT_EQ(m.weights.tok_emb, tm.tensors["wte.weight"]);
                EXPECT_EQ(m.weights.pos_emb, tm.tensors["wpe.weight"]);
                EXPECT_EQ(m.weights.layers[1].w_qkv, tm.tensors["h.1.attn.c_attn.weight"]);
                EXPECT_EQ(m.weights.layers[1].b_down, tm.tensors["h.1.mlp.c_proj.bias"]);
                EXPECT_EQ(m.weights.layers[0].norm2_g, tm.tensors["h.0.ln_2.weight"]);
                EXPECT_EQ(m.weights.normf_b, tm.tensors["ln_f.bias"]);
                EXPECT_EQ(m.weights.lm_head.empty(), tied);
                EXPECT_EQ(m.config.tied_lm_head, tied);
                gb::param_counts p = gb::count_params(m);
                const int64_t d = 16, V = tm.config.vocab_size;
                EXPECT_EQ(p.embeddings, V * d + 32 * d + (tied ? 0 : V * d));
                EXPECT_EQ(p.attention, 2 * (d * 3 * d + 3 * d + d * d + d));
                EXPECT_EQ(p.mlp, 2 * (d * 4 * d + 4 * d + 4 * d * d + d));
                EXPECT_EQ(p.norms, 2 * 4 * d + 2 * d);
            }
}

TEST(Loader, RandomModelRoundTripsThroughTheWriter) {
    gb::model_config c;
    c.n_layer = 2;
    c.n_head = 4;
    c.d_model = 32;
    c.vocab_size = 300;
    c.n_ctx = 64;
    gb::model a = gb::random_gpt2(c, 5);
    std::string dir = test_temp_dir("loader_random");
    gb::save_hf_gpt2(dir, a, "F32");
    gb::model b = gb::load_model(dir);
    EXPECT_EQ(b.weights.tok_emb, a.weights.tok_emb);
    EXPECT_EQ(b.weights.layers[1].w_down, a.weights.layers[1].w_down);
    EXPECT_EQ(b.tok.vocab, a.tok.vocab);
    EXPECT_EQ(b.tok.eos_id, 299);
    EXPECT_EQ(gb::encode(b.tok, "hi!"), (std::vector<int>{'h', 'i', '!'}));
    // same seed, same weights
    EXPECT_EQ(gb::random_gpt2(c, 5).weights.layers[0].w_qkv, a.weights.layers[0].w_qkv);
    EXPECT_NE(gb::random_gpt2(c, 6).weights.layers[0].w_qkv, a.weights.layers[0].w_qkv);
}

TEST(Loader, F16AndBf16ConversionsRoundCorrectly) {
    EXPECT_EQ(gb::f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(gb::f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(gb::f16_to_f32(0xc000), -2.0f);
    EXPECT_EQ(gb::f16_to_f32(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
    EXPECT_EQ(gb::f32_to_f16(65520.0f), 0x7c00);               // rounds up to Inf
    EXPECT_EQ(gb::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie to even
    EXPECT_TRUE(std::isnan(gb::f16_to_f32(0x7e00)));
    EXPECT_EQ(gb::bf16_to_f32(gb::f32_to_bf16(3.140625f)), 3.140625f);
    for (float x : {0.1f, -7.25f, 1e-3f, 12345.678f})
        EXPECT_NEAR(gb::f16_to_f32(gb::f32_to_f16(x)), x, std::abs(x) * 1e-3);
}

TEST(Loader, MissingPathsAndFolders) {
    expect_load_error("/nonexistent/glassbox/model", {"/nonexistent/glassbox/model", "no such file"});
    std::string dir = test_temp_dir("loader_empty");
    expect_load_error(dir, {"config.json"});
    std::string file = dir + "/weights.xyz";
    write(file, "xx");
    expect_load_error(file, {"unknown model format"});
    write(dir + "/weights.bin", "xx");
    expect_load_error(dir + "/weights.bin", {"weights.bin", "not a llama2.c checkpoint"});
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_novocab"), tiny_spec{});
    fs::remove(tm.dir + "/vocab.json");
    expect_load_error(tm.dir, {"no tokenizer"});
    tiny_model tm2 = write_tiny_gpt2(test_temp_dir("loader_noweights"), tiny_spec{});
    fs::remove(tm2.dir + "/model.safetensors");
    expect_load_error(tm2.dir, {"no model.safetensors"});
}

TEST(Loader, BadConfigs) {
    struct bad {
        std::string name, key;
        nlohmann::json value;
        std::string needle;
    };
    std::vector<bad> cases = {
        {"type", "model_type", "bert", "unsupported model_type 'bert'"},
        {"heads0", "n_head", 0, "n_head = 0"},
        {"divisible", "n_head", 3, "not divisible"},
        {"neg", "n_layer", -1, "n_layer"},
        {"str", "n_embd", "sixteen", "n_embd must be an integer"},
        {"missing", "n_layer", nullptr, "missing key n_layer"},
        {"eps", "layer_norm_epsilon", -1.0, "layer_norm_epsilon"},
    };
    for (const bad& b : cases) {
        tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_cfg_" + b.name), tiny_spec{});
        auto cfg = nlohmann::json::parse(read(tm.dir + "/config.json"));
        if (b.value.is_null()) cfg.erase(b.key);
        else cfg[b.key] = b.value;
        write(tm.dir + "/config.json", cfg.dump());
        expect_load_error(tm.dir, {"config.json", b.needle});
    }
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_cfg_json"), tiny_spec{});
    write(tm.dir + "/config.json", "{\"model_type\": \"gpt2\", ");
    expect_load_error(tm.dir, {"config.json", "not valid JSON"});
    // config says 3 layers, the file has 2: the missing tensor is named
    nlohmann::json cfg;
    tiny_model tm3 = write_tiny_gpt2(test_temp_dir("loader_cfg_layers"), tiny_spec{});
    cfg = nlohmann::json::parse(read(tm3.dir + "/config.json"));
    cfg["n_layer"] = 3;
    write(tm3.dir + "/config.json", cfg.dump());
    expect_load_error(tm3.dir, {"model.safetensors", "missing tensor h.2.ln_1.weight"});
    // config's vocabulary disagrees with the embedding's shape
    tiny_model tm4 = write_tiny_gpt2(test_temp_dir("loader_cfg_vocab"), tiny_spec{});
    cfg = nlohmann::json::parse(read(tm4.dir + "/config.json"));
    cfg["vocab_size"] = 1000;
    write(tm4.dir + "/config.json", cfg.dump());
    expect_load_error(tm4.dir, {"wte.weight", "expected shape [1000, 16]", "found [265, 16]"});
}

TEST(Loader, MalformedSafetensors) {
    {
        header_edit h("trunc");
        h.data.resize(h.data.size() / 2); // truncated: offsets now run past the end
        h.save();
        expect_load_error(h.dir, {"model.safetensors", "outside the data section"});
    }
    {
        std::string dir = test_temp_dir("loader_headerlen");
        write_tiny_gpt2(dir, tiny_spec{});
        std::string raw = read(dir + "/model.safetensors");
        raw[0] = (char)0xff, raw[1] = (char)0xff, raw[2] = (char)0xff, raw[3] = (char)0x7f;
        write(dir + "/model.safetensors", raw);
        expect_load_error(dir, {"header length", "past the end"});
        write(dir + "/model.safetensors", "abc");
        expect_load_error(dir, {"not a safetensors file"});
        write(dir + "/model.safetensors", std::string("\x04\0\0\0\0\0\0\0{{{{", 12));
        expect_load_error(dir, {"not valid JSON"});
    }
    {
        header_edit h("offsets");
        h.header["wpe.weight"]["data_offsets"] = {0, 1ull << 40};
        h.save();
        expect_load_error(h.dir, {"wpe.weight", "outside the data section"});
    }
    {
        header_edit h("mismatch");
        auto off = h.header["ln_f.bias"]["data_offsets"];
        h.header["ln_f.bias"]["data_offsets"] = {off[0], off[0].get<uint64_t>() + 4};
        h.save();
        expect_load_error(h.dir, {"ln_f.bias", "expected 64"});
    }
    {
        header_edit h("dtype");
        h.header["h.0.ln_1.bias"]["dtype"] = "I64";
        h.save();
        expect_load_error(h.dir, {"h.0.ln_1.bias", "unsupported dtype I64"});
    }
    {
        header_edit h("shape");
        h.header["h.1.attn.c_proj.weight"]["shape"] = {8, 32}; // same byte size, wrong shape
        h.save();
        expect_load_error(h.dir, {"h.1.attn.c_proj.weight", "expected shape [16, 16]", "found [8, 32]"});
    }
    {
        header_edit h("negative");
        h.header["h.1.attn.c_proj.weight"]["shape"] = {-16, 16};
        h.save();
        expect_load_error(h.dir, {"h.1.attn.c_proj.weight", "negative"});
    }
    {
        header_edit h("missing");
        h.header.erase("h.1.mlp.c_fc.bias");
        h.save();
        expect_load_error(h.dir, {"missing tensor h.1.mlp.c_fc.bias"});
    }
    {
        header_edit h("notobject");
        h.header = nlohmann::json::array({1, 2});
        h.save();
        expect_load_error(h.dir, {"not a JSON object"});
    }
}

TEST(Loader, DefaultModelPathNamesWhatIsMissingOrFindsTheModel) {
    try {
        std::string p = gb::default_model_path();
        EXPECT_TRUE(fs::exists(p + "/config.json")) << p;
        gb::model m = gb::load_model(p);
        EXPECT_GT(m.config.n_layer, 0);
    } catch (const gb::error& e) {
        EXPECT_NE(std::string(e.what()).find("assets/models"), std::string::npos) << e.what();
    }
}
