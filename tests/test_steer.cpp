// Steering (run/steer.h, analysis/steer.h, io/control_vector.h): on the tiny GPT-2 and the GQA Llama against the
// double-precision reference with the vector added at resid_post (forward, sessions, live recompute, generation,
// gradients); the contrastive vector against the mean difference of the reference's streams; the sweep against
// KL and loss computed from the reference; llama.cpp's control-vector layout byte for byte; the refusals; the CLI
// end to end; and the app's Steer tab.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/steer.h"
#include "app_script.h"
#include "io/control_vector.h"
#include "io/gguf.h"
#include "io/loader.h"
#include "run/backward.h"
#include "run/forward.h"
#include "run/live.h"
#include "run/session.h"
#include "run/steer.h"
#include "ref_models.h"
#include "test_util.h"
#include "tiny_model.h"
#include "util/npy.h"

namespace {

// A seeded vector with directions at `layers`, entries N(0, 1)-ish (a simple LCG)
gb::steer_vector random_vector(int d, const std::vector<int>& layers, uint32_t seed) {
    gb::steer_vector v;
    v.d_model = d;
    v.model_hint = "test";
    uint32_t s = seed;
    for (int l : layers) {
        std::vector<float> dir(d);
        for (float& x : dir) {
            s = s * 1664525u + 1013904223u;
            x = ((s >> 8) / 16777216.0f - 0.5f) * 3.0f;
        }
        v.set(l, dir);
    }
    return v;
}

gb::steering steer_of(const gb::steer_vector& v, float scale, std::vector<int> layers = {}, int from = 0) {
    gb::steering s;
    s.vec = std::make_shared<const gb::steer_vector>(v);
    s.scale = scale;
    s.layers = std::move(layers);
    s.from = from;
    return s;
}

// The reference with scale * v's direction added to resid_post of each steered layer, at positions >= from
ref_trace steered_reference(const ref_model& rm, const std::vector<int>& tokens, const gb::steering& s) {
    ref_options o;
    const int d = rm.m.config.d_model;
    o.edit = [&](gb::hook_point p, int l, std::vector<double>& x) {
        if (p != gb::HOOK_RESID_POST || !s.any()) return;
        for (int sl : s.applied_layers())
            if (sl == l)
                for (size_t t = s.from; t < x.size() / d; t++)
                    for (int i = 0; i < d; i++) x[t * d + i] += (double)s.scale * s.vec->dirs[l][i];
    };
    return rm.reference(tokens, {}, o);
}

gb::record steered_forward(const gb::model& m, const std::vector<int>& tokens, const gb::steering& s) {
    std::vector<std::vector<float>> vals;
    gb::forward_options o;
    o.all_logits = true;
    o.keep.points = gb::hook_bit(gb::HOOK_RESID_POST);
    o.interventions = gb::steering_interventions(s, m.config, vals);
    gb::record r;
    gb::run_forward(r, m, tokens, {}, o);
    return r;
}

std::vector<float> copy_point(const gb::record& r, gb::hook_point p, int l) {
    const float* x = r.get(p, l);
    return std::vector<float>(x, x + r.layer_floats(p));
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

} // namespace

TEST(Steer, ForwardEqualsAddingTheVectorAtResidPost) {
    for (const ref_model* rm : ref_models()) {
        const gb::model_config& c = rm->m.config;
        const std::vector<int> tokens = rm->tokens(7, 5);
        const gb::steer_vector v = random_vector(c.d_model, {0, 2}, 11);
        for (int from : {0, 3}) {
            const gb::steering s = steer_of(v, 1.75f, {}, from);
            const gb::record r = steered_forward(rm->m, tokens, s);
            const ref_trace want = steered_reference(*rm, tokens, s);
            for (int l = 0; l < c.n_layer; l++)
                EXPECT_LE(max_scaled_error(copy_point(r, gb::HOOK_RESID_POST, l), want.at(gb::HOOK_RESID_POST, l)), 1e-5)
                    << rm->name << " from " << from << " L" << l;
            EXPECT_LE(max_scaled_error(r.logits, want.logits), 1e-4) << rm->name << " from " << from;
            // and it matters: the plain reference is elsewhere, but not before `from` (causal)
            const ref_trace plain = rm->reference(tokens, {}, {});
            EXPECT_GT(max_scaled_error(r.logits, plain.logits), 1e-3) << rm->name;
            const size_t V = c.vocab_size;
            for (size_t t = 0; t < (size_t)from; t++)
                for (size_t i = 0; i < V; i++) ASSERT_NEAR(r.logits[t * V + i], plain.logits[t * V + i], 1e-3) << rm->name;
        }
    }
}

TEST(Steer, TheAblationCarriesTheSameSteering) {
    // the app applies steering as part of the ablation (ADD with a scale, values in the vector): the same numbers as
    // the CLI's interventions with scaled values, and its description names it
    const ref_model& rm = tiny_gpt2_ref();
    const std::vector<int> tokens = rm.tokens(6, 7);
    gb::steer_vector v = random_vector(rm.m.config.d_model, {1, 2}, 13);
    v.name = "happy.gguf";
    gb::ablation ab;
    ab.steer = steer_of(v, -2.5f, {2}, 1);
    EXPECT_EQ(ab.describe(), "steer -2.5 x happy.gguf at L2 from position 1");
    gb::forward_options o;
    o.all_logits = true;
    gb::record r;
    gb::run_forward(r, rm.m, tokens, ab, o);
    EXPECT_LE(max_scaled_error(r.logits, steered_reference(rm, tokens, ab.steer).logits), 1e-4);
    const std::vector<float> cli = steered_forward(rm.m, tokens, ab.steer).logits; // (scale applied before the add there)
    EXPECT_LE(max_scaled_error(r.logits, std::vector<double>(cli.begin(), cli.end())), 1e-6);
}

TEST(Steer, SessionsAndLiveRecomputeApplyIt) {
    const ref_model& rm = tiny_llama_ref();
    const std::vector<int> tokens = rm.tokens(6, 2);
    const gb::steer_vector v = random_vector(rm.m.config.d_model, {1, 2}, 3);
    gb::session ses;
    gb::session_request rq;
    rq.tokens = tokens;
    rq.baseline = true;
    rq.all_logits = true;
    rq.keep.resid_stream = true; // where a changed steering resumes (the app keeps it too)
    rq.steer = steer_of(v, 2.0f, {1});
    gb::session_result a;
    gb::session_run(a, ses, rm.m, rq);
    EXPECT_LE(max_scaled_error(a.run->logits, steered_reference(rm, tokens, rq.steer).logits), 1e-4);
    EXPECT_LE(max_scaled_error(a.base->logits, rm.reference(tokens, {}, {}).logits), 1e-4); // the baseline: unsteered
    // another scale: recomputed from layer 1's MLP on, reusing the layers below, and equal to a fresh run
    rq.steer.scale = -3.0f;
    gb::session_result b;
    gb::session_run(b, ses, rm.m, rq);
    EXPECT_TRUE(b.report.reused) << b.report.what;
    EXPECT_EQ(b.report.from_point, 3) << b.report.what;
    EXPECT_LE(max_scaled_error(b.run->logits, steered_reference(rm, tokens, rq.steer).logits), 1e-4);
    // a token appended: the steering reaches the new position too
    rq.tokens.push_back(tokens[1]);
    gb::session_result c2;
    gb::session_run(c2, ses, rm.m, rq);
    EXPECT_LE(max_scaled_error(c2.run->logits, steered_reference(rm, rq.tokens, rq.steer).logits), 1e-4);
}

TEST(Steer, GenerationIsGreedyUnderTheSteeredForward) {
    for (const ref_model* rm : ref_models()) {
        const std::vector<int> prompt = rm->tokens(4, 8);
        const gb::steering s = steer_of(random_vector(rm->m.config.d_model, {1}, 5), 2.5f, {}, 2);
        std::vector<std::vector<float>> vals;
        const std::vector<gb::intervention> iv = gb::steering_interventions(s, rm->m.config, vals);
        const gb::generation g = gb::generate(rm->m, prompt, 6, gb::sampling{}, {}, {}, iv);
        ASSERT_EQ(g.ids.size(), 6u);
        // each generated token is the argmax of the steered reference on the prompt and the tokens before it
        std::vector<int> all = prompt;
        all.insert(all.end(), g.ids.begin(), g.ids.end());
        const ref_trace want = steered_reference(*rm, all, s);
        const int V = rm->m.config.vocab_size;
        for (size_t i = 0; i < g.ids.size(); i++) {
            const double* row = &want.logits[(prompt.size() - 1 + i) * V];
            EXPECT_EQ(g.ids[i], (int)(std::max_element(row, row + V) - row)) << rm->name << " token " << i;
        }
    }
}

TEST(Steer, GradientsPassTheAddedVectorUnchanged) {
    // d logit / d the embeddings along a direction u, through a steered run, against central differences of the
    // steered double reference
    const ref_model& rm = tiny_gpt2_ref();
    const gb::model_config& c = rm.m.config;
    const std::vector<int> tokens = rm.tokens(5, 4);
    const gb::steering s = steer_of(random_vector(c.d_model, {0, 1}, 9), 1.5f);
    std::vector<std::vector<float>> vals;
    gb::forward_options o;
    o.interventions = gb::steering_interventions(s, c, vals);
    gb::metric_spec ms;
    ms.kind = gb::metric_spec::LOGIT;
    ms.target = tokens[2];
    gb::gradients g;
    gb::run_gradients(g, rm.m, tokens, ms, {}, o);
    const ref_trace base = steered_reference(rm, tokens, s);
    EXPECT_NEAR(g.metric_value, base.logits[(size_t)4 * c.vocab_size + ms.target], 1e-3);
    const int t = 1, d = c.d_model;
    const gb::steer_vector u = random_vector(d, {0}, 77);
    double analytic = 0;
    for (int i = 0; i < d; i++) analytic += (double)g.resid_at(0)[(size_t)t * d + i] * u.dirs[0][i];
    const double eps = 1e-4;
    auto metric_at = [&](double sign) {
        ref_options ro;
        ro.edit = [&](gb::hook_point p, int l, std::vector<double>& x) {
            if (p == gb::HOOK_RESID_PRE && l == 0)
                for (int i = 0; i < d; i++) x[(size_t)t * d + i] += sign * eps * u.dirs[0][i];
            if (p == gb::HOOK_RESID_POST && (l == 0 || l == 1))
                for (size_t r = 0; r < x.size() / d; r++)
                    for (int i = 0; i < d; i++) x[r * d + i] += 1.5 * s.vec->dirs[l][i];
        };
        return rm.reference(tokens, {}, ro).logits[(size_t)4 * c.vocab_size + ms.target];
    };
    const double numeric = (metric_at(1) - metric_at(-1)) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 1e-3 * std::max(1.0, std::fabs(numeric)));
}

TEST(Steer, ContrastiveVectorIsTheMeanDifference) {
    for (const ref_model* rm : ref_models()) {
        const int d = rm->m.config.d_model;
        const std::vector<std::vector<int>> pos = {rm->tokens(5, 1), rm->tokens(3, 2)}, neg = {rm->tokens(4, 3),
                                                                                          rm->tokens(6, 4), rm->tokens(2, 5)};
        for (gb::steer_position where : {gb::STEER_LAST, gb::STEER_MEAN}) {
            const gb::steer_vector v = gb::contrastive_vector(rm->m, pos, neg, {0, 2}, where);
            EXPECT_EQ(v.layers(), (std::vector<int>{0, 2}));
            for (int l : {0, 2}) {
                std::vector<double> want(d, 0.0);
                auto add = [&](const std::vector<std::vector<int>>& side, double sign) {
                    for (const std::vector<int>& p : side) {
                        const ref_trace tr = rm->reference(p, {}, {});
                        const int T = (int)p.size(), t0 = where == gb::STEER_LAST ? T - 1 : 0;
                        for (int t = t0; t < T; t++)
                            for (int i = 0; i < d; i++)
                                want[i] += sign * tr.resid_at(2 * l + 2, t)[i] / (T - t0) / side.size();
                    }
                };
                add(pos, 1), add(neg, -1);
                EXPECT_LE(max_scaled_error(v.dirs[l], want), 1e-5) << rm->name << " L" << l << " " << (int)where;
            }
        }
    }
}

TEST(Steer, SweepMatchesKlAndLossOfTheReference) {
    const ref_model& rm = tiny_gpt2_ref();
    const gb::model_config& c = rm.m.config;
    const std::vector<int> ref = rm.tokens(8, 6);
    const gb::steer_vector v = random_vector(c.d_model, {0, 1, 2}, 21);
    gb::steer_sweep_result r;
    const std::vector<float> scales = {0.5f, 3.0f};
    gb::steer_sweep(r, rm.m, v, scales, {0, 2}, ref, 1);
    const int V = c.vocab_size, T = (int)ref.size();
    auto log_softmax = [&](const std::vector<double>& lg, int t) {
        std::vector<double> out(lg.begin() + (size_t)t * V, lg.begin() + (size_t)(t + 1) * V);
        const double mx = *std::max_element(out.begin(), out.end());
        double sum = 0;
        for (double x : out) sum += std::exp(x - mx);
        for (double& x : out) x -= mx + std::log(sum);
        return out;
    };
    const ref_trace base = rm.reference(ref, {}, {});
    double base_loss = 0;
    for (int t = 0; t + 1 < T; t++) base_loss -= log_softmax(base.logits, t)[ref[t + 1]];
    EXPECT_NEAR(r.base_loss, base_loss / (T - 1), 1e-4);
    for (size_t si = 0; si < scales.size(); si++)
        for (int li = 0; li < 2; li++) {
            const int l = li == 0 ? 0 : 2;
            const ref_trace st = steered_reference(rm, ref, steer_of(v, scales[si], {l}, 1));
            double kl = 0, loss = 0;
            for (int t = 0; t < T; t++) {
                const std::vector<double> p = log_softmax(base.logits, t), q = log_softmax(st.logits, t);
                for (int k = 0; k < V; k++) kl += std::exp(p[k]) * (p[k] - q[k]);
                if (t + 1 < T) loss -= q[ref[t + 1]];
            }
            EXPECT_NEAR(r.kl[r.at((int)si, li)], kl / T, 1e-4 + 1e-4 * kl / T) << "scale " << scales[si] << " L" << l;
            EXPECT_NEAR(r.loss[r.at((int)si, li)], loss / (T - 1), 1e-4) << "scale " << scales[si] << " L" << l;
        }
    EXPECT_GT(r.kl[r.at(1, 0)], r.kl[r.at(0, 0)]); // more steering, further from the baseline
}

TEST(Steer, CompareMarksWhereTheContinuationsPart) {
    const ref_model& rm = tiny_llama_ref();
    const std::vector<int> prompt = rm.tokens(4, 12);
    const gb::steering s = steer_of(random_vector(rm.m.config.d_model, {1}, 4), 1.0f);
    gb::steer_compare cmp;
    gb::compare_steering(cmp, rm.m, prompt, s, {0.0f, 8.0f}, 6, gb::sampling{});
    ASSERT_EQ(cmp.runs.size(), 2u);
    EXPECT_EQ(cmp.runs[0].ids, cmp.baseline.ids); // scale 0 is the baseline
    EXPECT_EQ(cmp.runs[0].parts_at, -1);
    EXPECT_EQ(cmp.baseline.p_base, cmp.baseline.p_steered);
    const gb::steered_continuation& r = cmp.runs[1];
    for (int i = 0; i < (int)r.ids.size(); i++)
        if (r.parts_at < 0 || i < r.parts_at) { EXPECT_EQ(r.ids[i], cmp.baseline.ids[i]) << i; }
    if (r.parts_at >= 0) { EXPECT_NE(r.ids[r.parts_at], cmp.baseline.ids[r.parts_at]); }
    // each token's two probabilities, against the references
    std::vector<int> all = prompt;
    all.insert(all.end(), r.ids.begin(), r.ids.end());
    gb::steering s8 = s;
    s8.scale = 8.0f;
    const ref_trace st = steered_reference(rm, all, s8), plain = rm.reference(all, {}, {});
    const int V = rm.m.config.vocab_size;
    auto prob = [&](const ref_trace& tr, size_t t, int id) {
        const double* row = &tr.logits[t * V];
        const double mx = *std::max_element(row, row + V);
        double sum = 0;
        for (int k = 0; k < V; k++) sum += std::exp(row[k] - mx);
        return std::exp(row[id] - mx) / sum;
    };
    for (size_t i = 0; i < r.ids.size(); i++) {
        EXPECT_NEAR(r.p_steered[i], prob(st, prompt.size() - 1 + i, r.ids[i]), 1e-4) << i;
        EXPECT_NEAR(r.p_base[i], prob(plain, prompt.size() - 1 + i, r.ids[i]), 1e-4) << i;
    }
}

TEST(Steer, ControlVectorGgufHasLlamaCppLayoutAndRoundTrips) {
    const std::string dir = test_temp_dir("steer_files");
    const gb::steer_vector v = random_vector(12, {1, 3}, 7);
    gb::write_control_vector_gguf(dir + "/v.gguf", v);
    // the layout llama.cpp's loader reads: architecture, direction.N tensors of [n_embd] F32, nothing else needed
    const gb::gguf_file g = gb::open_gguf(dir + "/v.gguf");
    EXPECT_EQ(g.version, 3u);
    ASSERT_TRUE(g.meta.count("general.architecture"));
    EXPECT_EQ(g.meta.at("general.architecture").s, "controlvector");
    EXPECT_EQ(g.meta.at("controlvector.layer_count").i, 2);
    EXPECT_EQ(g.meta.at("controlvector.model_hint").s, "test");
    ASSERT_EQ(g.tensors.size(), 2u);
    for (int l : {1, 3}) {
        const std::string name = "direction." + std::to_string(l);
        ASSERT_TRUE(g.tensors.count(name)) << name;
        const gb::gguf_tensor& t = g.tensors.at(name);
        EXPECT_EQ(t.type, (uint32_t)gb::GGML_F32);
        EXPECT_EQ(t.ne, (std::vector<int64_t>{12}));
        ASSERT_EQ(t.nbytes, 48u);
        EXPECT_EQ(std::memcmp(t.data, v.dirs[l].data(), 48), 0) << name;
    }
    const gb::steer_vector back = gb::read_steer_vector(dir + "/v.gguf");
    EXPECT_EQ(back.d_model, 12);
    EXPECT_EQ(back.layers(), (std::vector<int>{1, 3}));
    EXPECT_EQ(back.dirs[1], v.dirs[1]);
    EXPECT_EQ(back.dirs[3], v.dirs[3]);
    EXPECT_EQ(back.model_hint, "test");
    // .npy: [L][d] with a zero row where there is no direction, read back the same; [d] with a layer
    gb::write_steer_npy(dir + "/v.npy", v);
    const gb::steer_vector nb = gb::read_steer_vector(dir + "/v.npy");
    EXPECT_EQ(nb.layers(), (std::vector<int>{1, 3}));
    EXPECT_EQ(nb.dirs[3], v.dirs[3]);
    EXPECT_NE(read_file(dir + "/v.npy").find("'shape': (4, 12)"), std::string::npos);
    gb::write_npy(dir + "/one.npy", {12}, v.dirs[1].data());
    const gb::steer_vector one = gb::read_steer_vector(dir + "/one.npy", 2);
    EXPECT_EQ(one.layers(), (std::vector<int>{2}));
    EXPECT_EQ(one.dirs[2], v.dirs[1]);
    // a layer-0 direction is fine in .npy
    gb::steer_vector z = random_vector(12, {0, 1}, 2);
    gb::write_steer_npy(dir + "/z.npy", z);
    EXPECT_EQ(gb::read_steer_vector(dir + "/z.npy").layers(), (std::vector<int>{0, 1}));
}

TEST(Steer, RefusalsAreOneLine) {
    const std::string dir = test_temp_dir("steer_refusals");
    const ref_model& rm = tiny_gpt2_ref();
    const gb::model_config& c = rm.m.config;
    // llama.cpp has no direction.0
    expect_gb_error([&] { gb::write_control_vector_gguf(dir + "/z.gguf", random_vector(8, {0, 1}, 1)); }, "no direction.0");
    // another width, a layer outside the model or without a direction, a bad from, a non-finite scale
    expect_gb_error([&] { gb::check_steering(steer_of(random_vector(c.d_model + 1, {1}, 1), 1), c); },
                    "is " + std::to_string(c.d_model + 1) + " wide, the model's stream is " + std::to_string(c.d_model));
    const gb::steer_vector v = random_vector(c.d_model, {1}, 1);
    expect_gb_error([&] { gb::check_steering(steer_of(v, 1, {7}), c); }, "steering at layer 7: the model has layers 0..2");
    expect_gb_error([&] { gb::check_steering(steer_of(v, 1, {2}), c); }, "no direction there (it has 1)");
    expect_gb_error([&] { gb::check_steering(steer_of(v, 1, {}, c.n_ctx), c); }, "outside the context");
    expect_gb_error([&] { gb::check_steering(steer_of(v, std::numeric_limits<float>::infinity()), c); }, "finite");
    // files: missing, another extension, non-finite values, all zeros, a [d] without its layer
    expect_gb_error([&] { gb::read_steer_vector(dir + "/missing.gguf"); }, "missing.gguf");
    expect_gb_error([&] { gb::read_steer_vector(dir + "/v.txt"); }, "a .gguf (llama.cpp's control vector) or a .npy");
    std::vector<float> bad(8, 1.0f);
    bad[3] = std::numeric_limits<float>::quiet_NaN();
    gb::write_npy(dir + "/nan.npy", {1, 8}, bad.data());
    expect_gb_error([&] { gb::read_steer_vector(dir + "/nan.npy"); }, "non-finite value");
    std::vector<float> zeros(8, 0.0f);
    gb::write_npy(dir + "/zero.npy", {1, 8}, zeros.data());
    expect_gb_error([&] { gb::read_steer_vector(dir + "/zero.npy"); }, "every direction is zero");
    gb::write_npy(dir + "/one.npy", {8}, bad.data());
    expect_gb_error([&] { gb::read_steer_vector(dir + "/one.npy"); }, "without a layer");
    // a GGUF of another architecture, and a direction.0 written by someone else
    gb::write_control_vector_gguf(dir + "/v.gguf", random_vector(8, {1}, 3));
    std::string bytes = read_file(dir + "/v.gguf");
    std::string other = bytes;
    other.replace(other.find("controlvector"), 13, "llamavector00");
    spit(dir + "/other.gguf", other);
    expect_gb_error([&] { gb::read_steer_vector(dir + "/other.gguf"); }, "not a control vector");
    std::string zero = bytes;
    zero.replace(zero.find("direction.1"), 11, "direction.0");
    spit(dir + "/zero.gguf", zero);
    expect_gb_error([&] { gb::read_steer_vector(dir + "/zero.gguf"); }, "direction.0");
    // prompts: none on a side, an empty one
    expect_gb_error([&] { gb::contrastive_vector(rm.m, {}, {{1, 2}}, {1}, gb::STEER_LAST); }, "no positive prompts");
    expect_gb_error([&] { gb::contrastive_vector(rm.m, {{1}}, {{}}, {1}, gb::STEER_LAST); }, "negative prompt 1 is empty");
    // the sweep: a reference of one token
    expect_gb_error([&] { gb::steer_sweep_result r; gb::steer_sweep(r, rm.m, v, {1}, {1}, {3}, 0); }, "at least 2 tokens");
}

TEST(Steer, CliEndToEnd) {
    const std::string dir = test_temp_dir("steer_cli");
    spit(dir + "/pos.txt", "I love this. It is wonderful.\nWhat a happy day.\n\n");
    spit(dir + "/neg.txt", "I hate this. It is terrible.\nWhat a sad day.\n");
    spit(dir + "/ref.txt", "The cat sat on the mat. The dog ran in the park and the children played.\n");
    spit(dir + "/empty.txt", "\n\n");
    command_result r = run_cli("steer --positive " + dir + "/pos.txt --negative " + dir + "/neg.txt --layer 1,2 --out " + dir +
                           "/v.gguf --json " + dir + "/steer.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("2 positive and 2 negative prompts"), std::string::npos) << r.out;
    const gb::steer_vector v = gb::read_steer_vector(dir + "/v.gguf");
    EXPECT_EQ(v.layers(), (std::vector<int>{1, 2}));
    r = run_cli("steer --positive " + dir + "/pos.txt --negative " + dir + "/neg.txt --layer all --position mean --out " + dir + "/v.npy");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(gb::read_steer_vector(dir + "/v.npy").layers().front(), 0);
    // run and generate take it, and their JSON echoes it
    r = run_cli("run --prompt 'Today I feel' --steer " + dir + "/v.gguf --steer-scale 6 --steer-layers 2 --json " + dir + "/run.json");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("steering: steer 6 x v.gguf at L2"), std::string::npos) << r.out;
    nlohmann::json j = nlohmann::json::parse(read_file(dir + "/run.json"));
    EXPECT_EQ(j["steering"]["scale"], 6.0);
    EXPECT_EQ(j["steering"]["layers"], nlohmann::json::array({2}));
    const command_result plain = run_cli("run --prompt 'Today I feel' --json " + dir + "/plain.json");
    ASSERT_EQ(plain.code, 0);
    EXPECT_NE(nlohmann::json::parse(read_file(dir + "/plain.json"))["top_k"], j["top_k"]); // steering moved the prediction
    r = run_cli("generate --prompt 'Today I feel' --max-new-tokens 6 --steer " + dir + "/v.gguf --steer-scale 8 --steer-from 1 --json " +
            dir + "/gen.json");
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(read_file(dir + "/gen.json"));
    EXPECT_EQ(j["steering"]["from"], 1);
    EXPECT_EQ(j["steering"]["layers"], nlohmann::json::array({1, 2}));
    // the sweep
    r = run_cli("steer-sweep --prompt 'Today I feel' --steer " + dir + "/v.gguf --scales 1,4 --layers 1,2 --reference " + dir +
            "/ref.txt --json " + dir + "/sweep.json");
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(read_file(dir + "/sweep.json"));
    EXPECT_EQ(j["kl"].size(), 4u);
    EXPECT_EQ(j["cells"].size(), 4u);
    EXPECT_EQ(j["steering"]["scales"], nlohmann::json::array({1.0, 4.0}));
    EXPECT_GT(j["kl"][2].get<double>(), j["kl"][0].get<double>()); // scale 4 at L1 moves more than scale 1
    EXPECT_TRUE(j["cells"][0]["text"].is_string());
    // one-line refusals, exit 2
    auto refused = [&](const std::string& args, const std::string& needle) {
        const command_result e = run_cli(args);
        EXPECT_EQ(e.code, 2) << args;
        EXPECT_NE(e.err.find(needle), std::string::npos) << args << "\n" << e.err;
        EXPECT_EQ(e.err.find('\n'), e.err.size() - 1) << "one line: " << e.err;
    };
    refused("steer --positive " + dir + "/pos.txt --negative " + dir + "/neg.txt --layer 0 --out " + dir + "/z.gguf", "no direction.0");
    refused("steer --positive " + dir + "/none.txt --negative " + dir + "/neg.txt --layer 1 --out " + dir + "/x.gguf", "cannot open");
    refused("steer --positive " + dir + "/empty.txt --negative " + dir + "/neg.txt --layer 1 --out " + dir + "/x.gguf", "is empty");
    refused("steer --positive " + dir + "/pos.txt --negative " + dir + "/neg.txt --layer 1 --out " + dir + "/x.txt", ".gguf");
    gb::write_control_vector_gguf(dir + "/narrow.gguf", random_vector(8, {1}, 1));
    refused("run --prompt hi --steer " + dir + "/narrow.gguf", "is 8 wide, the model's stream is 256");
    refused("run --prompt hi --steer-scale 3", "--steer-scale needs --steer FILE");
    refused("run --prompt hi --steer " + dir + "/v.gguf --steer-layers 3", "no direction there");
    refused("steer-sweep --prompt hi --steer " + dir + "/v.gguf --scales 1 --reference " + dir + "/empty.txt", "is empty");
}

TEST(Steer, AppSteerTabBuildsAppliesAndSweeps) {
    if (!have_app()) GTEST_SKIP() << "no app built";
    const std::string dir = test_temp_dir("steer_app");
    int rc = 0;
    const std::vector<nlohmann::json> st = run_script("--prompt 'Today I feel'",
                                                      "tab steer\nwait\nprint\nclick steer build\nwait\nprint\n"
                                                      "click steer apply\nwait\nprint\nsave-session " + dir + "/s.json\nwait\n",
                                                      &rc, "", "1280x720");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    EXPECT_EQ(st[0]["tab"], "steer");
    EXPECT_TRUE(st[0]["steer"]["vector"].is_null());
    // built: a direction at every layer, the side-by-side continuations and the sweep of it
    const nlohmann::json& b = st[1]["steer"];
    ASSERT_FALSE(b["vector"].is_null());
    // every layer of the app's model (the embedded default model), read from the model itself
    const int n_layer = gb::load_model(st[0]["model"].get<std::string>()).config.n_layer;
    ASSERT_GE(n_layer, 2);
    std::vector<int> all_layers(n_layer);
    for (int l = 0; l < n_layer; l++) all_layers[l] = l;
    EXPECT_EQ(b["vector"]["layers"], nlohmann::json(all_layers));
    ASSERT_TRUE(b.contains("compare"));
    EXPECT_TRUE(b["compare"]["current"].get<bool>());
    ASSERT_EQ(b["compare"]["runs"].size(), 3u);
    const nlohmann::json& big = b["compare"]["runs"][2]; // alpha 8: the text moves
    EXPECT_NE(big["text"], b["compare"]["baseline"]);
    EXPECT_GE(big["parts_at"].get<int>(), 0);
    ASSERT_TRUE(b.contains("sweep"));
    EXPECT_EQ(b["sweep"]["kl"].size(), 5u * n_layer); // 5 scales x every layer
    EXPECT_EQ(st[1]["ablation"], "none"); // not applied yet
    // applied: the live run is steered (its prediction moves), listed with the ablations
    EXPECT_NE(st[2]["ablation"].get<std::string>().find("steer 4 x contrast#1 at L1"), std::string::npos) << st[2]["ablation"];
    EXPECT_NE(st[2]["top1"], st[1]["top1"]);
    // a session keeps it: loaded again, the run is steered the same way
    const std::vector<nlohmann::json> again = run_script("--session " + dir + "/s.json", "wait\nprint\n", &rc, "", "1280x720");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0]["ablation"], st[2]["ablation"]);
    EXPECT_EQ(again[0]["top1"], st[2]["top1"]);
}

// The Steer tab's Save and Open write and read the file on an analysis thread (the steer_save and steer_open rows):
// once `wait` returns the file is written, and opened again it is the tab's vector; saved as a .gguf, the built
// vector loses layer 0 (llama.cpp's format has none).
TEST(Steer, AppSavesAndOpensTheVectorOffTheUiThread) {
    if (!have_app()) GTEST_SKIP() << "no app built";
    const std::string path = test_temp_dir("steer_app_files") + "/v.gguf";
    std::string erase; // the path box's default text, erased
    for (int i = 0; i < 40; i++) erase += "key backspace\n";
    int rc = 0;
    const std::vector<nlohmann::json> st = run_script("--prompt 'Today I feel'",
                                                      "tab steer\nwait\nclick steer build\nwait\nprint\n"
                                                      "click steer path\nkey end\n" + erase + "type " + path + "\n"
                                                      "click steer save\nwait\nprint\nclick steer open\nwait\nprint\n",
                                                      &rc, "", "1280x720");
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 3u);
    ASSERT_FALSE(st[0]["steer"]["vector"].is_null());
    EXPECT_EQ(st[1]["analysis"]["steer_save"]["error"], "");
    EXPECT_TRUE(std::ifstream(path).good()) << path;
    const nlohmann::json& opened = st[2]["steer"]["vector"];
    ASSERT_FALSE(opened.is_null());
    EXPECT_EQ(opened["name"], "v.gguf");
    std::vector<int> layers = st[0]["steer"]["vector"]["layers"].get<std::vector<int>>();
    layers.erase(layers.begin()); // layer 0 left out
    EXPECT_EQ(opened["layers"], nlohmann::json(layers));
    EXPECT_EQ(opened["d_model"], st[0]["steer"]["vector"]["d_model"]);
}
