// The app's model picker end to end under Xvfb: in a temporary HOME holding a tiny GPT-2 in the Hugging Face hub
// cache's layout and a tiny Llama GGUF as an Ollama blob, the picker lists both and opens each (by keyboard and
// by double-click), a file that is no model only says why; names open from the File tab and the path box; the
// File menu lists the recent models; Ctrl+Tab changes tab and Esc closes; from a
// local Hub (tests/support/hub_server, on 127.0.0.1) a download shows its progress and opens the model, a GGUF
// repo downloads the quant chosen, a missing repo is one line in the picker, and a cancelled download leaves
// nothing half-written in snapshots/.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app_script.h"
#include "hub_server.h"
#include "io/sae.h"
#include "random_sae.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

const std::string hf_commit = "0123456789abcdef0123456789abcdef01234567";

// The environment of one app run: HOME is home and nothing else points the scanners or the hub elsewhere.
std::string home_env(const std::string& home, const std::string& extra = "") {
    std::string env = "env";
    for (const std::string& v : model_location_vars()) env += " -u " + v;
    return env + " HOME=" + sq(home) + " " + extra + " ";
}

// The files of a tiny GPT-2 folder, as the hub serves them (the weights through LFS).
std::vector<hub_server_file> tiny_gpt2_files(const std::string& name, int n_layer, int d_model, uint32_t seed) {
    tiny_spec sp;
    sp.n_layer = n_layer, sp.n_head = 2, sp.d_model = d_model, sp.n_ctx = 64, sp.seed = seed;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir(name), sp);
    std::vector<hub_server_file> files;
    for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
        files.push_back({f, read_file(tm.dir + "/" + f), std::string(f) == "model.safetensors", ""});
    return files;
}

// repo's files laid out in the hub cache as huggingface_hub writes them: blobs named by ETag (git's blob id, a
// LFS file's sha256), snapshots/<commit>/<file> -> ../../blobs/<etag>, refs/main. Returns the snapshot folder.
std::string write_hub_cache(const std::string& cache, const std::string& repo, const std::vector<hub_server_file>& files) {
    std::string folder = "models--" + repo;
    folder.replace(folder.find('/'), 1, "--");
    const std::string root = cache + "/" + folder, snap = root + "/snapshots/" + hf_commit;
    fs::create_directories(root + "/blobs");
    fs::create_directories(root + "/refs");
    fs::create_directories(snap);
    std::ofstream(root + "/refs/main", std::ios::binary) << hf_commit;
    for (const hub_server_file& f : files) {
        const std::string etag = f.lfs ? hub_server::sha256_hex(f.bytes) : hub_server::git_blob_id(f.bytes);
        std::ofstream(root + "/blobs/" + etag, std::ios::binary) << f.bytes;
        fs::create_symlink("../../blobs/" + etag, snap + "/" + f.path);
    }
    return snap;
}

// A tiny Llama GGUF pulled by Ollama as NAME:latest: its manifest and its blob (no extension). Returns the blob.
std::string write_ollama_model(const std::string& models, const std::string& name) {
    family_spec sp;
    sp.family = "llama";
    const tiny_family f = write_tiny_family(test_temp_dir("picker_llama"), sp);
    const std::string bytes = read_file(f.gguf_path), digest = hub_server::sha256_hex(bytes);
    const std::string blob = models + "/blobs/sha256-" + digest;
    fs::create_directories(models + "/blobs");
    std::ofstream(blob, std::ios::binary) << bytes;
    const std::string man = models + "/manifests/registry.ollama.ai/library/" + name;
    fs::create_directories(man);
    nlohmann::json j = {{"schemaVersion", 2},
                        {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
                        {"config", {{"mediaType", "application/vnd.docker.container.image.v1+json"},
                                    {"digest", "sha256:" + std::string(64, '0')}, {"size", 2}}},
                        {"layers", {{{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + digest},
                                     {"size", bytes.size()}}}}};
    std::ofstream(man + "/latest") << j.dump();
    return blob;
}

const nlohmann::json* found_entry(const nlohmann::json& st, const std::string& source, const std::string& name) {
    for (const nlohmann::json& m : st["picker"]["found"])
        if (m["source"] == source && m["name"] == name) return &m;
    return nullptr;
}

} // namespace

TEST(GuiPicker, ListsAndOpensTheModelsOnThisMachine) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    const std::string home = test_temp_dir("picker_home");
    const std::string snap = write_hub_cache(home + "/.cache/huggingface/hub", "test-org/tiny-gpt2",
                                             tiny_gpt2_files("picker_cached", 2, 16, 31));
    const std::string blob = write_ollama_model(home + "/.ollama/models", "tinyllama");
    fs::create_directories(home + "/.lmstudio/models/test-org/junk");
    std::ofstream(home + "/.lmstudio/models/test-org/junk/broken.gguf") << "not a model at all";
    const std::string start = write_tiny_gpt2(test_temp_dir("picker_start"), tiny_spec{}).dir;
    int rc = -1;
    // the picker opens with Ctrl+O; Down moves to the second row, Enter opens it; then a double-click opens the
    // cached HF model; the File tab opens a name; the File menu lists the recent models and opens one
    const std::string script =
        "wait\nkey ctrl+o\npicker-wait\nframes 3\nprint\n"
        "key down\nprint\nkey enter\npicker-wait\nwait\nprint\n"
        "picker machine\npicker-wait\ndclick model hf test-org/tiny-gpt2\npicker-wait\nwait\nprint\n"
        "picker file\npicker-path ollama:tinyllama\nframes 2\nkey enter\npicker-wait\nwait\nprint\n"
        "open hf:test-org/tiny-gpt2\nwait\nprint\n"
        "picker machine\npicker-wait\npicker-filter no-such-model\nframes 2\nprint\nkey escape\nframes 2\nprint\n"
        "click file menu\nclick file recent " + blob + "\nwait\nprint\n"
        "key ctrl+o\npicker-wait\npicker-filter broken\nframes 2\nkey enter\nframes 2\nprint\n"
        "key ctrl+tab\nframes 3\nprint\nkey escape\n";
    auto states = run_script("--model " + sq(start) + " --prompt 'the cat sat'", script, &rc, home_env(home, "HF_HUB_OFFLINE=1"));
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 11u);

    const nlohmann::json& listed = states[0];
    EXPECT_TRUE(listed["picker"]["open"]);
    EXPECT_EQ(listed["picker"]["tab"], "machine");
    const nlohmann::json* hf = found_entry(listed, "hf", "test-org/tiny-gpt2");
    const nlohmann::json* ol = found_entry(listed, "ollama", "tinyllama:latest");
    ASSERT_TRUE(hf) << listed["picker"]["found"].dump();
    ASSERT_TRUE(ol) << listed["picker"]["found"].dump();
    EXPECT_EQ((*hf)["path"], snap);
    EXPECT_EQ((*hf)["format"], "hf");
    EXPECT_EQ((*hf)["family"], "gpt2");
    EXPECT_TRUE((*hf)["openable"]);
    EXPECT_EQ((*ol)["path"], blob);
    EXPECT_EQ((*ol)["format"], "gguf");
    EXPECT_EQ((*ol)["family"], "llama");
    EXPECT_TRUE((*ol)["openable"]) << (*ol)["reason"];
    EXPECT_EQ(listed["picker"]["selected"], "test-org/tiny-gpt2") << "the first row (hf comes first)";
    EXPECT_EQ(listed["model"], start);

    EXPECT_EQ(states[1]["picker"]["selected"], "tinyllama:latest") << "Down moved the selection";
    EXPECT_EQ(states[2]["model"], blob) << "Enter opened the Ollama blob (a GGUF without extension)";
    EXPECT_FALSE(states[2]["picker"]["open"]) << "the picker closes once the model has loaded";
    EXPECT_EQ(states[2]["error"], "");
    EXPECT_FALSE(states[2]["tokens"].empty());

    EXPECT_EQ(states[3]["model"], snap) << "a double-click opened the cached HF model";
    EXPECT_EQ(states[3]["error"], "");

    EXPECT_EQ(states[4]["error"], "") << states[4]["picker"]["error"];
    EXPECT_EQ(states[4]["recent"][0], "ollama:tinyllama") << "the name opened and is remembered as typed";
    EXPECT_NE(states[4]["model"], snap);

    EXPECT_EQ(states[5]["model"], snap) << "the Model panel's box opens a name (from the cache)";
    EXPECT_EQ(states[5]["error"], "");
    EXPECT_EQ(states[5]["recent"][0], "hf:test-org/tiny-gpt2");

    EXPECT_TRUE(states[6]["picker"]["rows"].empty()) << "the filter hides every row";
    EXPECT_TRUE(states[6]["picker"]["open"]);
    EXPECT_FALSE(states[7]["picker"]["open"]) << "Esc closes it";

    EXPECT_EQ(states[8]["model"], blob) << "opened from the File menu's recent models";
    EXPECT_EQ(states[8]["recent"][0], blob);

    // a file that is no model is listed with its reason; Enter on it says why in one line and opens nothing
    const nlohmann::json* junk = found_entry(states[9], "lmstudio", "test-org/junk/broken.gguf");
    ASSERT_TRUE(junk) << states[9]["picker"]["found"].dump();
    EXPECT_FALSE((*junk)["openable"]);
    EXPECT_NE((*junk)["reason"], "");
    EXPECT_EQ(states[9]["picker"]["rows"], nlohmann::json::array({"test-org/junk/broken.gguf"}));
    const std::string why = states[9]["picker"]["error"];
    EXPECT_EQ(why, "test-org/junk/broken.gguf: " + (*junk)["reason"].get<std::string>());
    EXPECT_EQ(why.find('\n'), std::string::npos);
    EXPECT_TRUE(states[9]["picker"]["open"]);
    EXPECT_EQ(states[9]["model"], blob);

    EXPECT_EQ(states[10]["picker"]["tab"], "hf") << "Ctrl+Tab: the next tab";
}

TEST(GuiPicker, DownloadsFromTheHubWithProgressAndCancels) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    const std::string home = test_temp_dir("picker_dl_home");
    hub_server hub;
    hub_server_repo small;
    small.repo = "test-org/dl-gpt2";
    small.commit = "1111111111111111111111111111111111111111";
    small.files = tiny_gpt2_files("picker_dl_small", 2, 64, 41); // some 30 chunks: the bar is seen
    small.files.push_back({"README.md", "a tiny model\n", false, ""}); // listed, not fetched
    hub.add_repo(small);
    hub_server_repo big; // slow enough to cancel: a few MB in 16 KiB chunks, each after a pause
    big.repo = "test-org/big-gpt2";
    big.commit = "2222222222222222222222222222222222222222";
    big.files = tiny_gpt2_files("picker_dl_big", 4, 128, 42);
    hub.add_repo(big);
    hub_server_repo quants; // a GGUF repo: two quants to choose from (the same tiny Llama under both names)
    quants.repo = "test-org/tiny-GGUF";
    quants.commit = "3333333333333333333333333333333333333333";
    family_spec fs_spec;
    fs_spec.family = "llama";
    const std::string gguf = read_file(write_tiny_family(test_temp_dir("picker_dl_gguf"), fs_spec).gguf_path);
    quants.files = {{"tiny-F32.gguf", gguf, true, ""}, {"tiny-Q8_0.gguf", gguf, true, ""}, {"README.md", "quants\n", false, ""}};
    hub.add_repo(quants);
    hub.set_chunk_delay_ms(50); // the small download takes over a second: its bar is drawn on the way
    const std::string start = write_tiny_gpt2(test_temp_dir("picker_dl_start"), tiny_spec{}).dir;
    const std::string script =
        "wait\npicker hf\npicker-repo test-org/no-such-repo\npicker-wait\nprint\n"
        "picker-repo test-org/dl-gpt2\npicker-wait\nprint\n"
        "click picker download\npicker-wait downloading\nprint\npicker-wait\nwait\nprint\n"
        "picker hf\npicker-repo test-org/tiny-GGUF\npicker-wait\nprint\npicker-gguf tiny-F32.gguf\nframes 2\nkey enter\n"
        "picker-wait\nwait\nprint\n"
        "picker hf\npicker-repo test-org/big-gpt2\npicker-wait\nclick picker download\npicker-wait downloading\n"
        "click picker cancel\npicker-wait\nprint\n";
    int rc = -1;
    auto states = run_script("--model " + sq(start) + " --prompt 'the cat sat'", script, &rc,
                             home_env(home, "HF_ENDPOINT=" + hub.endpoint()));
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 7u);
    const std::string cache = home + "/.cache/huggingface/hub";

    EXPECT_NE(states[0]["picker"]["error"], "") << "a missing repo is one line in the picker";
    EXPECT_EQ(states[0]["picker"]["error"].get<std::string>().find('\n'), std::string::npos);
    EXPECT_EQ(states[0]["model"], start) << "the app keeps its model";

    const nlohmann::json& listed = states[1]["picker"]["repo"];
    EXPECT_EQ(listed["repo"], "test-org/dl-gpt2");
    EXPECT_EQ(listed["commit"], small.commit);
    ASSERT_EQ(listed["files"].size(), small.files.size());
    for (const hub_server_file& f : small.files) {
        bool seen = false;
        for (const nlohmann::json& lf : listed["files"])
            if (lf["path"] == f.path) {
                seen = true;
                EXPECT_EQ(lf["size"], f.bytes.size()) << f.path;
            }
        EXPECT_TRUE(seen) << f.path;
    }

    const nlohmann::json& going = states[2]["picker"]["download"];
    EXPECT_TRUE(going["running"]);
    EXPECT_GT(going["max_shown"].get<int64_t>(), 0) << "the bar showed bytes";
    int64_t need = 0;
    for (const hub_server_file& f : small.files)
        if (f.path != "README.md") need += (int64_t)f.bytes.size();
    EXPECT_EQ(going["total"], need) << "the needed files' bytes, from the repo's list";

    const std::string snap = cache + "/models--test-org--dl-gpt2/snapshots/" + small.commit;
    EXPECT_EQ(states[3]["model"], snap) << states[3]["picker"]["error"];
    EXPECT_FALSE(states[3]["picker"]["open"]);
    EXPECT_FALSE(states[3]["picker"]["download"]["running"]);
    for (const hub_server_file& f : small.files)
        if (f.path != "README.md") {
            EXPECT_EQ(read_file(snap + "/" + f.path), f.bytes) << f.path;
        }
    EXPECT_TRUE(fs::is_symlink(snap + "/model.safetensors"));
    EXPECT_FALSE(fs::exists(snap + "/README.md")) << "only what the model needs";

    // a GGUF repo offers its quants, Q8_0 first; the one chosen (Enter downloads the repo listed) is fetched alone
    EXPECT_EQ(states[4]["picker"]["repo"]["ggufs"], nlohmann::json::array({"tiny-F32.gguf", "tiny-Q8_0.gguf"}));
    EXPECT_EQ(states[4]["picker"]["repo"]["gguf"], "tiny-Q8_0.gguf");
    const std::string qsnap = cache + "/models--test-org--tiny-GGUF/snapshots/" + quants.commit;
    EXPECT_EQ(states[5]["model"], qsnap + "/tiny-F32.gguf") << states[5]["picker"]["error"];
    EXPECT_EQ(states[5]["error"], "");
    EXPECT_FALSE(fs::exists(qsnap + "/tiny-Q8_0.gguf"));
    const std::string qmodel = states[5]["model"];

    EXPECT_EQ(states[6]["picker"]["note"], "download cancelled") << states[6]["picker"]["error"];
    EXPECT_TRUE(states[6]["picker"]["download"]["cancelled"]);
    EXPECT_EQ(states[6]["model"], qmodel) << "the app keeps its model";
    // nothing half-written in snapshots/: the weights cut short are not linked, and a file linked before them
    // (hub_download links each file once it is whole) is whole
    const std::string big_snap = cache + "/models--test-org--big-gpt2/snapshots/" + big.commit;
    EXPECT_FALSE(fs::exists(big_snap + "/model.safetensors"));
    std::error_code ec;
    for (fs::recursive_directory_iterator it(cache + "/models--test-org--big-gpt2/snapshots", ec), end; !ec && it != end; it.increment(ec)) {
        if (fs::is_directory(it->path())) continue;
        const std::string name = it->path().filename().string();
        auto served = std::find_if(big.files.begin(), big.files.end(), [&](const hub_server_file& f) { return f.path == name; });
        ASSERT_NE(served, big.files.end()) << it->path();
        EXPECT_EQ(read_file(it->path().string()), served->bytes) << it->path();
    }
}

// Browse... with the in-app browser (GLASSBOX_FILE_DIALOG=app, what a machine without zenity or kdialog gets): the
// Model panel's button opens a model folder typed into the browser's path line (~ is home), and the Features
// tab's button walks from home into a folder and opens the SAELens folder in it with double-clicks; the listing
// shows folders to enter with a '/', the choices without, and leaves other files out.
TEST(GuiPicker, InAppFileBrowserOpensAModelAndAnSae) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    const std::string home = test_temp_dir("browse_home");
    tiny_spec sp;
    sp.d_model = 32, sp.n_layer = 2, sp.seed = 7;
    const std::string start = write_tiny_gpt2(home + "/models/first", sp).dir;
    sp.seed = 8;
    const std::string second = write_tiny_gpt2(home + "/models/second", sp).dir;
    gb::write_sae_saelens(home + "/saes/sae-l1", random_sae(gb::SAE_TOPK, 32, 32, 48, "resid_post", "resid_post", 1, 9));
    std::ofstream(home + "/saes/notes.txt") << "not an SAE";
    int rc = -1;
    const std::string script =
        "wait\nclick browse model path\nframes 3\nprint\n"
        "type ~/models/second\nkey enter\nwait\nprint\n"
        "tab features\nwait\nclick browse sae path\nframes 3\nprint\n"
        "dclick browse entry saes\nframes 3\nprint\n"
        "dclick browse entry sae-l1\nwait\nframes 3\nprint\n";
    auto st = run_script("--model " + sq(start) + " --prompt 'the cat sat'", script, &rc,
                         home_env(home, "GLASSBOX_FILE_DIALOG=app"));
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 5u);
    EXPECT_TRUE(st[0]["file_dialog"]["open"]);
    EXPECT_EQ(st[0]["file_dialog"]["owner"], "model path");
    EXPECT_FALSE(st[1]["file_dialog"]["open"]);
    EXPECT_EQ(st[1]["model"], second) << "the typed path opened";
    EXPECT_EQ(st[1]["error"], "");
    EXPECT_TRUE(st[2]["file_dialog"]["open"]);
    EXPECT_EQ(st[2]["file_dialog"]["dir"], fs::path(home).lexically_normal().string()) << "an empty box starts at home";
    EXPECT_EQ(st[2]["file_dialog"]["entries"], nlohmann::json::array({"models/", "saes/"}));
    EXPECT_EQ(st[3]["file_dialog"]["entries"], nlohmann::json::array({"sae-l1"})) << "notes.txt is no SAE";
    EXPECT_FALSE(st[4]["file_dialog"]["open"]);
    ASSERT_EQ(st[4]["features"]["saes"].size(), 1u) << st[4]["error"];
    EXPECT_EQ(st[4]["features"]["saes"][0]["path"], home + "/saes/sae-l1");
    EXPECT_EQ(st[4]["error"], "");
    // model B's box in its popup has Browse... too: the in-app browser closes the popup, its answer still opens B
    st = run_script("--model " + sq(start) + " --prompt 'the cat sat'",
                    "wait\nclick Model B\nframes 2\nclick browse model B path\nframes 3\nprint\n"
                    "type ~/models/second\nkey enter\nwait\nframes 5\nwait\nprint\n",
                    &rc, home_env(home, "GLASSBOX_FILE_DIALOG=app"));
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0]["file_dialog"]["owner"], "model B path");
    EXPECT_FALSE(st[1]["file_dialog"]["open"]);
    EXPECT_EQ(st[1]["model_b"], second) << st[1]["error"];
    // and the picker's File tab: the browser replaces the picker, its answer opens the model
    st = run_script("--model " + sq(start) + " --prompt 'the cat sat'",
                    "wait\npicker file\nframes 3\nclick browse picker path\nframes 3\nprint\n"
                    "type ~/models/second\nkey enter\nwait\nframes 5\nwait\nprint\n",
                    &rc, home_env(home, "GLASSBOX_FILE_DIALOG=app"));
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0]["file_dialog"]["owner"], "picker path");
    EXPECT_EQ(st[1]["model"], second) << st[1]["error"];
}
