// Circuits (core/analysis/circuit.h): every edge's score against the EAP formula computed in double from the
// reference forwards (tests/support) — the output difference from the clean and corrupted reference runs, the
// reader's gradient by central differences of the corrupted reference with only that reader seeing the change —
// on the tiny GPT-2 and the GQA Llama; the faithfulness at both ends (every edge: the clean run; none: the
// corrupted one) and in between against the reference with the same patches; the CLI; and the app's Circuit tab.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/circuit.h"
#include "analysis/gradients.h"
#include "app_script.h"
#include "io/loader.h"
#include "run/forward.h"
#include "ref_models.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

double ref_logit_diff(const ref_trace& r, int target, int contrast, int V) {
    const double* lg = &r.logits[(size_t)(r.n_tokens - 1) * V];
    return lg[target] - lg[contrast];
}

// Node v's output in a reference run [T][d]: the embeddings' stream, a head's head_out slice, an MLP's mlp_out
std::vector<double> ref_output(const ref_trace& r, const gb::circuit_result& c, int v) {
    const gb::circuit_node& n = c.nodes[v];
    const int T = c.n_tokens, d = c.d_model, H = c.n_head;
    std::vector<double> out((size_t)T * d);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < d; i++) {
            size_t at = (size_t)t * d + i;
            if (n.kind == gb::circuit_node::EMBED) out[at] = r.resid_at(0, t)[i];
            else if (n.kind == gb::circuit_node::HEAD) out[at] = r.at(gb::HOOK_HEAD_OUT, n.layer)[(size_t)t * H * d + n.head * d + i];
            else out[at] = r.at(gb::HOOK_MLP_OUT, n.layer)[at];
        }
    return out;
}

// The residual point a reader reads (the change is added there) and the one after it (where it is taken back
// out again, so that only that reader saw it); -1: none (the logits read the last point)
void reader_points(const gb::circuit_result& c, int v, int& in, int& out) {
    const gb::circuit_node& n = c.nodes[v];
    if (n.kind == gb::circuit_node::HEAD) in = 2 * n.layer, out = in + 1;
    else if (n.kind == gb::circuit_node::MLP) in = 2 * n.layer + 1, out = in + 1;
    else in = 2 * c.n_layer, out = -1;
}

// d/de of the metric on the corrupted reference when reader v alone reads the stream plus e * delta: the
// change is added at the reader's point and taken out at the next; a head's layer-mates keep their own z.
double ref_edge(const ref_model& rm, const std::vector<int>& corrupt, const ref_trace& base, const gb::circuit_result& c,
                int v, const std::vector<double>& delta) {
    const int T = c.n_tokens, d = c.d_model, H = c.n_head, dh = c.d_head, V = rm.m.config.vocab_size;
    int in, out;
    reader_points(c, v, in, out);
    gb::hook_point pin, pout = gb::HOOK_COUNT;
    int lin, lout = -1;
    gb::resid_point_hook(in, pin, lin);
    if (out >= 0) gb::resid_point_hook(out, pout, lout);
    ref_options o;
    const gb::circuit_node& n = c.nodes[v];
    if (n.kind == gb::circuit_node::HEAD)
        for (int h = 0; h < H; h++) {
            if (h == n.head) continue;
            ref_z_patch zp{n.layer, h, std::vector<double>((size_t)T * dh)};
            for (int t = 0; t < T; t++)
                for (int e = 0; e < dh; e++) zp.values[(size_t)t * dh + e] = base.at(gb::HOOK_Z, n.layer)[(size_t)t * H * dh + h * dh + e];
            o.z_patches.push_back(zp);
        }
    const double eps = 1e-4;
    double f[2];
    for (int s = 0; s < 2; s++) {
        const double k = s ? -eps : eps;
        o.edit = [&](gb::hook_point p, int layer, std::vector<double>& x) {
            if (p == pin && layer == lin)
                for (size_t i = 0; i < (size_t)T * d; i++) x[i] += k * delta[i];
            if (p == pout && layer == lout)
                for (size_t i = 0; i < (size_t)T * d; i++) x[i] -= k * delta[i];
        };
        f[s] = ref_logit_diff(rm.reference(corrupt, {}, o), c.target, c.contrast, V);
    }
    return (f[0] - f[1]) / (2 * eps);
}

} // namespace

// Every edge's score is (clean - corrupt output of its source) . (its reader's gradient on the corrupted run).
TEST(Circuit, EdgeScoresMatchTheDoubleReference) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const std::vector<int> clean = rm->tokens(5, 21), corrupt = rm->tokens(5, 22);
            const int target = 7, contrast = 11;
            const gb::circuit_result c = gb::circuit_scores(rm->m, clean, corrupt, target, contrast);
            const int L = rm->m.config.n_layer, H = rm->m.config.n_head;
            ASSERT_EQ((int)c.nodes.size(), 1 + L * (H + 1) + 1);
            // heads read everything before their layer, MLPs their own layer's heads too, the logits everything
            int want_edges = 0;
            for (int l = 0; l < L; l++) want_edges += H * (1 + l * (H + 1)) + (1 + l * (H + 1) + H);
            want_edges += 1 + L * (H + 1);
            ASSERT_EQ((int)c.edges.size(), want_edges);
            const ref_trace rc = rm->reference(clean, {}, {}), rx = rm->reference(corrupt, {}, {});
            const int V = rm->m.config.vocab_size;
            EXPECT_NEAR(c.clean, ref_logit_diff(rc, target, contrast, V), 1e-3);
            EXPECT_NEAR(c.corrupt, ref_logit_diff(rx, target, contrast, V), 1e-3);
            std::vector<std::vector<double>> delta(c.nodes.size());
            for (size_t u = 0; u + 1 < c.nodes.size(); u++) {
                const std::vector<double> a = ref_output(rc, c, (int)u), b = ref_output(rx, c, (int)u);
                delta[u].resize(a.size());
                for (size_t i = 0; i < a.size(); i++) delta[u][i] = a[i] - b[i];
            }
            double scale = 0, worst = 0;
            std::vector<double> node_sum(c.nodes.size(), 0.0);
            for (const gb::circuit_edge& e : c.edges) {
                const double want = ref_edge(*rm, corrupt, rx, c, e.to, delta[e.from]);
                scale = std::max(scale, std::fabs(want));
                worst = std::max(worst, std::fabs(e.score - want));
                node_sum[e.from] += e.score;
            }
            EXPECT_GT(scale, 1e-2) << rm->name << ": some edge carries the difference";
            EXPECT_LE(worst, 2e-3 * scale) << rm->name << " " << gb::matmul_name(gb::matmul_kind_now());
            for (size_t u = 0; u + 1 < c.nodes.size(); u++)
                EXPECT_NEAR(c.nodes[u].score, node_sum[u], 1e-9 + 1e-6 * scale) << c.nodes[u].id;
            for (size_t i = 1; i < c.edges.size(); i++)
                ASSERT_GE(std::fabs(c.edges[i - 1].score), std::fabs(c.edges[i].score)) << "sorted by |score|";
        }
    });
}

// The clean run of attribution patching and circuits starts where the prompts first differ, on the corrupted
// run's keys and values: what it keeps and its metric are those of a whole clean run, wherever the prompts differ
// (the first position, the middle, the last, nowhere), under an ablation and a knockout too.
TEST(Circuit, TheCleanRunFromTheFirstDifferenceIsAWholeRun) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const std::vector<int> corrupt = rm->tokens(7, 31);
            for (int first : {0, 3, 6, 7}) {
                std::vector<int> clean = corrupt;
                for (int t = first; t < 7; t++) clean[t] = (clean[t] + 5) % rm->m.config.vocab_size;
                gb::ablation ab;
                if (first == 3) ab.heads.push_back({0, 1});
                gb::metric_spec ms;
                ms.target = 7, ms.contrast = 11;
                gb::record_request keep;
                keep.points = gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
                keep.resid_stream = true;
                gb::record rc, rx;
                gb::gradients g;
                gb::corrupt_and_clean_runs(rc, rx, g, rm->m, clean, corrupt, ms, ab, keep);
                gb::forward_options o;
                o.keep = keep;
                gb::record whole;
                gb::run_forward(whole, rm->m, clean, ab, o);
                const std::string at = rm->name + " from " + std::to_string(first) + " " +
                                       gb::matmul_name(gb::matmul_kind_now());
                EXPECT_NEAR(gb::metric_of_ids(rc.last_logits(), ms), gb::metric_of(whole.last_logits(), whole.vocab, ms),
                            1e-4) << at;
                auto expect_same = [&](const float* a, const float* b, size_t n, const std::string& what) {
                    double worst = 0, scale = 1e-6;
                    for (size_t i = 0; i < n; i++) {
                        worst = std::max(worst, (double)std::fabs(a[i] - b[i]));
                        scale = std::max(scale, (double)std::fabs(b[i]));
                    }
                    EXPECT_LE(worst, 1e-5 * scale) << at << " " << what;
                };
                const int L = rm->m.config.n_layer;
                for (int p = 0; p <= 2 * L; p++)
                    expect_same(rc.resid(p), whole.resid(p), (size_t)7 * rm->m.config.d_model, "resid " + std::to_string(p));
                for (int l = 0; l < L; l++) {
                    expect_same(rc.get(gb::HOOK_Z, l), whole.get(gb::HOOK_Z, l), rc.layer_floats(gb::HOOK_Z), "z");
                    expect_same(rc.get(gb::HOOK_MLP_OUT, l), whole.get(gb::HOOK_MLP_OUT, l), rc.layer_floats(gb::HOOK_MLP_OUT), "mlp_out");
                }
            }
        }
    });
}

// Every edge kept: nothing is patched and the metric is the clean one (faithfulness 1). No edge: every head, MLP
// and the embeddings take the corrupted values, which is the corrupted run. In between: the reference with the
// same nodes patched (z for heads, mlp_out for MLPs).
TEST(Circuit, FaithfulnessAtBothEndsAndBetween) {
    for (const ref_model* rm : ref_models()) {
        const std::vector<int> clean = rm->tokens(6, 31), corrupt = rm->tokens(6, 32);
        const int target = 5, contrast = 9, V = rm->m.config.vocab_size;
        const gb::circuit_result c = gb::circuit_scores(rm->m, clean, corrupt, target, contrast);
        const std::vector<unsigned char> all = gb::circuit_members(c, (int)c.edges.size());
        EXPECT_EQ(std::count(all.begin(), all.end(), 1), (long)c.nodes.size());
        EXPECT_TRUE(gb::circuit_interventions(c, all).empty());
        const double full = gb::circuit_metric(rm->m, c, clean, all);
        EXPECT_NEAR(full, c.clean, 1e-5) << rm->name;
        EXPECT_NEAR(gb::circuit_faithfulness(c, full), 1.0, 1e-5) << rm->name;
        const ref_trace rx = rm->reference(corrupt, {}, {});
        for (int n : {0, 6, 20}) {
            const std::vector<unsigned char> in = gb::circuit_members(c, n);
            EXPECT_EQ(std::count(in.begin(), in.end(), 1) > 1, n > 0);
            // the reference with every node outside the circuit set to its corrupted output
            const int L = c.n_layer, H = c.n_head, T = c.n_tokens, dh = c.d_head, d = c.d_model;
            ref_options o;
            for (int l = 0; l < L; l++)
                for (int h = 0; h < H; h++) {
                    if (in[c.node_of_head(l, h)]) continue;
                    ref_z_patch zp{l, h, std::vector<double>((size_t)T * dh)};
                    for (int t = 0; t < T; t++)
                        for (int e = 0; e < dh; e++) zp.values[(size_t)t * dh + e] = rx.at(gb::HOOK_Z, l)[(size_t)t * H * dh + h * dh + e];
                    o.z_patches.push_back(zp);
                }
            if (!in[0])
                for (int t = 0; t < T; t++)
                    o.resid_patches.push_back({0, t, std::vector<double>(rx.resid_at(0, t), rx.resid_at(0, t) + d)});
            o.edit = [&](gb::hook_point p, int layer, std::vector<double>& x) {
                if (p == gb::HOOK_MLP_OUT && !in[c.node_of_mlp(layer)]) x = rx.at(gb::HOOK_MLP_OUT, layer);
            };
            const double want = ref_logit_diff(rm->reference(clean, {}, o), target, contrast, V);
            const double got = gb::circuit_metric(rm->m, c, clean, in);
            EXPECT_NEAR(got, want, 1e-3 * (1 + std::fabs(want))) << rm->name << " " << n << " edges";
            if (n == 0) {
                EXPECT_NEAR(got, c.corrupt, 1e-4) << rm->name << ": nothing kept is the corrupted run";
                EXPECT_NEAR(gb::circuit_faithfulness(c, got), 0.0, 1e-3) << rm->name;
            }
        }
    }
}

// Prompts of different lengths cannot be patched into each other.
TEST(Circuit, RefusesPromptsOfDifferentLengths) {
    const ref_model& rm = tiny_gpt2_ref();
    expect_gb_error([&] { gb::circuit_scores(rm.m, rm.tokens(4, 1), rm.tokens(5, 2), 3, 4); }, "tokens and the corrupted one");
}

// The CLI: nodes, the top N edges, faithfulness and its curve; --edges 0 keeps nothing (faithfulness 0) and a
// count over every edge keeps everything (1); a missing contrast is a usage error.
TEST(Circuit, CliWritesTheGraphAndFaithfulness) {
    tiny_spec s;
    s.n_layer = 2, s.n_head = 3, s.d_model = 24, s.n_ctx = 40;
    static const tiny_model tm = write_tiny_gpt2(test_temp_dir("circuit_cli_model"), s);
    const std::string dir = test_temp_dir("circuit_cli");
    const std::string base = "circuit --model '" + tm.dir + "' --prompt 'the hat sat' --corrupt 'the mat sat' "
                             "--target-id 32 --contrast-id 97";
    command_result r = run_cli(base + " --edges 5 --json " + dir + "/c.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("faithfulness"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("->"), std::string::npos) << r.out;
    auto j = nlohmann::json::parse(read_file(dir + "/c.json"));
    for (const char* k : {"nodes", "edges", "faithfulness", "clean", "corrupt", "faithfulness_curve", "total_edges"})
        ASSERT_TRUE(j.contains(k)) << k;
    ASSERT_EQ(j["nodes"].size(), 1u + 2 * 4 + 1);
    EXPECT_EQ(j["nodes"][0]["id"], "embed");
    EXPECT_EQ(j["nodes"][1]["kind"], "head");
    EXPECT_EQ(j["nodes"][4]["id"], "L0.MLP");
    EXPECT_EQ(j["nodes"][9]["kind"], "logits");
    ASSERT_EQ(j["edges"].size(), 5u);
    for (size_t i = 1; i < j["edges"].size(); i++)
        EXPECT_GE(std::fabs(j["edges"][i - 1]["score"].get<double>()), std::fabs(j["edges"][i]["score"].get<double>()));
    const double f = j["faithfulness"].get<double>();
    EXPECT_TRUE(std::isfinite(f));
    EXPECT_NEAR(f, (j["circuit_metric"].get<double>() - j["corrupt"].get<double>()) /
                       (j["clean"].get<double>() - j["corrupt"].get<double>()), 1e-9);
    const auto& curve = j["faithfulness_curve"];
    EXPECT_NEAR(curve.front()["faithfulness"].get<double>(), 0.0, 1e-3);
    EXPECT_NEAR(curve.back()["faithfulness"].get<double>(), 1.0, 1e-6);
    ASSERT_EQ(run_cli(base + " --edges 100000 --json " + dir + "/all.json").code, 0);
    EXPECT_NEAR(nlohmann::json::parse(read_file(dir + "/all.json"))["faithfulness"].get<double>(), 1.0, 1e-6);
    ASSERT_EQ(run_cli(base + " --edges 0 --json " + dir + "/none.json").code, 0);
    EXPECT_NEAR(nlohmann::json::parse(read_file(dir + "/none.json"))["faithfulness"].get<double>(), 0.0, 1e-3);
    command_result help = run_cli("circuit --help");
    ASSERT_EQ(help.code, 0);
    for (const char* o : {"  --corrupt CORRUPT", "  --edges N", "  --contrast-id N", "  --knockout", "Exit codes:"})
        EXPECT_NE(help.out.find(o), std::string::npos) << o;
    EXPECT_NE(run_cli("--help").out.find("  circuit "), std::string::npos) << "the overview lists it";
    // no --contrast: the app's default (the corrupted prompt's top-1, or the clean top-2), said in one line
    command_result dflt = run_cli("circuit --model '" + tm.dir + "' --prompt 'the hat sat' --corrupt 'the mat sat' --target-id 32");
    EXPECT_EQ(dflt.code, 0) << dflt.err;
    EXPECT_NE(dflt.out.find("contrast = the"), std::string::npos) << dflt.out;
    EXPECT_EQ(run_cli("circuit --model '" + tm.dir + "' --prompt 'the hat sat' --corrupt 'a' --target-id 32 --contrast-id 9").code, 2);
}

// The app: the Circuit tab finds the graph of the Patching tab's prompts (every node of the model), "keep only this
// circuit" patches the app's run until removed, a click on a head opens it in the Head view, and Patching's fast
// mode ends with the exact maps and the estimate beside them.
TEST(Circuit, AppTabShowsTheGraphAndKeepsTheCircuit) {
    ASSERT_TRUE(have_app());
    tiny_spec s;
    s.n_layer = 3, s.n_head = 4, s.d_model = 32, s.n_ctx = 64, s.seed = 11;
    static const tiny_model tm = write_tiny_gpt2(test_temp_dir("circuit_gui_model"), s);
    int rc = -1;
    const auto states = run_script("--model " + sq(tm.dir) + " --prompt " + sq("the cat sat on the mat"),
                                   "corrupt the cat sat on the hat\ntab circuit\nwait\nprint\n"
                                   "click circuit keep\nwait\nprint\n"
                                   "click remove circuit\nwait\nprint\n"
                                   "click circuit node L2.H3\nwait\nprint\n"
                                   "tab patching\nwait\nprint\n",
                                   &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(states.size(), 5u);
    const auto& c = states[0]["circuit"];
    ASSERT_TRUE(c.is_object()) << states[0].dump();
    EXPECT_EQ(c["nodes"], 1 + 3 * (4 + 1) + 1);
    int edges = 1 + 3 * 5; // into the logits
    for (int l = 0; l < 3; l++) edges += 4 * (1 + l * 5) + (1 + l * 5 + 4);
    EXPECT_EQ(c["edges_total"], edges);
    EXPECT_TRUE(c["current"]);
    EXPECT_EQ(c["edges"], 20) << "the slider's default";
    EXPECT_TRUE(c["faithfulness"].is_number()) << c.dump();
    EXPECT_GT(c["circuit_nodes"].get<int>(), 1);
    EXPECT_FALSE(states[0]["run_circuit"]);
    EXPECT_EQ(states[1]["circuit_kept"], "circuit of 20 edges (" + std::to_string(c["circuit_nodes"].get<int>()) + " nodes)");
    EXPECT_TRUE(states[1]["circuit_in_force"]);
    EXPECT_TRUE(states[1]["run_circuit"]) << "the shown run has the circuit's patches";
    if (c["circuit_nodes"] < c["nodes"]) { // some node is patched: the prediction moves from the baseline's
        EXPECT_GT(states[1]["kl"].get<double>(), 0.0);
    }
    std::printf("circuit of 20 edges on the tiny GPT-2: %d of %d nodes, faithfulness %.3f, KL %.3g\n",
                c["circuit_nodes"].get<int>(), c["nodes"].get<int>(), c["faithfulness"].get<double>(),
                states[1]["kl"].get<double>());
    EXPECT_EQ(states[0]["kl"].get<double>(), 0.0);
    EXPECT_TRUE(states[2]["circuit_kept"].is_null());
    EXPECT_FALSE(states[2]["run_circuit"]);
    EXPECT_EQ(states[3]["tab"], "head");
    EXPECT_EQ(states[3]["selected_head"], "2.3");
    // Patching's fast mode: the exact maps in the end, the estimate kept beside them
    const auto& p = states[4]["patching"];
    ASSERT_TRUE(p.is_object()) << states[4].dump();
    EXPECT_TRUE(p["exact"]);
    EXPECT_TRUE(p["has_estimate"]);
    EXPECT_GT(p["runs"].get<int>(), 0);
}
