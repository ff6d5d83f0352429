// The app's one-click demonstrations (app/gui/demos.h) under Xvfb: each preset, started by the script's `demo`
// command or by clicking the Prompt panel's Demos combo, sets the prompt and the view, selects the head the
// model's own scores pick (checked against the CLI's `heads` on the same model and prompt) and shows a caption.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app_script.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

const std::string cli = std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli";

// The demos' window size, as the screenshots in the README
std::vector<nlohmann::json> run_demo(const std::string& args, const std::string& script, int* rc) {
    return run_script("--size 1600x1000 " + args, script, rc);
}

const tiny_model& demo_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 3;
        s.n_head = 4;
        s.d_model = 32;
        s.n_ctx = 64;
        s.seed = 21;
        return write_tiny_gpt2(test_temp_dir("demo_model"), s);
    }();
    return tm;
}

// "L.H" of the head with the largest score of `kind` that the CLI's `heads` computes for prompt (model_arg: ""
// for the embedded default model, else "--model DIR").
std::string cli_best_head(const std::string& model_arg, const std::string& prompt, const std::string& kind, double* best) {
    static int n = 0;
    std::string json = test_temp_dir("demo_heads") + "/heads" + std::to_string(n++) + ".json";
    command_result r = run_command(sq(cli) + " heads " + model_arg + " --prompt " + sq(prompt) + " --json " + sq(json));
    EXPECT_EQ(r.code, 0) << r.err;
    nlohmann::json j;
    std::ifstream(json) >> j;
    std::string head;
    *best = -1;
    const auto& sc = j[kind];
    for (size_t l = 0; l < sc.size(); l++)
        for (size_t h = 0; h < sc[l].size(); h++)
            if (sc[l][h].is_number() && sc[l][h].get<double>() > *best)
                *best = sc[l][h], head = std::to_string(l) + "." + std::to_string(h);
    return head;
}

// The checks every preset promises, on a state printed after `wait`.
void check_head_demo(const nlohmann::json& st, const std::string& model_arg, const std::string& name,
                     const std::string& colour, const std::string& kind, double clear) {
    SCOPED_TRACE(name);
    EXPECT_EQ(st["demo"]["name"], name);
    EXPECT_FALSE(st["demo"]["waiting"]);
    EXPECT_EQ(st["tab"], "head");
    EXPECT_EQ(st["colour_by"], colour);
    EXPECT_TRUE(st["current"]) << "the shown result is of the demo's prompt";
    double best = 0;
    EXPECT_EQ(st["selected_head"], cli_best_head(model_arg, st["prompt"], kind, &best))
        << "the selected head is the argmax of the model's own " << kind << " scores";
    const std::string cap = st["demo"]["caption"];
    std::string h = st["selected_head"];
    const std::string lh = "L" + h.substr(0, h.find('.')) + "H" + h.substr(h.find('.') + 1);
    EXPECT_NE(cap.find(lh), std::string::npos) << cap;
    EXPECT_EQ(cap.find("no clear") != std::string::npos, best < clear) << cap << " (best " << best << ")";
}

void check_all(const std::vector<nlohmann::json>& states, const std::string& model_arg) {
    ASSERT_EQ(states.size(), 4u);
    check_head_demo(states[0], model_arg, "induction", "induction", "induction", 0.1);
    const std::string p = states[0]["prompt"];
    EXPECT_EQ(p.substr(0, p.size() / 2), p.substr(p.size() / 2)) << "the prompt is random text repeated";
    EXPECT_GE(states[0]["tokens"].size(), 20u);
    check_head_demo(states[1], model_arg, "prev-token", "prev_token", "prev_token", 0.3);
    EXPECT_EQ(states[1]["prompt"], "The quick brown fox jumps over the lazy dog because it was hungry");

    EXPECT_EQ(states[2]["demo"]["name"], "lens");
    EXPECT_EQ(states[2]["prompt"], "The Eiffel Tower is in the city of");
    EXPECT_EQ(states[2]["tab"], "lens");
    ASSERT_TRUE(states[2].contains("lens"));
    EXPECT_TRUE(states[2]["lens"]["current"]);
    EXPECT_NE(states[2]["demo"]["caption"].get<std::string>().find("final guess"), std::string::npos);

    const nlohmann::json& ioi = states[3];
    EXPECT_EQ(ioi["demo"]["name"], "ioi");
    EXPECT_EQ(ioi["prompt"], "When Mary and John went to the store, John gave a drink to");
    EXPECT_EQ(ioi["tab"], "attribution");
    ASSERT_TRUE(ioi.contains("attribution"));
    EXPECT_TRUE(ioi["attribution"]["current"]);
    const std::string cap = ioi["demo"]["caption"];
    if (ioi["attribution_target"].is_null()) { // a name is not one token: the model's own top-2, said so
        EXPECT_TRUE(ioi["attribution_contrast"].is_null());
        EXPECT_NE(cap.find("not one token"), std::string::npos) << cap;
        EXPECT_EQ(ioi["attribution"]["target"], ioi["top1"]);
    } else {
        EXPECT_EQ(ioi["attribution_target"], " Mary");
        EXPECT_EQ(ioi["attribution_contrast"], " John");
        EXPECT_EQ(ioi["attribution"]["target"], " Mary");
        EXPECT_EQ(ioi["attribution"]["contrast"], " John");
        EXPECT_NE(cap.find("Mary"), std::string::npos) << cap;
    }
}

const char* all_by_script = "demo induction\nwait\nprint\ndemo prev-token\nwait\nprint\n"
                            "demo lens\nwait\nprint\ndemo ioi\nwait\nprint\n";

} // namespace

TEST(Demos, EveryPresetOnTheDefaultModel) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_demo("", all_by_script, &rc);
    ASSERT_EQ(rc, 0);
    check_all(states, "");
}

TEST(Demos, EveryPresetOnATinyModel) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const std::string m = "--model " + sq(demo_model().dir);
    auto states = run_demo(m, all_by_script, &rc);
    ASSERT_EQ(rc, 0);
    check_all(states, m);
}

TEST(Demos, TheDemosComboStartsOneAndEditingThePromptEndsIt) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_demo("", "wait\nclick demos\nclick demo prev-token\nwait\nprint\n"
                                 "click demos\nclick demo induction\nwait\nprint\n"
                                 "click prompt\nkey end\ntype  x\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    check_head_demo(states[0], "", "prev-token", "prev_token", "prev_token", 0.3);
    check_head_demo(states[1], "", "induction", "induction", "induction", 0.1);
    EXPECT_EQ(states[2]["demo"]["name"], "") << "the caption no longer describes the edited prompt";
    EXPECT_EQ(states[2]["demo"]["caption"], "");
}

TEST(Demos, UnknownDemoIsAScriptError) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    run_demo("", "demo nonsense\n", &rc);
    EXPECT_EQ(rc, 1);
}
