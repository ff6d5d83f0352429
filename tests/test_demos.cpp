// The app's one-click demonstrations (app/gui/demos.h) under Xvfb: each preset, started by the script's `demo`
// command or by clicking the Prompt panel's Demos combo, sets the prompt and the view, selects the head the
// model's own scores pick (checked against the CLI's `heads` on the same model and prompt) and shows a caption.
// Break it applies each row's ablation to the whole app (the app's own KL and top-1 are the row's; the rows are
// the CLI's break-it); Temperature shows three columns of text at three temperatures (the CLI's generate
// --temperatures with the same seed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app_script.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

const std::string cli_binary = std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli";

// The demos' window size, as the screenshots in docs/
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
    command_result r = run_command(sq(cli_binary) + " heads " + model_arg + " --prompt " + sq(prompt) + " --json " + sq(json));
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
    // the embedded model keeps each demo's promise on screen: the lens's answer is Paris, settled before the last
    // sublayer; the indirect object is Mary, well ahead of John, and the attribution explains that lead
    ASSERT_EQ(states.size(), 4u);
    EXPECT_EQ(states[2]["top1"], " Paris");
    EXPECT_EQ(states[2]["lens"]["top1_last"], " Paris");
    EXPECT_LT(states[2]["lens"]["answer_from_point"].get<int>(), states[2]["lens"]["points"].get<int>() - 1);
    EXPECT_NE(states[2]["demo"]["caption"].get<std::string>().find("Paris"), std::string::npos);
    EXPECT_EQ(states[3]["top1"], " Mary");
    EXPECT_EQ(states[3]["attribution_target"], " Mary") << "' Mary' is one token of the embedded model";
    ASSERT_TRUE(states[3]["attribution"].contains("logit_diff"));
    EXPECT_GE(states[3]["attribution"]["logit_diff"].get<double>(), 2.0);
    EXPECT_NEAR(states[3]["attribution"]["sum"].get<double>(), states[3]["attribution"]["logit_diff"].get<double>(), 1e-3);
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

// ---- Break it and Temperature ----
namespace {

// "KL 6.87 nats" as a row's sentence says it
std::string kl_phrase(const std::string& explanation) {
    const size_t a = explanation.rfind("KL "), b = explanation.find(" nats", a);
    return a == std::string::npos || b == std::string::npos ? "?" : explanation.substr(a, b + 5 - a);
}

// A state printed while Break it shows row k: that row's ablation is what the app ran, the app's own numbers
// (its KL against the baseline, its top-1) are the row's, and the caption says the row's numbers.
void check_break_row(const nlohmann::json& st, int k) {
    SCOPED_TRACE("row " + std::to_string(k));
    EXPECT_EQ(st["demo"]["name"], "break-it");
    EXPECT_FALSE(st["demo"]["waiting"]);
    EXPECT_EQ(st["demo"]["break_row"], k);
    EXPECT_TRUE(st["current"]) << "the shown result is of the inputs as they are now";
    ASSERT_TRUE(st.contains("break_it"));
    const nlohmann::json& b = st["break_it"];
    EXPECT_TRUE(b["current"]);
    EXPECT_EQ(b["prompt"], st["prompt"]);
    const std::string cap = st["demo"]["caption"];
    if (k < 0) {
        EXPECT_EQ(st["ablation"], "none");
        EXPECT_NE(cap.find("Nothing removed"), std::string::npos) << cap;
        return;
    }
    ASSERT_LT(k, (int)b["rows"].size());
    const nlohmann::json& row = b["rows"][k];
    EXPECT_EQ(st["ablation"], row["ablation"]) << "the row's ablation is the one the whole app ran";
    EXPECT_EQ(st["ablation_input"], row["ablation"]);
    EXPECT_EQ(st["top1"], row["top"]["text"]);
    const double kl = row["kl"];
    EXPECT_NEAR(st["kl"].get<double>(), kl, 1e-3 * std::max(1.0, kl)) << "the app's own KL(baseline || current)";
    EXPECT_NE(cap.find(row["label"].get<std::string>()), std::string::npos) << cap;
    EXPECT_NE(cap.find(kl_phrase(row["explanation"])), std::string::npos) << cap;
    EXPECT_NE(cap.find(std::to_string(k + 1) + " of " + std::to_string(b["rows"].size())), std::string::npos) << cap;
}

// The three columns of the Sampling tab: three temperatures, text in each, side by side on screen, each column's
// distribution flatter than the one before (the same top token, a smaller share), and the same texts as the
// CLI's generate --temperatures with the same seed and top-k.
void check_sampling(const nlohmann::json& st, const std::string& model_arg, const std::vector<double>& temps, int top_k,
                    int tokens, int seed) {
    EXPECT_EQ(st["tab"], "sampling");
    ASSERT_TRUE(st.contains("sampling"));
    const nlohmann::json& smp = st["sampling"];
    EXPECT_TRUE(smp["current"]);
    EXPECT_EQ(smp["top_k"], top_k);
    ASSERT_EQ(smp["columns"].size(), 3u);
    for (int i = 0; i < 3; i++) {
        const nlohmann::json& c = smp["columns"][i];
        EXPECT_NEAR(c["temperature"].get<double>(), temps[i], 1e-6);
        EXPECT_FALSE(c["text"].get<std::string>().empty()) << i;
        EXPECT_EQ(c["kept"], top_k);
        ASSERT_GE(c["top"].size(), 2u);
        EXPECT_EQ(c["top"][0]["token"], smp["columns"][0]["top"][0]["token"]);
        if (i > 0) {
            EXPECT_LT(c["top"][0]["prob"].get<double>(), smp["columns"][i - 1]["top"][0]["prob"].get<double>());
        }
        // on screen, side by side
        const std::string w = "sampling text " + std::to_string(i), h = "sampling column " + std::to_string(i);
        ASSERT_TRUE(st["widgets"].contains(w)) << w;
        const nlohmann::json& r = st["widgets"][w];
        EXPECT_GT(r[2].get<double>() - r[0].get<double>(), 20) << "text in column " << i;
        if (i > 0) {
            EXPECT_GT(st["widgets"][h][0].get<double>(), st["widgets"]["sampling column " + std::to_string(i - 1)][2].get<double>());
            EXPECT_EQ(st["widgets"][h][1], st["widgets"]["sampling column 0"][1]);
        }
    }
    const std::string json = test_temp_dir("demo_sampling") + "/t.json";
    char t[64];
    std::snprintf(t, sizeof t, "%g,%g,%g", temps[0], temps[1], temps[2]);
    command_result r = run_command(sq(cli_binary) + " generate " + model_arg + " --prompt " + sq(st["prompt"]) + " --max-new-tokens " +
                                   std::to_string(tokens) + " --temperatures " + t + " --top-k " + std::to_string(top_k) +
                                   " --seed " + std::to_string(seed) + " --json " + sq(json));
    ASSERT_EQ(r.code, 0) << r.err;
    nlohmann::json j;
    std::ifstream(json) >> j;
    for (int i = 0; i < 3; i++) EXPECT_EQ(smp["columns"][i]["ids"], j["runs"][i]["generated_ids"]) << "column " << i;
}

} // namespace

TEST(Demos, BreakItStepsThroughEveryAblationAndTheCliAgrees) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_demo("", "demo break-it\nwait\nprint\nclick break next\nwait\nprint\nclick break next\nwait\nprint\n"
                               "click break previous\nwait\nprint\nclick break restore\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 5u);
    check_break_row(states[0], 0);
    check_break_row(states[1], 1);
    check_break_row(states[2], 2);
    check_break_row(states[3], 1);
    check_break_row(states[4], -1);
    EXPECT_NE(states[0]["ablation"], states[1]["ablation"]) << "Next changes the ablation";
    EXPECT_EQ(states[0]["ablation"], "no-attention");
    EXPECT_EQ(states[1]["ablation"], "no-layernorm");
    EXPECT_EQ(states[2]["ablation"], "no-residual");
    EXPECT_EQ(states[0]["tab"], "learn");
    // the prompt is one the model gets right or is surest of, and the CLI gives the same rows for it
    const std::string json = test_temp_dir("demo_break") + "/b.json";
    command_result r = run_command(sq(cli_binary) + " break-it --prompt " + sq(states[0]["prompt"]) + " --json " + sq(json));
    ASSERT_EQ(r.code, 0) << r.err;
    nlohmann::json j;
    std::ifstream(json) >> j;
    const nlohmann::json& rows = states[0]["break_it"]["rows"];
    ASSERT_EQ(rows.size(), j["rows"].size());
    for (size_t i = 0; i < rows.size(); i++) {
        EXPECT_EQ(rows[i]["label"], j["rows"][i]["label"]);
        EXPECT_EQ(rows[i]["explanation"], j["rows"][i]["explanation"]);
        EXPECT_NEAR(rows[i]["kl"].get<double>(), j["rows"][i]["kl"].get<double>(), 1e-6 * std::max(1.0, rows[i]["kl"].get<double>()));
    }
}

TEST(Demos, BreakItByClickAndEditingEndsIt) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    // the Demos combo, then a row of the Learn tab's table, then an ablation changed by hand (ends the demo, keeps
    // the user's ablation); then a click on a row steps from there, and editing the prompt ends it and restores
    auto states = run_demo("", "wait\nclick demos\nclick demo break-it\nwait\nprint\nclick break row 4\nwait\nprint\n"
                               "click No LayerNorm\nwait\nprint\nclick break row 2\nwait\nprint\n"
                               "click prompt\nkey end\ntype  x\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 5u);
    check_break_row(states[0], 0);
    check_break_row(states[1], 4);
    EXPECT_EQ(states[1]["ablation"], "no-attention[1]") << "row 4 is layer 1's attention";
    EXPECT_EQ(states[2]["demo"]["name"], "") << "an ablation changed by hand ends the demo";
    EXPECT_EQ(states[2]["ablation"], "no-layernorm no-attention[1]") << "and keeps what the user set";
    check_break_row(states[3], 2);
    EXPECT_EQ(states[4]["demo"]["name"], "");
    EXPECT_EQ(states[4]["ablation"], "none") << "the demo's row is taken off when it ends";
}

TEST(Demos, BreakItOnATinyModelAndWhereNoCandidateFits) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_demo("--model " + sq(demo_model().dir), "demo break-it\nwait\nprint\nclick break next\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    check_break_row(states[0], 0);
    check_break_row(states[1], 1);
    EXPECT_EQ(states[0]["break_it"]["rows"].size(), 3u + 3u + 3u); // 3 layers of 4 heads
    // a context of 4 tokens holds no candidate prompt: one line in the caption, and the app goes on
    tiny_spec s;
    s.n_ctx = 4;
    const tiny_model small = write_tiny_gpt2(test_temp_dir("demo_ctx4"), s);
    auto st = run_demo("--model " + sq(small.dir) + " --prompt 'ab'", "demo break-it\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    const std::string cap = st[0]["demo"]["caption"];
    EXPECT_NE(cap.find("could not break it: none of the 9 candidate prompts fits the model's context of 4 tokens"),
              std::string::npos) << cap;
    EXPECT_EQ(cap.find('\n'), std::string::npos);
    EXPECT_EQ(st[0]["ablation"], "none");
}

TEST(Demos, TemperatureShowsThreeColumnsByScriptAndByClick) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_demo("", "demo temperature\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["demo"]["name"], "temperature");
    EXPECT_EQ(states[0]["prompt"], "The old man looked at the sea and said");
    check_sampling(states[0], "", {0.3, 0.8, 1.5}, 40, 30, 1);
    // the caption gives the top token's share at each temperature
    const std::string cap = states[0]["demo"]["caption"];
    for (int i = 0; i < 3; i++) {
        const nlohmann::json& c = states[0]["sampling"]["columns"][i];
        char share[64];
        std::snprintf(share, sizeof share, "%.0f %% at T %.2g", 100 * c["top"][0]["prob"].get<double>(), c["temperature"].get<double>());
        EXPECT_NE(cap.find(share), std::string::npos) << share << " in " << cap;
    }
    // by click: the Demos combo; and, on a tiny model, the Sampling tab itself
    auto clicked = run_demo("", "wait\nclick demos\nclick demo temperature\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(clicked.size(), 1u);
    check_sampling(clicked[0], "", {0.3, 0.8, 1.5}, 40, 30, 1);
    const std::string m = "--model " + sq(demo_model().dir);
    auto tab = run_demo(m + " --prompt 'the cat sat'", "wait\nclick tab Sampling\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(tab.size(), 1u);
    check_sampling(tab[0], m, {0.3, 0.8, 1.5}, 40, 30, 1);
}
