// glassbox-cli make-random: a random model written to disk, for benchmarks and tests: a GPT-2, Llama or Marian
// folder, or a GGUF file of any decoder family llama.cpp runs.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "io/gguf_writer.h"
#include "io/transcoders.h"
#include "io/writers.h"
#include "model/arch.h"
#include "model/kind.h"
#include "model/model.h"
#include "model/quant.h"
#include "util/text.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

std::string gguf_families() {
    std::string s;
    for (const std::string& f : gb::random_gguf_families()) s += (s.empty() ? "" : ", ") + f;
    return s;
}

// The options only some architectures take, refused for the others with the reason
void refuse_options(const args& a, const std::string& arch, bool gguf) {
    const bool llama = arch == "llama", marian = arch == "marian";
    if (!gguf) {
        for (const char* k : {"kv-heads-n", "tied", "rope-theta"})
            if (!llama && a.has(k))
                throw usage_error(std::string("--") + k + " goes with --arch llama (" + arch + " has one K/V head per "
                                  "head, a tied head and " + (marian ? "sinusoidal" : "learned") + " positions)");
        for (const char* k : {"experts-n", "experts-used-n", "std", "dequantised"})
            if (a.has(k)) throw usage_error(std::string("--") + k + " goes with --out FILE.gguf");
    } else {
        gb::model_config family;
        family.arch = gb::arch_from_hf(arch, "--arch");
        const bool fixed_heads = arch == "gpt2" || arch == "gpt_neox", moe = gb::kind_of(family) == gb::KIND_MOE;
        if (fixed_heads && a.has("kv-heads-n")) throw usage_error("--kv-heads-n: " + arch + " has one K/V head per head");
        if (arch == "gpt2" && a.has("rope-theta")) throw usage_error("--rope-theta: gpt2 has learned positions");
        // a family whose head llama.cpp reads one way only comes back with it whatever --tied says
        gb::model_config s;
        s.n_layer = s.n_head = s.n_ctx = 1, s.d_model = 64, s.vocab_size = 257;
        s.tied_lm_head = true;
        const bool when_tied = gb::random_gguf_config(arch, s).tied_lm_head;
        s.tied_lm_head = false;
        if (a.has("tied") && when_tied == gb::random_gguf_config(arch, s).tied_lm_head)
            throw usage_error("--tied: llama.cpp reads " + arch + "'s head " +
                              (when_tied ? "as the embedding (tied)" : "as its own matrix (untied)"));
        if (!moe)
            for (const char* k : {"experts-n", "experts-used-n"})
                if (a.has(k)) throw usage_error(std::string("--") + k + " goes with the MoE families (mixtral, qwen2_moe, "
                                                "qwen3_moe, olmoe)");
    }
    if (!marian && a.has("encoder-layers-n")) throw usage_error("--encoder-layers-n goes with --arch marian");
}

// The shape options, checked. Defaults: GPT-2 small, Llama (and the GGUF families) at GPT-2 small's width,
// Marian as opus-mt-en-de (6 + 6 layers, d 512, 58101 pieces).
gb::model_config random_shape(const args& a, const std::string& arch, bool gguf) {
    refuse_options(a, arch, gguf);
    const bool marian = arch == "marian", rope = arch != "gpt2" && arch != "marian";
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
    if (rope && c.d_head % 2)
        throw usage_error("--d-model / --heads-n = " + std::to_string(c.d_head) + " is odd; " + arch + "'s RoPE rotates pairs");
    // 4 d for both: GPT-2's n_inner, and Llama-3.2-1B's 8192 at d 2048
    c.d_ff = (int)parse_int(a.get("ff", std::to_string(4 * c.d_model)), "--ff", 1, 1 << 20);
    c.tied_lm_head = parse_int(a.get("tied", "1"), "--tied", 0, 1) == 1;
    c.rope_theta = (float)parse_float(a.get("rope-theta", "500000"), "--rope-theta", 1, 1e9);
    c.n_expert = (int)parse_int(a.get("experts-n", "4"), "--experts-n", 1, 1024);
    c.n_expert_used = (int)parse_int(a.get("experts-used-n", std::to_string(std::min(2, c.n_expert))), "--experts-used-n", 1,
                                     c.n_expert);
    return c;
}

void print_llama(const gb::model_config& c, int64_t params, const std::string& dtype, const std::string& out) {
    std::printf("wrote a random Llama (%d layers, d %d, %d heads, %d kv heads, ff %d, vocab %d, %s head, "
                "%lld parameters, %s) to %s\n", c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_ff, c.vocab_size,
                c.tied_lm_head ? "tied" : "untied", (long long)params, dtype.c_str(), out.c_str());
}

// --out FILE.gguf: any family of the GGUF writer, any stored type we read
int make_gguf(const args& a, const std::string& arch, const std::string& dtype, uint64_t seed, const std::string& out) {
    const std::vector<std::string>& families = gb::random_gguf_families();
    if (std::find(families.begin(), families.end(), arch) == families.end())
        throw usage_error("--arch: a .gguf is written for " + gguf_families() + "; got '" + arch + "'");
    const std::vector<uint32_t>& types = gb::ggml_types();
    auto it = std::find_if(types.begin(), types.end(), [&](uint32_t t) { return dtype == gb::ggml_type_name(t); });
    if (it == types.end())
        throw usage_error("--dtype: expected " + std::string(gb::ggml_supported_names()) + " for a .gguf, got '" + dtype + "'");
    const gb::model_config c = gb::random_gguf_config(arch, random_shape(a, arch, true));
    gb::random_gguf_options o;
    o.type = *it;
    o.seed = seed;
    o.std = parse_float(a.get("std", "0.02"), "--std", 0, 100);
    o.dequantised = a.has("dequantised");
    const int64_t n = gb::write_random_gguf(out, c, o);
    std::printf("wrote a random %s GGUF (%d layers, d %d, %d heads, %d kv heads, ff %d, vocab %d, %s head", arch.c_str(),
                c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_ff, c.vocab_size, c.tied_lm_head ? "tied" : "untied");
    if (gb::kind_of(c) == gb::KIND_MOE) std::printf(", %d experts, top %d", c.n_expert, c.n_expert_used);
    std::printf(", %lld parameters, %s%s) to %s\n", (long long)n, dtype.c_str(), o.dequantised ? " as F32" : "", out.c_str());
    return 0;
}

// --transcoders: a random per-layer transcoder set for a model of the shape --layers-n x --d-model
int make_transcoders(const args& a, const std::string& dtype, uint64_t seed, const std::string& out) {
    for (const char* k : {"arch", "heads-n", "kv-heads-n", "ff", "vocab", "ctx", "tied", "rope-theta", "std", "dequantised",
                          "experts-n", "experts-used-n", "encoder-layers-n"})
        if (a.has(k)) throw usage_error(std::string("--") + k + " does not go with --transcoders");
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
        throw usage_error("--dtype: expected F32, F16 or BF16 for transcoders, got '" + dtype + "'");
    const int L = (int)parse_int(a.get("layers-n", "12"), "--layers-n", 1, 256);
    const int d = (int)parse_int(a.get("d-model", "768"), "--d-model", 1, 16384);
    const int n = (int)parse_int(a.get("features", "24576"), "--features", 1, 1 << 20);
    const float bias = (float)parse_float(a.get("bias", "-3"), "--bias", -100, 100);
    gb::write_random_transcoders(out, L, d, n, bias, a.has("skip"), dtype, seed);
    std::printf("wrote a random transcoder set (%d layers, d %d, %d features a layer, b_enc about %g%s, %s) to %s\n", L,
                d, n, bias, a.has("skip") ? ", a skip" : "", dtype.c_str(), out.c_str());
    return 0;
}

} // namespace

// A random model for benchmarks: GPT-2 built in memory and saved; Llama, Marian and the GGUF families drawn while
// their file is written, since a Llama-3.2-1B shape (1.2 billion parameters) would take 5 GB as floats.
int cmd_make_random(const args& a) {
    const std::string arch = a.get("arch", "gpt2");
    const std::string dtype = a.get("dtype", "F32");
    const uint64_t seed = (uint64_t)parse_int(a.get("seed", "1"), "--seed", 0, std::numeric_limits<long>::max());
    const std::string out = a.need("out");
    if (a.has("transcoders")) return make_transcoders(a, dtype, seed, out);
    for (const char* k : {"features", "bias", "skip"})
        if (a.has(k)) throw usage_error(std::string("--") + k + " goes with --transcoders");
    if (gb::ends_with(out, ".gguf")) return make_gguf(a, arch, dtype, seed, out);
    if (arch != "gpt2" && arch != "llama" && arch != "marian")
        throw usage_error("--arch: expected gpt2, llama or marian for a folder (a .gguf: " + gguf_families() + "), got '" +
                          arch + "'");
    const bool llama = arch == "llama", marian = arch == "marian";
    const gb::model_config c = random_shape(a, arch, false);
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
