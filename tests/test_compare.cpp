// compare (core/analysis/compare.h) against its formulas in double on tiny random GPT-2s the test writes; a model
// against itself; the refusals; glassbox-cli compare and quantize end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <string>
#include <vector>

#include "analysis/compare.h"
#include "analysis/lens.h"
#include "io/gguf_writer.h"
#include "io/loader.h"
#include "kernels/gemm.h"
#include "run/forward.h"
#include "app_script.h"
#include "test_util.h"
#include "util/error.h"
#include "tiny_model.h"

namespace {

struct pair_of_models {
    std::string dir_a, dir_b;
    gb::model a, b;
};

// Two GPT-2s of one shape and tokenizer, different weights
pair_of_models two_models(const std::string& name, int d_model = 16) {
    pair_of_models p;
    const std::string dir = test_temp_dir(name);
    tiny_spec s;
    s.d_model = d_model;
    p.dir_a = dir + "/a", p.dir_b = dir + "/b";
    write_tiny_gpt2(p.dir_a, s);
    s.seed = 2;
    write_tiny_gpt2(p.dir_b, s);
    p.a = gb::load_model(p.dir_a), p.b = gb::load_model(p.dir_b);
    return p;
}

gb::record full_run(const gb::model& m, const std::vector<int>& ids) {
    gb::forward_options fo;
    fo.keep = gb::compare_request();
    fo.all_logits = true;
    gb::record r;
    gb::run_forward(r, m, ids, {}, fo);
    return r;
}

std::vector<double> log_softmax_d(const float* x, int V) {
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = std::max(mx, (double)x[v]);
    for (int v = 0; v < V; v++) sum += std::exp((double)x[v] - mx);
    std::vector<double> out(V);
    for (int v = 0; v < V; v++) out[v] = x[v] - mx - std::log(sum);
    return out;
}

int argmax(const float* x, int V) { return (int)(std::max_element(x, x + V) - x); }

} // namespace

// Every number compare gives equals its formula computed here in double from the two records
TEST(Compare, EqualsItsFormulasInDouble) {
    const pair_of_models p = two_models("compare_formulas");
    const std::vector<int> ids = random_tokens(12, p.a.config.vocab_size, 5);
    gb::compare_result c;
    gb::compare_models(c, p.a, p.b, ids);
    const gb::record ra = full_run(p.a, ids), rb = full_run(p.b, ids);
    const int L = ra.n_layer, H = ra.n_head, T = ra.n_tokens, d = ra.d_model, V = ra.vocab, P = 2 * L + 1;
    ASSERT_EQ(c.n_points, P);
    ASSERT_EQ(c.n_tokens, T);
    for (int pt = 0; pt < P; pt++)
        for (int t = 0; t < T; t++) {
            const float *x = ra.resid(pt) + (size_t)t * d, *y = rb.resid(pt) + (size_t)t * d;
            double xy = 0, xx = 0, yy = 0, dd = 0;
            for (int i = 0; i < d; i++) xy += (double)x[i] * y[i], xx += (double)x[i] * x[i], yy += (double)y[i] * y[i],
                                        dd += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            EXPECT_NEAR(c.cosine[(size_t)pt * T + t], xy / std::sqrt(xx * yy), 1e-5) << "point " << pt << " t " << t;
            EXPECT_NEAR(c.rel_diff[(size_t)pt * T + t], std::sqrt(dd / xx), 1e-5 * (1 + std::sqrt(dd / xx)));
        }
    int agree = 0;
    for (int t = 0; t < T; t++) {
        const float *x = &ra.logits[(size_t)t * V], *y = &rb.logits[(size_t)t * V];
        const std::vector<double> la = log_softmax_d(x, V), lb = log_softmax_d(y, V);
        double kl = 0;
        for (int v = 0; v < V; v++) kl += std::exp(la[v]) * (la[v] - lb[v]);
        EXPECT_NEAR(c.kl[t], kl, 1e-5 + 1e-4 * kl) << "position " << t;
        EXPECT_EQ(c.top_a[t], argmax(x, V));
        EXPECT_EQ(c.top_b[t], argmax(y, V));
        EXPECT_EQ(c.top_agree[t], argmax(x, V) == argmax(y, V));
        agree += argmax(x, V) == argmax(y, V);
        if (t == 0) continue;
        const std::vector<double> pa = log_softmax_d(&ra.logits[(size_t)(t - 1) * V], V),
                                  pb = log_softmax_d(&rb.logits[(size_t)(t - 1) * V], V);
        EXPECT_NEAR(c.surprisal_a.nats[t], -pa[ids[t]], 1e-4);
        EXPECT_NEAR(c.surprisal_b.nats[t], -pb[ids[t]], 1e-4);
        EXPECT_NEAR(c.surprisal_diff[t], pa[ids[t]] - pb[ids[t]], 2e-4);
    }
    EXPECT_EQ(c.top_agree_count, agree);
    EXPECT_TRUE(std::isnan(c.surprisal_diff[0]));
    double js_max = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float *A = ra.head(l, h), *B = rb.head(l, h);
            double sum = 0;
            for (int q = 0; q < T; q++)
                for (int k = 0; k <= q; k++) {
                    const double a = A[(size_t)q * T + k], b = B[(size_t)q * T + k], m = (a + b) / 2;
                    if (a > 0) sum += 0.5 * a * std::log(a / m) / T;
                    if (b > 0) sum += 0.5 * b * std::log(b / m) / T;
                }
            EXPECT_NEAR(c.head_js[(size_t)l * H + h], sum, 1e-6) << "L" << l << "H" << h;
            js_max = std::max(js_max, sum);
        }
    EXPECT_GT(js_max, 1e-3); // two different models: the patterns differ
    EXPECT_LE(js_max, std::log(2.0));
    // the lens of both at the last position: each point's top-1 through the final norm and head
    ASSERT_EQ((int)c.lens_top_a.size(), P);
    EXPECT_EQ(c.lens_position, T - 1);
    EXPECT_EQ(c.lens_top_a[P - 1], c.top_a[T - 1]);
    EXPECT_EQ(c.lens_top_b[P - 1], c.top_b[T - 1]);
    // ... which are logit_lens's at that position
    const gb::lens_result la = gb::logit_lens(ra, p.a, {}, 1), lb = gb::logit_lens(rb, p.b, {}, 1);
    for (int pt = 0; pt < P; pt++) {
        const size_t cell = (size_t)pt * T + (T - 1);
        EXPECT_EQ(c.lens_top_a[pt], la.top_ids[cell]) << c.points[pt];
        EXPECT_EQ(c.lens_top_b[pt], lb.top_ids[cell]) << c.points[pt];
        EXPECT_NEAR(c.lens_prob_a[pt], la.top_probs[cell], 1e-5) << c.points[pt];
        EXPECT_NEAR(c.lens_prob_b[pt], lb.top_probs[cell], 1e-5) << c.points[pt];
    }
    int first = -1;
    for (int pt = 0; pt < P && first < 0; pt++)
        if (c.lens_top_a[pt] != c.lens_top_b[pt]) first = pt;
    EXPECT_EQ(c.first_disagree, first);
}

TEST(Compare, AModelAgainstItselfChangesNothing) {
    const pair_of_models p = two_models("compare_self");
    const std::vector<int> ids = random_tokens(10, p.a.config.vocab_size, 9);
    gb::compare_result c;
    gb::compare_models(c, p.a, p.a, ids);
    for (float x : c.cosine) EXPECT_NEAR(x, 1.0f, 1e-6);
    for (float x : c.rel_diff) EXPECT_EQ(x, 0.0f);
    for (double x : c.kl) EXPECT_EQ(x, 0.0);
    for (float x : c.head_js) EXPECT_EQ(x, 0.0f);
    EXPECT_EQ(c.top_agree_count, c.n_tokens);
    EXPECT_EQ(c.first_disagree, -1);
    for (int t = 1; t < c.n_tokens; t++) EXPECT_EQ(c.surprisal_diff[t], 0.0);
}

// Two models of one family and stored types run side by side, one thread each: the numbers are those of the runs
// one after the other, and a run that stops (a newer request) stops the call without losing the exception
TEST(Compare, SideBySideGivesTheNumbersOfOneAfterTheOther) {
    const pair_of_models p = two_models("compare_side", 64);
    const std::vector<int> ids = random_tokens(24, p.a.config.vocab_size, 4);
    gb::compare_options seq;
    seq.side_by_side = false;
    gb::compare_result one, both;
    gb::compare_models(one, p.a, p.b, ids, seq);
    gb::compare_models(both, p.a, p.b, ids);
    EXPECT_FALSE(one.side_by_side);
    if (omp_get_max_threads() >= 2) {
        EXPECT_TRUE(both.side_by_side);
    }
    ASSERT_EQ(one.cosine.size(), both.cosine.size());
    for (size_t i = 0; i < one.cosine.size(); i++) {
        EXPECT_NEAR(one.cosine[i], both.cosine[i], 1e-6) << i;
        EXPECT_NEAR(one.rel_diff[i], both.rel_diff[i], 1e-5 * (1 + one.rel_diff[i])) << i;
    }
    for (size_t t = 0; t < one.kl.size(); t++) EXPECT_NEAR(one.kl[t], both.kl[t], 1e-5 * (1 + one.kl[t])) << t;
    for (size_t h = 0; h < one.head_js.size(); h++) EXPECT_NEAR(one.head_js[h], both.head_js[h], 1e-6) << h;
    EXPECT_EQ(one.top_a, both.top_a);
    EXPECT_EQ(one.top_b, both.top_b);
    EXPECT_EQ(one.lens_top_a, both.lens_top_a);
    EXPECT_EQ(one.lens_top_b, both.lens_top_b);

    // B is a Q8_0 copy of A: small runs go side by side whatever their types, large ones of unequal cost (here
    // the same models at 2^25 tokens) one after the other
    const std::string q = p.dir_a + "_q8.gguf";
    const command_result r = run_cli("quantize --model " + p.dir_a + " --dtype Q8_0 --out " + q);
    ASSERT_EQ(r.code, 0) << r.err;
    const gb::model qa = gb::load_model(q);
    const bool two = omp_get_max_threads() >= 2;
    EXPECT_EQ(gb::compare_side_by_side(p.a, qa, 24), two);
    EXPECT_EQ(gb::compare_side_by_side(p.a, p.b, 1 << 25), two);
    EXPECT_FALSE(gb::compare_side_by_side(p.a, qa, 1 << 25));
    gb::compare_result mixed;
    gb::compare_models(mixed, p.a, qa, ids);
    EXPECT_EQ(mixed.side_by_side, two);

    std::atomic<int> asked{0}; // (asked from both runs' threads)
    gb::compare_options stop;
    stop.cancelled = [&] { return ++asked > 3; };
    EXPECT_THROW(gb::compare_models(both, p.a, p.b, ids, stop), gb::cancelled);
}

TEST(Compare, RefusesOtherShapesAndTokenizersInOneLine) {
    const std::string dir = test_temp_dir("compare_refusals");
    tiny_spec s;
    write_tiny_gpt2(dir + "/a", s);
    s.n_layer = 3;
    write_tiny_gpt2(dir + "/deep", s);
    const gb::model a = gb::load_model(dir + "/a"), deep = gb::load_model(dir + "/deep");
    auto one_line = [](const std::function<void()>& fn, const std::string& needle) {
        try {
            fn();
            ADD_FAILURE() << "no error; expected " << needle;
        } catch (const gb::error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find(needle), std::string::npos) << m;
            EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        }
    };
    gb::compare_result c;
    one_line([&] { gb::compare_models(c, a, deep, {1, 2, 3}); }, "shapes differ: A has 2 layers");
    gb::model other = gb::load_model(dir + "/a");
    other.tok.vocab[7] = "zz";
    one_line([&] { gb::check_comparable(a, other); }, "tokenizers differ: id 7");
    one_line([&] { gb::check_same_ids(a, a, {1, 2, 3}, {1, 5, 3}); }, "at position 1");
    gb::check_same_ids(a, a, {1, 2}, {1, 2}); // the same ids: nothing
}

TEST(Compare, CliEndToEnd) {
    const pair_of_models p = two_models("compare_cli");
    const std::string json = p.dir_a + "/../c.json", npy = p.dir_a + "/../npy";
    const command_result r =
        run_cli("compare --model " + p.dir_a + " --model-b " + p.dir_b + " --prompt 'hello there' --json " + json + " --npy-dir " + npy);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("heads whose patterns moved most"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("logit lens of both"), std::string::npos) << r.out;
    std::ifstream f(json);
    const nlohmann::json j = nlohmann::json::parse(f);
    const int P = 2 * p.a.config.n_layer + 1, T = (int)j["token_ids"].size();
    ASSERT_EQ((int)j["cosine"].size(), P);
    EXPECT_EQ((int)j["cosine"][0].size(), T);
    EXPECT_EQ((int)j["head_js"].size(), p.a.config.n_layer);
    EXPECT_EQ((int)j["kl"].size(), T);
    EXPECT_TRUE(j["surprisal"]["diff"][0].is_null());
    // the JSON holds what the library computes for the same ids
    gb::compare_result c;
    gb::compare_models(c, p.a, p.b, j["token_ids"].get<std::vector<int>>());
    EXPECT_NEAR(j["kl"][T - 1].get<double>(), c.kl[T - 1], 1e-9);
    EXPECT_NEAR(j["head_js"][1][0].get<double>(), c.head_js[p.a.config.n_head], 1e-7);
    std::ifstream cos(npy + "/cosine.npy");
    EXPECT_TRUE(cos.good());
    // another shape: exit 2 and one line
    const std::string deep = p.dir_a + "/../deep";
    tiny_spec s;
    s.n_layer = 3;
    write_tiny_gpt2(deep, s);
    const command_result bad = run_cli("compare --model " + p.dir_a + " --model-b " + deep + " --prompt hi");
    EXPECT_EQ(bad.code, 2);
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_NE(bad.err.find("shapes differ"), std::string::npos) << bad.err;
}

// quantize: F32 round-trips exactly; Q8_0 loads, its weights within Q8_0's rounding of the source; a type whose
// blocks do not divide the rows is refused in one line
TEST(Compare, QuantizeRoundTripsAndRounds) {
    const std::string dir = test_temp_dir("compare_quantize");
    tiny_spec s;
    s.d_model = 64;
    write_tiny_gpt2(dir + "/src", s);
    const gb::model src = gb::load_model(dir + "/src");
    for (const char* type : {"F32", "Q8_0"}) {
        const std::string out = dir + "/" + type + ".gguf";
        const command_result r = run_cli("quantize --model " + dir + "/src --dtype " + type + " --out " + out);
        ASSERT_EQ(r.code, 0) << r.err;
        const gb::model q = gb::load_model(out);
        gb::check_comparable(src, q);
        const std::vector<int> ids = gb::encode_prompt(src.tok, "hello there, world", false);
        EXPECT_EQ(ids, gb::encode_prompt(q.tok, "hello there, world", false));
        const std::vector<float> w = gb::unpack_matrix(src.weights.layers[1].w_up),
                                 wq = gb::unpack_matrix(q.weights.layers[1].w_up);
        ASSERT_EQ(w.size(), wq.size());
        double amax = 0, err = 0;
        for (size_t i = 0; i < w.size(); i++) amax = std::max(amax, (double)std::fabs(w[i])), err = std::max(err, (double)std::fabs(w[i] - wq[i]));
        gb::compare_result c;
        gb::compare_models(c, src, q, ids);
        if (std::string(type) == "F32") {
            EXPECT_EQ(err, 0.0);
            for (double kl : c.kl) EXPECT_NEAR(kl, 0.0, 1e-9);
        } else {
            EXPECT_GT(err, 0.0);                   // it did round
            EXPECT_LE(err, amax / 127 * 0.5 * 1.01); // by at most half a step of the block's scale
            double mean = 0;
            for (double kl : c.kl) mean += kl / c.n_tokens;
            EXPECT_GT(mean, 0.0);
            EXPECT_LT(mean, 0.05);
        }
    }
    const command_result k = run_cli("quantize --model " + dir + "/src --dtype Q4_K --out " + dir + "/k.gguf");
    EXPECT_EQ(k.code, 2);
    EXPECT_EQ(std::count(k.err.begin(), k.err.end(), '\n'), 1) << k.err;
    EXPECT_NE(k.err.find("Q4_K holds rows of whole 256-value blocks"), std::string::npos) << k.err;
}

// The app: a model B that does not load, or has another shape, is one line in the window and changes nothing;
// one that does gives the "A vs B" views the library's numbers
TEST(Compare, AppOpensModelBAndShowsAVsB) {
    if (!have_app()) GTEST_SKIP() << "the app was not built";
    const pair_of_models p = two_models("compare_app");
    const std::string deep = p.dir_a + "/../deep";
    tiny_spec s;
    s.n_layer = 3;
    write_tiny_gpt2(deep, s);
    const std::string prompt = "the cat sat on the mat";
    int rc = -1;
    const std::vector<nlohmann::json> st =
        run_script("--model " + sq(p.dir_a) + " --prompt " + sq(prompt),
                   "wait\nopen-b " + p.dir_a + "/../nothing-here\nwait\nprint\nopen-b " + deep + "\nwait\nprint\n"
                   "click Model B\nframes 2\ntype " + p.dir_b + "\nkey enter\nwait\nclick view A\nwait\nprint\nclick view A vs B\nwait\nprint\ntab lens\nwait\n"
                   "print\ncompare-view b\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 6u);
    for (int i : {0, 1}) { // refused: one line, model A's result kept, no model B
        const std::string err = st[i]["error"];
        EXPECT_NE(err.find("model B"), std::string::npos) << err;
        EXPECT_EQ(err.find('\n'), std::string::npos) << err;
        EXPECT_TRUE(st[i]["model_b"].is_null());
        EXPECT_EQ(st[i]["tokens"].size(), st[0]["tokens"].size());
    }
    EXPECT_NE(std::string(st[1]["error"]).find("shapes differ"), std::string::npos) << st[1]["error"];
    EXPECT_EQ(st[2]["compare_view"], "a"); // B loaded (typed into the "B..." button's box), the radio clicked back to A
    EXPECT_FALSE(st[2]["model_b"].is_null());
    const nlohmann::json& c = st[3]["compare"];
    ASSERT_FALSE(c.is_null()) << st[3].dump();
    EXPECT_EQ(st[3]["compare_view"], "avsb");
    gb::compare_result want;
    gb::compare_models(want, p.a, p.b, gb::encode_prompt(p.a.tok, prompt, false));
    EXPECT_EQ(c["tokens"], want.n_tokens);
    EXPECT_NEAR(c["mean_kl"].get<double>(), want.mean_kl, 1e-6 * (1 + want.mean_kl));
    EXPECT_EQ(c["top_agree"], want.top_agree_count);
    EXPECT_EQ(c["first_disagree"], want.first_disagree);
    EXPECT_GT(c["js_max"].get<double>(), 0.0);
    EXPECT_EQ(st[4]["tab"], "lens");
    EXPECT_FALSE(st[4]["compare"].is_null());
    EXPECT_EQ(st[5]["compare_view"], "b");
}
