// The int8 kernel: Q4_K weights times activations rounded to 8 bits, on AVX-512 VNNI (gemm_int8.h).
//
// For one row, one column and one Q4_K block (256 inputs, 8 sub-blocks s of 32; weight d sc_s q - dmin m_s with
// q in 0..15 and sc_s, m_s in 0..63) and the row's block rounded to s_x * x_q:
//   sum = s_x * (d * sum_s sc_s (q . x_q)_s  -  dmin * sum_s m_s sum(x_q)_s)
// Both inner sums are integers, exact in int32 (|q . x_q| <= 32 * 15 * 127, times 63, times 8 < 2^31). Three
// float operations a block follow: t = d * float(tot); t = t - dmin * float(mins) (one rounding); acc += s_x * t
// (one rounding). tests/test_int8.cpp repeats them on the file's blocks, and gets the same bits.
//
// Per panel (NR columns) and block, the panel's interleaved levels (stored_panels.h k4_put) are turned once into the
// layout vpdpbusd reads: for each sub-block s and group t of 4 inputs, [NR][4] nibbles, so that one 32-bit lane
// holds a column's 4 levels. That block tile (15 KB) stays in L1 while every row block passes over it; each row's
// 4 activations are one broadcast. The rows' running sums [n][NR] stay in a second, per-thread buffer.
//
// On the AMX path (more than RB rows, gemm.h int8_path_now() == INT8_AMX) the same tile's levels are the B operand
// of TDPBSUD and the rows' rounded inputs its A operand, 16 rows at a time (gemm_int8_amx.cpp); that gives the
// same int32 sums per row, column and block, and fold_sums then does fold_block's float operations on them.
#include "kernels/gemm_int8.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "kernels/gemm_int8_amx.h"
#include "kernels/gemm_tile.h"
#include "kernels/stored_values.h" // k4_fields
#include "util/error.h"
#include "util/half.h"

namespace gb::int8 {

#if defined(__x86_64__) && defined(__AVX512F__)
#define GLASSBOX_INT8 1
#elif defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define GLASSBOX_INT8_AVX2 1 // a build for AVX2 without AVX-512: the same sums from vpmaddubsw and vpmaddwd
#endif

const char* row_path_name() {
#if defined(GLASSBOX_INT8_AVX2)
    return "avx2";
#else
    return "vnni";
#endif
}

bool detect(std::string& why) {
#if defined(GLASSBOX_INT8)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return why = "the CPU reports no extended features", false;
    const unsigned avx512 = (1u << 16) | (1u << 30) | (1u << 31); // F, BW, VL
    if ((b & avx512) != avx512) return why = "the CPU has no AVX-512 (F, BW, VL)", false;
    if (!(c & (1u << 11))) return why = "the CPU has no AVX-512 VNNI", false;
    if (!(c & (1u << 1))) return why = "the CPU has no AVX-512 VBMI", false;
    return true; // the build is for AVX-512 (__AVX512F__), so the OS saves its state
#elif defined(GLASSBOX_INT8_AVX2)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return why = "the CPU reports no features", false;
    if (!(c & (1u << 12)) || !(c & (1u << 29))) return why = "the CPU has no FMA or F16C", false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 5))) return why = "the CPU has no AVX2", false;
    return true; // the build is for AVX2 (__AVX2__), so the OS saves its state
#else
    why = "this build has no int8 kernel (it needs an AVX-512 build, -march with AVX-512)";
    return false;
#endif
}

// One row x [K] -> q [K] (int8), scale [K/256] (s; NaN for a block holding NaN or Inf, whose q are 0) and
// sums [K/32] (each 32 q's sum, int16) (used by the AVX-512 and AVX2 kernels)
[[maybe_unused]] static void quantize_row(int8_t* q, float* scale, int16_t* sums, const float* x, int K) {
    for (int b = 0; b < K / 256; b++) {
        const float* xb = x + b * 256;
        int8_t* qb = q + b * 256;
        float amax = 0.0f;
        bool finite = true;
        for (int i = 0; i < 256; i++) {
            const float a = std::fabs(xb[i]);
            finite &= a <= FLT_MAX; // false for NaN too, which std::max would drop
            amax = std::max(amax, a);
        }
        if (!finite || amax == 0.0f) {
            std::memset(qb, 0, 256);
            scale[b] = finite ? 0.0f : NAN;
        } else {
            const float inv = 127.0f / amax;
            for (int i = 0; i < 256; i++) qb[i] = (int8_t)std::max(-127.0f, std::min(127.0f, std::nearbyint(xb[i] * inv)));
            scale[b] = amax / 127.0f;
        }
        for (int g = 0; g < 8; g++) {
            int sum = 0;
            for (int i = 0; i < 32; i++) sum += qb[32 * g + i];
            sums[b * 8 + g] = (int16_t)sum;
        }
    }
}

// The rows' rounded inputs in the scratch: q [rows][K] (rows >= n: the AMX path reads whole tiles of 16, the
// rows past n zeros), scale [n][K/256], sums [n][K/32]; quantize_row fills them, one row a thread
struct q8_rows {
    int8_t* q;
    float* scale;
    int16_t* sums;
};
[[maybe_unused]] static q8_rows q8_scratch(gemm_scratch& scratch, int n, int rows, int K) {
    const int nb = K / 256;
    if (scratch.q8.size() < (size_t)rows * K) scratch.q8.resize((size_t)rows * K);
    if (rows > n) std::memset(scratch.q8.data() + (size_t)n * K, 0, (size_t)(rows - n) * K);
    if (scratch.q8_scale.size() < (size_t)n * nb) scratch.q8_scale.resize((size_t)n * nb);
    if (scratch.q8_sums.size() < (size_t)n * nb * 8) scratch.q8_sums.resize((size_t)n * nb * 8);
    return {scratch.q8.data(), scratch.q8_scale.data(), scratch.q8_sums.data()};
}

// Panel p's n rows of sums acc [n][NR] into out: the fp32 kernel's end (bias, then the epilogue, then the valid
// columns)
[[maybe_unused]] static void store_panel(float* out, int ldc, const float* acc, int n, int p, int M, const float* bias,
                                         epilogue epi) {
    const int j0 = p * NR, cols = std::min(NR, M - j0);
    float bias_tile[NR] = {};
    if (bias) std::copy_n(bias + j0, cols, bias_tile);
    for (int r = 0; r < n; r++) {
        VEC_ALIGNED vec v[1][NV];
        std::memcpy(v, acc + (size_t)r * NR, sizeof v);
        store_tile<1>(out + (size_t)r * ldc + j0, ldc, cols, v, bias ? bias_tile : nullptr, epi);
    }
}

#if defined(GLASSBOX_INT8)

#define INT8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))

static_assert(NR % 16 == 0, "the int8 kernel takes a panel 16 columns at a time");
// One block's tile, in bytes from its start: levels [8 s][8 t][NR][4] (u8), sc [8][NR] (int32), mins in pairs
// [4][NR] (two int16: m_2u, m_2u+1), d [NR], dmin [NR] (float)
constexpr size_t T_SC = 256 * NR, T_MP = T_SC + 32 * NR, T_D = T_MP + 16 * NR, T_DMIN = T_D + 4 * NR,
                 T_BYTES = T_DMIN + 4 * NR;

// The 16 columns 16 jj.. of block row `row` of an interleaved Q4_K panel (k4_put: d [NR], dmin [NR] f16, scales
// [12][NR], levels [128][NR]): each sub-block's scale sc[s], the mins in pairs mp[u] (int16 m_2u | m_2u+1 << 16),
// d and dmin. The 6-bit fields of the 12 scale bytes as quant.h's k4_scales reads them.
struct block_scales {
    __m512i sc[8], mp[4];
    __m512 d, dmin;
};
INT8_TARGET static inline void scales_of(block_scales& bs, const uint8_t* row, int jj) {
    const __mmask16 all = 0xFFFF; // the zero-masked forms: the plain ones start from an "undefined" vector GCC warns about
    __m512i b[12];
    for (int i = 0; i < 12; i++) b[i] = _mm512_maskz_cvtepu8_epi32(all, _mm_loadu_si128((const __m128i*)(row + (4 + i) * NR + 16 * jj)));
    const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15);
    __m512i m[8];
    for (int s = 0; s < 4; s++) {
        bs.sc[s] = _mm512_and_si512(b[s], m6);
        m[s] = _mm512_and_si512(b[s + 4], m6);
        bs.sc[s + 4] = _mm512_or_si512(_mm512_and_si512(b[s + 8], m4), _mm512_maskz_slli_epi32(all, _mm512_maskz_srli_epi32(all, b[s], 6), 4));
        m[s + 4] = _mm512_or_si512(_mm512_maskz_srli_epi32(all, b[s + 8], 4), _mm512_maskz_slli_epi32(all, _mm512_maskz_srli_epi32(all, b[s + 4], 6), 4));
    }
    for (int u = 0; u < 4; u++) bs.mp[u] = _mm512_or_si512(m[2 * u], _mm512_maskz_slli_epi32(all, m[2 * u + 1], 16));
    bs.d = _mm512_maskz_cvtph_ps(all, _mm256_loadu_si256((const __m256i*)(row + 32 * jj)));
    bs.dmin = _mm512_maskz_cvtph_ps(all, _mm256_loadu_si256((const __m256i*)(row + 2 * NR + 32 * jj)));
}

// Level bytes 4 t .. 4 t + 3 of group g (value 64 g + 4 t + u in the low nibbles, + 32 in the high ones), columns
// 16 jj..: one 32-bit lane per column, its 4 bytes in order (vpermb: bytes [u][c] -> [c][u])
INT8_TARGET static inline __m512i levels_of(const uint8_t* row, int g, int t, int jj, __m512i perm) {
    const uint8_t* src = row + 16 * NR + (size_t)(32 * g + 4 * t) * NR + 16 * jj;
    __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i*)src));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(src + NR)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(src + 2 * NR)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(src + 3 * NR)), 3);
    return _mm512_maskz_permutexvar_epi8(~(__mmask64)0, perm, v); // zero-masked: see scales_of
}
static const __m512i* level_perm() {
    alignas(64) static const struct table {
        uint8_t idx[64];
        table() {
            for (int c = 0; c < 16; c++)
                for (int u = 0; u < 4; u++) idx[4 * c + u] = (uint8_t)(16 * u + c);
        }
    } t;
    return (const __m512i*)t.idx;
}

// One block row -> the tile above (levels as vpdpbusd reads them, the scales unpacked); meanwhile the next block
// row is fetched
INT8_TARGET static void build_tile(uint8_t* tile, const uint8_t* row, const char* next) {
    const __m512i perm = _mm512_load_si512((const void*)level_perm()), low = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < 4; g++)
        for (int t = 0; t < 8; t++) {
            for (int i = 0; i < 4; i++) __builtin_prefetch(next + (size_t)((8 * g + t) * 4 + i) * 64, 0, 2);
            for (int jj = 0; jj < NR / 16; jj++) {
                const __m512i v = levels_of(row, g, t, jj, perm);
                _mm512_storeu_si512((void*)(tile + ((size_t)(16 * g + t) * NR + 16 * jj) * 4), _mm512_and_si512(v, low));
                _mm512_storeu_si512((void*)(tile + ((size_t)(16 * g + 8 + t) * NR + 16 * jj) * 4),
                                    _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
            }
        }
    for (int jj = 0; jj < NR / 16; jj++) {
        block_scales bs;
        scales_of(bs, row, jj);
        for (int s = 0; s < 8; s++) _mm512_storeu_si512((void*)(tile + T_SC + ((size_t)s * NR + 16 * jj) * 4), bs.sc[s]);
        for (int u = 0; u < 4; u++) _mm512_storeu_si512((void*)(tile + T_MP + ((size_t)u * NR + 16 * jj) * 4), bs.mp[u]);
        _mm512_storeu_ps((float*)(tile + T_D) + 16 * jj, bs.d);
        _mm512_storeu_ps((float*)(tile + T_DMIN) + 16 * jj, bs.dmin);
    }
}

// The mins' sums (sum_s m_s sum(x_q)_s, as pairs of int16) and the block's three float operations into acc
template <int R>
INT8_TARGET static inline void fold_block(float* acc, const __m512i (&tot)[R], const __m512i (&mp)[4], __m512 d, __m512 dmin,
                                          const float* xs, const int16_t* xsum, int K, int nb, int jj) {
    __m512i mins[R];
    for (int r = 0; r < R; r++) mins[r] = _mm512_setzero_si512();
    for (int u = 0; u < 4; u++)
        for (int r = 0; r < R; r++) {
            int32_t a;
            std::memcpy(&a, xsum + (size_t)r * (K / 32) + 2 * u, 4);
            mins[r] = _mm512_dpwssd_epi32(mins[r], mp[u], _mm512_set1_epi32(a));
        }
    for (int r = 0; r < R; r++) {
        // (the zero-masked conversions: the plain one starts from an "undefined" vector GCC warns about)
        __m512 t = _mm512_mul_ps(d, _mm512_maskz_cvtepi32_ps(0xFFFF, tot[r]));
        t = _mm512_fnmadd_ps(dmin, _mm512_maskz_cvtepi32_ps(0xFFFF, mins[r]), t);
        float* a = acc + (size_t)r * NR + 16 * jj;
        _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_set1_ps(xs[(size_t)r * nb]), t, _mm512_loadu_ps(a)));
    }
}

// acc [R][NR] columns 16 jj.. += block b of R rows (quantised: xq at the block's first input, K apart; xs, xsum
// likewise) times the tile's columns
template <int R>
INT8_TARGET static void tile_kernel(float* acc, const int8_t* xq, const float* xs, const int16_t* xsum, int K,
                                    int nb, const uint8_t* tile, int jj) {
    __m512i tot[R], part[R];
    for (int r = 0; r < R; r++) tot[r] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int s = 0; s < 8; s++) {
        for (int r = 0; r < R; r++) part[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            const __m512i wv = _mm512_loadu_si512((const void*)(tile + ((size_t)(8 * s + t) * NR + 16 * jj) * 4));
            for (int r = 0; r < R; r++) {
                int32_t a;
                std::memcpy(&a, xq + (size_t)r * K + 32 * s + 4 * t, 4);
                part[r] = _mm512_dpbusd_epi32(part[r], wv, _mm512_set1_epi32(a));
            }
        }
        const __m512i scv = _mm512_loadu_si512((const void*)(tile + T_SC + ((size_t)s * NR + 16 * jj) * 4));
        for (int r = 0; r < R; r++) tot[r] = _mm512_add_epi32(tot[r], _mm512_mullo_epi32(part[r], scv));
    }
    __m512i mp[4];
    for (int u = 0; u < 4; u++) mp[u] = _mm512_loadu_si512((const void*)(tile + T_MP + ((size_t)u * NR + 16 * jj) * 4));
    fold_block<R>(acc, tot, mp, _mm512_loadu_ps((const float*)(tile + T_D) + 16 * jj),
                  _mm512_loadu_ps((const float*)(tile + T_DMIN) + 16 * jj), xs, xsum, K, nb, jj);
}

// The same straight from the panel's block row, with no tile: for one row block (generation's single token), where
// a tile would be written for one pass over it. The sums are the same integers, so the result is the same.
template <int R>
INT8_TARGET static void row_kernel(float* acc, const int8_t* xq, const float* xs, const int16_t* xsum, int K, int nb,
                                   const uint8_t* row, int jj) {
    const __m512i perm = _mm512_load_si512((const void*)level_perm()), low = _mm512_set1_epi8(0x0F);
    block_scales bs;
    scales_of(bs, row, jj);
    __m512i tot[R], lo[R], hi[R];
    for (int r = 0; r < R; r++) tot[r] = _mm512_setzero_si512();
    for (int g = 0; g < 4; g++) {
        for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm512_setzero_si512();
        for (int t = 0; t < 8; t++) {
            const __m512i v = levels_of(row, g, t, jj, perm);
            const __m512i vl = _mm512_and_si512(v, low), vh = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            for (int r = 0; r < R; r++) {
                int32_t a, b;
                std::memcpy(&a, xq + (size_t)r * K + 64 * g + 4 * t, 4);
                std::memcpy(&b, xq + (size_t)r * K + 64 * g + 32 + 4 * t, 4);
                lo[r] = _mm512_dpbusd_epi32(lo[r], vl, _mm512_set1_epi32(a));
                hi[r] = _mm512_dpbusd_epi32(hi[r], vh, _mm512_set1_epi32(b));
            }
        }
        for (int r = 0; r < R; r++)
            tot[r] = _mm512_add_epi32(tot[r], _mm512_add_epi32(_mm512_mullo_epi32(lo[r], bs.sc[2 * g]),
                                                               _mm512_mullo_epi32(hi[r], bs.sc[2 * g + 1])));
    }
    fold_block<R>(acc, tot, bs.mp, bs.d, bs.dmin, xs, xsum, K, nb, jj);
}

// acc [R][NR] columns 16 jj.. += block b of R rows, from their integer sums (tot [R][16], the AMX path's)
template <int R>
INT8_TARGET static void fold_sums(float* acc, const int32_t* tot, const float* xs, const int16_t* xsum, int K, int nb,
                                  const uint8_t* tile, int jj) {
    __m512i t[R], mp[4];
    for (int r = 0; r < R; r++) t[r] = _mm512_loadu_si512((const void*)(tot + 16 * r));
    for (int u = 0; u < 4; u++) mp[u] = _mm512_loadu_si512((const void*)(tile + T_MP + ((size_t)u * NR + 16 * jj) * 4));
    fold_block<R>(acc, t, mp, _mm512_loadu_ps((const float*)(tile + T_D) + 16 * jj),
                  _mm512_loadu_ps((const float*)(tile + T_DMIN) + 16 * jj), xs, xsum, K, nb, jj);
}
using fold_fn = void (*)(float*, const int32_t*, const float*, const int16_t*, int, int, const uint8_t*, int);
static constexpr fold_fn fold_kernels[] = {nullptr, fold_sums<1>, fold_sums<2>, fold_sums<3>, fold_sums<4>,
                                           fold_sums<5>, fold_sums<6>, fold_sums<7>, fold_sums<8>};

using tile_fn = void (*)(float*, const int8_t*, const float*, const int16_t*, int, int, const uint8_t*, int);
static constexpr tile_fn tile_kernels[] = {nullptr, tile_kernel<1>, tile_kernel<2>, tile_kernel<3>, tile_kernel<4>,
                                           tile_kernel<5>, tile_kernel<6>, tile_kernel<7>, tile_kernel<8>};
static constexpr tile_fn row_kernels[] = {nullptr, row_kernel<1>, row_kernel<2>, row_kernel<3>, row_kernel<4>,
                                          row_kernel<5>, row_kernel<6>, row_kernel<7>, row_kernel<8>};
constexpr int RB = 8; // rows a kernel takes: 8 x 2 (3 for row_kernel) integer sums and a few vectors fit 32 registers

void gemm_q4k(float* out, int ldc, const float* x, const weight_matrix& w, const float* bias, int n,
              gemm_scratch& scratch, epilogue epi) {
    const int K = w.in, M = w.out, nb = K / 256, panels = (M + NR - 1) / NR;
    if (w.type != GGML_Q4_K || w.stored.empty() || K % 256) throw error("internal: int8 product of a matrix that is not Q4_K");
#if defined(GLASSBOX_AMX)
    const bool on_amx = n > RB && int8_path_now() == INT8_AMX; // a single row block stays on VNNI rows
#else
    const bool on_amx = false;
#endif
    const q8_rows q8 = q8_scratch(scratch, n, on_amx ? (n + 15) / 16 * 16 : n, K); // AMX: whole tiles of 16 rows
    int8_t* xq = q8.q;
    float* xs = q8.scale;
    int16_t* xsum = q8.sums;
    const bool threaded = (int64_t)n * K * M > parallel_min_work && panels > 1;
#pragma omp parallel if (threaded)
    {
        static thread_local aligned_vector<uint8_t> tile;
        static thread_local aligned_vector<float> acc;
        static thread_local aligned_vector<int32_t> tot; // AMX: [NR/16][16][16] one row tile's integer sums
        if (tile.size() < T_BYTES) tile.resize(T_BYTES);
        if (acc.size() < (size_t)n * NR) acc.resize((size_t)n * NR);
        if (on_amx && tot.size() < (size_t)NR * 16) tot.resize((size_t)NR * 16);
#if defined(GLASSBOX_AMX)
        if (on_amx) amx::begin();
#endif
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) quantize_row(xq + (size_t)r * K, xs + (size_t)r * nb, xsum + (size_t)r * nb * 8, x + (size_t)r * K, K);
#pragma omp for schedule(static)
        for (int p = 0; p < panels; p++) {
            std::fill_n(acc.data(), (size_t)n * NR, 0.0f);
            for (int b = 0; b < nb; b++) {
                const uint8_t* row = w.stored.data() + (size_t)((int64_t)(p * nb + b) * NR * 144);
                const char* next = (const char*)row + NR * 144; // the next block row (harmless past the end)
                if (n <= RB) { // one row block
                    for (int i = 0; i < 4; i++) __builtin_prefetch(next + (size_t)i * 64, 0, 2);
                    for (int jj = 0; jj < NR / 16; jj++) {
                        for (int i = 0; i < 36; i++) __builtin_prefetch(next + (size_t)(4 + 36 * jj + i) * 64, 0, 2);
                        row_kernels[n](acc.data(), xq + b * 256, xs + b, xsum + b * 8, K, nb, row, jj);
                    }
                    continue;
                }
                build_tile(tile.data(), row, next);
#if defined(GLASSBOX_AMX)
                if (on_amx) {
                    for (int r0 = 0; r0 < n; r0 += 16) {
                        amx::block_sums(tot.data(), xq + (size_t)r0 * K + b * 256, K, tile.data(),
                                        (const int32_t*)(tile.data() + T_SC), NR);
                        for (int r1 = r0; r1 < std::min(n, r0 + 16); r1 += RB) {
                            const int rows = std::min({RB, n - r1, r0 + 16 - r1});
                            for (int jj = 0; jj < NR / 16; jj++)
                                fold_kernels[rows](acc.data() + (size_t)r1 * NR, tot.data() + ((size_t)jj * 16 + (r1 - r0)) * 16,
                                                   xs + (size_t)r1 * nb + b, xsum + (size_t)r1 * nb * 8 + b * 8, K, nb, tile.data(), jj);
                        }
                    }
                    continue;
                }
#endif
                for (int r0 = 0; r0 < n; r0 += RB) {
                    const int rows = std::min(RB, n - r0);
                    for (int jj = 0; jj < NR / 16; jj++)
                        tile_kernels[rows](acc.data() + (size_t)r0 * NR, xq + (size_t)r0 * K + b * 256, xs + (size_t)r0 * nb + b,
                                           xsum + (size_t)r0 * nb * 8 + b * 8, K, nb, tile.data(), jj);
                }
            }
            store_panel(out, ldc, acc.data(), n, p, M, bias, epi);
        }
#if defined(GLASSBOX_AMX)
        if (on_amx) amx::end();
#endif
    }
}

#elif defined(GLASSBOX_INT8_AVX2)

// AVX2 (8 columns a vector, no VNNI): a 32-bit lane's vpdpbusd, sum_u level_u * x_u over its 4 bytes, is
// vpmaddubsw (u8 x s8 pairs into int16: at most 2 * 15 * 127, no saturation) then vpmaddwd by ones; the mins'
// vpdpwssd is vpmaddwd then an add. The same integers, then the same three float operations a block: the same
// bits as the VNNI kernel and the plain loops (tests/test_int8.cpp). Straight from the panel's block rows, RB2 rows
// at a time (16 registers).
static_assert(NR % 8 == 0, "the AVX2 int8 kernel takes a panel 8 columns at a time");
constexpr int RB2 = 4;

struct block_scales8 {
    __m256i sc[8], mp[4];
    __m256 d, dmin;
};
static inline void scales_of8(block_scales8& bs, const uint8_t* row, int jj) {
    __m256i b[12];
    for (int i = 0; i < 12; i++) b[i] = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(row + (4 + i) * NR + 8 * jj)));
    const __m256i m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15);
    __m256i m[8];
    for (int s = 0; s < 4; s++) {
        bs.sc[s] = _mm256_and_si256(b[s], m6);
        m[s] = _mm256_and_si256(b[s + 4], m6);
        bs.sc[s + 4] = _mm256_or_si256(_mm256_and_si256(b[s + 8], m4), _mm256_slli_epi32(_mm256_srli_epi32(b[s], 6), 4));
        m[s + 4] = _mm256_or_si256(_mm256_srli_epi32(b[s + 8], 4), _mm256_slli_epi32(_mm256_srli_epi32(b[s + 4], 6), 4));
    }
    for (int u = 0; u < 4; u++) bs.mp[u] = _mm256_or_si256(m[2 * u], _mm256_slli_epi32(m[2 * u + 1], 16));
    bs.d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(row + 16 * jj)));
    bs.dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(row + 2 * NR + 16 * jj)));
}

// Level bytes 4 t .. 4 t + 3 of group g, columns 8 jj..: one 32-bit lane per column, its 4 bytes in order
static inline __m256i levels_of8(const uint8_t* row, int g, int t, int jj) {
    const uint8_t* src = row + 16 * NR + (size_t)(32 * g + 4 * t) * NR + 8 * jj;
    const __m128i r0 = _mm_loadl_epi64((const __m128i*)src), r1 = _mm_loadl_epi64((const __m128i*)(src + NR));
    const __m128i r2 = _mm_loadl_epi64((const __m128i*)(src + 2 * NR)), r3 = _mm_loadl_epi64((const __m128i*)(src + 3 * NR));
    const __m128i a = _mm_unpacklo_epi8(r0, r1), b = _mm_unpacklo_epi8(r2, r3); // [c][u0 u1], [c][u2 u3]
    return _mm256_set_m128i(_mm_unpackhi_epi16(a, b), _mm_unpacklo_epi16(a, b)); // [c][u0 u1 u2 u3]
}

// acc [R][NR] columns 8 jj.. += block b of R rows (xq at the block's first input, K apart) times the block row;
// meanwhile lines pf [0, pf_lines) are fetched, one per group of 4 inputs (issued back to back, the next block row's
// 54 lines filled the line-fill buffers, and the prefetches themselves stalled: 8 % of a generated token)
template <int R>
static void row_kernel8(float* acc, const int8_t* xq, const float* xs, const int16_t* xsum, int K, int nb,
                        const uint8_t* row, int jj, const char* pf, int pf_lines) {
    const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    block_scales8 bs;
    scales_of8(bs, row, jj);
    __m256i tot[R], lo[R], hi[R];
    for (int r = 0; r < R; r++) tot[r] = _mm256_setzero_si256();
    for (int g = 0; g < 4; g++) {
        for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            if (8 * g + t < pf_lines) __builtin_prefetch(pf + (size_t)(8 * g + t) * 64, 0, 2);
            const __m256i v = levels_of8(row, g, t, jj);
            const __m256i vl = _mm256_and_si256(v, low), vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            for (int r = 0; r < R; r++) {
                int32_t a, b;
                std::memcpy(&a, xq + (size_t)r * K + 64 * g + 4 * t, 4);
                std::memcpy(&b, xq + (size_t)r * K + 64 * g + 32 + 4 * t, 4);
                lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(_mm256_maddubs_epi16(vl, _mm256_set1_epi32(a)), ones));
                hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(vh, _mm256_set1_epi32(b)), ones));
            }
        }
        for (int r = 0; r < R; r++)
            tot[r] = _mm256_add_epi32(tot[r], _mm256_add_epi32(_mm256_mullo_epi32(lo[r], bs.sc[2 * g]),
                                                               _mm256_mullo_epi32(hi[r], bs.sc[2 * g + 1])));
    }
    for (int r = 0; r < R; r++) { // the mins, then the block's three float operations (fold_block's)
        __m256i mins = _mm256_setzero_si256();
        for (int u = 0; u < 4; u++) {
            int32_t a;
            std::memcpy(&a, xsum + (size_t)r * (K / 32) + 2 * u, 4);
            mins = _mm256_add_epi32(mins, _mm256_madd_epi16(bs.mp[u], _mm256_set1_epi32(a)));
        }
        __m256 t = _mm256_mul_ps(bs.d, _mm256_cvtepi32_ps(tot[r]));
        t = _mm256_fnmadd_ps(bs.dmin, _mm256_cvtepi32_ps(mins), t);
        float* a = acc + (size_t)r * NR + 8 * jj;
        _mm256_storeu_ps(a, _mm256_fmadd_ps(_mm256_set1_ps(xs[(size_t)r * nb]), t, _mm256_loadu_ps(a)));
    }
}
using row8_fn = void (*)(float*, const int8_t*, const float*, const int16_t*, int, int, const uint8_t*, int, const char*, int);
static constexpr row8_fn row8_kernels[] = {nullptr, row_kernel8<1>, row_kernel8<2>, row_kernel8<3>, row_kernel8<4>};

void gemm_q4k(float* out, int ldc, const float* x, const weight_matrix& w, const float* bias, int n,
              gemm_scratch& scratch, epilogue epi) {
    const int K = w.in, M = w.out, nb = K / 256, panels = (M + NR - 1) / NR;
    if (w.type != GGML_Q4_K || w.stored.empty() || K % 256) throw error("internal: int8 product of a matrix that is not Q4_K");
    const q8_rows q8 = q8_scratch(scratch, n, n, K);
    int8_t* xq = q8.q;
    float* xs = q8.scale;
    int16_t* xsum = q8.sums;
    const bool threaded = (int64_t)n * K * M > parallel_min_work && panels > 1;
#pragma omp parallel if (threaded)
    {
        static thread_local aligned_vector<float> acc;
        if (acc.size() < (size_t)n * NR) acc.resize((size_t)n * NR);
#pragma omp for schedule(static)
        for (int r = 0; r < n; r++) quantize_row(xq + (size_t)r * K, xs + (size_t)r * nb, xsum + (size_t)r * nb * 8, x + (size_t)r * K, K);
#pragma omp for schedule(static)
        for (int p = 0; p < panels; p++) {
            std::fill_n(acc.data(), (size_t)n * NR, 0.0f);
            for (int b = 0; b < nb; b++) {
                const uint8_t* row = w.stored.data() + (size_t)((int64_t)(p * nb + b) * NR * 144);
                const char* next = (const char*)row + NR * 144; // the next block row (harmless past the end)
                constexpr int lines = (NR * 144 + 63) / 64, share = (lines + NR / 8 - 1) / (NR / 8); // a share per jj
                for (int r0 = 0; r0 < n; r0 += RB2) {
                    const int rows = std::min(RB2, n - r0);
                    for (int jj = 0; jj < NR / 8; jj++)
                        row8_kernels[rows](acc.data() + (size_t)r0 * NR, xq + (size_t)r0 * K + b * 256, xs + (size_t)r0 * nb + b,
                                           xsum + (size_t)r0 * nb * 8 + b * 8, K, nb, row, jj, next + (size_t)jj * share * 64,
                                           r0 == 0 ? std::min(share, lines - jj * share) : 0);
                }
            }
            store_panel(out, ldc, acc.data(), n, p, M, bias, epi);
        }
    }
}

#else

void gemm_q4k(float*, int, const float*, const weight_matrix&, const float*, int, gemm_scratch&, epilogue) {
    throw error("internal: the int8 kernel is not in this build");
}

#endif

#if defined(GLASSBOX_INT8) || defined(GLASSBOX_INT8_AVX2)

// The LM head on a Q4_K table (the file's rows, one per output): for R (<= 4) positions, rows v0 .. v1 - 1. Per row
// and block, each sub-block's q . x_q from vpmaddubsw (32 levels a vector, the low or high nibbles of 32 bytes),
// times its scale in the same vpmaddwd; the lanes' sum is the block's tot, the mins' sum is scalar; then
// fold_block's three float operations, each rounded once as there. The same integers and the same roundings as
// the panel kernels on the same weights, so the same bits. AVX2 instructions, so one code for both builds.
template <int R>
static void table_rows(float* out, int V, const int8_t* xq, const float* xs, const int16_t* xsum, int K,
                       const row_table& t, int64_t v0, int64_t v1) {
    const int nb = K / 256;
    const size_t row_bytes = t.row_bytes();
    const __m256i low = _mm256_set1_epi8(0x0F);
    for (int64_t v = v0; v < v1; v++) {
        const uint8_t* row = t.data + (size_t)v * row_bytes;
        const int lines = (int)((row_bytes + 63) / 64); // the row 8 on, a line per 32 level bytes (row_kernel8)
        float acc[R] = {};
        for (int b = 0; b < nb; b++) {
            const uint8_t* block = row + (size_t)b * 144;
            int sc[8], m[8];
            k4_fields(sc, m, block);
            __m256i tot[R];
            for (int r = 0; r < R; r++) tot[r] = _mm256_setzero_si256();
            for (int g = 0; g < 4; g++) {
                if (4 * b + g < lines) __builtin_prefetch(row + 8 * row_bytes + (size_t)(4 * b + g) * 64, 0, 2);
                const __m256i v32 = _mm256_loadu_si256((const __m256i*)(block + 16 + 32 * g));
                const __m256i vl = _mm256_and_si256(v32, low), vh = _mm256_and_si256(_mm256_srli_epi16(v32, 4), low);
                const __m256i sl = _mm256_set1_epi16((short)sc[2 * g]), sh = _mm256_set1_epi16((short)sc[2 * g + 1]);
                for (int r = 0; r < R; r++) { // pairs of products (<= 2 * 15 * 127) times sc (<= 63), summed in pairs
                    const int8_t* xb = xq + (size_t)r * K + b * 256 + 64 * g;
                    tot[r] = _mm256_add_epi32(tot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(vl, _mm256_loadu_si256((const __m256i*)xb)), sl));
                    tot[r] = _mm256_add_epi32(tot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(vh, _mm256_loadu_si256((const __m256i*)(xb + 32))), sh));
                }
            }
            const float d = _cvtsh_ss((uint16_t)(block[0] | block[1] << 8)), dmin = _cvtsh_ss((uint16_t)(block[2] | block[3] << 8));
            for (int r = 0; r < R; r++) {
                const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(tot[r]), _mm256_extracti128_si256(tot[r], 1));
                const __m128i h2 = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
                const int32_t total = _mm_cvtsi128_si32(_mm_add_epi32(h2, _mm_shuffle_epi32(h2, 0xB1)));
                int32_t mins = 0;
                const int16_t* xm = xsum + (size_t)r * (K / 32) + b * 8;
                for (int s = 0; s < 8; s++) mins += m[s] * xm[s];
                float tt = d * (float)total;
                tt = std::fma(-dmin, (float)mins, tt);
                acc[r] = std::fma(xs[(size_t)r * nb + b], tt, acc[r]);
            }
        }
        for (int r = 0; r < R; r++) out[(size_t)r * V + v] = acc[r];
    }
}

void gemm_table_q4k(float* out, const float* x, const row_table& t, int n, gemm_scratch& scratch) {
    const int K = (int)t.cols, V = (int)t.rows, nb = K / 256;
    if (t.type != GGML_Q4_K || K % 256) throw error("internal: int8 LM head on a table that is not Q4_K");
    const q8_rows q8 = q8_scratch(scratch, n, n, K);
    for (int r = 0; r < n; r++) quantize_row(q8.q + (size_t)r * K, q8.scale + (size_t)r * nb, q8.sums + (size_t)r * nb * 8, x + (size_t)r * K, K);
    using rows_fn = void (*)(float*, int, const int8_t*, const float*, const int16_t*, int, const row_table&, int64_t, int64_t);
    static constexpr rows_fn by_rows[] = {nullptr, table_rows<1>, table_rows<2>, table_rows<3>, table_rows<4>};
    const bool threaded = (int64_t)n * K * V > parallel_min_work;
    for (int r0 = 0; r0 < n; r0 += 4) { // 4 positions a pass over the table (more: --all-logits)
        const int R = std::min(4, n - r0);
        const int parts = threaded ? omp_get_max_threads() * 8 : 1;
#pragma omp parallel for schedule(static) if (threaded)
        for (int pi = 0; pi < parts; pi++)
            by_rows[R](out + (size_t)r0 * V, V, q8.q + (size_t)r0 * K, q8.scale + (size_t)r0 * nb, q8.sums + (size_t)r0 * nb * 8, K, t,
                       (int64_t)V * pi / parts, (int64_t)V * (pi + 1) / parts);
    }
}

#else

void gemm_table_q4k(float*, const float*, const row_table&, int, gemm_scratch&) {
    throw error("internal: the int8 kernel is not in this build");
}

#endif

} // namespace gb::int8
