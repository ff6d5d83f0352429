// Loader: HF GPT-2 folders in every dtype/naming variant, the random-model writer, and malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/loader.h"
#include "io/safetensors.h"
#include "io/writers.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "test_util.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/half.h"

namespace fs = std::filesystem;

namespace {

// These tests check what the loaders read, value for value, through unpack_matrix: that is exact for the fp32
// kernel's packing (the AMX kernel's fixed point is tested in test_kernels.cpp's Gemm tests).
const bool exact_packing = (gb::set_matmul_kind(gb::MATMUL_FP32), true);

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

// Every field of the loaded model against the values the writer put in the file (HF names, HF layout:
// Conv1D weights are already [in][out], so nothing is transposed).
void expect_same_weights(const gb::model& m, const tiny_model& tm) {
    auto T = [&](const std::string& n) { return tm.tensors.at(n); };
    const gb::model_weights& w = m.weights;
    EXPECT_EQ(gb::table_f32(w.tok_emb), T("wte.weight"));
    EXPECT_EQ(w.pos_emb, T("wpe.weight"));
    ASSERT_EQ((int)w.layers.size(), tm.config.n_layer);
    for (int l = 0; l < tm.config.n_layer; l++) {
        SCOPED_TRACE("layer " + std::to_string(l));
        const std::string p = "h." + std::to_string(l) + ".";
        const gb::layer_weights& L = w.layers[l];
        EXPECT_EQ(L.norm1_g, T(p + "ln_1.weight"));
        EXPECT_EQ(L.norm1_b, T(p + "ln_1.bias"));
        EXPECT_EQ(gb::unpack_matrix(L.w_qkv), T(p + "attn.c_attn.weight"));
        EXPECT_EQ(L.b_qkv, T(p + "attn.c_attn.bias"));
        EXPECT_EQ(gb::unpack_matrix(L.w_o), T(p + "attn.c_proj.weight"));
        EXPECT_EQ(L.b_o, T(p + "attn.c_proj.bias"));
        EXPECT_EQ(L.norm2_g, T(p + "ln_2.weight"));
        EXPECT_EQ(L.norm2_b, T(p + "ln_2.bias"));
        EXPECT_EQ(gb::unpack_matrix(L.w_up), T(p + "mlp.c_fc.weight"));
        EXPECT_EQ(L.b_up, T(p + "mlp.c_fc.bias"));
        EXPECT_TRUE(L.w_gate.empty());
        EXPECT_EQ(gb::unpack_matrix(L.w_down), T(p + "mlp.c_proj.weight"));
        EXPECT_EQ(L.b_down, T(p + "mlp.c_proj.bias"));
    }
    EXPECT_EQ(w.normf_g, T("ln_f.weight"));
    EXPECT_EQ(w.normf_b, T("ln_f.bias"));
    if (tm.tensors.count("lm_head.weight")) EXPECT_EQ(gb::table_f32(w.lm_head), T("lm_head.weight"));
    else EXPECT_TRUE(w.lm_head.empty());
}

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
                const gb::model_config& c = m.config;
                EXPECT_EQ(c.arch, gb::ARCH_GPT2);
                EXPECT_EQ(c.model_type, "gpt2");
                EXPECT_EQ(c.n_layer, 2);
                EXPECT_EQ(c.n_head, 2);
                EXPECT_EQ(c.n_kv_head, 2);
                EXPECT_EQ(c.d_model, 16);
                EXPECT_EQ(c.d_head, 8);
                EXPECT_EQ(c.d_ff, 64);
                EXPECT_EQ(c.n_ctx, 32);
                EXPECT_EQ(c.vocab_size, tm.config.vocab_size);
                EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
                EXPECT_TRUE(c.qkv_bias);
                EXPECT_TRUE(c.mlp_bias);
                EXPECT_EQ(m.format, "hf-safetensors");
                EXPECT_EQ(m.path, tm.dir);
                expect_same_weights(m, tm);
                // tokenizer: 256 bytes + merges + <|endoftext|> last, which is also BOS/EOS
                EXPECT_EQ(m.tok.kind, gb::TOK_BYTE_BPE);
                EXPECT_EQ((int)m.tok.vocab.size(), tm.config.vocab_size);
                EXPECT_EQ(m.tok.eos_id, tm.config.vocab_size - 1);
                EXPECT_EQ(m.tok.bos_id, tm.config.vocab_size - 1);
                EXPECT_EQ(m.tok.merge_rank.size(), 8u);
                EXPECT_EQ(m.config.tied_lm_head, tied);
                gb::param_counts p = gb::count_params(m);
                const int64_t d = 16, V = tm.config.vocab_size;
                EXPECT_EQ(p.embeddings, V * d + 32 * d + (tied ? 0 : V * d));
                EXPECT_EQ(p.attention, 2 * (d * 3 * d + 3 * d + d * d + d));
                EXPECT_EQ(p.mlp, 2 * (d * 4 * d + 4 * d + 4 * d * d + d));
                EXPECT_EQ(p.norms, 2 * 4 * d + 2 * d);
            }
}

// Random models are packed exactly whatever the kernel, so what the writer saves is what was drawn; weights
// packed as AMX digits would come back only approximately, and the writer refuses them by name.
TEST(Loader, WriterTakesOnlyExactWeights) {
    gb::model_config c;
    c.n_layer = 1, c.n_head = 2, c.d_model = 8, c.vocab_size = 260, c.n_ctx = 8;
    for_each_matmul([&] {
        gb::model a = gb::random_gpt2(c, 3);
        EXPECT_FALSE(a.weights.layers[0].w_qkv.amx());
        EXPECT_NO_THROW(gb::save_hf_gpt2(test_temp_dir("loader_exact"), a));
    });
    if (!amx_missing().empty()) GTEST_SKIP() << amx_missing();
    matmul_scope kernel(gb::MATMUL_AMX);
    gb::model a = gb::random_gpt2(c, 3);
    gb::weight_matrix& o = a.weights.layers[0].w_o;
    o = gb::pack_matrix(gb::unpack_matrix(o), o.in, o.out);
    ASSERT_TRUE(o.amx());
    expect_gb_error([&] { gb::save_hf_gpt2(test_temp_dir("loader_exact_amx"), a); }, "cannot be written exactly");
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
    EXPECT_EQ(gb::table_f32(b.weights.tok_emb), gb::table_f32(a.weights.tok_emb));
    EXPECT_EQ(b.weights.layers[1].w_down.data, a.weights.layers[1].w_down.data);
    EXPECT_EQ(b.tok.vocab, a.tok.vocab);
    EXPECT_EQ(b.tok.eos_id, 299);
    EXPECT_EQ(gb::encode(b.tok, "hi!"), (std::vector<int>{'h', 'i', '!'}));
    // same seed, same weights
    EXPECT_EQ(gb::random_gpt2(c, 5).weights.layers[0].w_qkv.data, a.weights.layers[0].w_qkv.data);
    EXPECT_NE(gb::random_gpt2(c, 6).weights.layers[0].w_qkv.data, a.weights.layers[0].w_qkv.data);
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
        {"type", "model_type", "xlnet", "unsupported model_type 'xlnet'"},
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

TEST(Loader, ReportsProgressAndAcceptsTheFilesInsideTheFolder) {
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_progress"), tiny_spec{});
    std::vector<float> fractions;
    gb::load_options lo;
    lo.progress = [&](float f, const std::string& label) {
        fractions.push_back(f);
        EXPECT_FALSE(label.empty());
    };
    gb::model m = gb::load_model(tm.dir, lo);
    ASSERT_GE(fractions.size(), 3u);
    EXPECT_EQ(fractions.front(), 0.0f);
    EXPECT_EQ(fractions.back(), 1.0f);
    for (size_t i = 1; i < fractions.size(); i++) EXPECT_GE(fractions[i], fractions[i - 1]);
    // opening model.safetensors or config.json itself loads the folder
    for (const char* f : {"/model.safetensors", "/config.json"}) {
        gb::model m2 = gb::load_model(tm.dir + f);
        EXPECT_EQ(m2.path, tm.dir + f);
        expect_same_weights(m2, tm);
    }
}

TEST(Loader, IgnoresExtraTensorsAndHonoursOptionalConfigKeys) {
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_extra"), tiny_spec{});
    // HF GPT-2 exports carry the causal mask buffers h.N.attn.bias / masked_bias; they are not weights
    std::vector<gb::st_out> out;
    for (const auto& kv : tm.tensors) {
        out.push_back({kv.first, {(int64_t)kv.second.size()}, kv.second, gb::ST_F32});
    }
    // shapes: rebuild from the config (the map holds flat values)
    const int64_t d = 16, V = tm.config.vocab_size;
    for (gb::st_out& o : out) {
        const std::string& n = o.name;
        if (n == "wte.weight") o.shape = {V, d};
        else if (n == "wpe.weight") o.shape = {32, d};
        else if (n.find("c_attn.weight") != std::string::npos) o.shape = {d, 3 * d};
        else if (n.find("attn.c_proj.weight") != std::string::npos) o.shape = {d, d};
        else if (n.find("c_fc.weight") != std::string::npos) o.shape = {d, 4 * d};
        else if (n.find("mlp.c_proj.weight") != std::string::npos) o.shape = {4 * d, d};
    }
    for (int l = 0; l < 2; l++) {
        out.push_back({"h." + std::to_string(l) + ".attn.bias", {1, 1, 32, 32}, std::vector<float>(32 * 32, 1.0f)});
        out.push_back({"h." + std::to_string(l) + ".attn.masked_bias", {}, {-1e4f}});
    }
    gb::write_safetensors(tm.dir + "/model.safetensors", out);
    // n_ctx instead of n_positions, n_inner null (= 4 * n_embd), no layer_norm_epsilon (= 1e-5)
    auto cfg = nlohmann::json::parse(read(tm.dir + "/config.json"));
    cfg.erase("n_positions");
    cfg.erase("layer_norm_epsilon");
    cfg["n_ctx"] = 32;
    cfg["n_inner"] = nullptr;
    write(tm.dir + "/config.json", cfg.dump());
    gb::model m = gb::load_model(tm.dir);
    EXPECT_EQ(m.config.n_ctx, 32);
    EXPECT_EQ(m.config.d_ff, 64);
    EXPECT_FLOAT_EQ(m.config.norm_eps, 1e-5f);
    expect_same_weights(m, tm);
    // an explicit n_inner is what the MLP tensors are checked against
    cfg["n_inner"] = 48;
    write(tm.dir + "/config.json", cfg.dump());
    expect_load_error(tm.dir, {"h.0.mlp.c_fc.weight", "expected shape [16, 48]", "found [16, 64]"});
}

TEST(Loader, TokenizerJsonIsUsedWhenVocabAndMergesAreAbsent) {
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_tokjson"), tiny_spec{});
    gb::model a = gb::load_model(tm.dir);
    // the same vocabulary and merges as one tokenizer.json
    nlohmann::json vocab = nlohmann::json::parse(read(tm.dir + "/vocab.json"));
    nlohmann::json merges = nlohmann::json::array();
    std::istringstream ms(read(tm.dir + "/merges.txt"));
    std::string line;
    while (std::getline(ms, line))
        if (!line.empty() && line[0] != '#') merges.push_back(line);
    nlohmann::json tj = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
                         {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
                         {"added_tokens", {{{"id", tm.config.vocab_size - 1}, {"content", "<|endoftext|>"},
                                            {"special", true}}}}};
    write(tm.dir + "/tokenizer.json", tj.dump());
    fs::remove(tm.dir + "/vocab.json");
    fs::remove(tm.dir + "/merges.txt");
    gb::model b = gb::load_model(tm.dir);
    EXPECT_EQ(b.tok.vocab, a.tok.vocab);
    EXPECT_EQ(b.tok.eos_id, tm.config.vocab_size - 1);
    const std::string text = "the cat sat on the mat<|endoftext|>";
    EXPECT_EQ(gb::encode(b.tok, text), gb::encode(a.tok, text));
    EXPECT_LT(gb::encode(a.tok, text).size(), text.size()); // the merges did something
}

TEST(Loader, TokenizerLargerThanTheModelIsAnError) {
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_tokbig"), tiny_spec{});
    nlohmann::json vocab = nlohmann::json::parse(read(tm.dir + "/vocab.json"));
    vocab["zzz"] = tm.config.vocab_size;
    write(tm.dir + "/vocab.json", vocab.dump());
    expect_load_error(tm.dir, {"tokenizer has 266 tokens", "vocab_size is 265"});
}

TEST(Loader, MoreMalformedSafetensors) {
    std::string dir = test_temp_dir("loader_more");
    write_tiny_gpt2(dir, tiny_spec{});
    const std::string st = dir + "/model.safetensors";
    // empty file, a directory in its place
    write(st, "");
    expect_load_error(dir, {"model.safetensors", "0 bytes"});
    fs::remove(st);
    fs::create_directories(st);
    expect_load_error(dir, {"model.safetensors", "not a regular file"});
    fs::remove(st);
    // a header length within the file but over 100 MB (a sparse file: no disk used)
    {
        uint64_t n = 100ull * 1024 * 1024 + 8;
        std::string len(8, '\0');
        for (int i = 0; i < 8; i++) len[i] = (char)((n >> (8 * i)) & 0xff);
        write(st, len + "{}");
        fs::resize_file(st, 8 + n + 16);
        expect_load_error(dir, {"header length", "exceeds 100 MB"});
    }
    struct bad {
        const char* name;
        std::function<void(nlohmann::json&)> edit;
        std::vector<std::string> needles;
    };
    std::vector<bad> cases = {
        {"entry", [](nlohmann::json& h) { h["wte.weight"] = 3; }, {"wte.weight", "needs dtype, shape and data_offsets"}},
        {"nodtype", [](nlohmann::json& h) { h["wte.weight"].erase("dtype"); }, {"wte.weight", "needs dtype"}},
        {"dtypenum", [](nlohmann::json& h) { h["wte.weight"]["dtype"] = 7; }, {"wte.weight", "dtype is not a string"}},
        {"huge", [](nlohmann::json& h) { h["wte.weight"]["shape"] = {1ull << 40, 1ull << 40}; },
         {"wte.weight", "absurdly large"}},
        {"float", [](nlohmann::json& h) { h["wte.weight"]["shape"] = {265, 16.5}; }, {"wte.weight", "non-integer"}},
        {"shapestr", [](nlohmann::json& h) { h["wte.weight"]["shape"] = "265x16"; }, {"wte.weight", "shape"}},
        {"negoff", [](nlohmann::json& h) { h["ln_f.weight"]["data_offsets"] = {-64, 0}; },
         {"ln_f.weight", "two non-negative integers"}},
        {"oneoff", [](nlohmann::json& h) { h["ln_f.weight"]["data_offsets"] = {0}; }, {"ln_f.weight", "data_offsets"}},
        {"reversed",
         [](nlohmann::json& h) {
             auto o = h["ln_f.weight"]["data_offsets"];
             h["ln_f.weight"]["data_offsets"] = {o[1], o[0]};
         },
         {"ln_f.weight", "outside the data section"}},
        {"f16size", [](nlohmann::json& h) { h["ln_f.weight"]["dtype"] = "F16"; }, {"ln_f.weight", "64 bytes", "expected 32"}},
    };
    for (const bad& b : cases) {
        SCOPED_TRACE(b.name);
        header_edit h(std::string("more_") + b.name);
        b.edit(h.header);
        h.save();
        std::vector<std::string> needles = b.needles;
        needles.push_back("model.safetensors");
        try {
            gb::load_model(h.dir);
            ADD_FAILURE() << "loading should fail";
        } catch (const gb::error& e) {
            for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
        }
    }
    // __metadata__ is ignored
    header_edit h("more_metadata");
    h.header["__metadata__"] = {{"format", "pt"}};
    h.save();
    EXPECT_NO_THROW(gb::load_model(h.dir));
}

// Every truncation and many single-byte corruptions: each either loads or throws gb::error, never crashes
// (run under valgrind/ASan this also shows that nothing is read outside the file).
TEST(Loader, CorruptedFilesNeverCrash) {
    std::string dir = test_temp_dir("loader_fuzz");
    write_tiny_gpt2(dir, tiny_spec{});
    const std::string st = dir + "/model.safetensors";
    const std::string good = read(st);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)good[i];
    int errors = 0, loads = 0;
    auto attempt = [&](const std::string& bytes) {
        write(st, bytes);
        try {
            gb::model m = gb::load_model(dir);
            loads++;
        } catch (const gb::error&) {
            errors++;
        }
    };
    for (size_t len = 0; len < good.size(); len += std::max<size_t>(1, good.size() / 97)) attempt(good.substr(0, len));
    EXPECT_EQ(loads, 0); // every proper truncation is caught
    uint64_t state = 12345;
    for (int i = 0; i < 300; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        std::string bad = good;
        size_t pos = (size_t)((state >> 33) % (8 + n)); // corrupt the length or the header
        bad[pos] = (char)(state >> 13);
        attempt(bad);
    }
    EXPECT_GT(errors, 300);
}

TEST(Loader, SafetensorsWriterRoundTripsEveryDtype) {
    std::string dir = test_temp_dir("loader_st");
    std::vector<gb::st_out> t = {{"a", {2, 3}, {1, -2, 3.5f, 0.1f, 1e-3f, 65504}, gb::ST_F32},
                                 {"b", {2, 3}, {1, -2, 3.5f, 0.1f, 1e-3f, 65504}, gb::ST_F16},
                                 {"c", {3}, {1, -2, 0.1f}, gb::ST_BF16},
                                 {"scalar", {}, {7}, gb::ST_F32},
                                 {"empty", {0, 4}, {}, gb::ST_F32}};
    gb::write_safetensors(dir + "/x.safetensors", t);
    std::string raw = read(dir + "/x.safetensors");
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)raw[i];
    EXPECT_EQ(n % 8, 0u); // header padded to a multiple of 8
    EXPECT_EQ(raw.size(), 8 + n + 6 * 4 + 6 * 2 + 3 * 2 + 4);
    gb::safetensors_file f = gb::open_safetensors(dir + "/x.safetensors");
    ASSERT_EQ(f.tensors.size(), 5u);
    EXPECT_EQ(f.tensors.at("b").dtype, gb::ST_F16);
    EXPECT_EQ(f.tensors.at("c").dtype, gb::ST_BF16);
    EXPECT_EQ(f.tensors.at("b").nbytes, 12u);
    EXPECT_EQ(gb::tensor_f32(f, f.tensors.at("a"), {2, 3}), t[0].data);
    std::vector<float> b = gb::tensor_f32(f, f.tensors.at("b"), {2, 3});
    for (size_t i = 0; i < 6; i++) EXPECT_EQ(b[i], gb::f16_to_f32(gb::f32_to_f16(t[1].data[i])));
    EXPECT_EQ(b[5], 65504.0f);
    std::vector<float> c = gb::tensor_f32(f, f.tensors.at("c"), {3});
    for (size_t i = 0; i < 3; i++) EXPECT_EQ(c[i], gb::bf16_to_f32(gb::f32_to_bf16(t[2].data[i])));
    EXPECT_EQ(gb::tensor_f32(f, f.tensors.at("scalar"), {}), std::vector<float>{7});
    EXPECT_TRUE(gb::tensor_f32(f, f.tensors.at("empty"), {0, 4}).empty());
    try {
        gb::tensor_f32(f, f.tensors.at("a"), {3, 2});
        ADD_FAILURE() << "wrong shape should throw";
    } catch (const gb::error& e) {
        EXPECT_NE(std::string(e.what()).find("x.safetensors: tensor a: expected shape [3, 2], found [2, 3]"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(gb::write_safetensors(dir + "/y.safetensors", {{"bad", {2, 2}, {1, 2, 3}, gb::ST_F32}}), gb::error);
}

TEST(Loader, SavedRandomModelsLoadInEveryDtypeAndBadRequestsAreErrors) {
    gb::model_config c;
    c.n_layer = 1;
    c.n_head = 2;
    c.d_model = 8;
    c.vocab_size = 260;
    c.n_ctx = 16;
    gb::model a = gb::random_gpt2(c, 9);
    EXPECT_EQ(a.config.d_ff, 32);
    EXPECT_EQ(a.config.d_head, 4);
    EXPECT_EQ(a.tok.vocab[' '], "\xc4\xa0"); // GPT-2's stand-in for the space byte, "Ġ"
    EXPECT_EQ(a.tok.vocab['A'], "A");
    for (const char* dtype : {"F16", "BF16"}) {
        SCOPED_TRACE(dtype);
        std::string dir = test_temp_dir(std::string("loader_save_") + dtype);
        gb::save_hf_gpt2(dir, a, dtype);
        gb::model b = gb::load_model(dir);
        auto rounded = [&](const std::vector<float>& v) {
            std::vector<float> r(v.size());
            for (size_t i = 0; i < v.size(); i++)
                r[i] = std::string(dtype) == "F16" ? gb::f16_to_f32(gb::f32_to_f16(v[i]))
                                                   : gb::bf16_to_f32(gb::f32_to_bf16(v[i]));
            return r;
        };
        EXPECT_EQ(gb::table_f32(b.weights.tok_emb), rounded(gb::table_f32(a.weights.tok_emb)));
        EXPECT_EQ(gb::unpack_matrix(b.weights.layers[0].w_up), rounded(gb::unpack_matrix(a.weights.layers[0].w_up)));
        // kept as stored: 2 bytes a weight, the embedding read in place from the file
        EXPECT_EQ(gb::ggml_type_name(b.weights.layers[0].w_up.type), std::string(dtype));
        EXPECT_EQ(gb::ggml_type_name(b.weights.tok_emb.type), std::string(dtype));
        EXPECT_TRUE(b.weights.tok_emb.mapped);
        EXPECT_EQ(b.weights.layers[0].norm1_g, a.weights.layers[0].norm1_g); // 1 and 0 are exact
        EXPECT_EQ(gb::decode(b.tok, gb::encode(b.tok, "caf\xc3\xa9 \xf0\x9f\x98\x80!")), "caf\xc3\xa9 \xf0\x9f\x98\x80!");
    }
    EXPECT_THROW(gb::save_hf_gpt2(test_temp_dir("loader_save_q8"), a, "Q8_0"), gb::error);
    gb::model_config bad = c;
    bad.n_head = 0;
    EXPECT_THROW(gb::random_gpt2(bad, 1), gb::error);
    bad = c;
    bad.n_head = 3;
    EXPECT_THROW(gb::random_gpt2(bad, 1), gb::error);
    bad = c;
    bad.vocab_size = 100;
    EXPECT_THROW(gb::random_gpt2(bad, 1), gb::error);
}

TEST(Loader, ShardedCheckpointsLoadLikeOneFile) {
    tiny_model tm = write_tiny_gpt2(test_temp_dir("loader_sharded"), tiny_spec{});
    gb::safetensors_file one = gb::open_safetensors(tm.dir + "/model.safetensors");
    // layer 0 and the embeddings in one shard, the rest in the other
    std::vector<gb::st_out> a, b;
    nlohmann::json map = nlohmann::json::object();
    for (const auto& kv : one.tensors) {
        bool first = kv.first.rfind("h.0.", 0) == 0 || kv.first.rfind("w", 0) == 0;
        (first ? a : b).push_back({kv.first, kv.second.shape, gb::tensor_f32(one, kv.second, kv.second.shape)});
        map[kv.first] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());
    gb::write_safetensors(tm.dir + "/model-00001-of-00002.safetensors", a);
    gb::write_safetensors(tm.dir + "/model-00002-of-00002.safetensors", b);
    fs::remove(tm.dir + "/model.safetensors");
    write(tm.dir + "/model.safetensors.index.json", nlohmann::json{{"metadata", {}}, {"weight_map", map}}.dump());
    gb::model m = gb::load_model(tm.dir);
    expect_same_weights(m, tm);
    // a shard name that leaves the folder is refused
    map["ln_f.bias"] = "../model-00002-of-00002.safetensors";
    write(tm.dir + "/model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
    expect_load_error(tm.dir, {"model.safetensors.index.json", "plain file name"});
    // a shard that is missing is named
    fs::remove(tm.dir + "/model.safetensors.index.json");
    map["ln_f.bias"] = "model-00003-of-00003.safetensors";
    write(tm.dir + "/model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
    expect_load_error(tm.dir, {"model-00003-of-00003.safetensors"});
}
