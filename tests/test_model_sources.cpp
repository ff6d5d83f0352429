// Models already on this machine (core/io/model_sources.h): each layout built in a temporary HOME with tiny
// models the test writes (a Hugging Face cache with real relative symlinks, an Ollama manifest and its
// extensionless blob, LM Studio, llama.cpp's cache, a recent llama2.c file), described without loading weights,
// and names ("hf:...", "ollama:...") resolved from them and opened with the same numbers as the paths.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hub_server.h"
#include "io/gguf_writer.h"
#include "io/loader.h"
#include "io/model_sources.h"
#include "run/forward.h"
#include "test_util.h"
#include "util/error.h"
#include "tiny_llama.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

const std::string kSnapshotCommit = "fedcba9876543210fedcba9876543210fedcba98";

// Puts the files of src into the hub cache as huggingface_hub lays them out: blobs/<etag> (sha256 for weights,
// git's blob id otherwise), snapshots/<commit>/<file> -> ../../blobs/<etag>, refs/main.
void put_in_hub_cache(const fs::path& cache, const std::string& repo, const fs::path& src) {
    std::string folder = "models--" + repo;
    folder.replace(folder.find('/'), 1, "--");
    const fs::path r = cache / folder;
    for (const auto& e : fs::directory_iterator(src)) {
        const std::string bytes = read_all(e.path());
        const std::string ext = e.path().extension().string();
        const std::string etag = ext == ".safetensors" || ext == ".gguf" ? hub_server::sha256_hex(bytes)
                                                                         : hub_server::git_blob_id(bytes);
        write_all(r / "blobs" / etag, bytes);
        fs::create_directories(r / "snapshots" / kSnapshotCommit);
        fs::create_symlink("../../blobs/" + etag, r / "snapshots" / kSnapshotCommit / e.path().filename());
    }
    write_all(r / "refs/main", kSnapshotCommit);
}

int64_t sum_sizes(const std::map<std::string, std::vector<float>>& w) {
    int64_t n = 0;
    for (const auto& [k, v] : w) n += (int64_t)v.size();
    return n;
}

gb::model_config gguf_shape() {
    gb::model_config s;
    s.n_layer = 2, s.d_model = 32, s.n_head = 4, s.n_kv_head = 2, s.vocab_size = 300, s.n_ctx = 64;
    return s;
}

// A temporary HOME holding every layout, and the environment pointing at it (nothing of the real machine's).
struct machine {
    std::string home;
    std::unique_ptr<scoped_env> env;
    int64_t gpt2_params = 0, gguf_params = 0, llama2c_params = 0;
    std::string gpt2_src, gguf_file, llama2c_file;
    explicit machine(const std::string& name) {
        home = test_temp_dir("sources_" + name);
        env = isolated_machine(home, {{"HF_HUB_OFFLINE", "1"}, {"HF_ENDPOINT", "http://127.0.0.1:1"}});
        // Hugging Face: a GPT-2 folder, a GGUF repo with two quants, a repo of an unknown family
        gpt2_src = home + "/src/gpt2";
        tiny_model tm = write_tiny_gpt2(gpt2_src, tiny_spec{});
        gpt2_params = sum_sizes(tm.tensors);
        const fs::path cache = home + "/.cache/huggingface/hub";
        put_in_hub_cache(cache, "tiny-org/tiny-gpt2", gpt2_src);
        gb::model_config c = gb::random_gguf_config("llama", gguf_shape());
        gguf_file = home + "/src/gguf/tiny-Q8_0.gguf";
        fs::create_directories(home + "/src/gguf");
        gb::random_gguf_options q8;
        q8.type = gb::GGML_Q8_0;
        gguf_params = gb::write_random_gguf(gguf_file, c, q8);
        gb::write_random_gguf(home + "/src/gguf/tiny-F32.gguf", c, {});
        put_in_hub_cache(cache, "tiny-org/tiny-GGUF", home + "/src/gguf");
        write_all(home + "/src/odd/config.json", R"({"model_type": "not_a_family"})");
        put_in_hub_cache(cache, "odd-org/odd", home + "/src/odd");
        // Ollama: the manifest's model layer names the blob (a GGUF without extension)
        const std::string blob_hex = hub_server::sha256_hex(read_all(gguf_file));
        const fs::path ollama = home + "/.ollama/models";
        fs::create_directories(ollama / "blobs");
        fs::copy_file(gguf_file, ollama / "blobs" / ("sha256-" + blob_hex));
        write_all(ollama / "manifests/registry.ollama.ai/library/tiny/latest",
                  R"({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" +
                      blob_hex + R"(", "size": 1}, {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:00"}]})");
        // LM Studio, llama.cpp's cache, and a file that only claims to be a GGUF
        fs::create_directories(home + "/.lmstudio/models/pub/tiny-GGUF");
        fs::copy_file(gguf_file, home + "/.lmstudio/models/pub/tiny-GGUF/tiny-Q8_0.gguf");
        write_all(home + "/.lmstudio/models/pub/broken/broken.gguf", "not a gguf at all");
        fs::create_directories(home + "/.cache/llama.cpp");
        fs::copy_file(gguf_file, home + "/.cache/llama.cpp/tiny-org_tiny-GGUF_tiny-Q8_0.gguf");
        // a recent llama2.c checkpoint
        tiny_llama tl = write_tiny_llama2c(home + "/src/l2c", tiny_llama_spec{});
        llama2c_file = tl.model_path;
        llama2c_params = sum_sizes(tl.w);
    }
};

const gb::found_model* find(const std::vector<gb::found_model>& v, const std::string& source, const std::string& name) {
    for (const gb::found_model& f : v)
        if (f.source == source && f.name == name) return &f;
    return nullptr;
}

std::vector<float> logits_of_model(const gb::model& m) {
    gb::record rec;
    gb::run_forward(rec, m, {1, 5, 9, 2});
    return rec.logits;
}

} // namespace

TEST(ModelSources, NamesParse) {
    EXPECT_TRUE(gb::is_model_name("hf:openai-community/gpt2"));
    EXPECT_TRUE(gb::is_model_name("ollama:llama3.2"));
    EXPECT_FALSE(gb::is_model_name("/models/gpt2"));
    EXPECT_FALSE(gb::is_model_name("hf-models/gpt2"));
    gb::hf_name n = gb::parse_hf_name("hf:openai-community/gpt2");
    EXPECT_EQ(n.repo, "openai-community/gpt2");
    EXPECT_EQ(n.revision, "main");
    EXPECT_EQ(n.file_or_quant, "");
    n = gb::parse_hf_name("hf:bartowski/Llama-3.2-1B-Instruct-GGUF@v1.0:Q4_K_M");
    EXPECT_EQ(n.repo, "bartowski/Llama-3.2-1B-Instruct-GGUF");
    EXPECT_EQ(n.revision, "v1.0");
    EXPECT_EQ(n.file_or_quant, "Q4_K_M");
    for (const char* bad : {"hf:", "hf:../x", "hf:a/b/c", "hf:org/name@", "hf:org/name:", "hf:org--x/y", "hf:/abs"})
        EXPECT_THROW(gb::parse_hf_name(bad), gb::error) << bad;
}

// Every layout, each row described from its config or header: family, kind, parameters (the count the test's
// writer drew), bytes, and why one cannot be opened.
TEST(ModelSources, ScanFindsEachLayout) {
    machine m("layouts");
    const std::vector<gb::found_model> v = gb::scan_models({{m.llama2c_file, m.home + "/gone.bin"}});
    for (const gb::found_model& f : v)
        std::printf("%-8s %-40s %-7s %-6s %-8s %8lld %8lld %d %s\n", f.source.c_str(), f.name.c_str(), f.format.c_str(),
                    f.family.c_str(), f.kind.c_str(), (long long)f.n_params, (long long)f.bytes, f.openable, f.reason.c_str());
    const gb::found_model* hf = find(v, "hf", "tiny-org/tiny-gpt2");
    ASSERT_TRUE(hf);
    EXPECT_EQ(hf->path, m.home + "/.cache/huggingface/hub/models--tiny-org--tiny-gpt2/snapshots/" + kSnapshotCommit);
    EXPECT_EQ(hf->format, "hf");
    EXPECT_EQ(hf->family, "gpt2");
    EXPECT_EQ(hf->kind, "decoder");
    EXPECT_EQ(hf->n_params, m.gpt2_params);
    int64_t bytes = 0;
    for (const auto& e : fs::directory_iterator(m.gpt2_src)) bytes += (int64_t)fs::file_size(e.path());
    EXPECT_EQ(hf->bytes, bytes);
    EXPECT_TRUE(hf->openable) << hf->reason;

    const gb::found_model* q8 = find(v, "hf", "tiny-org/tiny-GGUF:tiny-Q8_0.gguf");
    ASSERT_TRUE(q8);
    EXPECT_TRUE(find(v, "hf", "tiny-org/tiny-GGUF:tiny-F32.gguf"));
    EXPECT_EQ(q8->format, "gguf");
    EXPECT_EQ(q8->family, "llama");
    EXPECT_EQ(q8->n_params, m.gguf_params);
    EXPECT_EQ(q8->bytes, (int64_t)fs::file_size(m.gguf_file));
    EXPECT_TRUE(q8->openable) << q8->reason;

    const gb::found_model* odd = find(v, "hf", "odd-org/odd");
    ASSERT_TRUE(odd);
    EXPECT_FALSE(odd->openable);
    EXPECT_NE(odd->reason.find("not_a_family"), std::string::npos) << odd->reason;

    const gb::found_model* ol = find(v, "ollama", "tiny:latest");
    ASSERT_TRUE(ol);
    EXPECT_EQ(ol->format, "gguf");
    EXPECT_EQ(ol->n_params, m.gguf_params);
    EXPECT_EQ(fs::path(ol->path).filename().string().rfind("sha256-", 0), 0u);
    EXPECT_TRUE(ol->openable) << ol->reason;

    const gb::found_model* lms = find(v, "lmstudio", "pub/tiny-GGUF/tiny-Q8_0.gguf");
    ASSERT_TRUE(lms);
    EXPECT_TRUE(lms->openable);
    const gb::found_model* broken = find(v, "lmstudio", "pub/broken/broken.gguf");
    ASSERT_TRUE(broken);
    EXPECT_FALSE(broken->openable);
    EXPECT_FALSE(broken->reason.empty());
    EXPECT_EQ(broken->reason.find('\n'), std::string::npos);

    const gb::found_model* lc = find(v, "llamacpp", "tiny-org_tiny-GGUF_tiny-Q8_0.gguf");
    ASSERT_TRUE(lc);
    EXPECT_TRUE(lc->openable);

    const gb::found_model* rec = find(v, "recent", "model.bin");
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->format, "llama2c");
    EXPECT_EQ(rec->family, "llama");
    EXPECT_EQ(rec->n_params, m.llama2c_params);
    EXPECT_TRUE(rec->openable) << rec->reason;
    EXPECT_FALSE(find(v, "recent", "gone.bin")) << "a recent path that is gone is not a model on this machine";

    // every row said to open does open, with the family and parameter count it was listed with
    for (const gb::found_model& f : v) {
        if (!f.openable) continue;
        gb::load_options lo;
        lo.tokenizer_path = f.format == "llama2c" ? (fs::path(f.path).parent_path() / "tokenizer.bin").string() : "";
        EXPECT_NO_THROW(gb::load_model(f.path, lo)) << f.name;
    }
}

// Ollama's blobs have no extension: the loader knows a GGUF by its magic.
TEST(ModelSources, GgufWithoutExtensionLoads) {
    machine m("magic");
    const std::string blob = m.home + "/blobfile";
    fs::copy_file(m.gguf_file, blob);
    EXPECT_EQ(logits_of_model(gb::load_model(blob)), logits_of_model(gb::load_model(m.gguf_file)));
    write_all(m.home + "/notamodel", "hello");
    expect_gb_error([&] { gb::load_model(m.home + "/notamodel"); }, "unknown model format");
}

// Names resolve from the cache (HF_HUB_OFFLINE=1 and a dead endpoint: nothing could be downloaded) and open
// with the same numbers as their paths.
TEST(ModelSources, NamesResolveFromTheCaches) {
    machine m("names");
    const std::string snap = m.home + "/.cache/huggingface/hub/models--tiny-org--tiny-gpt2/snapshots/" + kSnapshotCommit;
    EXPECT_EQ(gb::resolve_model("hf:tiny-org/tiny-gpt2"), snap);
    EXPECT_EQ(gb::resolve_model("hf:tiny-org/tiny-gpt2@" + kSnapshotCommit), snap);
    const std::string gsnap = m.home + "/.cache/huggingface/hub/models--tiny-org--tiny-GGUF/snapshots/" + kSnapshotCommit;
    EXPECT_EQ(gb::resolve_model("hf:tiny-org/tiny-GGUF"), gsnap + "/tiny-Q8_0.gguf");
    EXPECT_EQ(gb::resolve_model("hf:tiny-org/tiny-GGUF:f32"), gsnap + "/tiny-F32.gguf");
    EXPECT_EQ(gb::resolve_model("hf:tiny-org/tiny-GGUF:tiny-F32.gguf"), gsnap + "/tiny-F32.gguf");
    const std::string blob = gb::resolve_model("ollama:tiny");
    EXPECT_EQ(blob, gb::resolve_model("ollama:tiny:latest"));
    EXPECT_EQ(blob, gb::resolve_model("ollama:library/tiny:latest"));
    EXPECT_EQ(read_all(blob), read_all(m.gguf_file));
    EXPECT_EQ(gb::resolve_model("/some/path"), "/some/path");
    expect_gb_error([&] { gb::resolve_model("ollama:nothere:7b"); }, "ollama pull nothere:7b");
    expect_gb_error([&] { gb::resolve_model("ollama:../../etc:x"); }, "not an Ollama model name");
    expect_gb_error([&] { gb::resolve_model("hf:tiny-org/tiny-gpt2@v2"); }, "not in the Hugging Face cache");
    EXPECT_EQ(logits_of_model(gb::load_model("hf:tiny-org/tiny-gpt2")), logits_of_model(gb::load_model(m.gpt2_src)));
    EXPECT_EQ(logits_of_model(gb::load_model("ollama:tiny")), logits_of_model(gb::load_model(m.gguf_file)));
}

// Environment variables move each source: HF_HUB_CACHE, OLLAMA_MODELS, LLAMA_CACHE.
TEST(ModelSources, EnvironmentMovesTheSources) {
    machine m("env");
    const std::string other = m.home + "/elsewhere";
    fs::rename(m.home + "/.cache/huggingface/hub", other + "-hf");
    fs::rename(m.home + "/.ollama/models", other + "-ollama");
    fs::rename(m.home + "/.cache/llama.cpp", other + "-llama");
    std::vector<gb::found_model> v = gb::scan_models();
    EXPECT_FALSE(find(v, "hf", "tiny-org/tiny-gpt2"));
    EXPECT_FALSE(find(v, "ollama", "tiny:latest"));
    scoped_env e({{"HF_HUB_CACHE", (other + "-hf").c_str()}, {"OLLAMA_MODELS", (other + "-ollama").c_str()},
                  {"LLAMA_CACHE", (other + "-llama").c_str()}});
    v = gb::scan_models();
    EXPECT_TRUE(find(v, "hf", "tiny-org/tiny-gpt2"));
    EXPECT_TRUE(find(v, "ollama", "tiny:latest"));
    EXPECT_TRUE(find(v, "llamacpp", "tiny-org_tiny-GGUF_tiny-Q8_0.gguf"));
    EXPECT_NO_THROW(gb::resolve_model("ollama:tiny"));
}

// How long a scan of 100 entries takes (stated, not asserted: the machine's load is not the code's).
TEST(ModelSources, ScanSpeedFor100Entries) {
    machine m("speed");
    const fs::path cache = m.home + "/.cache/huggingface/hub";
    for (int i = 0; i < 60; ++i) put_in_hub_cache(cache, "bulk/gpt2-" + std::to_string(i), m.gpt2_src);
    for (int i = 0; i < 35; ++i)
        fs::copy_file(m.gguf_file, m.home + "/.lmstudio/models/pub/tiny-GGUF/copy-" + std::to_string(i) + ".gguf");
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<gb::found_model> v = gb::scan_models();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(v.size(), 100u);
    std::printf("scan_models: %zu entries in %.3f s\n", v.size(), s);
    ::testing::Test::RecordProperty("scan_seconds_100", std::to_string(s));
}

// glassbox-cli models: the table, and --json in the issue's shape; --model takes the names.
TEST(ModelSources, CliModelsAndNames) {
    machine m("cli");
    const std::string json = m.home + "/models.json";
    command_result r = run_cli("models --json " + json);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("tiny-org/tiny-gpt2"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("no: unknown model format"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(json));
    ASSERT_TRUE(j["models"].is_array());
    const std::vector<gb::found_model> v = gb::scan_models();
    ASSERT_EQ(j["models"].size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const nlohmann::json& e = j["models"][i];
        EXPECT_EQ(e.size(), 10u);
        EXPECT_EQ(e["source"], v[i].source);
        EXPECT_EQ(e["name"], v[i].name);
        EXPECT_EQ(e["path"], v[i].path);
        EXPECT_EQ(e["format"], v[i].format);
        EXPECT_EQ(e["family"], v[i].family);
        EXPECT_EQ(e["kind"], v[i].kind);
        EXPECT_EQ(e["n_params"], v[i].n_params);
        EXPECT_EQ(e["bytes"], v[i].bytes);
        EXPECT_EQ(e["openable"], v[i].openable);
        EXPECT_EQ(e["reason"], v[i].reason);
    }
    r = run_cli("info --model hf:tiny-org/tiny-gpt2");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json info = nlohmann::json::parse(r.out);
    EXPECT_EQ(info["family"], "gpt2");
    EXPECT_EQ(info["n_params"], m.gpt2_params);
    r = run_cli("info --model ollama:tiny");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["family"], "llama");
    r = run_cli("info --model ollama:absent");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("ollama pull absent"), std::string::npos) << r.err;
}
