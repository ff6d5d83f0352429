// The app for a class: the text scale (its font rebuilt at the new pixel size, remembered, the keys), a panel
// filling the window, presentation mode, a panel's export as SVG and as a 2x PNG, and a layout whose captions,
// labels and chips stay inside their panels at 1280x720.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stb_image.h>
#include <vector>

#include "app_script.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

const tiny_model& scale_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 3, s.n_head = 4, s.d_model = 32, s.n_ctx = 96, s.seed = 21;
        return write_tiny_gpt2(test_temp_dir("scale_model"), s);
    }();
    return tm;
}

const std::string scale_prompt = "the cat sat on the mat and the cat sat";

// The app on the tiny model at w x h (an Xvfb screen as large), running the script; its printed states.
std::vector<nlohmann::json> run_at(int w, int h, const std::string& script, int* rc, const std::string& args = "",
                                   const std::string& env = "") {
    const std::string size = std::to_string(w) + "x" + std::to_string(h);
    std::string cmd_args = "--model " + sq(scale_model().dir) + " --prompt " + sq(scale_prompt) + " --size " + size + " " + args;
    // the screen as large as the window, at least the helper's usual 1600x1000
    const std::string screen = std::to_string(std::max(w, 1600)) + "x" + std::to_string(std::max(h, 1000));
    return run_script(cmd_args, script, rc, env, screen);
}

struct panel_box {
    float x0, y0, x1, y1;
};
panel_box rect_of(const nlohmann::json& state, const std::string& name) {
    const nlohmann::json& r = state.at("drawn").at(name);
    return {r[0].get<float>(), r[1].get<float>(), r[2].get<float>(), r[3].get<float>()};
}
bool rect_inside(const panel_box& in, const panel_box& out) {
    return in.x0 >= out.x0 - 0.5f && in.y0 >= out.y0 - 0.5f && in.x1 <= out.x1 + 0.5f && in.y1 <= out.y1 + 0.5f;
}

std::string read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Whether text is well-formed XML as the SVG writer makes it: a declaration, then elements whose tags nest and
// match, attributes as name="value", and no '<' or bare '&' in text or values. Returns "" or what is wrong.
std::string xml_problem(const std::string& text) {
    std::vector<std::string> open;
    auto entity_ok = [&](size_t at) {
        for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
            if (text.compare(at, std::strlen(e), e) == 0) return true;
        return false;
    };
    size_t i = 0;
    bool root_seen = false;
    while (i < text.size()) {
        if (text[i] != '<') {
            if (text[i] == '&' && !entity_ok(i)) return "a bare & at " + std::to_string(i);
            if (open.empty() && !std::isspace((unsigned char)text[i])) return "text outside the root at " + std::to_string(i);
            i++;
            continue;
        }
        const size_t end = text.find('>', i);
        if (end == std::string::npos) return "an unclosed tag at " + std::to_string(i);
        std::string tag = text.substr(i + 1, end - i - 1);
        i = end + 1;
        if (tag.front() == '?') continue; // the declaration
        if (tag.front() == '/') {
            if (open.empty() || open.back() != tag.substr(1)) return "</" + tag.substr(1) + "> closes nothing open";
            open.pop_back();
            continue;
        }
        const bool empty = tag.back() == '/';
        if (empty) tag.pop_back();
        const std::string name = tag.substr(0, tag.find_first_of(" \n"));
        if (name.empty() || !std::isalpha((unsigned char)name[0])) return "a tag without a name: <" + tag + ">";
        if (open.empty() && root_seen) return "a second root element <" + name + ">";
        root_seen = true;
        for (size_t a = name.size(); a < tag.size();) { // attributes: name="value"
            while (a < tag.size() && std::isspace((unsigned char)tag[a])) a++;
            if (a >= tag.size()) break;
            const size_t eq = tag.find('=', a);
            if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') return "a malformed attribute in <" + name + ">";
            const size_t close = tag.find('"', eq + 2);
            if (close == std::string::npos) return "an unclosed attribute value in <" + name + ">";
            const std::string value = tag.substr(eq + 2, close - eq - 2);
            if (value.find('<') != std::string::npos) return "a '<' in an attribute of <" + name + ">";
            a = close + 1;
        }
        if (!empty) open.push_back(name);
    }
    if (!open.empty()) return "<" + open.back() + "> is never closed";
    return root_seen ? "" : "no element";
}

size_t count_of(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
    return n;
}

} // namespace

TEST(GuiScale, TheScaleRebuildsTheFontAtItsSizeAndIsRemembered) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("scale_config");
    std::filesystem::remove_all(dir);
    const std::string env = "GLASSBOX_CONFIG_DIR=" + sq(dir) + " ";
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nprint\nui-scale 1.5\nframes 3\nprint\n", &rc, "", env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_FLOAT_EQ(st[0]["font_px"].get<float>(), 15.0f) << "100 % under Xvfb (its content scale is 1)";
    EXPECT_FLOAT_EQ(st[1]["ui_scale"].get<float>(), 1.5f);
    EXPECT_FLOAT_EQ(st[1]["font_px"].get<float>(), 23.0f) << "the atlas rebuilt at 15 px x 1.5, not stretched";
    const nlohmann::json saved = nlohmann::json::parse(read_all(dir + "/settings.json"));
    EXPECT_FLOAT_EQ(saved.at("ui_scale").get<float>(), 1.5f);
    // the next start begins at it; --ui-scale wins for one run and is not written
    st = run_at(1280, 720, "wait\nprint\n", &rc, "", env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_FLOAT_EQ(st[0]["font_px"].get<float>(), 23.0f);
    st = run_at(1280, 720, "wait\nprint\n", &rc, "--ui-scale 2", env);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_FLOAT_EQ(st[0]["font_px"].get<float>(), 30.0f);
    EXPECT_FLOAT_EQ(nlohmann::json::parse(read_all(dir + "/settings.json")).at("ui_scale").get<float>(), 1.5f);
    // a scale outside 60 .. 300 % is refused with one line
    command_result bad = run_command(sq(app_path()) + " --ui-scale 5");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--ui-scale"), std::string::npos) << bad.err;
}

TEST(GuiScale, CtrlKeysStepTheScaleAndCtrl0ResetsIt) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nkey ctrl+=\nframes 2\nprint\nkey ctrl+=\nframes 2\nprint\n"
                                "key ctrl+-\nkey ctrl+-\nkey ctrl+-\nframes 2\nprint\nkey ctrl+0\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 4u);
    EXPECT_FLOAT_EQ(st[0]["ui_scale"].get<float>(), 1.1f);
    EXPECT_FLOAT_EQ(st[0]["font_px"].get<float>(), 17.0f); // round(16.5)
    EXPECT_FLOAT_EQ(st[1]["ui_scale"].get<float>(), 1.25f);
    EXPECT_FLOAT_EQ(st[1]["font_px"].get<float>(), 19.0f);
    EXPECT_FLOAT_EQ(st[2]["ui_scale"].get<float>(), 0.9f);
    EXPECT_FLOAT_EQ(st[2]["font_px"].get<float>(), 14.0f);
    EXPECT_FLOAT_EQ(st[3]["ui_scale"].get<float>(), 1.0f) << "Ctrl+0: the monitor's content scale, 1 under Xvfb";
    EXPECT_FLOAT_EQ(st[3]["font_px"].get<float>(), 15.0f);
    // the View menu's steps are those of the keys
    st = run_at(1280, 720, "wait\nclick view menu\nframes 2\nclick text 200 %\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_FLOAT_EQ(st[0]["ui_scale"].get<float>(), 2.0f);
    EXPECT_FLOAT_EQ(st[0]["font_px"].get<float>(), 30.0f);
}

TEST(GuiScale, APanelFillsTheWindowAndEscapeReturns) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nprint\ndclick title Residual\nframes 2\nprint\nkey escape\nframes 2\nprint\n"
                                "click title Overview\nkey f11\nframes 2\nprint\nkey f11\nframes 2\nprint\n"
                                "maximise analysis\nframes 2\nprint\nrestore\nframes 2\nprint\n"
                                "dclick title Analysis\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 8u);
    const panel_box tiled = rect_of(st[0], "panel Residual");
    EXPECT_LT(tiled.x1 - tiled.x0, 500) << "the residual panel is a column of the tiled layout";
    EXPECT_EQ(st[1]["maximised"], "Residual");
    const panel_box full = rect_of(st[1], "panel Residual");
    EXPECT_GT(full.x1 - full.x0, 1250) << "a double-click on its title: it fills the window's width";
    EXPECT_GT(full.y1 - full.y0, 640);
    EXPECT_FALSE(st[1]["drawn"].contains("panel Overview")) << "the other panels are not drawn";
    EXPECT_EQ(st[2]["maximised"], "");
    EXPECT_TRUE(st[2]["drawn"].contains("panel Overview"));
    EXPECT_EQ(st[3]["focused_panel"], "Overview");
    EXPECT_EQ(st[3]["maximised"], "Overview") << "F11 on the focused panel";
    EXPECT_EQ(st[4]["maximised"], "") << "F11 again returns";
    EXPECT_EQ(st[5]["maximised"], "Analysis");
    EXPECT_EQ(st[6]["maximised"], "");
    EXPECT_EQ(st[7]["maximised"], "Analysis") << "a double-click on the tab bar (on a tab) fills the window too";
}

TEST(GuiScale, PresentationModeHidesTheFileRowsAndRaisesTheScale) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nmaximise model\nframes 2\nprint\nkey f5\nframes 3\nprint\n"
                                "key f5\nframes 3\nprint\npresent on\nframes 3\nkey escape\nframes 2\nprint\n"
                                "key escape\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 5u);
    EXPECT_TRUE(st[0]["drawn"].contains("model file rows")) << "Open, Save, Load and Export are there";
    EXPECT_FALSE(st[0]["presenting"].get<bool>());
    EXPECT_TRUE(st[1]["presenting"].get<bool>());
    EXPECT_FALSE(st[1]["drawn"].contains("model file rows")) << "F5 hides them";
    EXPECT_TRUE(st[1]["drawn"].contains("panel Model"));
    EXPECT_FLOAT_EQ(st[1]["ui_scale_shown"].get<float>(), 1.5f);
    EXPECT_FLOAT_EQ(st[1]["font_px"].get<float>(), 23.0f);
    EXPECT_GT(st[1]["large_font_px"].get<float>(), st[1]["font_px"].get<float>()) << "the caption's larger font";
    EXPECT_FLOAT_EQ(st[1]["ui_scale"].get<float>(), 1.0f) << "the chosen scale is kept for the way back";
    EXPECT_FALSE(st[2]["presenting"].get<bool>());
    EXPECT_FLOAT_EQ(st[2]["font_px"].get<float>(), 15.0f) << "restored on the way out";
    EXPECT_TRUE(st[2]["drawn"].contains("model file rows"));
    // Esc: first back from the maximised panel, then out of presentation mode
    EXPECT_TRUE(st[3]["presenting"].get<bool>());
    EXPECT_EQ(st[3]["maximised"], "");
    EXPECT_FALSE(st[4]["presenting"].get<bool>());
}

// The splitters between the columns and between the panels of a column move them, a double-click returns to the
// automatic size, and the next start has them where they were left.
TEST(GuiScale, SplittersMoveThePanelsAndAreRemembered) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("split_config");
    std::filesystem::remove_all(dir);
    const std::string env = "GLASSBOX_CONFIG_DIR=" + sq(dir) + " ";
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nframes 3\nprint\ndrag splitter left 120 0\nframes 2\ndrag splitter grid 0 -60\nframes 2\n"
                                "drag splitter right -50 0\nframes 2\ndrag splitter residual 0 40\nframes 2\nprint\n", &rc, "", env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const panel_box over0 = rect_of(st[0], "panel Overview"), over1 = rect_of(st[1], "panel Overview");
    const panel_box resid0 = rect_of(st[0], "panel Residual"), resid1 = rect_of(st[1], "panel Residual");
    EXPECT_NEAR(over1.x0 - over0.x0, 120, 2) << "the middle column starts where the left splitter was left";
    EXPECT_NEAR(over1.y1 - over0.y1, -60, 2) << "the grid's bottom follows its splitter";
    EXPECT_NEAR(resid1.x0 - resid0.x0, -50, 2) << "the right column is wider";
    EXPECT_NEAR(resid1.y0 - resid0.y0, 40, 2) << "the residual panel is shorter";
    EXPECT_NEAR(rect_of(st[1], "panel Analysis").y0 - over1.y1, 4, 1.5) << "the analyses follow the grid";
    const nlohmann::json saved = nlohmann::json::parse(read_all(dir + "/settings.json"));
    ASSERT_TRUE(saved.contains("layout")) << saved.dump();
    // the next start: where they were left; a double-click on one returns it to the automatic size
    st = run_at(1280, 720, "wait\nframes 3\nprint\ndclick splitter left\nframes 3\nprint\n", &rc, "", env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_NEAR(rect_of(st[0], "panel Overview").x0, over1.x0, 1);
    EXPECT_NEAR(rect_of(st[0], "panel Residual").y0, resid1.y0, 1);
    EXPECT_NEAR(rect_of(st[1], "panel Overview").x0, over0.x0, 1) << "the automatic width again";
    EXPECT_EQ(nlohmann::json::parse(read_all(dir + "/settings.json")).at("layout").at(0).get<float>(), 0.0f);
}

// The Ablations' explanations are paragraphs at the first start, a "(?)" at the later ones and when presenting;
// the View menu brings them back.
TEST(GuiScale, ExplanationsFoldOnceSeenAndWhenPresenting) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("explain_config");
    std::filesystem::remove_all(dir);
    const std::string env = "GLASSBOX_CONFIG_DIR=" + sq(dir) + " ";
    const std::string name = "explanation No residual";
    auto height = [&](const nlohmann::json& st) { const panel_box b = rect_of(st, name); return b.y1 - b.y0; };
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nframes 3\nprint\n", &rc, "", env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_GT(height(st[0]), 3 * 15.0f) << "the first start: the paragraphs";
    EXPECT_EQ(nlohmann::json::parse(read_all(dir + "/settings.json")).at("explanations"), "folded") << "for the next start";
    st = run_at(1280, 720, "wait\nframes 3\nprint\nclick view menu\nframes 2\nclick explanations in full\nframes 3\nprint\n"
                           "present on\nframes 3\nmaximise ablations\nframes 3\nprint\n", &rc, "", env);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    EXPECT_LT(height(st[0]), 20.0f) << "a later start: one (?) on the checkbox's line";
    EXPECT_GT(height(st[1]), 3 * 15.0f) << "the View menu brings them back";
    EXPECT_EQ(nlohmann::json::parse(read_all(dir + "/settings.json")).at("explanations"), "full") << "the choice is kept";
    EXPECT_LT(height(st[2]), 30.0f) << "presenting: folded whatever the choice";
}

// F5 gives the pictures the room: the prompt strip at most a quarter of the height, the demo's tab most of the
// width, the demo's caption and the side tabs beside it; the Temperature demo's sampled texts stay in view.
TEST(GuiScale, PresentationGivesThePicturesTheRoom) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    auto st = run_at(1280, 720, "wait\ndemo temperature\nwait\nframes 5\nprint\npresent on\nframes 5\nwait\nframes 5\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const panel_box tiled = rect_of(st[0], "panel Analysis"), shown = rect_of(st[1], "panel Analysis");
    const panel_box prompt_box = rect_of(st[1], "panel Prompt");
    EXPECT_TRUE(st[1]["presenting"].get<bool>());
    EXPECT_LE(prompt_box.y1 - prompt_box.y0, 0.25f * 720) << "the prompt and the caption take at most a quarter";
    EXPECT_GE(shown.x1 - shown.x0, 0.55f * 1280) << "the demo's tab takes most of the width";
    EXPECT_GE(shown.y1 - shown.y0, 0.6f * 720);
    EXPECT_GT((shown.x1 - shown.x0) * (shown.y1 - shown.y0), 2.0f * (tiled.x1 - tiled.x0) * (tiled.y1 - tiled.y0))
        << "at least twice the area of the tiled layout's";
    EXPECT_FALSE(st[1]["drawn"].contains("panel Model")) << "the controls leave the screen to the pictures";
    EXPECT_FALSE(st[1]["drawn"].contains("panel Ablations")) << "(they are a tab of the side panel)";
    EXPECT_FALSE(st[1]["drawn"].contains("panel Overview")) << "with a demo the grid is a tab beside Next token";
    EXPECT_TRUE(st[1]["drawn"].contains("panel Demo")) << "the caption beside the picture";
    EXPECT_TRUE(st[1]["drawn"].contains("panel Side"));
    for (int i = 0; i < 3; i++) { // the sampled texts, the demo's point, are in the panel's view
        const std::string w = "sampling text " + std::to_string(i);
        ASSERT_TRUE(st[1]["widgets"].contains(w)) << w;
        const auto& r = st[1]["widgets"][w];
        EXPECT_LE(r[3].get<float>(), shown.y1) << w << " is below the panel's bottom";
        EXPECT_GE(r[1].get<float>(), shown.y0) << w;
    }
    // Break it's steps stay in view above its long caption
    st = run_at(1280, 720, "wait\ndemo break-it\nwait\nframes 5\npresent on\nframes 5\nwait\nframes 5\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    ASSERT_TRUE(st[0]["widgets"].contains("break next"));
    const panel_box caption = rect_of(st[0], "panel Demo");
    EXPECT_LE(st[0]["widgets"]["break next"][3].get<float>(), caption.y1) << "Next is in the caption panel's view";
    EXPECT_GE(st[0]["widgets"]["break next"][1].get<float>(), caption.y0);
}

TEST(GuiScale, APanelExportsAsVectorSvgAndAs2xPng) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("panel_export");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nframes 3\nprint\nexport-panel residual " + dir + "\nprint\nexport-panel analysis " + dir +
                                    "\nexport-panel overview " + dir + "\nexport-panel output " + dir +
                                    "\ntab lens\nwait\nprint\nexport-panel analysis " + dir + "\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 4u);
    const std::vector<std::string> tokens = st[0]["tokens"];
    const int T = (int)tokens.size(), P = 2 * 3 + 1;
    EXPECT_EQ(st[1]["exported"], nlohmann::json({dir + "/glassbox-residual-stream.svg", dir + "/glassbox-residual-stream@2x.png"}));
    EXPECT_EQ(st[1]["error"], "");
    auto visible = [](std::string t) { // as the app shows tokens (a space as U+00B7), as XML text
        std::string out;
        for (char c : t) out += c == ' ' ? "\u00b7" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
        return out;
    };
    // residual: its heatmap as P x T cells, its axis captions and token labels as text
    const std::string resid = read_all(dir + "/glassbox-residual-stream.svg");
    EXPECT_EQ(xml_problem(resid), "");
    EXPECT_NE(resid.find("data-rows=\"" + std::to_string(P) + "\" data-columns=\"" + std::to_string(T) + "\""), std::string::npos);
    EXPECT_GE(count_of(resid, "<rect "), (size_t)(P * T));
    EXPECT_NE(resid.find(">residual point"), std::string::npos) << "the x caption is text";
    EXPECT_NE(resid.find(">" + visible(tokens[T - 1]) + "</text>"), std::string::npos) << "the selected token's column label";
    // the head view: T x T cells, the tokens as (turned) labels
    const std::string head = read_all(dir + "/glassbox-head-L" + st[0]["selected_head"].get<std::string>().substr(0, 1) + "H" +
                                      st[0]["selected_head"].get<std::string>().substr(2) + ".svg");
    ASSERT_FALSE(head.empty()) << "the head view's file is named after its head";
    EXPECT_EQ(xml_problem(head), "");
    EXPECT_NE(head.find("data-rows=\"" + std::to_string(T) + "\" data-columns=\"" + std::to_string(T) + "\""), std::string::npos);
    EXPECT_NE(head.find(">" + visible(tokens[1]) + "</text>"), std::string::npos);
    EXPECT_NE(head.find("rotate(-90)"), std::string::npos) << "the key labels above the columns, turned";
    // the grid: a heatmap per head; the next-token table: its rows' tokens as text
    const std::string grid = read_all(dir + "/glassbox-attention-heads.svg");
    EXPECT_EQ(xml_problem(grid), "");
    EXPECT_EQ(count_of(grid, "class=\"heatmap\""), 12u) << "3 layers x 4 heads";
    const std::string next = read_all(dir + "/glassbox-next-token.svg");
    EXPECT_EQ(xml_problem(next), "");
    EXPECT_NE(next.find(">\u2018" + visible(st[0]["top1"].get<std::string>()) + "\u2019"), std::string::npos);
    // the lens: cells and the prediction's token in its last row
    const std::string lens = read_all(dir + "/glassbox-logit-lens.svg");
    EXPECT_EQ(xml_problem(lens), "");
    EXPECT_GE(count_of(lens, "<rect "), (size_t)P) << "its cells";
    EXPECT_NE(lens.find(">" + visible(st[2]["lens"]["top1_last"].get<std::string>())), std::string::npos);
    // the PNG: twice the panel's size on screen
    const panel_box panel = rect_of(st[1], "panel Residual"); // as the export found it
    int w = 0, h = 0, n = 0;
    unsigned char* px = stbi_load((dir + "/glassbox-residual-stream@2x.png").c_str(), &w, &h, &n, 3);
    ASSERT_NE(px, nullptr);
    stbi_image_free(px);
    EXPECT_EQ(w, (int)std::lround(2 * (panel.x1 - panel.x0)));
    EXPECT_EQ(h, (int)std::lround(2 * (panel.y1 - panel.y0)));
    EXPECT_FLOAT_EQ(st[3]["font_px"].get<float>(), 15.0f) << "the 2x font is the export's alone";
}

TEST(GuiScale, At1280x720CaptionsLabelsAndChipsStayInsideTheirPanels) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nframes 3\nprint\ndemo induction\nwait\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const int P = 2 * 3 + 1;
    for (const nlohmann::json& s : st) {
        const panel_box resid = rect_of(s, "panel Residual");
        for (const char* c : {"residual x caption", "residual y caption", "residual colour caption"})
            EXPECT_TRUE(rect_inside(rect_of(s, c), resid)) << c << " is cut by its panel";
        int labels = 0;
        for (int p = 0; p < P; p++)
            if (s["drawn"].contains("residual row label " + std::to_string(p))) {
                labels++;
                EXPECT_TRUE(rect_inside(rect_of(s, "residual row label " + std::to_string(p)), resid)) << p;
            }
        EXPECT_GE(labels, (P + 1) / 2) << "at least every other row of the heatmap is labelled";
        // the first row of token chips is in view under the caption
        const panel_box prompt_panel = rect_of(s, "panel Prompt");
        EXPECT_TRUE(rect_inside(rect_of(s, "token 0"), prompt_panel));
        if (s["demo"]["name"] == "induction") {
            EXPECT_TRUE(rect_inside(rect_of(s, "demo caption"), prompt_panel));
        }
    }
    EXPECT_EQ(st[1]["demo"]["name"], "induction");
}

TEST(GuiScale, LongPromptsThinTheLabelsAndTheLensOpensAtThePrediction) {
    ASSERT_TRUE(have_app());
    std::string long_prompt;
    for (int i = 0; i < 8; i++) long_prompt += "the cat sat on the mat and ";
    int rc = 0;
    auto st = run_at(1280, 720, "wait\nprint\ntab lens\nwait\nframes 3\nprint\n", &rc, "--prompt " + sq(long_prompt));
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const int T = (int)st[0]["tokens"].size();
    ASSERT_GT(T, 50);
    // the head view's row labels: some left out, none overlapping another
    std::vector<panel_box> rows;
    for (int t = 0; t < T; t++)
        if (st[0]["drawn"].contains("head row label " + std::to_string(t))) rows.push_back(rect_of(st[0], "head row label " + std::to_string(t)));
    EXPECT_LT((int)rows.size(), T) << "thinned out";
    EXPECT_GE(rows.size(), 3u);
    for (size_t i = 1; i < rows.size(); i++) EXPECT_GE(rows[i].y0, rows[i - 1].y1 - 0.5f) << "labels " << i - 1 << " and " << i << " overlap";
    // the lens is scrolled to its last column: the prediction's
    const panel_box grid = rect_of(st[1], "lens grid");
    ASSERT_TRUE(st[1]["drawn"].contains("lens column " + std::to_string(T - 1))) << "the last position is not in view";
    const panel_box last = rect_of(st[1], "lens column " + std::to_string(T - 1));
    EXPECT_LE(last.x1, grid.x1 + 0.5f);
    EXPECT_GE(last.x0, grid.x0);
    EXPECT_FALSE(st[1]["drawn"].contains("lens column 0")) << "the first ones are scrolled out of view";
    EXPECT_TRUE(st[1]["drawn"].contains("lens row 6")) << "the last row (the model's own) is in view";
}

TEST(GuiScale, At1920x1080TheGridsThumbnailsUseTheRoom) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    auto small = run_at(1280, 720, "wait\nprint\n", &rc);
    ASSERT_EQ(small.size(), 1u);
    auto big = run_at(1920, 1080, "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(big.size(), 1u);
    const panel_box a = rect_of(small[0], "head cell 0.0"), b = rect_of(big[0], "head cell 0.0");
    EXPECT_GE(b.x1 - b.x0, 1.4f * (a.x1 - a.x0)) << "a window 1.5 times as large: thumbnails about as much larger";
    const panel_box grid_panel = rect_of(big[0], "panel Overview");
    EXPECT_GT(4 * (b.x1 - b.x0 + 3), 0.5f * (grid_panel.x1 - grid_panel.x0)) << "4 heads a row: half the panel's width at least";
}
