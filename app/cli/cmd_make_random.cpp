// glassbox-cli make-random: a random GPT-2, Llama or Marian model written to disk, for benchmarks and tests.
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "io/writers.h"
#include "model/model.h"
#include "model/quant.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

// The shape options of --arch gpt2, llama or marian, checked. Defaults: GPT-2 small, Llama at GPT-2 small's width,
// Marian as opus-mt-en-de (6 + 6 layers, d 512, 58101 pieces).
gb::model_config random_shape(const args& a, const std::string& arch) {
    const bool llama = arch == "llama", marian = arch == "marian";
    if (!llama)
        for (const char* k : {"kv-heads-n", "tied", "rope-theta"})
            if (a.has(k)) throw usage_error(std::string("--") + k + " goes with --arch llama (" + arch + " has one K/V head per "
                                            "head, a tied head and " + (marian ? "sinusoidal" : "learned") + " positions)");
    if (!marian && a.has("encoder-layers-n")) throw usage_error("--encoder-layers-n goes with --arch marian");
    gb::model_config c;
    c.n_layer = (int)parse_int(a.get("layers-n", marian ? "6" : "12"), "--layers-n", 1, 256);
    c.d_model = (int)parse_int(a.get("d-model", marian ? "512" : "768"), "--d-model", 1, 16384);
    c.n_head = (int)parse_int(a.get("heads-n", marian ? "8" : "12"), "--heads-n", 1, 256);
    c.vocab_size = (int)parse_int(a.get("vocab", marian ? "58101" : "50257"), "--vocab", marian ? 258 : 257, 1 << 20);
    c.n_ctx = (int)parse_int(a.get("ctx", marian ? "512" : "1024"), "--ctx", 1, 1 << 16);
    if (c.d_model % c.n_head) throw usage_error("--d-model must be a multiple of --heads-n");
    c.d_head = c.d_model / c.n_head;
    // grouped-query attention: query head h reads K/V head h / (heads / kv-heads)
    c.n_kv_head = (int)parse_int(a.get("kv-heads-n", std::to_string(c.n_head)), "--kv-heads-n", 1, c.n_head);
    if (c.n_head % c.n_kv_head) throw usage_error("--heads-n must be a multiple of --kv-heads-n");
    if (llama && c.d_head % 2)
        throw usage_error("--d-model / --heads-n = " + std::to_string(c.d_head) + " is odd; llama's RoPE rotates pairs");
    // 4 d for both: GPT-2's n_inner, and Llama-3.2-1B's 8192 at d 2048
    c.d_ff = (int)parse_int(a.get("ff", std::to_string(4 * c.d_model)), "--ff", 1, 1 << 20);
    c.tied_lm_head = parse_int(a.get("tied", "1"), "--tied", 0, 1) == 1;
    c.rope_theta = (float)parse_float(a.get("rope-theta", "500000"), "--rope-theta", 1, 1e9);
    return c;
}

void print_llama(const gb::model_config& c, int64_t params, const std::string& dtype, const std::string& out) {
    std::printf("wrote a random Llama (%d layers, d %d, %d heads, %d kv heads, ff %d, vocab %d, %s head, "
                "%lld parameters, %s) to %s\n", c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_ff, c.vocab_size,
                c.tied_lm_head ? "tied" : "untied", (long long)params, dtype.c_str(), out.c_str());
}

} // namespace

// A random model for benchmarks: GPT-2 built in memory and saved; Llama drawn while its file is written, since
// a Llama-3.2-1B shape (1.2 billion parameters) would take 5 GB as floats.
int cmd_make_random(const args& a) {
    const std::string arch = a.get("arch", "gpt2");
    if (arch != "gpt2" && arch != "llama" && arch != "marian")
        throw usage_error("--arch: expected gpt2, llama or marian, got '" + arch + "'");
    const bool llama = arch == "llama", marian = arch == "marian";
    const gb::model_config c = random_shape(a, arch);
    std::string dtype = a.get("dtype", "F32");
    uint64_t seed = (uint64_t)parse_int(a.get("seed", "1"), "--seed", 0, std::numeric_limits<long>::max());
    const std::string out = a.need("out");
    if (out.size() > 5 && out.compare(out.size() - 5, 5, ".gguf") == 0) {
        if (!llama) throw usage_error("--out " + out + ": GGUF files are written for --arch llama only");
        const std::pair<const char*, uint32_t> types[] = {{"F32", gb::GGML_F32}, {"F16", gb::GGML_F16}, {"BF16", gb::GGML_BF16},
                                                          {"Q8_0", gb::GGML_Q8_0}, {"Q4_K", gb::GGML_Q4_K}};
        int found = -1;
        for (int i = 0; i < 5; i++) found = dtype == types[i].first ? i : found;
        if (found < 0) throw usage_error("--dtype: expected F32, F16, BF16, Q8_0 or Q4_K for a .gguf, got '" + dtype + "'");
        print_llama(c, gb::write_random_llama_gguf(out, c, seed, types[found].second), dtype, out);
        return 0;
    }
    if (marian) {
        if (dtype != "F32") throw usage_error("--dtype: a random Marian is written in F32, got '" + dtype + "'");
        const int enc_layers = (int)parse_int(a.get("encoder-layers-n", std::to_string(c.n_layer)), "--encoder-layers-n", 1, 256);
        int64_t n = gb::write_random_marian_hf(out, c, enc_layers, seed);
        std::printf("wrote a random Marian (%d encoder + %d decoder layers, d %d, %d heads, ff %d, vocab %d, "
                    "%lld parameters) to %s\n", enc_layers, c.n_layer, c.d_model, c.n_head, c.d_ff, c.vocab_size,
                    (long long)n, out.c_str());
        return 0;
    }
    if (dtype != "F32" && dtype != "F16" && !(llama && dtype == "BF16"))
        throw usage_error("--dtype: expected F32 or F16" + std::string(llama ? " or BF16" : "") + " for a folder, got '" +
                          dtype + "'");
    if (llama) {
        print_llama(c, gb::write_random_llama_hf(out, c, seed, dtype), dtype, out);
        return 0;
    }
    gb::model m = gb::random_gpt2(c, seed);
    gb::save_hf_gpt2(out, m, dtype);
    std::printf("wrote a random GPT-2 (%d layers, d %d, %d heads, ff %d, vocab %d, %lld parameters) to %s\n", c.n_layer,
                c.d_model, c.n_head, c.d_ff, c.vocab_size, (long long)gb::count_params(m).total(), out.c_str());
    return 0;
}

} // namespace cli
