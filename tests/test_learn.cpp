// Learn mode's walk (core/analysis/learn.h): every number it shows is the run's own (the record's rows, or
// recomputed from them and checked against what the run produced), its formulas follow the architecture, and
// the parameter derivation adds up to the model's count. Also `glassbox-cli learn`. Its picture
// (core/analysis/learn_diagram.h): every step lights a box of the model's forward with the step's own shape,
// the boxes follow the architecture; and the app's Learn tab that draws it, stepped through its script.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stb_image_write.h>

#include "analysis/learn.h"
#include "analysis/learn_diagram.h"
#include "app_script.h"
#include "io/loader.h"
#include "ref_models.h"
#include "run/forward.h"
#include "run/seq2seq.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_family.h"
#include "tiny_model.h"
#include "tiny_seq2seq.h"
#include "tiny_vision.h"

namespace {

gb::record learn_run(const gb::model& m, const std::vector<int>& ids, int layer) {
    gb::forward_options o;
    o.keep = gb::learn_keep(m.config.n_layer, layer);
    o.all_logits = true;
    gb::record r;
    gb::run_forward(r, m, ids, {}, o);
    return r;
}

const gb::learn_step& step(const gb::learn_walk& w, const std::string& title) {
    for (const gb::learn_step& s : w.steps)
        if (s.title.find(title) != std::string::npos) return s;
    throw std::runtime_error("no step " + title);
}

} // namespace

TEST(Learn, EveryNumberIsTheRunsOwn) {
    for (const ref_model* rm : ref_models()) {
        const gb::model& m = rm->m;
        const gb::model_config& c = m.config;
        const std::vector<int> ids = rm->tokens(12, 4);
        const int T = (int)ids.size(), d = c.d_model, dh = c.d_head, V = c.vocab_size;
        for (int layer : {0, c.n_layer - 1})
            for (int token : {0, 5, T - 1}) {
                const int head = (layer + token) % c.n_head;
                const gb::record r = learn_run(m, ids, layer);
                const gb::learn_walk w = gb::walk_through(m, r, token, layer, head);
                const std::string where = rm->name + " L" + std::to_string(layer) + " token " + std::to_string(token);
                // vectors: the record's rows (first values) and their norms
                const gb::learn_step& emb = step(w, "Embedding");
                EXPECT_EQ(emb.values[0], r.resid(0)[(size_t)token * d]) << where;
                EXPECT_EQ(emb.width, d);
                double sq = 0;
                for (int i = 0; i < d; i++) sq += (double)r.resid(0)[(size_t)token * d + i] * r.resid(0)[(size_t)token * d + i];
                EXPECT_NEAR(emb.norm, std::sqrt(sq), 1e-9 * std::sqrt(sq)) << where;
                const gb::learn_step& q = step(w, "the query of head");
                EXPECT_EQ(q.values[1], r.get(gb::HOOK_Q, layer)[(size_t)token * c.n_head * dh + head * dh + 1]) << where;
                EXPECT_EQ(step(w, "Weighted values").values[0],
                          r.get(gb::HOOK_Z, layer)[(size_t)token * c.n_head * dh + head * dh]) << where;
                EXPECT_EQ(step(w, "MLP output").values[2], r.get(gb::HOOK_MLP_OUT, layer)[(size_t)token * d + 2]) << where;
                // the scores, recomputed in double, give the run's probabilities through a softmax
                const gb::learn_step& sc = step(w, "Scores");
                const gb::learn_step& sm = step(w, "Softmax");
                ASSERT_EQ(sc.values.size(), (size_t)token + 1) << where; // every key up to the token (12 < 16)
                ASSERT_EQ(sm.values.size(), sc.values.size());
                double mx = -INFINITY, z = 0;
                for (float s : sc.values) mx = std::max(mx, (double)s);
                for (float s : sc.values) z += std::exp(s - mx);
                for (size_t j = 0; j < sc.values.size(); j++) {
                    EXPECT_NEAR(std::exp(sc.values[j] - mx) / z, sm.values[j], 2e-6) << where << " key " << j;
                    EXPECT_EQ(sm.values[j], r.head(layer, head)[(size_t)token * T + j]);
                    EXPECT_EQ(sc.labels[j], r.pieces[j]);
                }
                // the prediction: the run's own logits of that position, top 5 in order
                const gb::learn_step& un = step(w, "Unembedding");
                const float* lg = &r.logits[(size_t)token * V];
                const int top = (int)(std::max_element(lg, lg + V) - lg);
                EXPECT_EQ(un.labels[0], gb::token_text(m.tok, top)) << where;
                EXPECT_NEAR(un.values[0], lg[top], 1e-4 * std::max(1.0f, std::fabs(lg[top]))) << where;
                const gb::learn_step& pr = step(w, "next token");
                for (size_t i = 1; i < pr.values.size(); i++) EXPECT_LE(pr.values[i], pr.values[i - 1]);
            }
        // formulas follow the family
        const gb::record r = learn_run(m, ids, 0);
        const gb::learn_walk w = gb::walk_through(m, r, T - 1, 0, 0);
        const bool gpt2 = c.arch == gb::ARCH_GPT2;
        EXPECT_NE(step(w, "Embedding").formula.find(gpt2 ? "P[position]" : "E[id]"), std::string::npos);
        EXPECT_EQ(step(w, "Embedding").note.find("RoPE") != std::string::npos, !gpt2);
        EXPECT_NE(step(w, "MLP hidden").formula.find(gpt2 ? "GELU" : "silu"), std::string::npos);
        EXPECT_NE(step(w, "norm before attention").formula.find(gpt2 ? "LayerNorm" : "RMSNorm"), std::string::npos);
        if (c.n_kv_head < c.n_head) {
            EXPECT_NE(step(w, "the query").note.find("grouped-query"), std::string::npos);
        }
        // the parameter derivation adds up
        const std::vector<gb::param_line> p = gb::param_derivation(m);
        const gb::param_counts pc = gb::count_params(m);
        EXPECT_EQ(p.front().count, (int64_t)c.vocab_size * c.d_model + 12LL * c.n_layer * c.d_model * c.d_model);
        EXPECT_EQ(p.back().count, pc.total());
        int64_t sum = 0;
        for (size_t i = 1; i + 1 < p.size(); i++) sum += p[i].count;
        EXPECT_EQ(sum, pc.total());
    }
}

TEST(Learn, SlidingWindowAndErrors) {
    family_spec s;
    s.family = "gemma2", s.head_dim = 12, s.sliding_window = 4, s.seed = 61, s.std = 0.12f;
    const tiny_family f = write_tiny_family(test_temp_dir("learn_gemma2"), s);
    const gb::model m = gb::load_model(f.hf_dir);
    const std::vector<int> ids = random_tokens(10, s.vocab, 2);
    const gb::record r = learn_run(m, ids, 0);
    const gb::learn_walk w = gb::walk_through(m, r, 9, 0, 1);
    // layer 0 slides: keys 6..9 only, and the mask says so
    EXPECT_EQ(step(w, "Scores").values.size(), 4u);
    EXPECT_NE(step(w, "Causal mask").note.find("sliding window of 4"), std::string::npos) << step(w, "Causal mask").note;
    EXPECT_NE(step(w, "Embedding").formula.find("√d"), std::string::npos);
    EXPECT_NE(step(w, "MLP hidden").formula.find("gelu(x W_gate)"), std::string::npos);
    expect_gb_error([&] { gb::walk_through(m, r, 10, 0, 0); }, "token 10 is outside the prompt (0..9)");
    expect_gb_error([&] { gb::walk_through(m, r, 0, 2, 0); }, "layer 2 is outside the model (0..1)");
    expect_gb_error([&] { gb::walk_through(m, r, 0, 0, 4); }, "head 4 is outside the model (0..3)");
    expect_gb_error([&] { gb::walk_through(m, r, 0, 1, 0); }, "which this run did not keep"); // layer 1 not kept
}

TEST(Learn, CommandLinePrintsTheWalkAndWritesJson) {
    const tiny_model& tm = []() -> const tiny_model& {
        static tiny_model t = write_tiny_gpt2(test_temp_dir("learn_cli"), tiny_spec{});
        return t;
    }();
    const std::string json = test_temp_dir("learn_cli_out") + "/w.json";
    command_result r = run_command(std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli learn --model '" + tm.dir +
                                   "' --prompt 'the cat sat' --layer 1 --head 1 --json '" + json + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* s : {"Text → tokens", "Scores", "Causal mask", "Softmax → next token", "Parameters:", "textbook estimate"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
    std::ifstream in(json);
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j["layer"], 1);
    EXPECT_EQ(j["head"], 1);
    EXPECT_EQ(j["steps"].size(), 17u);
    EXPECT_EQ(j["params"].back()["what"], "total");
    command_result bad = run_command(std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli learn --model '" + tm.dir +
                                     "' --prompt 'the cat' --layer 9");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--layer"), std::string::npos) << bad.err;
}

// The app's Learn tab: opened by a click on its tab, it walks through the selected head's layer for the selected
// token; selecting another token (or head) walks again. What it shows is the walk of the run on screen.
TEST(LearnGui, TheTabWalksTheSelectedTokenLayerAndHead) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    int rc = -1;
    auto states = run_script("--prompt 'The cat sat on the' --select-head 1.3",
                             "wait\nclick tab Learn\nwait\nprint\nselect-token 2\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    for (size_t i = 0; i < 2; i++) {
        const nlohmann::json& l = states[i]["learn"];
        EXPECT_EQ(states[i]["tab"], "learn");
        EXPECT_EQ(l["current"], true) << i;
        EXPECT_EQ(l["layer"], 1);
        EXPECT_EQ(l["head"], 3);
        EXPECT_EQ(l["token"], i == 0 ? 4 : 2);
        EXPECT_EQ(l["steps"].size(), 17u);
        EXPECT_EQ(l["steps"][4], "Scores");
    }
    // the walk's prediction is the app's own at the last token
    EXPECT_EQ(states[0]["learn"]["prediction"], states[0]["top1"]);
}

// The step's "see: PANEL" is a link: a panel outside the tabs is outlined for a moment, a tab is opened (the
// fifth step, Scores, links to the Head tab).
TEST(LearnGui, StepLinksOpenThePanelTheyName) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    int rc = -1;
    auto states = run_script("--prompt 'The cat sat on the' --select-head 1.3",
                             "wait\nclick tab Learn\nwait\nprint\nclick learn see Prompt\nprint\n"
                             "hover learn see Prompt\nwheel -3\nframes 3\nkey right\nkey right\nkey right\nkey right\n"
                             "frames 2\nclick learn see Head\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    EXPECT_EQ(states[0]["tab"], "learn");
    EXPECT_EQ(states[0]["flash"], "");
    EXPECT_EQ(states[1]["tab"], "learn") << "a panel outside the tabs leaves the Learn tab open";
    EXPECT_EQ(states[1]["flash"], "Prompt");
    EXPECT_EQ(states[2]["tab"], "head");
    EXPECT_EQ(states[2]["flash"], "Analysis");
}

// ---------------------------------------------------------------------------------------------
// The picture: the model's boxes, and the walk's steps on them
// ---------------------------------------------------------------------------------------------

namespace {

const gb::model& family_model(const std::string& family) {
    static std::map<std::string, gb::model> models;
    if (!models.count(family)) {
        family_spec s;
        s.family = family, s.seed = 71;
        models[family] = gb::load_model(write_tiny_family(test_temp_dir("learn_pic_" + family), s).hf_dir);
    }
    return models[family];
}

const gb::model& seq2seq_model(const std::string& family) {
    static std::map<std::string, gb::model> models;
    if (!models.count(family)) {
        seq2seq_spec s;
        s.family = family, s.seed = 73;
        models[family] = gb::load_model(write_tiny_seq2seq(test_temp_dir("learn_pic_" + family), s).dir);
    }
    return models[family];
}

// Every step of the walk lights a box the picture has, in the picture's order, and the box's shape is the step's.
void expect_steps_light_boxes(const gb::learn_walk& w, const gb::learn_diagram& g, const std::string& where) {
    const std::vector<gb::diagram_part> parts = gb::step_parts(w);
    ASSERT_EQ(parts.size(), w.steps.size());
    int last = -1;
    for (size_t i = 0; i < parts.size(); i++) {
        ASSERT_NE(parts[i], gb::PART_COUNT) << where << ": the step '" << w.steps[i].title << "' lights no box";
        const gb::diagram_box* b = g.find(parts[i]);
        ASSERT_NE(b, nullptr) << where << ": the picture has no " << gb::part_name(parts[i]);
        const int at = (int)(b - g.boxes.data());
        EXPECT_GT(at, last) << where << ": " << w.steps[i].title << " lights a box before the previous step's";
        last = at;
        if (!(parts[i] == gb::PART_INPUT && g.kind == gb::KIND_SEQ2SEQ)) { // (the walk's names both S and T there)
            EXPECT_EQ(b->shape(), w.steps[i].shape) << where << ": " << w.steps[i].title;
        }
    }
}

} // namespace

TEST(LearnPicture, EveryStepLightsABoxWithTheStepsShape) {
    std::vector<std::pair<std::string, const gb::model*>> models;
    for (const ref_model* rm : ref_models()) models.push_back({rm->name, &rm->m});
    for (const char* f : {"gemma2", "gpt_neox", "olmo2", "qwen2_moe"}) models.push_back({f, &family_model(f)});
    for (auto [name, mp] : models) {
        const gb::model& m = *mp;
        const std::vector<int> ids = random_tokens(7, m.config.vocab_size - 2, 3);
        for (int layer : {0, m.config.n_layer - 1}) {
            const gb::record r = learn_run(m, ids, layer);
            const gb::learn_walk w = gb::walk_through(m, r, 6, layer, 1);
            const gb::learn_diagram g = gb::diagram_of(m, r.n_tokens);
            EXPECT_EQ(g.n_layer, m.config.n_layer);
            EXPECT_TRUE(g.predicts_next);
            expect_steps_light_boxes(w, g, name);
        }
    }
    for (const char* family : {"marian", "mbart"}) { // the walk follows the decoder, through its cross-attention
        const gb::model& m = seq2seq_model(family);
        const std::vector<int> source = random_tokens(6, 100, 5), target = random_tokens(4, 100, 7);
        gb::forward_options o;
        o.keep = gb::learn_keep(m.config.n_layer, 1);
        gb::seq2seq_record r;
        gb::run_seq2seq(r, m, source, target, {}, o);
        const gb::learn_walk w = gb::walk_through(m, r.decoder, 3, 1, 2);
        const gb::learn_diagram g = gb::diagram_of(m, r.decoder.n_tokens, r.encoder.n_tokens);
        expect_steps_light_boxes(w, g, family);
        EXPECT_EQ(g.n_source, 6);
        EXPECT_EQ(g.encoder_layers, m.encoder->config.n_layer);
    }
}

// The boxes are what each architecture does: norms where it has them (Pre-LN before each sublayer, Post-LN on
// the stream after each add), positions where they enter, the parallel block's one input, the router, the
// cross-attention and the encoder beside it, no mask in an encoder, patches and classes for a ViT.
TEST(LearnPicture, TheBoxesFollowTheArchitecture) {
    auto dims = [](const gb::diagram_box* b) { return b ? b->shape() : std::string("(none)"); };
    const gb::model& gpt2 = tiny_gpt2_ref().m;
    gb::learn_diagram g = gb::diagram_of(gpt2, 5);
    const int d = gpt2.config.d_model, H = gpt2.config.n_head, dh = gpt2.config.d_head;
    EXPECT_EQ(g.find(gb::PART_EMBED)->formula, "x = E[id] + P[position]");
    EXPECT_EQ(g.find(gb::PART_NORM_ATTN)->label, "LayerNorm");
    EXPECT_EQ(dims(g.find(gb::PART_QKV)), "[T, H, d_head] = [5, " + std::to_string(H) + ", " + std::to_string(dh) + "]");
    EXPECT_EQ(dims(g.find(gb::PART_SOFTMAX)), "[H, T, T] = [" + std::to_string(H) + ", 5, 5]");
    EXPECT_EQ(dims(g.find(gb::PART_MLP_HIDDEN)), "[T, d_ff] = [5, " + std::to_string(gpt2.config.d_ff) + "]");
    EXPECT_EQ(dims(g.find(gb::PART_ADD_MLP)), "[T, d] = [5, " + std::to_string(d) + "]");
    EXPECT_NE(g.find(gb::PART_MASK), nullptr);
    EXPECT_EQ(g.find(gb::PART_UNEMBED)->label, "x E\u22A4");
    EXPECT_EQ(g.find(gb::PART_CROSS), nullptr);
    EXPECT_EQ(g.find(gb::PART_ROUTER), nullptr);

    const gb::model& llama = tiny_llama_ref().m;
    g = gb::diagram_of(llama, 5);
    EXPECT_EQ(g.find(gb::PART_EMBED)->formula, "x = E[id]") << "RoPE: no position added to the embedding";
    EXPECT_TRUE(g.rope);
    EXPECT_NE(g.find(gb::PART_QKV)->note.find("RoPE rotates q and k"), std::string::npos);
    EXPECT_NE(g.find(gb::PART_QKV)->note.find("grouped-query"), std::string::npos) << g.find(gb::PART_QKV)->note;
    EXPECT_EQ(g.find(gb::PART_NORM_MLP)->label, "RMSNorm");
    EXPECT_EQ(g.find(gb::PART_MLP_HIDDEN)->label, "gate \u2299 up");

    g = gb::diagram_of(family_model("gpt_neox"), 5);
    EXPECT_TRUE(g.parallel);
    EXPECT_EQ(g.find(gb::PART_ADD_ATTN)->formula, "x + attn");
    EXPECT_EQ(g.find(gb::PART_ADD_MLP)->formula, "x ← x + attn + mlp");
    g = gb::diagram_of(family_model("olmo2"), 5); // no norm before the sublayers: one on each sublayer's output
    EXPECT_FALSE(g.pre_ln);
    EXPECT_TRUE(g.sublayer_norm);
    EXPECT_EQ(g.find(gb::PART_NORM_ATTN), nullptr);
    EXPECT_NE(g.find(gb::PART_ATTN_OUT)->note.find("normed"), std::string::npos);
    g = gb::diagram_of(family_model("qwen2_moe"), 5);
    EXPECT_EQ(g.kind, gb::KIND_MOE);
    EXPECT_EQ(dims(g.find(gb::PART_ROUTER)), "[T, E] = [5, 4]");
    EXPECT_EQ(g.find(gb::PART_ROUTER)->formula, "w = top-2 of softmax(x W_r)");
    EXPECT_EQ(dims(g.find(gb::PART_MLP_HIDDEN)), "[T, d_ff_e] = [5, 24]");

    const gb::model& marian = seq2seq_model("marian");
    g = gb::diagram_of(marian, 4, 6);
    EXPECT_TRUE(g.post_ln);
    EXPECT_EQ(g.find(gb::PART_NORM_ATTN), nullptr) << "Post-LN: no norm before a sublayer";
    EXPECT_EQ(g.find(gb::PART_ADD_ATTN)->label, "+, LN");
    EXPECT_EQ(g.find(gb::PART_ADD_CROSS)->formula, "x ← LN(x + cross)");
    EXPECT_EQ(dims(g.find(gb::PART_CROSS)), "[H, T, S] = [4, 4, 6]");
    EXPECT_EQ(g.find(gb::PART_INPUT)->label, "target");
    EXPECT_NE(g.find(gb::PART_EMBED)->formula.find("PE[position]"), std::string::npos);
    ASSERT_FALSE(g.encoder.empty());
    EXPECT_EQ(g.encoder.front().label, "source");
    EXPECT_EQ(g.encoder.back().label, "encoder out");
    EXPECT_EQ(dims(&g.encoder.back()), "[S, d] = [6, 32]");

    const tiny_encoder te = write_tiny_encoder(test_temp_dir("learn_pic_bert") + "/m", {});
    g = gb::diagram_of(gb::load_model(te.dir), 7);
    EXPECT_FALSE(g.causal);
    EXPECT_FALSE(g.predicts_next);
    EXPECT_EQ(g.find(gb::PART_MASK), nullptr) << "an encoder: every token sees every token";
    EXPECT_EQ(g.find(gb::PART_FINAL_NORM)->label, "MLM head");
    EXPECT_NE(g.find(gb::PART_PREDICT)->formula.find("[MASK]"), std::string::npos);
    EXPECT_NE(g.find(gb::PART_EMBED)->formula.find("LN("), std::string::npos) << g.find(gb::PART_EMBED)->formula;

    const tiny_vision tv = write_tiny_vision(test_temp_dir("learn_pic_vit") + "/m", {}); // 16 px, 4 px patches
    g = gb::diagram_of(gb::load_model(tv.dir), 17);
    EXPECT_EQ(g.find(gb::PART_INPUT)->label, "patches");
    EXPECT_EQ(dims(g.find(gb::PART_INPUT)), "[N, C·P·P] = [16, 48]");
    EXPECT_EQ(dims(g.find(gb::PART_UNEMBED)), "[classes] = [7]");
    EXPECT_EQ(g.find(gb::PART_MASK), nullptr);
}

// ---------------------------------------------------------------------------------------------
// The app's Learn tab: the picture, stepped through the script
// ---------------------------------------------------------------------------------------------

namespace {

// The boxes of a state's picture by part.
std::map<std::string, nlohmann::json> boxes_of(const nlohmann::json& st) {
    std::map<std::string, nlohmann::json> out;
    for (const nlohmann::json& b : st["learn_picture"]["boxes"]) out[b["part"].get<std::string>()] = b;
    return out;
}

// Exactly one box is lit, the one the picture says; it is the box of the step shown.
void expect_one_lit(const nlohmann::json& st, const std::string& part) {
    const nlohmann::json& p = st["learn_picture"];
    EXPECT_EQ(p["lit"], part);
    int lit = 0;
    for (const nlohmann::json& b : p["boxes"])
        if (b["lit"].get<bool>()) {
            lit++;
            EXPECT_EQ(b["part"], part);
        }
    EXPECT_EQ(lit, 1) << p.dump();
}

} // namespace

// The tab draws the loaded model (its layer count and live shapes), lights the walk's first step's box, and
// each → lights the next one; ← and the back button go back; a click on a box goes to its step. At 1280 x 720
// the boxes fit the window and do not overlap.
TEST(LearnGui, ThePictureShowsTheModelAndStepsLightTheNextBox) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    tiny_spec sp;
    sp.n_layer = 3, sp.n_head = 4, sp.d_model = 32;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir("learn_gui_pic"), sp);
    int rc = -1;
    auto st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat sat' --select-head 2.1 --size 1280x720",
                         "wait\ntab learn\nwait\nframes 2\nprint\nkey right\nframes 2\nprint\nkey right\nkey right\nkey right\n"
                         "frames 2\nprint\nclick learn prev\nframes 2\nprint\nclick learn box mlp_out\nframes 2\nprint\n"
                         "key left\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 6u);
    const nlohmann::json& p = st[0]["learn_picture"];
    ASSERT_TRUE(p.is_object()) << st[0].dump();
    const std::string T = std::to_string(st[0]["tokens"].size());
    EXPECT_EQ(p["kind"], "decoder");
    EXPECT_EQ(p["layers"], 3) << "a cell per layer of the loaded model";
    EXPECT_EQ(p["layer"], 2);
    EXPECT_EQ(p["head"], 1);
    EXPECT_TRUE(p["walk"]);
    EXPECT_EQ(p["steps"], st[0]["learn"]["steps"].size());
    std::map<std::string, nlohmann::json> b = boxes_of(st[0]);
    EXPECT_EQ(b["qkv"]["shape"], "[T, H, d_head] = [" + T + ", 4, 8]");
    EXPECT_EQ(b["softmax"]["shape"], "[H, T, T] = [4, " + T + ", " + T + "]");
    EXPECT_EQ(b["mlp_hidden"]["shape"], "[T, d_ff] = [" + T + ", 128]");
    EXPECT_EQ(b["embed"]["shape"], "[T, d] = [" + T + ", 32]");
    EXPECT_EQ(b["unembed"]["shape"], "[T, V] = [" + T + ", " + std::to_string(tm.config.vocab_size) + "]");
    // the lit box follows the steps: text, embedding, norm, q k v, scores; back to q k v; the MLP's output, its hidden
    const char* lit[6] = {"input", "embed", "scores", "qkv", "mlp_out", "mlp_hidden"};
    const int step[6] = {0, 1, 4, 3, -1, -1};
    for (int i = 0; i < 6; i++) {
        SCOPED_TRACE(i);
        expect_one_lit(st[i], lit[i]);
        if (step[i] >= 0) {
            EXPECT_EQ(st[i]["learn_picture"]["step"], step[i]);
        }
    }
    const int mlp_out = st[4]["learn_picture"]["step"];
    EXPECT_EQ(st[4]["learn"]["steps"][mlp_out], "MLP output");
    EXPECT_EQ(st[5]["learn_picture"]["step"], mlp_out - 1);
    EXPECT_EQ(st[2]["learn_picture"]["title"], "layer 2's scores, head 1");
    EXPECT_EQ(st[0]["selected_head"], st[5]["selected_head"]) << "in the Learn tab the arrow keys step, not change the head";
    // laid out inside the window, no two boxes on each other
    const std::vector<nlohmann::json> all = st[2]["learn_picture"]["boxes"];
    for (size_t i = 0; i < all.size(); i++) {
        const nlohmann::json& r = all[i]["rect"];
        EXPECT_GE(r[0].get<float>(), 0) << all[i].dump();
        EXPECT_LE(r[2].get<float>(), 1280) << all[i].dump();
        for (size_t j = i + 1; j < all.size(); j++) {
            const nlohmann::json& q = all[j]["rect"];
            const bool apart = r[2] <= q[0] || q[2] <= r[0] || r[3] <= q[1] || q[3] <= r[1];
            EXPECT_TRUE(apart) << all[i].dump() << " overlaps " << all[j].dump();
        }
    }
}

// The selected head's path: every tensor with a head axis marks the walked head, and follows select-head (as a
// click in the grid); a click on a layer cell walks that layer.
TEST(LearnGui, TheSelectedHeadsPathFollowsTheSelection) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    tiny_spec sp;
    sp.n_layer = 3, sp.n_head = 4, sp.d_model = 32;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir("learn_gui_head"), sp);
    int rc = -1;
    auto st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat sat' --select-head 2.1",
                         "wait\ntab learn\nwait\nkey right\nkey right\nkey right\nframes 2\nprint\n"
                         "select-head 0.3\nwait\nframes 2\nprint\nclick learn layer 1\nwait\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    const int head[3] = {1, 3, 3}, layer[3] = {2, 0, 1};
    for (int i = 0; i < 3; i++) {
        SCOPED_TRACE(i);
        const nlohmann::json& p = st[i]["learn_picture"];
        EXPECT_EQ(p["head"], head[i]);
        EXPECT_EQ(p["layer"], layer[i]);
        EXPECT_EQ(st[i]["learn"]["head"], head[i]) << "the walk's head is the one drawn";
        EXPECT_EQ(st[i]["learn"]["layer"], layer[i]);
        EXPECT_EQ(p["step"], 3) << "the step stays while the head changes";
        std::set<std::string> marked;
        for (const nlohmann::json& b : p["boxes"])
            if (b["head"].get<int>() >= 0) {
                marked.insert(b["part"].get<std::string>());
                EXPECT_EQ(b["head"], head[i]) << b.dump();
            }
        EXPECT_EQ(marked, (std::set<std::string>{"qkv", "scores", "softmax", "mix"}));
    }
    EXPECT_EQ(st[2]["selected_head"], "1.3");
}

// An encoder–decoder: the encoder's strip beside the decoder's, an arrow from its output into every decoder
// layer, the cross-attention box in the walked layer with the source's length; Post-LN adds.
TEST(LearnGui, AnEncoderDecoderDrawsTheCrossAttentionArrow) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    seq2seq_spec sp;
    sp.family = "marian", sp.enc_layers = 3, sp.dec_layers = 2;
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("learn_gui_marian") + "/m", sp);
    int rc = -1;
    auto st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat sat'",
                         "wait\ntab learn\nwait\nframes 2\nprint\nclick learn box cross\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const nlohmann::json& p = st[0]["learn_picture"];
    EXPECT_EQ(p["kind"], "encoder-decoder");
    EXPECT_EQ(p["encoder_layers"], 3);
    EXPECT_EQ(p["layers"], 2);
    EXPECT_EQ(p["cross_arrows"], 2) << "one arrow from the encoder's output into each decoder layer";
    const gb::model m = gb::load_model(tm.dir);
    const std::string S = std::to_string(gb::source_ids(m, "the cat sat").size()), T = std::to_string(st[0]["tokens"].size());
    std::map<std::string, nlohmann::json> b = boxes_of(st[0]);
    EXPECT_EQ(b["cross"]["shape"], "[H, T, S] = [4, " + T + ", " + S + "]");
    EXPECT_EQ(b["encoder input"]["label"], "source");
    EXPECT_EQ(b["encoder final_norm"]["shape"], "[S, d] = [" + S + ", 32]");
    EXPECT_EQ(b.count("norm_attn"), 0u) << "Post-LN: no norm before a sublayer";
    EXPECT_EQ(b["add_attn"]["label"], "+, LN");
    expect_one_lit(st[1], "cross");
    EXPECT_NE(st[1]["learn_picture"]["title"].get<std::string>().find("cross-attention, head"), std::string::npos);
    EXPECT_EQ(st[1]["learn"]["steps"][st[1]["learn_picture"]["step"].get<int>()].get<std::string>().rfind("Cross-attention", 0), 0u);
}

// An encoder and an image classifier get the tab: their picture with live shapes, stepped part by part, no
// numbers (no walk is asked for).
TEST(LearnGui, EncodersAndImageClassifiersGetThePictureWithoutNumbers) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    const tiny_encoder te = write_tiny_encoder(test_temp_dir("learn_gui_bert") + "/m", {});
    int rc = -1;
    auto st = run_script("--model " + sq(te.dir) + " --prompt 'the cat'", "wait\ntab learn\nwait\nframes 2\nprint\n"
                         "key right\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0]["tab"], "learn");
    const nlohmann::json& p = st[0]["learn_picture"];
    EXPECT_EQ(p["kind"], "encoder");
    EXPECT_FALSE(p["walk"]);
    EXPECT_EQ(p["steps"], p["boxes"].size()) << "without a walk the steps are the picture's parts";
    EXPECT_FALSE(st[0].contains("learn")) << "no walk";
    EXPECT_FALSE(st[0]["analysis"]["learn"]["wanted"]);
    EXPECT_EQ(st[0]["analysis"]["learn"]["error"], "");
    std::map<std::string, nlohmann::json> b = boxes_of(st[0]);
    EXPECT_EQ(b.count("mask"), 0u);
    EXPECT_EQ(b["softmax"]["shape"], "[H, T, T] = [4, " + std::to_string(st[0]["tokens"].size()) + ", " +
                                         std::to_string(st[0]["tokens"].size()) + "]");
    expect_one_lit(st[0], "input");
    expect_one_lit(st[1], "embed");
    EXPECT_NE(st[1]["learn_picture"]["formula"].get<std::string>().find("E[id]"), std::string::npos);

    const std::string dir = test_temp_dir("learn_gui_vit");
    const tiny_vision tv = write_tiny_vision(dir + "/m", {}); // 16 px in 4 px patches: [CLS] + 16
    std::vector<uint8_t> rgb(16 * 16 * 3);
    for (size_t i = 0; i < rgb.size(); i++) rgb[i] = (uint8_t)(i * 7 % 251);
    ASSERT_TRUE(stbi_write_png((dir + "/in.png").c_str(), 16, 16, 3, rgb.data(), 16 * 3));
    st = run_script("--model " + sq(tv.dir) + " --image " + sq(dir + "/in.png"), "wait\ntab learn\nwait\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    b = boxes_of(st[0]);
    EXPECT_EQ(st[0]["learn_picture"]["kind"], "vision");
    EXPECT_EQ(b["input"]["shape"], "[N, C·P·P] = [16, 48]");
    EXPECT_EQ(b["embed"]["shape"], "[T, d] = [17, 32]");
    EXPECT_EQ(b["unembed"]["shape"], "[classes] = [7]");
}

// Every text the tab may show (every box's label, formula and note, every step's title, formula, note and
// shape) has a glyph in the font: the walk's raised T (which DejaVu Sans lacks) is shown as ⊤.
TEST(LearnGui, TheFormulasUseOnlyGlyphsTheFontHas) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    std::vector<std::pair<std::string, std::string>> models = {
        {"", "The cat sat on the"}, // the embedded GPT-2
        {family_model("llama").path, "the cat"},
        {family_model("qwen2_moe").path, "the cat"},
        {family_model("gemma2").path, "the cat"},
        {seq2seq_model("marian").path, "the cat"},
        {write_tiny_encoder(test_temp_dir("learn_gui_glyph_bert") + "/m", {}).dir, "the cat"}};
    for (const auto& [path, prompt] : models) {
        SCOPED_TRACE(path.empty() ? "default" : path);
        int rc = -1;
        auto st = run_script((path.empty() ? "" : "--model " + sq(path) + " ") + "--prompt " + sq(prompt),
                             "wait\ntab learn\nwait\nframes 2\nclick learn box unembed\nframes 2\nprint\n", &rc);
        ASSERT_EQ(rc, 0);
        ASSERT_EQ(st.size(), 1u);
        const nlohmann::json& p = st[0]["learn_picture"];
        EXPECT_TRUE(p["missing_glyphs"].empty()) << p["missing_glyphs"].dump();
        expect_one_lit(st[0], "unembed");
        if (path.empty()) { // tied: the walk writes E with a raised T; the tab shows E⊤
            EXPECT_NE(p["raw_missing_glyphs"].dump().find("U+1D40"), std::string::npos) << p["raw_missing_glyphs"].dump();
            EXPECT_NE(p["formula"].get<std::string>().find("E\u22A4"), std::string::npos) << p["formula"];
        }
    }
}

// Present shows the picture over the window, larger; Esc brings it back into the tab.
TEST(LearnGui, PresentShowsThePictureLargerAndEscBringsItBack) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    int rc = -1;
    auto st = run_script("--prompt 'The cat sat on the' --size 1280x720",
                         "wait\ntab learn\nwait\nframes 2\nprint\nclick learn present\nframes 20\nprint\nkey escape\nframes 2\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    auto height = [](const nlohmann::json& s) { // from the top of the highest box to the bottom of the lowest
        float y0 = 1e9f, y1 = 0;
        for (const auto& [part, b] : boxes_of(s)) {
            y0 = std::min(y0, b["rect"][1].get<float>());
            y1 = std::max(y1, b["rect"][3].get<float>());
        }
        return y1 - y0;
    };
    auto width = [](const nlohmann::json& s) {
        const nlohmann::json r = boxes_of(s)["softmax"]["rect"];
        return r[2].get<float>() - r[0].get<float>();
    };
    EXPECT_FALSE(st[0]["learn_picture"]["full"]);
    EXPECT_TRUE(st[1]["learn_picture"]["full"]);
    EXPECT_GT(width(st[1]), 1.2f * width(st[0])) << "larger over the window";
    EXPECT_GT(height(st[1]), 0.38f * 720) << "the picture takes the window's height, not its top 40 % (the step under it)";
    EXPECT_FALSE(st[2]["learn_picture"]["full"]);
    EXPECT_EQ(st[2]["tab"], "learn");
}
