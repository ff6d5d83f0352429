// The app's Features tab: a random SAE on a random tiny GPT-2 opened by script; the top features it prints against
// core's run_features on the same prompt, a feature ablated from its chip against core's feature_intervention
// (the next-token probabilities), an SAE that does not fit (one error, the state kept), a session that keeps the
// SAE and the edit, a session whose SAE is gone (one error); several SAEs at once; the refusal on an encoder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/features.h"
#include "analysis/sae_train.h"
#include "app_script.h"
#include "io/loader.h"
#include "io/sae.h"
#include "random_sae.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_model.h"

namespace {

const char* prompt = "the cat";

struct fixture {
    std::string dir, model, sae, bad;
};

// The tiny model, a TopK SAE at L1 resid_post, and one 1 wider than the stream (d_in does not fit)
const fixture& files() {
    static const fixture f = [] {
        fixture x;
        x.dir = test_temp_dir("gui_features");
        tiny_spec s;
        s.n_layer = 3, s.n_head = 4, s.d_model = 32, s.n_ctx = 64, s.seed = 5;
        x.model = write_tiny_gpt2(x.dir + "/model", s).dir;
        x.sae = x.dir + "/sae", x.bad = x.dir + "/bad";
        gb::write_sae_saelens(x.sae, random_sae(gb::SAE_TOPK, 32, 32, 48, "resid_post", "resid_post", 1, 9));
        gb::write_sae_saelens(x.bad, random_sae(gb::SAE_TOPK, 33, 33, 48, "resid_post", "resid_post", 1, 9));
        return x;
    }();
    return f;
}

// The last position's top-10 next tokens of a forward with interventions iv, as (id, probability)
std::vector<std::pair<int, double>> top_next(const gb::model& m, const std::vector<int>& ids, const std::vector<gb::intervention>& iv) {
    gb::forward_options o;
    o.interventions = iv;
    gb::record r;
    gb::run_forward(r, m, ids, {}, o);
    const float* l = r.last_logits();
    const int V = m.config.vocab_size;
    const double mx = *std::max_element(l, l + V);
    double z = 0;
    for (int i = 0; i < V; i++) z += std::exp((double)l[i] - mx);
    std::vector<std::pair<int, double>> p;
    for (int i = 0; i < V; i++) p.push_back({i, std::exp((double)l[i] - mx) / z});
    std::sort(p.begin(), p.end(), [](auto& a, auto& b) { return a.second > b.second; });
    p.resize(10);
    return p;
}

void expect_top(const nlohmann::json& got, const std::vector<std::pair<int, double>>& want, const char* what) {
    ASSERT_TRUE(got.is_array()) << what;
    ASSERT_GE(got.size(), 5u) << what;
    for (size_t i = 0; i < 5; i++) {
        EXPECT_EQ(got[i]["id"].get<int>(), want[i].first) << what << " rank " << i;
        EXPECT_NEAR(got[i]["prob"].get<double>(), want[i].second, 1e-4) << what << " rank " << i;
    }
}

TEST(GuiFeatures, TopFeaturesAblationMismatchAndSession) {
    if (!have_app()) GTEST_SKIP() << "no app built";
    const fixture& f = files();
    const gb::model m = gb::load_model(f.model);
    const gb::bound_sae b = gb::open_sae(f.sae, m);
    const std::vector<int> ids = gb::encode_prompt(m.tok, prompt, false);
    const int T = (int)ids.size();
    const gb::feature_result want = gb::run_features(m, b, ids);
    // core: the last token's active features by activation, and its strongest one ablated
    std::vector<int> top;
    const float* a = want.acts.data() + (size_t)(T - 1) * want.d_sae;
    for (int i = 0; i < want.d_sae; i++)
        if (a[i] > 0) top.push_back(i);
    std::sort(top.begin(), top.end(), [&](int x, int y) { return a[x] > a[y] || (a[x] == a[y] && x < y); });
    ASSERT_FALSE(top.empty()) << "the random SAE has no active feature at the last token";
    const gb::record rec = gb::sae_record(m, b, ids);
    std::vector<float> values;
    const gb::intervention iv = gb::feature_intervention(b, rec, {{gb::FEATURE_ABLATE, top[0], 0}}, values);
    const auto plain = top_next(m, ids, {}), ablated = top_next(m, ids, {iv});

    const std::string session = test_temp_dir("gui_features_session") + "/s.json";
    int rc = -1;
    const auto st = run_script("--model " + sq(f.model) + " --prompt " + sq(prompt),
                               "tab features\nsae " + f.sae + "\nwait\nprint\n" +
                               "click feature chip " + std::to_string(T - 1) + ".0\nwait\nclick feature ablate\nwait\nprint\n" +
                               "sae " + f.bad + "\nwait\nprint\nsave-session " + session + "\n",
                               &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    // opened: the printed top features are core's, the run not yet changed
    const nlohmann::json& f0 = st[0]["features"];
    ASSERT_EQ(f0["saes"].size(), 1u) << st[0].dump();
    EXPECT_EQ(f0["saes"][0]["d_sae"], 48);
    EXPECT_EQ(f0["saes"][0]["layer"], 1);
    ASSERT_TRUE(f0.contains("result")) << f0.dump();
    EXPECT_TRUE(f0["result"]["current"].get<bool>());
    const nlohmann::json& got = f0["result"]["top_last"];
    ASSERT_EQ(got.size(), std::min<size_t>(top.size(), 10));
    for (size_t i = 0; i < got.size(); i++) {
        EXPECT_EQ(got[i]["id"].get<int>(), top[i]) << i;
        EXPECT_NEAR(got[i]["act"].get<double>(), a[top[i]], 1e-4) << i;
    }
    EXPECT_NEAR(f0["result"]["fvu_all"].get<double>(), want.fvu_all, 1e-4);
    EXPECT_NEAR(f0["result"]["loss_delta"].get<double>(), want.loss_delta, 1e-4);
    expect_top(st[0]["top"], plain, "before the edit");
    // the chip selected the feature; Ablate applied it to the live run as core's feature_intervention does
    const nlohmann::json& f1 = st[1]["features"];
    EXPECT_EQ(f1["selected"], top[0]);
    EXPECT_EQ(f1["edits"], nlohmann::json::array({"ablate " + std::to_string(top[0]) + " at L1 resid_post"}));
    EXPECT_EQ(st[1]["feature_edits"], f1["edits"][0]);
    EXPECT_EQ(f1["result"]["feature"], top[0]); // its page: the logit effect's lists
    EXPECT_EQ(f1["result"]["promotes"].size(), 10u);
    expect_top(st[1]["top"], ablated, "ablated");
    EXPECT_NE(st[1]["top"][0]["prob"], st[0]["top"][0]["prob"]) << "ablating an active feature moves the prediction";
    // an SAE wider than the stream: one line naming d_in; the SAE and the edit stay
    const std::string err = st[2]["error"];
    EXPECT_NE(err.find("d_in"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(st[2]["features"]["saes"].size(), 1u);
    EXPECT_EQ(st[2]["features"]["edits"], f1["edits"]);
    expect_top(st[2]["top"], ablated, "after the failed open");

    // the session opens the SAE again and applies the edit
    const auto again = run_script("--session " + sq(session), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0]["features"]["saes"].size(), 1u) << again[0].dump();
    EXPECT_EQ(again[0]["features"]["edits"], f1["edits"]);
    EXPECT_EQ(again[0]["tab"], "features");
    expect_top(again[0]["top"], ablated, "from the session");
    // and a session whose SAE is gone: one error, no SAE, no edit
    std::filesystem::copy(f.sae, f.dir + "/gone");
    const std::string gone = test_temp_dir("gui_features_gone") + "/s.json";
    const auto g = run_script("--model " + sq(f.model) + " --prompt " + sq(prompt),
                              "tab features\nsae " + f.dir + "/gone\nwait\nfeature " + std::to_string(top[0]) +
                                  "\nclick feature ablate\nwait\nsave-session " + gone + "\n", &rc);
    ASSERT_EQ(rc, 0);
    std::filesystem::remove_all(f.dir + "/gone");
    const auto g2 = run_script("--session " + sq(gone), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(g2.size(), 1u);
    const std::string e2 = g2[0]["error"];
    EXPECT_NE(e2.find("gone"), std::string::npos) << e2;
    EXPECT_EQ(e2.find('\n'), std::string::npos) << e2;
    EXPECT_EQ(g2[0]["features"]["saes"].size(), 0u);
    EXPECT_EQ(g2[0]["features"]["edits"].size(), 0u);
    expect_top(g2[0]["top"], plain, "without the gone SAE's edit");
}

// One SAE per hook point: a second point adds one (shown), the same point again replaces it; edits name their point
TEST(GuiFeatures, SeveralSaesOnePerHookPoint) {
    if (!have_app()) GTEST_SKIP() << "no app built";
    const fixture& f = files();
    const std::string l2 = f.dir + "/sae_l2", again = f.dir + "/sae_again";
    gb::write_sae_saelens(l2, random_sae(gb::SAE_RELU, 32, 32, 40, "resid_post", "resid_post", 2, 3));
    gb::write_sae_saelens(again, random_sae(gb::SAE_TOPK, 32, 32, 24, "resid_post", "resid_post", 1, 4));
    int rc = -1;
    const auto st = run_script("--model " + sq(f.model) + " --prompt " + sq(prompt),
                               "tab features\nsae " + f.sae + "\nwait\nsae " + l2 + "\nwait\nfeature 3\nwait\n" +
                                   "click feature ablate\nwait\nprint\nsae " + again + "\nwait\nprint\n",
                               &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const nlohmann::json& a = st[0]["features"];
    ASSERT_EQ(a["saes"].size(), 2u) << a.dump();
    EXPECT_EQ(a["saes"][0]["layer"], 1);
    EXPECT_EQ(a["saes"][1]["layer"], 2);
    EXPECT_EQ(a["shown"], 1);
    EXPECT_EQ(a["edits"], nlohmann::json::array({"ablate 3 at L2 resid_post"}));
    EXPECT_EQ(st[0]["feature_edits"], "ablate 3 at L2 resid_post");
    const nlohmann::json& b = st[1]["features"];
    ASSERT_EQ(b["saes"].size(), 2u) << b.dump();
    EXPECT_EQ(b["saes"][0]["d_sae"], 24) << "the L1 SAE replaced";
    EXPECT_EQ(b["saes"][1]["d_sae"], 40);
    EXPECT_EQ(b["shown"], 0);
    EXPECT_EQ(b["edits"], a["edits"]) << "the other point's edit stays";
}

// A kind without SAEs keeps the tab, and opening one is the kind table's one-line refusal
TEST(GuiFeatures, EncoderRefusesInOneLine) {
    if (!have_app()) GTEST_SKIP() << "no app built";
    const tiny_encoder tm = write_tiny_encoder(test_temp_dir("gui_features_bert") + "/m", {});
    const gb::model m = gb::load_model(tm.dir);
    ASSERT_FALSE(gb::offers(m.config, gb::FEATURE_SAE));
    int rc = -1;
    const auto st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat'",
                               "tab features\nsae " + files().sae + "\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["tab"], "features");
    const std::string err = st[0]["error"];
    EXPECT_NE(err.find(gb::refusal(m, gb::FEATURE_SAE)), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_EQ(st[0]["features"]["saes"].size(), 0u);
}

// Generation runs under the edits too (each step's intervention made from the grown run): steering hard by a
// feature changes the greedy continuation, and every step's result carries the edit
TEST(GuiFeatures, GenerationFollowsTheEdits) {
    if (!have_app()) GTEST_SKIP() << "no app built";
    const fixture& f = files();
    int rc = -1;
    const std::string gen = "gen-tokens 6\nclick Generate\nwait\nframes 30\nwait\nprint\n";
    const auto st = run_script("--model " + sq(f.model) + " --prompt " + sq(prompt),
                               "wait\n" + gen + "tab features\nsae " + f.sae + "\nwait\nfeature 1\nfeature-value 40\n" +
                                   "wait\nclick feature steer\nwait\n" + gen,
                               &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0]["generated_tokens"], 6);
    EXPECT_EQ(st[1]["generated_tokens"], 6) << st[1].dump();
    EXPECT_TRUE(st[1]["generation_done"].get<bool>());
    EXPECT_EQ(st[1]["feature_edits"], "steer 1=40 at L1 resid_post");
    EXPECT_NE(st[1]["generated"], st[0]["generated"]);
}

} // namespace

// Train an SAE in the tab: the same SAE as the core trainer makes from the same activations and options (what
// train-sae does), written in SAELens's format and opened; a field the model cannot have is one error line.
TEST(GuiFeatures, TrainsAnSaeInTheTabAndOpensIt) {
    ASSERT_TRUE(have_app());
    const fixture& f = files();
    const std::string corpus = f.dir + "/corpus.txt", out = f.dir + "/trained";
    std::string text;
    for (int i = 0; i < 40; i++) text += "the cat sat on the mat and the dog sat on the log. ";
    std::ofstream(corpus) << text;
    std::filesystem::remove_all(out);
    int rc = -1;
    auto states = run_script("--model " + sq(f.model) + " --prompt " + sq(prompt),
                             "wait\ntab features\nsae-train corpus=" + corpus + " out=" + out +
                                 " point=resid_post layer=1 features=16 k=4 steps=120\nwait\nprint\n"
                                 "sae-train layer=7\nwait\nprint\n",
                             &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 2u);
    const nlohmann::json& fj = states[0]["features"];
    ASSERT_EQ(fj["saes"].size(), 1u);
    EXPECT_EQ(fj["saes"][0]["path"], out);
    EXPECT_EQ(fj["saes"][0]["layer"], 1);
    EXPECT_EQ(fj["saes"][0]["d_sae"], 16);
    EXPECT_NE(fj["trained"]["note"].get<std::string>().find("explained"), std::string::npos);
    EXPECT_EQ(states[0]["error"], "");

    // the core trainer on the same activations with the same options
    const gb::model m = gb::load_model(f.model);
    const std::vector<float> x = gb::collect_activations(m, gb::HOOK_RESID_POST, 1, text, std::min(128, m.config.n_ctx), 200000, false);
    gb::sae_train_options o;
    o.d_sae = 16, o.k = 4, o.steps = 120;
    const gb::sae want = gb::train_sae(x.data(), (int64_t)(x.size() / m.config.d_model), m.config.d_model, o, "", {});
    const gb::sae got = gb::read_sae(out);
    ASSERT_EQ(got.d_sae, 16);
    ASSERT_EQ(got.W_dec.size(), want.W_dec.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.W_dec.size(); i++)
        worst = std::max(worst, (double)std::fabs(got.W_dec[i] - want.W_dec[i])), scale = std::max(scale, (double)std::fabs(want.W_dec[i]));
    EXPECT_LT(worst, 1e-4 * scale) << "the tab's SAE is the core trainer's";

    // layer 7 of a 3-layer model: one line, the trained SAE still open
    EXPECT_EQ(states[1]["error"], "train an SAE: layer 7 is outside the model (0..2)");
    EXPECT_EQ(states[1]["features"]["saes"].size(), 1u);
}

// The Graph tab: on the default model with no set chosen it graphs over the shipped transcoders, and its scores and
// kept counts are glassbox-cli graph's for the same prompt (one core, two front ends); another model without a set
// says in one line what it needs.
TEST(GuiGraph, DefaultModelGraphIsTheClisAndOtherModelsAskForASet) {
    ASSERT_TRUE(have_app());
    const std::string prompt = "The Eiffel Tower is in the city of", dir = test_temp_dir("gui_graph");
    const command_result c = run_cli("graph --prompt " + sq(prompt) + " --json " + dir + "/g.json");
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json want = nlohmann::json::parse(read_file(dir + "/g.json"));
    int rc = -1;
    auto st = run_script("--prompt " + sq(prompt), "tab graph\nwait\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    ASSERT_TRUE(st[0].contains("graph")) << st[0]["analysis"]["graph"].dump();
    const nlohmann::json& g = st[0]["graph"];
    EXPECT_TRUE(g["current"]);
    EXPECT_EQ(std::filesystem::weakly_canonical(g["transcoders"].get<std::string>()),
              std::filesystem::weakly_canonical(want["transcoders"].get<std::string>()));
    EXPECT_NEAR(g["replacement_score"].get<double>(), want["replacement_score"].get<double>(), 1e-9);
    EXPECT_NEAR(g["completeness_score"].get<double>(), want["completeness_score"].get<double>(), 1e-9);
    EXPECT_EQ(g["nodes"], want["n_nodes"]);
    EXPECT_EQ(g["kept"], want["n_kept_nodes"]);
    EXPECT_EQ(g["edges"], want["n_kept_edges"]);
    EXPECT_EQ(g["logits"][0], "logit ' Paris'");

    auto other = run_script("--model " + sq(files().model) + " --prompt 'the cat sat'", "tab graph\nwait\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(other.size(), 1u);
    const std::string why = other[0]["analysis"]["graph"]["error"];
    EXPECT_NE(why.find("no transcoder set"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos);
}
