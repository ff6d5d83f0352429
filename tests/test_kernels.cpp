// The kernels against naive loops in double: each GEMM kernel (fp32, stored types, AMX, int8) on shapes that hit
// every edge of its blocking, the fused epilogues, the LM head's rows, the pinned thread team, and attention_cpu
// causal and not (split from test_forward.cpp, which checks the whole forward pass).
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
#include "test_util.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/threads.h"

// y [n][m] = x [n][k] * w [k][m] (+ bias) in double.
static std::vector<double> naive_product(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias,
                                  int n, int k, int m) {
    std::vector<double> y((size_t)n * m);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double s = bias.empty() ? 0.0 : bias[j];
            for (int t = 0; t < k; t++) s += (double)x[(size_t)i * k + t] * w[(size_t)t * m + j];
            y[(size_t)i * m + j] = s;
        }
    return y;
}

// Each kernel's GEMM against naive double loops, on shapes that hit every edge of its blocking: row counts
// below, at and past the register tiles (8 / 16 rows) and the row chunks and groups, inner sizes across
// slices and k-tiles (odd tile counts, partial tiles), partial last panels and column blocks.
TEST(Gemm, MatchesNaiveProductOnEveryEdge) {
    for_each_matmul([] {
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        gb::gemm_scratch scratch;
        for (int n : {1, 3, 8, 9, 16, 17, 130})
            for (int k : {1, 5, 64, 256, 300, 600, 3072})
                for (int m : {1, 7, 16, 48, 49, 100, 200}) {
                    if ((int64_t)n * k * m > 20000000) continue;
                    std::vector<float> x((size_t)n * k), w((size_t)k * m), bias(m), out((size_t)n * m, -7.0f);
                    for (float& v : x) v = u(rng);
                    for (float& v : w) v = u(rng);
                    for (float& v : bias) v = u(rng);
                    gb::weight_matrix wm = gb::pack_matrix(w, k, m);
                    ASSERT_EQ(wm.amx(), gb::matmul_kind_now() == gb::MATMUL_AMX);
                    const std::vector<float> back = gb::unpack_matrix(wm);
                    if (!wm.amx()) {
                        ASSERT_EQ(back, w);
                    }
                    for (int t = 0; wm.amx() && t < k; t++) { // fixed point: within 2^-30 of the row's largest weight
                        float row_max = 0;
                        for (int j = 0; j < m; j++) row_max = std::max(row_max, std::abs(w[(size_t)t * m + j]));
                        for (int j = 0; j < m; j++)
                            ASSERT_LE(std::abs(back[(size_t)t * m + j] - w[(size_t)t * m + j]), std::ldexp(row_max, -30))
                                << "row " << t << " col " << j;
                    }
                    const bool with_bias = (n + k + m) % 2;
                    gb::gemm(out.data(), x.data(), wm, with_bias ? bias : std::vector<float>{}, n, scratch);
                    const std::vector<double> ref = naive_product(x, w, with_bias ? bias : std::vector<float>{}, n, k, m);
                    double worst = 0;
                    for (size_t i = 0; i < ref.size(); i++)
                        worst = std::max(worst, std::abs(ref[i] - out[i]) / std::sqrt((double)k + 1));
                    ASSERT_LT(worst, 1e-5) << "n " << n << " k " << k << " m " << m;
                }
    });
}

// The fused GELU epilogue (GPT-2's MLP) equals bias then tanh-form GELU in double, on threaded and
// single-threaded sizes and on a partial last panel.
TEST(Gemm, GeluEpilogueMatchesNaiveGelu) {
    for_each_matmul([] {
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        gb::gemm_scratch scratch;
        for (int n : {1, 9, 64})
            for (int k : {7, 768})
                for (int m : {50, 3072}) {
                    std::vector<float> x((size_t)n * k), w((size_t)k * m), bias(m), out((size_t)n * m);
                    for (float& v : x) v = u(rng);
                    for (float& v : w) v = u(rng) / std::sqrt((float)k);
                    for (float& v : bias) v = u(rng);
                    gb::gemm(out.data(), x.data(), gb::pack_matrix(w, k, m), bias, n, scratch, gb::EPILOGUE_GELU);
                    const std::vector<double> ref = naive_product(x, w, bias, n, k, m);
                    double worst = 0;
                    for (size_t i = 0; i < ref.size(); i++) {
                        const double s = ref[i];
                        double g = 0.5 * s * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
                        worst = std::max(worst, std::abs(g - out[i]));
                    }
                    ASSERT_LT(worst, 1e-5) << "n " << n << " k " << k << " m " << m;
                }
    });
}

// The epilogue's GELU alone, element by element over [-60, 60] (both tails, the exp clamp), through a product
// with a one-element inner dimension and a unit weight. The double reference uses the sigmoid form
// s / (1 + e^(-2u)), equal to 0.5 s (1 + tanh u) but free of 1 + tanh's cancellation in double for s < -5.
// Tolerance: a float's rounding of u moves the left tail by a factor e^(2|u| eps), hence the (1 + 2|u|).
// (Both kernels carry a float input and a unit weight through the product exactly.)
TEST(Gemm, GeluEpilogueHoldsOverTheWholeRange) {
    for_each_matmul([] {
        const int n = 4001, m = 50;
        std::vector<float> x(n), w(m, 1.0f), out((size_t)n * m);
        gb::gemm_scratch scratch;
        for (int i = 0; i < n; i++) x[i] = -60.0f + 120.0f * i / (n - 1);
        gb::gemm(out.data(), x.data(), gb::pack_matrix(w, 1, m), {}, n, scratch, gb::EPILOGUE_GELU);
        for (int i = 0; i < n; i++) {
            const double s = x[i], u = std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s);
            const double g = s / (1.0 + std::exp(-2.0 * u));
            for (int j = 0; j < m; j += 7)
                ASSERT_LE(std::abs(out[(size_t)i * m + j] - g), 4e-7 * (1 + 2 * std::abs(u)) * std::abs(g) + 1e-30)
                    << "x " << s << " col " << j;
        }
    });
}

// Largest |error| of kind's GEMM against double, on x [n][k] and w [k][m].
static double kernel_error(gb::matmul_kind kind, const std::vector<float>& x, const std::vector<float>& w, int n, int k, int m) {
    gb::set_matmul_kind(kind);
    gb::gemm_scratch scratch;
    std::vector<float> out((size_t)n * m);
    gb::gemm(out.data(), x.data(), gb::pack_matrix(w, k, m), {}, n, scratch);
    const std::vector<double> ref = naive_product(x, w, {}, n, k, m);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); i++) worst = std::max(worst, std::abs(ref[i] - out[i]));
    return worst;
}

// The AMX kernel is as accurate as the fp32 one on the value distributions transformers have: Gaussian, a few
// input features 60x larger than the rest (GPT-2's residual outliers), weight rows 30x larger and sparse
// weights 20x larger, and GELU outputs (one-sided, many near zero). Its fixed point is relative to each
// row's and column's largest value, so outliers are where it would lose; the fp32 kernel loses to rounding
// over the whole inner dimension.
TEST(Gemm, AmxIsAsAccurateAsFp32OnTransformerLikeValues) {
    if (!amx_missing().empty()) GTEST_SKIP() << amx_missing();
    matmul_scope kernel(gb::MATMUL_AMX); // kernel_error switches between the two, this puts the default back
    const int n = 64, k = 768, m = 256;
    std::mt19937 rng(21);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> feature(k), row(k);
    for (int t = 0; t < k; t++) feature[t] = u(rng) < 0.005f ? 60.0f : 1.0f, row[t] = u(rng) < 0.01f ? 30.0f : 1.0f;
    for (int c = 0; c < 4; c++) {
        const bool x_outliers = c == 1 || c == 3, w_outliers = c >= 2;
        std::vector<float> x((size_t)n * k), w((size_t)k * m);
        for (size_t i = 0; i < x.size(); i++) x[i] = g(rng) * (x_outliers ? feature[i % k] : 1.0f);
        if (c == 0)
            for (float& v : x) v = std::max(v * 2.0f, -0.17f); // GELU-like
        for (size_t i = 0; i < w.size(); i++)
            w[i] = 0.02f * g(rng) * (w_outliers ? row[i / m] * (u(rng) < 0.001f ? 20.0f : 1.0f) : 1.0f);
        const double e_fp32 = kernel_error(gb::MATMUL_FP32, x, w, n, k, m);
        const double e_amx = kernel_error(gb::MATMUL_AMX, x, w, n, k, m);
        std::cout << "[ ERRORS   ] case " << c << ": AMX " << e_amx << ", fp32 " << e_fp32 << "\n";
        EXPECT_LE(e_amx, e_fp32) << "case " << c << ": AMX " << e_amx << ", fp32 " << e_fp32;
        EXPECT_GT(e_amx, 0.0) << "case " << c; // a test that compared two copies of one kernel would see 0
    }
}

// Rows the AMX kernel cannot scale (a NaN or an Inf in them) come out as NaN, the other rows are unaffected;
// rows of zeros, of subnormals, of values near the float limits come out as the double product says.
TEST(Gemm, AmxHandlesNonFiniteAndExtremeRows) {
    if (!amx_missing().empty()) GTEST_SKIP() << amx_missing();
    matmul_scope kernel(gb::MATMUL_AMX);
    const int k = 100, m = 40;
    std::mt19937 rng(8);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float scales[] = {1.0f, 0.0f, 1e-30f, 1e-42f /* subnormal */, 1e30f, 1.0f, 1.0f, 1e-5f};
    const int n = (int)(sizeof(scales) / sizeof(scales[0]));
    std::vector<float> x((size_t)n * k), w((size_t)k * m), out((size_t)n * m);
    for (int i = 0; i < n; i++)
        for (int t = 0; t < k; t++) x[(size_t)i * k + t] = u(rng) * scales[i];
    x[(size_t)5 * k + 17] = std::nanf("");
    x[(size_t)6 * k + 3] = -INFINITY;
    for (float& v : w) v = u(rng);
    for (int t = 0; t < k; t++) w[(size_t)t * m + 7] *= 1e-20f; // one tiny column
    gb::gemm_scratch scratch;
    gb::weight_matrix wm = gb::pack_matrix(w, k, m);
    ASSERT_TRUE(wm.amx());
    gb::gemm(out.data(), x.data(), wm, {}, n, scratch);
    const std::vector<double> ref = naive_product(x, w, {}, n, k, m);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            const float got = out[(size_t)i * m + j];
            if (i == 5 || i == 6) {
                EXPECT_TRUE(std::isnan(got)) << "row " << i;
                continue;
            }
            double mag = 0; // the size of the terms: the error scale of any float product
            for (int t = 0; t < k; t++) mag += std::abs((double)x[(size_t)i * k + t] * w[(size_t)t * m + j]);
            // subnormal inputs: the float result itself can only hold multiples of 2^-149
            EXPECT_LE(std::abs(got - ref[(size_t)i * m + j]), 1e-6 * mag + 1.5e-45) << "row " << i << " col " << j;
        }
}

// The int32 tile sums cannot overflow up to amx::max_in inputs: a product that long with every input and weight
// of one sign (the sums grow linearly) is right; a longer one stays on the fp32 kernel.
TEST(Gemm, AmxLongInnerDimension) {
    if (!amx_missing().empty()) GTEST_SKIP() << amx_missing();
    matmul_scope kernel(gb::MATMUL_AMX);
    const int k = 32768, m = 16, n = 2;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(0.5f, 1.0f);
    std::vector<float> x((size_t)n * k), w((size_t)k * m), out((size_t)n * m);
    for (float& v : x) v = -u(rng);
    for (float& v : w) v = u(rng);
    gb::gemm_scratch scratch;
    gb::weight_matrix wm = gb::pack_matrix(w, k, m);
    ASSERT_TRUE(wm.amx());
    gb::gemm(out.data(), x.data(), wm, {}, n, scratch);
    const std::vector<double> ref = naive_product(x, w, {}, n, k, m);
    for (size_t i = 0; i < ref.size(); i++) EXPECT_NEAR(out[i], ref[i], 1e-6 * std::abs(ref[i]));
    w.resize((size_t)(k + 1) * m, 0.5f);
    EXPECT_FALSE(gb::pack_matrix(w, k + 1, m).amx());
}

// The AMX digits hold exactly the documented fixed point (gemm_amx.cpp): each row k of W divided by its power of
// two r_k = ilogb(max |w[k][.]|), each column n then rounded to nearest even at 2^(c_n - 30), c_n = ilogb of its
// largest scaled value + 1. The reference in double on shapes with partial k-tiles and column blocks, zero rows
// and columns and magnitudes apart by 2^20; pack_matrix's W and pack_transposed's W^T (read transposed).
TEST(Gemm, AmxDigitsAreTheDocumentedFixedPoint) {
    if (!amx_missing().empty()) GTEST_SKIP() << amx_missing();
    matmul_scope kernel(gb::MATMUL_AMX);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // the packed values of w [in][out], in double
    auto expected = [](const std::vector<float>& w, int in, int out) {
        std::vector<double> rs(in);
        for (int k = 0; k < in; k++) {
            float m = 0;
            for (int n = 0; n < out; n++) m = std::max(m, std::abs(w[(size_t)k * out + n]));
            rs[k] = std::ldexp(1.0, m > 0 ? -std::ilogb(m) : 0);
        }
        std::vector<float> v((size_t)in * out);
        for (int n = 0; n < out; n++) {
            double m = 0;
            for (int k = 0; k < in; k++) m = std::max(m, std::abs(w[(size_t)k * out + n] * rs[k]));
            const int e = m > 0 ? std::ilogb(m) + 1 : 0;
            for (int k = 0; k < in; k++) {
                const double q = std::nearbyint(w[(size_t)k * out + n] * rs[k] * std::ldexp(1.0, 30 - e));
                v[(size_t)k * out + n] = (float)(q * std::ldexp(1.0, e - 30) / rs[k]);
            }
        }
        return v;
    };
    for (auto [in, out] : std::vector<std::pair<int, int>>{{1, 1}, {3, 17}, {64, 16}, {65, 33}, {130, 200}, {300, 48}}) {
        std::vector<float> w((size_t)in * out);
        for (size_t i = 0; i < w.size(); i++) w[i] = nd(rng) * (i % 5 == 0 ? 1e-6f : 1.0f) * (i % 7 == 0 ? 1e3f : 1.0f);
        if (in > 2) std::fill_n(w.begin() + out, out, 0.0f); // a zero row
        if (out > 2)
            for (int k = 0; k < in; k++) w[(size_t)k * out + 1] = 0.0f; // a zero column
        const std::string shape = std::to_string(in) + " x " + std::to_string(out);
        const gb::weight_matrix m = gb::pack_matrix(w, in, out);
        ASSERT_TRUE(m.amx()) << shape;
        EXPECT_EQ(gb::unpack_matrix(m), expected(w, in, out)) << shape;
        std::vector<float> wt((size_t)in * out); // W^T [out][in]
        for (int k = 0; k < in; k++)
            for (int n = 0; n < out; n++) wt[(size_t)n * in + k] = w[(size_t)k * out + n];
        const gb::weight_matrix t = gb::pack_transposed(w.data(), in, out, m.finite);
        ASSERT_TRUE(t.amx()) << shape;
        ASSERT_EQ(t.in, out);
        ASSERT_EQ(t.out, in);
        EXPECT_EQ(gb::unpack_matrix(t), expected(wt, out, in)) << shape << " transposed";
    }
}

// On the fp32 kernel pack_transposed holds W^T's values exactly, partial panels included.
TEST(Gemm, PackTransposedHoldsTheTranspose) {
    matmul_scope kernel(gb::MATMUL_FP32);
    std::mt19937 rng(12);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto [in, out] : std::vector<std::pair<int, int>>{{1, 1}, {5, 3}, {48, 16}, {100, 49}, {97, 130}}) {
        std::vector<float> w((size_t)in * out), wt((size_t)in * out);
        for (float& v : w) v = nd(rng);
        for (int k = 0; k < in; k++)
            for (int n = 0; n < out; n++) wt[(size_t)n * in + k] = w[(size_t)k * out + n];
        const gb::weight_matrix t = gb::pack_transposed(w.data(), in, out, true);
        ASSERT_FALSE(t.amx());
        EXPECT_EQ(gb::unpack_matrix(t), wt) << in << " x " << out;
    }
}

// Up to 4 rows the AMX kernel sums with VNNI dot products instead of tiles; both make the same integer level
// sums, so the first rows of a 17-row product (tiles) equal the same rows computed alone (VNNI) bit for bit,
// with the GELU epilogue too, on odd sizes.
TEST(Gemm, AmxFewRowsEqualTheTilePathBitForBit) {
    if (!amx_missing().empty()) GTEST_SKIP() << amx_missing();
    matmul_scope kernel(gb::MATMUL_AMX);
    std::mt19937 rng(12);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (int k : {70, 768})
        for (int m : {33, 300}) {
            std::vector<float> x((size_t)17 * k), w((size_t)k * m), bias(m);
            for (float& v : x) v = g(rng);
            for (float& v : w) v = 0.05f * g(rng);
            for (float& v : bias) v = g(rng);
            gb::weight_matrix wm = gb::pack_matrix(w, k, m);
            gb::gemm_scratch scratch;
            std::vector<float> all((size_t)17 * m);
            gb::gemm(all.data(), x.data(), wm, bias, 17, scratch, gb::EPILOGUE_GELU);
            for (int n = 1; n <= 4; n++) {
                std::vector<float> few((size_t)n * m);
                gb::gemm(few.data(), x.data(), wm, bias, n, scratch, gb::EPILOGUE_GELU);
                for (size_t i = 0; i < few.size(); i++)
                    ASSERT_EQ(few[i], all[i]) << "k " << k << " m " << m << " n " << n << " element " << i;
            }
        }
}

TEST(Gemm, ChoosingAKernelByName) {
    EXPECT_EQ(gb::parse_matmul_kind("fp32"), gb::MATMUL_FP32);
    EXPECT_EQ(gb::parse_matmul_kind("auto"), gb::amx_usable() ? gb::MATMUL_AMX : gb::MATMUL_FP32);
    expect_gb_error([] { gb::parse_matmul_kind("int4"); }, "matmul kernel 'int4' is unknown");
    if (!gb::amx_usable()) expect_gb_error([] { gb::set_matmul_kind(gb::MATMUL_AMX); }, "cannot run here");
}

// pinned_team (util/threads.h): inside it each thread of the caller's team runs on a CPU of its own, the caller
// among them; after it the caller's CPU set is what it was; a team of one, or the user's own placement, pins nothing.
TEST(Threads, PinnedTeamPutsOneThreadOnEachCpuAndGivesTheCallerBack) {
    cpu_set_t before;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
    const int n = omp_get_max_threads();
    if (n < 2 || CPU_COUNT(&before) < n || std::getenv("OMP_PROC_BIND") || std::getenv("OMP_PLACES"))
        GTEST_SKIP() << "needs a team of two or more on as many CPUs, and no OMP_PROC_BIND or OMP_PLACES";
    {
        gb::pinned_team pin;
        ASSERT_TRUE(pin.pinned());
        std::vector<int> cpu((size_t)n, -1);
#pragma omp parallel num_threads(n)
        {
            cpu_set_t s;
            pthread_getaffinity_np(pthread_self(), sizeof s, &s);
            if (CPU_COUNT(&s) == 1)
                for (int c = 0; c < CPU_SETSIZE; c++)
                    if (CPU_ISSET(c, &s)) cpu[(size_t)omp_get_thread_num()] = c;
        }
        const std::set<int> distinct(cpu.begin(), cpu.end());
        EXPECT_EQ(distinct.size(), (size_t)n);
        EXPECT_EQ(distinct.count(-1), 0u) << "a thread of the team is not on one CPU";
    }
    cpu_set_t after;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
    omp_set_num_threads(1);
    {
        gb::pinned_team one;
        EXPECT_FALSE(one.pinned());
    }
    omp_set_num_threads(n);
    setenv("OMP_PLACES", "cores", 1);
    {
        gb::pinned_team users;
        EXPECT_FALSE(users.pinned());
    }
    unsetenv("OMP_PLACES");
}

TEST(Gemm, LmHeadRowsMatchNaiveProduct) {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int d = 37, V = 1000;
    std::vector<float> emb((size_t)V * d);
    for (float& v : emb) v = u(rng);
    for (int n : {1, 2, 4, 5, 20}) {
        std::vector<float> x((size_t)n * d), out((size_t)n * V);
        for (float& v : x) v = u(rng);
        gb::gemm_rows_transposed(out.data(), x.data(), emb.data(), n, d, V);
        for (int i = 0; i < n; i++)
            for (int v = 0; v < V; v++) {
                double s = 0;
                for (int t = 0; t < d; t++) s += (double)x[(size_t)i * d + t] * emb[(size_t)v * d + t];
                ASSERT_NEAR(out[(size_t)i * V + v], s, 1e-5) << "n " << n << " v " << v;
            }
    }
}

// ---- attention_cpu against a naive double loop (causal and non-causal) ----

namespace {

struct naive_attention_case {
    int T, n_past, H, KV, dh;
    bool causal = true;
    float softcap = 0, scale = 0;
    int window = 0;
};

// q [T][H*dh], k and v [n_past+T][KV*dh] (no gaps), the probabilities [H][T][n_kv] and outputs [T][H*dh] in
// double, one query and one key at a time, straight from the definition.
void naive_attention(const naive_attention_case& c, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, std::vector<double>& probs, std::vector<double>& out) {
    const int n_kv = c.n_past + c.T, group = c.H / c.KV;
    const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt((double)c.dh);
    probs.assign((size_t)c.H * c.T * n_kv, 0.0);
    out.assign((size_t)c.T * c.H * c.dh, 0.0);
    for (int h = 0; h < c.H; h++)
        for (int i = 0; i < c.T; i++) {
            const int pos = c.n_past + i;
            std::vector<double> s(n_kv, -INFINITY);
            double mx = -INFINITY;
            for (int j = 0; j < n_kv; j++) {
                if (c.causal && (j > pos || (c.window > 0 && pos - j >= c.window))) continue;
                double dot = 0;
                for (int d = 0; d < c.dh; d++)
                    dot += (double)q[(size_t)i * c.H * c.dh + h * c.dh + d] * k[(size_t)j * c.KV * c.dh + (h / group) * c.dh + d];
                s[j] = dot * scale;
                if (c.softcap > 0) s[j] = c.softcap * std::tanh(s[j] / c.softcap);
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (int j = 0; j < n_kv; j++) sum += std::isfinite(s[j]) ? std::exp(s[j] - mx) : 0.0;
            double* p = &probs[((size_t)h * c.T + i) * n_kv];
            for (int j = 0; j < n_kv; j++) p[j] = std::isfinite(s[j]) ? std::exp(s[j] - mx) / sum : 0.0;
            for (int d = 0; d < c.dh; d++) {
                double o = 0;
                for (int j = 0; j < n_kv; j++) o += p[j] * v[(size_t)j * c.KV * c.dh + (h / group) * c.dh + d];
                out[(size_t)i * c.H * c.dh + h * c.dh + d] = o;
            }
        }
}

struct attention_run {
    std::vector<float> q, k, v, probs, out;
};

// Random q, k, v for the case and attention_cpu's probabilities and outputs.
attention_run run_attention_cpu(const naive_attention_case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n_kv = c.n_past + c.T;
    attention_run r;
    r.q.resize((size_t)c.T * c.H * c.dh), r.k.resize((size_t)n_kv * c.KV * c.dh), r.v.resize(r.k.size());
    for (auto* b : {&r.q, &r.k, &r.v})
        for (float& x : *b) x = nd(rng);
    r.probs.assign((size_t)c.H * c.T * n_kv, -1.0f); // -1: an entry attention_cpu never wrote shows
    r.out.assign((size_t)c.T * c.H * c.dh, -1.0f);
    gb::attention_args a{r.q.data(), r.k.data(), r.v.data(), c.H * c.dh, c.KV * c.dh, c.T, c.n_past, c.H, c.KV, c.dh,
                         r.probs.data(), r.out.data(), c.H * c.dh};
    a.causal = c.causal, a.softcap = c.softcap, a.scale = c.scale, a.window = c.window;
    gb::attention_cpu(a);
    return r;
}

std::string describe(const naive_attention_case& c) {
    std::ostringstream o;
    o << (c.causal ? "causal" : "non-causal") << " T " << c.T << " n_past " << c.n_past << " heads " << c.H << "/"
      << c.KV << " d_head " << c.dh << " softcap " << c.softcap << " window " << c.window;
    return o.str();
}

double max_abs_err(const std::vector<float>& got, const std::vector<double>& want) {
    if (got.size() != want.size()) return INFINITY;
    double w = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!std::isfinite(got[i])) return INFINITY;
        w = std::max(w, std::abs(got[i] - want[i]));
    }
    return w;
}

} // namespace

TEST(Attention, CpuEqualsNaiveLoopCausalAndNot) {
    // T 1..4 take the direct-scores path, longer ones the tiled one (8-row score blocks, 4-row value blocks:
    // 13 and 37 end in partial blocks); d_head 8 and 20 are not whole vectors (V is copied padded)
    double worst_p = 0, worst_o = 0;
    int n = 0;
    for (bool causal : {false, true})
        for (int T : {1, 3, 13, 37})
            for (int dh : {8, 16, 20, 64})
                for (auto [H, KV] : {std::pair<int, int>{4, 4}, {6, 2}})
                    for (int n_past : {0, 11})
                        for (float softcap : {0.0f, 2.0f}) {
                            naive_attention_case c{T, n_past, H, KV, dh, causal, softcap, softcap > 0 ? 0.4f : 0.0f};
                            attention_run r = run_attention_cpu(c, (uint32_t)(++n * 7919));
                            std::vector<double> p, o;
                            naive_attention(c, r.q, r.k, r.v, p, o);
                            const double ep = max_abs_err(r.probs, p), eo = max_abs_err(r.out, o);
                            ASSERT_LT(ep, 2e-6) << "probabilities, " << describe(c);
                            ASSERT_LT(eo, 1e-5) << "outputs, " << describe(c);
                            worst_p = std::max(worst_p, ep), worst_o = std::max(worst_o, eo);
                        }
    std::printf("%d cases: max |attention_cpu - naive| probabilities %.3g, outputs %.3g\n", n, worst_p, worst_o);
    // and a sliding window (causal only) against the same loop
    for (int window : {1, 5, 30}) {
        naive_attention_case c{37, 11, 4, 2, 16, true, 0, 0, window};
        attention_run r = run_attention_cpu(c, (uint32_t)window);
        std::vector<double> p, o;
        naive_attention(c, r.q, r.k, r.v, p, o);
        EXPECT_LT(max_abs_err(r.probs, p), 2e-6) << describe(c);
        EXPECT_LT(max_abs_err(r.out, o), 1e-5) << describe(c);
    }
}

TEST(Attention, NonCausalRowsSumToOneOverEveryKey) {
    for (int T : {3, 29}) { // the direct path and the tiled one
        naive_attention_case c{T, 5, 4, 2, 16, false};
        attention_run r = run_attention_cpu(c, 17);
        expect_full_rows(r.probs, c.H, c.T, c.n_past, "T " + std::to_string(T));
    }
}

TEST(Attention, NonCausalValuesFromGivenProbabilitiesUseEveryKey) {
    // attention_values_cpu (a hook changed the pattern): uniform probabilities over all keys give the mean of V,
    // keys above the diagonal included
    for (int T : {2, 21}) {
        naive_attention_case c{T, 3, 4, 2, 8, false};
        attention_run r = run_attention_cpu(c, 23);
        const int n_kv = c.n_past + c.T;
        std::fill(r.probs.begin(), r.probs.end(), 1.0f / n_kv);
        gb::attention_args a{r.q.data(), r.k.data(), r.v.data(), c.H * c.dh, c.KV * c.dh, c.T, c.n_past, c.H, c.KV, c.dh,
                             r.probs.data(), r.out.data(), c.H * c.dh};
        a.causal = false;
        gb::attention_values_cpu(a);
        for (int i = 0; i < c.T; i++)
            for (int h = 0; h < c.H; h++)
                for (int d = 0; d < c.dh; d++) {
                    double mean = 0;
                    for (int j = 0; j < n_kv; j++) mean += r.v[(size_t)j * c.KV * c.dh + (h / (c.H / c.KV)) * c.dh + d];
                    ASSERT_NEAR(r.out[(size_t)i * c.H * c.dh + h * c.dh + d], mean / n_kv, 1e-5)
                        << "T " << T << " row " << i << " head " << h << " dim " << d;
                }
    }
}

TEST(Attention, NonCausalWithAWindowIsAnError) {
    std::vector<float> x(64, 0.5f), probs(64), out(64);
    gb::attention_args a{x.data(), x.data(), x.data(), 8, 8, 2, 0, 1, 1, 8, probs.data(), out.data(), 8};
    a.causal = false, a.window = 4;
    expect_gb_error([&] { gb::attention_cpu(a); }, "non-causal");
    expect_gb_error([&] { gb::attention_values_cpu(a); }, "non-causal");
    a.window = 0;
    gb::attention_cpu(a); // and without the window it runs
    EXPECT_NEAR(probs[0] + probs[1], 1.0f, 1e-6);
    EXPECT_GT(probs[1], 0.0f); // query 0 sees key 1
}
