// Learn mode's walk (core/analysis/learn.h): every number it shows is the run's own (the record's rows, or
// recomputed from them and checked against what the run produced), its formulas follow the architecture, and
// the parameter derivation adds up to the model's count. Also `glassbox-cli learn`.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/learn.h"
#include "app_script.h"
#include "io/loader.h"
#include "ref_models.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_model.h"

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

// Each step's "see: PANEL" is a link: a panel outside the tabs is outlined for a moment, a tab is opened.
TEST(LearnGui, StepLinksOpenThePanelTheyName) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    int rc = -1;
    auto states = run_script("--prompt 'The cat sat on the' --select-head 1.3",
                             "wait\nclick tab Learn\nwait\nprint\nclick learn see Prompt\nprint\n"
                             "hover learn see Prompt\nwheel -3\nframes 3\nclick learn see Head\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 3u);
    EXPECT_EQ(states[0]["tab"], "learn");
    EXPECT_EQ(states[0]["flash"], "");
    EXPECT_EQ(states[1]["tab"], "learn") << "a panel outside the tabs leaves the Learn tab open";
    EXPECT_EQ(states[1]["flash"], "Prompt");
    EXPECT_EQ(states[2]["tab"], "head");
    EXPECT_EQ(states[2]["flash"], "Analysis");
}
