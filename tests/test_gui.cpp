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
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
#include <stb_image_write.h>

#include "analysis/gradients.h"
#include "analysis/head_scores.h"
#include "analysis/surprisal.h"
#include "analysis/trace.h"
#include "app_script.h"
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

} // namespace

TEST(Gui, ScreenshotModeDrawsHeatmaps) {
    ASSERT_TRUE(have_app()) << app << " was not built (needs libimgui-dev, libglfw3-dev, libepoxy-dev)";
    std::string png = test_temp_dir("gui_shot") + "/shot.png";
    int rc = run(xvfb_app("--model '" + gui_model().dir + "' --prompt 'the cat sat on the mat' --select-head 1.2 "
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

// ---- analyses: logit lens, attribution, head scores, patching (tabs under the attention grid) ----

namespace {

// The tiny model's prompts: " cat", " sat" and " the" are single tokens; "mat" and "hat" have the same length.
const std::string clean_prompt = "the cat sat on the mat";

// n backspace key presses, as script lines.
std::string backspaces(int n) {
    std::string out;
    for (int i = 0; i < n; i++) out += "key backspace\n";
    return out;
}

// A model whose patching takes seconds on a long prompt (for cancellation).
const tiny_model& long_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 6;
        s.n_head = 4;
        s.d_model = 128;
        s.n_ctx = 256;
        s.seed = 13;
        return write_tiny_gpt2(test_temp_dir("gui_model_long"), s);
    }();
    return tm;
}

} // namespace

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

// ---- live recompute: the worker keeps the last run and recomputes only what a change reaches ----

namespace {

// The values of a little-endian float32 or int32 .npy file (C order), as the app's export writes them.
template <class T>
std::vector<T> read_npy(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char magic[8];
    uint16_t header_len = 0;
    if (!f.read(magic, 8) || std::string(magic + 1, 5) != "NUMPY" || !f.read((char*)&header_len, 2)) return {};
    std::string header(header_len, '\0');
    f.read(&header[0], header_len);
    std::vector<T> v;
    for (T x; f.read((char*)&x, sizeof x);) v.push_back(x);
    return v;
}

// max |a - b| over two equally long arrays (infinite when the lengths differ).
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return INFINITY;
    double d = 0;
    for (size_t i = 0; i < a.size(); i++) d = std::max(d, (double)std::fabs(a[i] - b[i]));
    return d;
}

// A fresh full forward of these tokens: what every live result must equal.
gb::record fresh_run(const gb::model& m, const std::vector<int>& ids) {
    gb::record rec;
    gb::run_forward(rec, m, ids);
    return rec;
}

// The exported capture (attention [L][H][T][T] and the head scores) compared with a fresh run of its tokens.
void expect_export_matches_a_fresh_run(const gb::model& m, const std::string& dir, const std::vector<int>& want_ids) {
    std::vector<int32_t> ids = read_npy<int32_t>(dir + "/tokens.npy");
    ASSERT_EQ(std::vector<int>(ids.begin(), ids.end()), want_ids) << dir;
    gb::record rec = fresh_run(m, want_ids);
    EXPECT_LT(max_diff(read_npy<float>(dir + "/attention.npy"), rec.flat(gb::HOOK_PATTERN)), 1e-5)
        << "the live result's patterns differ from a full run (" << dir << ")";
    gb::head_scores sc = gb::score_heads(rec);
    std::vector<float> want;
    for (int k = 0; k < gb::SCORE_COUNT; k++) want.insert(want.end(), sc.score[k].begin(), sc.score[k].end());
    std::vector<float> got = read_npy<float>(dir + "/head_scores.npy");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++)
        if (!std::isnan(want[i])) {
            EXPECT_NEAR(got[i], want[i], 1e-5) << "head score " << i << " (scores reused row by row)";
        }
}

const gb::model& loaded(const tiny_model& tm) {
    static std::map<std::string, gb::model> models;
    auto it = models.find(tm.dir);
    if (it == models.end()) it = models.emplace(tm.dir, gb::load_model(tm.dir)).first;
    return it->second;
}

} // namespace

TEST(GuiLive, TypingAtTheEndComputesOneTokenAndEqualsAFullRun) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_live_type");
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "wait\nprint\nclick prompt\nkey end\ntype .\nwait\nprint\nexport " + dir + "/out\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    EXPECT_FALSE(states[0]["report"]["reused"]) << "the first run is a full one";
    const auto& s = states[1];
    const int T = (int)s["tokens"].size();
    ASSERT_EQ(T, (int)states[0]["tokens"].size() + 1) << "'.' is one more token";
    const auto& rep = s["report"];
    EXPECT_TRUE(rep["reused"]) << rep.dump();
    EXPECT_EQ(rep["tokens"], T);
    EXPECT_EQ(rep["from_token"], T - 1) << "only the new last token was computed: " << rep.dump();
    EXPECT_EQ(rep["what"].get<std::string>().rfind("1 of " + std::to_string(T) + " tokens", 0), 0u) << rep.dump();
    EXPECT_TRUE(s["current"]);
    const gb::model& m = loaded(gui_model());
    expect_export_matches_a_fresh_run(m, dir + "/out", gb::encode_prompt(m.tok, clean_prompt + ".", false));
}

TEST(GuiLive, LastLayerHeadAblationRunsOneLayerAndKeepsTheBaseline) {
    ASSERT_TRUE(have_app());
    const int last = gui_model().config.n_layer - 1;
    const std::string head = "head " + std::to_string(last) + ".1";
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "wait\nrclick " + head + "\nwait\nprint\nrclick " + head + "\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    const auto& rep = states[0]["report"];
    EXPECT_EQ(states[0]["ablation"], "heads " + std::to_string(last) + ".1");
    EXPECT_TRUE(rep["reused"]) << rep.dump();
    EXPECT_EQ(rep["from_point"], 2 * last) << "resumed before the last layer: " << rep.dump();
    EXPECT_FALSE(rep["baseline_run"]) << "the baseline (nothing ablated) is the kept run: " << rep.dump();
    EXPECT_EQ(rep["what"].get<std::string>().rfind("layers " + std::to_string(last) + "..", 0), 0u) << rep.dump();
    // restoring the head: the kept baseline is the result, nothing runs
    EXPECT_EQ(states[1]["ablation"], "none");
    EXPECT_EQ(states[1]["report"]["what"], "nothing changed") << states[1]["report"].dump();
    EXPECT_FALSE(states[1]["report"]["baseline_run"]);
    EXPECT_EQ(states[1]["kl"], 0.0);
}

TEST(GuiLive, GenerationGrowsTheRecordAndTheSliderReplaysIt) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_live_gen");
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq(clean_prompt),
                             "wait\nprint\ngen-tokens 5\nclick Generate\nwait\nprint\nexport " + dir + "/gen5\n"
                             "gen-step 2\nwait\nprint\nexport " + dir + "/gen2\n"
                             "click prompt\nkey end\ntype x\nwait\nprint\n", // an edit leaves the replay
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 4u);
    const int n = (int)states[0]["tokens"].size();
    const gb::model& m = loaded(gui_model());
    const std::vector<int> prompt_ids = gb::encode_prompt(m.tok, clean_prompt, false);
    ASSERT_EQ((int)prompt_ids.size(), n);
    // the same greedy continuation as gb::generate (the app's defaults: temperature 0, seed 0)
    gb::generation want = gb::generate(m, prompt_ids, 5, gb::sampling{});
    ASSERT_EQ(want.ids.size(), 5u) << "the tiny model stopped at end-of-text: pick another prompt";
    const auto& g = states[1];
    EXPECT_EQ(g["generated"], gb::utf8_sanitize(gb::decode(m.tok, want.ids)));
    EXPECT_EQ(g["generated_tokens"], 5);
    EXPECT_TRUE(g["generation_done"]);
    EXPECT_EQ(g["tokens"].size(), (size_t)n + 5) << "the record holds the prompt and the 5 generated tokens";
    EXPECT_EQ(g["prompt_tokens"], n);
    EXPECT_EQ(g["gen_step"], 5) << "the slider followed the generation";
    EXPECT_EQ(g["replay_steps"], 5);
    EXPECT_TRUE(g["current"]);
    EXPECT_EQ(g["report"]["from_token"], n + 4) << "the last step appended one token: " << g["report"].dump();
    std::vector<int> all = prompt_ids;
    all.insert(all.end(), want.ids.begin(), want.ids.end());
    expect_export_matches_a_fresh_run(m, dir + "/gen5", all);
    // step 2 of 5: the prompt and the first two generated tokens, a prefix of the kept run
    const auto& r = states[2];
    EXPECT_EQ(r["tokens"].size(), (size_t)n + 2) << r.dump();
    EXPECT_EQ(r["gen_step"], 2);
    EXPECT_EQ(r["prompt"], clean_prompt) << "replaying does not touch the prompt";
    EXPECT_TRUE(r["report"]["reused"]);
    EXPECT_EQ(r["report"]["from_token"], n + 1) << "a shorter prefix recomputes only its last position";
    EXPECT_TRUE(r["current"]);
    expect_export_matches_a_fresh_run(m, dir + "/gen2", std::vector<int>(all.begin(), all.begin() + n + 2));
    // editing the prompt leaves the replay: the prompt's own tokens again
    const auto& e = states[3];
    EXPECT_EQ(e["gen_step"], 0);
    EXPECT_EQ(e["replay_steps"], 0);
    EXPECT_EQ(e["tokens"].size(), gb::encode_prompt(m.tok, clean_prompt + "x", false).size());
    EXPECT_EQ(e["prompt_tokens"], e["tokens"].size());
}

// A model whose full run at 200 tokens takes ~50 ms: long enough to send requests during it.
const tiny_model& slow_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 12;
        s.n_head = 4;
        s.d_model = 256;
        s.n_ctx = 256;
        s.seed = 14;
        return write_tiny_gpt2(test_temp_dir("gui_model_slow"), s);
    }();
    return tm;
}

TEST(GuiLive, AFloodOfRequestsEndsWithTheNewestResultOnly) {
    ASSERT_TRUE(have_app());
    std::string dir = test_temp_dir("gui_live_flood");
    std::string text;
    while (text.size() < 200) text += "a quick brown fox jumps over the lazy dog; ";
    text.resize(200);
    const int n = 40;
    int rc = -1;
    // BOS changes the first token: a full run, and while it runs, n run requests in a row
    auto states = run_script("--model " + sq(slow_model().dir) + " --prompt " + sq(text),
                             "wait\nprint\nclick prepend BOS\nflood " + std::to_string(n) +
                                 "\nwait\nprint\nexport " + dir + "/out\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    std::string want = text;
    for (int k = 0; k < n; k++) want += (char)('a' + k % 26);
    const auto& s = states[1];
    EXPECT_EQ(s["prompt"], want);
    EXPECT_TRUE(s["current"]) << "the shown result is of the newest request";
    const int published = s["published_results"].get<int>() - states[0]["published_results"].get<int>();
    const int stopped = s["cancelled_runs"].get<int>() - states[0]["cancelled_runs"].get<int>();
    EXPECT_EQ(published, 1) << n << " requests during a run: the running one stops, the waiting ones are dropped";
    EXPECT_GE(stopped, 1) << "the full run was stopped between layers";
    const gb::model& m = loaded(slow_model());
    expect_export_matches_a_fresh_run(m, dir + "/out", gb::encode_prompt(m.tok, want, true)); // no mix of two runs
}

// ---- what the app remembers between runs: settings.json and imgui.ini in $XDG_CONFIG_HOME/glassbox ----

namespace {

// A config home of its own for one test (XDG_CONFIG_HOME); the app keeps its files in <home>/glassbox.
struct config_home {
    std::string home, dir;
    explicit config_home(const std::string& name) : home(test_temp_dir(name)), dir(home + "/glassbox") {}
    std::string env() const { return "XDG_CONFIG_HOME=" + sq(home) + " "; }
    nlohmann::json settings() const {
        std::ifstream f(dir + "/settings.json");
        return f ? nlohmann::json::parse(f, nullptr, false) : nlohmann::json();
    }
};

size_t files_in(const std::string& dir) {
    size_t n = 0;
    for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it) n++;
    return n;
}

} // namespace

TEST(GuiSettings, FirstRunWritesTheConfigFolderAndNothingInTheWorkingFolder) {
    ASSERT_TRUE(have_app());
    config_home cfg("gui_settings_first");
    std::string wd = test_temp_dir("gui_settings_first_wd");
    int rc = -1;
    auto states = run_script("--remember --model " + sq(gui_model().dir) + " --prompt 'the cat'", "wait\nprint\n", &rc,
                             "cd " + sq(wd) + " && " + cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["config_dir"], cfg.dir);
    EXPECT_EQ(states[0]["warning"], "") << "a first run has nothing to complain about";
    EXPECT_TRUE(std::filesystem::exists(cfg.dir + "/imgui.ini")) << "ImGui's ini goes to the config folder";
    nlohmann::json j = cfg.settings();
    ASSERT_TRUE(j.is_object()) << "settings.json is written and is JSON";
    EXPECT_EQ(j["last_model"], gui_model().dir);
    EXPECT_EQ(j["recent"], nlohmann::json::array({gui_model().dir}));
    EXPECT_EQ(j["window"]["width"], 1600);
    EXPECT_EQ(j["window"]["height"], 1000);
    EXPECT_EQ(files_in(wd), 0u) << "no imgui.ini (or anything else) in the working folder";
    EXPECT_EQ(files_in(cfg.dir), 2u) << "imgui.ini and settings.json, no temporary file left";

    // a script run without --remember neither reads nor writes the settings
    config_home other("gui_settings_first_off");
    states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat'", "wait\nprint\n", &rc,
                        "cd " + sq(wd) + " && " + other.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["config_dir"], "");
    EXPECT_FALSE(std::filesystem::exists(other.dir));
    EXPECT_EQ(files_in(wd), 0u);
}

TEST(GuiSettings, TheWindowSizeOfTheLastRunIsRestoredAndSizeWins) {
    ASSERT_TRUE(have_app());
    config_home cfg("gui_settings_size");
    const std::string args = "--remember --model " + sq(gui_model().dir) + " --prompt 'the cat'";
    int rc = -1;
    auto states = run_script(args + " --size 1200x800", "wait\nprint\n", &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["window"], nlohmann::json::array({1200, 800}));
    // the next start, without --size, opens at the size the last one closed with: the screenshot shows it
    std::string png = test_temp_dir("gui_settings_size_png") + "/restored.png";
    states = run_script(args, "wait\nprint\nscreenshot " + png + "\n", &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["window"], nlohmann::json::array({1200, 800}));
    int w = 0, h = 0, n = 0;
    unsigned char* px = stbi_load(png.c_str(), &w, &h, &n, 3);
    ASSERT_NE(px, nullptr);
    stbi_image_free(px);
    EXPECT_EQ(w, 1200);
    EXPECT_EQ(h, 800);
    // an explicit --size wins over the remembered one (and is remembered in turn)
    states = run_script(args + " --size 1000x700", "wait\nprint\n", &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["window"], nlohmann::json::array({1000, 700}));
    EXPECT_EQ(cfg.settings()["window"]["width"], 1000);
    EXPECT_EQ(cfg.settings()["window"]["height"], 700);
}

TEST(GuiSettings, TheLastModelReopensAndOpenRecentListsThoseThatExist) {
    ASSERT_TRUE(have_app());
    config_home cfg("gui_settings_recent");
    // models of their own: B's folder is deleted below. Long names: a path wider than the Model panel must not
    // wrap, grow the panel and fold the left column into tabs (where Open recent is hidden), as it did in CI
    const tiny_model a = write_gui_model("gui_recent_a_in_a_folder_whose_name_is_long", 2, 2, 16, 21),
                     b = write_gui_model("gui_recent_b_in_a_folder_whose_name_is_long", 3, 2, 16, 22);
    int rc = -1;
    auto states = run_script("--remember --model " + sq(a.dir) + " --prompt 'the cat'", "wait\nopen " + b.dir + "\nwait\nprint\n",
                             &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["model"], b.dir);
    EXPECT_EQ(states[0]["recent"], nlohmann::json::array({b.dir, a.dir})) << "most recent first";
    EXPECT_EQ(cfg.settings()["last_model"], b.dir);
    EXPECT_EQ(cfg.settings()["recent"], nlohmann::json::array({b.dir, a.dir}));

    // no --model: the last model opens; the "Open recent" menu (clicked, as a user does) opens A, then B again
    states = run_script("--remember --prompt 'the cat'",
                        "wait\nprint\nclick Open recent\nclick recent " + a.dir + "\nwait\nprint\n"
                        "click Open recent\nclick recent " + b.dir + "\nwait\nprint\n",
                        &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    EXPECT_EQ(states[0]["model"], b.dir) << "the last model of the previous run";
    EXPECT_EQ(states[0]["recent"], nlohmann::json::array({b.dir, a.dir}));
    EXPECT_EQ(states[1]["model"], a.dir) << "opened from Open recent";
    EXPECT_EQ(states[1]["recent"], nlohmann::json::array({a.dir, b.dir}));
    EXPECT_EQ(states[1]["error"], "");
    EXPECT_EQ(states[2]["model"], b.dir);
    EXPECT_EQ(states[2]["recent"], nlohmann::json::array({b.dir, a.dir}));

    // B is deleted: the next start opens the embedded default, says why once, and B leaves the list
    std::filesystem::remove_all(b.dir);
    states = run_script("--remember --prompt 'the cat'", "wait\nprint\n", &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    const std::string def = gb::default_model_path();
    EXPECT_EQ(states[0]["model"], def);
    EXPECT_EQ(states[0]["recent"], nlohmann::json::array({def, a.dir})) << "no B";
    std::string w = states[0]["warning"];
    EXPECT_NE(w.find("no longer exists"), std::string::npos) << w;
    EXPECT_NE(w.find(b.dir), std::string::npos) << w;
    EXPECT_EQ(cfg.settings()["recent"], nlohmann::json::array({def, a.dir}));
}

TEST(GuiSettings, AModelThatNoLongerLoadsKeepsTheCurrentOne) {
    ASSERT_TRUE(have_app());
    config_home cfg("gui_settings_broken");
    std::string broken = test_temp_dir("gui_settings_broken_model"); // a folder, but no model in it
    std::filesystem::create_directories(cfg.dir);
    std::ofstream(cfg.dir + "/settings.json") << nlohmann::json{{"last_model", broken}, {"recent", {broken}}}.dump();
    int rc = -1;
    // the last model exists but does not load: the default opens instead, with a note
    auto states = run_script("--remember --prompt 'the cat'", "wait\nprint\n", &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    EXPECT_EQ(states[0]["model"], gb::default_model_path());
    EXPECT_EQ(states[0]["error"], "");
    std::string w = states[0]["warning"];
    EXPECT_NE(w.find("could not reopen the last model"), std::string::npos) << w;
    // opening it from "Open recent" fails as a typed path does: the error shows, the current model stays
    states = run_script("--remember --model " + sq(gui_model().dir) + " --prompt 'the cat'",
                        "wait\nprint\nclick Open recent\nclick recent " + broken + "\nwait\nprint\n", &rc, cfg.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    std::string e = states[1]["error"];
    EXPECT_NE(e.find("cannot load model"), std::string::npos) << e;
    EXPECT_EQ(states[1]["model"], gui_model().dir);
    EXPECT_EQ(states[1]["tokens"], states[0]["tokens"]);
}

// The soak's script commands (tools/soak.py): a click on a control not on screen does nothing, a drag moves a
// slider, and repeat-until runs the script again until its time has passed (counted from the first line, so a slow
// start-up on a loaded machine does not eat it).
TEST(GuiScript, SoakCommandsSkipHiddenControlsDragAndRepeat) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat sat'",
                             "wait\ntry-click no such control\ntab attribution\nwait\nclick saliency integrated gradients\n"
                             "wait\nprint\ndrag saliency steps 120 0\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    EXPECT_EQ(states[0]["tab"], "attribution");
    const auto& before = states[0]["attribution"]["saliency_steps"];
    const auto& after = states[1]["attribution"]["saliency_steps"];
    ASSERT_TRUE(before.is_number() && after.is_number());
    EXPECT_GT(after.get<int>(), before.get<int>()) << "the drag to the right moved the steps slider up";
    // ten frames a lap for 3 s: at least two laps at 4 frames a second or more
    states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat sat'", "frames 10\nprint\nrepeat-until 3\n", &rc);
    ASSERT_EQ(rc, 0);
    EXPECT_GE(states.size(), 2u) << "the script ran again until 3 s had passed";
}

// A tab the model lacks falls back to Head even while another panel fills the window (the tab bar is not drawn
// then), and the run settles: before, `wait` waited for the tab bar for ever.
TEST(GuiScale, ATabTheModelLacksFallsBackWhileAPanelFillsTheWindow) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    auto states = run_script("--model " + sq(gui_model().dir) + " --prompt 'the cat'",
                             "wait\nmaximise overview\ntab cross\nwait\nprint\nrestore\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    EXPECT_EQ(states[0]["maximised"], "Overview");
    EXPECT_EQ(states[0]["tab"], "head");
    EXPECT_EQ(states[1]["maximised"], "");
    EXPECT_EQ(states[1]["tab"], "head");
}

TEST(GuiSettings, AMalformedSettingsFileGivesTheDefaultsAndOneMessage) {
    ASSERT_TRUE(have_app());
    const std::string args = "--remember --model " + sq(gui_model().dir) + " --prompt 'the cat'";
    struct bad_case {
        std::string text, message;
    };
    for (const bad_case& c : {bad_case{"{\"window\": {\"width\": 1200, ", "is not valid JSON"},
                              bad_case{"", "is not valid JSON"},
                              bad_case{"{\"window\": {\"width\": \"wide\", \"height\": 800}}", "'window.width' is not an integer"},
                              bad_case{"{\"window\": {\"width\": 20, \"height\": 800}}", "outside 320x240"},
                              bad_case{"{\"recent\": [1, 2]}", "'recent' holds something that is not a path"},
                              bad_case{"[1, 2, 3]", "not a JSON object"}}) {
        SCOPED_TRACE(c.text);
        config_home cfg("gui_settings_bad");
        std::filesystem::create_directories(cfg.dir);
        std::ofstream(cfg.dir + "/settings.json") << c.text;
        int rc = -1;
        auto states = run_script(args, "wait\nprint\n", &rc, cfg.env());
        ASSERT_EQ(rc, 0) << "no crash";
        ASSERT_EQ(states.size(), 1u);
        std::string w = states[0]["warning"];
        EXPECT_NE(w.find("settings.json"), std::string::npos) << w;
        EXPECT_NE(w.find(c.message), std::string::npos) << w;
        EXPECT_NE(w.find("using the defaults"), std::string::npos) << w;
        EXPECT_EQ(w.find('\n'), std::string::npos) << "one line";
        EXPECT_EQ(states[0]["window"], nlohmann::json::array({1600, 1000})) << "the default size";
        EXPECT_EQ(states[0]["recent"], nlohmann::json::array({gui_model().dir}));
        EXPECT_EQ(cfg.settings()["last_model"], gui_model().dir) << "the file is good again";
    }
    // a settings.json that cannot be read (a folder): the defaults, a message, the app runs
    config_home dir_case("gui_settings_unreadable");
    std::filesystem::create_directories(dir_case.dir + "/settings.json");
    int rc = -1;
    auto states = run_script(args, "wait\nprint\n", &rc, dir_case.env());
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    std::string w = states[0]["warning"];
    EXPECT_NE(w.find("cannot read"), std::string::npos) << w;
    EXPECT_EQ(states[0]["model"], gui_model().dir);
    // a config folder that cannot be made (XDG_CONFIG_HOME is a file): no persistence, said once, the app runs
    std::string file_home = test_temp_dir("gui_settings_nofolder") + "/a-file";
    std::ofstream(file_home) << "x";
    states = run_script(args, "wait\nprint\n", &rc, "XDG_CONFIG_HOME=" + sq(file_home) + " ");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 1u);
    w = states[0]["warning"];
    EXPECT_NE(w.find("cannot create the config folder"), std::string::npos) << w;
    EXPECT_NE(w.find("not remembered"), std::string::npos) << w;
    EXPECT_EQ(states[0]["config_dir"], "");
    EXPECT_EQ(states[0]["model"], gui_model().dir);
}

// The surprisal strip under the chips: its numbers (the script's dump of what the strip draws) equal the core's
// surprisal of a run with every position's logits, for the prompt, after typing (the rows before the edit are the
// previous result's, the new ones computed; the live run stays a one-token run) and under an ablation that makes
// the final norm the identity. An encoder has no strip, and says why in one line.
TEST(GuiSurprisal, StripEqualsTheCoreSurprisalAndFollowsEditsAndAblations) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--model " + sq(gui_model().dir) + " --prompt " + sq("the cat sat"),
                               "wait\nprint\nclick prompt\nkey end\ntype  on the mat\nwait\nprint\n"
                               "click No LayerNorm\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    const gb::model& m = loaded(gui_model());
    gb::ablation no_ln;
    no_ln.no_layernorm.on = true;
    const std::string prompts[3] = {"the cat sat", "the cat sat on the mat", "the cat sat on the mat"};
    for (int i = 0; i < 3; i++) {
        const nlohmann::json& sj = st[i]["surprisal"];
        SCOPED_TRACE("state " + std::to_string(i) + ": " + sj.dump());
        EXPECT_EQ(sj["why"], "");
        gb::record rec;
        gb::forward_options o;
        o.all_logits = true;
        gb::run_forward(rec, m, gb::encode_prompt(m.tok, prompts[i], false), i == 2 ? no_ln : gb::ablation{}, o);
        const gb::surprisal_result want = gb::surprisal(rec, m.tok);
        ASSERT_EQ((int)sj["nats"].size(), want.n_tokens);
        EXPECT_TRUE(sj["nats"][0].is_null()) << "nothing predicts the first token";
        for (int t = 1; t < want.n_tokens; t++) {
            EXPECT_NEAR(sj["nats"][t].get<double>(), want.nats[t], 1e-4) << "token " << t;
            EXPECT_EQ(sj["top_ids"][t], want.top_ids[t]) << "token " << t;
            EXPECT_NEAR(sj["top_probs"][t].get<double>(), want.top_probs[t], 1e-5) << "token " << t;
        }
        EXPECT_NEAR(sj["mean_nats"].get<double>(), want.mean_nats, 1e-4);
        EXPECT_NEAR(sj["bits_per_byte"].get<double>(), want.bits_per_byte, 1e-4);
        EXPECT_EQ(sj["scored"], want.n_tokens - 1);
    }
    EXPECT_TRUE(st[1]["report"]["reused"]) << "the strip does not turn typing into a full run: " << st[1]["report"].dump();
    EXPECT_EQ(st[2]["ablation"], "no-layernorm");
    EXPECT_NE(st[2]["surprisal"]["mean_nats"], st[1]["surprisal"]["mean_nats"]) << "the ablated model's surprisal";

    const tiny_encoder enc = write_tiny_encoder(test_temp_dir("gui_surprisal_bert") + "/m", {});
    const auto se = run_script("--model " + sq(enc.dir) + " --prompt 'the cat'", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(se.size(), 1u);
    EXPECT_FALSE(se[0]["surprisal"].contains("nats"));
    const std::string why = se[0]["surprisal"]["why"];
    EXPECT_NE(why.find("every token sees the whole prompt"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
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
