// Mixture of experts: moe_forward against a naive double-precision loop (with and without a shared expert,
// norm_topk on and off, a hook changing the weights), routing ties, the router hook point in the forward and the
// record, expert ablations (parse, check, meaning, live recompute), the export, and the CLI and app on MoE files.
//
// Sections: the naive reference | an in-memory MoE model | moe_forward | the forward | ablations | export |
//           CLI and app on files
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "analysis/export.h"
#include "app_script.h"
#include "io/loader.h"
#include "kernels/gemm.h"
#include "kernels/moe.h"
#include "model/kind.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "run/live.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_llama.h"
#include "tiny_model.h"
#include "util/error.h"

namespace {

// ---------------------------------------------------------------------------------------------
// The naive reference: double loops over the row-major [in][out] weights the test drew
// ---------------------------------------------------------------------------------------------
struct moe_weights { // one layer's MoE weights as drawn, row-major [in][out]
    int d = 0, E = 0, k = 0, ff = 0, ff_s = 0;
    bool norm_topk = true;
    std::vector<float> router;                       // [d][E]
    std::vector<std::vector<float>> gate, up, down;  // [E] [d][ff], [d][ff], [ff][d]
    std::vector<float> s_gate, s_up, s_down;         // shared expert (ff_s > 0)
    std::vector<float> s_router;                     // [d] its sigmoid gate (may be empty: factor 1)
};

std::vector<float> draw(std::mt19937& rng, size_t n, float sd) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

moe_weights draw_moe(int d, int E, int k, int ff, int ff_s, bool norm_topk, bool shared_gate, uint32_t seed) {
    std::mt19937 rng(seed);
    moe_weights w;
    w.d = d, w.E = E, w.k = k, w.ff = ff, w.ff_s = ff_s, w.norm_topk = norm_topk;
    w.router = draw(rng, (size_t)d * E, 0.6f);
    for (int e = 0; e < E; e++) {
        w.gate.push_back(draw(rng, (size_t)d * ff, 0.3f));
        w.up.push_back(draw(rng, (size_t)d * ff, 0.3f));
        w.down.push_back(draw(rng, (size_t)ff * d, 0.3f));
    }
    if (ff_s > 0) {
        w.s_gate = draw(rng, (size_t)d * ff_s, 0.3f);
        w.s_up = draw(rng, (size_t)d * ff_s, 0.3f);
        w.s_down = draw(rng, (size_t)ff_s * d, 0.3f);
        if (shared_gate) w.s_router = draw(rng, d, 0.5f);
    }
    return w;
}

// Fills lw's MoE fields (and c's) from w, packed for the current matmul kernel.
void install(gb::layer_weights& lw, gb::model_config& c, const moe_weights& w) {
    c.n_expert = w.E, c.n_expert_used = w.k, c.d_ff_expert = w.ff, c.d_ff_shared = w.ff_s, c.norm_topk = w.norm_topk;
    lw.router = gb::pack_matrix(w.router, w.d, w.E);
    lw.exp_gate.clear(), lw.exp_up.clear(), lw.exp_down.clear();
    for (int e = 0; e < w.E; e++) {
        lw.exp_gate.push_back(gb::pack_matrix(w.gate[e], w.d, w.ff));
        lw.exp_up.push_back(gb::pack_matrix(w.up[e], w.d, w.ff));
        lw.exp_down.push_back(gb::pack_matrix(w.down[e], w.ff, w.d));
    }
    lw.w_gate = lw.w_up = lw.w_down = gb::weight_matrix();
    lw.b_up.clear(), lw.b_down.clear();
    lw.shared_gate.clear();
    if (w.ff_s > 0) {
        lw.w_gate = gb::pack_matrix(w.s_gate, w.d, w.ff_s);
        lw.w_up = gb::pack_matrix(w.s_up, w.d, w.ff_s);
        lw.w_down = gb::pack_matrix(w.s_down, w.ff_s, w.d);
        lw.shared_gate = w.s_router;
    }
}

// The mixing weights [n][E] as docs/models.md defines them: softmax over all E router logits, the top k kept (equal
// logits: the lower index), renormalised to sum 1 with norm_topk, the others 0.
std::vector<double> ref_route(const std::vector<double>& x, int n, const moe_weights& w) {
    std::vector<double> out((size_t)n * w.E, 0.0);
    for (int r = 0; r < n; r++) {
        std::vector<double> lg(w.E, 0.0);
        for (int e = 0; e < w.E; e++)
            for (int i = 0; i < w.d; i++) lg[e] += x[(size_t)r * w.d + i] * w.router[(size_t)i * w.E + e];
        double mx = lg[0], sum = 0;
        for (double v : lg) mx = std::max(mx, v);
        for (double v : lg) sum += std::exp(v - mx);
        std::vector<int> order(w.E);
        for (int e = 0; e < w.E; e++) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lg[a] > lg[b]; });
        double kept = 0;
        for (int j = 0; j < w.k; j++) kept += std::exp(lg[order[j]] - mx) / sum;
        for (int j = 0; j < w.k; j++)
            out[(size_t)r * w.E + order[j]] = std::exp(lg[order[j]] - mx) / sum / (w.norm_topk ? kept : 1.0);
    }
    return out;
}

// down(silu(x gate) * (x up)) of one row in double
std::vector<double> ref_swiglu(const double* x, int d, int ff, const std::vector<float>& g, const std::vector<float>& u,
                               const std::vector<float>& dn) {
    std::vector<double> h(ff), y(d, 0.0);
    for (int j = 0; j < ff; j++) {
        double a = 0, b = 0;
        for (int i = 0; i < d; i++) a += x[i] * g[(size_t)i * ff + j], b += x[i] * u[(size_t)i * ff + j];
        h[j] = a / (1 + std::exp(-a)) * b;
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < ff; j++) y[i] += h[j] * dn[(size_t)j * d + i];
    return y;
}

// The MoE MLP of x [n][d] with the mixing weights wts [n][E] (every expert with a non-zero weight runs).
std::vector<double> ref_moe(const std::vector<double>& x, int n, const moe_weights& w, const std::vector<double>& wts) {
    std::vector<double> out((size_t)n * w.d, 0.0);
    for (int r = 0; r < n; r++) {
        const double* xr = &x[(size_t)r * w.d];
        for (int e = 0; e < w.E; e++) {
            const double a = wts[(size_t)r * w.E + e];
            if (a == 0) continue;
            std::vector<double> y = ref_swiglu(xr, w.d, w.ff, w.gate[e], w.up[e], w.down[e]);
            for (int i = 0; i < w.d; i++) out[(size_t)r * w.d + i] += a * y[i];
        }
        if (w.ff_s > 0) {
            double g = 1;
            if (!w.s_router.empty()) {
                double dot = 0;
                for (int i = 0; i < w.d; i++) dot += xr[i] * w.s_router[i];
                g = 1 / (1 + std::exp(-dot));
            }
            std::vector<double> y = ref_swiglu(xr, w.d, w.ff_s, w.s_gate, w.s_up, w.s_down);
            for (int i = 0; i < w.d; i++) out[(size_t)r * w.d + i] += g * y[i];
        }
    }
    return out;
}

std::vector<double> to_double(const float* p, size_t n) { return std::vector<double>(p, p + n); }

// ---------------------------------------------------------------------------------------------
// An in-memory MoE model: a tiny Llama (from a llama2.c file) whose MLPs become MoE layers
// ---------------------------------------------------------------------------------------------
struct moe_model {
    gb::model m;
    std::vector<moe_weights> layers; // [L] as drawn
};

// 3 layers, d 32, 4 heads (2 KV); E experts of width 16, top k; shared: Qwen2-MoE's shared expert with its gate.
moe_model make_moe_model(int E, int k, bool norm_topk, bool shared, uint32_t seed) {
    static std::map<std::string, gb::model> base; // one load per matmul kernel
    const std::string kernel = gb::matmul_name(gb::matmul_kind_now());
    if (!base.count(kernel)) {
        tiny_llama_spec s;
        s.n_layer = 3;
        s.seed = 31;
        tiny_llama tl = write_tiny_llama2c(test_temp_dir("moe_base_" + kernel), s);
        gb::load_options lo;
        lo.tokenizer_path = tl.tokenizer_path;
        base[kernel] = gb::load_model(tl.model_path, lo);
    }
    moe_model mm;
    mm.m = base[kernel];
    gb::model_config& c = mm.m.config;
    c.arch = shared ? gb::ARCH_QWEN2_MOE : gb::ARCH_MIXTRAL; // llama-like attention either way
    for (int l = 0; l < c.n_layer; l++) {
        mm.layers.push_back(draw_moe(c.d_model, E, k, 16, shared ? 24 : 0, norm_topk, shared, seed + 17 * l));
        install(mm.m.weights.layers[l], c, mm.layers.back());
    }
    return mm;
}

std::vector<int> some_tokens(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int> t(n);
    for (int& x : t) x = 3 + (int)(rng() % 250);
    return t;
}

// ---------------------------------------------------------------------------------------------
// moe_forward
// ---------------------------------------------------------------------------------------------
struct moe_case {
    const char* name;
    int E, k;
    bool norm_topk;
    int ff_s;
    bool shared_gate;
};
const moe_case moe_cases[] = {
    {"mixtral-like: 8 experts, top 2, renormalised", 8, 2, true, 0, false},
    {"olmoe-like: 6 experts, top 3, not renormalised", 6, 3, false, 0, false},
    {"qwen2-moe-like: shared expert with its gate", 5, 2, false, 24, true},
    {"shared expert without a gate, top 1", 4, 1, true, 12, false},
    {"every expert chosen (k = E)", 3, 3, true, 0, false},
};

TEST(MoeForward, MatchesNaiveDoubleLoop) {
    for_each_matmul([] {
        for (const moe_case& mc : moe_cases) {
            const int d = 32, n = 9;
            moe_weights w = draw_moe(d, mc.E, mc.k, 16, mc.ff_s, mc.norm_topk, mc.shared_gate, 5);
            gb::layer_weights lw;
            gb::model_config c;
            c.d_model = d;
            install(lw, c, w);
            std::mt19937 rng(7);
            std::vector<float> x = draw(rng, (size_t)n * d, 1.0f);
            std::vector<float> out((size_t)n * d), seen;
            gb::moe_scratch s;
            gb::gemm_scratch g;
            gb::moe_forward(out.data(), x.data(), n, lw, c, s, g,
                            [&](float* wts) { seen.assign(wts, wts + (size_t)n * mc.E); });
            const std::vector<double> xd = to_double(x.data(), x.size());
            const std::vector<double> want_w = ref_route(xd, n, w);
            EXPECT_LT(max_scaled_error(seen, want_w), 1e-5) << mc.name << ": mixing weights";
            for (int r = 0; r < n; r++) { // exactly k experts per token, summing to 1 when renormalised
                int chosen = 0;
                double sum = 0;
                for (int e = 0; e < mc.E; e++) chosen += seen[(size_t)r * mc.E + e] != 0, sum += seen[(size_t)r * mc.E + e];
                EXPECT_EQ(chosen, mc.k) << mc.name << " row " << r;
                if (mc.norm_topk) {
                    EXPECT_NEAR(sum, 1.0, 1e-6) << mc.name << " row " << r;
                } else {
                    EXPECT_LT(sum, 1.0 + 1e-6) << mc.name << " row " << r;
                }
            }
            EXPECT_LT(max_scaled_error(out, ref_moe(xd, n, w, want_w)), 1e-5) << mc.name << ": output";
        }
    });
}

// A hook at the router may change the weights: the experts that run, and how they are mixed, follow.
TEST(MoeForward, HookChangingTheWeightsIsFollowed) {
    const int d = 32, n = 6, E = 5;
    moe_weights w = draw_moe(d, E, 2, 16, 20, true, true, 9);
    gb::layer_weights lw;
    gb::model_config c;
    c.d_model = d;
    install(lw, c, w);
    std::mt19937 rng(3);
    std::vector<float> x = draw(rng, (size_t)n * d, 1.0f);
    const std::vector<double> xd = to_double(x.data(), x.size());
    gb::moe_scratch s;
    gb::gemm_scratch g;
    std::vector<float> out((size_t)n * d);
    // every expert at 1/E (experts that the router did not choose run too), and row 2 all zero but the shared expert
    gb::moe_forward(out.data(), x.data(), n, lw, c, s, g, [&](float* wts) {
        for (int r = 0; r < n; r++)
            for (int e = 0; e < E; e++) wts[(size_t)r * E + e] = r == 2 ? 0.0f : 1.0f / E;
    });
    std::vector<double> wts((size_t)n * E);
    for (int r = 0; r < n; r++)
        for (int e = 0; e < E; e++) wts[(size_t)r * E + e] = r == 2 ? 0.0 : 1.0 / E;
    EXPECT_LT(max_scaled_error(out, ref_moe(xd, n, w, wts)), 1e-5);
    // an expert's weight zeroed (what an expert ablation does): the others keep theirs
    std::vector<double> want_w = ref_route(xd, n, w);
    for (int r = 0; r < n; r++) want_w[(size_t)r * E + 1] = 0;
    gb::moe_forward(out.data(), x.data(), n, lw, c, s, g, [&](float* wts) {
        for (int r = 0; r < n; r++) wts[(size_t)r * E + 1] = 0;
    });
    EXPECT_LT(max_scaled_error(out, ref_moe(xd, n, w, want_w)), 1e-5);
}

// Equal logits: the lower expert index is chosen; weights are the softmax's (renormalised or not).
TEST(MoeRoute, TiesGoToTheLowerIndex) {
    std::vector<int> chosen;
    const float logits[2][5] = {{1, 3, 1, 3, 3}, {0, 0, 0, 0, 0}};
    float w[2][5];
    gb::moe_route(&w[0][0], &logits[0][0], 2, 5, 2, true, chosen);
    EXPECT_EQ(std::vector<float>(w[0], w[0] + 5), (std::vector<float>{0, 0.5f, 0, 0.5f, 0}));
    EXPECT_EQ(std::vector<float>(w[1], w[1] + 5), (std::vector<float>{0.5f, 0.5f, 0, 0, 0}));
    gb::moe_route(&w[0][0], &logits[0][0], 2, 5, 3, false, chosen);
    EXPECT_NEAR(w[1][0], 0.2f, 1e-7);
    EXPECT_NEAR(w[1][2], 0.2f, 1e-7);
    EXPECT_EQ(w[1][3], 0.0f);
    // moe_top lists the non-zero ones, largest first, equal weights in index order
    int ids[5];
    float vals[5];
    const float row[6] = {0.1f, 0, 0.4f, 0.1f, 0.4f, 0};
    ASSERT_EQ(gb::moe_top(row, 6, 6, ids, vals), 4);
    EXPECT_EQ(std::vector<int>(ids, ids + 4), (std::vector<int>{2, 4, 0, 3}));
    ASSERT_EQ(gb::moe_top(row, 6, 2, ids, vals), 2);
    EXPECT_EQ(std::vector<int>(ids, ids + 2), (std::vector<int>{2, 4}));
}

// A row's result does not depend on which rows share the call (live recompute appends one token at a time), and
// a second call of the same size allocates nothing.
TEST(MoeForward, RowsIndependentOfTheBatchAndNoAllocation) {
    for_each_matmul([] {
        const int d = 32, n = 7, E = 6;
        moe_weights w = draw_moe(d, E, 2, 16, 24, false, true, 21);
        gb::layer_weights lw;
        gb::model_config c;
        c.d_model = d;
        install(lw, c, w);
        std::mt19937 rng(4);
        std::vector<float> x = draw(rng, (size_t)n * d, 1.0f);
        std::vector<float> all((size_t)n * d), one(d);
        gb::moe_scratch s;
        gb::gemm_scratch g;
        gb::moe_forward(all.data(), x.data(), n, lw, c, s, g, {});
        const float* buffers[] = {s.logits.data(), s.weights.data(), s.xg.data(), s.gate.data(), s.up.data(), s.y.data()};
        gb::moe_forward(all.data(), x.data(), n, lw, c, s, g, {});
        const float* again[] = {s.logits.data(), s.weights.data(), s.xg.data(), s.gate.data(), s.up.data(), s.y.data()};
        for (int i = 0; i < 6; i++) EXPECT_EQ(buffers[i], again[i]) << "scratch buffer " << i << " was reallocated";
        for (int r = 0; r < n; r++) {
            gb::moe_forward(one.data(), x.data() + (size_t)r * d, 1, lw, c, s, g, {});
            EXPECT_EQ(0, std::memcmp(one.data(), all.data() + (size_t)r * d, d * sizeof(float))) << "row " << r;
        }
    });
}

TEST(MoeForward, BadShapesAreOneLineErrors) {
    moe_weights w = draw_moe(8, 4, 2, 8, 0, true, false, 1);
    gb::layer_weights lw;
    gb::model_config c;
    c.d_model = 8;
    install(lw, c, w);
    std::vector<float> x(8), out(8);
    gb::moe_scratch s;
    gb::gemm_scratch g;
    c.n_expert_used = 5;
    expect_gb_error([&] { gb::moe_forward(out.data(), x.data(), 1, lw, c, s, g, {}); }, "5 experts per token of 4");
    c.n_expert_used = 2;
    c.n_expert = 5;
    expect_gb_error([&] { gb::moe_forward(out.data(), x.data(), 1, lw, c, s, g, {}); }, "the config says 5");
}

// ---------------------------------------------------------------------------------------------
// The forward: the router point, mlp_out, the record
// ---------------------------------------------------------------------------------------------
// The record's router weights are the reference's mixing weights of the record's own mlp_in, and mlp_out is the
// reference MoE of both; mlp_post does not exist in an MoE model.
TEST(MoeForward, RouterCaptureAndMlpOutMatchTheReference) {
    for_each_matmul([] {
        for (bool shared : {false, true}) {
            moe_model mm = make_moe_model(6, 2, !shared, shared, 40);
            const gb::model_config& c = mm.m.config;
            const std::vector<int> tokens = some_tokens(11, 2);
            gb::forward_options opt;
            opt.keep.points = ~0u;
            gb::record rec;
            gb::run_forward(rec, mm.m, tokens, {}, opt);
            const int T = rec.n_tokens, E = c.n_expert;
            EXPECT_EQ(rec.n_expert, E);
            for (int l = 0; l < c.n_layer; l++) {
                ASSERT_TRUE(rec.has(gb::HOOK_ROUTER, l)) << "L" << l;
                EXPECT_FALSE(rec.has(gb::HOOK_MLP_POST, l)) << "an MoE layer has no mlp_post";
                ASSERT_EQ(rec.layer_floats(gb::HOOK_ROUTER), (size_t)T * E);
                const std::vector<double> x = to_double(rec.get(gb::HOOK_MLP_IN, l), (size_t)T * c.d_model);
                const std::vector<double> want_w = ref_route(x, T, mm.layers[l]);
                const float* got_w = rec.get(gb::HOOK_ROUTER, l);
                EXPECT_LT(max_scaled_error(std::vector<float>(got_w, got_w + (size_t)T * E), want_w), 1e-5) << "L" << l;
                const float* got = rec.get(gb::HOOK_MLP_OUT, l);
                EXPECT_LT(max_scaled_error(std::vector<float>(got, got + (size_t)T * c.d_model), ref_moe(x, T, mm.layers[l], want_w)),
                          1e-5) << "L" << l << " mlp_out";
            }
            // the default request keeps the router (tiny) and nothing else of it
            gb::record plain;
            gb::run_forward(plain, mm.m, tokens);
            for (int l = 0; l < c.n_layer; l++) EXPECT_TRUE(plain.has(gb::HOOK_ROUTER, l));
            EXPECT_EQ(plain.logits, std::vector<float>(rec.logits.end() - c.vocab_size, rec.logits.end()));
        }
    });
}

// In the forward, a hook at the router sees [n][E] and what it writes flows on; a read-only one changes nothing.
TEST(MoeForward, RouterHookPointInTheForward) {
    moe_model mm = make_moe_model(4, 2, true, false, 50);
    const gb::model_config& c = mm.m.config;
    const std::vector<int> tokens = some_tokens(8, 3);
    gb::record plain;
    gb::run_forward(plain, mm.m, tokens);
    gb::forward_options opt;
    int calls = 0;
    gb::hook look{gb::HOOK_ROUTER, -1, [&](gb::hook_tensor& t) {
                      EXPECT_EQ(t.width, c.n_expert);
                      EXPECT_EQ(t.n, (int)tokens.size());
                      calls++;
                      return false;
                  }};
    opt.hooks = {look};
    gb::record looked;
    gb::run_forward(looked, mm.m, tokens, {}, opt);
    EXPECT_EQ(calls, c.n_layer);
    EXPECT_EQ(looked.logits, plain.logits);
    // route every token of layer 1 to expert 3 alone: the record keeps what flowed on, mlp_out follows
    gb::hook force{gb::HOOK_ROUTER, 1, [&](gb::hook_tensor& t) {
                       for (int r = 0; r < t.n; r++)
                           for (int e = 0; e < t.width; e++) t.row(r)[e] = e == 3 ? 1.0f : 0.0f;
                       return true;
                   }};
    opt.hooks = {force};
    opt.keep.points |= gb::hook_bit(gb::HOOK_MLP_IN) | gb::hook_bit(gb::HOOK_MLP_OUT);
    gb::record forced;
    gb::run_forward(forced, mm.m, tokens, {}, opt);
    const int T = forced.n_tokens, E = c.n_expert;
    std::vector<double> wts((size_t)T * E, 0.0);
    for (int r = 0; r < T; r++) wts[(size_t)r * E + 3] = 1;
    const float* router = forced.get(gb::HOOK_ROUTER, 1);
    EXPECT_EQ(std::vector<float>(router, router + (size_t)T * E), std::vector<float>(wts.begin(), wts.end()));
    const std::vector<double> x = to_double(forced.get(gb::HOOK_MLP_IN, 1), (size_t)T * c.d_model);
    const float* got = forced.get(gb::HOOK_MLP_OUT, 1);
    EXPECT_LT(max_scaled_error(std::vector<float>(got, got + (size_t)T * c.d_model), ref_moe(x, T, mm.layers[1], wts)), 1e-5);
    EXPECT_NE(forced.logits, plain.logits);
}

// Points that a model does not have: never kept, never intervened on, named in the error.
TEST(MoeHooks, RouterOnlyInMoeModelsMlpPostOnlyInDenseOnes) {
    moe_model mm = make_moe_model(4, 2, true, false, 60);
    gb::model_config dense = mm.m.config;
    dense.arch = gb::ARCH_LLAMA; // the same shape as a dense decoder (the kind comes from the architecture)
    dense.n_expert = 0;
    EXPECT_TRUE(gb::hook_exists(gb::HOOK_ROUTER, mm.m.config));
    EXPECT_FALSE(gb::hook_exists(gb::HOOK_MLP_POST, mm.m.config));
    EXPECT_FALSE(gb::hook_exists(gb::HOOK_ROUTER, dense));
    EXPECT_TRUE(gb::hook_exists(gb::HOOK_MLP_POST, dense));
    EXPECT_EQ(gb::hook_heads(gb::HOOK_ROUTER, mm.m.config), 4);
    EXPECT_EQ(gb::hook_head_width(gb::HOOK_ROUTER, mm.m.config, 5), 1);
    EXPECT_EQ(gb::hook_width(gb::HOOK_ROUTER, mm.m.config, 5), 4);
    EXPECT_STREQ(gb::hook_name(gb::HOOK_ROUTER), "router");
    EXPECT_EQ(gb::parse_hook_point("router"), gb::HOOK_ROUTER);
    EXPECT_EQ(gb::HOOK_ROUTER, gb::HOOK_MLP_IN + 1) << "in forward order";
    gb::record_request rq;
    rq.points = ~0u;
    gb::record_plan dense_plan = gb::plan_record(rq, dense, 5, 1), moe_plan = gb::plan_record(rq, mm.m.config, 5, 1);
    EXPECT_FALSE(dense_plan.any(gb::HOOK_ROUTER));
    EXPECT_TRUE(dense_plan.any(gb::HOOK_MLP_POST));
    EXPECT_TRUE(moe_plan.any(gb::HOOK_ROUTER));
    EXPECT_FALSE(moe_plan.any(gb::HOOK_MLP_POST));
    gb::intervention at_router{gb::INTERVENE_ZERO, gb::HOOK_ROUTER, 0};
    expect_gb_error([&] { gb::check_interventions({at_router}, dense); }, "L0 router: this model has no experts");
    gb::intervention at_post{gb::INTERVENE_ZERO, gb::HOOK_MLP_POST, 1};
    expect_gb_error([&] { gb::check_interventions({at_post}, mm.m.config); }, "L1 mlp_post: an MoE model's MLP has no single");
    at_router.head = 4;
    expect_gb_error([&] { gb::check_interventions({at_router}, mm.m.config); }, "expert 4 is outside the 4 experts");
}

// ---------------------------------------------------------------------------------------------
// Expert ablations
// ---------------------------------------------------------------------------------------------
TEST(MoeAblation, ParseDescribeAndCheck) {
    gb::ablation ab = gb::parse_ablation("", "", "0.1", "1.3,0.0");
    ASSERT_EQ(ab.experts.size(), 2u);
    EXPECT_EQ(ab.experts[0], (gb::head_ref{1, 3}));
    EXPECT_EQ(ab.experts[1], (gb::head_ref{0, 0}));
    EXPECT_TRUE(ab.any());
    EXPECT_EQ(ab.describe(), "heads 0.1 experts 1.3,0.0");
    EXPECT_EQ(gb::parse_ablation("", "", "", "2.1").describe(), "experts 2.1");
    expect_gb_error([] { gb::parse_ablation("", "", "", "13"); }, "--experts: expected LAYER.EXPERT like 1.3, got '13'");
    expect_gb_error([] { gb::parse_ablation("", "", "", "1.x"); }, "--experts: expected a non-negative integer, got 'x'");
    moe_model mm = make_moe_model(4, 2, true, false, 70);
    gb::check_ablation(gb::parse_ablation("", "", "", "2.3,0.0"), mm.m.config);
    expect_gb_error([&] { gb::check_ablation(gb::parse_ablation("", "", "", "1.4"), mm.m.config); },
                    "ablated expert 1.4 is outside the model (3 layers x 4 experts: 0.0..2.3)");
    expect_gb_error([&] { gb::check_ablation(gb::parse_ablation("", "", "", "3.0"), mm.m.config); },
                    "ablated expert 3.0 is outside the model");
    gb::model_config dense = mm.m.config;
    dense.n_expert = 0;
    expect_gb_error([&] { gb::check_ablation(gb::parse_ablation("", "", "", "0.0"), dense); },
                    "ablated expert 0.0: this model has no experts (its MLP is dense)");
    gb::toggle_expert(ab, 1, 3);
    EXPECT_FALSE(gb::expert_ablated(ab, 1, 3));
    gb::toggle_expert(ab, 2, 2);
    EXPECT_TRUE(gb::expert_ablated(ab, 2, 2));
}

// "expert L.E": its weight is 0 for every token at layer L, the other chosen experts keep theirs (not
// renormalised), other layers are untouched; and live recompute gives the same as a fresh run.
TEST(MoeAblation, ZeroesTheExpertsWeightOnlyAndLiveRecomputeAgrees) {
    for (bool norm_topk : {true, false}) {
        moe_model mm = make_moe_model(5, 2, norm_topk, false, 80);
        const gb::model_config& c = mm.m.config;
        const std::vector<int> tokens = some_tokens(12, 4);
        gb::forward_options opt;
        opt.keep.points |= gb::hook_bit(gb::HOOK_MLP_IN) | gb::hook_bit(gb::HOOK_MLP_OUT);
        gb::record base, abl;
        gb::run_forward(base, mm.m, tokens, {}, opt);
        // the expert most used at layer 1 in the baseline
        const int T = base.n_tokens, E = c.n_expert;
        std::vector<int> uses(E, 0);
        for (int r = 0; r < T; r++)
            for (int e = 0; e < E; e++) uses[e] += base.get(gb::HOOK_ROUTER, 1)[(size_t)r * E + e] != 0;
        const int top = (int)(std::max_element(uses.begin(), uses.end()) - uses.begin());
        ASSERT_GT(uses[top], 0);
        gb::ablation ab;
        ab.experts = {{1, top}};
        gb::run_forward(abl, mm.m, tokens, ab, opt);
        EXPECT_EQ(0, std::memcmp(base.get(gb::HOOK_ROUTER, 0), abl.get(gb::HOOK_ROUTER, 0), (size_t)T * E * 4)) << "layer 0";
        const float* bw = base.get(gb::HOOK_ROUTER, 1);
        const float* aw = abl.get(gb::HOOK_ROUTER, 1);
        for (int r = 0; r < T; r++)
            for (int e = 0; e < E; e++)
                EXPECT_EQ(aw[(size_t)r * E + e], e == top ? 0.0f : bw[(size_t)r * E + e]) << "token " << r << " expert " << e;
        const std::vector<double> x = to_double(abl.get(gb::HOOK_MLP_IN, 1), (size_t)T * c.d_model);
        const float* got = abl.get(gb::HOOK_MLP_OUT, 1);
        EXPECT_LT(max_scaled_error(std::vector<float>(got, got + (size_t)T * c.d_model),
                                   ref_moe(x, T, mm.layers[1], to_double(aw, (size_t)T * E))), 1e-5);
        EXPECT_NE(abl.logits, base.logits);
        // live: a clean run, then the ablation toggled on (from layer 1's MLP), matches the fresh ablated run
        gb::live_state st;
        gb::live_result out;
        gb::live_request rq;
        rq.tokens = tokens;
        rq.keep = opt.keep;
        rq.keep.resid_stream = true; // what a run resumes from
        gb::live_run(out, st, mm.m, rq);
        rq.interventions = gb::ablation_interventions(ab, c);
        gb::live_run(out, st, mm.m, rq);
        EXPECT_EQ(out.report.from_point, 3) << out.report.what << ": the MLP of layer 1 is residual point 3's sublayer";
        EXPECT_FALSE(out.report.baseline_run);
        for (int l = 0; l < c.n_layer; l++)
            EXPECT_EQ(0, std::memcmp(out.run->get(gb::HOOK_ROUTER, l), abl.get(gb::HOOK_ROUTER, l), (size_t)T * E * 4)) << l;
        ASSERT_EQ(out.run->logits.size(), abl.logits.size());
        for (size_t i = 0; i < abl.logits.size(); i++) EXPECT_NEAR(out.run->logits[i], abl.logits[i], 1e-5);
    }
}

// ---------------------------------------------------------------------------------------------
// Export: router.npy and the routing in capture.json
// ---------------------------------------------------------------------------------------------
TEST(MoeExport, RouterNpyAndRoutingJson) {
    moe_model mm = make_moe_model(6, 2, true, true, 90);
    const gb::model_config& c = mm.m.config;
    gb::record rec;
    gb::ablation ab;
    ab.experts = {{0, 1}};
    gb::run_forward(rec, mm.m, some_tokens(5, 6), ab);
    const std::string dir = test_temp_dir("moe_export");
    std::vector<std::string> wrote = gb::write_record_npy(dir, rec);
    EXPECT_NE(std::find(wrote.begin(), wrote.end(), "router.npy"), wrote.end());
    std::ifstream f(dir + "/router.npy", std::ios::binary);
    std::string head(128, '\0');
    f.read(&head[0], 128);
    EXPECT_NE(head.find("'shape': (3, 5, 6)"), std::string::npos) << head;
    nlohmann::json j = gb::capture_json(mm.m, rec, ab, 3);
    ASSERT_TRUE(j.contains("routing"));
    EXPECT_EQ(j["model"]["experts"]["n_expert"], 6);
    EXPECT_EQ(j["model"]["experts"]["d_ff_shared"], 24);
    EXPECT_EQ(j["routing"]["experts_per_token"], 2);
    ASSERT_EQ(j["routing"]["experts"].size(), 3u);
    for (int l = 0; l < 3; l++)
        for (int t = 0; t < 5; t++) {
            const auto& ids = j["routing"]["experts"][l][t];
            const auto& w = j["routing"]["weights"][l][t];
            ASSERT_EQ(ids.size(), w.size());
            EXPECT_TRUE(ids.size() == 2 || (l == 0 && ids.size() == 1)) << "L" << l << " token " << t;
            for (size_t i = 0; i < ids.size(); i++) {
                EXPECT_EQ(w[i].get<float>(), rec.get(gb::HOOK_ROUTER, l)[t * 6 + ids[i].get<int>()]);
                if (l == 0) {
                    EXPECT_NE(ids[i].get<int>(), 1) << "the ablated expert did not run";
                }
                if (i > 0) {
                    EXPECT_GE(w[i - 1].get<float>(), w[i].get<float>());
                }
            }
        }
    // a dense model's capture has neither
    gb::model dense = mm.m;
    dense.config.arch = gb::ARCH_LLAMA; // the same shape without experts: a dense decoder
    dense.config.n_expert = 0;
    rec.n_expert = 0;
    nlohmann::json dj = gb::capture_json(dense, rec, {}, 3);
    EXPECT_FALSE(dj.contains("routing"));
    EXPECT_FALSE(dj["model"].contains("experts"));
    (void)c;
}

// ---------------------------------------------------------------------------------------------
// CLI on MoE files (HF and GGUF, written by tests/support/tiny_family)
// ---------------------------------------------------------------------------------------------
// 3 layers, 4 experts (top 2) of width 24; qwen2_moe adds a shared expert with its gate.
const tiny_family& moe_file(const std::string& family) {
    static std::map<std::string, tiny_family> files;
    if (!files.count(family)) {
        family_spec s;
        s.family = family;
        s.n_layer = 3;
        s.seed = 5;
        files[family] = write_tiny_family(test_temp_dir("moe_file_" + family), s);
    }
    return files[family];
}

TEST(MoeCli, InfoNamesTheExperts) {
    command_result r = run_cli("info --model '" + moe_file("qwen2_moe").hf_dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["experts"]["n_expert"], 4);
    EXPECT_EQ(j["experts"]["n_expert_used"], 2);
    EXPECT_EQ(j["experts"]["d_ff_expert"], 24);
    EXPECT_EQ(j["experts"]["d_ff_shared"], 32);
    r = run_cli("info --model '" + moe_file("mixtral").gguf_path + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["experts"]["d_ff_shared"], 0);
    r = run_cli("info"); // the embedded default model is dense
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(nlohmann::json::parse(r.out).contains("experts"));
}

// run prints each layer's experts for the last token; --json holds the routing of every layer and token, and
// both agree; an ablated expert is named and has left the routing.
TEST(MoeCli, RunPrintsTheRoutingAndJsonHoldsIt) {
    for (const std::string& path : {moe_file("mixtral").hf_dir, moe_file("qwen2_moe").gguf_path}) {
        const std::string dir = test_temp_dir("moe_cli_run");
        command_result r = run_cli("run --model '" + path + "' --prompt 'the cat sat' --json '" + dir + "/run.json'");
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_NE(r.out.find("experts of the last token \"t\" (top 2 of 4 per layer):"), std::string::npos) << r.out;
        nlohmann::json j = nlohmann::json::parse(read_file(dir + "/run.json"));
        const nlohmann::json& rt = j["routing"];
        ASSERT_EQ(rt["experts"].size(), 3u);
        const int T = (int)j["tokens"].size();
        for (int l = 0; l < 3; l++) {
            ASSERT_EQ((int)rt["experts"][l].size(), T);
            const auto& ids = rt["experts"][l][T - 1];
            const auto& w = rt["weights"][l][T - 1];
            ASSERT_EQ(ids.size(), 2u);
            char line[128];
            std::snprintf(line, sizeof line, "  L%-3d  expert %-3d %.3f  expert %-3d %.3f\n", l, ids[0].get<int>(),
                          w[0].get<float>(), ids[1].get<int>(), w[1].get<float>());
            EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "in\n" << r.out;
        }
        // ablate the last token's first expert at layer 1
        const int e = rt["experts"][1][T - 1][0];
        r = run_cli("run --model '" + path + "' --prompt 'the cat sat' --experts 1." + std::to_string(e) + " --json '" + dir +
                "/abl.json'");
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_NE(r.out.find("ablation: experts 1." + std::to_string(e) + "\n"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("[expert " + std::to_string(e) + " ablated]"), std::string::npos) << r.out;
        nlohmann::json a = nlohmann::json::parse(read_file(dir + "/abl.json"));
        EXPECT_EQ(a["ablation"], "experts 1." + std::to_string(e));
        for (int t = 0; t < T; t++)
            for (const auto& id : a["routing"]["experts"][1][t]) EXPECT_NE(id.get<int>(), e) << "token " << t;
        EXPECT_EQ(a["routing"]["experts"][1][T - 1].size(), 1u) << "the other chosen expert stays";
        EXPECT_EQ(a["routing"]["weights"][1][T - 1][0], rt["weights"][1][T - 1][1]) << "and keeps its weight";
        EXPECT_EQ(a["routing"]["experts"][0], rt["experts"][0]) << "layer 0 is before the ablation";
    }
}

TEST(MoeCli, KeepRouterAndPointsTheModelLacks) {
    const std::string m = "--model '" + moe_file("mixtral").hf_dir + "'";
    const std::string dir = test_temp_dir("moe_cli_npy");
    command_result r = run_cli("run " + m + " --prompt 'the cat' --keep router,mlp_out --npy-dir '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string npy = read_file(dir + "/router.npy");
    EXPECT_NE(npy.find("'shape': (3, 7, 4)"), std::string::npos) << npy.substr(0, 100);
    r = run_cli("run " + m + " --prompt 'the cat' --keep mlp_post --npy-dir '" + dir + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: --keep mlp_post: an MoE model's MLP has no single activation (see router)\n");
    // the embedded default model is dense: the kind table's line
    const gb::model dense = gb::load_model(gb::default_model_path());
    r = run_cli("run --prompt 'the cat' --keep router --npy-dir '" + dir + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: --keep router: " + gb::refusal(dense, gb::FEATURE_EXPERTS) + "\n");
    EXPECT_NE(r.err.find("its MLPs are dense"), std::string::npos) << r.err;
}

TEST(MoeCli, ExpertsFlagErrorsAreOneLine) {
    const std::string m = "--model '" + moe_file("mixtral").gguf_path + "'";
    command_result r = run_cli("run " + m + " --prompt 'the cat' --experts 1.4");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: ablated expert 1.4 is outside the model (3 layers x 4 experts: 0.0..2.3)\n");
    r = run_cli("run " + m + " --prompt 'the cat' --experts 3");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: --experts: expected LAYER.EXPERT like 1.3, got '3'\n");
    const gb::model dense = gb::load_model(gb::default_model_path()); // the embedded default model
    r = run_cli("run --prompt 'the cat' --experts 0.0");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: --experts: " + gb::refusal(dense, gb::FEATURE_EXPERTS) + "\n");
    r = run_cli("generate " + m + " --prompt 'the cat' --max-new-tokens 3 --experts 0.1,2.3");
    EXPECT_EQ(r.code, 0) << r.err;
    r = run_cli("lens " + m + " --prompt 'the cat' --experts 0.1");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "error: lens does not take --experts\n");
    r = run_cli("run --help");
    EXPECT_NE(r.out.find("--experts LIST"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The app on MoE files: the Experts tab, expert ablation by right-click, sessions, the command line
// ---------------------------------------------------------------------------------------------

// The Experts tab exists for an MoE model only; right-clicking an expert's part of a cell ablates that expert at
// that layer (live: from that layer's MLP on), its weight leaves the routing, the Ablations panel lists it and
// clears it.
TEST(MoeGui, RightClickAnExpertAblatesItAndTheAblationsPanelClearsIt) {
    ASSERT_TRUE(have_app()) << app_path() << " was not built";
    const std::string model = moe_file("qwen2_moe").hf_dir;
    int rc = 0;
    // the prompt "the cat sat" is 11 byte tokens: every column in view
    std::vector<nlohmann::json> st = run_script("--model '" + model + "' --prompt 'the cat sat'", "wait\ntab experts\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["tab"], "experts");
    EXPECT_NE(std::find(st[0]["tabs"].begin(), st[0]["tabs"].end(), "experts"), st[0]["tabs"].end());
    const nlohmann::json ex = st[0]["experts"]; // a copy: st is reused below
    ASSERT_EQ(ex["last_token_experts"].size(), 3u);
    ASSERT_EQ(ex["last_token_experts"][1].size(), 2u);
    const int e = ex["last_token_experts"][1][0], other = ex["last_token_experts"][1][1];
    const std::string seg = "expert 1.10." + std::to_string(e);
    st = run_script("--model '" + model + "' --prompt 'the cat sat'",
                 "wait\ntab experts\nwait\nrclick " + seg + "\nwait\nprint\nhover experts cell 1.10\nframes 2\n"
                 "click clear experts\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    const std::string name = "1." + std::to_string(e);
    EXPECT_EQ(st[0]["ablated_experts"], nlohmann::json::array({name}));
    EXPECT_EQ(st[0]["ablation"], "experts " + name);
    EXPECT_EQ(st[0]["experts"]["last_token_experts"][1], nlohmann::json::array({other})) << "the other expert stays";
    EXPECT_EQ(st[0]["experts"]["last_token_weights"][1][0], ex["last_token_weights"][1][1]) << "with its weight";
    EXPECT_EQ(st[0]["experts"]["last_token_experts"][0], ex["last_token_experts"][0]) << "layer 0 is before it";
    EXPECT_GT(st[0]["kl"].get<double>(), 0);
    EXPECT_EQ(st[0]["report"]["from_point"], 3) << "live recompute from layer 1's MLP: " << st[0]["report"]["what"];
    EXPECT_EQ(st[1]["ablated_experts"], nlohmann::json::array());
    EXPECT_EQ(st[1]["ablation"], "none");
    EXPECT_EQ(st[1]["experts"]["last_token_experts"], ex["last_token_experts"]);
}

// A dense model has no Experts tab (a script or session asking for it gets Head); --experts on it is a warning.
TEST(MoeGui, DenseModelHasNoExpertsTab) {
    ASSERT_TRUE(have_app());
    int rc = 0;
    std::vector<nlohmann::json> st = run_script("--prompt 'the cat' --experts 0.1", "wait\ntab experts\nframes 3\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["tab"], "head");
    EXPECT_EQ(std::find(st[0]["tabs"].begin(), st[0]["tabs"].end(), "experts"), st[0]["tabs"].end());
    EXPECT_FALSE(st[0].contains("experts"));
    EXPECT_EQ(st[0]["ablation"], "none");
    EXPECT_NE(st[0]["warning"].get<std::string>().find("ablated expert 0.1: this model has no experts"), std::string::npos)
        << st[0]["warning"];
}

// --experts on the command line, a saved session holding the experts (and the tab) and opened again, the export's
// routing; a session's experts that do not fit the model are named.
TEST(MoeGui, CommandLineSessionAndExport) {
    ASSERT_TRUE(have_app());
    const std::string model = moe_file("mixtral").gguf_path;
    const std::string dir = test_temp_dir("moe_gui_session");
    int rc = 0;
    std::vector<nlohmann::json> st = run_script("--model '" + model + "' --prompt 'the cat sat' --experts 2.1,0.3",
                                             "wait\ntab experts\nwait\nprint\nsave-session " + dir + "/s.json\nexport " +
                                                 dir + "/export\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["ablated_experts"], nlohmann::json::array({"2.1", "0.3"}));
    EXPECT_EQ(st[0]["ablation"], "experts 2.1,0.3");
    nlohmann::json saved = nlohmann::json::parse(read_file(dir + "/s.json"));
    EXPECT_EQ(saved["ablation"]["experts"], nlohmann::json::parse("[[2,1],[0,3]]"));
    EXPECT_EQ(saved["tab"], "experts");
    nlohmann::json cap = nlohmann::json::parse(read_file(dir + "/export/capture.json"));
    ASSERT_TRUE(cap.contains("routing"));
    EXPECT_EQ(cap["routing"]["experts"].size(), 3u);
    for (const auto& t : cap["routing"]["experts"][2])
        for (const auto& id : t) EXPECT_NE(id.get<int>(), 1) << "expert 2.1 is ablated";
    // the session reopens with its experts and tab
    st = run_script("--session '" + dir + "/s.json'", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["ablated_experts"], nlohmann::json::array({"2.1", "0.3"}));
    EXPECT_EQ(st[0]["tab"], "experts");
    EXPECT_EQ(st[0]["warning"], "");
    // the same session with an expert the model lacks: named, nothing applied
    saved["ablation"]["experts"] = nlohmann::json::parse("[[1,7]]");
    std::ofstream(dir + "/bad.json") << saved.dump();
    st = run_script("--session '" + dir + "/bad.json'", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["ablation"], "none");
    EXPECT_NE(st[0]["warning"].get<std::string>().find("ablated expert 1.7 is outside the model (3 layers x 4 experts"),
              std::string::npos) << st[0]["warning"];
}

} // namespace

