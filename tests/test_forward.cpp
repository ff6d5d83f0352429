// Forward pass vs the double-precision reference, for every ablation; invariants; KV cache and sampling. The
// kernels alone (GEMM, attention_cpu) are in test_kernels.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <iostream>
#include <omp.h>
#include <pthread.h>
#include <random>
#include <sched.h>
#include <set>
#include <sstream>

#include "io/loader.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/softmax.h"
#include "reference.h"
#include "run/forward.h"
#include "run/generate.h"
#include "ref_trace.h"
#include "test_util.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/threads.h"

namespace {

struct fixture_model {
    tiny_model tm;
    gb::model m;
};

// one loaded copy per model and matmul kernel (the kernel is chosen when the weights are packed)
const fixture_model& tiny(const std::string& name, const tiny_spec& spec) {
    static std::map<std::string, std::unique_ptr<fixture_model>> cache;
    auto& slot = cache[name + "/" + gb::matmul_name(gb::matmul_kind_now())];
    if (!slot) {
        slot = std::make_unique<fixture_model>();
        slot->tm = write_tiny_gpt2(test_temp_dir("forward_" + name), spec);
        slot->m = gb::load_model(slot->tm.dir);
    }
    return *slot;
}

const fixture_model& base_model() {
    tiny_spec s;
    s.n_layer = 3;
    s.n_head = 4;
    s.d_model = 32;
    s.n_ctx = 48;
    s.seed = 7;
    return tiny("base", s);
}


void expect_matches_reference(const fixture_model& f, const gb::ablation& ab, const std::string& what) {
    auto tokens = random_tokens(23, f.m.config.vocab_size, 11);
    gb::record cap;
    gb::forward_options opt;
    opt.all_logits = true;
    gb::run_forward(cap, f.m, tokens, ab, opt);
    ref_result ref = reference_forward(f.tm, tokens, ab);
    EXPECT_LT(max_scaled_error(cap.logits, ref.logits), 1e-4) << what << ": logits";
    EXPECT_LT(max_scaled_error(cap.flat(gb::HOOK_PATTERN), ref.attention), 1e-4) << what << ": attention";
    EXPECT_LT(max_scaled_error(cap.resid_norm, ref.resid_norm), 1e-4) << what << ": residual norms";
    // the default (last position only) logits equal the last row of the full ones
    gb::record last;
    gb::run_forward(last, f.m, tokens, ab);
    ASSERT_EQ(last.logits.size(), (size_t)f.m.config.vocab_size);
    std::vector<double> last_ref(ref.logits.end() - f.m.config.vocab_size, ref.logits.end());
    EXPECT_LT(max_scaled_error(last.logits, last_ref), 1e-4) << what << ": last-position logits";
}

// An in-place activation f(x, n) against want(x) in double within tol(x, want): on 8001 points step apart around
// 0 and the extremes, in lengths that leave every remainder of a vector lane.
void expect_in_place_activation(void (*f)(float*, size_t), float step, std::initializer_list<float> extremes,
                                const std::function<double(double)>& want, const std::function<double(double, double)>& tol) {
    std::vector<float> x;
    for (int i = -4000; i <= 4000; i++) x.push_back(i * step);
    x.insert(x.end(), extremes);
    for (size_t n : {x.size(), x.size() - 1, x.size() - 3, (size_t)5}) {
        std::vector<float> y(x.begin(), x.begin() + n);
        f(y.data(), n);
        for (size_t i = 0; i < n; i++) {
            const double w = want(x[i]);
            ASSERT_NEAR(y[i], w, tol(x[i], w)) << "x = " << x[i];
        }
    }
}

} // namespace

// The exact GELU (vectorised erf) against erf in double, over the range activations reach and both tails, in
// lengths that leave every remainder of a vector; NaN and +Inf pass through.
TEST(Forward, ExactGeluMatchesErfInDouble) {
    // absolute 1.5e-7 of erf, scaled by |x| / 2, and float rounding of the result
    expect_in_place_activation(gb::gelu_erf_forward, 0.004f, {-40.0f, -9.5f, -1e-7f, 0.0f, 1e-7f, 9.5f, 40.0f, 1e6f},
                               [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); },
                               [](double x, double want) { return 1e-7 * std::fabs(x) + 1e-6 * std::fabs(want) + 1e-30; });
    float odd[3] = {NAN, INFINITY, -2.0f};
    gb::gelu_erf_forward(odd, 3);
    EXPECT_TRUE(std::isnan(odd[0]));
    EXPECT_EQ(odd[1], INFINITY);
}

// Marian's swish (vectorised exp) against x / (1 + e^-x) in double, in lengths that leave every remainder of a
// vector, far into both tails; NaN passes through.
TEST(Forward, SwishMatchesInDouble) {
    expect_in_place_activation(gb::silu_forward, 0.005f, {-120.0f, -87.0f, -1e-7f, 0.0f, 1e-7f, 87.0f, 120.0f, 1e6f},
                               [](double x) { return x / (1.0 + std::exp(-x)); },
                               [](double, double want) { return 2e-6 * std::fabs(want) + 1e-30; });
    float odd[1] = {NAN};
    gb::silu_forward(odd, 1);
    EXPECT_TRUE(std::isnan(odd[0]));
}

TEST(Forward, MatchesReferenceWithoutAblation) {
    for_each_matmul([] { expect_matches_reference(base_model(), {}, "none"); });
}

TEST(Forward, MatchesReferenceForEachAblation) {
    for_each_matmul([] {
    const auto& f = base_model();
    for (bool restricted : {false, true}) {
        std::vector<int> layers = restricted ? std::vector<int>{0, 2} : std::vector<int>{};
        std::string suffix = restricted ? " on layers 0,2" : " on all layers";
        gb::ablation a;
        a.no_attention = layers_on(layers);
        expect_matches_reference(f, a, "no-attention" + suffix);
        gb::ablation r;
        r.no_residual = layers_on(layers);
        expect_matches_reference(f, r, "no-residual" + suffix);
        gb::ablation n;
        n.no_layernorm = layers_on(layers);
        expect_matches_reference(f, n, "no-layernorm" + suffix);
        gb::ablation all;
        all.no_attention = all.no_residual = all.no_layernorm = layers_on(layers);
        expect_matches_reference(f, all, "all three" + suffix);
    }
    });
}

TEST(Forward, MatchesReferenceForHeadAblation) {
    for_each_matmul([] {
    const auto& f = base_model();
    gb::ablation h;
    h.heads = {{0, 1}, {2, 3}};
    expect_matches_reference(f, h, "heads 0.1,2.3");
    gb::ablation mixed;
    mixed.heads = {{1, 0}};
    mixed.no_residual = layers_on({2});
    mixed.no_layernorm = layers_on({1});
    expect_matches_reference(f, mixed, "head 1.0 + no-residual[2] + no-layernorm[1]");
    });
}

TEST(Forward, MatchesReferenceForDtypesPrefixAndUntiedHead) {
    for_each_matmul([] {
    for (const char* dtype : {"F16", "BF16"}) {
        tiny_spec s;
        s.dtype = dtype;
        s.prefix = true;
        s.tied = false;
        s.seed = 3;
        expect_matches_reference(tiny(std::string("dtype_") + dtype, s), {}, dtype);
    }
    });
}

TEST(Forward, HeadAblationKeepsPatternAndChangesOutput) {
    const auto& f = base_model();
    auto tokens = random_tokens(12, f.m.config.vocab_size, 5);
    gb::record a, b;
    gb::run_forward(a, f.m, tokens);
    gb::ablation ab;
    ab.heads = {{0, 2}};
    gb::run_forward(b, f.m, tokens, ab);
    // layer 0's patterns are computed before the ablation acts, so they are identical
    for (int h = 0; h < f.m.config.n_head; h++)
        for (int i = 0; i < 12 * 12; i++) ASSERT_FLOAT_EQ(a.head(0, h)[i], b.head(0, h)[i]);
    double diff = 0;
    for (size_t i = 0; i < a.logits.size(); i++) diff += std::abs(a.logits[i] - b.logits[i]);
    EXPECT_GT(diff, 1e-3) << "ablating a head must change the prediction";
}

TEST(Forward, AttentionRowsSumToOneAndAreCausal) {
    const auto& f = base_model();
    auto tokens = random_tokens(30, f.m.config.vocab_size, 9);
    gb::record cap;
    gb::run_forward(cap, f.m, tokens);
    const int n = cap.n_tokens;
    for (int l = 0; l < cap.n_layer; l++)
        for (int h = 0; h < cap.n_head; h++) {
            const float* p = cap.head(l, h);
            for (int i = 0; i < n; i++) {
                double s = 0;
                for (int j = 0; j < n; j++) {
                    if (j > i) {
                        ASSERT_EQ(p[i * n + j], 0.0f) << "L" << l << " H" << h << " above the diagonal";
                    }
                    ASSERT_GE(p[i * n + j], 0.0f);
                    s += p[i * n + j];
                }
                ASSERT_NEAR(s, 1.0, 1e-5) << "L" << l << " H" << h << " row " << i;
            }
        }
    EXPECT_EQ(cap.resid_norm.size(), (size_t)(2 * cap.n_layer + 1) * n);
    EXPECT_EQ(gb::resid_labels(2), (std::vector<std::string>{"embed", "L0 attn", "L0 mlp", "L1 attn", "L1 mlp"}));
}

TEST(Forward, NoAttentionMakesPositionsIndependent) {
    const auto& f = base_model();
    gb::ablation ab;
    ab.no_attention = layers_on({});
    gb::forward_options opt;
    opt.all_logits = true;
    auto a = random_tokens(16, f.m.config.vocab_size, 1);
    auto b = a;
    for (int t = 0; t < 10; t++) b[t] = (b[t] + 7) % f.m.config.vocab_size; // change earlier tokens only
    gb::record ca, cb;
    gb::run_forward(ca, f.m, a, ab, opt);
    gb::run_forward(cb, f.m, b, ab, opt);
    const int V = f.m.config.vocab_size;
    for (int t = 10; t < 16; t++)
        for (int v = 0; v < V; v++) ASSERT_FLOAT_EQ(ca.logits[t * V + v], cb.logits[t * V + v]) << "position " << t;
    // and without the ablation the same change does reach later positions
    gb::record na, nb;
    gb::run_forward(na, f.m, a, {}, opt);
    gb::run_forward(nb, f.m, b, {}, opt);
    double diff = 0;
    for (int v = 0; v < V; v++) diff += std::abs(na.logits[15 * V + v] - nb.logits[15 * V + v]);
    EXPECT_GT(diff, 1e-4);
}

TEST(Forward, ChunkedEvalEqualsOneShot) {
    const auto& f = base_model();
    auto tokens = random_tokens(20, f.m.config.vocab_size, 4);
    gb::ablation ab;
    ab.heads = {{1, 1}};
    ab.no_residual = layers_on({0});
    gb::record full;
    gb::run_forward(full, f.m, tokens, ab);
    gb::forward_state s;
    gb::state_init(s, f.m.config, 32);
    std::vector<float> logits;
    gb::forward_options opt;
    opt.interventions = gb::ablation_interventions(ab, f.m.config);
    gb::eval(logits, nullptr, s, f.m, tokens.data(), 13, opt);
    gb::eval(logits, nullptr, s, f.m, tokens.data() + 13, 7, opt);
    ASSERT_EQ(logits.size(), full.logits.size());
    for (size_t i = 0; i < logits.size(); i++) ASSERT_NEAR(logits[i], full.logits[i], 1e-4);
}

TEST(Generate, KvCacheGreedyEqualsFullRecompute) {
    const auto& f = base_model();
    auto prompt = random_tokens(5, f.m.config.vocab_size - 1, 2);
    for (bool ablate : {false, true}) {
        gb::ablation ab;
        if (ablate) ab.heads = {{0, 0}, {2, 1}};
        gb::sampling greedy;
        gb::generation g = gb::generate(f.m, prompt, 20, greedy, ab);
        std::vector<int> seq = prompt;
        for (size_t i = 0; i < g.ids.size(); i++) {
            gb::record cap;
            gb::run_forward(cap, f.m, seq, ab);
            const float* lg = cap.last_logits();
            int best = (int)(std::max_element(lg, lg + f.m.config.vocab_size) - lg);
            ASSERT_EQ(g.ids[i], best) << "step " << i;
            seq.push_back(best);
        }
        if (!g.hit_eos) {
            EXPECT_EQ(g.ids.size(), 20u);
        }
    }
}

TEST(Generate, SamplingIsSeededAndRespectsFilters) {
    const auto& f = base_model();
    auto prompt = random_tokens(4, f.m.config.vocab_size - 1, 8);
    gb::sampling sp;
    sp.temperature = 1.5f;
    sp.seed = 42;
    auto a = gb::generate(f.m, prompt, 15, sp);
    auto b = gb::generate(f.m, prompt, 15, sp);
    EXPECT_EQ(a.ids, b.ids) << "same seed, same tokens";
    gb::sampling k1 = sp;
    k1.top_k = 1;
    gb::sampling p0 = sp;
    p0.top_p = 1e-6f;
    auto greedy = gb::generate(f.m, prompt, 15, gb::sampling{});
    EXPECT_EQ(gb::generate(f.m, prompt, 15, k1).ids, greedy.ids) << "top-k 1 is greedy";
    EXPECT_EQ(gb::generate(f.m, prompt, 15, p0).ids, greedy.ids) << "tiny top-p is greedy";
    // sampling distribution: frequencies follow the softmax at temperature 1
    std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f};
    gb::sampling t1;
    t1.temperature = 1.0f;
    std::mt19937_64 rng(1);
    std::vector<int> count(4);
    for (int i = 0; i < 20000; i++) count[gb::sample_token(logits.data(), 4, t1, rng)]++;
    std::vector<float> p;
    gb::softmax_probs(p, logits.data(), 4);
    for (int i = 0; i < 4; i++) EXPECT_NEAR(count[i] / 20000.0, p[i], 0.015);
    // top-k 2 never picks the two least likely
    gb::sampling k2 = t1;
    k2.top_k = 2;
    for (int i = 0; i < 2000; i++) {
        int t = gb::sample_token(logits.data(), 4, k2, rng);
        ASSERT_TRUE(t == 0 || t == 1);
    }
}

TEST(Forward, TopKProbs) {
    std::vector<float> logits = {0.0f, 3.0f, 1.0f, 3.0f};
    auto top = gb::top_k_probs(logits.data(), 4, 3);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].id, 1); // ties broken by id
    EXPECT_EQ(top[1].id, 3);
    EXPECT_EQ(top[2].id, 2);
    double z = 2 * std::exp(3.0) + std::exp(1.0) + 1.0;
    EXPECT_NEAR(top[0].prob, std::exp(3.0) / z, 1e-6);
}

TEST(Forward, BadInputGivesClearErrors) {
    const auto& f = base_model();
    gb::record cap;
    expect_gb_error([&] { gb::run_forward(cap, f.m, random_tokens(49, 10, 1)); }, "too long");
    expect_gb_error([&] { gb::run_forward(cap, f.m, {}); }, "empty");
    expect_gb_error([&] { gb::run_forward(cap, f.m, {1, 99999}); }, "outside the vocabulary");
    gb::ablation bad;
    bad.no_residual = layers_on({7});
    expect_gb_error([&] { gb::run_forward(cap, f.m, {1, 2}, bad); }, "layer 7");
    gb::ablation bad_head;
    bad_head.heads = {{0, 9}};
    expect_gb_error([&] { gb::run_forward(cap, f.m, {1, 2}, bad_head); }, "0.9");
}

TEST(Forward, CaptureBudgetKeepsOnlyChosenLayers) {
    const auto& f = base_model();
    auto tokens = random_tokens(10, f.m.config.vocab_size, 3);
    gb::record full, part;
    gb::run_forward(full, f.m, tokens);
    gb::forward_options opt;
    opt.keep.layers = {0, 1, 0};
    gb::run_forward(part, f.m, tokens, {}, opt);
    EXPECT_EQ(part.flat(gb::HOOK_PATTERN).size(), (size_t)f.m.config.n_head * 100);
    EXPECT_EQ(part.head(0, 0), nullptr);
    ASSERT_NE(part.head(1, 2), nullptr);
    for (int i = 0; i < 100; i++) ASSERT_EQ(part.head(1, 2)[i], full.head(1, 2)[i]);
    for (size_t i = 0; i < full.logits.size(); i++) ASSERT_EQ(part.logits[i], full.logits[i]);
}

// A NaN weight keeps its matrix on the fp32 kernel (it has no fixed-point digits), which carries it through.
TEST(Forward, NonFiniteWeightsAreReportedWithTheirLayer) {
    for_each_matmul([] {
        tiny_spec s;
        s.seed = 5;
        gb::model m = gb::load_model(write_tiny_gpt2(test_temp_dir("forward_nan"), s).dir);
        gb::weight_matrix& down = m.weights.layers[1].w_down;
        std::vector<float> w = gb::unpack_matrix(down);
        w[3] = std::nanf("");
        down = gb::pack_matrix(w, down.in, down.out);
        EXPECT_FALSE(down.finite);
        EXPECT_FALSE(down.amx());
        gb::record cap;
        gb::run_forward(cap, m, {1, 2, 3});
        EXPECT_EQ(cap.nonfinite_layer, 1);
        EXPECT_EQ(cap.nonfinite_where, "L1 mlp");
    });
}

TEST(Forward, BudgetChoosesLayersAroundTheFocus) {
    gb::model_config c;
    c.n_layer = 12, c.n_head = 12, c.d_model = 768, c.d_head = 64, c.n_kv_head = 12, c.d_ff = 3072, c.vocab_size = 50257;
    // GPT-2 small at T = 1024: 12 * 12 * 1024^2 floats = 604 MB, more than 512 MB
    gb::record_request rq;
    rq.budget_bytes = 512u << 20;
    EXPECT_EQ(gb::plan_record(gb::record_request{}, c, 1024, 1).bytes, 603979776u);
    EXPECT_TRUE(gb::plan_record(rq, c, 256, 1).note.empty());
    rq.focus_layer = 5;
    gb::record_plan keep = gb::plan_record(rq, c, 1024, 1);
    EXPECT_EQ(std::count(keep.keep[gb::HOOK_PATTERN].begin(), keep.keep[gb::HOOK_PATTERN].end(), 1), 10); // 50 MB a layer
    EXPECT_EQ(keep.keep[gb::HOOK_PATTERN][5], 1);
    EXPECT_NE(keep.note.find("pattern of 10 of 12 layers kept (memory budget 512 MB)"), std::string::npos) << keep.note;
    rq.budget_bytes = 1;
    rq.focus_layer = 11;
    gb::record_plan one = gb::plan_record(rq, c, 1024, 1);
    EXPECT_EQ(std::count(one.keep[gb::HOOK_PATTERN].begin(), one.keep[gb::HOOK_PATTERN].end(), 1), 1);
    EXPECT_EQ(one.keep[gb::HOOK_PATTERN][11], 1);
}
