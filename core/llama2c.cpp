// llama2.c checkpoints: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
// negative vocab_size = separate classifier) then fp32 weights in llama2.c's order, each matrix [out][in].
// RoPE here rotates adjacent pairs (2i, 2i+1), as llama2.c does.
#include <cstring>
#include <filesystem>
#include <vector>

#include "error.h"
#include "llama2c.h"
#include "safetensors.h"

namespace gb {

// Reads the fp32 weights of a [rows][cols] matrix stored [out][in] and returns it as [in][out].
static std::vector<float> transposed(const float* src, int64_t out_dim, int64_t in_dim) {
    std::vector<float> w((size_t)(out_dim * in_dim));
    for (int64_t o = 0; o < out_dim; o++)
        for (int64_t i = 0; i < in_dim; i++) w[(size_t)(i * out_dim + o)] = src[o * in_dim + i];
    return w;
}

model load_llama2c(const std::string& path, const std::string& tokenizer_path, const progress_fn& progress) {
    auto file = map_file(path);
    const size_t size = file->size;
    if (size < 28) throw error(path + ": not a llama2.c checkpoint (" + std::to_string(size) + " bytes, header needs 28)");
    int32_t h[7];
    std::memcpy(h, file->data, 28);
    const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    const int32_t limits[7] = {65536, 1 << 20, 1000, 1024, 1024, 4000000, 1 << 20};
    for (int i = 0; i < 7; i++) {
        int32_t v = i == 5 ? std::abs(h[i]) : h[i];
        if (v <= 0 || v > limits[i] || h[i] == INT32_MIN)
            throw error(path + ": header " + names[i] + " = " + std::to_string(h[i]) + " is not a sane size (not a llama2.c checkpoint?)");
    }
    model m;
    m.format = "llama2c";
    model_config& c = m.config;
    c.arch = ARCH_LLAMA;
    c.model_type = "llama2.c";
    c.d_model = h[0];
    c.d_ff = h[1];
    c.n_layer = h[2];
    c.n_head = h[3];
    c.n_kv_head = h[4];
    c.vocab_size = std::abs(h[5]);
    c.n_ctx = h[6];
    bool shared = h[5] > 0;
    if (c.d_model % c.n_head) throw error(path + ": dim " + std::to_string(c.d_model) + " is not divisible by n_heads " + std::to_string(c.n_head));
    if (c.n_head % c.n_kv_head) throw error(path + ": n_heads " + std::to_string(c.n_head) + " is not a multiple of n_kv_heads " + std::to_string(c.n_kv_head));
    c.d_head = c.d_model / c.n_head;
    if (c.d_head % 2) throw error(path + ": head size " + std::to_string(c.d_head) + " is odd (RoPE needs pairs)");
    c.norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.rope = ROPE_ADJACENT;
    c.qkv_bias = c.mlp_bias = false;
    c.tied_lm_head = shared;

    // expected size, in floats, computed in 64 bits from the checked header before anything is read
    const int64_t d = c.d_model, ff = c.d_ff, L = c.n_layer, V = c.vocab_size, kv = (int64_t)c.n_kv_head * c.d_head;
    const int64_t floats = V * d + L * d + L * d * d + 2 * L * d * kv + L * d * d + L * d + 3 * L * d * ff + d +
                           (int64_t)c.n_ctx * c.d_head + (shared ? 0 : V * d);
    if ((int64_t)size != 28 + floats * 4)
        throw error(path + ": " + std::to_string(size) + " bytes, but the header (dim " + std::to_string(d) + ", " +
                    std::to_string(L) + " layers, vocab " + std::to_string(V) + ") needs " + std::to_string(28 + floats * 4) +
                    (((int64_t)size < 28 + floats * 4) ? ": truncated file" : ": wrong header or not a llama2.c file"));
    const float* p = (const float*)(file->data + 28); // 28 is a multiple of 4; mmap is page-aligned
    auto take = [&](int64_t n) {
        const float* q = p;
        p += n;
        return q;
    };
    model_weights& w = m.weights;
    const float* emb = take(V * d);
    w.tok_emb = table_from_f32(std::vector<float>(emb, emb + V * d), V, d);
    const float* rms_att = take(L * d);
    const float* wq = take(L * d * d);
    const float* wk = take(L * kv * d);
    const float* wv = take(L * kv * d);
    const float* wo = take(L * d * d);
    const float* rms_ffn = take(L * d);
    const float* w1 = take(L * ff * d);
    const float* w2 = take(L * d * ff);
    const float* w3 = take(L * ff * d);
    const float* rms_final = take(d);
    take((int64_t)c.n_ctx * c.d_head); // precomputed RoPE tables (freq_cis real + imag): recomputed instead
    w.layers.resize(L);
    const int64_t qkv = d + 2 * kv;
    for (int l = 0; l < L; l++) {
        layer_weights& lw = w.layers[l];
        lw.norm1_g.assign(rms_att + l * d, rms_att + (l + 1) * d);
        lw.norm2_g.assign(rms_ffn + l * d, rms_ffn + (l + 1) * d);
        // fused [d][q | k | v] in [in][out] layout
        std::vector<float> q = transposed(wq + l * d * d, d, d), k = transposed(wk + l * kv * d, kv, d),
                           v = transposed(wv + l * kv * d, kv, d);
        std::vector<float> fused((size_t)(d * qkv));
        for (int64_t i = 0; i < d; i++) {
            std::copy(&q[i * d], &q[i * d] + d, &fused[i * qkv]);
            std::copy(&k[i * kv], &k[i * kv] + kv, &fused[i * qkv + d]);
            std::copy(&v[i * kv], &v[i * kv] + kv, &fused[i * qkv + d + kv]);
        }
        lw.w_qkv = pack_matrix(fused, d, qkv);
        lw.w_o = pack_matrix(transposed(wo + l * d * d, d, d), d, d);
        lw.w_gate = pack_matrix(transposed(w1 + l * ff * d, ff, d), d, ff); // llama2.c: hb = silu(w1 x) * (w3 x)
        lw.w_down = pack_matrix(transposed(w2 + l * d * ff, d, ff), ff, d);
        lw.w_up = pack_matrix(transposed(w3 + l * ff * d, ff, d), d, ff);
        if (progress) progress(0.05f + 0.85f * (l + 1) / L, "layer " + std::to_string(l));
    }
    w.normf_g.assign(rms_final, rms_final + d);
    if (!shared) {
        const float* cls = take(V * d);
        w.lm_head = table_from_f32(std::vector<float>(cls, cls + V * d), V, d);
    }

    std::string tok_path = tokenizer_path;
    if (tok_path.empty()) {
        namespace fs = std::filesystem;
        fs::path dir = fs::path(path).parent_path();
        for (const std::string& name : std::vector<std::string>{"tokenizer.bin", "tok" + std::to_string(V) + ".bin"}) {
            std::error_code ec;
            if (fs::exists(dir / name, ec)) {
                tok_path = (dir / name).string();
                break;
            }
        }
        if (tok_path.empty())
            throw error(path + ": no tokenizer: pass --tokenizer tokenizer.bin (looked for tokenizer.bin and tok" +
                        std::to_string(V) + ".bin next to the model)");
    }
    m.tok = load_llama2c_tokenizer(tok_path, c.vocab_size);
    return m;
}

} // namespace gb
