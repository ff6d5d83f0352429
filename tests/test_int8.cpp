// The int8 kernel (--matmul int8, core/kernels/gemm_int8.h): Q4_K products with activations rounded to 8 bits.
// Against plain loops written here from the file's own blocks (not the panels): the same bits; against the exact
// product in double: within the rounding's bound; NaN rows, the epilogue, a whole forward, and the option.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "io/gguf_writer.h"
#include "io/loader.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "model/quant.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/half.h"

namespace {

std::string int8_missing() {
    std::string why;
    gb::int8_usable(&why);
    return why;
}

// [out][in] Q4_K blocks (out-major, as GGUF holds a Linear), random levels and 6-bit scales, small f16 d and dmin
std::vector<uint8_t> random_q4k(int out, int in, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    std::vector<uint8_t> b((size_t)out * (in / 256) * 144);
    for (size_t at = 0; at < b.size(); at += 144) {
        for (int i = 0; i < 144; i++) b[at + i] = (uint8_t)byte(rng);
        for (int h : {0, 2}) {
            const uint16_t d = gb::f32_to_f16(scale(rng));
            b[at + h] = d & 0xff, b[at + h + 1] = d >> 8;
        }
    }
    return b;
}

// The kernel's arithmetic in plain loops on the GGUF blocks: each row's block of 256 rounded to 8 bits, integer
// sums per sub-block, then t = d * tot, t -= dmin * mins (one rounding), acc += s * t (one rounding), + bias
std::vector<float> reference(const float* x, int n, int K, const std::vector<uint8_t>& q4, int M, const float* bias) {
    std::vector<float> out((size_t)n * M);
    const int nb = K / 256;
    for (int r = 0; r < n; r++) {
        std::vector<int> xq(K);
        std::vector<float> xs(nb);
        for (int b = 0; b < nb; b++) {
            float amax = 0;
            bool finite = true;
            for (int i = 0; i < 256; i++) amax = std::max(amax, std::fabs(x[(size_t)r * K + b * 256 + i])),
                                          finite &= std::isfinite(x[(size_t)r * K + b * 256 + i]);
            xs[b] = finite ? amax / 127.0f : NAN;
            const float inv = finite && amax > 0 ? 127.0f / amax : 0.0f;
            for (int i = 0; i < 256; i++) xq[b * 256 + i] = finite ? (int)std::nearbyint(x[(size_t)r * K + b * 256 + i] * inv) : 0;
        }
        for (int c = 0; c < M; c++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t* blk = q4.data() + ((size_t)c * nb + b) * 144;
                uint16_t h0, h1;
                std::memcpy(&h0, blk, 2), std::memcpy(&h1, blk + 2, 2);
                const uint8_t* s12 = blk + 4;
                int64_t tot = 0, mins = 0;
                for (int s = 0; s < 8; s++) {
                    const int sc = s < 4 ? s12[s] & 63 : (s12[s + 4] & 0xF) | ((s12[s - 4] >> 6) << 4);
                    const int m = s < 4 ? s12[s + 4] & 63 : (s12[s + 4] >> 4) | ((s12[s] >> 6) << 4);
                    int64_t dot = 0, sum = 0;
                    for (int l = 0; l < 32; l++) { // value 32 s + l: byte 32 (s / 2) + l, low nibble for even s
                        const uint8_t byte = blk[16 + 32 * (s / 2) + l];
                        const int q = s % 2 ? byte >> 4 : byte & 0xF, a = xq[b * 256 + 32 * s + l];
                        dot += q * a, sum += a;
                    }
                    tot += sc * dot, mins += m * sum;
                }
                float t = gb::f16_to_f32(h0) * (float)tot;
                t = std::fmaf(-gb::f16_to_f32(h1), (float)mins, t);
                acc = std::fmaf(xs[b], t, acc);
            }
            out[(size_t)r * M + c] = bias ? acc + bias[c] : acc;
        }
    }
    return out;
}

// The int8 path for a scope (the sums on VNNI or on AMX tiles), restored after
struct int8_path_scope {
    gb::int8_path before = gb::int8_path_now();
    explicit int8_path_scope(gb::int8_path p) { gb::set_int8_path(p); }
    ~int8_path_scope() { gb::set_int8_path(before); }
};
// The paths this machine runs: VNNI, and AMX where the CPU and OS allow it
std::vector<gb::int8_path> paths_here() {
    if (gb::int8_amx_usable()) return {gb::INT8_VNNI, gb::INT8_AMX};
    return {gb::INT8_VNNI};
}
// Equal bits, NaN included
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

gb::weight_matrix pack(const std::vector<uint8_t>& q4, int M, int K) {
    gb::matrix_part p;
    p.type = gb::GGML_Q4_K, p.data = q4.data(), p.out = M, p.out_major = true;
    return gb::pack_parts({p}, K);
}

} // namespace

TEST(Int8, Q4kProductsEqualPlainLoopsBitForBitAndStayWithinTheRoundingBound) {
    if (!int8_missing().empty()) GTEST_SKIP() << int8_missing();
    matmul_scope k(gb::MATMUL_INT8);
    for (gb::int8_path path : paths_here()) {
    SCOPED_TRACE(std::string("path ") + gb::int8_path_name(path));
    int8_path_scope ps(path);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int K : {256, 768})
        for (int M : {48, 100, 200})
            for (int n : {1, 3, 8, 9, 20}) {
                SCOPED_TRACE("K " + std::to_string(K) + " M " + std::to_string(M) + " n " + std::to_string(n));
                const std::vector<uint8_t> q4 = random_q4k(M, K, (uint32_t)(K + M + n));
                const gb::weight_matrix w = pack(q4, M, K);
                ASSERT_TRUE(w.int8);
                if (n == 1) { // the values the backward and the writers read back (dequantize_slice)
                    std::vector<float> wf((size_t)M * K);
                    gb::dequantize(wf.data(), q4.data(), gb::GGML_Q4_K, (int64_t)M * K);
                    const std::vector<float> back = gb::unpack_matrix(w);
                    for (int k = 0; k < K; k++)
                        for (int c = 0; c < M; c++) ASSERT_EQ(back[(size_t)k * M + c], wf[(size_t)c * K + k]) << k << "," << c;
                }
                std::vector<float> x((size_t)n * K), bias(M);
                for (float& v : x) v = nd(rng);
                for (int i = 0; i < K; i += 37) x[i] *= 30.0f; // outliers: a block's step follows its largest value
                for (float& v : bias) v = nd(rng);
                if (n > 3) std::fill_n(x.begin() + 2 * K, 256, 0.0f); // a block of zeros
                std::vector<float> out((size_t)n * M, -1.0f);
                gb::gemm_scratch s;
                gb::gemm(out.data(), x.data(), w, bias, n, s);
                const std::vector<float> want = reference(x.data(), n, K, q4, M, bias.data());
                for (size_t i = 0; i < out.size(); i++) ASSERT_EQ(out[i], want[i]) << "at " << i;
                // against the exact product: each input errs by at most half its block's step
                std::vector<float> wf((size_t)M * K);
                gb::dequantize(wf.data(), q4.data(), gb::GGML_Q4_K, (int64_t)M * K);
                for (int r = 0; r < n; r++)
                    for (int c = 0; c < M; c++) {
                        double exact = bias[c], bound = 0;
                        for (int b = 0; b < K / 256; b++) {
                            double amax = 0, wsum = 0;
                            for (int i = 0; i < 256; i++) {
                                const double xv = x[(size_t)r * K + b * 256 + i], wv = wf[(size_t)c * K + b * 256 + i];
                                exact += xv * wv, amax = std::max(amax, std::fabs(xv)), wsum += std::fabs(wv);
                            }
                            bound += amax / 127.0 / 2.0 * wsum;
                        }
                        ASSERT_LE(std::fabs(out[(size_t)r * M + c] - exact), bound * 1.001 + 1e-4 * std::fabs(exact) + 1e-6);
                    }
            }
    }
}

// The LM head of a Q4_K table under --matmul int8 (the file's rows, one per output; pack_head marks it): the plain
// loops' bits for every position count (4 a pass over the table), an odd number of rows, a row of NaN and a block
// of zeros; under fp32 the same table keeps the exact head.
TEST(Int8, TheQ4kLmHeadEqualsPlainLoopsBitForBit) {
    if (!int8_missing().empty()) GTEST_SKIP() << int8_missing();
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int K = 512, V = 301;
    const std::vector<uint8_t> q4 = random_q4k(V, K, 5);
    auto keep = std::make_shared<std::vector<uint8_t>>(q4);
    const gb::row_table t = gb::table_view(gb::GGML_Q4_K, keep->data(), V, K, keep);
    {
        matmul_scope k(gb::MATMUL_FP32);
        EXPECT_FALSE(gb::pack_head(t).int8);
    }
    matmul_scope k(gb::MATMUL_INT8);
    const gb::weight_matrix head = gb::pack_head(t);
    ASSERT_TRUE(head.int8);
    for (int n : {1, 2, 4, 5, 9}) {
        SCOPED_TRACE("n " + std::to_string(n));
        std::vector<float> x((size_t)n * K);
        for (float& v : x) v = nd(rng);
        for (int i = 0; i < (int)x.size(); i += 41) x[i] *= 25.0f;
        if (n > 1) std::fill_n(x.begin() + K + 256, 256, 0.0f); // position 1's second block: zeros
        if (n > 4) x[(size_t)4 * K + 3] = NAN;                   // position 4: NaN
        std::vector<float> got((size_t)n * V, -1.0f);
        gb::gemm_scratch s;
        gb::gemm_head(got.data(), x.data(), head, t, n, s);
        const std::vector<float> want = reference(x.data(), n, K, q4, V, nullptr);
        for (size_t i = 0; i < got.size(); i++) ASSERT_TRUE(same_bits(got[i], want[i])) << "at " << i << ": " << got[i] << " " << want[i];
    }
}

// The AMX path's integer sums are VNNI's, so its floats are VNNI's and the plain loops' bit for bit: on prompts of
// every row count around the 16-row tile (one token and up to 8 take VNNI rows on both paths), columns not a
// multiple of 16 or of the panel, rows with NaN or Inf anywhere in a tile, and the largest sums the format allows.
TEST(Int8Amx, SumsOnAmxTilesGiveVnnisBitsAndThePlainLoops) {
    std::string why;
    if (!gb::int8_amx_usable(&why)) GTEST_SKIP() << "no AMX-INT8 here, only the VNNI path is tested: " << why;
    matmul_scope k(gb::MATMUL_INT8);
    std::mt19937 rng(19);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int K : {256, 1024})
        for (int M : {16, 37, 100, 130})
            for (int n : {1, 8, 9, 15, 16, 17, 31, 33, 64, 70}) {
                SCOPED_TRACE("K " + std::to_string(K) + " M " + std::to_string(M) + " n " + std::to_string(n));
                std::vector<uint8_t> q4 = random_q4k(M, K, (uint32_t)(3 * K + M + 7 * n));
                if (M == 37) // the largest sums: every level 15, every scale and min 63, d and dmin kept
                    for (size_t at = 0; at < q4.size(); at += 144) std::fill(q4.begin() + at + 4, q4.begin() + at + 144, 0xFF);
                const gb::weight_matrix w = pack(q4, M, K);
                ASSERT_TRUE(w.int8);
                std::vector<float> x((size_t)n * K), bias(M);
                for (float& v : x) v = nd(rng);
                for (float& v : bias) v = nd(rng);
                if (M == 37)
                    for (int r = 0; r < n; r++) // every input +-amax: each rounds to +-127
                        for (int i = 0; i < K; i++) x[(size_t)r * K + i] = (r + i) % 3 ? 2.0f : -2.0f;
                if (n > 3) x[(size_t)3 * K + K / 2] = NAN;                // in the first tile
                if (n > 16) x[(size_t)(n - 1) * K + 7] = INFINITY;        // in the last, partial or whole
                if (n > 9) std::fill_n(x.begin() + (size_t)9 * K, 256, 0.0f); // a block of zeros
                const std::vector<float> want = reference(x.data(), n, K, q4, M, bias.data());
                std::vector<float> vnni((size_t)n * M, -1.0f), amx((size_t)n * M, -2.0f);
                gb::gemm_scratch s;
                {
                    int8_path_scope p(gb::INT8_VNNI);
                    gb::gemm(vnni.data(), x.data(), w, bias, n, s);
                }
                {
                    int8_path_scope p(gb::INT8_AMX);
                    ASSERT_EQ(gb::int8_path_now(), gb::INT8_AMX);
                    gb::gemm(amx.data(), x.data(), w, bias, n, s); // the same scratch: rows padded afresh
                }
                for (size_t i = 0; i < want.size(); i++) {
                    ASSERT_TRUE(same_bits(amx[i], vnni[i])) << "at " << i << ": amx " << amx[i] << " vnni " << vnni[i];
                    ASSERT_TRUE(same_bits(amx[i], want[i]) || (std::isnan(amx[i]) && std::isnan(want[i])))
                        << "at " << i << ": amx " << amx[i] << " plain " << want[i];
                }
                if (n > 3) {
                    for (int c = 0; c < M; c++) ASSERT_TRUE(std::isnan(amx[(size_t)3 * M + c]));
                }
            }
}

TEST(Int8Amx, ThePathNamesItselfAndAmxIsRefusedWhereItCannotRun) {
#if defined(__AVX512F__)
    EXPECT_STREQ(gb::int8_path_name(gb::INT8_VNNI), "vnni");
#else
    EXPECT_STREQ(gb::int8_path_name(gb::INT8_VNNI), "avx2") << "a build for AVX2: the row kernel's AVX2 form";
#endif
    EXPECT_STREQ(gb::int8_path_name(gb::INT8_AMX), "amx");
    std::string why;
    if (gb::int8_amx_usable(&why)) {
        int8_path_scope p(gb::INT8_AMX);
        EXPECT_EQ(gb::int8_path_now(), gb::INT8_AMX);
    } else {
        EXPECT_FALSE(why.empty());
        expect_gb_error([] { gb::set_int8_path(gb::INT8_AMX); }, "the int8 kernel's AMX path cannot run here");
    }
    int8_path_scope p(gb::INT8_VNNI); // VNNI can always be asked for: the int8 kernel's own check decides
    EXPECT_EQ(gb::int8_path_now(), gb::INT8_VNNI);
}

TEST(Int8, ARowWithNanGivesNanAndLeavesTheOthersAlone) {
    if (!int8_missing().empty()) GTEST_SKIP() << int8_missing();
    matmul_scope k(gb::MATMUL_INT8);
    const int K = 512, M = 60, n = 4;
    const std::vector<uint8_t> q4 = random_q4k(M, K, 3);
    const gb::weight_matrix w = pack(q4, M, K);
    std::vector<float> x((size_t)n * K, 0.25f);
    x[(size_t)1 * K + 300] = NAN;
    x[(size_t)2 * K + 5] = INFINITY;
    std::vector<float> out((size_t)n * M);
    gb::gemm_scratch s;
    gb::gemm(out.data(), x.data(), w, {}, n, s);
    const std::vector<float> want = reference(x.data(), n, K, q4, M, nullptr);
    for (int c = 0; c < M; c++) {
        EXPECT_EQ(out[c], want[c]);
        EXPECT_TRUE(std::isnan(out[(size_t)1 * M + c]));
        EXPECT_TRUE(std::isnan(out[(size_t)2 * M + c]));
        EXPECT_EQ(out[(size_t)3 * M + c], want[(size_t)3 * M + c]);
    }
}

TEST(Int8, GeluEpilogueIsTheFp32KernelsOnTheSums) {
    if (!int8_missing().empty()) GTEST_SKIP() << int8_missing();
    matmul_scope k(gb::MATMUL_INT8);
    const int K = 256, M = 96, n = 5;
    const std::vector<uint8_t> q4 = random_q4k(M, K, 11);
    const gb::weight_matrix w = pack(q4, M, K);
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x((size_t)n * K), bias(M), plain((size_t)n * M), gelu((size_t)n * M);
    for (float& v : x) v = nd(rng);
    for (float& v : bias) v = nd(rng);
    gb::gemm_scratch s;
    gb::gemm(plain.data(), x.data(), w, bias, n, s);
    gb::gemm(gelu.data(), x.data(), w, bias, n, s, gb::EPILOGUE_GELU);
    for (size_t i = 0; i < plain.size(); i++) {
        const double v = plain[i], g = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        EXPECT_NEAR(gelu[i], g, 1e-5 * (1.0 + std::fabs(g)));
    }
}

TEST(Int8, AQ4kForwardStaysCloseToTheExactOneAndOtherTypesStayExact) {
    if (!int8_missing().empty()) GTEST_SKIP() << int8_missing();
    gb::model_config shape;
    shape.n_layer = 2, shape.n_head = 4, shape.n_kv_head = 2, shape.d_model = 256, shape.d_ff = 512;
    shape.vocab_size = 300, shape.n_ctx = 64;
    const std::string dir = test_temp_dir("int8_forward");
    std::vector<int> tokens;
    for (int i = 0; i < 24; i++) tokens.push_back((i * 37 + 5) % 300);
    for (uint32_t type : {gb::GGML_Q4_K, gb::GGML_Q8_0}) {
        SCOPED_TRACE(gb::ggml_type_name(type));
        const std::string path = dir + "/" + gb::ggml_type_name(type) + ".gguf";
        gb::random_gguf_options o;
        o.type = type, o.seed = 5;
        gb::write_random_gguf(path, gb::random_gguf_config("llama", shape), o);
        auto logits = [&](gb::matmul_kind kind) {
            matmul_scope k(kind); // chosen before the weights are packed
            const gb::model m = gb::load_model(path);
            EXPECT_EQ(m.weights.layers[0].w_down.int8, kind == gb::MATMUL_INT8 && type == gb::GGML_Q4_K);
            gb::forward_options fo;
            fo.all_logits = true;
            gb::record r;
            gb::run_forward(r, m, tokens, {}, fo);
            return r.logits;
        };
        const std::vector<float> exact = logits(gb::MATMUL_FP32), fast = logits(gb::MATMUL_INT8);
        ASSERT_EQ(exact.size(), fast.size());
        if (type != gb::GGML_Q4_K) {
            EXPECT_EQ(exact, fast); // only Q4_K products change
            continue;
        }
        double worst = 0, scale = 0;
        int differ = 0;
        for (size_t i = 0; i < exact.size(); i++)
            worst = std::max(worst, (double)std::fabs(exact[i] - fast[i])), scale = std::max(scale, (double)std::fabs(exact[i])),
            differ += exact[i] != fast[i];
        EXPECT_GT(differ, 0);           // the kernel ran
        EXPECT_LT(worst, 0.03 * scale); // and stayed close
    }
}

TEST(Int8, TheOptionNamesItselfAndIsRefusedWhereItCannotRun) {
    EXPECT_EQ(gb::parse_matmul_kind("int8"), gb::MATMUL_INT8);
    EXPECT_STREQ(gb::matmul_name(gb::MATMUL_INT8), "int8");
    if (!int8_missing().empty()) expect_gb_error([] { gb::set_matmul_kind(gb::MATMUL_INT8); }, "the int8 matmul kernel cannot run here");
    matmul_scope k(gb::MATMUL_FP32);
    const std::vector<uint8_t> q4 = random_q4k(48, 256, 1);
    EXPECT_FALSE(pack(q4, 48, 256).int8); // packed under fp32: exact whatever the kernel becomes later
}
