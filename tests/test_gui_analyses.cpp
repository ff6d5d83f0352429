// The app's analysis tabs end to end under Xvfb: the logit lens, attribution and saliency, head scores and the
// induction test, patching and its cancellation, causal tracing, sessions and Export of their inputs and results,
// each against the core's own numbers (split from test_gui.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <stb_image.h>
#include <stb_image_write.h>

#include "analysis/gradients.h"
#include "analysis/head_scores.h"
#include "analysis/surprisal.h"
#include "analysis/trace.h"
#include "app_script.h"
#include "gui_models.h"
#include "io/gguf_writer.h"
#include "io/loader.h"
#include "kernels/gemm.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_model.h"
#include "tiny_seq2seq.h"
#include "tiny_vision.h"
#include "tokenizer/tokenizer.h"

// ---- analyses: logit lens, attribution, head scores, patching (tabs under the attention grid) ----

TEST(GuiAnalyses, LogitLensLastRowIsThePredictionAndTargetsCanBePicked) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "tab lens\nwait\nprint\n"
                             "click next 2\nwait\nprint\n"      // a Next-token row picks the lens target
                             "click lens clear target\nwait\nprint\n"
                             "click lens cell 3.2\nwait\nprint\n" // a cell picks its top-1
                             "click prompt\nkey end\ntype  the\nwait\nprint\n", // new text: the pick is let go
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 5u);
    const auto& s0 = states[0];
    ASSERT_TRUE(s0.contains("lens")) << s0.dump();
    EXPECT_EQ(s0["tab"], "lens");
    EXPECT_EQ(s0["lens"]["points"], 2 * gui_model().config.n_layer + 1) << "embed + attn and mlp of every layer";
    EXPECT_EQ(s0["lens"]["tokens"], s0["tokens"].size());
    EXPECT_EQ(s0["lens"]["top1_last"], s0["top1"]) << "the last point at the last token is the model's own prediction";
    EXPECT_TRUE(s0["lens"]["current"]);
    EXPECT_TRUE(s0["lens"]["target"].is_null());
    // the third Next-token row became the target, and the lens was recomputed for it
    ASSERT_FALSE(states[1]["lens_target"].is_null()) << states[1].dump();
    EXPECT_EQ(states[1]["lens"]["target"], states[1]["lens_target"]);
    EXPECT_NE(states[1]["lens_target"], s0["top1"]);
    EXPECT_TRUE(states[2]["lens_target"].is_null());
    EXPECT_TRUE(states[2]["lens"]["target"].is_null());
    ASSERT_FALSE(states[3]["lens_target"].is_null());
    EXPECT_EQ(states[3]["lens"]["target"], states[3]["lens_target"]);
    EXPECT_NE(states[4]["tokens"], states[3]["tokens"]);
    EXPECT_TRUE(states[4]["lens_target"].is_null()) << "a target picked for the old text does not stay pinned";
    EXPECT_EQ(states[4]["lens"]["top1_last"], states[4]["top1"]);
    for (const auto& s : states) EXPECT_EQ(s["analysis"]["lens"]["error"], "");
}

TEST(GuiAnalyses, AttributionAddsUpToTheLogitDifference) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "tab attribution\nwait\nprint\n"
                             "click attribution target text\ntype  cat sat\nkey enter\nwait\nprint\n" // two tokens: refused
                             "click attribution target text\nkey end\n" + backspaces(8) + // the kept text, erased
                             "type  cat\nkey enter\nwait\nprint\n"                                    // one token
                             "select-token 2\nwait\nprint\n"
                             "click attribution head 1.2\nwait\nprint\n" // opens the head's pattern
                             "tab attribution\nclick No residual\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 6u);
    const auto& a = states[0]["attribution"];
    ASSERT_TRUE(a.is_object()) << states[0].dump();
    EXPECT_EQ(a["target"], states[0]["top1"]) << "default target: the prediction's top-1";
    EXPECT_NE(a["contrast"], a["target"]);
    EXPECT_EQ(a["position"], states[0]["tokens"].size() - 1) << "default position: the last token";
    const double total = a["total"], diff = a["logit_diff"], sum = a["sum"];
    EXPECT_NEAR(total, diff, 1e-6 * std::max(1.0, std::fabs(diff))) << "the run's own logit(target) - logit(contrast)";
    EXPECT_NEAR(sum, total, 1e-3 * std::max(1.0, std::fabs(total))) << "the parts add up";
    // a text of two tokens: one clear error, the previous choice stays
    ASSERT_EQ(states[1]["token_errors"].size(), 1u) << states[1].dump();
    std::string err = states[1]["token_errors"][0];
    EXPECT_NE(err.find("3 tokens"), std::string::npos) << err; // " cat", " s", "at"
    EXPECT_NE(err.find("not one"), std::string::npos) << err;
    EXPECT_TRUE(states[1]["attribution_target"].is_null());
    EXPECT_EQ(states[1]["attribution"]["total"], a["total"]);
    // one token: the new target, still adding up
    EXPECT_EQ(states[2]["attribution_target"], " cat");
    EXPECT_EQ(states[2]["attribution"]["target"], " cat");
    EXPECT_EQ(states[2]["token_errors"].size(), 0u);
    const double t2 = states[2]["attribution"]["total"], d2 = states[2]["attribution"]["logit_diff"];
    EXPECT_NEAR(t2, d2, 1e-6 * std::max(1.0, std::fabs(d2)));
    // another position: the parts add up to the difference there
    EXPECT_EQ(states[3]["attribution"]["position"], 2);
    const double t3 = states[3]["attribution"]["total"], s3 = states[3]["attribution"]["sum"];
    EXPECT_NEAR(s3, t3, 1e-3 * std::max(1.0, std::fabs(t3)));
    // a click on a head selects it and shows the Head tab
    EXPECT_EQ(states[4]["selected_head"], "1.2");
    EXPECT_EQ(states[4]["tab"], "head");
    // no residual: the core's message instead of numbers
    std::string e5 = states[5]["analysis"]["attribution"]["error"];
    EXPECT_NE(e5.find("no-residual"), std::string::npos) << states[5].dump();
    EXPECT_EQ(states[5]["error"], "") << "the panel shows it, not the status bar";
}

// The Attribution tab shades the prompt's chips by each token's gradient x input for its difference: the core's
// saliency of the same run (core/analysis/gradients.h), and only while that tab is shown.
TEST(GuiAnalyses, AttributionShadesTheChipsByGradientTimesInput) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "tab attribution\nwait\nprint\nselect-token 2\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    const gb::model m = gb::load_model(gui_model().dir);
    const std::vector<int> ids = gb::encode_prompt(m.tok, clean_prompt, false);
    ASSERT_EQ(states[0]["tokens"].size(), ids.size());
    for (const auto& st : states) {
        const auto& a = st["attribution"];
        ASSERT_TRUE(a.contains("saliency")) << st.dump();
        ASSERT_EQ(a["saliency"].size(), ids.size());
        auto id_of = [&](const std::string& text) { // the token the state names by its text
            for (int id = 0; id < m.config.vocab_size; id++)
                if (gb::token_text(m.tok, id) == text) return id;
            return -1;
        };
        gb::metric_spec ms;
        ms.target = id_of(a["target"]), ms.contrast = id_of(a["contrast"]), ms.position = a["position"];
        ASSERT_GE(ms.target, 0) << a.dump();
        ASSERT_GE(ms.contrast, 0) << a.dump();
        const std::vector<float> want = gb::saliency(m, ids, ms, 0).grad_x_input;
        double scale = 0;
        for (float v : want) scale = std::max(scale, (double)std::fabs(v));
        EXPECT_GT(scale, 1e-3);
        for (size_t t = 0; t < ids.size(); t++)
            EXPECT_NEAR(a["saliency"][t].get<double>(), want[t], 1e-4 * std::max(1.0, scale)) << "token " << t;
    }
    EXPECT_EQ(states[1]["attribution"]["position"], 2);
    for (size_t t = 3; t < ids.size(); t++) EXPECT_EQ(states[1]["attribution"]["saliency"][t], 0.0) << "after the position";
}

// The kinds without direct logit attribution get the Attribution tab's saliency alone, computed on the analysis
// thread: a ViT's over its patches for its top class against the next (the core's gradient x input on the same
// pixels), then integrated gradients with the completeness gap; an encoder–decoder's source chips for the
// target token at the last target position.
TEST(GuiAnalyses, AttributionSaliencyOfAnImageAndASource) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("gui_vit_saliency");
    const tiny_vision tm = write_tiny_vision(dir + "/m", {});
    gb::image img;
    img.width = 20, img.height = 20;
    for (int i = 0; i < 20 * 20 * 3; i++) img.rgb.push_back((uint8_t)((i * 7) % 251));
    ASSERT_TRUE(stbi_write_png((dir + "/in.png").c_str(), 20, 20, 3, img.rgb.data(), 20 * 3));
    int rc = -1;
    std::vector<nlohmann::json> st = run_script("--model " + sq(tm.dir) + " --image " + sq(dir + "/in.png"),
                                                "wait\ntab attribution\nwait\nprint\nscreenshot " + dir + "/saliency.png\n"
                                                "click saliency integrated gradients\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<float> px = gb::vision_pixels(m, gb::load_image(dir + "/in.png"));
    gb::forward_options o;
    o.pixels = px.data();
    const auto& a = st[0]["attribution"];
    ASSERT_TRUE(a.contains("saliency")) << st[0].dump();
    EXPECT_EQ(a["dla"], false);
    EXPECT_EQ(a["position"], 0);
    EXPECT_EQ(a["saliency_method"], "gradient x input");
    gb::metric_spec ms;
    ms.target = std::stoi(a["target"].get<std::string>().substr(5)); // "label3"
    ms.contrast = std::stoi(a["contrast"].get<std::string>().substr(5));
    for (int steps : {0, 32}) {
        const auto& b = st[steps ? 1 : 0]["attribution"];
        const gb::saliency_result want = gb::saliency(m, gb::vision_tokens(m.config), ms, steps, {}, o);
        const std::vector<float>& w = steps ? want.integrated : want.grad_x_input;
        ASSERT_EQ(b["saliency"].size(), w.size());
        double scale = 1e-3;
        for (float v : w) scale = std::max(scale, (double)std::fabs(v));
        for (size_t t = 0; t < w.size(); t++)
            EXPECT_NEAR(b["saliency"][t].get<double>(), w[t], 1e-4 * scale) << "steps " << steps << " position " << t;
        EXPECT_EQ(b["saliency_steps"], steps);
        if (steps) {
            EXPECT_NEAR(b["completeness_gap"].get<double>(), want.completeness_gap(), 1e-4);
        }
    }
    EXPECT_EQ(st[1]["attribution"]["saliency_method"], "integrated gradients");

    seq2seq_spec sp;
    sp.family = "marian";
    const tiny_seq2seq ts = write_tiny_seq2seq(dir + "/mt", sp);
    st = run_script("--model " + sq(ts.dir) + " --prompt 'the cat sat'",
                    "wait\nclick target text\ntype the dog\nkey enter\nwait\nclick stack encoder\ntab attribution\n"
                    "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    const gb::model mt = gb::load_model(ts.dir);
    const std::vector<int> src = gb::source_ids(mt, "the cat sat"), tgt = gb::target_ids(mt, "the dog");
    const auto& c = st[0]["attribution"];
    ASSERT_TRUE(c.contains("saliency")) << st[0].dump();
    EXPECT_EQ(c["position"], (int)tgt.size() - 1);
    ASSERT_EQ(c["saliency"].size(), src.size()) << "the source's chips";
    auto id_of = [&](const std::string& text) {
        for (int id = 0; id < mt.config.vocab_size; id++)
            if (gb::token_text(mt.tok, id) == text) return id;
        return -1;
    };
    gb::metric_spec mm;
    mm.target = id_of(c["target"]), mm.contrast = id_of(c["contrast"]), mm.position = c["position"];
    const std::vector<float> want = gb::saliency_seq2seq(mt, src, tgt, mm, 0).source_grad_x_input;
    double scale = 1e-3;
    for (float v : want) scale = std::max(scale, (double)std::fabs(v));
    for (size_t t = 0; t < want.size(); t++) EXPECT_NEAR(c["saliency"][t].get<double>(), want[t], 1e-4 * scale) << t;
}

TEST(GuiAnalyses, HeadScoreModeAndTheInductionTest) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    std::string dir = test_temp_dir("gui_scores");
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "wait\nscreenshot " + dir + "/pattern.png\n"
                             "colour-by induction\nwait\nprint\nscreenshot " + dir + "/scores.png\n"
                             "click induction test\nwait\nprint\n"
                             "click No attention\nwait\nprint\n" // the test follows the ablation
                             "click back to my prompt\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 4u);
    EXPECT_EQ(states[0]["colour_by"], "induction");
    EXPECT_FALSE(states[0].contains("induction_test")) << "nothing runs before the button";
    const auto& t = states[1]["induction_test"];
    ASSERT_TRUE(t.is_object()) << states[1].dump();
    EXPECT_TRUE(t["shown"]);
    const int n = t["n"];
    EXPECT_GE(n, 2);
    EXPECT_LE(2 * n, gui_model().config.n_ctx) << "N is capped to fit the context";
    EXPECT_EQ(t["tokens"], 2 * n) << "N random tokens repeated twice";
    EXPECT_GE(t["positions"].get<int>(), n) << "every token of the second half repeats";
    EXPECT_EQ(t["seed"], 1) << "a fixed seed";
    const double best = t["max_induction"];
    EXPECT_TRUE(std::isfinite(best) && best >= 0 && best <= 1) << best;
    EXPECT_EQ(states[2]["ablation"], "no-attention");
    EXPECT_TRUE(states[2]["induction_test"]["shown"]);
    EXPECT_FALSE(states[3]["induction_test"]["shown"]) << "back to the user's prompt";
    EXPECT_EQ(states[3]["colour_by"], "induction");
    // the score mode repaints the grid (flat score colours instead of the pattern thumbnails)
    int w, h, c, w2, h2;
    unsigned char* a = stbi_load((dir + "/pattern.png").c_str(), &w, &h, &c, 3);
    unsigned char* b = stbi_load((dir + "/scores.png").c_str(), &w2, &h2, &c, 3);
    ASSERT_TRUE(a && b && w == w2 && h == h2);
    int changed = 0, total = 0;
    for (int y = 200; y < 440; y++)
        for (int x = 400; x < 1000; x++, total++) {
            const unsigned char *p = a + ((size_t)y * w + x) * 3, *q = b + ((size_t)y * w + x) * 3;
            changed += std::abs(p[0] - q[0]) + std::abs(p[1] - q[1]) + std::abs(p[2] - q[2]) > 30;
        }
    stbi_image_free(a);
    stbi_image_free(b);
    EXPECT_GT(changed, total / 5) << "the attention grid looks the same in score mode";
}

TEST(GuiAnalyses, PatchingRestoresTheCleanAnswerAtTheLastPoint) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "corrupt the cat sat on the hat\ntab patching\nwait\nprint\n"
                             "corrupt the dog sat on the mat\nwait\nprint\n" // " dog" is 4 tokens, " cat" one
                             "corrupt the cat sat on the hat\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    const auto& p = states[0]["patching"];
    ASSERT_TRUE(p.is_object()) << states[0].dump();
    EXPECT_TRUE(p["complete"]);
    EXPECT_EQ(p["corrupt_prompt"], "the cat sat on the hat");
    EXPECT_EQ(p["target"], states[0]["top1"]) << "default target: the clean top-1";
    EXPECT_NE(p["clean"], p["corrupt"]);
    ASSERT_FALSE(p["normalized_last"].is_null());
    EXPECT_NEAR(p["normalized_last"].get<double>(), 1.0, 1e-5) << "the clean final stream gives the clean answer";
    EXPECT_NEAR(p["normalized_first"].get<double>(), 0.0, 1e-6) << "the prompts agree at the first token";
    EXPECT_GT(p["runs"].get<int>(), 0);
    // different lengths: the core's one-line error in the panel; the previous result stays
    std::string e = states[1]["analysis"]["patching"]["error"];
    EXPECT_NE(e.find("same length"), std::string::npos) << states[1].dump();
    EXPECT_EQ(e.find('\n'), std::string::npos);
    EXPECT_EQ(states[1]["patching"]["corrupt_prompt"], "the cat sat on the hat");
    EXPECT_EQ(states[2]["analysis"]["patching"]["error"], "");
    EXPECT_EQ(states[2]["patching"]["normalized_last"], p["normalized_last"]);
}

TEST(GuiAnalyses, ChangingAnInputStopsTheRunningPatching) {
    ASSERT_TRUE(have_app());
    // 240 tokens: patching every (point, position) from the first token takes seconds
    std::string text;
    while (text.size() < 240) text += "a quick brown fox jumps over the lazy dog; ";
    text.resize(240);
    std::string first_differs = "b" + text.substr(1), last_differs = text.substr(0, 239) + "z";
    int rc = -1;
    auto states = run_script("--model " + sq(long_model().dir) + " --prompt " + sq(text),
                             "wait\ntab patching\ncorrupt " + first_differs + "\nwait-running patching\nprint\n"
                             "corrupt " + last_differs + "\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    EXPECT_TRUE(states[0]["analysis"]["patching"]["busy"]) << states[0].dump();
    EXPECT_TRUE(!states[0].contains("patching") || states[0]["patching"]["exact"] == false)
        << "nothing exact yet (the fast mode's estimate may show)";
    const auto& st = states[1]["analysis"]["patching"];
    EXPECT_EQ(st["cancelled"], 1) << "the first run was stopped when the corrupted prompt changed";
    EXPECT_FALSE(st["busy"]);
    const auto& p = states[1]["patching"];
    ASSERT_TRUE(p.is_object()) << states[1].dump();
    EXPECT_EQ(p["corrupt_prompt"], last_differs) << "the newest inputs' result";
    EXPECT_TRUE(p["complete"]);
    EXPECT_TRUE(p["exact"]);
    EXPECT_NEAR(p["normalized_last"].get<double>(), 1.0, 1e-5);
}

TEST(GuiAnalyses, SessionKeepsTheAnalysisInputs) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_session_analyses");
    int rc = -1;
    auto before = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "corrupt the cat sat on the hat\ntab patching\nwait\nclick next 1\n"
                             "tab lens\nwait\nclick next 2\n"
                             "tab attribution\nwait\nclick next 3\n"
                             "colour-by entropy\nwait\nsave-session " + dir + "/s.json\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(before.size(), 1u);
    const auto& b = before[0];
    for (const char* k : {"lens_target", "attribution_target", "patching_target"}) ASSERT_FALSE(b[k].is_null()) << k;
    auto after = run_script("--session " + sq(dir + "/s.json"), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(after.size(), 1u);
    const auto& a = after[0];
    for (const char* k : {"tab", "colour_by", "corrupt_prompt", "lens_target", "attribution_target", "attribution_contrast",
                          "patching_target", "patching_contrast", "prompt"})
        EXPECT_EQ(a[k], b[k]) << k;
    EXPECT_EQ(a["tab"], "attribution");
    EXPECT_EQ(a["colour_by"], "entropy");
    EXPECT_EQ(a["warning"], "");
    EXPECT_EQ(a["attribution"]["target"], b["attribution_target"]) << "the restored target is used";

    // a session from before these inputs existed still loads, with the defaults
    nlohmann::json old = {{"glassbox_session", 1},
                          {"model", gui_model().dir},
                          {"prompt", "the cat"},
                          {"ablation",
                           {{"no_residual", {{"on", false}}},
                            {"no_layernorm", {{"on", false}}},
                            {"no_attention", {{"on", false}}},
                            {"heads", nlohmann::json::array()}}},
                          {"selected_head", {0, 0}}};
    std::ofstream(dir + "/old.json") << old.dump();
    auto o = run_script("--session " + sq(dir + "/old.json"), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(o.size(), 1u);
    EXPECT_EQ(o[0]["tab"], "head");
    EXPECT_EQ(o[0]["colour_by"], "pattern");
    EXPECT_EQ(o[0]["corrupt_prompt"], "");
    EXPECT_TRUE(o[0]["lens_target"].is_null());
    EXPECT_EQ(o[0]["error"], "");

    EXPECT_EQ(o[0]["sampling_inputs"]["top_k"], 40) << "the Sampling tab's defaults";

    // the Sampling tab's inputs: applied from a session, saved again; one out of range is a one-line error
    nlohmann::json with = old;
    with["sampling"] = {{"temperatures", {0.5, 1.0, 2.0}}, {"top_k", 7}, {"tokens", 12}, {"seed", 99}};
    std::ofstream(dir + "/sampling.json") << with.dump();
    auto sm = run_script("--session " + sq(dir + "/sampling.json"),
                         "wait\nprint\nsave-session " + dir + "/again.json\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(sm.size(), 1u);
    EXPECT_EQ(sm[0]["sampling_inputs"], with["sampling"]);
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir + "/again.json"))["sampling"], with["sampling"]);
    with["sampling"]["tokens"] = 0;
    std::ofstream(dir + "/sampling_bad.json") << with.dump();
    auto sb = run_script("--session " + sq(dir + "/sampling.json"), "wait\nsession " + dir + "/sampling_bad.json\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(sb.size(), 1u);
    const std::string e = sb[0]["error"];
    EXPECT_NE(e.find("sampling.tokens"), std::string::npos) << e;
    EXPECT_EQ(sb[0]["sampling_inputs"]["seed"], 99) << "the inputs before the bad session stay";

    // a chosen token outside this model's vocabulary is named, and the default is kept
    nlohmann::json bad = old;
    bad["lens_target"] = {{"id", 999999}};
    std::ofstream(dir + "/bad.json") << bad.dump();
    auto x = run_script("--session " + sq(dir + "/bad.json"), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(x.size(), 1u);
    std::string w = x[0]["warning"];
    EXPECT_NE(w.find("lens target"), std::string::npos) << w;
    EXPECT_TRUE(x[0]["lens_target"].is_null());
}

TEST(GuiAnalyses, ExportWritesTheComputedAnalyses) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_export_analyses");
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "tab lens\nwait\ntab attribution\nwait\n"
                             "corrupt the cat sat on the hat\ntab patching\nwait\n"
                             "colour-by induction\nclick induction test\nwait\n"
                             "tab learn\nwait\ntab sampling\nwait\n"
                             "export " + dir + "/out\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    std::string status = states[0]["status"];
    for (const char* what : {"lens", "attribution", "patching", "head_scores", "induction_test", "break_it", "sampling"})
        EXPECT_NE(status.find(what), std::string::npos) << status;
    for (const char* f : {"capture.json", "attention.npy", "head_scores.npy", "head_scores.json", "lens_top_ids.npy",
                          "lens_top_probs.npy", "lens_target_prob.npy", "lens.json", "attribution_heads.npy", "attribution.json",
                          "patch_resid.npy", "patch_resid_normalized.npy", "patch_heads.npy", "patching.json",
                          "induction_test/head_scores.npy", "induction_test/head_scores.json", "break_it.json", "sampling.json"})
        EXPECT_TRUE(std::ifstream(dir + "/out/" + f).good()) << f;
    auto read = [&](const std::string& f) { return nlohmann::json::parse(std::ifstream(dir + "/out/" + f)); };
    nlohmann::json attr = read("attribution.json");
    EXPECT_NEAR(attr["total"].get<double>(), states[0]["attribution"]["total"].get<double>(), 1e-9);
    EXPECT_EQ(read("lens.json")["points"].size(), (size_t)(2 * gui_model().config.n_layer + 1));
    EXPECT_EQ(read("patching.json")["resid"].size(), (size_t)(2 * gui_model().config.n_layer + 1));
    // Break it and the Sampling tab as the CLI writes them (break-it --json, generate --temperatures --json)
    const nlohmann::json br = read("break_it.json"), sm = read("sampling.json");
    ASSERT_EQ(br["rows"].size(), states[0]["break_it"]["rows"].size());
    EXPECT_EQ(br["baseline"]["top"], states[0]["break_it"]["baseline"]["top"]);
    ASSERT_EQ(sm["runs"].size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(sm["runs"][i]["generated_ids"], states[0]["sampling"]["columns"][i]["ids"]) << i;
        EXPECT_FLOAT_EQ(sm["runs"][i]["temperature"].get<float>(), states[0]["sampling"]["columns"][i]["temperature"].get<float>());
    }
    EXPECT_EQ(sm["sampling"]["top_k"], states[0]["sampling"]["top_k"]);
}

// The Model panel's Export button writes on an analysis thread (the export row): once `wait` returns, the files and
// window.png are in the folder typed into its box (the status line's last word is the PNG's, written after them).
TEST(GuiAnalyses, ExportButtonWritesOffTheUiThread) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_export_button");
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "wait\nclick export folder\nkey end\n" + backspaces(40) + "type " + dir + "/out\n"
                             "click Export\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_FALSE(states[0]["analysis"]["export"]["busy"].get<bool>());
    EXPECT_EQ(states[0]["analysis"]["export"]["error"], "");
    const std::string status = states[0]["status"];
    EXPECT_NE(status.find("window.png"), std::string::npos) << status;
    for (const char* f : {"capture.json", "attention.npy", "head_scores.npy", "head_scores.json", "window.png"})
        EXPECT_TRUE(std::ifstream(dir + "/out/" + f).good()) << f;
}

// Causal tracing in the Patching tab: the maps the app computed on its analysis thread equal the core's trace of the
// same tokens (the CLI's defaults: noise 3, 10 samples, seed 0); a subject that is not in the prompt is one line.
TEST(GuiAnalyses, CausalTracingEqualsTheCoreTrace) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                               "tab patching\npatch-mode trace\nsubject cat\nwait\nprint\nsubject dog\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0]["patch_mode"], "trace");
    const nlohmann::json& tj = st[0]["trace"];
    ASSERT_TRUE(tj.is_object()) << st[0].dump();
    EXPECT_TRUE(tj["current"]);
    const gb::model& m = loaded(gui_model());
    const std::vector<int> ids = gb::encode_prompt(m.tok, clean_prompt, false);
    EXPECT_EQ(tj["ids"].get<std::vector<int>>(), ids);
    int first = 0, end = 0;
    gb::subject_span(first, end, m.tok, ids, "cat");
    const gb::trace_result want = gb::causal_trace(m, ids, first, end, {});
    EXPECT_EQ(tj["first"], first);
    EXPECT_EQ(tj["end"], end);
    EXPECT_DOUBLE_EQ(tj["clean_prob"].get<double>(), want.clean_prob);
    EXPECT_DOUBLE_EQ(tj["corrupt_prob"].get<double>(), want.corrupt_prob);
    EXPECT_EQ(tj["resid"].get<std::vector<float>>(), want.resid);
    EXPECT_EQ(tj["mlp"].get<std::vector<float>>(), want.mlp);
    EXPECT_EQ(tj["attn"].get<std::vector<float>>(), want.attn);
    const std::string err = st[1]["analysis"]["trace"]["error"];
    EXPECT_NE(err.find("the subject \"dog\" is not in the prompt"), std::string::npos) << st[1]["analysis"].dump();
    EXPECT_EQ(err.find('\n'), std::string::npos);
}
