// glassbox-cli's analysis commands end to end on the tiny model test_cli.cpp uses: each command's JSON keys and
// shapes, and values equal to the in-process core call (the core analyses are checked against the double
// reference in test_analysis.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "analysis/attribution.h"
#include "analysis/gradients.h"
#include "analysis/break_it.h"
#include "analysis/export.h"
#include "analysis/head_scores.h"
#include "analysis/lens.h"
#include "analysis/patching.h"
#include "analysis/surprisal.h"
#include "io/loader.h"
#include "io/writers.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "run/generate.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

} // namespace

// ---------------------------------------------------------------------------------------------
// The analyses: each command's JSON keys and shapes, and values equal to the in-process core call (the core
// analyses themselves are checked against the double reference in test_analysis.cpp)
// ---------------------------------------------------------------------------------------------
namespace {

// The record the analysis commands make, in process.
gb::record analysis_record(const gb::model& m, const std::vector<int>& ids) {
    gb::forward_options o;
    o.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    o.keep.resid_stream = true;
    gb::record r;
    gb::run_forward(r, m, ids, {}, o);
    return r;
}

} // namespace

TEST(Cli, LensJsonMatchesTheContractAndTheCore) {
    std::string dir = test_temp_dir("cli_lens");
    command_result r = run_cli("lens " + M() + " --prompt 'the cat sat' --top-k 3 --json " + dir + "/l.json --npy-dir " + dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("L1 mlp"), std::string::npos) << r.out;
    auto j = nlohmann::json::parse(read_file(dir + "/l.json"));
    gb::model m = gb::load_model(cli_test_model().dir);
    std::vector<int> ids = ids_of(m, "the cat sat");
    const int T = (int)ids.size(), P = 5;
    ASSERT_EQ(j["points"], nlohmann::json({"embed", "L0 attn", "L0 mlp", "L1 attn", "L1 mlp"}));
    ASSERT_EQ(j["top_ids"].size(), (size_t)P);
    ASSERT_EQ(j["top_ids"][0].size(), (size_t)T);
    ASSERT_EQ(j["top_ids"][0][0].size(), 3u);
    ASSERT_EQ(j["top_probs"][P - 1][T - 1].size(), 3u);
    ASSERT_EQ(j["target_prob"].size(), (size_t)P);
    ASSERT_EQ(j["target_prob"][0].size(), (size_t)T);
    gb::record rec = analysis_record(m, ids);
    gb::lens_result l = gb::logit_lens(rec, m, {}, 3);
    for (int p = 0; p < P; p++)
        for (int t = 0; t < T; t++) {
            EXPECT_EQ(j["top_ids"][p][t][0], l.top_ids[((size_t)p * T + t) * 3]) << p << "," << t;
            EXPECT_NEAR(j["target_prob"][p][t].get<double>(), l.target_prob[(size_t)p * T + t], 1e-6);
        }
    // the last point is the model's own prediction
    EXPECT_EQ(j["top_ids"][P - 1][T - 1][0], gb::top_k_probs(rec.last_logits(), rec.vocab, 1)[0].id);
    EXPECT_EQ(npy_shape(read_file(dir + "/lens_top_ids.npy"), "<i4"), "5, " + std::to_string(T) + ", 3");
    EXPECT_EQ(npy_shape(read_file(dir + "/lens_target_prob.npy"), "<f4"), "5, " + std::to_string(T));
    // --target follows that token's probability at every point
    command_result rt = run_cli("lens " + M() + " --prompt 'the cat sat' --target-id 7 --json " + dir + "/t.json");
    ASSERT_EQ(rt.code, 0) << rt.err;
    auto jt = nlohmann::json::parse(read_file(dir + "/t.json"));
    gb::lens_result lt = gb::logit_lens(rec, m, {}, 5, 7);
    for (int t = 0; t < T; t++) EXPECT_EQ(jt["target_ids"][t], 7);
    EXPECT_NEAR(jt["target_prob"][2][T - 1].get<double>(), lt.target_prob[2 * T + T - 1], 1e-6);
}

// break-it: the table and sentences on stdout, the JSON's rows the core's (a run in this process on the same
// prompt), the embedded model when --model is left out, and one-line errors for a bad prompt or option
TEST(Cli, BreakItPrintsEachAblationAndItsJsonIsTheCores) {
    const std::string dir = test_temp_dir("cli_break");
    command_result r = run_cli("break-it " + M() + " --prompt 'the cat sat on' --json " + dir + "/b.json");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* s : {"no attention (all layers)", "no layer norm (all layers)", "no residual (all layers)",
                          "no attention in layer 1", "Without residual connections, the last token's vector", "KL"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/b.json"));
    gb::model m = gb::load_model(cli_test_model().dir);
    const gb::break_result b = gb::break_it(m, ids_of(m, "the cat sat on"));
    EXPECT_EQ(j["baseline"]["top"]["id"], b.base_top_id);
    ASSERT_EQ(j["rows"].size(), b.rows.size());
    ASSERT_EQ(b.rows.size(), 3u + 2u + 3u); // 2 layers, 3 heads each
    for (size_t i = 0; i < b.rows.size(); i++) {
        const nlohmann::json& row = j["rows"][i];
        EXPECT_EQ(row["label"], b.rows[i].label);
        EXPECT_EQ(row["ablation"], b.rows[i].ab.describe());
        EXPECT_EQ(row["top"]["id"], b.rows[i].top_id);
        EXPECT_NEAR(row["kl"].get<double>(), b.rows[i].kl, 1e-9 * std::max(1.0, b.rows[i].kl));
        EXPECT_NEAR(row["resid_norm"].get<double>(), b.rows[i].resid_norm, 1e-4);
        EXPECT_EQ(row["explanation"], b.rows[i].explanation);
        EXPECT_NE(r.out.find(b.rows[i].explanation), std::string::npos) << b.rows[i].explanation;
    }
    EXPECT_EQ(j["head_kl"].size(), 2u);
    EXPECT_EQ(j["heads_scanned"], 6);
    // the embedded default model
    command_result d = run_cli("break-it --prompt 'Thank you very'");
    ASSERT_EQ(d.code, 0) << d.err;
    EXPECT_NE(d.out.find("no residual (all layers)"), std::string::npos) << d.out;
    // a capped scan says so
    command_result capped = run_cli("break-it " + M() + " --prompt 'the cat' --scan-heads 3");
    ASSERT_EQ(capped.code, 0) << capped.err;
    EXPECT_NE(capped.out.find("note: this model has 6 heads: the scan removed 3 of them"), std::string::npos) << capped.out;
    // errors: one line, exit 2
    for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
             {"--prompt ''", "--prompt is empty"},
             {"--prompt '" + std::string(200, 'x') + " " + std::string(200, 'y') + "'", "too long"},
             {"--prompt x --scan-heads 0", "--scan-heads: expected an integer"},
             {"--prompt x --ablate no-residual", "break-it does not take --ablate"}}) {
        command_result e = run_cli("break-it " + M() + " " + args);
        EXPECT_EQ(e.code, 2) << args << "\n" << e.out;
        EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
        EXPECT_NE(e.err.find(needle), std::string::npos) << e.err;
    }
}

// generate --temperatures: one continuation per temperature from the same seed and top-k, each the core's
// generation at that temperature, after the distribution it samples from (the top-k softmax at that temperature)
TEST(Cli, GenerateAtSeveralTemperatures) {
    const std::string dir = test_temp_dir("cli_temps");
    const std::string cmd = "generate " + M() + " --prompt 'the cat' --max-new-tokens 10 --temperatures 0.3,0.8,1.5 "
                            "--top-k 5 --seed 2";
    command_result r = run_cli(cmd + " --json " + dir + "/t.json");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* s : {"T = 0.3", "T = 0.8", "T = 1.5", "the top 5"}) EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
    EXPECT_EQ(run_cli(cmd + " --json " + dir + "/t2.json").out, r.out) << "the same seed gives the same three texts";
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/t.json"));
    gb::model m = gb::load_model(cli_test_model().dir);
    const std::vector<int> ids = ids_of(m, "the cat");
    gb::record rec;
    gb::run_forward(rec, m, ids);
    ASSERT_EQ(j["runs"].size(), 3u);
    double top_share[3];
    const float temps[3] = {0.3f, 0.8f, 1.5f};
    for (int i = 0; i < 3; i++) {
        const nlohmann::json& run = j["runs"][i];
        gb::sampling sp;
        sp.temperature = (float)run["temperature"].get<double>(), sp.top_k = 5, sp.seed = 2;
        EXPECT_NEAR(sp.temperature, temps[i], 1e-6);
        EXPECT_EQ(run["generated_ids"].get<std::vector<int>>(), gb::generate(m, ids, 10, sp).ids) << sp.temperature;
        gb::sampling_dist d;
        gb::sampling_distribution(d, rec.last_logits(), rec.vocab, sp);
        ASSERT_EQ(run["distribution"].size(), 5u);
        double sum = 0;
        for (size_t k = 0; k < 5; k++) {
            EXPECT_EQ(run["distribution"][k]["id"], d.ids[k]);
            EXPECT_NEAR(run["distribution"][k]["prob"].get<double>(), d.probs[k], 1e-12);
            sum += run["distribution"][k]["prob"].get<double>();
        }
        EXPECT_NEAR(sum, 1.0, 1e-9);
        top_share[i] = run["distribution"][0]["prob"];
    }
    EXPECT_GT(top_share[0], top_share[1]);
    EXPECT_GT(top_share[1], top_share[2]) << "a higher temperature flattens the distribution";
    for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
             {"--temperature 1 --temperatures 0.3", "give --temperature or --temperatures, not both"},
             {"--temperatures 0.3,hot", "--temperatures: expected a number"},
             {"--temperatures ,", "--temperatures: expected 1 to 16"}}) {
        command_result e = run_cli("generate " + M() + " --prompt x --max-new-tokens 2 " + args);
        EXPECT_EQ(e.code, 2) << args;
        EXPECT_EQ(e.err.rfind("error: " + needle, 0), 0u) << e.err;
        EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
    }
}

TEST(Cli, AttributeJsonSumsToTheLogitDifference) {
    std::string dir = test_temp_dir("cli_attr");
    command_result r = run_cli("attribute " + M() + " --prompt 'the cat sat' --target ' ' --contrast-id 97 --position 1 --json " +
                           dir + "/a.json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/a.json"));
    for (const char* k : {"heads", "attn_bias", "mlp", "embed", "bias", "total"}) ASSERT_TRUE(j.contains(k)) << k;
    ASSERT_EQ(j["heads"].size(), 2u);
    ASSERT_EQ(j["heads"][0].size(), 3u);
    ASSERT_EQ(j["mlp"].size(), 2u);
    double sum = j["embed"].get<double>() + j["bias"].get<double>();
    for (auto& row : j["heads"])
        for (auto& v : row) sum += v.get<double>();
    for (const char* k : {"attn_bias", "mlp"})
        for (auto& v : j[k]) sum += v.get<double>();
    EXPECT_NEAR(sum, j["total"].get<double>(), 1e-4 * std::max(1.0, std::fabs(j["total"].get<double>())));
    gb::model m = gb::load_model(cli_test_model().dir);
    std::vector<int> ids = ids_of(m, "the cat sat");
    gb::attribution a = gb::attribute(analysis_record(m, ids), m, {}, ' ', 97, 1);
    EXPECT_NEAR(j["total"].get<double>(), a.total, 1e-6);
    EXPECT_NEAR(j["heads"][1][2].get<double>(), a.heads[1 * 3 + 2], 1e-9);
    EXPECT_EQ(j["position"], 1);
    EXPECT_EQ(j["target"]["id"], (int)' ');
    // the target must be one token: the error says how it tokenized
    command_result bad = run_cli("attribute " + M() + " --prompt 'the cat' --target 'cat dog'");
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--target 'cat dog' encodes to"), std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_EQ(run_cli("attribute " + M() + " --prompt 'the cat'").code, 2) << "no target";
    EXPECT_EQ(run_cli("attribute " + M() + " --prompt 'the cat' --target-id 5 --position 9").code, 2) << "position past the prompt";
}

TEST(Cli, HeadsScoresMatchTheCoreAndRepeatRandomDoublesTheTokens) {
    std::string dir = test_temp_dir("cli_heads");
    command_result r = run_cli("heads " + M() + " --prompt 'the cat sat on the cat' --json " + dir + "/h.json --npy-dir " + dir);
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/h.json"));
    gb::model m = gb::load_model(cli_test_model().dir);
    gb::record rec;
    gb::run_forward(rec, m, ids_of(m, "the cat sat on the cat"));
    gb::head_scores s = gb::score_heads(rec);
    const char* names[] = {"prev_token", "first_token", "induction", "duplicate_token", "entropy"};
    for (int k = 0; k < gb::SCORE_COUNT; k++) {
        ASSERT_EQ(j[names[k]].size(), 2u) << names[k];
        ASSERT_EQ(j[names[k]][0].size(), 3u) << names[k];
        for (int l = 0; l < 2; l++)
            for (int h = 0; h < 3; h++) EXPECT_NEAR(j[names[k]][l][h].get<double>(), s.at((gb::head_score_kind)k, l, h), 1e-6);
    }
    EXPECT_EQ(npy_shape(read_file(dir + "/head_scores.npy"), "<f4"), "5, 2, 3");
    // no token repeats: induction is null
    command_result once = run_cli("heads " + M() + " --prompt 'abc' --json " + dir + "/o.json");
    ASSERT_EQ(once.code, 0) << once.err;
    EXPECT_TRUE(nlohmann::json::parse(read_file(dir + "/o.json"))["induction"][0][0].is_null());
    command_result rr = run_cli("heads " + M() + " --repeat-random 7 --seed 3 --json " + dir + "/r.json");
    ASSERT_EQ(rr.code, 0) << rr.err;
    auto jr = nlohmann::json::parse(read_file(dir + "/r.json"));
    ASSERT_EQ(jr["tokens"].size(), 14u);
    for (int i = 0; i < 7; i++) EXPECT_EQ(jr["tokens"][i], jr["tokens"][i + 7]);
    EXPECT_FALSE(jr["induction"][1][0].is_null());
    EXPECT_EQ(run_cli("heads " + M() + " --repeat-random 30").code, 2) << "60 tokens exceed the context of 40";
}

TEST(Cli, PatchJsonMatchesTheContract) {
    std::string dir = test_temp_dir("cli_patch");
    command_result r = run_cli("patch " + M() + " --prompt 'the hat sat' --corrupt 'the mat sat' --target-id 32 --contrast-id 97 --json " +
                           dir + "/p.json --npy-dir " + dir);
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/p.json"));
    gb::model m = gb::load_model(cli_test_model().dir);
    std::vector<int> clean = ids_of(m, "the hat sat"), corrupt = ids_of(m, "the mat sat");
    const int T = (int)clean.size();
    for (const char* k : {"clean", "corrupt", "resid", "heads", "normalized"}) ASSERT_TRUE(j.contains(k)) << k;
    ASSERT_EQ(j["resid"].size(), 5u);
    ASSERT_EQ(j["resid"][0].size(), (size_t)T);
    ASSERT_EQ(j["heads"].size(), 2u);
    ASSERT_EQ(j["normalized"]["resid"].size(), 5u);
    ASSERT_EQ(j["normalized"]["heads"][1].size(), 3u);
    gb::patch_result p = gb::activation_patching(m, clean, corrupt, 32, 97, {});
    EXPECT_NEAR(j["clean"].get<double>(), p.clean, 1e-9);
    EXPECT_NEAR(j["corrupt"].get<double>(), p.corrupt, 1e-9);
    EXPECT_NEAR(j["resid"][2][T - 1].get<double>(), p.resid[2 * T + T - 1], 1e-9);
    // the last point at the last position is the clean run's answer
    EXPECT_NEAR(j["normalized"]["resid"][4][T - 1].get<double>(), 1.0, 1e-4);
    EXPECT_EQ(npy_shape(read_file(dir + "/patch_resid_normalized.npy"), "<f4"), "5, " + std::to_string(T));
    command_result bad = run_cli("patch " + M() + " --prompt 'the hat sat' --corrupt 'a dog' --target-id 32 --contrast-id 97");
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_NE(bad.err.find("same length"), std::string::npos) << bad.err;
}

// grad: the metric, every residual point's gradient (the core's, unchanged), gradient x input and integrated
// gradients, whose sum closes on metric(x) - metric(0) as the steps grow: fast without norms (a smooth path),
// slowly with them (a norm of the nearly zero stream changes sharply near the baseline).
TEST(Cli, GradJsonMatchesTheContractAndIntegratedGradientsComplete) {
    std::string dir = test_temp_dir("cli_grad");
    const std::string prompt = " --prompt 'the hat sat' --target-id 32 --contrast-id 97";
    command_result r = run_cli("grad " + M() + prompt + " --ablate no-layernorm --steps 64 --json " + dir + "/g.json --npy-dir " + dir);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("completeness gap"), std::string::npos) << r.out;
    auto j = nlohmann::json::parse(read_file(dir + "/g.json"));
    gb::model m = gb::load_model(cli_test_model().dir);
    const std::vector<int> tokens = ids_of(m, "the hat sat");
    const int T = (int)tokens.size(), d = 24;
    gb::metric_spec ms;
    ms.target = 32, ms.contrast = 97;
    gb::ablation ab;
    ab.no_layernorm.on = true;
    gb::gradients g;
    gb::run_gradients(g, m, tokens, ms, ab);
    EXPECT_EQ(j["metric_kind"], "logit-diff");
    EXPECT_EQ(j["position"], T - 1);
    EXPECT_EQ(j["target"]["id"], 32);
    EXPECT_EQ(j["contrast"]["id"], 97);
    EXPECT_NEAR(j["metric"].get<double>(), g.metric_value, 1e-6);
    ASSERT_EQ(j["resid_grad"].size(), 5u);
    ASSERT_EQ(j["resid_grad"][4].size(), (size_t)T);
    ASSERT_EQ(j["resid_grad"][4][T - 1].size(), (size_t)d);
    for (int p = 0; p < 5; p++)
        for (int i = 0; i < d; i++)
            ASSERT_NEAR(j["resid_grad"][p][T - 1][i].get<double>(), g.resid_at(p)[(size_t)(T - 1) * d + i], 1e-6);
    ASSERT_EQ(j["grad_x_input"].size(), (size_t)T);
    ASSERT_EQ(j["integrated"].size(), (size_t)T);
    double sum = 0;
    for (const auto& v : j["integrated"]) sum += v.get<double>();
    const double change = j["metric"].get<double>() - j["baseline"].get<double>();
    EXPECT_GT(std::fabs(change), 0.1);
    EXPECT_NEAR(j["completeness_gap"].get<double>(), change - sum, 1e-4);
    EXPECT_LE(std::fabs(change - sum), 1e-3 * std::fabs(change)) << "64 midpoint steps integrate a smooth path";
    EXPECT_EQ(npy_shape(read_file(dir + "/resid_grad.npy"), "<f4"), "5, " + std::to_string(T) + ", 24");
    EXPECT_EQ(npy_shape(read_file(dir + "/integrated.npy"), "<f4"), std::to_string(T) + ",");
    // with the norms: the gap shrinks as the steps grow
    double gap[2];
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(run_cli("grad " + M() + prompt + " --steps " + (i ? "2000" : "200") + " --json " + dir + "/n.json").code, 0);
        gap[i] = std::fabs(nlohmann::json::parse(read_file(dir + "/n.json"))["completeness_gap"].get<double>());
    }
    EXPECT_LT(gap[1], gap[0] / 5) << gap[0] << " " << gap[1];
    // log p and logit need no contrast; logit-diff needs one
    EXPECT_EQ(run_cli("grad " + M() + " --prompt 'the hat sat' --target-id 32 --metric logprob --position 1 --steps 0").code, 0);
    command_result bad = run_cli("grad " + M() + " --prompt 'the hat sat' --target-id 32");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("needs --contrast"), std::string::npos) << bad.err;
}

// atp: patch's keys from one backward pass. Where the metric is linear in the patched activation (the last
// point, every norm ablated) the estimate is exact patching; elsewhere --exact reports how far it is.
TEST(Cli, AtpAgreesWithExactPatchingWhereTheMapIsLinear) {
    std::string dir = test_temp_dir("cli_atp");
    const std::string prompts = " --prompt 'the hat sat' --corrupt 'the mat sat' --target-id 32 --contrast-id 97";
    command_result r = run_cli("atp " + M() + prompts + " --ablate no-layernorm --exact --json " + dir + "/a.json --npy-dir " + dir);
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/a.json"));
    for (const char* k : {"clean", "corrupt", "resid", "heads", "normalized", "exact", "error", "method"})
        ASSERT_TRUE(j.contains(k)) << k;
    const int T = (int)j["resid"][0].size();
    EXPECT_NEAR(j["clean"].get<double>(), j["exact"]["clean"].get<double>(), 1e-4);
    EXPECT_NEAR(j["corrupt"].get<double>(), j["exact"]["corrupt"].get<double>(), 1e-4);
    for (int t = 0; t < T; t++)
        EXPECT_NEAR(j["normalized"]["resid"][4][t].get<double>(), j["exact"]["normalized"]["resid"][4][t].get<double>(),
                    1e-3) << "position " << t;
    EXPECT_NEAR(j["normalized"]["resid"][4][T - 1].get<double>(), 1.0, 1e-3);
    EXPECT_EQ(npy_shape(read_file(dir + "/atp_heads_normalized.npy"), "<f4"), "2, 3");
    EXPECT_EQ(npy_shape(read_file(dir + "/patch_resid.npy"), "<f4"), "5, " + std::to_string(T));
    // the whole map: an estimate, with its error against exact patching reported
    command_result full = run_cli("atp " + M() + prompts + " --exact --json " + dir + "/b.json");
    ASSERT_EQ(full.code, 0) << full.err;
    EXPECT_NE(full.out.find("correlation"), std::string::npos) << full.out;
    auto e = nlohmann::json::parse(read_file(dir + "/b.json"))["error"];
    for (const char* part : {"resid", "heads"})
        for (const char* k : {"max", "rms"}) EXPECT_TRUE(std::isfinite(e[part][k].get<double>())) << part << " " << k;
    std::printf("atp vs exact on the tiny GPT-2: resid max %.4f rms %.4f corr %s; heads max %.4f rms %.4f corr %s\n",
                e["resid"]["max"].get<double>(), e["resid"]["rms"].get<double>(), e["resid"]["correlation"].dump().c_str(),
                e["heads"]["max"].get<double>(), e["heads"]["rms"].get<double>(), e["heads"]["correlation"].dump().c_str());
    EXPECT_EQ(run_cli("atp " + M() + " --prompt 'the hat sat' --corrupt 'a dog' --target-id 32").code, 2);
}

TEST(Cli, KeepWritesHookPointsAsNpy) {
    std::string dir = test_temp_dir("cli_keep");
    command_result r = run_cli("run " + M() + " --prompt 'the cat' --keep resid_stream,z,mlp_post,final_norm --npy-dir " + dir);
    ASSERT_EQ(r.code, 0) << r.err;
    gb::model m = gb::load_model(cli_test_model().dir);
    std::vector<int> ids = ids_of(m, "the cat");
    const std::string T = std::to_string(ids.size());
    EXPECT_EQ(npy_shape(read_file(dir + "/resid_stream.npy"), "<f4"), "5, " + T + ", 24");
    EXPECT_EQ(npy_shape(read_file(dir + "/z.npy"), "<f4"), "2, " + T + ", 3, 8");
    EXPECT_EQ(npy_shape(read_file(dir + "/mlp_post.npy"), "<f4"), "2, " + T + ", 96");
    EXPECT_EQ(npy_shape(read_file(dir + "/final_norm.npy"), "<f4"), "1, 24");
    // the payload is the record: z of layer 1 equals an in-process run's
    gb::forward_options o;
    o.keep.points = gb::hook_bit(gb::HOOK_Z);
    gb::record rec;
    gb::run_forward(rec, m, ids, {}, o);
    std::string z = read_file(dir + "/z.npy");
    size_t hl = (unsigned char)z[8] | ((unsigned char)z[9] << 8);
    const size_t layer = rec.layer_floats(gb::HOOK_Z);
    EXPECT_EQ(0, std::memcmp(z.data() + 10 + hl + layer * 4, rec.get(gb::HOOK_Z, 1), layer * 4));
    EXPECT_EQ(run_cli("run " + M() + " --prompt x --keep z").code, 2) << "--keep without --npy-dir";
    command_result bad = run_cli("run " + M() + " --prompt x --keep zz --npy-dir " + dir);
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("unknown hook point 'zz'"), std::string::npos) << bad.err;
}
