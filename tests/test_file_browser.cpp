// Browse...'s in-app file browser without a window (app/gui/file_browser.h): what each kind of path box takes,
// the listing's order and filters, and navigation. The window itself is driven in tests/test_gui_picker.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "file_browser.h"
#include "tiny_model.h"

namespace fs = std::filesystem;

namespace {

void touch(const fs::path& p, const std::string& bytes = "x") {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << bytes;
}

// names as listed, folders to enter with a trailing '/'
std::vector<std::string> names(const gbui::browse_listing& l) {
    std::vector<std::string> out;
    for (const gbui::browse_entry& e : l.entries) out.push_back(e.name + (e.dir ? "/" : ""));
    return out;
}

std::string tree() {
    const std::string root = test_temp_dir("file_browser");
    touch(root + "/Zeta/readme.txt");
    touch(root + "/alpha/readme.txt");
    touch(root + "/gpt2/config.json", "{}");     // a Hugging Face model folder: opens, is not entered
    touch(root + "/sae-l2/cfg.json", "{}");      // SAELens's folder
    touch(root + "/tc/layer_0.safetensors");     // a transcoder set
    touch(root + "/model.gguf", "GGUF....");
    touch(root + "/stories.bin");
    touch(root + "/notes.txt", "hello");
    touch(root + "/Picture.PNG");
    touch(root + "/vec.npy");
    touch(root + "/session.json");
    touch(root + "/.hidden/x");
    return root;
}

} // namespace

TEST(FileBrowser, ListsWhatEachKindTakesFoldersFirst) {
    const std::string root = tree();
    using gbui::list_folder;
    EXPECT_EQ(names(list_folder(root, gbui::BROWSE_MODEL)),
              (std::vector<std::string>{"alpha/", "sae-l2/", "tc/", "Zeta/", "gpt2", "model.gguf", "stories.bin"}));
    EXPECT_EQ(names(list_folder(root, gbui::BROWSE_SAE)),
              (std::vector<std::string>{"alpha/", "gpt2/", "tc/", "Zeta/", "sae-l2"}));
    EXPECT_EQ(names(list_folder(root, gbui::BROWSE_TRANSCODERS)),
              (std::vector<std::string>{"alpha/", "gpt2/", "sae-l2/", "Zeta/", "tc"}));
    EXPECT_EQ(names(list_folder(root, gbui::BROWSE_IMAGE)),
              (std::vector<std::string>{"alpha/", "gpt2/", "sae-l2/", "tc/", "Zeta/", "Picture.PNG"}));
    EXPECT_EQ(names(list_folder(root, gbui::BROWSE_CONTROL_VECTOR)),
              (std::vector<std::string>{"alpha/", "gpt2/", "sae-l2/", "tc/", "Zeta/", "model.gguf", "vec.npy"}));
    // a corpus may be any file; a folder box lists only folders
    EXPECT_EQ(list_folder(root, gbui::BROWSE_TEXT).entries.size(), 5u + 6u);
    EXPECT_EQ(names(list_folder(root, gbui::BROWSE_FOLDER)),
              (std::vector<std::string>{"alpha/", "gpt2/", "sae-l2/", "tc/", "Zeta/"}));
    // all files and hidden entries on request; a file's size comes with it
    const gbui::browse_listing all = list_folder(root, gbui::BROWSE_MODEL, true, true);
    EXPECT_EQ(all.entries.front().name, ".hidden");
    bool saw_notes = false;
    for (const gbui::browse_entry& e : all.entries)
        if (e.name == "notes.txt") {
            saw_notes = true;
            EXPECT_FALSE(e.choice);
            EXPECT_EQ(e.bytes, 5);
        }
    EXPECT_TRUE(saw_notes);
    EXPECT_EQ(list_folder(root, gbui::BROWSE_MODEL).dir, fs::path(root).lexically_normal().string());
}

TEST(FileBrowser, AcceptsAndNavigates) {
    const std::string root = tree();
    EXPECT_TRUE(gbui::browse_accepts(root + "/gpt2", gbui::BROWSE_MODEL));
    EXPECT_TRUE(gbui::browse_accepts(root + "/model.gguf", gbui::BROWSE_MODEL));
    EXPECT_FALSE(gbui::browse_accepts(root + "/alpha", gbui::BROWSE_MODEL));
    EXPECT_FALSE(gbui::browse_accepts(root + "/notes.txt", gbui::BROWSE_MODEL));
    EXPECT_TRUE(gbui::browse_accepts(root + "/notes.txt", gbui::BROWSE_TEXT));
    EXPECT_TRUE(gbui::browse_accepts(root + "/alpha", gbui::BROWSE_FOLDER));
    EXPECT_TRUE(gbui::browse_accepts(root + "/sae-l2", gbui::BROWSE_SAE));
    EXPECT_FALSE(gbui::browse_accepts(root + "/missing.gguf", gbui::BROWSE_MODEL));
    // Gemma Scope 2: a transcoder's layer folder and a cross-layer folder are choices; an SAE's layer folder, named
    // the same way, and the folder above the layer folders are not
    const std::string gs = root + "/gemma-scope-2-270m-pt";
    touch(gs + "/transcoder_all/layer_0_width_16k_l0_small/params.safetensors");
    touch(gs + "/transcoder_all/layer_0_width_16k_l0_small/config.json", R"({"type": "transcoder"})");
    touch(gs + "/resid_post/layer_0_width_16k_l0_small/params.safetensors");
    touch(gs + "/resid_post/layer_0_width_16k_l0_small/config.json", R"({"type": "sae"})");
    touch(gs + "/clt/width_262k_l0_medium_affine/params_layer_0.safetensors");
    EXPECT_TRUE(gbui::browse_accepts(gs + "/transcoder_all/layer_0_width_16k_l0_small", gbui::BROWSE_TRANSCODERS));
    EXPECT_TRUE(gbui::browse_accepts(gs + "/clt/width_262k_l0_medium_affine", gbui::BROWSE_TRANSCODERS));
    EXPECT_FALSE(gbui::browse_accepts(gs + "/resid_post/layer_0_width_16k_l0_small", gbui::BROWSE_TRANSCODERS));
    EXPECT_FALSE(gbui::browse_accepts(gs + "/transcoder_all", gbui::BROWSE_TRANSCODERS));
    EXPECT_EQ(gbui::parent_folder("/a/b"), "/a");
    EXPECT_EQ(gbui::parent_folder("/a"), "/");
    EXPECT_EQ(gbui::parent_folder("/"), "/");
    // a box holding a file starts in its folder; one holding nothing, or what is not there, at home
    // (a model folder is a choice: the browser shows it among its neighbours; a folder box browses the folder)
    const std::string norm = fs::path(root).lexically_normal().string();
    EXPECT_EQ(gbui::browse_start_folder(root + "/model.gguf", gbui::BROWSE_MODEL), norm);
    EXPECT_EQ(gbui::browse_start_folder(root + "/gpt2", gbui::BROWSE_MODEL), norm);
    EXPECT_EQ(gbui::browse_start_folder(root + "/alpha", gbui::BROWSE_MODEL), norm + "/alpha");
    EXPECT_EQ(gbui::browse_start_folder(root + "/gpt2", gbui::BROWSE_FOLDER), norm + "/gpt2");
    if (const char* home = std::getenv("HOME"); home && fs::is_directory(home)) {
        EXPECT_EQ(gbui::browse_start_folder("", gbui::BROWSE_SAE), home);
        EXPECT_EQ(gbui::browse_start_folder(root + "/nothing/here", gbui::BROWSE_SAE), home);
    }
    const gbui::browse_listing bad = gbui::list_folder(root + "/no such folder", gbui::BROWSE_MODEL);
    EXPECT_NE(bad.error.find("cannot read the folder"), std::string::npos) << bad.error;
    EXPECT_TRUE(bad.entries.empty());
}
