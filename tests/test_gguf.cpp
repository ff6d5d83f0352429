// GGUF: the same weights as GGUF give the same outputs as llama2.c / HF files and the reference (llama with
// rope_freqs / linear scaling, qwen2 with biases and rotate-half); v2 and other alignments; the SentencePiece
// tokenizer's merge order; dequantisation block by block against values worked out by hand; malformed files
// give clear errors without huge allocations; keys a file leaves out read as llama.cpp reads them; the random
// GGUF writer (every family and type) read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "gguf_writer.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "model/arch.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_llama.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/half.h"

namespace {

// SentencePiece-style ("llama") tokenizer metadata with BOS 1 and EOS 2.
void llama_tokenizer_meta(gguf_out& g, const std::vector<std::string>& toks, const std::vector<float>& scores,
                          const std::vector<int32_t>& types) {
    g.str("tokenizer.ggml.model", "llama");
    g.strs("tokenizer.ggml.tokens", toks);
    g.floats("tokenizer.ggml.scores", scores);
    g.ints("tokenizer.ggml.token_type", types);
    g.u32("tokenizer.ggml.bos_token_id", 1);
    g.u32("tokenizer.ggml.eos_token_id", 2);
}

void spm_tokenizer(gguf_out& g, int vocab) {
    std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        toks.push_back(n);
    }
    for (const char* t : {"\xE2\x96\x81", "a", "t", "\xE2\x96\x81t", "\xE2\x96\x81the", "h", "e", "he"}) toks.push_back(t);
    while ((int)toks.size() < vocab) toks.push_back("<x" + std::to_string(toks.size()) + ">");
    std::vector<float> scores(vocab, 0.0f);
    scores[262] = -1, scores[263] = -2, scores[266] = -3;
    std::vector<int32_t> types(vocab, 1);
    types[0] = 2, types[1] = types[2] = 3;
    llama_tokenizer_meta(g, toks, scores, types);
}

// The tiny model as GGUF, the weights as they are: for "llama" (adjacent pairs, like llama2.c) and for "qwen2"
// (rotate-half, with q/k/v biases when the spec has them). freq_base is the spec's rope_theta.
gguf_out llama_gguf(const tiny_llama& tm, const std::string& arch = "llama") {
    const tiny_llama_spec& s = tm.spec;
    const int64_t d = s.dim, kv = s.n_kv_head * (s.dim / s.n_head), ff = s.hidden;
    gguf_out g;
    g.str("general.architecture", arch);
    g.u32(arch + ".block_count", s.n_layer);
    g.u32(arch + ".embedding_length", s.dim);
    g.u32(arch + ".feed_forward_length", s.hidden);
    g.u32(arch + ".attention.head_count", s.n_head);
    g.u32(arch + ".attention.head_count_kv", s.n_kv_head);
    g.u32(arch + ".context_length", s.seq_len);
    g.f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
    g.f32(arch + ".rope.freq_base", (float)s.rope_theta);
    spm_tokenizer(g, s.vocab);
    // llama2.c and GGUF share Meta's layout: [out][in] matrices, adjacent RoPE pairs
    g.f32_tensor("token_embd.weight", {d, s.vocab}, tm.w.at("emb"));
    for (int l = 0; l < s.n_layer; l++) {
        std::string p = "blk." + std::to_string(l) + ".", k = "." + std::to_string(l);
        g.f32_tensor(p + "attn_norm.weight", {d}, tm.w.at("rms_att" + k));
        g.f32_tensor(p + "ffn_norm.weight", {d}, tm.w.at("rms_ffn" + k));
        g.f32_tensor(p + "attn_q.weight", {d, d}, tm.w.at("wq" + k));
        g.f32_tensor(p + "attn_k.weight", {d, kv}, tm.w.at("wk" + k));
        g.f32_tensor(p + "attn_v.weight", {d, kv}, tm.w.at("wv" + k));
        if (s.qkv_bias) {
            g.f32_tensor(p + "attn_q.bias", {d}, tm.w.at("bq" + k));
            g.f32_tensor(p + "attn_k.bias", {kv}, tm.w.at("bk" + k));
            g.f32_tensor(p + "attn_v.bias", {kv}, tm.w.at("bv" + k));
        }
        g.f32_tensor(p + "attn_output.weight", {d, d}, tm.w.at("wo" + k));
        g.f32_tensor(p + "ffn_gate.weight", {d, ff}, tm.w.at("w1" + k));
        g.f32_tensor(p + "ffn_up.weight", {d, ff}, tm.w.at("w3" + k));
        g.f32_tensor(p + "ffn_down.weight", {ff, d}, tm.w.at("w2" + k));
    }
    g.f32_tensor("output_norm.weight", {d}, tm.w.at("rms_final"));
    if (!s.shared_classifier) g.f32_tensor("output.weight", {d, s.vocab}, tm.w.at("wcls"));
    return g;
}

std::string write_llama_gguf(const std::string& dir, const tiny_llama& tm) {
    std::string path = dir + "/model.gguf";
    llama_gguf(tm).write(path);
    return path;
}

std::vector<float> transpose(const std::vector<float>& w, int64_t rows, int64_t cols) { // [rows][cols] -> [cols][rows]
    std::vector<float> t(w.size());
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) t[(size_t)(c * rows + r)] = w[(size_t)(r * cols + c)];
    return t;
}

} // namespace

TEST(Gguf, LlamaEqualsLlama2cFile) {
    for (bool shared : {true, false}) {
        tiny_llama_spec s;
        s.shared_classifier = shared;
        s.seed = 21;
        std::string dir = test_temp_dir("gguf_llama");
        tiny_llama tm = write_tiny_llama2c(dir, s);
        gb::load_options lo;
        lo.tokenizer_path = tm.tokenizer_path;
        gb::model a = gb::load_model(tm.model_path, lo), b = gb::load_model(write_llama_gguf(dir, tm));
        EXPECT_EQ(b.format, "gguf");
        EXPECT_EQ(b.config.rope, gb::ROPE_ADJACENT);
        EXPECT_EQ(b.config.tied_lm_head, shared);
        std::vector<int> tokens = {1, 5, 17, 200, 3, 99, 42};
        gb::ablation ab;
        ab.no_attention.on = true;
        ab.no_attention.layers = {1};
        ab.heads = {{0, 3}};
        for (const gb::ablation& x : {gb::ablation{}, ab}) {
            gb::record ca, cb;
            gb::forward_options opt;
            opt.all_logits = true;
            gb::run_forward(ca, a, tokens, x, opt);
            gb::run_forward(cb, b, tokens, x, opt);
            for (size_t i = 0; i < ca.logits.size(); i++) ASSERT_NEAR(ca.logits[i], cb.logits[i], 1e-5) << i;
            const std::vector<float> pa = ca.flat(gb::HOOK_PATTERN), pb = cb.flat(gb::HOOK_PATTERN);
            for (size_t i = 0; i < pa.size(); i++) ASSERT_NEAR(pa[i], pb[i], 1e-6) << i;
        }
        // the SentencePiece tokenizer from metadata: "▁" for spaces, merges by score, BOS first
        std::vector<int> ids = gb::encode_prompt(b.tok, "the", false);
        ASSERT_EQ(ids.size(), 2u);
        EXPECT_EQ(ids[0], 1);
        EXPECT_EQ(b.tok.vocab[ids[1]], "\xE2\x96\x81the");
        EXPECT_EQ(gb::decode(b.tok, ids), "the");
    }
}

TEST(Gguf, Gpt2EqualsHfFolder) {
    tiny_spec s;
    s.seed = 4;
    s.tied = false;
    tiny_model tm = write_tiny_gpt2(test_temp_dir("gguf_gpt2"), s);
    const int64_t d = tm.config.d_model, V = tm.config.vocab_size, ff = tm.config.d_ff;
    gguf_out g;
    g.str("general.architecture", "gpt2");
    g.u32("gpt2.block_count", tm.config.n_layer);
    g.u32("gpt2.embedding_length", d);
    g.u32("gpt2.feed_forward_length", ff);
    g.u32("gpt2.attention.head_count", tm.config.n_head);
    g.u32("gpt2.context_length", tm.config.n_ctx);
    g.f32("gpt2.attention.layer_norm_epsilon", 1e-5f);
    nlohmann::json vocab = nlohmann::json::parse(std::ifstream(tm.dir + "/vocab.json"));
    std::vector<std::string> toks(V);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) toks[it.value().get<int>()] = it.key();
    std::vector<std::string> merges;
    std::ifstream mf(tm.dir + "/merges.txt");
    for (std::string line; std::getline(mf, line);)
        if (!line.empty() && line[0] != '#') merges.push_back(line);
    g.str("tokenizer.ggml.model", "gpt2");
    g.strs("tokenizer.ggml.tokens", toks);
    g.strs("tokenizer.ggml.merges", merges);
    g.u32("tokenizer.ggml.eos_token_id", V - 1);
    auto& T = tm.tensors;
    g.f32_tensor("token_embd.weight", {d, V}, T["wte.weight"]);
    g.f32_tensor("position_embd.weight", {d, tm.config.n_ctx}, T["wpe.weight"]);
    for (int l = 0; l < tm.config.n_layer; l++) {
        std::string h = "h." + std::to_string(l) + ".", p = "blk." + std::to_string(l) + ".";
        g.f32_tensor(p + "attn_norm.weight", {d}, T[h + "ln_1.weight"]);
        g.f32_tensor(p + "attn_norm.bias", {d}, T[h + "ln_1.bias"]);
        g.f32_tensor(p + "attn_qkv.weight", {d, 3 * d}, transpose(T[h + "attn.c_attn.weight"], d, 3 * d));
        g.f32_tensor(p + "attn_qkv.bias", {3 * d}, T[h + "attn.c_attn.bias"]);
        g.f32_tensor(p + "attn_output.weight", {d, d}, transpose(T[h + "attn.c_proj.weight"], d, d));
        g.f32_tensor(p + "attn_output.bias", {d}, T[h + "attn.c_proj.bias"]);
        g.f32_tensor(p + "ffn_norm.weight", {d}, T[h + "ln_2.weight"]);
        g.f32_tensor(p + "ffn_norm.bias", {d}, T[h + "ln_2.bias"]);
        g.f32_tensor(p + "ffn_up.weight", {d, ff}, transpose(T[h + "mlp.c_fc.weight"], d, ff));
        g.f32_tensor(p + "ffn_up.bias", {ff}, T[h + "mlp.c_fc.bias"]);
        g.f32_tensor(p + "ffn_down.weight", {ff, d}, transpose(T[h + "mlp.c_proj.weight"], ff, d));
        g.f32_tensor(p + "ffn_down.bias", {d}, T[h + "mlp.c_proj.bias"]);
    }
    g.f32_tensor("output_norm.weight", {d}, T["ln_f.weight"]);
    g.f32_tensor("output_norm.bias", {d}, T["ln_f.bias"]);
    g.f32_tensor("output.weight", {d, V}, T["lm_head.weight"]);
    std::string path = tm.dir + "/model.gguf";
    g.write(path);
    gb::model a = gb::load_model(tm.dir), b = gb::load_model(path);
    EXPECT_EQ(gb::encode(a.tok, " the cat sat"), gb::encode(b.tok, " the cat sat"));
    std::vector<int> tokens = gb::encode(a.tok, "the cat sat on the mat");
    gb::record ca, cb;
    gb::run_forward(ca, a, tokens);
    gb::run_forward(cb, b, tokens);
    for (size_t i = 0; i < ca.logits.size(); i++) ASSERT_NEAR(ca.logits[i], cb.logits[i], 1e-5) << i;
    EXPECT_EQ(ca.resid_norm, cb.resid_norm);
}

// Each block's bytes are written out here and the expected values worked out by hand from the format:
// Q8_0 = d * q; Q4_0 = d * (nibble - 8); Q4_K = d * scale * nibble - dmin * min (6-bit scales/mins);
// Q6_K = d * scale * (6-bit value - 32).
TEST(Gguf, DequantisesEachBlockTypeByHand) {
    { // Q8_0: d = 0.5 (f16 0x3800)
        std::vector<uint8_t> b(34, 0);
        b[0] = 0x00, b[1] = 0x38;
        b[2] = (uint8_t)(int8_t)-3, b[3] = 7, b[33] = (uint8_t)(int8_t)-128;
        float y[32];
        gb::dequantize(y, b.data(), gb::GGML_Q8_0, 32);
        EXPECT_EQ(y[0], -1.5f);
        EXPECT_EQ(y[1], 3.5f);
        EXPECT_EQ(y[2], 0.0f);
        EXPECT_EQ(y[31], -64.0f);
    }
    { // Q4_0: d = 2 (0x4000); byte j holds value j (low nibble) and value j + 16 (high nibble), offset 8
        std::vector<uint8_t> b(18, 0x88); // all nibbles 8 -> 0
        b[0] = 0x00, b[1] = 0x40;
        b[2] = 0x1F;  // value 0: 15 - 8 = 7 -> 14; value 16: 1 - 8 = -7 -> -14
        b[17] = 0x80; // value 15: 0 - 8 -> -16; value 31: 8 - 8 -> 0
        float y[32];
        gb::dequantize(y, b.data(), gb::GGML_Q4_0, 32);
        EXPECT_EQ(y[0], 14.0f);
        EXPECT_EQ(y[16], -14.0f);
        EXPECT_EQ(y[15], -16.0f);
        EXPECT_EQ(y[31], 0.0f);
        EXPECT_EQ(y[5], 0.0f);
    }
    { // Q4_K: d = 1 (0x3C00), dmin = 0.5 (0x3800); sub-block s has scale/min packed in 12 bytes:
      // s < 4: scale = scales[s] & 63, min = scales[s + 4] & 63;
      // s >= 4: scale = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4, min = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4
        std::vector<uint8_t> b(144, 0);
        b[0] = 0x00, b[1] = 0x3C, b[2] = 0x00, b[3] = 0x38;
        uint8_t* sc = &b[4];
        sc[0] = 3;               // sub-block 0 scale 3
        sc[4] = 2;               // sub-block 0 min 2
        sc[1] = 5 | (1 << 6);    // sub-block 1 scale 5; bit 6 feeds sub-block 5's scale high bits (1 << 4)
        sc[5] = 1 | (2 << 6);    // sub-block 1 min 1; bits 6-7 feed sub-block 5's min high bits (2 << 4)
        sc[9] = 0x34;            // sub-block 5: scale low 4 bits = 4, min low 4 bits = 3
        uint8_t* q = &b[16];
        q[0] = 0x9A;             // value 0 (sub-block 0): 10; value 32 (sub-block 1): 9
        q[64 + 1] = 0x70;        // group 2 -> sub-blocks 4 (low) and 5 (high): value 161 = 7 in sub-block 5
        float y[256];
        gb::dequantize(y, b.data(), gb::GGML_Q4_K, 256);
        EXPECT_FLOAT_EQ(y[0], 1.0f * 3 * 10 - 0.5f * 2);   // 29
        EXPECT_FLOAT_EQ(y[1], -1.0f);                      // nibble 0 -> -min
        EXPECT_FLOAT_EQ(y[32], 1.0f * 5 * 9 - 0.5f * 1);   // 44.5
        // sub-block 5: scale = 4 | 1 << 4 = 20, min = 3 | 2 << 4 = 35; value 161 = 20 * 7 - 0.5 * 35
        EXPECT_FLOAT_EQ(y[160 + 1], 20.0f * 7 - 0.5f * 35);
        EXPECT_FLOAT_EQ(y[160], -0.5f * 35);
    }
    { // Q6_K: ql[128], qh[64], int8 scales[16], f16 d = 0.25 (0x3400); 6-bit value - 32, scale per 16 values
        std::vector<uint8_t> b(210, 0);
        b[208] = 0x00, b[209] = 0x34;
        int8_t* sc = (int8_t*)&b[192];
        for (int i = 0; i < 16; i++) sc[i] = (int8_t)(i + 1);
        b[0] = 0x5A;         // ql[0]: low nibble 10 -> value 0, high nibble 5 -> value 64
        b[128] = 0b11100111; // qh[0]: bits 0-1 (3) -> value 0, 2-3 (1) -> value 32, 4-5 (2) -> value 64, 6-7 (3) -> value 96
        float y[256];
        gb::dequantize(y, b.data(), gb::GGML_Q6_K, 256);
        EXPECT_FLOAT_EQ(y[0], 0.25f * 1 * ((10 | 3 << 4) - 32));  // scale index 0
        EXPECT_FLOAT_EQ(y[32], 0.25f * 3 * ((0 | 1 << 4) - 32));  // scale index 2
        EXPECT_FLOAT_EQ(y[64], 0.25f * 5 * ((5 | 2 << 4) - 32));  // scale index 4
        EXPECT_FLOAT_EQ(y[96], 0.25f * 7 * ((0 | 3 << 4) - 32));  // scale index 6
        EXPECT_FLOAT_EQ(y[16], 0.25f * 2 * (0 - 32));             // scale index 1
        EXPECT_FLOAT_EQ(y[128], 0.25f * 9 * (0 - 32));            // second half: scales 8..
    }
    { // F16 and BF16 pass through their conversions
        uint8_t h[4] = {0x00, 0x3C, 0x80, 0x3F}; // f16 1.0, bf16 1.0
        float y;
        gb::dequantize(&y, h, gb::GGML_F16, 1);
        EXPECT_EQ(y, 1.0f);
        gb::dequantize(&y, h + 2, gb::GGML_BF16, 1);
        EXPECT_EQ(y, 1.0f);
    }
}

TEST(Gguf, QuantisedModelLoadsAndSaysWhatItCosts) {
    tiny_llama_spec s;
    s.dim = 64, s.hidden = 256, s.n_head = 4, s.n_kv_head = 4, s.vocab = 300;
    std::string dir = test_temp_dir("gguf_q8");
    tiny_llama tm = write_tiny_llama2c(dir, s);
    std::string path = write_llama_gguf(dir, tm);
    gb::model f32 = gb::load_model(path);
    // the same model with every matrix as Q8_0 (d = max|x| / 127 per block of 32)
    {
        gguf_out base;
        base.str("general.architecture", "llama");
        base.u32("llama.block_count", s.n_layer);
        base.u32("llama.embedding_length", s.dim);
        base.u32("llama.feed_forward_length", s.hidden);
        base.u32("llama.attention.head_count", s.n_head);
        base.u32("llama.attention.head_count_kv", s.n_kv_head);
        base.u32("llama.context_length", s.seq_len);
        spm_tokenizer(base, s.vocab);
        gb::gguf_file src = gb::open_gguf(path);
        for (auto& [name, t] : src.tensors) {
            gguf_out::tensor o;
            o.name = name, o.ne = t.ne;
            std::vector<float> v((size_t)(t.nbytes / 4));
            std::memcpy(v.data(), t.data, t.nbytes);
            if (t.ne.size() == 2) {
                o.type = gb::GGML_Q8_0;
                for (size_t b0 = 0; b0 < v.size(); b0 += 32) {
                    float amax = 0;
                    for (int i = 0; i < 32; i++) amax = std::max(amax, std::abs(v[b0 + i]));
                    float d = amax / 127;
                    uint16_t dh = gb::f32_to_f16(d);
                    float dr = gb::f16_to_f32(dh);
                    o.bytes.push_back(dh & 0xff), o.bytes.push_back(dh >> 8);
                    for (int i = 0; i < 32; i++) o.bytes.push_back((uint8_t)(int8_t)std::lround(dr ? v[b0 + i] / dr : 0));
                }
            } else {
                o.type = 0;
                o.bytes.assign(t.data, t.data + t.nbytes);
            }
            base.tensors.push_back(o);
        }
        base.write(dir + "/q8.gguf");
    }
    gb::model q8 = gb::load_model(dir + "/q8.gguf");
    // kept as stored: the matrices in Q8_0 at about 9 bits a value, the embedding read in place, nothing
    // dequantised to say
    EXPECT_EQ(gb::stored_types(q8).attention, "Q8_0");
    EXPECT_EQ(gb::stored_types(q8).mlp, "Q8_0");
    EXPECT_EQ(gb::stored_types(q8).embedding, "Q8_0");
    EXPECT_EQ(q8.source_note, "");
    {   // equal, bit for bit, to the same file dequantised at load on the fp32 kernel
        matmul_scope fp32(gb::MATMUL_FP32);
        gb::model kept = gb::load_model(dir + "/q8.gguf");
        gb::load_options lo;
        lo.keep_stored = false;
        gb::model deq = gb::load_model(dir + "/q8.gguf", lo);
        EXPECT_NE(deq.source_note.find("dequantised to f32"), std::string::npos) << deq.source_note;
        EXPECT_LT(gb::weight_bytes(kept), gb::weight_bytes(deq));
        gb::record ka, kb;
        gb::run_forward(ka, kept, {1, 40, 41, 42, 100});
        gb::run_forward(kb, deq, {1, 40, 41, 42, 100});
        EXPECT_EQ(ka.logits, kb.logits);
    }
    // Q8_0 keeps ~2 decimal digits: the two models agree on the prediction's shape
    std::vector<int> tokens = {1, 40, 41, 42, 100};
    gb::record a, b;
    gb::run_forward(a, f32, tokens);
    gb::run_forward(b, q8, tokens);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.logits.size(); i++) diff += std::abs(a.logits[i] - b.logits[i]), norm += std::abs(a.logits[i]);
    EXPECT_LT(diff / norm, 0.05);
}

TEST(Gguf, MalformedFilesGiveClearErrors) {
    std::string dir = test_temp_dir("gguf_bad");
    tiny_llama tm = write_tiny_llama2c(dir, tiny_llama_spec{});
    std::string good = write_llama_gguf(dir, tm);
    std::ifstream f(good, std::ios::binary);
    std::string raw((std::istreambuf_iterator<char>(f)), {});
    auto with = [&](const std::string& bytes) {
        std::ofstream(dir + "/bad.gguf", std::ios::binary) << bytes;
        return dir + "/bad.gguf";
    };
    auto patch = [&](size_t at, const void* v, size_t n) {
        std::string r = raw;
        std::memcpy(&r[at], v, n);
        return r;
    };
    expect_gb_error([&] { gb::load_model(with("GGU")); }, "truncated");
    expect_gb_error([&] { gb::load_model(with("GGML" + raw.substr(4))); }, "bad magic");
    uint32_t v1 = 1;
    expect_gb_error([&] { gb::load_model(with(patch(4, &v1, 4))); }, "version 1");
    uint64_t huge = 1ull << 40;
    expect_gb_error([&] { gb::load_model(with(patch(8, &huge, 8))); }, "more than the file can hold");
    expect_gb_error([&] { gb::load_model(with(raw.substr(0, raw.size() / 3))); }, "truncated");
    expect_gb_error([&] { gb::load_model(with(raw.substr(0, raw.size() - 64))); }, "runs past the end");
    // first metadata key length: absurd
    expect_gb_error([&] { gb::load_model(with(patch(24, &huge, 8))); }, "absurd");
    // a tensor with an unknown type and one with a misaligned offset
    gguf_out g;
    g.str("general.architecture", "llama");
    gguf_out::tensor t;
    t.name = "x", t.ne = {4}, t.type = 99, t.bytes.assign(16, 0);
    g.tensors.push_back(t);
    g.write(dir + "/type.gguf");
    expect_gb_error([&] { gb::open_gguf(dir + "/type.gguf"); }, "type 99");
    std::string aligned = raw;
    // find the first tensor's offset field: after its name "token_embd.weight", dims, type
    size_t at = aligned.find("token_embd.weight");
    ASSERT_NE(at, std::string::npos);
    size_t off_field = at + 17 + 4 + 2 * 8 + 4;
    uint64_t odd = 4;
    std::memcpy(&aligned[off_field], &odd, 8);
    expect_gb_error([&] { gb::open_gguf(with(aligned)); }, "misaligned");
}

// Inputs that once crashed a fuzzer (tests/fuzz/regressions/fuzz_gguf) must load or fail with gb::error;
// under the sanitizer build (tools/sanitize.sh) any undefined behaviour fails the test.
TEST(Gguf, FuzzRegressionsFailCleanly) {
    std::string dir = std::string(GLASSBOX_SOURCE_DIR) + "/tests/fuzz/regressions/fuzz_gguf";
    ASSERT_TRUE(std::filesystem::exists(dir));
    std::string tmp = test_temp_dir("gguf_regress");
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::string path = tmp + "/" + e.path().filename().string() + ".gguf";
        std::filesystem::copy_file(e.path(), path);
        try {
            gb::load_model(path);
        } catch (const gb::error&) {
        }
        n++;
    }
    EXPECT_GT(n, 0);
}

// Llama 3.1/3.2 as llama.cpp converts them: the llama3 rule baked into rope_freqs.weight, one divisor per pair
// (freq_i = theta^(-2i/d) / rope_freqs[i]), freq_base 500000, adjacent pairs. Head size 8 against an original
// context of 512 puts the four pairs in all three cases of the rule.
TEST(Gguf, LlamaRopeFreqsMatchReferenceForEveryAblation) {
    tiny_llama_spec s;
    s.seed = 41, s.rope_theta = 500000;
    s.rope_scaling = "llama3", s.rope_factor = 8, s.rope_low_freq_factor = 1, s.rope_high_freq_factor = 4, s.rope_orig_ctx = 512;
    std::string dir = test_temp_dir("gguf_rope_freqs");
    tiny_llama tm = write_tiny_llama2c(dir, s);
    const int dh = s.dim / s.n_head, half = dh / 2;
    std::vector<float> divisors(half);
    for (int i = 0; i < half; i++) divisors[i] = (float)(std::pow(s.rope_theta, -2.0 * i / dh) / reference_rope_freq(s, i));
    EXPECT_EQ(divisors[0], 1.0f);
    EXPECT_EQ(divisors[3], 8.0f);
    gguf_out g = llama_gguf(tm);
    g.f32_tensor("rope_freqs.weight", {half}, divisors);
    g.write(dir + "/l3.gguf");
    gb::model m = gb::load_model(dir + "/l3.gguf");
    EXPECT_EQ(m.config.rope, gb::ROPE_ADJACENT);
    EXPECT_EQ(m.config.rope_scaling, gb::ROPE_SCALING_FREQ_TABLE);
    ASSERT_EQ(m.config.rope_freq.size(), (size_t)half);
    for (int i = 0; i < half; i++) EXPECT_NEAR(m.config.rope_freq[i], reference_rope_freq(s, i), 1e-7 * reference_rope_freq(s, i));
    std::mt19937 rng(11);
    std::vector<int> tokens(30);
    for (int& t : tokens) t = (int)(rng() % s.vocab);
    expect_matches_reference(m, tm, tokens, "GGUF llama, rope_freqs");
    // the table must matter: without it the reference is far away
    tiny_llama unscaled = tm;
    unscaled.spec.rope_scaling = "none";
    llama_ref a = reference_llama(unscaled, tokens, {}), b = reference_llama(tm, tokens, {});
    EXPECT_GT(max_scaled_error(std::vector<float>(a.logits.begin(), a.logits.end()), b.logits), 1e-2);
    // a table of the wrong length, or a divisor that is not positive, is an error naming the tensor
    g.tensors.back().ne = {half - 1};
    g.tensors.back().bytes.resize((half - 1) * 4);
    g.write(dir + "/short.gguf");
    expect_gb_error([&] { gb::load_model(dir + "/short.gguf"); }, "rope_freqs.weight");
    divisors[2] = -1;
    g.tensors.pop_back();
    g.f32_tensor("rope_freqs.weight", {half}, divisors);
    g.write(dir + "/neg.gguf");
    expect_gb_error([&] { gb::load_model(dir + "/neg.gguf"); }, "rope_freqs.weight[2]");
}

// {arch}.rope.scaling.type "linear" with its factor: positions / factor. Other types are refused by name.
TEST(Gguf, LinearRopeScalingAndRefusedTypes) {
    tiny_llama_spec s;
    s.seed = 43, s.rope_scaling = "linear", s.rope_factor = 4;
    std::string dir = test_temp_dir("gguf_rope_linear");
    tiny_llama tm = write_tiny_llama2c(dir, s);
    gguf_out g = llama_gguf(tm);
    g.str("llama.rope.scaling.type", "linear");
    g.f32("llama.rope.scaling.factor", 4.0f);
    g.write(dir + "/lin.gguf");
    gb::model m = gb::load_model(dir + "/lin.gguf");
    EXPECT_EQ(m.config.rope_scaling, gb::ROPE_SCALING_LINEAR);
    expect_matches_reference(m, tm, {1, 5, 17, 200, 3, 99, 42, 8, 250, 19, 60, 77, 3, 12, 140, 2, 9, 31, 44, 100}, "GGUF linear");
    for (const char* type : {"yarn", "longrope"}) {
        gguf_out y = llama_gguf(tm);
        y.str("llama.rope.scaling.type", type);
        y.write(dir + "/y.gguf");
        expect_gb_error([&] { gb::load_model(dir + "/y.gguf"); }, std::string("'") + type + "' is not supported");
    }
    gguf_out partial = llama_gguf(tm);
    partial.u32("llama.rope.dimension_count", 5); // partial rotary is read (GPT-NeoX), an odd count is not
    partial.write(dir + "/partial.gguf");
    expect_gb_error([&] { gb::load_model(dir + "/partial.gguf"); }, "must be even");
}

// Qwen2 GGUF keeps HF's rotate-half layout and has q/k/v biases. The theta in the file must be read, not
// qwen2's usual 1e6: the second model has 20000.
TEST(Gguf, Qwen2MatchesReferenceForEveryAblation) {
    for (double theta : {1e6, 20000.0}) {
        tiny_llama_spec s;
        s.seed = 42, s.rope_half = true, s.rope_theta = theta, s.qkv_bias = true, s.shared_classifier = theta > 1e5;
        std::string dir = test_temp_dir("gguf_qwen2");
        tiny_llama tm = write_tiny_llama2c(dir, s);
        llama_gguf(tm, "qwen2").write(dir + "/qwen2.gguf");
        gb::model m = gb::load_model(dir + "/qwen2.gguf");
        EXPECT_EQ(m.config.model_type, "qwen2");
        EXPECT_EQ(m.config.rope, gb::ROPE_HALF);
        EXPECT_TRUE(m.config.qkv_bias);
        EXPECT_EQ(m.config.rope_theta, (float)theta);
        std::mt19937 rng(12);
        std::vector<int> tokens(19);
        for (int& t : tokens) t = (int)(rng() % s.vocab);
        expect_matches_reference(m, tm, tokens, "GGUF qwen2, theta " + std::to_string(theta));
    }
}

// GGUF v2 has v3's layout (v2 made counts and lengths 64-bit; v3 only added big-endian files), and
// general.alignment moves the data start and every tensor offset. A 12-byte tensor first puts the later offsets
// off the 32-byte grid for alignment 8, and general.name is padded until the data start differs from the
// 32-aligned one, so a reader ignoring general.alignment fails here.
TEST(Gguf, Version2AndAlignments8And64LoadTheSameModel) {
    std::string dir = test_temp_dir("gguf_versions");
    tiny_llama tm = write_tiny_llama2c(dir, tiny_llama_spec{});
    gguf_out base = llama_gguf(tm);
    std::vector<int> tokens = {1, 5, 17, 200, 3, 99, 42};
    gb::record want;
    gb::run_forward(want, gb::load_model(write_llama_gguf(dir, tm)), tokens);
    gguf_out::tensor pad;
    pad.name = "glassbox.test.pad", pad.ne = {3}, pad.type = gb::GGML_F32, pad.bytes.assign(12, 0);
    base.tensors.insert(base.tensors.begin(), pad);
    for (auto [version, alignment] : std::vector<std::pair<uint32_t, uint32_t>>{{2, 32}, {3, 64}, {3, 8}, {2, 64}}) {
        std::string what = "v" + std::to_string(version) + ", alignment " + std::to_string(alignment);
        std::string path = dir + "/v" + std::to_string(version) + "_a" + std::to_string(alignment) + ".gguf";
        bool differs = alignment == 32;
        for (int k = 0; k < 64; k++) {
            gguf_out g = base;
            g.version = version, g.alignment = alignment;
            g.str("general.name", std::string(k, 'x'));
            size_t h = g.write(path);
            if (alignment == 32 || (h + alignment - 1) / alignment * alignment != (h + 31) / 32 * 32) {
                differs = true;
                break;
            }
        }
        ASSERT_TRUE(differs) << what;
        gb::gguf_file f = gb::open_gguf(path);
        EXPECT_EQ(f.version, version) << what;
        EXPECT_EQ((uintptr_t)(f.tensors.at("token_embd.weight").data - f.file->data) % alignment, 0u) << what;
        gb::record got;
        gb::run_forward(got, gb::load_model(path), tokens);
        EXPECT_EQ(got.logits, want.logits) << what;
    }
}

// The GGUF "llama" (SentencePiece) tokenizer merges by best score as llama2.c does: "abc" with "ab" (-5) and
// "bc" (-1) gives ▁ a bc; "z" is no piece: <0x7A>.
TEST(Gguf, LlamaTokenizerMergesBestScoreFirstAndFallsBackToBytes) {
    std::string dir = test_temp_dir("gguf_tok_order");
    tiny_llama tm = write_tiny_llama2c(dir, tiny_llama_spec{});
    gguf_out g = llama_gguf(tm);
    g.meta.erase(std::remove_if(g.meta.begin(), g.meta.end(), [](const gguf_out::kv& e) { return e.key.rfind("tokenizer.", 0) == 0; }),
                 g.meta.end());
    std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        toks.push_back(n), scores.push_back(0), types.push_back(6);
    }
    const int sp = (int)toks.size(), a = sp + 1, b = sp + 2, c = sp + 3, ab = sp + 4, bc = sp + 5;
    for (const char* p : {"\xE2\x96\x81", "a", "b", "c"}) toks.push_back(p), scores.push_back(-100), types.push_back(1);
    toks.push_back("ab"), scores.push_back(-5), types.push_back(1);
    toks.push_back("bc"), scores.push_back(-1), types.push_back(1);
    llama_tokenizer_meta(g, toks, scores, types);
    g.write(dir + "/tok.gguf");
    gb::model m = gb::load_model(dir + "/tok.gguf");
    EXPECT_EQ(gb::encode_prompt(m.tok, "abc", false), (std::vector<int>{1, sp, a, bc}));
    EXPECT_EQ(gb::encode_prompt(m.tok, "abcabc", false), (std::vector<int>{1, sp, a, bc, a, bc}));
    EXPECT_EQ(gb::encode_prompt(m.tok, "cab", false), (std::vector<int>{1, sp, c, ab}));
    EXPECT_EQ(gb::encode_prompt(m.tok, "abz", false), (std::vector<int>{1, sp, ab, 3 + 'z'}));
    EXPECT_EQ(gb::encode_prompt(m.tok, "bz\xc3\xa9", false), (std::vector<int>{1, sp, b, 3 + 'z', 3 + 0xc3, 3 + 0xa9}));
    EXPECT_EQ(gb::decode(m.tok, {1, sp, ab, 3 + 'z'}), "abz");
}

// ---------------------------------------------------------------------------------------------
// The random GGUF writer (core/io/gguf_writer.h): what make-random --out X.gguf writes for llama.cpp
// ---------------------------------------------------------------------------------------------

static gb::model_config small_shape() {
    gb::model_config s;
    s.n_layer = 1, s.d_model = 256, s.n_head = 4, s.n_kv_head = 2, s.d_ff = 256, s.vocab_size = 257, s.n_ctx = 16;
    s.n_expert = 3, s.n_expert_used = 2, s.d_ff_expert = 256, s.d_ff_shared = 256;
    return s;
}

// Every family in every type: our loader reads back the config random_gguf_config promised, the tokenizer keys
// llama.cpp needs are there (make-random's first GGUFs had no tokenizer.ggml.merges, and llama.cpp refused them:
// "cannot find tokenizer merges in model file"), and the --dequantised file holds exactly what the stored one does.
TEST(GgufWriter, EveryFamilyInEveryTypeReadsBackAsConfigured) {
    const std::string dir = test_temp_dir("gguf_writer");
    for (const std::string& family : gb::random_gguf_families()) {
        gb::model_config s = small_shape();
        if (family == "gpt2" || family == "gpt_neox" || family == "olmoe") s.n_kv_head = 4;
        if (family == "gpt_neox") s.rope_dims = 32;
        if (family == "gemma2") s.sliding_window = 5, s.attn_softcap = 7, s.final_softcap = 9;
        const gb::model_config c = gb::random_gguf_config(family, s);
        for (uint32_t type : gb::ggml_types()) {
            SCOPED_TRACE(family + " " + gb::ggml_type_name(type));
            gb::random_gguf_options o;
            o.type = type, o.aux_std = 0.1;
            const std::string path = dir + "/m.gguf", f32 = dir + "/f32.gguf";
            const int64_t n = gb::write_random_gguf(path, c, o);
            gb::model m = gb::load_model(path);
            const gb::model_config& r = m.config;
            EXPECT_EQ(gb::count_params(m).total(), n);
            EXPECT_EQ(r.arch, c.arch);
            EXPECT_EQ(std::make_tuple(r.n_layer, r.d_model, r.n_head, r.n_kv_head, r.d_head, r.d_ff, r.vocab_size, r.n_ctx),
                      std::make_tuple(c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_head, c.d_ff, c.vocab_size, c.n_ctx));
            EXPECT_EQ(std::make_tuple(r.n_expert, r.n_expert_used, r.d_ff_expert, r.d_ff_shared, r.norm_topk),
                      std::make_tuple(c.n_expert, c.n_expert_used, c.d_ff_expert, c.d_ff_shared, c.norm_topk));
            EXPECT_EQ(std::make_tuple(r.qkv_bias, r.mlp_bias, r.parallel, r.tied_lm_head, r.sliding_window, r.window_every),
                      std::make_tuple(c.qkv_bias, c.mlp_bias, c.parallel, c.tied_lm_head, c.sliding_window, c.window_every));
            EXPECT_EQ(std::make_tuple(r.attn_softcap, r.final_softcap, r.norm_eps), std::make_tuple(c.attn_softcap, c.final_softcap, c.norm_eps));
            if (c.rope_dims) {
                EXPECT_EQ(std::make_tuple(r.rope, r.rope_dims, r.rope_theta), std::make_tuple(c.rope, c.rope_dims, c.rope_theta));
            }
            const gb::gguf_file g = gb::open_gguf(path);
            const std::string A = g.meta.at("general.architecture").s;
            EXPECT_EQ(A, family == "mistral" || family == "mixtral" ? "llama" : family == "qwen2" ? "qwen2"
                                                                               : gb::arch_table(c.arch).names->gguf_arch);
            EXPECT_EQ(g.meta.at("tokenizer.ggml.model").s, "gpt2");
            EXPECT_EQ(g.meta.at("tokenizer.ggml.merges").elem_type, 8u);
            EXPECT_EQ(g.meta.at("tokenizer.ggml.token_type").n, (uint64_t)c.vocab_size);
            EXPECT_EQ(m.tok.eos_id, c.vocab_size - 1);
            EXPECT_EQ(gb::decode(m.tok, gb::encode(m.tok, "any text")), "any text");
            if (type == gb::GGML_F32) continue;
            o.dequantised = true;
            gb::write_random_gguf(f32, c, o);
            const gb::gguf_file q = gb::open_gguf(f32);
            for (const auto& [name, t] : g.tensors) {
                const gb::gguf_tensor& d = q.tensors.at(name);
                ASSERT_EQ(d.ne, t.ne) << name;
                ASSERT_EQ(d.type, (uint32_t)gb::GGML_F32) << name;
                int64_t values = 1;
                for (int64_t e : t.ne) values *= e;
                std::vector<float> want((size_t)values);
                gb::dequantize(want.data(), t.data, t.type, values);
                ASSERT_EQ(std::memcmp(want.data(), d.data, d.nbytes), 0) << name;
            }
        }
    }
}

// The same seed writes the same bytes; what llama.cpp (or our loader) would refuse is refused while writing
TEST(GgufWriter, ASeedNamesOneFileAndRefusalsNameTheProblem) {
    const std::string dir = test_temp_dir("gguf_writer_refusals");
    const gb::model_config c = gb::random_gguf_config("qwen3", small_shape());
    gb::random_gguf_options o;
    o.type = gb::GGML_Q6_K;
    gb::write_random_gguf(dir + "/a.gguf", c, o);
    gb::write_random_gguf(dir + "/b.gguf", c, o);
    o.seed = 2;
    gb::write_random_gguf(dir + "/c.gguf", c, o);
    EXPECT_EQ(read_file(dir + "/a.gguf"), read_file(dir + "/b.gguf"));
    EXPECT_NE(read_file(dir + "/a.gguf"), read_file(dir + "/c.gguf"));

    gb::model_config s = small_shape();
    expect_gb_error([&] { gb::random_gguf_config("bert", s); }, "unknown family 'bert'");
    expect_gb_error([&] { gb::random_gguf_config("olmoe", s); }, "llama.cpp's OLMoE needs as many K/V heads as heads");
    expect_gb_error([&] { gb::random_gguf_config("gpt2", s); }, "one K/V head per head");
    s.sliding_window = 8;
    expect_gb_error([&] { gb::random_gguf_config("mistral", s); }, "llama.cpp reads one for Gemma 2 and Phi-3 only");
    s = small_shape(), s.vocab_size = 256;
    expect_gb_error([&] { gb::random_gguf_config("llama", s); }, "vocab_size must be at least 257");
    s = small_shape(), s.d_model = 96, s.n_head = 4;
    o.type = gb::GGML_Q4_K;
    expect_gb_error([&] { gb::write_random_gguf(dir + "/d.gguf", gb::random_gguf_config("llama", s), o); },
                    "Q4_K blocks of 256 values do not divide token_embd.weight's rows of 96");
    gb::model_config partial = c;
    partial.d_ff_expert = 7; // not what random_gguf_config made of the shape
    partial.n_kv_head = 0;
    expect_gb_error([&] { gb::write_random_gguf(dir + "/e.gguf", partial, o); }, "needs the complete config");
}

// Keys a GGUF may leave out are read with llama.cpp's defaults (the llama.cpp parity suite found both): RoPE's base
// is 10000 for every architecture (we read 1e6 for Qwen's), and Gemma 2 caps its scores at 50 and its logits at 30
// with a window of 4096 (we read no caps and no window)
TEST(Gguf, MissingKeysReadAsLlamaCppReadsThem) {
    const std::string dir = test_temp_dir("gguf_defaults");
    for (const std::string family : {"qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "llama", "gemma2"}) {
        SCOPED_TRACE(family);
        gb::model_config c = gb::random_gguf_config(family, small_shape());
        c.rope_theta = 1000000.0f;
        gb::random_gguf_options o;
        const std::string A = family == "qwen2_moe" ? "qwen2moe" : family == "qwen3_moe" ? "qwen3moe" : family;
        o.omit = {A + ".rope.freq_base", A + ".attention.sliding_window", A + ".attn_logit_softcapping",
                  A + ".final_logit_softcapping"};
        gb::write_random_gguf(dir + "/m.gguf", c, o);
        const gb::gguf_file g = gb::open_gguf(dir + "/m.gguf");
        ASSERT_EQ(g.meta.count(A + ".rope.freq_base"), 0u) << "the key is left out";
        const gb::model m = gb::load_model(dir + "/m.gguf");
        EXPECT_EQ(m.config.rope_theta, 10000.0f);
        const bool gemma2 = family == "gemma2";
        EXPECT_EQ(m.config.attn_softcap, gemma2 ? 50.0f : 0.0f);
        EXPECT_EQ(m.config.final_softcap, gemma2 ? 30.0f : 0.0f);
        EXPECT_EQ(m.config.sliding_window, gemma2 ? 4096 : 0);
    }
}
