// Weights kept as stored, turned into fp32 vectors in registers: VL values at a time, each exactly the value
// quant.cpp's dequantize gives it, so a product that converts in registers sums the same numbers as one that
// converts a slice into memory first. Internal to core/kernels (gemm.cpp): the small products of generation and
// the LM head read the stored bytes once, with no tile between.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__AVX512F__) || defined(__F16C__) || defined(__FMA__)
#include <immintrin.h>
#endif

#include "kernels/gemm_tile.h" // vec, VL
#include "model/quant.h"       // k_value
#include "util/half.h"

namespace gb {

typedef int8_t i8v __attribute__((vector_size(VL), aligned(1), may_alias));
typedef uint16_t u16v __attribute__((vector_size(2 * VL), aligned(2), may_alias));
typedef uint32_t u32v __attribute__((vector_size(4 * VL), aligned(4), may_alias));

typedef int32_t i32v __attribute__((vector_size(4 * VL), aligned(4), may_alias));

// VL bytes as 32-bit integers, signed (Q8_0's levels) or not (Q4_K's). Spelled out for AVX-512 and AVX2: GCC 12
// converts vector-extension bytes one at a time.
template <bool is_signed>
inline vec int_values(const void* p) {
#if defined(__AVX512F__)
    const __m128i b = _mm_loadu_si128((const __m128i*)p);
    const __mmask16 all = 0xFFFF; // the zero-masked forms, as in transpose16
    const __m512 v = _mm512_maskz_cvtepi32_ps(all, is_signed ? _mm512_maskz_cvtepi8_epi32(all, b) : _mm512_maskz_cvtepu8_epi32(all, b));
#elif defined(__AVX2__)
    const __m128i b = _mm_loadl_epi64((const __m128i*)p);
    const __m256 v = _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
#else
    vec v;
    for (int l = 0; l < VL; l++) v[l] = is_signed ? (float)((const int8_t*)p)[l] : (float)((const uint8_t*)p)[l];
#endif
    vec out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}
// VL bytes as 32-bit integers (0..255), for bit fields taken apart in 32-bit lanes, where shifts are native
inline i32v widen_bytes(const void* p) {
#if defined(__AVX512F__)
    const __m512i v = _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128((const __m128i*)p));
#elif defined(__AVX2__)
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
#else
    i32v v;
    for (int l = 0; l < VL; l++) v[l] = ((const uint8_t*)p)[l];
#endif
    i32v out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}
// 32-bit integers as floats (exact below 2^24)
inline vec int32_values(i32v q) {
#if defined(__AVX512F__)
    __m512i a;
    std::memcpy(&a, &q, sizeof a);
    const __m512 v = _mm512_maskz_cvtepi32_ps(0xFFFF, a);
#elif defined(__AVX2__)
    __m256i a;
    std::memcpy(&a, &q, sizeof a);
    const __m256 v = _mm256_cvtepi32_ps(a);
#else
    vec v;
    for (int l = 0; l < VL; l++) v[l] = (float)q[l];
#endif
    vec out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}
// Q8_0: an int8 times its block's scale (exact in fp32)
inline vec q8_values(const int8_t* q, vec scale) { return int_values<true>(q) * scale; }
// The low (bits 0-3) or high (4-7) nibbles of VL level bytes as floats, taken apart in 32-bit lanes: GCC 12 shifts
// an 8-byte vector (AVX2's VL) one byte at a time (a 1B-shape Q4_K token took 216 ms, half of it in those shifts)
template <bool high>
inline vec nibble_values(const void* p) {
    const i32v w = widen_bytes(p);
    return int32_values(high ? w >> 4 : w & 0xF);
}

// VL 24-bit little-endian words, 3 bytes apart, in 32-bit lanes (bits 24-31 zero): Q6_K's four levels a column in
// its panels (stored_panels.h k6_put). AVX2: each 128-bit half shuffles its 4 words' 12 bytes; AVX-512 puts two of those
// side by side. Reads exactly the 3 VL bytes.
inline i32v k6_words(const uint8_t* p) {
#if defined(__AVX2__)
    // the low half from bytes 0..15 (words 0-3 at 0..11), the high half from bytes 8..23 (words 4-7 at 4..15)
    const __m128i spread_lo = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    const __m128i spread_hi = _mm_setr_epi8(4, 5, 6, -1, 7, 8, 9, -1, 10, 11, 12, -1, 13, 14, 15, -1);
    auto eight = [&](const uint8_t* q) {
        const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)q)),
                                                  _mm_loadu_si128((const __m128i*)(q + 8)), 1);
        return _mm256_shuffle_epi8(v, _mm256_set_m128i(spread_hi, spread_lo));
    };
#if defined(__AVX512F__)
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(eight(p)), eight(p + 24), 1);
#else
    const __m256i w = eight(p);
#endif
#else
    i32v w;
    for (int l = 0; l < VL; l++) w[l] = (int32_t)(p[3 * l] | p[3 * l + 1] << 8 | p[3 * l + 2] << 16);
#endif
    i32v out;
    std::memcpy(&out, &w, sizeof out);
    return out;
}

// F16 and BF16 widen exactly
inline vec f16_values(const uint16_t* h) {
#if defined(__AVX512F__)
    const __m512 v = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256((const __m256i*)h)); // maskz: see transpose16
#elif defined(__F16C__) && defined(__AVX__)
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h));
#else
    vec v;
    for (int l = 0; l < VL; l++) v[l] = f16_to_f32(h[l]);
#endif
    vec out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}
inline vec bf16_values(const uint16_t* h) {
    const u32v bits = __builtin_convertvector(*(const u16v*)h, u32v) << 16;
    vec out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}

// One f16 value (a block's scale), inline
inline float half_value(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

// The K types' d * q - m, rounded as k_value rounds it (once where the CPU has FMA)
inline vec k_values(vec d, vec q, vec m) {
#if defined(__FMA__) && defined(__AVX512F__)
    __m512 a, b, c;
    std::memcpy(&a, &d, sizeof a), std::memcpy(&b, &q, sizeof b), std::memcpy(&c, &m, sizeof c);
    const __m512 r = _mm512_fmsub_ps(a, b, c);
#elif defined(__FMA__) && defined(__AVX__)
    __m256 a, b, c;
    std::memcpy(&a, &d, sizeof a), std::memcpy(&b, &q, sizeof b), std::memcpy(&c, &m, sizeof c);
    const __m256 r = _mm256_fmsub_ps(a, b, c);
#else
    vec r;
    for (int l = 0; l < VL; l++) r[l] = k_value(d[l], q[l], m[l]);
#endif
    vec out;
    std::memcpy(&out, &r, sizeof out);
    return out;
}

// Q4_K's 8 six-bit scales and 8 six-bit mins of a block (12 bytes), times its d and dmin: sub-block s's values
// are k_value(dsc[s], q, dmn[s]), as dequantize computes them
// Q4_K's 6-bit scale sc[s] and min m[s] of each sub-block, from a block's 12 scale bytes (at block + 4)
inline void k4_fields(int sc[8], int m[8], const uint8_t* block) {
    const uint8_t* q = block + 4;
    for (int s = 0; s < 8; s++) {
        sc[s] = s < 4 ? q[s] & 63 : (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
        m[s] = s < 4 ? q[s + 4] & 63 : (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    }
}
inline void k4_scales(float dsc[8], float dmn[8], const uint8_t* block) {
    const float d = half_value((uint16_t)(block[0] | block[1] << 8)), dmin = half_value((uint16_t)(block[2] | block[3] << 8));
    int sc[8], m[8];
    k4_fields(sc, m, block);
    for (int s = 0; s < 8; s++) dsc[s] = d * (float)sc[s], dmn[s] = dmin * (float)m[s];
}

// Q6_K's (d * scale) * (q - 32), as dequantize rounds it: once. With FMA as ds * q - 32 ds (ds32), the same exact
// value (32 ds is exact) rounded once.
inline vec k6_values(vec ds, vec ds32, vec q) {
#if defined(__FMA__) && (defined(__AVX512F__) || defined(__AVX__))
    return k_values(ds, q, ds32);
#else
    (void)ds32;
    return ds * (q - 32.0f);
#endif
}

// f(std::integral_constant<int, c>, h) for the 8 quarters of a Q6_K block in the order of their values (128 h + 32 c
// + l): each quarter's nibble and bit shifts are then constants
template <class F>
inline __attribute__((always_inline)) void k6_quarters(F&& f) {
    for (int h = 0; h < 2; h++) {
        f(std::integral_constant<int, 0>{}, h);
        f(std::integral_constant<int, 1>{}, h);
        f(std::integral_constant<int, 2>{}, h);
        f(std::integral_constant<int, 3>{}, h);
    }
}

} // namespace gb
