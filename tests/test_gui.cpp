// Desktop app end to end under Xvfb: the screenshot mode really draws heatmaps, and injected input
// (typing, clicking "No attention") changes what the app shows.
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

namespace {

const std::string& app = app_path();

int run(const std::string& cmd, std::string* out = nullptr) {
    command_result r = run_command(cmd);
    if (out) *out = r.out;
    if (!r.err.empty()) std::fprintf(stderr, "%s", r.err.c_str());
    return r.code;
}

} // namespace

TEST(Gui, ScreenshotModeDrawsHeatmaps) {
    ASSERT_TRUE(have_app()) << app << " was not built (needs libimgui-dev, libglfw3-dev, libepoxy-dev)";
    std::string png = test_temp_dir("gui_shot") + "/shot.png";
    int rc = run(xvfb_app("--model '" + gui_model().dir + "' --prompt 'the cat sat on the mat' --select-head 1.2 "
                      "--screenshot '" + png + "' --size 1600x1000"));
    ASSERT_EQ(rc, 0) << "the app failed (its stderr is above; Xvfb comes from tools/setup.sh)";
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

namespace {

// What the app writes to stderr when it refuses to start: exactly one non-empty line (ended by its newline, no
// other newline inside) naming what was wrong, and exit code 2.
void expect_one_line_refusal(const command_result& r, const std::string& needle) {
    EXPECT_EQ(r.code, 2) << r.err;
    ASSERT_FALSE(r.err.empty()) << "nothing on stderr";
    EXPECT_EQ(r.err.back(), '\n') << r.err;
    const std::string line = r.err.substr(0, r.err.size() - (r.err.back() == '\n'));
    EXPECT_FALSE(line.empty()) << "an empty line";
    EXPECT_EQ(line.find('\n'), std::string::npos) << "one line expected, got:\n" << r.err;
    EXPECT_NE(line.find(needle), std::string::npos) << "'" << needle << "' not named in: " << line;
}

} // namespace

TEST(Gui, BadModelFailsWithOneLineError) {
    ASSERT_TRUE(have_app());
    const std::string bad = test_temp_dir("gui_bad_model") + "/no such model";
    const std::string png = test_temp_dir("gui_bad_model_shot") + "/never.png";
    expect_one_line_refusal(run_command(xvfb_app("--model " + sq(bad) + " --screenshot " + sq(png))), bad);
    EXPECT_FALSE(std::filesystem::exists(png)) << "no screenshot of a model that did not load";
    expect_one_line_refusal(run_command(sq(app) + " --size 3"), "--size");
}

// --timeout sets how long a headless run waits (a long prompt on a large model takes minutes): past it the run
// ends with exit code 1 and one line; a value out of range is refused in one line
TEST(Gui, HeadlessTimeoutIsAnOption) {
    ASSERT_TRUE(have_app());
    expect_one_line_refusal(run_command(sq(app) + " --timeout 0"), "--timeout");
    expect_one_line_refusal(run_command(sq(app) + " --timeout soon"), "--timeout");
    const std::string dir = test_temp_dir("gui_timeout");
    std::ofstream(dir + "/script.txt") << "wait\nmeasure 100000\n"; // far more frames than 2 s draws
    const auto t0 = std::chrono::steady_clock::now();
    const command_result r = run_command(
        xvfb_app("--model " + sq(gui_model().dir) + " --prompt 'the cat' --timeout 2 --script " + sq(dir + "/script.txt")));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
    EXPECT_LT(s, 60) << "the 2 s limit was not applied";
}

// A prompt longer than max_heat_dim tokens: the head textures keep the mipmap levels from the first one at most
// 2048 texels wide (a 4,096-token prompt on 32 heads held 2.8 GB of RGBA per kept layer at full size), and the
// next, short prompt is coloured at full size again
TEST(Gui, LongPromptsHeatmapsStopAtTheMaximumSide) {
    ASSERT_TRUE(have_app());
    tiny_spec spec;
    spec.n_layer = 1, spec.n_head = 2, spec.d_model = 16, spec.n_ctx = 2600, spec.seed = 5;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir("gui_long_prompt"), spec);
    std::string prompt;
    for (int i = 0; i < 2300; i++) prompt += (char)('a' + (i * 7 + i / 26) % 26);
    const std::string dir = test_temp_dir("gui_long_prompt_script");
    std::ofstream(dir + "/script.txt") << "wait\nprint\ndemo prev-token\nwait\nprint\n"; // (the demo's own prompt)
    std::string out;
    ASSERT_EQ(run(xvfb_app("--model " + sq(tm.dir) + " --prompt " + sq(prompt) + " --script " + sq(dir + "/script.txt")),
                  &out), 0) << out;
    std::vector<nlohmann::json> states;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] == '{') states.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(states.size(), 2u) << out;
    const int T = (int)states[0]["tokens"].size();
    ASSERT_GT(T, 2048) << "the prompt is too short to test the cap";
    int side = T;
    while (side > 2048) side /= 2;
    EXPECT_EQ(states[0]["heatmap_side"].get<int>(), side);
    const size_t texels = [](int n) { size_t t = 0; for (; n > 0; n /= 2) t += (size_t)n * n; return t; }(side);
    const size_t bytes = states[0]["heatmap_bytes"].get<size_t>(), heads = 2 * texels * 4; // + the residual's
    EXPECT_GE(bytes, heads);
    EXPECT_LE(bytes, heads + (size_t)2 * 3 * T * 4) << "2 heads of side " << side << " and the residual map";
    const int T2 = (int)states[1]["tokens"].size();
    ASSERT_LT(T2, 200) << states[1]["prompt"];
    EXPECT_EQ(states[1]["heatmap_side"].get<int>(), T2);
}

// The heatmaps' pixels and their GL copy keep within the capture budget: a prompt of about 700 tokens on two heads
// is about 10 MB of pixels and copy at full size; under a 4 MB budget the side halves (2.6 MB), under the default it
// stays the prompt's.
TEST(Gui, HeatmapsKeepWithinTheCaptureBudget) {
    ASSERT_TRUE(have_app());
    tiny_spec spec;
    spec.n_layer = 1, spec.n_head = 2, spec.d_model = 16, spec.n_ctx = 800, spec.seed = 6;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir("gui_heat_budget"), spec);
    std::string prompt;
    for (int i = 0; i < 700; i++) prompt += (char)('a' + (i * 5 + i / 26) % 26);
    const std::string dir = test_temp_dir("gui_heat_budget_script");
    std::ofstream(dir + "/script.txt") << "wait\nprint\n";
    for (const std::string budget : {"4", "512"}) {
        std::string out;
        ASSERT_EQ(run(xvfb_app("--model " + sq(tm.dir) + " --capture-budget " + budget + " --prompt " + sq(prompt) +
                               " --script " + sq(dir + "/script.txt")), &out), 0) << out;
        const size_t at = out.find('{');
        ASSERT_NE(at, std::string::npos) << out;
        const nlohmann::json j = nlohmann::json::parse(out.substr(at, out.find('\n', at) - at));
        const int T = (int)j["tokens"].size(); // (the tokenizer joins a few letter pairs)
        ASSERT_GT(T, 600) << j["tokens"];
        const size_t bytes = j["heatmap_bytes"].get<size_t>();
        if (budget == "4") {
            EXPECT_EQ(j["heatmap_side"].get<int>(), T / 2);
            EXPECT_LE(2 * bytes, (size_t)4 << 20) << "the pixels and their GL copy within 4 MB";
        } else {
            EXPECT_EQ(j["heatmap_side"].get<int>(), T);
            EXPECT_GT(2 * bytes, (size_t)4 << 20);
        }
    }
}

TEST(Gui, TypingAndAblationChangeWhatIsShown) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_script");
    std::ofstream(dir + "/script.txt") << "wait\nprint\n"
                                          "click prompt\nkey end\ntype  sat on the\nwait\nprint\n"
                                          "click No attention\nwait\nprint\n"
                                          "rclick head 0.1\nwait\nprint\n";
    std::string out;
    int rc = run(xvfb_app("--model '" + gui_model().dir + "' --prompt 'the cat' --script '" + dir + "/script.txt'"), &out);
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

// Right-clicking a cell of the Head view knocks that query-key pair out (the middle of the square is a diagonal
// cell: a query reading itself, with the keys before it left): listed in the Ablations panel, recomputed live from
// that layer's attention, cleared there, and kept by a session.
TEST(Gui, RightClickAHeadCellKnocksItOut) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("gui_knockout");
    int rc = 0;
    const std::vector<nlohmann::json> st = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat sat on'",
                                                      "wait\nrclick head detail\nwait\nprint\nsave-session " + dir +
                                                          "/k.json\nclick clear knockouts\nwait\nprint\n"
                                                          "session " + dir + "/k.json\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    const std::string head = st[0]["selected_head"];
    const int layer = std::stoi(head.substr(0, head.find('.')));
    ASSERT_EQ(st[0]["knockouts"].size(), 1u) << st[0]["error"];
    const std::string k = st[0]["knockouts"][0];
    EXPECT_EQ(k.substr(0, head.size() + 1), head + ":") << k;
    const int q = std::stoi(k.substr(head.size() + 1));
    EXPECT_GE(q, 1) << k;
    EXPECT_EQ(k.substr(k.find('-') + 1), std::to_string(q)) << "the diagonal cell: " << k;
    EXPECT_EQ(st[0]["ablation"], "knockout " + k);
    EXPECT_EQ(st[0]["report"]["from_point"], 2 * layer) << "live from the knocked layer's attention: " << st[0]["report"]["what"];
    EXPECT_EQ(st[1]["knockouts"], nlohmann::json::array());
    EXPECT_EQ(st[1]["ablation"], "none");
    EXPECT_EQ(st[2]["knockouts"], st[0]["knockouts"]) << "the session brings it back";
    EXPECT_EQ(st[2]["ablation"], "knockout " + k);
}

// An encoder: without a mask the Output panel shows what the head puts at the last token before [SEP]; typing
// [MASK] makes it Fill mask (its filler equals the record's top there); the tabs without a next token are left
// out; an ablation changes the fillers.
TEST(Gui, EncoderShowsFillMaskAndTheFullPattern) {
    ASSERT_TRUE(have_app());
    const tiny_encoder tm = write_tiny_encoder(test_temp_dir("gui_bert") + "/m", {});
    const std::string script = "wait\nprint\nclick prompt\nkey end\ntype  [MASK] on the mat\nwait\nprint\n"
                               "click No attention\nwait\nprint\n";
    int rc = -1;
    const std::vector<nlohmann::json> st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat'", script, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    EXPECT_EQ(st[0]["tokens"].front(), "[CLS]");
    EXPECT_EQ(st[0]["tokens"].back(), "[SEP]");
    EXPECT_TRUE(st[0]["fills"].empty());
    EXPECT_EQ(st[0]["fill_position"], (int)st[0]["tokens"].size() - 2);
    // Learn: the picture, without numbers; Attribution: the token saliency alone
    EXPECT_EQ(st[0]["tabs"], nlohmann::json({"head", "lens", "attribution", "learn", "features"}));
    EXPECT_EQ(st[1]["prompt"], "the cat [MASK] on the mat");
    EXPECT_EQ(st[1]["fill_position"], 3);
    ASSERT_EQ(st[1]["fills"].size(), 1u);
    EXPECT_EQ(st[1]["top1"], st[1]["fills"][0]["top"][0]["text"]);
    const gb::model m = gb::load_model(tm.dir);
    gb::record cap;
    gb::run_forward(cap, m, gb::encode_prompt(m.tok, "the cat [MASK] on the mat", false), {}, {});
    EXPECT_EQ(st[1]["fills"][0]["top"][0]["id"], gb::top_k_probs(&cap.logits[3 * (size_t)cap.vocab], cap.vocab, 1)[0].id);
    EXPECT_EQ(st[2]["ablation"], "no-attention");
    ASSERT_EQ(st[2]["fills"].size(), 1u);
    EXPECT_NE(st[2]["fills"][0]["top"][0]["prob"], st[1]["fills"][0]["top"][0]["prob"]);
}

// An encoder–decoder: the prompt is the source, the target starts as the model's greedy translation; the
// Cross-attention tab is offered (the decoder-only analyses are not); the encoder radio shows the source's
// self-attention; a typed target is what the decoder reads; the prediction equals core's next target token.
TEST(Gui, EncoderDecoderShowsBothStacksAndTheCrossAttention) {
    ASSERT_TRUE(have_app());
    seq2seq_spec sp;
    sp.family = "marian";
    const std::string dir = test_temp_dir("gui_marian");
    const tiny_seq2seq tm = write_tiny_seq2seq(dir + "/m", sp);
    // sessions keep the typed target (typed.json) and a sampled translation's settings (sampled.json)
    const std::string script = "wait\nprint\ntab cross\nclick stack encoder\nwait\nprint\nclick stack decoder\n"
                               "click target text\ntype the dog\nkey enter\nwait\nprint\nsave-session " + dir + "/typed.json\n"
                               "tab learn\nselect-token 1\nwait\nprint\n"
                               "gen-temperature 1.5\nclick Translate, sampled\nwait\nprint\nsave-session " + dir + "/sampled.json\n"
                               "click translate\nwait\nprint\n"
                               "session " + dir + "/sampled.json\nwait\nprint\nsession " + dir + "/typed.json\nwait\nprint\n"
                               "tab lens\nwait\nprint\nclick stack encoder\nwait\nprint\n"
                               "colour-by induction\nwait\nprint\n";
    int rc = -1;
    const std::vector<nlohmann::json> st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat sat'", script, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 11u);
    EXPECT_EQ(st[0]["tabs"], nlohmann::json({"head", "lens", "attribution", "learn", "cross", "features"}));
    EXPECT_EQ(st[0]["error"], "");
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> src = gb::source_ids(m, "the cat sat");
    const gb::generation g = gb::translate(m, src, 39, {});
    EXPECT_EQ(st[0]["tokens"].size(), g.ids.size() - (g.hit_eos ? 1 : 0) + 1) << "the decoder's target: start + translation";
    EXPECT_EQ(st[1]["tokens"], nlohmann::json({" the", " cat", " sat", "</s>"})) << "the encoder's source";
    EXPECT_EQ(st[1]["tab"], "cross");
    ASSERT_EQ(st[2]["tokens"].size(), 3u) << st[2].dump();
    EXPECT_EQ(st[2]["tokens"][1], " the");
    gb::seq2seq_record r;
    gb::run_seq2seq(r, m, src, gb::target_ids(m, "the dog"));
    EXPECT_EQ(st[2]["top1"], gb::token_text(m.tok, gb::top_k_probs(r.decoder.last_logits(), r.decoder.vocab, 1)[0].id));
    // Learn walks the decoder at the selected target token, through its cross-attention, to that row's prediction
    const nlohmann::json& w = st[3]["learn"];
    ASSERT_TRUE(w.is_object()) << st[3].dump();
    EXPECT_EQ(w["token"], 1);
    EXPECT_TRUE(w["current"]);
    EXPECT_EQ(st[3]["analysis"]["learn"]["error"], "");
    bool has_cross = false;
    for (const auto& t : w["steps"]) has_cross |= t.get<std::string>().rfind("Cross-attention of head", 0) == 0;
    EXPECT_TRUE(has_cross) << w.dump();
    EXPECT_EQ(w["prediction"], gb::token_text(m.tok, gb::top_k_probs(&r.decoder.logits[(size_t)r.decoder.vocab], r.decoder.vocab, 1)[0].id));
    // "Translate, sampled": the target becomes core's translation sampled at the Continuation panel's settings
    // (temperature 1.5, top-k 0, seed 0); Translate brings back the greedy one
    gb::sampling hot;
    hot.temperature = 1.5f;
    gb::generation sampled = gb::translate(m, src, 39, hot);
    if (sampled.hit_eos) sampled.ids.pop_back();
    EXPECT_EQ(st[4]["translation_sampling"], "T1.500000,k0,p1.000000,s0") << st[4].dump();
    EXPECT_EQ(st[4]["translation"], gb::utf8_sanitize(gb::decode(m.tok, sampled.ids)));
    EXPECT_EQ(st[4]["tokens"].size(), sampled.ids.size() + 1);
    EXPECT_NE(st[4]["tokens"], st[0]["tokens"]) << "sampled at 1.5, not the greedy one";
    EXPECT_EQ(st[5]["translation_sampling"], "greedy");
    EXPECT_EQ(st[5]["tokens"], st[0]["tokens"]);
    // the sessions bring back the sampled translation, then the typed target, each with its settings
    EXPECT_EQ(st[6]["translation_sampling"], "T1.500000,k0,p1.000000,s0") << st[6].dump();
    EXPECT_EQ(st[6]["tokens"], st[4]["tokens"]);
    EXPECT_EQ(st[6]["tab"], "learn");
    EXPECT_EQ(st[7]["tokens"], st[2]["tokens"]);
    EXPECT_EQ(st[7]["translation_sampling"], "greedy");
    EXPECT_EQ(st[7]["tab"], "cross");
    // the logit lens reads the decoder (target "the dog": 3 tokens, 2L + 1 points), whichever stack is shown;
    // its last point is the run's prediction
    for (int i : {8, 9}) {
        const nlohmann::json& l = st[i]["lens"];
        ASSERT_TRUE(l.is_object()) << st[i].dump();
        EXPECT_EQ(l["points"], 2 * sp.dec_layers + 1);
        EXPECT_EQ(l["tokens"], 3);
        EXPECT_EQ(l["top1_last"], st[2]["top1"]);
        EXPECT_TRUE(l["current"]);
    }
    EXPECT_EQ(st[9]["tokens"].size(), 4u) << "the grid shows the encoder's source";
    // head scores colour the shown stack's grid from its own patterns; the induction test (no source) is not run
    EXPECT_EQ(st[10]["colour_by"], "induction");
    EXPECT_FALSE(st[10]["analysis"]["induction"]["wanted"]) << st[10]["analysis"].dump();
    EXPECT_EQ(st[10]["analysis"]["induction"]["error"], "");
    EXPECT_EQ(st[10]["error"], "");
    nlohmann::json saved;
    std::ifstream(dir + "/typed.json") >> saved;
    EXPECT_EQ(saved["translation"]["target_text"], "the dog");
    EXPECT_EQ(saved["translation"]["stack"], "decoder");
    // a session's translation settings out of range: a one-line error, the shown state kept
    saved["translation"]["stack"] = "middle";
    std::ofstream(dir + "/bad.json") << saved.dump();
    const std::vector<nlohmann::json> bad =
        run_script("--model " + sq(tm.dir) + " --prompt 'the cat sat'", "wait\nprint\nsession " + dir + "/bad.json\nwait\nprint\n", &rc);
    ASSERT_EQ(bad.size(), 2u);
    EXPECT_NE(bad[1]["error"].get<std::string>().find("translation.stack: expected encoder or decoder, got 'middle'"),
              std::string::npos) << bad[1].dump();
    EXPECT_EQ(bad[1]["tokens"], bad[0]["tokens"]);
}

// A ViT classifies an image given on the command line; the Image tab overlays [CLS]'s attention, a click on a
// patch looks from it, rollout and ablations re-run, and an unreadable image keeps the shown result.
TEST(Gui, VisionClassifiesAnImageAndAClickedPatchBecomesTheQuery) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("gui_vit");
    const tiny_vision tm = write_tiny_vision(dir + "/m", {});
    gb::image img; // 24 x 20: resized to the model's 16 x 16
    img.width = 24, img.height = 20;
    for (int i = 0; i < 24 * 20 * 3; i++) img.rgb.push_back((uint8_t)((i * 7) % 251));
    ASSERT_TRUE(stbi_write_png((dir + "/in.png").c_str(), 24, 20, 3, img.rgb.data(), 24 * 3));
    const std::string script = "wait\nprint\nsave-session " + dir + "/s.json\nclick image\nwait\nprint\n"
                               "click attention rollout\nclick No attention\nwait\nprint\n"
                               "image " + dir + "/missing.png\nwait\nprint\nsession " + dir + "/s.json\nwait\nprint\n";
    int rc = -1;
    const std::vector<nlohmann::json> st = run_script("--model " + sq(tm.dir) + " --image " + sq(dir + "/in.png"), script, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 5u);
    EXPECT_EQ(st[0]["tab"], "image");
    EXPECT_EQ(st[0]["tabs"], nlohmann::json({"head", "lens", "attribution", "learn", "image", "features"}));
    EXPECT_EQ(st[0]["error"], "");
    EXPECT_EQ(st[0]["vision"]["view"], nlohmann::json({16, 16}));
    EXPECT_EQ(st[0]["vision"]["query"], 0);
    // the class the app shows is the classifier's top-1 on the image's pixels
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<float> px = gb::vision_pixels(m, gb::load_image(dir + "/in.png"));
    gb::forward_options opt;
    opt.pixels = px.data();
    gb::record cap;
    gb::run_forward(cap, m, gb::vision_tokens(m.config), {}, opt);
    const std::vector<gb::token_prob> want = gb::top_k_probs(cap.logits.data(), cap.vocab, 7);
    EXPECT_EQ(st[0]["top1"], "label" + std::to_string(want[0].id));
    ASSERT_EQ(st[0]["vision"]["classes"].size(), 7u);
    for (size_t i = 0; i < want.size(); i++) {
        EXPECT_EQ(st[0]["vision"]["classes"][i]["id"], want[i].id);
        EXPECT_NEAR(st[0]["vision"]["classes"][i]["prob"].get<double>(), want[i].prob, 1e-5);
    }
    EXPECT_EQ(st[1]["vision"]["query"], 1 + 2 * 4 + 2) << "the middle of the picture is patch r2c2";
    EXPECT_EQ(st[2]["vision"]["rollout"], true);
    EXPECT_EQ(st[2]["ablation"], "no-attention");
    EXPECT_GT(st[2]["kl"].get<double>(), 0.0) << "knocking out attention changes the classes";
    EXPECT_NE(std::string(st[3]["error"]).find("missing.png"), std::string::npos) << st[3]["error"];
    EXPECT_EQ(st[3]["top1"], st[2]["top1"]) << "the previous result stays";
    EXPECT_EQ(st[4]["image"], dir + "/in.png") << "a session restores the image";
    EXPECT_EQ(st[4]["error"], "");
    EXPECT_EQ(st[4]["vision"]["classes"], st[0]["vision"]["classes"]);
}

TEST(Gui, GpuBackendShowsTheSamePrediction) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_gl");
    std::ofstream(dir + "/script.txt") << "wait\nprint\n";
    std::string cpu, gl;
    std::string args = "--model '" + gui_model().dir + "' --prompt 'the cat sat on' --script '" + dir + "/script.txt'";
    ASSERT_EQ(run(xvfb_app(args), &cpu), 0);
    ASSERT_EQ(run(xvfb_app(args + " --backend gl"), &gl), 0);
    auto a = nlohmann::json::parse(cpu.substr(cpu.find('{'))), b = nlohmann::json::parse(gl.substr(gl.find('{')));
    EXPECT_EQ(a["top1"], b["top1"]);
    std::string status = b["gl"];
    EXPECT_TRUE(status.find("GPU:") == 0 || status.find("fallback") != std::string::npos) << status;
}

// glassbox --matmul int8 on a Q4_K file: the same prediction as the exact kernel, the kernel named in the state (the
// model panel says it too); where the CPU lacks VNNI the app refuses the option with one line.
TEST(Gui, Int8KernelIsNamedAndPredictsAsTheExactOne) {
    ASSERT_TRUE(have_app());
    const std::string dir = test_temp_dir("gui_int8"), g = dir + "/m.gguf";
    gb::model_config shape;
    shape.n_layer = 2, shape.n_head = 4, shape.n_kv_head = 2, shape.d_model = 256, shape.d_ff = 512;
    shape.vocab_size = 300, shape.n_ctx = 64;
    gb::random_gguf_options o;
    o.type = gb::GGML_Q4_K, o.seed = 9;
    gb::write_random_gguf(g, gb::random_gguf_config("llama", shape), o);
    std::string why;
    if (!gb::int8_usable(&why)) {
        const command_result r = run_command(xvfb_app("--model " + sq(g) + " --matmul int8 --timeout 5"));
        EXPECT_NE(r.code, 0);
        EXPECT_NE(r.err.find("the int8 matmul kernel cannot run here"), std::string::npos) << r.err;
        GTEST_SKIP() << why;
    }
    int rc = -1;
    auto exact = run_script("--model " + sq(g) + " --prompt 'the cat sat on' --matmul fp32", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    auto fast = run_script("--model " + sq(g) + " --prompt 'the cat sat on' --matmul int8", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(exact.size(), 1u);
    ASSERT_EQ(fast.size(), 1u);
    EXPECT_EQ(exact[0]["matmul"], "fp32");
    EXPECT_EQ(fast[0]["matmul"], "int8");
    EXPECT_EQ(fast[0]["top1"], exact[0]["top1"]);
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
    EXPECT_FALSE(std::filesystem::exists(cfg + "/home/.config/glassbox")) << "nothing written in the home folder";
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
