// Parity with llama.cpp, an independent implementation of our decoder families that reads GGUF: for every family
// make-random writes (core/io/gguf_writer.h) and every stored type, the next-token distribution at every position
// of a prompt, ours (core's loader and forward) against llama.cpp's (node-llama-cpp 3.21.1, CPU, F32 KV cache,
// flash attention off; tests/llama_cpp/eval.mjs), and the greedy continuations.
//
// - F32 files: ours and llama.cpp's on the same file, within 1e-5 in probability.
// - every other type: ours on the stored file against llama.cpp's run of the file's own F32 dequantisation (the
//   same weights: llama.cpp's CPU kernels also round the activations to 8 bits or f16 before a quantised product,
//   which we do not), within 1e-5; llama.cpp's run of the stored file itself is reported beside it and must load.
// - greedy: llama.cpp's continuation of the prompt and ours (gb::generate) are the same tokens, or part where
//   llama.cpp's two candidates are within the tolerance of each other (a tie no implementation can be held to).
//
// Each family writes its rows to build/llama_cpp_parity/FAMILY.json; tools/parity_doc.py makes docs/parity.md.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/loader.h"
#include "model/arch.h"
#include "model/quant.h"
#include "run/forward.h"
#include "run/generate.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

const std::string llama_dir = std::string(GLASSBOX_SOURCE_DIR) + "/tests/llama_cpp";
constexpr double tolerance = 1e-5; // in probability
constexpr int prompt_len = 20, n_continue = 8;

// The tiny shape every family is written in: 2 layers, d 256 (K-quant blocks of 256 tile every row), 4 heads of
// 64 (2 K/V heads where the family has grouped-query attention), ff 512, 4 experts of 256 (top 2), vocabulary 300.
// Weights N(0, 0.08): distributions clearly not uniform, and float32's rounding amplified little (so the
// gaps measure the semantics); gains 1 + N(0, 0.1), biases N(0, 0.1).
gb::model_config family_shape(const std::string& family) {
    gb::model_config s;
    s.n_layer = 2, s.d_model = 256, s.n_head = 4, s.d_ff = 512, s.vocab_size = 300, s.n_ctx = 64;
    s.n_kv_head = family == "gpt2" || family == "gpt_neox" || family == "olmoe" ? 4 : 2;
    s.rope_theta = family.rfind("qwen", 0) == 0 ? 1000000.0f : 10000.0f;
    s.norm_eps = family == "gpt2" || family == "gpt_neox" ? 1e-5f : 1e-6f;
    if (family == "gpt_neox") s.rope_dims = 16; // partial rotary (Pythia's 0.25)
    s.n_expert = 4, s.n_expert_used = 2, s.d_ff_expert = 256, s.d_ff_shared = 256;
    if (family == "gemma2") { // caps small enough to bite, a window shorter than prompt + continuation
        s.attn_softcap = 10, s.final_softcap = 8, s.sliding_window = 8;
    }
    gb::model_config c = gb::random_gguf_config(family, s);
    return c;
}

gb::random_gguf_options options(uint32_t type, bool dequantised) {
    gb::random_gguf_options o;
    o.type = type, o.dequantised = dequantised, o.std = 0.08, o.aux_std = 0.1, o.seed = 7;
    return o;
}

// eval.mjs on the files: its parsed output, null when node failed
nlohmann::json run_llama_cpp(const std::string& dir, const std::vector<int>& prompt, const std::vector<std::string>& files) {
    std::string ids, list;
    for (int t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    for (const std::string& f : files) list += " '" + f + "'";
    const std::string out = dir + "/llama_cpp.json";
    command_result r = run_command("cd '" + llama_dir + "' && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node eval.mjs '" + out +
                                   "' --tokens " + ids + " --continue " + std::to_string(n_continue) + list);
    if (r.code != 0) {
        std::fprintf(stderr, "node eval.mjs failed (%d): %s\n", r.code, r.err.substr(0, 2000).c_str());
        return nullptr;
    }
    std::ifstream f(out);
    return nlohmann::json::parse(f);
}

struct our_run {
    std::vector<std::vector<double>> probs; // [T + N][V] next-token distributions along prompt + llama.cpp's tokens
    std::vector<int> greedy;                // our own greedy continuation of the prompt, its end of text included
    bool hit_eos = false;                   // (gb::generate stops there; llama.cpp's evaluation goes on)
};

our_run run_ours(const std::string& path, const std::vector<int>& prompt, const std::vector<int>& llama_continuation) {
    our_run o;
    gb::model m = gb::load_model(path);
    std::vector<int> all = prompt;
    all.insert(all.end(), llama_continuation.begin(), llama_continuation.end());
    gb::record rec;
    gb::forward_options opt;
    opt.all_logits = true;
    gb::run_forward(rec, m, all, {}, opt);
    const int V = m.config.vocab_size;
    for (size_t t = 0; t < all.size(); t++) {
        const float* z = &rec.logits[t * V];
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) mx = std::max(mx, (double)z[v]);
        std::vector<double> p(V);
        for (int v = 0; v < V; v++) sum += p[v] = std::exp((double)z[v] - mx);
        for (double& x : p) x /= sum;
        o.probs.push_back(std::move(p));
    }
    const gb::generation g = gb::generate(m, prompt, n_continue, gb::sampling{});
    o.greedy = g.ids, o.hit_eos = g.hit_eos;
    if (g.hit_eos) o.greedy.push_back(m.tok.eos_id);
    return o;
}

// max |p - q| over every token at the first n positions (all by default)
double max_gap(const std::vector<std::vector<double>>& ours, const nlohmann::json& theirs, size_t n = SIZE_MAX) {
    double g = 0;
    for (size_t t = 0; t < std::min(n, ours.size()); t++)
        for (size_t v = 0; v < ours[t].size(); v++) g = std::max(g, std::fabs(ours[t][v] - theirs[t][v].get<double>()));
    return g;
}

// "yes" (to the end of text where ours stops there), "tie at k" (llama.cpp's two candidates within tol of each
// other), or "no at k"
std::string greedy_verdict(const our_run& o, const std::vector<int>& theirs, const nlohmann::json& probs, double tol) {
    const std::vector<int>& ours = o.greedy;
    for (size_t k = 0; k < theirs.size(); k++) {
        if (k < ours.size() && ours[k] == theirs[k]) {
            if (o.hit_eos && k + 1 == ours.size()) return "yes, to EOS";
            continue;
        }
        if (k >= ours.size()) return "no at " + std::to_string(k) + " (ours stopped)";
        const nlohmann::json& p = probs[prompt_len - 1 + k]; // the distribution step k drew from
        const double gap = std::fabs(p[theirs[k]].get<double>() - p[ours[k]].get<double>());
        return (gap <= tol ? "tie at " : "no at ") + std::to_string(k);
    }
    return "yes";
}

// Our block formats against ggml's own: llama.cpp's libggml-base (the same build node-llama-cpp runs) dequantises
// blocks of every type we read, bytes drawn at random and bytes our quantize() wrote, and ours gives the same
// floats bit for bit (NaN where it gives NaN).
TEST(GgmlBlocks, OurDequantisationIsGgmlsBitForBit) {
    std::string lib;
    const std::string bins = llama_dir + "/node_modules/@node-llama-cpp/linux-x64/bins";
    if (std::filesystem::exists(bins))
        for (const auto& e : std::filesystem::recursive_directory_iterator(bins))
            if (e.path().filename() == "libggml-base.so") lib = e.path().string();
    ASSERT_FALSE(lib.empty()) << "no libggml-base.so under " << bins << ": run tools/setup.sh --tests";
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    using row_fn = void (*)(const void*, float*, int64_t);
    const std::map<uint32_t, const char*> fns = {
        {gb::GGML_F16, "ggml_fp16_to_fp32_row"}, {gb::GGML_BF16, "ggml_bf16_to_fp32_row"},
        {gb::GGML_Q8_0, "dequantize_row_q8_0"},  {gb::GGML_Q4_0, "dequantize_row_q4_0"},
        {gb::GGML_Q4_1, "dequantize_row_q4_1"},  {gb::GGML_Q5_0, "dequantize_row_q5_0"},
        {gb::GGML_Q5_1, "dequantize_row_q5_1"},  {gb::GGML_Q4_K, "dequantize_row_q4_K"},
        {gb::GGML_Q5_K, "dequantize_row_q5_K"},  {gb::GGML_Q6_K, "dequantize_row_q6_K"}};
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 0.05f);
    for (uint32_t type : gb::ggml_types()) {
        if (type == gb::GGML_F32) continue;
        SCOPED_TRACE(gb::ggml_type_name(type));
        ASSERT_TRUE(fns.count(type)) << "no ggml function named for this type";
        const row_fn theirs = (row_fn)dlsym(h, fns.at(type));
        ASSERT_NE(theirs, nullptr) << fns.at(type);
        int64_t values, bytes;
        ASSERT_TRUE(gb::ggml_block(type, values, bytes));
        const int64_t n = 16 * std::max<int64_t>(values, 32);
        std::vector<uint8_t> random_bytes(gb::ggml_bytes(type, n)), written(random_bytes.size());
        for (uint8_t& b : random_bytes) b = (uint8_t)rng();
        std::vector<float> x(n);
        for (float& v : x) v = nd(rng);
        gb::quantize(written.data(), x.data(), type, n);
        for (const std::vector<uint8_t>* src : {&random_bytes, &written}) {
            std::vector<float> a(n), b(n);
            gb::dequantize(a.data(), src->data(), type, n);
            theirs(src->data(), b.data(), n);
            for (int64_t i = 0; i < n; i++) {
                if (std::isnan(a[i]) && std::isnan(b[i])) continue;
                ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0) << (src == &written ? "quantize()'s bytes" : "random bytes")
                                                           << ", value " << i << ": ours " << a[i] << ", ggml " << b[i];
            }
        }
    }
    dlclose(h);
}

// llama.cpp's CPU GELU rounds its input to f16 and reads the result from a table of f16 (ggml_table_gelu_f16), a
// relative error near 5e-4 where ours computes in f32; for GPT-NeoX it takes the tanh approximation where the HF
// model (and we) take erf. Families with a GELU MLP are held to approx_tolerance, and to the tolerance with their
// MLPs' down projections zeroed (every other part of them, the MLP's biases too).
constexpr double approx_tolerance = 1e-3;
bool gelu_mlp(const gb::model_config& c) {
    const gb::mlp_kind k = gb::arch_table(c.arch).mlp;
    return k == gb::MLP_GELU || k == gb::MLP_GELU_ERF || k == gb::MLP_GEGLU;
}

// The stored F32 bytes of tensor `name` set to 0 (the file's other bytes unchanged)
void zero_tensor(const std::string& path, const std::string& name) {
    size_t offset, bytes;
    {
        const gb::gguf_file g = gb::open_gguf(path);
        const gb::gguf_tensor& t = g.tensors.at(name);
        offset = (size_t)(t.data - g.file->data), bytes = t.nbytes;
    }
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((std::streamoff)offset);
    const std::vector<char> zeros(bytes, 0);
    f.write(zeros.data(), (std::streamsize)zeros.size());
    ASSERT_TRUE(f.good()) << path;
}

// The metadata keys of the family's file that llama.cpp reads with a default when they are missing: RoPE's base,
// rotated dimensions and head sizes; Gemma 2's window and caps; Phi-3's window (GPT-NeoX's parallel blocks it
// requires)
std::vector<std::string> defaulted_keys(const std::string& f32_file, const gb::model_config& c) {
    const std::string A = gb::open_gguf(f32_file).meta.at("general.architecture").s;
    std::vector<std::string> k;
    if (gb::arch_table(c.arch).pos == gb::POS_ROPE)
        for (const char* key : {".rope.freq_base", ".rope.dimension_count", ".attention.key_length", ".attention.value_length"})
            k.push_back(A + key);
    if (c.model_type == "gemma2")
        for (const char* key : {".attention.sliding_window", ".attn_logit_softcapping", ".final_logit_softcapping"})
            k.push_back(A + key);
    if (c.model_type == "phi3") k.push_back(A + ".attention.sliding_window");
    return k;
}

// One comparison: ours on `stored` against llama.cpp on `reference` (its F32 dequantisation; the same file for F32)
struct row {
    std::string label; // "Q4_K", "F32, MLP off"
    uint32_t type;
    std::string stored, reference;
    double tol;
};
struct row_result {
    double gap = 0, top = 0;  // max |dp|; the mean top-1 probability (how far from uniform the distributions are)
    std::string greedy = "yes";
    double stored_gap = 0;    // llama.cpp on the stored file itself, over the positions where its own greedy
    size_t stored_same = 0;   // continuation still agrees with the reference's (stored_same tokens of it)
};

row_result compare(const row& r, const std::vector<int>& prompt, const nlohmann::json& theirs, const nlohmann::json& stored) {
    row_result o;
    const std::vector<int> cont = theirs["continuation"].get<std::vector<int>>();
    EXPECT_EQ(cont.size(), (size_t)n_continue);
    for_each_matmul([&] {
        our_run ours = run_ours(r.stored, prompt, cont);
        ASSERT_EQ(ours.probs.size(), theirs["probs"].size());
        o.gap = std::max(o.gap, max_gap(ours.probs, theirs["probs"]));
        const std::string v = greedy_verdict(ours, cont, theirs["probs"], r.tol);
        if (v.rfind("yes", 0) != 0 || o.greedy == "yes") o.greedy = v;
        o.top = 0;
        for (const std::vector<double>& p : ours.probs) o.top += *std::max_element(p.begin(), p.end()) / ours.probs.size();
        if (r.stored == r.reference || !stored["ok"].get<bool>()) return;
        const std::vector<int> own = stored["continuation"].get<std::vector<int>>();
        size_t same = 0;
        while (same < own.size() && same < cont.size() && own[same] == cont[same]) same++;
        o.stored_gap = std::max(o.stored_gap, max_gap(ours.probs, stored["probs"], prompt_len + same));
        o.stored_same = same;
    });
    return o;
}

class LlamaCpp : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCpp, EveryStoredTypeMatches) {
    const std::string family = GetParam();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(std::filesystem::exists(llama_dir + "/node_modules/node-llama-cpp"))
        << "node-llama-cpp is not installed in " << llama_dir << ": run tools/setup.sh --tests";
    const std::string dir = test_temp_dir("llama_cpp_" + family);
    const gb::model_config c = family_shape(family);
    const std::vector<int> prompt = random_tokens(prompt_len, c.vocab_size - 1, 11);
    const bool gelu = gelu_mlp(c);

    // the files: per type the stored file and (but for F32) its F32 dequantisation; GELU families also F32
    // without their MLPs' down projections
    std::vector<row> rows;
    std::vector<std::string> files;
    for (uint32_t type : gb::ggml_types()) {
        const std::string name = dir + "/" + gb::ggml_type_name(type);
        row r{gb::ggml_type_name(type), type, name + ".gguf", name + ".gguf", gelu ? approx_tolerance : tolerance};
        gb::write_random_gguf(r.stored, c, options(type, false));
        files.push_back(r.stored);
        if (type != gb::GGML_F32) {
            r.reference = name + "-dequantised.gguf";
            gb::write_random_gguf(r.reference, c, options(type, true));
            files.push_back(r.reference);
        }
        rows.push_back(r);
    }
    // the keys llama.cpp reads with a default left out: both readers must fill in the same
    const std::vector<std::string> omit = defaulted_keys(rows[0].stored, c);
    if (!omit.empty()) {
        row r{"F32, defaults", gb::GGML_F32, dir + "/defaults.gguf", dir + "/defaults.gguf", rows[0].tol};
        gb::random_gguf_options o = options(gb::GGML_F32, false);
        o.omit = omit;
        gb::write_random_gguf(r.stored, c, o);
        files.push_back(r.stored);
        rows.push_back(r);
    }
    if (gelu) {
        row r{"F32, MLP off", gb::GGML_F32, dir + "/no-mlp.gguf", dir + "/no-mlp.gguf", tolerance};
        gb::write_random_gguf(r.stored, c, options(gb::GGML_F32, false));
        for (int l = 0; l < c.n_layer; l++) zero_tensor(r.stored, gb::tensor_name(gb::arch_table(c.arch), true, gb::T_DOWN, l));
        files.push_back(r.stored);
        rows.push_back(r);
    }
    const nlohmann::json ref = run_llama_cpp(dir, prompt, files);
    ASSERT_FALSE(ref.is_null()) << "could not run node " << llama_dir << "/eval.mjs: run tools/setup.sh --tests";
    std::map<std::string, nlohmann::json> by_path;
    for (const nlohmann::json& r : ref["results"]) by_path[r["path"].get<std::string>()] = r;
    const nlohmann::json& f32 = by_path[rows[0].stored];
    if (!f32["ok"].get<bool>() && f32["error"].get<std::string>().find("unknown model architecture") != std::string::npos)
        GTEST_SKIP() << "llama.cpp " << ref["llama_cpp"]["release"] << " has no " << family << " architecture: "
                     << f32["error"].get<std::string>();

    nlohmann::json out_rows = nlohmann::json::array();
    std::printf("%-10s %-13s %-10s %-10s %-6s %s\n", "family", "type", "max |dp|", "greedy", "top-1",
                "llama.cpp on the stored file: max |dp|, greedy");
    for (const row& r : rows) {
        SCOPED_TRACE(family + " " + r.label);
        const nlohmann::json& theirs = by_path[r.reference];
        const nlohmann::json& stored = by_path[r.stored];
        ASSERT_TRUE(theirs["ok"].get<bool>()) << "llama.cpp refused " << r.reference << ": " << theirs["error"];
        ASSERT_TRUE(stored["ok"].get<bool>()) << "llama.cpp refused " << r.stored << ": " << stored["error"];
        const row_result o = compare(r, prompt, theirs, stored);
        EXPECT_LE(o.gap, r.tol) << "ours against llama.cpp";
        EXPECT_EQ(o.greedy.rfind("no", 0), std::string::npos) << "greedy continuation: " << o.greedy;
        char on_stored[80] = "(the same file)";
        if (r.stored != r.reference)
            std::snprintf(on_stored, sizeof on_stored, "%.3g, %zu of %d", o.stored_gap, o.stored_same, n_continue);
        std::printf("%-10s %-13s %-10.3g %-10s %-6.2f %s\n", family.c_str(), r.label.c_str(), o.gap, o.greedy.c_str(), o.top,
                    on_stored);
        out_rows.push_back({{"type", r.label}, {"max_dp", o.gap}, {"tolerance", r.tol}, {"greedy", o.greedy}, {"top1", o.top},
                            {"stored", r.stored == r.reference ? nlohmann::json() : nlohmann::json(on_stored)}});
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s: %zu files through llama.cpp and ours in %.1f s\n", family.c_str(), files.size(), seconds);
    const std::string rows_dir = std::string(GLASSBOX_BINARY_DIR) + "/llama_cpp_parity";
    std::filesystem::create_directories(rows_dir);
    std::ofstream(rows_dir + "/" + family + ".json")
        << nlohmann::json{{"family", family}, {"llama_cpp", ref["llama_cpp"]}, {"rows", out_rows}, {"seconds", seconds}}.dump(1)
        << "\n";
    std::filesystem::remove_all(dir); // tens of MB of models
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaCpp, ::testing::ValuesIn(gb::random_gguf_families()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

} // namespace
