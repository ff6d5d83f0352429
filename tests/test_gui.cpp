// Desktop app end to end under Xvfb: the screenshot mode really draws heatmaps, and injected input
// (typing, clicking "No attention") changes what the app shows.
#include <gtest/gtest.h>

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

const tiny_model& gui_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 3;
        s.n_head = 4;
        s.d_model = 32;
        s.n_ctx = 64;
        s.seed = 11;
        return write_tiny_gpt2(test_temp_dir("gui_model"), s);
    }();
    return tm;
}

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
