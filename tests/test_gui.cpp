// Desktop app end to end under Xvfb: the screenshot mode really draws heatmaps, and injected input
// (typing, clicking "No attention") changes what the app shows.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <sys/wait.h>
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

#include "test_util.h"
#include "tiny_model.h"

namespace {

const std::string app = std::string(GLASSBOX_BINARY_DIR) + "/glassbox";

bool have_app() { return std::ifstream(app).good(); }

int run(const std::string& cmd, std::string* out = nullptr) {
    command_result r = run_command(cmd);
    if (out) *out = r.out;
    if (!r.err.empty()) std::fprintf(stderr, "%s", r.err.c_str());
    return r.code;
}

std::string xvfb(const std::string& args) {
    return "xvfb-run -a -s '-screen 0 1600x1000x24' '" + app + "' " + args;
}

// A tiny GPT-2 for the app tests, written into test_tmp/<name>.
tiny_model write_gui_model(const std::string& name, int n_layer, int n_head, int d_model, uint32_t seed) {
    tiny_spec s;
    s.n_layer = n_layer;
    s.n_head = n_head;
    s.d_model = d_model;
    s.n_ctx = 64;
    s.seed = seed;
    return write_tiny_gpt2(test_temp_dir(name), s);
}

const tiny_model& gui_model() {
    static tiny_model tm = write_gui_model("gui_model", 3, 4, 32, 11);
    return tm;
}

// A second model of another shape (4 layers x 6 heads), for sessions that name it.
const tiny_model& other_model() {
    static tiny_model tm = write_gui_model("gui_model_b", 4, 6, 48, 12);
    return tm;
}

// Runs the app with a script; returns every line it printed as JSON (the script's "print" commands).
std::vector<nlohmann::json> run_script(const std::string& args, const std::string& script, int* rc,
                                       const std::string& env = "") {
    static int n = 0;
    std::string path = test_temp_dir("gui_steps") + "/script" + std::to_string(n++) + ".txt";
    std::ofstream(path) << script;
    std::string out;
    *rc = run(env + xvfb(args + " --script '" + path + "'"), &out);
    std::vector<nlohmann::json> states;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] == '{') states.push_back(nlohmann::json::parse(line));
    return states;
}

// s in single quotes for the shell
std::string sq(const std::string& s) { return "'" + s + "'"; }

} // namespace

TEST(Gui, ScreenshotModeDrawsHeatmaps) {
    ASSERT_TRUE(have_app()) << app << " was not built (needs libimgui-dev, libglfw3-dev, libepoxy-dev)";
    std::string png = test_temp_dir("gui_shot") + "/shot.png";
    int rc = run(xvfb("--model '" + gui_model().dir + "' --prompt 'the cat sat on the mat' --select-head 1.2 "
                      "--screenshot '" + png + "' --size 1600x1000"));
    ASSERT_EQ(rc, 0) << "the app failed (its stderr is above; xvfb-run comes from tools/setup.sh)";
    int w, h, n;
    unsigned char* px = stbi_load(png.c_str(), &w, &h, &n, 3);
    ASSERT_NE(px, nullptr);
    EXPECT_EQ(w, 1600);
    EXPECT_EQ(h, 1000);
    // the attention grid occupies the middle column's top part: heatmaps give it many distinct colours
    std::set<uint32_t> colours;
    for (int y = 170; y < 480; y++)
        for (int x = 420; x < 1080; x++) {
            const unsigned char* p = px + ((size_t)y * w + x) * 3;
            colours.insert((uint32_t)p[0] << 16 | p[1] << 8 | p[2]);
        }
    stbi_image_free(px);
    EXPECT_GT(colours.size(), 150u) << "the attention panel shows too few colours for heatmaps";
}

TEST(Gui, BadModelFailsWithOneLineError) {
    ASSERT_TRUE(have_app());
    int rc = run(xvfb("--model /nonexistent/model --screenshot /tmp/never.png"));
    EXPECT_EQ(rc, 2);
    EXPECT_EQ(run("'" + app + "' --size 3"), 2);
}

TEST(Gui, TypingAndAblationChangeWhatIsShown) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_script");
    std::ofstream(dir + "/script.txt") << "wait\nprint\n"
                                          "click prompt\nkey end\ntype  sat on the\nwait\nprint\n"
                                          "click No attention\nwait\nprint\n"
                                          "rclick head 0.1\nwait\nprint\n";
    std::string out;
    int rc = run(xvfb("--model '" + gui_model().dir + "' --prompt 'the cat' --script '" + dir + "/script.txt'"), &out);
    ASSERT_EQ(rc, 0) << out;
    std::vector<nlohmann::json> states;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] == '{') states.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(states.size(), 4u) << out;
    EXPECT_GT(states[1]["tokens"].size(), states[0]["tokens"].size()) << "typing adds tokens";
    EXPECT_EQ(states[1]["tokens"].back(), " the");
    EXPECT_EQ(states[1]["ablation"], "none");
    EXPECT_EQ(states[2]["ablation"], "no-attention");
    EXPECT_NE(states[2]["top1"], states[1]["top1"]) << "no attention changes the prediction";
    EXPECT_EQ(states[3]["ablation"], "no-attention heads 0.1");
}

TEST(Gui, GpuBackendShowsTheSamePrediction) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_gl");
    std::ofstream(dir + "/script.txt") << "wait\nprint\n";
    std::string cpu, gl;
    std::string args = "--model '" + gui_model().dir + "' --prompt 'the cat sat on' --script '" + dir + "/script.txt'";
    ASSERT_EQ(run(xvfb(args), &cpu), 0);
    ASSERT_EQ(run(xvfb(args + " --backend gl"), &gl), 0);
    auto a = nlohmann::json::parse(cpu.substr(cpu.find('{'))), b = nlohmann::json::parse(gl.substr(gl.find('{')));
    EXPECT_EQ(a["top1"], b["top1"]);
    std::string status = b["gl"];
    EXPECT_TRUE(status.find("GPU:") == 0 || status.find("fallback") != std::string::npos) << status;
}

TEST(Gui, StartupAblationAndSelectionSurviveTheModelLoad) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat sat on the mat' "
                             "--ablate no-layernorm --heads 1.2 --select-head 2.1 --select-token 3",
                             "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["ablation"], "no-layernorm heads 1.2");
    EXPECT_EQ(states[0]["selected_head"], "2.1") << "the requested head, not a default pick";
    EXPECT_EQ(states[0]["selected_token"], 3);
    EXPECT_EQ(states[0]["warning"], "");
    double kl = states[0]["kl"];
    EXPECT_GT(kl, 0.0) << "no LayerNorm changes the distribution";
    EXPECT_TRUE(std::isfinite(kl));
}

TEST(Gui, StartupSettingsThatDoNotFitAreReported) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat' --heads 7.1 --select-head 9.0",
                             "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["ablation"], "none");
    std::string w = states[0]["warning"];
    EXPECT_NE(w.find("7.1"), std::string::npos) << w;
    EXPECT_NE(w.find("9.0"), std::string::npos) << w;
    EXPECT_EQ(states[0]["kl"], 0.0);
}

TEST(Gui, SessionFileSettingsAreApplied) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_session");
    nlohmann::json j = {{"glassbox_session", 1},
                        {"model", gui_model().dir},
                        {"prompt", "the cat sat on"},
                        {"bos", false},
                        {"ablation",
                         {{"no_residual", {{"on", false}, {"layers", nlohmann::json::array()}}},
                          {"no_layernorm", {{"on", false}, {"layers", nlohmann::json::array()}}},
                          {"no_attention", {{"on", true}, {"layers", {1}}}},
                          {"heads", {{0, 3}}}}},
                        {"selected_head", {1, 2}},
                        {"selected_token", 2}};
    std::ofstream(dir + "/s.json") << j.dump();
    int rc = -1;
    auto states = run_script("--session " + sq(dir + "/s.json"), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["model"], gui_model().dir) << "the session's model is opened";
    EXPECT_EQ(states[0]["prompt"], "the cat sat on");
    EXPECT_EQ(states[0]["ablation"], "no-attention[1] heads 0.3");
    EXPECT_EQ(states[0]["selected_head"], "1.2");
    EXPECT_EQ(states[0]["selected_token"], 2);
    EXPECT_EQ(states[0]["warning"], "");
}

TEST(Gui, SessionForAnotherModelIsCheckedAgainstThatModel) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_session_b");
    auto session = [&](const std::string& name, int layer, int head) {
        nlohmann::json j = {{"glassbox_session", 1},
                            {"model", other_model().dir},
                            {"prompt", "a dog"},
                            {"ablation",
                             {{"no_residual", {{"on", false}}},
                              {"no_layernorm", {{"on", false}}},
                              {"no_attention", {{"on", false}}},
                              {"heads", {{layer, head}}}}},
                            {"selected_head", {layer, head}}};
        std::ofstream(dir + "/" + name) << j.dump();
        return dir + "/" + name;
    };
    // head 3.5 exists only in the other model (4 x 6), not in the one open (3 x 4); 9.9 in neither
    std::string fits = session("fits.json", 3, 5), too_big = session("too_big.json", 9, 9);
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat'",
                             "wait\nprint\nsession " + fits + "\nwait\nprint\nsession " + too_big + "\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    EXPECT_EQ(states[1]["model"], other_model().dir);
    EXPECT_EQ(states[1]["ablation"], "heads 3.5") << states[1].dump();
    EXPECT_EQ(states[1]["selected_head"], "3.5");
    EXPECT_EQ(states[1]["error"], "");
    EXPECT_EQ(states[1]["warning"], "");
    EXPECT_EQ(states[2]["ablation"], "none");
    std::string w = states[2]["warning"];
    EXPECT_NE(w.find("9.9"), std::string::npos) << "a clear message: " << w;
}

TEST(Gui, ModelThatFailsToLoadKeepsThePreviousOne) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat sat'",
                             "wait\nprint\nopen /nonexistent/model\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    EXPECT_EQ(states[0]["error"], "");
    std::string e = states[1]["error"];
    EXPECT_NE(e.find("cannot load model"), std::string::npos) << e;
    EXPECT_NE(e.find("/nonexistent/model"), std::string::npos) << e;
    EXPECT_EQ(states[1]["model"], gui_model().dir) << "the previous model stays";
    EXPECT_EQ(states[1]["tokens"], states[0]["tokens"]) << "and its result";
    EXPECT_EQ(states[1]["top1"], states[0]["top1"]);
}

TEST(Gui, TooLongPromptShowsTheTruncationNotice) {
    ASSERT_TRUE(have_app());
    std::string words;
    for (int i = 0; i < 60; i++) words += "the cat sat on the mat ";
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt '" + words + "'", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["tokens"].size(), (size_t)gui_model().config.n_ctx) << "the last n_ctx tokens";
    std::string notice = states[0]["notice"];
    EXPECT_NE(notice.find("truncated"), std::string::npos) << notice;
    EXPECT_EQ(states[0]["error"], "");
}

TEST(Gui, AppendAddsTheContinuationToTheEditedPrompt) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat'",
                             "wait\nclick Generate\nwait\nprint\nclick prompt\nkey end\ntype  sat\nwait\n"
                             "click Append to prompt\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    std::string generated = states[0]["generated"];
    ASSERT_FALSE(generated.empty());
    EXPECT_EQ(states[1]["prompt"], "the cat sat" + generated) << "the edit made after generating stays";
}

TEST(Gui, RecentModelsAreRememberedOnlyWhereAsked) {
    ASSERT_TRUE(have_app());
    std::string cfg = test_temp_dir("gui_config");
    std::string env = "GLASSBOX_CONFIG_DIR=" + sq(cfg) + " ";
    int rc = -1;
    run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat'", "wait\n", &rc, env);
    ASSERT_EQ(rc, 0);
    auto states = run_script("--model " + sq(other_model().dir) + " --prompt 'the cat'", "wait\nprint\n", &rc, env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["recent"], nlohmann::json::array({other_model().dir, gui_model().dir}));
    // without GLASSBOX_CONFIG_DIR a headless run reads and writes nothing
    states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat'", "wait\nprint\n", &rc,
                        "HOME=" + sq(cfg + "/home") + " XDG_CONFIG_HOME= ");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["recent"], nlohmann::json::array({gui_model().dir}));
    EXPECT_FALSE(std::ifstream(cfg + "/home/.config/glassbox/recent.txt").good());
}

TEST(Gui, ScaleChangeRecoloursTheHeatmapsOffTheUiThread) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat sat on the mat'",
                             "wait\nprint\nscale log\nwait\nprint\nscale rowmax\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    EXPECT_EQ(states[0]["heatmap_scale"], "linear");
    EXPECT_EQ(states[1]["heatmap_scale"], "log");
    EXPECT_EQ(states[2]["heatmap_scale"], "rowmax");
    EXPECT_EQ(states[2]["tokens"], states[0]["tokens"]) << "same result, only re-coloured";
}
