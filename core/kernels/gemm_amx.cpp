// The AMX kernel: fp32 products from exact int8 tile products (Intel AMX-INT8, Sapphire Rapids and later).
//
// Numbers. Each weight row k is first divided by a power of two r_k (its largest magnitude's), and the inputs
// are multiplied by the same power, which changes no product. Then each weight column n becomes 31-bit fixed
// point under its own power of two, and each input row t 31-bit fixed point under its own:
//     w'[k][n] ~ Qw * 2^(c_n - 30),  |Qw| <= 2^30,      x'[t][k] ~ Qx * 2^(e_t - 30),  |Qx| <= 2^30.
// Qw is written as four signed base-256 digits (w0..w3, most significant first, |w0| <= 64, |wi| <= 128) and Qx
// as four (x0..x3). A TDPBSSD tile product multiplies int8 digits exactly into int32 sums. The digit products
// of one level l = i + j share a scale 2^(8(6 - l)); levels 0..3 are kept (10 of the 16 products):
//     S0 = x0 w0,  S1 = x0 w1 + x1 w0,  S2 = x0 w2 + x1 w1 + x2 w0,  S3 = x0 w3 + x1 w2 + x2 w1 + x3 w0,
// and y = 2^(e_t + c_n - 36) * (((S0 * 256 + S1) * 256 + S2) * 256 + S3) in fp32. Per term of the sum, the
// rounding of Qw and of Qx is 2^-31 of the column's largest weight and of the row's largest input, and what is
// dropped (levels 4 to 6) below 2^-28 of their product, about 2^-31 typically (balanced digits of either sign):
// errors below the fp32 kernel's, which rounds every add at 2^-24 of the running sum. With three weight digits (23 bits, until
// this was measured at the logits) the rounding of Qw alone was 2^-23 of the column's largest weight, and AMX's
// logits erred by up to 2.5 times fp32's (docs/internals.md "Accuracy", tests/test_amx_accuracy.cpp).
// |S_l| <= 3 * 2^14 * in fits int32 for in <= 32768 (amx::max_in): the top digits are at most 64, so a level's
// products add to at most 3 * 2^14.
//
// Tiles. Eight tile registers of 16 rows x 64 bytes. Per 16 x 16 output block the four level sums S0..S3 live
// in tmm0..tmm3; the other four hold operands, two for input digits and two for weight digits, loaded so that
// no load waits for the product still reading that register (tiles are not renamed).
//
// Loops: row groups whose input digits stay in L2 | column blocks (split over threads) | chunks of 4 k-tiles |
// row blocks | k-tiles. A chunk's weight digits (16 KB) stay in L1 while every row block of the group passes
// over them; the weight stream is the only traffic from memory, and the next chunk of it is prefetched into
// L2 a line at a time between the tile products.
//
// Built with AMX and AVX-512 enabled (CMakeLists.txt) and called only after gemm.cpp's amx_usable(). Nothing
// here is a template or inline function shared with other translation units (helpers sit in an anonymous
// namespace; math comes from the C library, not <cmath>'s inline overloads).
#include "kernels/gemm_amx.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "util/simd_math.h"

namespace gb {
namespace amx {
namespace {

constexpr int TILE = 1024;     // bytes per tile register: 16 rows x 64 bytes
constexpr int XD = 4, WD = 4;  // digits of an input, of a weight
constexpr int XS = 30, WS = 30; // fixed-point bits below the scale of an input, of a weight
constexpr int CHUNK = 4;             // k-tiles per chunk: 16 KB of weight digits per column block
constexpr int64_t GROUP_BYTES = 768 << 10; // a row group's input digits stay in L2

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

} // namespace

// ---------------------------------------------------------------------------------------------
// Weights, once at load
// ---------------------------------------------------------------------------------------------
void pack_weights(int8_t* digits, float* row_exp, float* col_exp, const float* w, int in, int out, bool transposed) {
    const int64_t KT = k_tiles(in), CB = col_blocks(out);
    // w [in][out], or with transposed its transpose [out][in] as stored (the LM head's embedding table, the
    // backward's W^T). The weights are finite (pack_matrix, pack_head): maxima need no NaN handling.
    double* row_scale = (double*)malloc(sizeof(double) * (size_t)in); // 2^-r_k
    for (int64_t k = 0; k < KT * 64; k++) row_exp[k] = 0.0f;
    // each row's largest magnitude, along whichever way w is stored
#pragma omp parallel for schedule(static)
    for (int k0 = 0; k0 < in; k0 += 64) {
        float m[64] = {};
        const int k1 = k0 + 64 < in ? k0 + 64 : in;
        if (transposed) {
            for (int64_t n = 0; n < out; n++)
                for (int k = k0; k < k1; k++) {
                    const float v = fabsf(w[(size_t)n * in + k]);
                    m[k - k0] = v > m[k - k0] ? v : m[k - k0];
                }
        } else {
            for (int k = k0; k < k1; k++) {
                const float* row = w + (size_t)k * out;
                __m512 r = _mm512_setzero_ps();
                for (int64_t n = 0; n < out; n += 16) {
                    const __mmask16 live = out - n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (out - n)) - 1);
                    r = _mm512_max_ps(r, _mm512_abs_ps(_mm512_maskz_loadu_ps(live, row + n)));
                }
                m[k - k0] = _mm512_reduce_max_ps(r);
            }
        }
        for (int k = k0; k < k1; k++) {
            row_exp[k] = m[k - k0] > 0.0f ? (float)ilogbf(m[k - k0]) : 0.0f;
            row_scale[k] = ldexp(1.0, -(int)row_exp[k]);
        }
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t cb = 0; cb < CB; cb++) {
        double cmax[16] = {}, col_scale[16]; // 2^(30 - c_n): a column's fixed-point factor
        const int cols = (int)(out - cb * 16 < 16 ? out - cb * 16 : 16);
        const __mmask16 live = (__mmask16)((1u << cols) - 1);
        // each column's largest |w| 2^-r_k, in double (exact products by powers of two, as the digits take them)
        if (transposed) {
            for (int c = 0; c < cols; c++) {
                const float* col = w + (size_t)(cb * 16 + c) * in;
                __m512d m = _mm512_setzero_pd();
                for (int k = 0; k < in; k += 8) {
                    const __mmask8 l8 = in - k >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (in - k)) - 1);
                    const __m512d v = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(l8, col + k)),
                                                    _mm512_maskz_loadu_pd(l8, row_scale + k));
                    m = _mm512_max_pd(m, _mm512_abs_pd(v));
                }
                cmax[c] = _mm512_reduce_max_pd(m);
            }
        } else {
            __m512d m_lo = _mm512_setzero_pd(), m_hi = _mm512_setzero_pd();
            for (int k = 0; k < in; k++) {
                const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(live, w + (size_t)k * out + cb * 16));
                const __m512d rs = _mm512_set1_pd(row_scale[k]);
                m_lo = _mm512_max_pd(m_lo, _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), rs));
                m_hi = _mm512_max_pd(
                    m_hi, _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), rs));
            }
            _mm512_storeu_pd(cmax, m_lo);
            _mm512_storeu_pd(cmax + 8, m_hi);
        }
        for (int c = 0; c < 16; c++) {
            const int64_t n = cb * 16 + c;
            const int e = c < cols && cmax[c] > 0.0 ? ilogb(cmax[c]) + 1 : 0; // |w'| < 2^e in this column
            col_exp[n] = (float)e;
            col_scale[c] = ldexp(1.0, WS - e);
        }
        // The digits, a row of the block's 16 columns at a time: q = round(w' 2^(30 - c_n)) exactly (products by
        // powers of two in double, then round to nearest even, as llrint; |q| <= 2^30 fits int32), its four
        // base-256 digits with a sign each (low = the byte as signed, q = (q - low) / 256), and per 4 rows the
        // bytes interleaved into the B tile's layout: row kk/4 holds, for each column, 4 consecutive k.
        const __m512d cs_lo = _mm512_loadu_pd(col_scale), cs_hi = _mm512_loadu_pd(col_scale + 8);
        const __m512i col_offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                       _mm512_set1_epi32(in));
        for (int64_t kt = 0; kt < KT; kt++) {
            int8_t* tile = digits + (size_t)((cb * KT + kt) * WD) * TILE;
            for (int quad = 0; quad < 16; quad++) {
                __m128i bytes[WD][4]; // [digit][row of the quad] one byte per column
                for (int r = 0; r < 4; r++) {
                    const int64_t k = kt * 64 + quad * 4 + r;
                    __m512 v = _mm512_setzero_ps();
                    if (k < in)
                        v = transposed ? _mm512_mask_i32gather_ps(v, live, col_offsets, w + (size_t)(cb * 16) * in + k, 4)
                                       : _mm512_maskz_loadu_ps(live, w + (size_t)k * out + cb * 16);
                    const __m512d rs = _mm512_set1_pd(k < in ? row_scale[k] : 0.0);
                    const __m512d lo = _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), rs), cs_lo);
                    const __m512d hi = _mm512_mul_pd(
                        _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), rs), cs_hi);
                    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtpd_epi32(lo)), _mm512_cvtpd_epi32(hi), 1);
                    for (int j = WD - 1; j > 0; j--) {
                        const __m512i low = _mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24);
                        bytes[j][r] = _mm512_cvtepi32_epi8(low);
                        q = _mm512_srai_epi32(_mm512_sub_epi32(q, low), 8);
                    }
                    bytes[0][r] = _mm512_cvtepi32_epi8(q);
                }
                for (int j = 0; j < WD; j++) {
                    const __m128i t0 = _mm_unpacklo_epi8(bytes[j][0], bytes[j][1]), t1 = _mm_unpackhi_epi8(bytes[j][0], bytes[j][1]);
                    const __m128i t2 = _mm_unpacklo_epi8(bytes[j][2], bytes[j][3]), t3 = _mm_unpackhi_epi8(bytes[j][2], bytes[j][3]);
                    int8_t* dst = tile + j * TILE + quad * 64;
                    _mm_storeu_si128((__m128i*)(dst + 0), _mm_unpacklo_epi16(t0, t2));
                    _mm_storeu_si128((__m128i*)(dst + 16), _mm_unpackhi_epi16(t0, t2));
                    _mm_storeu_si128((__m128i*)(dst + 32), _mm_unpacklo_epi16(t1, t3));
                    _mm_storeu_si128((__m128i*)(dst + 48), _mm_unpackhi_epi16(t1, t3));
                }
            }
        }
    }
    free(row_scale);
}

void unpack_weights(float* w, const int8_t* digits, const float* row_exp, const float* col_exp, int in, int out) {
    const int64_t KT = k_tiles(in);
    // q 2^(c_n - 30 + r_k) as two exact products by powers of two in double (ldexp's value), rounded once to float
    double* col_scale = (double*)malloc(sizeof(double) * (size_t)out);
    for (int n = 0; n < out; n++) col_scale[n] = ldexp(1.0, (int)col_exp[n] - WS);
#pragma omp parallel for schedule(static)
    for (int k = 0; k < in; k++) {
        const double rs = ldexp(1.0, (int)row_exp[k]);
        for (int n = 0; n < out; n++) {
            const int8_t* d = digits + (size_t)(((n / 16) * KT + k / 64) * WD) * TILE + ((k % 64) / 4) * 64 + (n % 16) * 4 + k % 4;
            const int64_t q = (((int64_t)d[0] * 256 + d[TILE]) * 256 + d[2 * TILE]) * 256 + d[3 * TILE];
            w[(size_t)k * out + n] = (float)((double)q * col_scale[n] * rs);
        }
    }
    free(col_scale);
}

void unpack_rows(float* dst, int ld, const int8_t* digits, const float* row_exp, const float* col_exp, int in, int out,
                 int k0, int kc, int n0, int cols) {
    const int64_t KT = k_tiles(in), CB = col_blocks(out);
    for (int c0 = n0; c0 < n0 + cols; c0 += 16) {
        float* d = dst + (c0 - n0);
        if (c0 / 16 >= CB) { // past the padded width
            for (int k = 0; k < kc; k++) _mm512_storeu_ps(d + (size_t)k * ld, _mm512_setzero_ps());
            continue;
        }
        const __m512 ce = _mm512_sub_ps(_mm512_loadu_ps(col_exp + c0), _mm512_set1_ps((float)WS));
        // The next column block's lines of these rows (the backward asks for a few rows of every block in turn: a
        // stride the hardware prefetcher does not follow, and the unpacking waited on memory for most of its time)
        if (c0 / 16 + 1 < CB)
            for (int k = k0 & ~3; k < k0 + kc; k += 4)
                for (int j = 0; j < WD; j++)
                    _mm_prefetch((const char*)digits + (size_t)(((c0 / 16 + 1) * KT + k / 64) * WD + j) * TILE +
                                     ((k % 64) / 4) * 64, _MM_HINT_T0);
        for (int k = k0; k < k0 + kc; k++) {
            // B tile row (k % 64) / 4 holds 4 consecutive k of each of the 16 columns: lane c's byte k % 4
            const int8_t* at = digits + (size_t)(((c0 / 16) * KT + k / 64) * WD) * TILE + ((k % 64) / 4) * 64;
            const __m128i up = _mm_cvtsi32_si128(24 - 8 * (k % 4));
            __m512i q = _mm512_setzero_si512();
            for (int j = 0; j < WD; j++) { // q = ((d0 * 256 + d1) * 256 + d2) * 256 + d3, each digit sign-extended
                const __m512i v = _mm512_loadu_si512((const void*)(at + j * TILE));
                q = _mm512_add_epi32(_mm512_slli_epi32(q, 8), _mm512_srai_epi32(_mm512_sll_epi32(v, up), 24));
            }
            // |q| <= 2^30 rounds to float once, as unpack_weights' (float) does; scalef then multiplies by 2^(c_n - 30 + r_k)
            // exactly, as its ldexp
            const __m512 e = _mm512_add_ps(ce, _mm512_set1_ps(row_exp[k]));
            _mm512_storeu_ps(d + (size_t)(k - k0) * ld, _mm512_scalef_ps(_mm512_cvtepi32_ps(q), e));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs, every call
// ---------------------------------------------------------------------------------------------
namespace {

// Row t of x (t < n) -> its four digit planes in the row's 64-byte lines of the A tiles; a_exp[t] = e_t, or NaN
// when the row holds a NaN or an Inf (its digits are then zero). Rows past n are zero.
static void pack_row(int8_t* a_digits, float* a_exp, const float* x, int n, int in, const float* row_exp, int t) {
    const int64_t KT = k_tiles(in);
    int8_t* base = a_digits + (size_t)((t / 16) * KT * XD) * TILE + (t % 16) * 64;
    auto zero_row = [&] {
        for (int64_t kt = 0; kt < KT; kt++)
            for (int j = 0; j < XD; j++) memset(base + (kt * XD + j) * TILE, 0, 64);
    };
    if (t >= n) {
        a_exp[t] = 0.0f;
        zero_row();
        return;
    }
    const float* xr = x + (size_t)t * in;
    // largest exponent of x * 2^r_k, from the exponents alone (no product can overflow or underflow here)
    __m512 emax[4] = {_mm512_set1_ps(-INFINITY), _mm512_set1_ps(-INFINITY), _mm512_set1_ps(-INFINITY),
                      _mm512_set1_ps(-INFINITY)}; // four chains: a max waits 4 cycles for the one before
    __mmask16 bad = 0;
    for (int k = 0, c = 0; k < in; k += 16, c = (c + 1) & 3) {
        const __mmask16 m = (__mmask16)(k + 16 <= in ? 0xFFFF : (1u << (in - k)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(m, xr + k);
        bad |= _mm512_fpclass_ps_mask(v, 0x01 | 0x80 | 0x08 | 0x10); // QNaN, SNaN, +Inf, -Inf
        emax[c] = _mm512_max_ps(emax[c], _mm512_add_ps(_mm512_getexp_ps(v), _mm512_loadu_ps(row_exp + k)));
    }
    const float e = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(emax[0], emax[1]), _mm512_max_ps(emax[2], emax[3])));
    if (bad || e == -INFINITY) { // not finite, or all zero
        a_exp[t] = bad ? NAN : 0.0f;
        zero_row();
        return;
    }
    const float et = e + 1.0f; // |x'| < 2^et
    a_exp[t] = et;
    const __m512 shift = _mm512_set1_ps((float)XS - et);
    // Balanced digits without a carry chain: q + 0x808080 has the three low digits plus 128 as its plain bytes
    // 0..2 and the signed top digit as byte 3; xor 0x808080 takes the 128s off again (two's complement bytes).
    // One byte permutation then gathers each digit plane's 16 bytes.
    const __m512i offset = _mm512_set1_epi32(0x808080);
    alignas(64) static const uint8_t planes_order[64] = {
        3,  7,  11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63,  // x0: byte 3 of each of the 16 lanes
        2,  6,  10, 14, 18, 22, 26, 30, 34, 38, 42, 46, 50, 54, 58, 62,  // x1
        1,  5,  9,  13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61,  // x2
        0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60}; // x3
    const __m512i order = _mm512_load_si512(planes_order);
    for (int64_t kt = 0; kt < KT; kt++) {
        int8_t* dst = base + kt * XD * TILE;
        for (int j = 0; j < 64; j += 16) {
            const int k = (int)(kt * 64 + j);
            const __mmask16 m = (__mmask16)(k >= in ? 0 : k + 16 <= in ? 0xFFFF : (1u << (in - k)) - 1);
            const __m512 v = _mm512_maskz_loadu_ps(m, xr + k);
            // x * 2^(r_k + 30 - e_t), rounded to the nearest integer: |q| <= 2^30
            const __m512i q = _mm512_cvtps_epi32(_mm512_scalef_ps(v, _mm512_add_ps(_mm512_loadu_ps(row_exp + k), shift)));
            const __m512i digits = _mm512_xor_si512(_mm512_add_epi32(q, offset), offset);
            const __m512i planes = _mm512_permutexvar_epi8(order, digits);
            _mm_storeu_si128((__m128i*)(dst + j), _mm512_castsi512_si128(planes));
            _mm_storeu_si128((__m128i*)(dst + TILE + j), _mm512_extracti32x4_epi32(planes, 1));
            _mm_storeu_si128((__m128i*)(dst + 2 * TILE + j), _mm512_extracti32x4_epi32(planes, 2));
            _mm_storeu_si128((__m128i*)(dst + 3 * TILE + j), _mm512_extracti32x4_epi32(planes, 3));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The product
// ---------------------------------------------------------------------------------------------
struct alignas(64) tile_config {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

static void configure_tiles() {
    tile_config c;
    for (int i = 0; i < 8; i++) c.colsb[i] = 64, c.rows[i] = 16;
    // GCC's _tile_loadconfig tells the compiler it reads 8 bytes: make the whole config be written first
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig(&c);
}

// The next chunk of the weight stream into L2, a line after each tile product (160 of a chunk's 256 lines at
// 64 rows; the rest come on demand). Issued in bursts, or more than one per product, they were measured slower:
// as we read it, each PREFETCHT2 still holds one of the L1 fill buffers the tile loads need.
struct stream_prefetch {
    const char* next = nullptr;
    const char* end = nullptr;
    int lines = 1; // per tile product
    void start(const char* p, const char* stop, int per_product) { next = p, end = stop, lines = per_product; }
    void step() {
        for (int i = 0; i < lines; i++, next += 64)
            if (next < end) _mm_prefetch(next, _MM_HINT_T2);
    }
};

// Half a turn: one k-tile's 10 digit products. Weight digits go to registers W (w0, then w2) and V (w1, then
// w3), input digits to X (x3, then x1) and Y (x2, then x0). No two products in a row add to the same level sum,
// and each load goes to a register whose last reader was issued at least one product earlier (tiles are not
// renamed). A macro, not a function: GCC's tile intrinsics name their registers in the instruction text, so the
// register numbers must be literal tokens.
#define GB_AMX_HALF_TURN(W, V, X, Y, a, b)                                                                         \
    _tile_loadd(W, b, 64);                                                                                         \
    _tile_loadd(X, (a) + 3 * TILE, 64);                                                                            \
    _tile_dpbssd(3, X, W); pf.step();  /* S3 += x3 w0 */                                                           \
    _tile_loadd(Y, (a) + 2 * TILE, 64);                                                                            \
    _tile_dpbssd(2, Y, W); pf.step();  /* S2 += x2 w0 */                                                           \
    _tile_loadd(V, (b) + TILE, 64);                                                                                \
    _tile_dpbssd(3, Y, V); pf.step();  /* S3 += x2 w1 */                                                           \
    _tile_loadd(X, (a) + TILE, 64);                                                                                \
    _tile_dpbssd(1, X, W); pf.step();  /* S1 += x1 w0 */                                                           \
    _tile_dpbssd(2, X, V); pf.step();  /* S2 += x1 w1 */                                                           \
    _tile_loadd(Y, a, 64);                                                                                         \
    _tile_dpbssd(0, Y, W); pf.step();  /* S0 += x0 w0 */                                                           \
    _tile_dpbssd(1, Y, V); pf.step();  /* S1 += x0 w1 */                                                           \
    _tile_loadd(W, (b) + 2 * TILE, 64);                                                                            \
    _tile_dpbssd(3, X, W); pf.step();  /* S3 += x1 w2 */                                                           \
    _tile_dpbssd(2, Y, W); pf.step();  /* S2 += x0 w2 */                                                           \
    _tile_loadd(V, (b) + 3 * TILE, 64);                                                                            \
    _tile_dpbssd(3, Y, V); pf.step();  /* S3 += x0 w3 */

// One row block over k-tiles [k0, k1) of one column block: S0..S3 (tmm0..3) += digit products.
// a: the row block's A tiles at k0, b: the column block's B tiles at k0. Two k-tiles per turn with the operand
// registers trading roles between them, so that each load goes to a register whose last reader was issued at
// least one tile product earlier: the first half ends reading X three products back, W two back and Y and V
// one back, so the second half's W is the first's X and its X the first's W (loaded first), and the other way round.
static void k_tiles_product(const int8_t* a, const int8_t* b, int count, stream_prefetch& pf) {
    int kt = 0;
    for (; kt + 2 <= count; kt += 2, a += 2 * XD * TILE, b += 2 * WD * TILE) {
        GB_AMX_HALF_TURN(5, 4, 6, 7, a, b)
        GB_AMX_HALF_TURN(6, 4, 5, 7, a + XD * TILE, b + WD * TILE)
    }
    if (kt < count) { // an odd last k-tile: the first half of a turn
        GB_AMX_HALF_TURN(5, 4, 6, 7, a, b)
    }
}
#undef GB_AMX_HALF_TURN

// The level sums of one 16 x 16 block -> fp32 rows of out (rows < n, columns < out_cols), bias, epilogue.
static void finish_block(float* out, int out_cols, int n, int row0, int col0, const int32_t (*s)[256],
                         const float* a_exp, const float* col_exp, const float* bias, epilogue epi) {
    const int cols = imin(16, out_cols - col0);
    const __mmask16 m = (__mmask16)(cols == 16 ? 0xFFFF : (1u << cols) - 1);
    const __m512 ce = _mm512_loadu_ps(col_exp + col0);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + col0) : _mm512_setzero_ps();
    const __m512 radix = _mm512_set1_ps(256.0f);
    for (int r = 0; r < 16 && row0 + r < n; r++) {
        const float et = a_exp[row0 + r];
        __m512 y;
        if (et != et) { // NaN
            y = _mm512_set1_ps(NAN); // the input row was not finite
        } else {
            __m512 h = _mm512_cvtepi32_ps(_mm512_load_si512(s[0] + 16 * r));
            h = _mm512_fmadd_ps(h, radix, _mm512_cvtepi32_ps(_mm512_load_si512(s[1] + 16 * r)));
            h = _mm512_fmadd_ps(h, radix, _mm512_cvtepi32_ps(_mm512_load_si512(s[2] + 16 * r)));
            h = _mm512_fmadd_ps(h, radix, _mm512_cvtepi32_ps(_mm512_load_si512(s[3] + 16 * r)));
            y = _mm512_add_ps(_mm512_scalef_ps(h, _mm512_add_ps(ce, _mm512_set1_ps(et - 36.0f))), b);
            if (epi == EPILOGUE_GELU) y = gelu_lanes(y);
        }
        _mm512_mask_storeu_ps(out + (size_t)(row0 + r) * out_cols + col0, m, y);
    }
}

// Up to 4 rows (generation, the LM head): the same level sums with AVX-512 VNNI on the weight digits as they
// stream with ordinary loads, which the hardware prefetchers run ahead of (tile loads of a stream used once
// reached 17 GB/s for two threads, these 22). VPDPBUSD multiplies unsigned by signed bytes: an input digit
// goes in as d + 128, and 128 times the column's digit sum (also a VPDPBUSD, by ones) comes off. The sums are
// the same integers as the tile products', so both paths give the same bits.
constexpr int GEMV_ROWS = 4, GEMV_MAX_IN = 16384; // 4 products x in/4 x 4 x 255 x 128 < 2^31
constexpr int PF_AHEAD = 4096; // bytes of the weight stream: ~1.3 k-tiles

// acc[r][i + j] += (digit plane i of row r, +128) . wj over one 64-byte row of plane j (4 inputs x 16 columns).
// R and J are template arguments so every accumulator has a fixed register.
template <int R, int J>
static inline void gemv_step(__m512i (&acc)[GEMV_ROWS][4], const int8_t* xa, int rr, __m512i wj) {
    const __m512i flip = _mm512_set1_epi32((int)0x80808080);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int i = 0; i + J < XD; i++) {
            int32_t x4; // the 4 bytes of digit plane i at these inputs
            memcpy(&x4, xa + i * TILE + r * 64 + rr * 4, 4);
            acc[r][i + J] = _mm512_dpbusd_epi32(acc[r][i + J], _mm512_xor_si512(_mm512_set1_epi32(x4), flip), wj);
        }
}

// Digit plane J of k-tile kt for S column blocks: the plane's 16 rows of 64 bytes in address order, a
// sequential stream for the prefetchers; cs[st][J] gathers the plane's column sums.
template <int R, int S, int J>
static inline void gemv_plane(__m512i (&acc)[S][GEMV_ROWS][4], __m512i (&cs)[S][WD], const int8_t* digits,
                              const int (&cbs)[S], const bool (&live)[S], int64_t KT, int64_t kt, const int8_t* xa) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (int rr = 0; rr < 16; rr++)
        for (int st = 0; st < S; st++) {
            if (!live[st]) continue;
            const int8_t* w = digits + ((size_t)cbs[st] * KT + kt) * WD * TILE + J * TILE + rr * 64;
            const __m512i wj = _mm512_load_si512(w);
            _mm_prefetch((const char*)w + PF_AHEAD, _MM_HINT_T0);
            cs[st][J] = _mm512_dpbusd_epi32(cs[st][J], ones, wj);
            gemv_step<R, J>(acc[st], xa, rr, wj);
        }
}

// S column blocks at once, from S places in the thread's range: S streams keep more lines in flight than one.
template <int R, int S>
static void gemv(float* out, int n, const int8_t* digits, const float* col_exp, int in, int out_cols, const float* bias,
                 epilogue epi, const int8_t* a_digits, const float* a_exp, int c0, int c1) {
    const int64_t KT = k_tiles(in);
    alignas(64) int32_t sums[4][256];
    const int span = (c1 - c0 + S - 1) / S; // stream s covers [c0 + s * span, c0 + (s + 1) * span)
    for (int p = 0; p < span; p++) {
        int cbs[S];
        bool live[S];
        for (int st = 0; st < S; st++) cbs[st] = c0 + st * span + p, live[st] = cbs[st] < c1;
        __m512i acc[S][GEMV_ROWS][4], cs[S][WD];
        for (int st = 0; st < S; st++) {
            for (int r = 0; r < GEMV_ROWS; r++)
                for (int l = 0; l < 4; l++) acc[st][r][l] = _mm512_setzero_si512();
            for (int j = 0; j < WD; j++) cs[st][j] = _mm512_setzero_si512();
        }
        for (int64_t kt = 0; kt < KT; kt++) {
            const int8_t* xa = a_digits + kt * XD * TILE;
            gemv_plane<R, S, 0>(acc, cs, digits, cbs, live, KT, kt, xa);
            gemv_plane<R, S, 1>(acc, cs, digits, cbs, live, KT, kt, xa);
            gemv_plane<R, S, 2>(acc, cs, digits, cbs, live, KT, kt, xa);
            gemv_plane<R, S, 3>(acc, cs, digits, cbs, live, KT, kt, xa);
        }
        for (int st = 0; st < S; st++) {
            if (!live[st]) continue;
            // level l holds products (i, l - i); each input digit came in 128 too high
            const __m512i c0s = _mm512_slli_epi32(cs[st][0], 7);
            const __m512i c01 = _mm512_slli_epi32(_mm512_add_epi32(cs[st][0], cs[st][1]), 7);
            const __m512i s012 = _mm512_add_epi32(_mm512_add_epi32(cs[st][0], cs[st][1]), cs[st][2]);
            const __m512i c012 = _mm512_slli_epi32(s012, 7);
            const __m512i c0123 = _mm512_slli_epi32(_mm512_add_epi32(s012, cs[st][3]), 7);
            for (int r = 0; r < R; r++) {
                _mm512_store_si512(sums[0] + 16 * r, _mm512_sub_epi32(acc[st][r][0], c0s));
                _mm512_store_si512(sums[1] + 16 * r, _mm512_sub_epi32(acc[st][r][1], c01));
                _mm512_store_si512(sums[2] + 16 * r, _mm512_sub_epi32(acc[st][r][2], c012));
                _mm512_store_si512(sums[3] + 16 * r, _mm512_sub_epi32(acc[st][r][3], c0123));
            }
            finish_block(out, out_cols, n, 0, cbs[st] * 16, sums, a_exp, col_exp, bias, epi);
        }
    }
}

// Column blocks [c0, c1) of the product with the tile unit (rows of any count).
static void tile_product(float* out, int n, const int8_t* digits, const float* col_exp, int in, int out_cols,
                         const float* bias, epilogue epi, const int8_t* a_digits, const float* a_exp, int c0, int c1) {
    const int KT = (int)k_tiles(in), RB = (n + 15) / 16;
    // row blocks per group: the group's input digits (KT * 4 KB per row block) stay in L2 across column blocks
    const int group = imax(1, imin(imin(RB, 16), (int)(GROUP_BYTES / ((int64_t)KT * XD * TILE))));
    alignas(64) int32_t partial[16][4][256]; // a column block's level sums between chunks, per row block
    alignas(64) int32_t sums[4][256];
    const size_t cb_bytes = (size_t)KT * WD * TILE;
    const char* my_end = (const char*)(digits + c1 * cb_bytes);
    stream_prefetch pf;
    configure_tiles();
    for (int g0 = 0; g0 < RB; g0 += group) {
        const int g1 = imin(RB, g0 + group);
        for (int cb = c0; cb < c1; cb++) {
            const int8_t* wb = digits + cb * cb_bytes;
            for (int k0 = 0; k0 < KT; k0 += CHUNK) {
                const int k1 = imin(KT, k0 + CHUNK);
                // what this thread reads next: the next chunk, the next column block, or the next group's first
                const char* nx = k1 < KT ? (const char*)(wb + (size_t)k1 * WD * TILE)
                                 : cb + 1 < c1 ? (const char*)(wb + cb_bytes)
                                 : g1 < RB ? (const char*)(digits + c0 * cb_bytes)
                                           : my_end;
                const char* nx_end = nx + (size_t)CHUNK * WD * TILE;
                // a chunk's 256 lines of weight digits serve 10 * CHUNK products per row block: with four row
                // blocks one line per product is enough (more was measured slower), with fewer rows the
                // stream is all there is and wants more lines per product
                pf.start(nx, nx_end < my_end ? nx_end : my_end, imax(1, 4 / (g1 - g0)));
                for (int rb = g0; rb < g1; rb++) {
                    if (k0 == 0) {
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                    } else {
                        _tile_loadd(0, partial[rb - g0][0], 64);
                        _tile_loadd(1, partial[rb - g0][1], 64);
                        _tile_loadd(2, partial[rb - g0][2], 64);
                        _tile_loadd(3, partial[rb - g0][3], 64);
                    }
                    k_tiles_product(a_digits + ((size_t)rb * KT + k0) * XD * TILE, wb + (size_t)k0 * WD * TILE,
                                    k1 - k0, pf);
                    int32_t(*dst)[256] = k1 < KT ? partial[rb - g0] : sums;
                    _tile_stored(0, dst[0], 64);
                    _tile_stored(1, dst[1], 64);
                    _tile_stored(2, dst[2], 64);
                    _tile_stored(3, dst[3], 64);
                    if (k1 == KT) finish_block(out, out_cols, n, rb * 16, cb * 16, sums, a_exp, col_exp, bias, epi);
                }
            }
        }
    }
    _tile_release();
}

} // namespace

void gemm(float* out, const float* x, int n, const int8_t* digits, const float* row_exp, const float* col_exp,
          int in, int out_cols, const float* bias, epilogue epi, int8_t* a_digits, float* a_exp, bool threaded) {
    const int CB = (int)col_blocks(out_cols), RB = (n + 15) / 16;
#pragma omp parallel if (threaded)
    {
#pragma omp for schedule(static)
        for (int t = 0; t < RB * 16; t++) pack_row(a_digits, a_exp, x, n, in, row_exp, t);
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int c0 = (int)((int64_t)CB * id / nt), c1 = (int)((int64_t)CB * (id + 1) / nt);
        if (c0 < c1) {
            using gemv_fn = void (*)(float*, int, const int8_t*, const float*, int, int, const float*, epilogue,
                                     const int8_t*, const float*, int, int);
            // two streams while their accumulators fit the 32 registers (measured: 1 row 5.2 -> 5.0 ms for the LM head)
            static const gemv_fn gemv_rows[GEMV_ROWS + 1] = {nullptr, gemv<1, 2>, gemv<2, 2>, gemv<3, 1>, gemv<4, 1>};
            if (n <= GEMV_ROWS && in <= GEMV_MAX_IN)
                gemv_rows[n](out, n, digits, col_exp, in, out_cols, bias, epi, a_digits, a_exp, c0, c1);
            else
                tile_product(out, n, digits, col_exp, in, out_cols, bias, epi, a_digits, a_exp, c0, c1);
        }
    }
}

} // namespace amx
} // namespace gb
