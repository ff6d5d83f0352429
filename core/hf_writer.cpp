// Writing GPT-2 models as Hugging Face folders, and seeded random GPT-2 models for benchmarks.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "error.h"
#include "model.h"
#include "safetensors.h"

namespace gb {

static void write_text(const std::string& path, const std::string& text) {
    std::ofstream o(path, std::ios::binary);
    o << text;
    if (!o) throw error("cannot write " + path);
}

void save_hf_gpt2(const std::string& dir, const model& m, const std::string& dtype) {
    const model_config& c = m.config;
    if (c.arch != ARCH_GPT2) throw error("save_hf_gpt2: model is not GPT-2");
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
        throw error("save_hf_gpt2: dtype " + dtype + " is not supported (expected F32, F16 or BF16)");
    if ((int)m.weights.layers.size() != c.n_layer)
        throw error("save_hf_gpt2: config says " + std::to_string(c.n_layer) + " layers, weights hold " +
                    std::to_string(m.weights.layers.size()));
    st_dtype dt = dtype == "F16" ? ST_F16 : dtype == "BF16" ? ST_BF16 : ST_F32;
    for (const layer_weights& L : m.weights.layers)
        for (const weight_matrix* w : {&L.w_qkv, &L.w_o, &L.w_up, &L.w_down})
            if (w->amx()) // its digits give the weights back only to within 2^-22 of a row's largest
                throw error("save_hf_gpt2: the weights are packed for the AMX kernel and cannot be written exactly "
                            "(pack them with pack_matrix(..., exact = true))");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("cannot create " + dir + ": " + ec.message());

    nlohmann::json cfg = {{"model_type", "gpt2"},
                          {"architectures", {"GPT2LMHeadModel"}},
                          {"n_layer", c.n_layer},
                          {"n_head", c.n_head},
                          {"n_embd", c.d_model},
                          {"n_inner", c.d_ff},
                          {"vocab_size", c.vocab_size},
                          {"n_positions", c.n_ctx},
                          {"n_ctx", c.n_ctx},
                          {"layer_norm_epsilon", c.norm_eps},
                          {"activation_function", "gelu_new"},
                          {"bos_token_id", m.tok.bos_id},
                          {"eos_token_id", m.tok.eos_id}};
    write_text(dir + "/config.json", cfg.dump(2) + "\n");

    const int64_t d = c.d_model, V = c.vocab_size, ff = c.d_ff;
    const model_weights& w = m.weights;
    std::vector<st_out> t;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data) {
        t.push_back({name, std::move(shape), data, dt});
    };
    add("wte.weight", {V, d}, w.tok_emb);
    add("wpe.weight", {c.n_ctx, d}, w.pos_emb);
    for (int l = 0; l < c.n_layer; l++) {
        const layer_weights& L = w.layers[l];
        std::string p = "h." + std::to_string(l) + ".";
        add(p + "ln_1.weight", {d}, L.norm1_g);
        add(p + "ln_1.bias", {d}, L.norm1_b);
        add(p + "attn.c_attn.weight", {d, 3 * d}, unpack_matrix(L.w_qkv));
        add(p + "attn.c_attn.bias", {3 * d}, L.b_qkv);
        add(p + "attn.c_proj.weight", {d, d}, unpack_matrix(L.w_o));
        add(p + "attn.c_proj.bias", {d}, L.b_o);
        add(p + "ln_2.weight", {d}, L.norm2_g);
        add(p + "ln_2.bias", {d}, L.norm2_b);
        add(p + "mlp.c_fc.weight", {d, ff}, unpack_matrix(L.w_up));
        add(p + "mlp.c_fc.bias", {ff}, L.b_up);
        add(p + "mlp.c_proj.weight", {ff, d}, unpack_matrix(L.w_down));
        add(p + "mlp.c_proj.bias", {d}, L.b_down);
    }
    add("ln_f.weight", {d}, w.normf_g);
    add("ln_f.bias", {d}, w.normf_b);
    if (!w.lm_head.empty()) add("lm_head.weight", {V, d}, w.lm_head);
    write_safetensors(dir + "/model.safetensors", t);

    nlohmann::json vocab = nlohmann::json::object();
    for (size_t i = 0; i < m.tok.vocab.size(); i++) vocab[m.tok.vocab[i]] = (int)i;
    write_text(dir + "/vocab.json", vocab.dump() + "\n");
    // merges.txt lists "left right" pairs in rank order (rank = line number after the version line)
    std::vector<std::pair<int, std::string>> merges;
    for (const auto& kv : m.tok.merge_rank) merges.push_back({kv.second, kv.first});
    std::sort(merges.begin(), merges.end());
    std::string mtxt = "#version: 0.2\n";
    for (const auto& mg : merges) mtxt += mg.second + "\n";
    write_text(dir + "/merges.txt", mtxt);
}

// N(0, std) from a seeded 64-bit Mersenne Twister with our own Box-Muller, identical on every platform
struct normal_source {
    std::mt19937_64 rng;
    bool have = false;
    double spare = 0;
    explicit normal_source(uint64_t seed) : rng(seed) {}
    double next() {
        if (have) {
            have = false;
            return spare;
        }
        double u1 = ((rng() >> 11) + 1.0) * (1.0 / 9007199254740993.0), u2 = (rng() >> 11) * (1.0 / 9007199254740992.0);
        double r = std::sqrt(-2.0 * std::log(u1));
        spare = r * std::sin(2 * M_PI * u2);
        have = true;
        return r * std::cos(2 * M_PI * u2);
    }
    std::vector<float> fill(size_t n, double std) {
        std::vector<float> v(n);
        for (float& x : v) x = (float)(next() * std);
        return v;
    }
};

model random_gpt2(const model_config& cfg, uint64_t seed) {
    model m;
    m.config = cfg;
    model_config& c = m.config;
    c.arch = ARCH_GPT2;
    c.model_type = "gpt2";
    if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
    if (c.d_head == 0 && c.n_head > 0) c.d_head = c.d_model / c.n_head;
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (c.vocab_size < 257) throw error("random_gpt2: vocab_size must be at least 257 (256 bytes + end-of-text)");
    if (c.n_layer < 1 || c.n_head < 1 || c.d_model < 1 || c.n_ctx < 1 || c.d_ff < 1)
        throw error("random_gpt2: n_layer, n_head, d_model, d_ff and n_ctx must be positive");
    if (c.d_model % c.n_head != 0 || c.d_head * c.n_head != c.d_model || c.n_kv_head != c.n_head)
        throw error("random_gpt2: d_model " + std::to_string(c.d_model) + " must be n_head (" +
                    std::to_string(c.n_head) + ") x d_head, with as many kv heads as heads");
    const size_t d = c.d_model, V = c.vocab_size, ff = c.d_ff;
    normal_source ns(seed);
    model_weights& w = m.weights;
    w.tok_emb = ns.fill(V * d, 0.02);
    w.pos_emb = ns.fill((size_t)c.n_ctx * d, 0.02);
    w.layers.resize(c.n_layer);
    for (layer_weights& L : w.layers) {
        L.norm1_g.assign(d, 1.0f);
        L.norm1_b.assign(d, 0.0f);
        L.w_qkv = pack_matrix(ns.fill(d * 3 * d, 0.02), d, 3 * d, true);
        L.b_qkv.assign(3 * d, 0.0f);
        L.w_o = pack_matrix(ns.fill(d * d, 0.02), d, d, true);
        L.b_o.assign(d, 0.0f);
        L.norm2_g.assign(d, 1.0f);
        L.norm2_b.assign(d, 0.0f);
        L.w_up = pack_matrix(ns.fill(d * ff, 0.02), d, ff, true);
        L.b_up.assign(ff, 0.0f);
        L.w_down = pack_matrix(ns.fill(ff * d, 0.02), ff, d, true);
        L.b_down.assign(d, 0.0f);
    }
    w.normf_g.assign(d, 1.0f);
    w.normf_b.assign(d, 0.0f);

    // byte-level vocabulary: the 256 byte stand-ins (as vocab.json stores them), unreachable fillers, end-of-text
    tokenizer& t = m.tok;
    t.kind = TOK_BYTE_BPE;
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; b++) bs.push_back(b);
    for (int b = 0xa1; b <= 0xac; b++) bs.push_back(b);
    for (int b = 0xae; b <= 0xff; b++) bs.push_back(b);
    std::vector<uint32_t> cps(bs.begin(), bs.end());
    int extra = 0;
    for (int b = 0; b < 256; b++)
        if (std::find(bs.begin(), bs.end(), b) == bs.end()) bs.push_back(b), cps.push_back(256 + extra++);
    t.vocab.assign(V, "");
    auto utf8 = [](uint32_t cp) {
        std::string o;
        if (cp < 0x80) o += (char)cp;
        else o += (char)(0xc0 | (cp >> 6)), o += (char)(0x80 | (cp & 0x3f));
        return o;
    };
    // ids 0..255 in byte order, as GPT-2's own vocabulary starts
    for (int i = 0; i < 256; i++) t.vocab[bs[i]] = utf8(cps[i]);
    for (size_t i = 256; i + 1 < V; i++) t.vocab[i] = "<|filler_" + std::to_string(i) + "|>";
    t.vocab[V - 1] = "<|endoftext|>";
    for (size_t i = 0; i < V; i++) t.ids[t.vocab[i]] = (int)i;
    t.specials = {"<|endoftext|>"};
    t.eos_id = t.bos_id = (int)V - 1;
    return m;
}

} // namespace gb
