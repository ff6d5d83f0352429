// Vision Transformers (ViT, DeiT): the forward against a double-precision reference on tiny random image
// classifiers the tests write in HF layout, under every ablation and both matmul kernels; class names, position
// names, the preprocessing of an image into the model's pixels, attention rollout, and what is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/head_scores.h"
#include "io/loader.h"
#include "kernels/softmax.h"
#include "model/kind.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "run/live.h"
#include "run/predict.h"
#include "run/vision.h"
#include "test_util.h"
#include "tiny_encoder.h" // encoder_ablation_cases, keep_every_point
#include "tiny_llama.h"   // expect_record_matches
#include "tiny_vision.h"
#include "util/error.h"
#include "util/image.h"

#include <stb_image_write.h>

namespace {

std::string vision_dir(const std::string& name) {
    const std::string d = std::string(::testing::TempDir()) + "glassbox_vision_" + name;
    std::filesystem::remove_all(d);
    return d;
}

void expect_vision_matches(const vision_spec& s, const std::string& label) {
    const tiny_vision tm = write_tiny_vision(vision_dir(label), s);
    const std::vector<float> px = random_pixels(s, s.seed + 11);
    for_each_matmul([&] {
        const gb::model m = gb::load_model(tm.dir);
        const std::vector<int> tokens = gb::vision_tokens(m.config);
        for (const auto& [name, ab] : encoder_ablation_cases()) {
            gb::record cap;
            gb::forward_options opt = keep_every_point();
            opt.pixels = px.data();
            gb::run_forward(cap, m, tokens, ab, opt);
            ASSERT_TRUE(cap.all_logits);
            ASSERT_FALSE(cap.causal);
            expect_record_matches(cap, reference_vision(tm, px, ab), label + ", " + name);
        }
    });
}

TEST(Vision, VitMatchesReferenceUnderEveryAblation) { expect_vision_matches({}, "vit"); }

TEST(Vision, DeitWithTeacherAveragesItsTwoHeads) {
    vision_spec s;
    s.family = "deit";
    s.seed = 4;
    expect_vision_matches(s, "deit");
}

TEST(Vision, DeitWithOneClassifier) {
    vision_spec s;
    s.family = "deit";
    s.teacher = false;
    s.image = 12, s.patch = 6, s.n_layer = 3, s.std = 0.2f, s.seed = 6;
    expect_vision_matches(s, "deit_single");
}

TEST(Vision, ConfigGivesShapesClassNamesAndPositionNames) {
    vision_spec s;
    s.family = "deit";
    const tiny_vision tm = write_tiny_vision(vision_dir("names"), s);
    const gb::model m = gb::load_model(tm.dir);
    const gb::model_config& c = m.config;
    EXPECT_EQ(c.arch, gb::ARCH_DEIT);
    EXPECT_EQ(c.grid(), 4);
    EXPECT_EQ(c.n_prefix, 2);
    EXPECT_EQ(c.n_ctx, 2 + 16);
    EXPECT_EQ(c.vocab_size, 7);
    EXPECT_EQ(gb::token_text(m.tok, 3), "label3");
    EXPECT_EQ(gb::vision_piece(c, 0), "[CLS]");
    EXPECT_EQ(gb::vision_piece(c, 1), "[DIST]");
    EXPECT_EQ(gb::vision_piece(c, 2 + 4 * 2 + 3), "r2c3");
    EXPECT_EQ(gb::vision_cell(c, 2 + 5).first, 1);
    EXPECT_EQ(gb::vision_cell(c, 2 + 5).second, 1);
    EXPECT_THROW(gb::encode_prompt(m.tok, "a cat", false), gb::error) << "an image classifier encodes no text";
    gb::record cap;
    const std::vector<float> px = random_pixels(s, 3);
    gb::forward_options opt;
    opt.pixels = px.data();
    gb::run_forward(cap, m, gb::vision_tokens(c), {}, opt);
    EXPECT_EQ(cap.pieces[1], "[DIST]");
    EXPECT_EQ(cap.pieces.back(), "r3c3");
    // the parameters counted include the patch embedding, the tokens and both heads
    const gb::param_counts pc = gb::count_params(m);
    const int64_t d = 32, emb = d * 3 * 4 * 4 + d + 2 * d + 18 * d + 2 * (7 * d + 7);
    EXPECT_EQ(pc.embeddings, emb);
}

// The image becomes pixels as the folder's preprocessor_config.json says: here a resize to the model's 16 x 16
// (unchanged for a 16 x 16 image), u8 / 255, then (x - 0.5) / 0.5, channel-first.
TEST(Vision, ImageBecomesTheModelsPixels) {
    const tiny_vision tm = write_tiny_vision(vision_dir("pixels"), {});
    const gb::model m = gb::load_model(tm.dir);
    gb::image img;
    img.width = img.height = 16;
    img.rgb.resize(16 * 16 * 3);
    for (size_t i = 0; i < img.rgb.size(); i++) img.rgb[i] = (uint8_t)(i * 37 % 256);
    const std::vector<float> px = gb::vision_pixels(m, img);
    ASSERT_EQ(px.size(), 3u * 16 * 16);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 16; y++)
            for (int x = 0; x < 16; x++)
                EXPECT_NEAR(px[((size_t)c * 16 + y) * 16 + x], (img.rgb[((size_t)y * 16 + x) * 3 + c] / 255.0 - 0.5) / 0.5, 1e-6);
    // a larger image is resized down to the model's size
    gb::image big;
    big.width = 40, big.height = 30;
    big.rgb.assign(40 * 30 * 3, 200);
    const std::vector<float> px2 = gb::vision_pixels(m, big);
    ASSERT_EQ(px2.size(), 3u * 16 * 16);
    EXPECT_NEAR(px2[100], (200 / 255.0 - 0.5) / 0.5, 1e-6);
}

// Rollout against its definition in double, from the reference's patterns.
TEST(Vision, AttentionRolloutMatchesItsDefinition) {
    vision_spec s;
    s.n_layer = 3;
    const tiny_vision tm = write_tiny_vision(vision_dir("rollout"), s);
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<float> px = random_pixels(s, 8);
    gb::forward_options opt;
    opt.pixels = px.data();
    gb::record cap;
    gb::run_forward(cap, m, gb::vision_tokens(m.config), {}, opt);
    const ref_trace ref = reference_vision(tm, px, {});
    const int T = cap.n_tokens, H = s.n_head;
    for (int up_to : {0, 2}) {
        std::vector<double> R((size_t)T * T, 0.0);
        for (int i = 0; i < T; i++) R[(size_t)i * T + i] = 1;
        for (int l = 0; l <= up_to; l++) {
            std::vector<double> A((size_t)T * T, 0.0), N((size_t)T * T, 0.0);
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++) {
                    double mean = 0;
                    for (int h = 0; h < H; h++) mean += ref.attention[(((size_t)l * H + h) * T + i) * T + j];
                    A[(size_t)i * T + j] = 0.5 * mean / H + (i == j ? 0.5 : 0);
                }
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    for (int k = 0; k < T; k++) N[(size_t)i * T + j] += A[(size_t)i * T + k] * R[(size_t)k * T + j];
            R = N;
        }
        const std::vector<float> got = gb::attention_rollout(cap, up_to);
        ASSERT_EQ(got.size(), R.size());
        for (size_t i = 0; i < R.size(); i++) ASSERT_NEAR(got[i], R[i], 1e-5) << "layer " << up_to << " at " << i;
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) sum += got[(size_t)i * T + j];
            EXPECT_NEAR(sum, 1.0, 1e-5);
        }
    }
}

TEST(Vision, BadFoldersSayWhatIsWrong) {
    const tiny_vision tm = write_tiny_vision(vision_dir("bad"), {});
    auto expect_error = [](const std::string& dir, const std::string& part) {
        try {
            gb::load_model(dir);
            ADD_FAILURE() << "expected an error containing '" << part << "'";
        } catch (const gb::error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    nlohmann::json c;
    std::ifstream(tm.dir + "/config.json") >> c;
    const nlohmann::json good = c;
    c["image_size"] = 18; // not a multiple of the 4-pixel patches
    std::ofstream(tm.dir + "/config.json") << c.dump();
    expect_error(tm.dir, "not a multiple of patch_size");
    c = good;
    c["hidden_act"] = "relu";
    std::ofstream(tm.dir + "/config.json") << c.dump();
    expect_error(tm.dir, "hidden_act relu");
    std::ofstream(tm.dir + "/config.json") << good.dump();
    nlohmann::json p;
    std::ifstream(tm.dir + "/preprocessor_config.json") >> p;
    p["size"] = {{"height", 32}, {"width", 32}};
    std::ofstream(tm.dir + "/preprocessor_config.json") << p.dump();
    expect_error(tm.dir, "the model reads 16x16");
    std::filesystem::remove(tm.dir + "/preprocessor_config.json"); // absent: HF's defaults at the model's size
    EXPECT_NO_THROW(gb::load_model(tm.dir));
    // a bare ViTModel has no classifier
    vision_spec s;
    s.with_head = false;
    const tiny_vision bare = write_tiny_vision(vision_dir("bare"), s);
    expect_error(bare.dir, "missing tensor classifier.weight (a bare vit model has no classifier");
}

// Live recompute: an ablation resumes from its layer on the same image; another image (the same tokens: the
// positions) runs the baseline again from the embeddings, and both records equal fresh runs.
TEST(Vision, LiveRunsResumeOnTheSameImageAndRestartOnAnother) {
    const tiny_vision tm = write_tiny_vision(vision_dir("live"), {});
    const gb::model m = gb::load_model(tm.dir);
    gb::live_state st;
    gb::live_request rq;
    rq.tokens = gb::vision_tokens(m.config);
    rq.pixels = random_pixels(tm.spec, 1);
    rq.keep.points = gb::hook_bit(gb::HOOK_PATTERN);
    rq.keep.resid_stream = true;
    gb::live_result out;
    gb::live_run(out, st, m, rq);
    gb::ablation ab;
    ab.heads = {{1, 2}};
    rq.interventions = gb::ablation_interventions(ab, m.config);
    gb::live_run(out, st, m, rq);
    EXPECT_TRUE(out.report.reused) << out.report.what;
    EXPECT_EQ(out.report.from_point, 2) << out.report.what; // resumes at layer 1's input
    rq.pixels = random_pixels(tm.spec, 2);
    gb::live_run(out, st, m, rq);
    // the baseline runs the new image from its embeddings; the ablated run may resume from the new baseline
    EXPECT_TRUE(out.report.baseline_run) << out.report.what;
    ASSERT_EQ(out.base->logits.size(), out.run->logits.size());
    gb::forward_options plain;
    plain.pixels = rq.pixels.data();
    gb::record fresh_base;
    gb::run_forward(fresh_base, m, rq.tokens, {}, plain);
    for (size_t i = 0; i < fresh_base.logits.size(); i++) EXPECT_NEAR(fresh_base.logits[i], out.base->logits[i], 1e-5);
    gb::forward_options opt;
    opt.pixels = rq.pixels.data();
    gb::record fresh;
    gb::run_forward(fresh, m, rq.tokens, ab, opt);
    ASSERT_EQ(fresh.logits.size(), out.run->logits.size());
    for (size_t i = 0; i < fresh.logits.size(); i++) EXPECT_NEAR(fresh.logits[i], out.run->logits[i], 1e-5);
}

// glassbox-cli on an image classifier: run --image prints the classes and where [CLS] looked, --json and
// --npy-dir hold them (attention.npy [L][H][T][T], rollout.npy); text commands and text flags are refused.
TEST(Vision, CliRunWritesClassesAttentionAndRollout) {
    vision_spec s;
    s.family = "deit";
    const tiny_vision tm = write_tiny_vision(vision_dir("cli"), s);
    const std::string out = vision_dir("cli_out");
    std::filesystem::create_directories(out);
    gb::image img;
    img.width = 30, img.height = 22;
    for (int i = 0; i < 30 * 22 * 3; i++) img.rgb.push_back((uint8_t)((i * 13) % 256));
    ASSERT_TRUE(stbi_write_png((out + "/in.png").c_str(), 30, 22, 3, img.rgb.data(), 30 * 3));
    ASSERT_TRUE(stbi_write_jpg((out + "/in.jpg").c_str(), 30, 22, 3, img.rgb.data(), 95));
    command_result r = run_cli("run --model '" + tm.dir + "' --image '" + out + "/in.png' --top-k 3 --json '" + out +
                           "/run.json' --npy-dir '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("top 3 classes:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("positions (18): [CLS] .. r3c3"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("attention rollout"), std::string::npos) << r.out;
    // the same classes as the core's forward on the same pixels
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<float> px = gb::vision_pixels(m, gb::load_image(out + "/in.png"));
    gb::forward_options opt;
    opt.pixels = px.data();
    gb::record cap;
    gb::run_forward(cap, m, gb::vision_tokens(m.config), {}, opt);
    nlohmann::json j;
    std::ifstream(out + "/run.json") >> j;
    ASSERT_EQ(j["classes"].size(), 3u);
    EXPECT_EQ(j["classes"][0]["id"], gb::top_k_probs(cap.logits.data(), cap.vocab, 1)[0].id);
    EXPECT_EQ(j["classes"][0]["text"], "label" + std::to_string(j["classes"][0]["id"].get<int>()));
    // top_k is the prediction's, [CLS]'s classes (it was the last patch's distribution)
    ASSERT_EQ(j["top_k"].size(), 3u);
    for (int i = 0; i < 3; i++) EXPECT_EQ(j["top_k"][i]["id"], j["classes"][i]["id"]) << i;
    EXPECT_EQ(j["model"]["kind"], "vision");
    EXPECT_EQ(j["model"]["kind_title"], "image classifier");
    EXPECT_EQ(j["model"]["vision"]["grid"], 4);
    ASSERT_EQ(j["rollout_cls"].size(), 18u);
    double sum = 0;
    for (double v : j["rollout_cls"]) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-4);
    for (const char* f : {"attention.npy", "rollout.npy", "pixels.npy", "logits.npy", "residual_norms.npy"})
        EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
    std::ifstream npy(out + "/attention.npy", std::ios::binary);
    std::string head(128, '\0');
    npy.read(&head[0], 128);
    EXPECT_NE(head.find("(2, 4, 18, 18)"), std::string::npos) << head;
    // a JPEG too
    r = run_cli("run --model '" + tm.dir + "' --image '" + out + "/in.jpg'");
    ASSERT_EQ(r.code, 0) << r.err;
    // what is refused, in one line naming what was wrong
    r = run_cli("run --model '" + tm.dir + "' --prompt 'a cat'");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("is an image classifier (deit); give --image FILE"), std::string::npos) << r.err;
    r = run_cli("lens --model '" + tm.dir + "' --prompt 'a cat'");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--prompt: " + m.path + " is an image classifier (deit); give --image FILE"), std::string::npos) << r.err;
    // what the kind does not offer: the kind table's line, the option named where an option asked for it
    const std::vector<std::pair<std::string, std::pair<std::string, gb::feature>>> refused = {
        {"heads --repeat-random 5", {"--repeat-random: ", gb::FEATURE_INDUCTION_TEST}},
        {"generate --prompt x --max-new-tokens 1", {"", gb::FEATURE_GENERATE}},
        {"tokenize --text x", {"", gb::FEATURE_TOKENIZE}},
        {"attribute --prompt x --target-id 1", {"", gb::FEATURE_ATTRIBUTION}},
        {"learn --prompt x", {"", gb::FEATURE_LEARN}},
        {"break-it --prompt x", {"", gb::FEATURE_BREAK_IT}},
        {"run --image '" + out + "/in.png' --bos", {"--bos: ", gb::FEATURE_BOS}},
    };
    for (const auto& [args, why] : refused) {
        const std::string cmd = args.substr(0, args.find(' '));
        r = run_cli(cmd + " --model '" + tm.dir + "' " + args.substr(cmd.size() + 1));
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err, "error: " + why.first + gb::refusal(m, why.second) + "\n") << args;
    }
    r = run_cli("run --model '" + tm.dir + "' --image '" + out + "/nope.png'");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("nope.png"), std::string::npos) << r.err;
    r = run_cli("run --model '" + tm.dir + "' --image '" + out + "/run.json'");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("run.json: cannot read the image"), std::string::npos) << r.err;
    r = run_cli("info --model '" + tm.dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("\"family\": \"deit\""), std::string::npos) << r.out;
}

// lens --image and heads --image read the image's run: the lens at [CLS], whose last point is the classifier's
// own prediction (a ViT: one head), and every head's scores on the image's positions, as score_heads gives them.
// The lens's JSON names tokens, which an image's positions are not: refused, --npy-dir written instead.
TEST(Vision, CliLensAndHeadsReadTheImage) {
    const tiny_vision tm = write_tiny_vision(vision_dir("cli_lens"), {});
    const std::string out = vision_dir("cli_lens_out");
    std::filesystem::create_directories(out);
    gb::image img;
    img.width = 20, img.height = 20;
    for (int i = 0; i < 20 * 20 * 3; i++) img.rgb.push_back((uint8_t)((i * 7) % 256));
    ASSERT_TRUE(stbi_write_png((out + "/in.png").c_str(), 20, 20, 3, img.rgb.data(), 20 * 3));
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<float> px = gb::vision_pixels(m, gb::load_image(out + "/in.png"));
    gb::forward_options opt;
    opt.pixels = px.data();
    gb::record cap;
    gb::run_forward(cap, m, gb::vision_tokens(m.config), {}, opt);
    const int best = gb::top_k_probs(cap.logits.data(), cap.vocab, 1)[0].id;

    command_result r = run_cli("lens --model '" + tm.dir + "' --image '" + out + "/in.png' --top-k 2 --npy-dir '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("logit lens at the classifier's position (\"[CLS]\")"), std::string::npos) << r.out;
    // the last point's line (after the last MLP) starts with the run's top class
    const std::string last = "L" + std::to_string(m.config.n_layer - 1) + " mlp";
    const size_t at = r.out.find("  " + last);
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at), top = "\"label" + std::to_string(best) + "\"";
    EXPECT_EQ(line.compare(line.find('"'), top.size(), top), 0) << line;
    std::ifstream npy(out + "/lens_top_probs.npy", std::ios::binary);
    std::string header(128, '\0');
    npy.read(&header[0], 128);
    EXPECT_NE(header.find("(" + std::to_string(2 * m.config.n_layer + 1) + ", " + std::to_string(m.config.n_ctx) + ", 2)"),
              std::string::npos) << header;
    r = run_cli("lens --model '" + tm.dir + "' --image '" + out + "/in.png' --json '" + out + "/lens.json'");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--json: " + m.path + " is an image classifier"), std::string::npos) << r.err;

    r = run_cli("heads --model '" + tm.dir + "' --image '" + out + "/in.png' --json '" + out + "/heads.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(std::to_string(m.config.n_ctx) + " positions of the image; the five heads that score highest"),
              std::string::npos) << r.out;
    const gb::head_scores hs = gb::score_heads(cap);
    nlohmann::json j;
    std::ifstream(out + "/heads.json") >> j;
    for (int l = 0; l < m.config.n_layer; l++)
        for (int h = 0; h < m.config.n_head; h++)
            EXPECT_NEAR(j["first_token"][l][h].get<double>(), hs.score[gb::SCORE_FIRST_TOKEN][(size_t)l * m.config.n_head + h],
                        1e-6);
}

} // namespace
