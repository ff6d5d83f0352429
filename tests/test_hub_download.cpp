// Downloading from the Hugging Face Hub (core/io/hub_download.h) against a local Hub on 127.0.0.1
// (tests/support/hub_server.h): the cache layout huggingface_hub writes, resume after a cut and after a cancel,
// the token (sent to the Hub, never to the CDN host), gated and missing repos, offline mode, untrusted names,
// checks of size and sha256, and that a downloaded model gives the same numbers as its folder opened directly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "hub_server.h"
#include "io/hub_download.h"
#include "io/loader.h"
#include "io/model_sources.h"
#include "run/forward.h"
#include "test_util.h"
#include "util/error.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kCommit2 = "89abcdef0123456789abcdef0123456789abcdef";

// The files of a tiny GPT-2 folder as a Hub repo: model.safetensors through LFS, the rest as small files, and
// one file a model does not need (never downloaded).
hub_server_repo gpt2_repo(const std::string& dir, const std::string& id) {
    hub_server_repo r;
    r.repo = id;
    r.commit = kCommit;
    for (const char* f : {"config.json", "vocab.json", "merges.txt"}) r.files.push_back({f, read_all(fs::path(dir) / f), false, ""});
    r.files.push_back({"model.safetensors", read_all(fs::path(dir) / "model.safetensors"), true, ""});
    r.files.push_back({"onnx/decoder_model.onnx", std::string(3000, 'x'), true, ""});
    r.files.push_back({"README.md", "# tiny\n", false, ""});
    return r;
}

// One test's world: a server, a fresh cache and a HOME, the environment pointing at them.
struct hub_fixture {
    std::string root;
    hub_server server;
    std::unique_ptr<scoped_env> env;
    std::string src; // the tiny model's folder as written
    explicit hub_fixture(const std::string& name) {
        root = test_temp_dir("hub_" + name);
        src = root + "/src";
        write_tiny_gpt2(src, tiny_spec{});
        server.add_repo(gpt2_repo(src, "tiny-org/tiny-gpt2"));
        env = isolated_machine(root + "/home", {{"HF_ENDPOINT", server.endpoint()}, {"HF_HUB_CACHE", root + "/cache"},
                                                {"HF_HOME", root + "/hfhome"}});
    }
    std::string cache() const { return root + "/cache"; }
    fs::path repo_dir(const std::string& id = "tiny-org/tiny-gpt2") const {
        std::string n = id;
        n.replace(n.find('/'), 1, "--");
        return fs::path(cache()) / ("models--" + n);
    }
};

// Every entry under dir: "path" for a file (with its bytes' length), "path -> target" for a link
std::set<std::string> tree(const fs::path& dir) {
    std::set<std::string> out;
    for (fs::recursive_directory_iterator it(dir), end; it != end; ++it) {
        const std::string rel = it->path().lexically_relative(dir).generic_string();
        if (it->is_symlink()) out.insert(rel + " -> " + fs::read_symlink(it->path()).generic_string());
        else if (it->is_regular_file()) out.insert(rel);
    }
    return out;
}

std::vector<float> logits_of(const gb::model& m) {
    gb::record rec;
    gb::run_forward(rec, m, {1, 5, 9, 2});
    return rec.logits;
}

const std::vector<std::string> kGpt2Files = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};

} // namespace

TEST(HubDownload, NeededFilesOfAFolderRepo) {
    gb::hub_repo_info r;
    r.repo = "o/n";
    for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt", "pytorch_model.bin",
                          "onnx/model.onnx", "tokenizer.json", "README.md", "flax_model.msgpack"})
        r.files.push_back({f, 1, false});
    EXPECT_EQ(gb::hub_needed_files(r, ""), (std::vector<std::string>{"config.json", "model.safetensors", "tokenizer.json",
                                                                     "vocab.json", "merges.txt"}));
    r.files = {{"config.json", 1, false}, {"pytorch_model.bin", 1, true}};
    expect_gb_error([&] { gb::hub_needed_files(r, ""); }, "no safetensors weights");
}

TEST(HubDownload, NeededFilesOfAGgufRepo) {
    gb::hub_repo_info r;
    r.repo = "o/m-GGUF";
    for (const char* f : {"m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m-Q8_0.gguf", "m-F16.gguf", "README.md"}) r.files.push_back({f, 1, true});
    EXPECT_EQ(gb::hub_needed_files(r, ""), std::vector<std::string>{"m-Q8_0.gguf"});
    EXPECT_EQ(gb::hub_needed_files(r, "q4_k_m"), std::vector<std::string>{"m-Q4_K_M.gguf"});
    EXPECT_EQ(gb::hub_needed_files(r, "m-F16.gguf"), std::vector<std::string>{"m-F16.gguf"});
    expect_gb_error([&] { gb::hub_needed_files(r, "Q5_K_M"); }, "no GGUF file for 'Q5_K_M'");
    expect_gb_error([&] { gb::hub_needed_files(r, "README.md"); }, "not a .gguf file");
    r.files.erase(r.files.begin() + 2); // no Q8_0: several left, none chosen
    expect_gb_error([&] { gb::hub_needed_files(r, ""); }, "several GGUF files");
}

TEST(HubDownload, EnvironmentDefaults) {
    scoped_env e({{"HOME", "/h"}, {"HF_HUB_CACHE", nullptr}, {"HUGGINGFACE_HUB_CACHE", nullptr}, {"HF_HOME", nullptr},
                  {"XDG_CACHE_HOME", nullptr}, {"HF_ENDPOINT", nullptr}, {"HF_TOKEN", nullptr},
                  {"HUGGING_FACE_HUB_TOKEN", nullptr}, {"HF_TOKEN_PATH", nullptr}, {"HF_HUB_OFFLINE", nullptr},
                  {"TRANSFORMERS_OFFLINE", nullptr}});
    EXPECT_EQ(gb::hf_hub_cache(), "/h/.cache/huggingface/hub");
    EXPECT_EQ(gb::hf_endpoint(), "https://huggingface.co");
    EXPECT_FALSE(gb::hf_offline());
    {
        scoped_env x({{"XDG_CACHE_HOME", "/x"}});
        EXPECT_EQ(gb::hf_hub_cache(), "/x/huggingface/hub");
        scoped_env h({{"HF_HOME", "/hh"}});
        EXPECT_EQ(gb::hf_hub_cache(), "/hh/hub");
        scoped_env o({{"HUGGINGFACE_HUB_CACHE", "/old"}});
        EXPECT_EQ(gb::hf_hub_cache(), "/old");
        scoped_env c({{"HF_HUB_CACHE", "/c"}, {"HF_ENDPOINT", "http://127.0.0.1:9/"}, {"TRANSFORMERS_OFFLINE", "yes"}});
        EXPECT_EQ(gb::hf_hub_cache(), "/c");
        EXPECT_EQ(gb::hf_endpoint(), "http://127.0.0.1:9");
        EXPECT_TRUE(gb::hf_offline());
    }
    const std::string dir = test_temp_dir("hub_token");
    write_all(dir + "/hfhome/token", "hf_fromfile\n");
    write_all(dir + "/elsewhere", "  hf_frompath \n");
    scoped_env h({{"HF_HOME", (dir + "/hfhome").c_str()}});
    EXPECT_EQ(gb::hf_token(), "hf_fromfile");
    scoped_env p({{"HF_TOKEN_PATH", (dir + "/elsewhere").c_str()}});
    EXPECT_EQ(gb::hf_token(), "hf_frompath");
    scoped_env t({{"HUGGING_FACE_HUB_TOKEN", "hf_old"}});
    EXPECT_EQ(gb::hf_token(), "hf_old");
    scoped_env n({{"HF_TOKEN", "hf_new"}});
    EXPECT_EQ(gb::hf_token(), "hf_new");
}

// The layout huggingface_hub's hf_hub_download writes (its "local cache" reference): blobs named by the git blob
// id (small files) or the sha256 (LFS), relative links from the snapshot, refs/main holding the commit with no
// newline, and nothing else (no .incomplete, no temporary names).
TEST(HubDownload, WritesTheHubCacheLayout) {
    hub_fixture f("layout");
    const gb::hub_repo_info info = gb::hub_repo("tiny-org/tiny-gpt2", "main");
    EXPECT_EQ(info.commit, kCommit);
    const std::vector<std::string> files = gb::hub_needed_files(info, "");
    EXPECT_EQ(files, (std::vector<std::string>{"config.json", "model.safetensors", "vocab.json", "merges.txt"}));
    const std::string snap = gb::hub_download("tiny-org/tiny-gpt2", "main", files);
    EXPECT_EQ(snap, (f.repo_dir() / "snapshots" / kCommit).string());
    std::set<std::string> want = {"refs/main"};
    for (const std::string& name : files) {
        const std::string bytes = read_all(fs::path(f.src) / name);
        const std::string etag = name == "model.safetensors" ? hub_server::sha256_hex(bytes) : hub_server::git_blob_id(bytes);
        want.insert("blobs/" + etag);
        want.insert("snapshots/" + kCommit + "/" + name + " -> ../../blobs/" + etag);
        EXPECT_EQ(read_all(fs::path(snap) / name), bytes) << name;
    }
    EXPECT_EQ(tree(f.repo_dir()), want);
    EXPECT_EQ(read_all(f.repo_dir() / "refs/main"), kCommit);
    EXPECT_EQ(f.server.count("onnx"), 0) << "a file the model does not need was asked for";
    // a second download asks the revision API only: every file is in the snapshot
    f.server.clear_requests();
    gb::hub_download("tiny-org/tiny-gpt2", "main", files);
    EXPECT_EQ(f.server.count("/resolve/"), 0);
    EXPECT_EQ(f.server.count("/api/models/"), 1);
}

// A nested file's link climbs out of its folder too (../../../blobs/...), and a commit asked for by hash
// writes no ref.
TEST(HubDownload, NestedFileAndCommitRevision) {
    hub_fixture f("nested");
    gb::hub_download("tiny-org/tiny-gpt2", kCommit, {"onnx/decoder_model.onnx"});
    const fs::path link = f.repo_dir() / "snapshots" / kCommit / "onnx/decoder_model.onnx";
    EXPECT_EQ(fs::read_symlink(link).generic_string(), "../../../blobs/" + hub_server::sha256_hex(std::string(3000, 'x')));
    EXPECT_FALSE(fs::exists(f.repo_dir() / "refs"));
}

// The downloaded model is the model: the same logits as its folder opened directly, through load_model's
// name too ("hf:ORG/NAME" downloads into an empty cache, then opens from it without asking again).
TEST(HubDownload, SameNumbersAsTheFolder) {
    hub_fixture f("numbers");
    const std::vector<float> direct = logits_of(gb::load_model(f.src));
    const gb::model m = gb::load_model("hf:tiny-org/tiny-gpt2");
    EXPECT_EQ(m.path, (f.repo_dir() / "snapshots" / kCommit).string());
    EXPECT_EQ(logits_of(m), direct);
    f.server.clear_requests();
    EXPECT_EQ(logits_of(gb::load_model("hf:tiny-org/tiny-gpt2")), direct);
    EXPECT_EQ(f.server.requests().size(), 0u) << "a cached name went to the network";
}

// A transfer cut half-way is resumed with a Range request from where it stopped; the blob is whole.
TEST(HubDownload, ResumesAfterACut) {
    hub_fixture f("cut");
    f.server.cut_once("model.safetensors");
    const std::string snap = gb::hub_download("tiny-org/tiny-gpt2", "main", kGpt2Files);
    const std::string bytes = read_all(fs::path(f.src) / "model.safetensors");
    EXPECT_EQ(read_all(fs::path(snap) / "model.safetensors"), bytes);
    std::vector<hub_server_request> cdn;
    for (const hub_server_request& r : f.server.requests())
        if (r.target.rfind("/cdn/", 0) == 0 && r.method == "GET") cdn.push_back(r);
    ASSERT_EQ(cdn.size(), 2u);
    EXPECT_EQ(cdn[0].headers.count("range"), 0u);
    EXPECT_EQ(cdn[1].headers["range"], "bytes=" + std::to_string(bytes.size() / 2) + "-");
    EXPECT_EQ(cdn[1].status, 206);
}

// A cancelled download leaves its bytes in blobs/<etag>.incomplete and nothing in snapshots/; the next one
// resumes from there.
TEST(HubDownload, CancelThenResume) {
    hub_fixture f("cancel");
    hub_server_repo big;
    big.repo = "tiny-org/big";
    big.commit = kCommit2;
    std::string bytes(600000, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = (char)(i * 7 + i / 251);
    big.files = {{"model.gguf", bytes, true, ""}};
    f.server.add_repo(big);
    f.server.set_chunk_delay_ms(5);
    int64_t seen = 0;
    expect_gb_error([&] {
        gb::hub_download("tiny-org/big", "main", {"model.gguf"}, [&](const gb::download_progress& p) {
            EXPECT_EQ(p.file, "model.gguf");
            EXPECT_EQ(p.total, (int64_t)bytes.size());
            seen = p.done;
            return p.done < 100000;
        });
    }, "download cancelled");
    const fs::path repo = f.repo_dir("tiny-org/big");
    const fs::path part = repo / "blobs" / (hub_server::sha256_hex(bytes) + ".incomplete");
    ASSERT_TRUE(fs::exists(part));
    const int64_t have = (int64_t)fs::file_size(part);
    EXPECT_GE(have, 100000);
    EXPECT_LT(have, (int64_t)bytes.size());
    EXPECT_FALSE(fs::exists(repo / "snapshots" / kCommit2 / "model.gguf"));
    f.server.set_chunk_delay_ms(0);
    f.server.clear_requests();
    const std::string snap = gb::hub_download("tiny-org/big", "main", {"model.gguf"});
    EXPECT_EQ(read_all(fs::path(snap) / "model.gguf"), bytes);
    EXPECT_FALSE(fs::exists(part));
    bool ranged = false;
    for (const hub_server_request& r : f.server.requests())
        if (r.target.rfind("/cdn/", 0) == 0 && r.method == "GET") ranged = r.headers.count("range") && r.headers.at("range") == "bytes=" + std::to_string(have) + "-";
    EXPECT_TRUE(ranged) << "the second download did not resume from " << have;
    (void)seen;
}

// A server that answers the resume's Range with the whole file (200): the partial bytes are dropped, not kept
// in front of it.
TEST(HubDownload, ResumeFromAServerIgnoringRanges) {
    hub_fixture f("norange");
    hub_server_repo big;
    big.repo = "tiny-org/big";
    big.commit = kCommit2;
    std::string bytes(300000, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = (char)(i * 13 + i / 509);
    big.files = {{"model.gguf", bytes, true, ""}};
    f.server.add_repo(big);
    f.server.set_chunk_delay_ms(5);
    expect_gb_error([&] {
        gb::hub_download("tiny-org/big", "main", {"model.gguf"}, [&](const gb::download_progress& p) { return p.done < 50000; });
    }, "download cancelled");
    const fs::path part = f.repo_dir("tiny-org/big") / "blobs" / (hub_server::sha256_hex(bytes) + ".incomplete");
    ASSERT_TRUE(fs::exists(part));
    const int64_t have = (int64_t)fs::file_size(part);
    f.server.set_chunk_delay_ms(0);
    f.server.set_ignore_range(true);
    f.server.clear_requests();
    const std::string snap = gb::hub_download("tiny-org/big", "main", {"model.gguf"});
    EXPECT_EQ(read_all(fs::path(snap) / "model.gguf"), bytes);
    int full = 0;
    for (const hub_server_request& r : f.server.requests())
        if (r.target.rfind("/cdn/", 0) == 0 && r.method == "GET") {
            EXPECT_EQ(r.headers.at("range"), "bytes=" + std::to_string(have) + "-");
            full += r.status == 200;
        }
    EXPECT_EQ(full, 1);
}

// The token goes to the Hub as a Bearer header and never to the CDN's host; a gated repo without it is one line
// and leaves nothing in snapshots/.
TEST(HubDownload, GatedRepoAndToken) {
    hub_fixture f("gated");
    hub_server_repo g = gpt2_repo(f.src, "meta-org/gated-model");
    g.gated = true;
    f.server.add_repo(g);
    f.server.set_token("hf_secret");
    expect_gb_error([&] { gb::hub_download("meta-org/gated-model", "main", kGpt2Files); },
                    "meta-org/gated-model is gated: accept its licence on its page and set HF_TOKEN");
    EXPECT_FALSE(fs::exists(f.repo_dir("meta-org/gated-model") / "snapshots" / kCommit / "config.json"));
    {
        scoped_env t({{"HF_TOKEN", "hf_wrong"}});
        expect_gb_error([&] { gb::hub_download("meta-org/gated-model", "main", kGpt2Files); }, "no access yet");
    }
    write_all(f.root + "/hfhome/token", "hf_secret\n"); // $HF_HOME/token
    f.server.clear_requests();
    const std::string snap = gb::hub_download("meta-org/gated-model", "main", kGpt2Files);
    EXPECT_EQ(read_all(fs::path(snap) / "config.json"), read_all(fs::path(f.src) / "config.json"));
    int hub = 0, cdn = 0;
    for (const hub_server_request& r : f.server.requests()) {
        auto a = r.headers.find("authorization");
        if (r.target.rfind("/cdn/", 0) == 0) {
            ++cdn;
            EXPECT_EQ(a, r.headers.end()) << "the token was sent to the CDN host: " << r.target;
        } else {
            ++hub;
            ASSERT_NE(a, r.headers.end()) << r.target;
            EXPECT_EQ(a->second, "Bearer hf_secret");
        }
    }
    EXPECT_GT(hub, 0);
    EXPECT_GT(cdn, 0);
}

TEST(HubDownload, MissingRepoRevisionAndFile) {
    hub_fixture f("missing");
    expect_gb_error([&] { gb::hub_download("nobody/nothing", "main", {"config.json"}); }, "nobody/nothing: no such model on the Hub");
    expect_gb_error([&] { gb::hub_download("tiny-org/tiny-gpt2", "v9", {"config.json"}); }, "no revision v9");
    expect_gb_error([&] { gb::hub_download("tiny-org/tiny-gpt2", "main", {"tokenizer.json"}); }, "tokenizer.json is not in the repo");
    expect_gb_error([&] { gb::hub_repo("bad//name"); }, "is not a Hugging Face repo id");
    scoped_env e({{"HF_ENDPOINT", "http://127.0.0.1:1"}}); // nothing listens there
    expect_gb_error([&] { gb::hub_repo("tiny-org/tiny-gpt2"); }, "cannot reach http://127.0.0.1:1");
}

// HF_HUB_OFFLINE=1: no request at all; what is cached is found (a download of cached files, a cached name).
TEST(HubDownload, OfflineNeverAsks) {
    hub_fixture f("offline");
    gb::hub_download("tiny-org/tiny-gpt2", "main", kGpt2Files);
    f.server.clear_requests();
    scoped_env off({{"HF_HUB_OFFLINE", "1"}});
    EXPECT_EQ(gb::hub_download("tiny-org/tiny-gpt2", "main", kGpt2Files), (f.repo_dir() / "snapshots" / kCommit).string());
    expect_gb_error([&] { gb::hub_download("tiny-org/tiny-gpt2", "main", {"README.md"}); }, "HF_HUB_OFFLINE is set");
    expect_gb_error([&] { gb::hub_repo("tiny-org/tiny-gpt2"); }, "HF_HUB_OFFLINE is set: the Hub is not asked");
    expect_gb_error([&] { gb::resolve_model("hf:tiny-org/other"); }, "HF_HUB_OFFLINE is set");
    EXPECT_EQ(gb::resolve_model("hf:tiny-org/tiny-gpt2"), (f.repo_dir() / "snapshots" / kCommit).string());
    EXPECT_EQ(f.server.requests().size(), 0u);
}

// Names from the network or the user that are absolute or climb out of the snapshot are refused.
TEST(HubDownload, UntrustedNamesRefused) {
    hub_fixture f("untrusted");
    for (const char* bad : {"../evil.json", "/etc/passwd", "a/../../b", "a//b", "./x"})
        expect_gb_error([&] { gb::hub_download("tiny-org/tiny-gpt2", "main", {std::string(bad)}); }, "it is absolute or climbs out");
    hub_server_repo sh;
    sh.repo = "tiny-org/sharded-evil";
    sh.commit = kCommit2;
    sh.files = {{"config.json", "{}", false, ""},
                {"model.safetensors.index.json", R"({"weight_map": {"a": "../../../../escaped.safetensors"}})", false, ""}};
    f.server.add_repo(sh);
    expect_gb_error([&] { gb::hub_download("tiny-org/sharded-evil", "main", {"model.safetensors.index.json"}); },
                    "refusing the file name '../../../../escaped.safetensors'");
    EXPECT_FALSE(fs::exists(f.root + "/escaped.safetensors"));
}

// A sharded checkpoint: the shards come in through the index.
TEST(HubDownload, ShardsThroughTheIndex) {
    hub_fixture f("shards");
    hub_server_repo sh;
    sh.repo = "tiny-org/sharded";
    sh.commit = kCommit2;
    sh.files = {{"config.json", "{}", false, ""},
                {"model.safetensors.index.json", R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})", false, ""},
                {"model-00001-of-00002.safetensors", "one", true, ""},
                {"model-00002-of-00002.safetensors", "two", true, ""}};
    f.server.add_repo(sh);
    const std::string snap = gb::hub_download("tiny-org/sharded", "main", {"config.json", "model.safetensors.index.json"});
    EXPECT_EQ(read_all(fs::path(snap) / "model-00001-of-00002.safetensors"), "one");
    EXPECT_EQ(read_all(fs::path(snap) / "model-00002-of-00002.safetensors"), "two");
}

// The bytes are checked before they are linked: a wrong sha256 or size leaves no blob and no link.
TEST(HubDownload, ChecksSizeAndSha256) {
    hub_fixture f("checks");
    hub_server_repo bad;
    bad.repo = "tiny-org/corrupt";
    bad.commit = kCommit2;
    bad.files = {{"model.gguf", std::string(5000, 'a'), true, std::string(5000, 'b')},
                 {"short.gguf", std::string(5000, 'c'), true, std::string(4000, 'c')}};
    f.server.add_repo(bad);
    expect_gb_error([&] { gb::hub_download("tiny-org/corrupt", "main", {"model.gguf"}); }, "sha256");
    expect_gb_error([&] { gb::hub_download("tiny-org/corrupt", "main", {"short.gguf"}); }, "got 4000 bytes, the Hub said 5000");
    const fs::path repo = f.repo_dir("tiny-org/corrupt");
    EXPECT_FALSE(fs::exists(repo / "snapshots"));
    EXPECT_TRUE(fs::is_empty(repo / "blobs"));
}

// glassbox-cli download: plain lines when stderr is not a terminal, the path --model opens on stdout; a gated
// repo is one line and exit 2.
TEST(HubDownload, CliDownload) {
    hub_fixture f("cli");
    hub_server_repo g;
    g.repo = "tiny-org/tiny-GGUF";
    g.commit = kCommit2;
    g.files = {{"tiny-Q8_0.gguf", std::string(70000, 'q'), true, ""}, {"tiny-Q4_K_M.gguf", std::string(40000, 'k'), true, ""}};
    f.server.add_repo(g);
    command_result r = run_cli("download hf:tiny-org/tiny-gpt2");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, (f.repo_dir() / "snapshots" / kCommit).string() + "\n");
    EXPECT_NE(r.err.find("downloading model.safetensors ("), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("done model.safetensors"), std::string::npos) << r.err;
    r = run_cli("download hf:tiny-org/tiny-GGUF --file Q4_K_M");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string path = (f.repo_dir("tiny-org/tiny-GGUF") / "snapshots" / kCommit2 / "tiny-Q4_K_M.gguf").string();
    EXPECT_EQ(r.out, path + "\n");
    EXPECT_EQ(read_all(path), std::string(40000, 'k'));
    EXPECT_FALSE(fs::exists(f.repo_dir("tiny-org/tiny-GGUF") / "snapshots" / kCommit2 / "tiny-Q8_0.gguf"));
    hub_server_repo gated = gpt2_repo(f.src, "meta-org/gated");
    gated.gated = true;
    f.server.add_repo(gated);
    r = run_cli("download hf:meta-org/gated");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: meta-org/gated is gated: accept its licence on its page and set HF_TOKEN\n");
    r = run_cli("download ollama:llama3.2");
    EXPECT_EQ(r.code, 2);
    // --model with a name not in the cache downloads it (progress on stderr), then runs
    f.server.add_repo(gpt2_repo(f.src, "tiny-org/second"));
    r = run_cli("info --model hf:tiny-org/second@" + kCommit);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["family"], "gpt2");
    EXPECT_NE(r.err.find("done model.safetensors"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(f.repo_dir("tiny-org/second") / "snapshots" / kCommit / "model.safetensors"));
}

// A full disk is one line naming the file (the .incomplete file is /dev/full here), and nothing is linked.
TEST(HubDownload, FullDiskIsOneLine) {
    if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
    hub_fixture f("full");
    const std::string bytes = read_all(fs::path(f.src) / "model.safetensors");
    const fs::path blobs = f.repo_dir() / "blobs";
    fs::create_directories(blobs);
    fs::create_symlink("/dev/full", blobs / (hub_server::sha256_hex(bytes) + ".incomplete"));
    expect_gb_error([&] { gb::hub_download("tiny-org/tiny-gpt2", "main", {"model.safetensors"}); },
                    "No space left on device");
    EXPECT_FALSE(fs::exists(f.repo_dir() / "snapshots" / kCommit / "model.safetensors"));
    EXPECT_FALSE(fs::exists(blobs / hub_server::sha256_hex(bytes)));
}

// On a terminal (a pseudo-terminal from script(1)) download draws a bar a file, redrawn in place: bytes, rate, ETA.
TEST(HubDownload, CliBarOnATerminal) {
    if (run_command("command -v script").code != 0) GTEST_SKIP() << "no script(1) to give the CLI a terminal";
    hub_fixture f("tty");
    const std::string cmd = std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli download hf:tiny-org/tiny-gpt2";
    command_result r = run_command("script -qec '" + cmd + "' /dev/null");
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const size_t bar = r.out.find("\rmodel.safetensors [########################] ");
    ASSERT_NE(bar, std::string::npos) << r.out;
    const std::string line = r.out.substr(bar, r.out.find('\n', bar) - bar);
    EXPECT_NE(line.find(" kB / "), std::string::npos) << line;
    EXPECT_NE(line.find("/s  ETA "), std::string::npos) << line;
    EXPECT_EQ(r.out.find("downloading model.safetensors"), std::string::npos) << "plain lines on a terminal";
}

// The cache tree against the reference writer: @huggingface/hub's downloadFileToCacheDir (tests/node/
// hub_download.mjs) fetches the same files from the same local Hub into another cache, and the two trees hold the
// same blobs (names and bytes) and the same snapshot links, byte for byte. (It writes no refs/; ours are checked
// in WritesTheHubCacheLayout.)
TEST(HubDownload, CacheMatchesHuggingfaceJs) {
    hub_fixture f("reference");
    const std::string ours = gb::hub_download("tiny-org/tiny-gpt2", "main", kGpt2Files);
    const std::string theirs_cache = f.root + "/js-cache";
    std::string cmd = "cd '" + node_dir + "' && node hub_download.mjs " + f.server.endpoint() + " '" + theirs_cache +
                      "' tiny-org/tiny-gpt2 main";
    for (const std::string& file : kGpt2Files) cmd += " " + file;
    const command_result r = run_command(cmd);
    ASSERT_EQ(r.code, 0) << "node tests/node/hub_download.mjs failed (tools/setup.sh --tests installs @huggingface/hub): "
                         << r.err;
    const nlohmann::json pointers = nlohmann::json::parse(r.out);
    ASSERT_EQ(pointers.size(), kGpt2Files.size());
    const fs::path theirs = fs::path(theirs_cache) / "models--tiny-org--tiny-gpt2";
    for (size_t i = 0; i < kGpt2Files.size(); ++i)
        EXPECT_EQ(pointers[i].get<std::string>(), (theirs / "snapshots" / kCommit / kGpt2Files[i]).string());
    std::set<std::string> mine = tree(f.repo_dir());
    mine.erase("refs/main");
    EXPECT_EQ(mine, tree(theirs));
    for (const auto& e : fs::directory_iterator(theirs / "blobs"))
        EXPECT_EQ(read_all(e.path()), read_all(f.repo_dir() / "blobs" / e.path().filename())) << e.path();
    (void)ours;
}
