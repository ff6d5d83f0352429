// Pictures first, at the sizes a class sees: every demo of the embedded default model (6 layers x 8 heads) at
// 1280x720, at 1280x720 presenting and at 1920x1080 with 150 % text (presenting: 225 %). Presenting, each demo's
// picture (the tab notes its rectangle as "picture": the head's pattern with its labels and its query's row; the
// lens grid; the attribution map with the bars beside it; Break it's table; the three sampled columns) covers at
// least 35 % of the window, inside the analysis panel, with nothing of it scrolled away; the grid's thumbnails are
// at least 40 px at 1920x1080 / 150 %; Generate is in view and generates at every size.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/app_script.h"

namespace {

struct size_case {
    int w, h;
    std::string args; // the text scale
    const char* name;
};
const size_case sizes[] = {{1280, 720, "", "1280x720"}, {1920, 1080, "--ui-scale 1.5", "1920x1080 at 150 %"}};

// The app on the embedded default model at w x h (an Xvfb screen at least as large), running the script.
std::vector<nlohmann::json> run_at(const size_case& c, const std::string& script, int* rc) {
    const std::string size = std::to_string(c.w) + "x" + std::to_string(c.h);
    const std::string screen = std::to_string(std::max(c.w, 1600)) + "x" + std::to_string(std::max(c.h, 1000));
    return run_script("--size " + size + " " + c.args, script, rc, "", screen);
}

struct box {
    float x0, y0, x1, y1;
    float area() const { return (x1 - x0) * (y1 - y0); }
};
box rect(const nlohmann::json& r) { return {r[0].get<float>(), r[1].get<float>(), r[2].get<float>(), r[3].get<float>()}; }
bool inside(const box& in, const box& out) {
    return in.x0 >= out.x0 - 0.5f && in.y0 >= out.y0 - 0.5f && in.x1 <= out.x1 + 0.5f && in.y1 <= out.y1 + 0.5f;
}

const std::vector<std::string> demos = {"induction", "prev-token", "lens", "ioi", "break-it", "temperature"};

std::string every_demo(bool present) {
    std::string script = present ? "wait\npresent on\nframes 5\n" : "wait\n";
    for (const std::string& d : demos) script += "demo " + d + "\nwait\nframes 5\nwait\nframes 5\nprint\n";
    return script;
}

// What no demo may lose: its picture whole inside the analysis panel; where the picture is rows of a grid or of
// text, every row in view.
void check_whole(const nlohmann::json& st, const std::string& demo, const size_case& c, const std::string& where) {
    const box panel = rect(st["drawn"]["panel Analysis"]), pic = rect(st["drawn"]["picture"]);
    const box window{0, 0, (float)c.w, (float)c.h};
    EXPECT_TRUE(inside(pic, panel)) << demo << " " << where << ": the picture leaves the analysis panel";
    EXPECT_TRUE(inside(pic, window)) << demo << " " << where;
    if (demo == "lens") { // every point's row in view, the model's own (the last) included (tiled: that one)
        const int points = st["lens"]["points"].get<int>();
        for (int p = st["presenting"].get<bool>() ? 0 : points - 1; p < points; p++) {
            const std::string row = "lens row " + std::to_string(p);
            ASSERT_TRUE(st["drawn"].contains(row)) << where << ": " << row << " is scrolled away";
            EXPECT_TRUE(inside(rect(st["drawn"][row]), pic)) << where << ": " << row;
        }
    }
    if (demo == "temperature")
        for (int i = 0; i < 3; i++) {
            const std::string t = "sampling text " + std::to_string(i);
            ASSERT_TRUE(st["widgets"].contains(t)) << where << ": " << t;
            EXPECT_TRUE(inside(rect(st["widgets"][t]), pic)) << where << ": " << t << " is cut";
        }
}

} // namespace

TEST(GuiPresent, EveryDemosPictureTakesMoreThanAThirdOfTheScreenWhenPresenting) {
    ASSERT_TRUE(have_app());
    for (const size_case& c : sizes) {
        int rc = -1;
        auto st = run_at(c, every_demo(true), &rc);
        ASSERT_EQ(rc, 0) << c.name;
        ASSERT_EQ(st.size(), demos.size()) << c.name;
        for (size_t i = 0; i < demos.size(); i++) {
            const std::string where = std::string(c.name) + " presenting";
            EXPECT_TRUE(st[i]["presenting"].get<bool>());
            EXPECT_EQ(st[i]["demo"]["name"], demos[i]);
            ASSERT_TRUE(st[i]["drawn"].contains("picture")) << demos[i] << " " << where << ": no picture drawn";
            const box pic = rect(st[i]["drawn"]["picture"]);
            EXPECT_GE(pic.area(), 0.35f * c.w * c.h) << demos[i] << " " << where << ": the picture is " << pic.x1 - pic.x0 << " x "
                                                     << pic.y1 - pic.y0;
            check_whole(st[i], demos[i], c, where);
            // the caption the class reads sits beside the picture, whole
            ASSERT_TRUE(st[i]["drawn"].contains("demo caption")) << demos[i];
            EXPECT_TRUE(inside(rect(st[i]["drawn"]["demo caption"]), rect(st[i]["drawn"]["panel Demo"]))) << demos[i] << " " << where;
        }
        // Break it's steps are in view beside its table
        ASSERT_TRUE(st[4]["widgets"].contains("break next"));
        EXPECT_TRUE(inside(rect(st[4]["widgets"]["break next"]), rect(st[4]["drawn"]["panel Demo"]))) << c.name;
    }
}

TEST(GuiPresent, TiledTheDemosPicturesAreWholeInTheirPanel) {
    ASSERT_TRUE(have_app());
    for (const size_case& c : sizes) {
        int rc = -1;
        auto st = run_at(c, every_demo(false), &rc);
        ASSERT_EQ(rc, 0) << c.name;
        ASSERT_EQ(st.size(), demos.size()) << c.name;
        for (size_t i = 0; i < demos.size(); i++) {
            if (demos[i] == "break-it") continue; // (tiled, its table is a section of the Learn tab's walk: it scrolls there)
            ASSERT_TRUE(st[i]["drawn"].contains("picture")) << demos[i] << " " << c.name;
            check_whole(st[i], demos[i], c, c.name);
        }
    }
}

TEST(GuiPresent, TheGridsThumbnailsAreAtLeast40PxAt1920x1080With150PercentText) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto st = run_at(sizes[1], "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    ASSERT_EQ(st[0]["n_layer"], 6);
    ASSERT_EQ(st[0]["n_head"], 8) << "the embedded model's 6 x 8 grid";
    const box cell = rect(st[0]["drawn"]["head cell 0.0"]);
    EXPECT_GE(cell.x1 - cell.x0, 40.0f);
    EXPECT_GE(cell.y1 - cell.y0, 40.0f);
}

TEST(GuiPresent, GenerateIsInViewAndGeneratesAtEverySize) {
    ASSERT_TRUE(have_app());
    struct run_case {
        size_case c;
        std::string before, panel;
    } cases[] = {{sizes[0], "", "panel Output"},
                 {sizes[0], "present on\nframes 5\n", "panel Side"},
                 {sizes[0], "present on\ndemo ioi\nwait\nframes 5\n", "panel Side"}, // the caption above the tabs
                 {sizes[1], "", "panel Output"},
                 {sizes[1], "present on\nframes 5\n", "panel Side"},
                 {sizes[1], "present on\ndemo ioi\nwait\nframes 5\n", "panel Side"}};
    for (const run_case& k : cases) {
        int rc = -1;
        auto st = run_at(k.c, "wait\n" + k.before + "frames 5\nprint\ngen-tokens 3\nclick Generate\nwait\nframes 5\nprint\n", &rc);
        const std::string where = std::string(k.c.name) + (k.before.empty() ? "" : " presenting") + (k.before.find("demo") != std::string::npos ? " a demo" : "");
        ASSERT_EQ(rc, 0) << where;
        ASSERT_EQ(st.size(), 2u) << where;
        ASSERT_TRUE(st[0]["widgets"].contains("Generate")) << where;
        ASSERT_TRUE(st[0]["drawn"].contains(k.panel)) << where;
        EXPECT_TRUE(inside(rect(st[0]["widgets"]["Generate"]), rect(st[0]["drawn"][k.panel]))) << where << ": Generate is cut";
        EXPECT_GE(st[1]["generated_tokens"].get<int>(), 1) << where << ": the click generated"; // (IOI's may end early)
        EXPECT_TRUE(st[1]["generation_done"].get<bool>()) << where;
    }
}
