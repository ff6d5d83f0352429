// llama2.c checkpoints: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
// negative vocab_size = separate classifier) then fp32 weights in llama2.c's order, each matrix [out][in].
// RoPE here rotates adjacent pairs (2i, 2i+1), as llama2.c does.
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "io/llama2c.h"

#include "io/load_weights.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "kernels/gemm.h"
#include "model/arch.h"
#include "util/error.h"

namespace gb {

// The file's fp32 spans under the architecture table's HF Llama names, so that load_weights reads them as it
// reads any checkpoint. Matrices are [out][in] (nn.Linear's layout).
struct llama2c_reader : tensor_reader {
    std::shared_ptr<mapped_file> file;
    std::map<std::string, std::pair<const float*, int64_t>> spans; // name -> (first float, count)
    const std::string& path() const override { return file->path; }
    bool has(const std::string& name) const override { return spans.count(name) > 0; }
    const float* at(const std::string& name, int64_t n) const {
        auto it = spans.find(name);
        if (it == spans.end()) throw error(path() + ": llama2.c has no tensor " + name);
        if (it->second.second != n)
            throw error("internal: " + name + " holds " + std::to_string(it->second.second) + " floats, not " + std::to_string(n));
        return it->second.first;
    }
    std::vector<float> floats(const std::string& name, int64_t n) const override {
        const float* p = at(name, n);
        return std::vector<float>(p, p + n);
    }
    std::vector<float> floats2(const std::string& name, int64_t rows, int64_t cols) const override { return floats(name, rows * cols); }
    matrix_part part(const std::string& name, int64_t in, int64_t out) const override {
        return {GGML_F32, (const uint8_t*)at(name, in * out), out, true};
    }
    matrix_part expert_part(const std::string& name, int64_t, int64_t, int64_t, int) const override {
        throw error("internal: llama2.c has no experts (" + name + ")");
    }
    row_table table(const std::string& name, int64_t rows, int64_t cols) const override {
        return table_view(GGML_F32, (const uint8_t*)at(name, rows * cols), rows, cols, file);
    }
    weight_matrix matrix(const std::vector<matrix_part>& parts, int64_t in) const override { return pack_parts(parts, in); }
};

model load_llama2c(const std::string& path, const std::string& tokenizer_path, const progress_fn& progress) {
    std::shared_ptr<mapped_file> file = map_file(path); // shared: the embedding table reads it in place
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
    llama2c_reader r;
    r.file = file;
    const arch_info& arch = arch_table(ARCH_LLAMA);
    // llama2.c stores each kind for all layers together, in this order
    auto take = [&](tensor_id t, int64_t n_per_layer, bool per_layer) {
        for (int64_t l = 0; l < (per_layer ? L : 1); l++) {
            r.spans[tensor_name(arch, false, t, (int)l)] = {p, n_per_layer};
            p += n_per_layer;
        }
    };
    take(T_TOK_EMB, V * d, false);
    take(T_ATTN_NORM, d, true);
    take(T_Q, d * d, true);
    take(T_K, kv * d, true);
    take(T_V, kv * d, true);
    take(T_O, d * d, true);
    take(T_FFN_NORM, d, true);
    take(T_GATE, ff * d, true); // w1: hb = silu(w1 x) * (w3 x)
    take(T_DOWN, d * ff, true); // w2
    take(T_UP, ff * d, true);   // w3
    take(T_NORM_F, d, false);
    p += (int64_t)c.n_ctx * c.d_head; // precomputed RoPE tables (freq_cis real + imag): recomputed instead
    if (!shared) take(T_LM_HEAD, V * d, false);
    load_weights(m.weights, c, r, progress);

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
