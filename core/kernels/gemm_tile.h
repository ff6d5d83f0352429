// The fp32 kernel's pieces shared by the forward product (gemm.cpp) and the transposed product of the backward
// (gemm_backward.cpp): the register tile, the micro-kernel, row packing, a 16 x 16 transpose and the slice
// conversion of weights kept as stored. Internal to core/kernels.
#pragma once
#include <algorithm>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/gemm.h"
#include "kernels/unroll.h" // GB_UNROLL
#include "util/lanes.h" // parallel_min_work
#include "util/simd_math.h" // gelu_lanes

namespace gb {

// The micro-kernel's register tile: MR rows times NV vectors of VL floats. AVX-512 (32 registers):
// 8 x 48 = 24 accumulators + 3 panel vectors + 1 broadcast. AVX2 (16 registers): 4 x 24 = 12 + 3 + 1.
#if defined(__AVX512F__)
constexpr int VL = 16, MR = 8, NV = 3;
#elif defined(__AVX__)
constexpr int VL = 8, MR = 4, NV = 3;
#else
constexpr int VL = 4, MR = 4, NV = 2;
#endif
constexpr int NR = VL * NV;
constexpr int KC = 384; // inner-dimension slice: KC x NR floats of the panel (72 KB with AVX-512, in L2)

// loads and stores need no alignment, and the type may alias the floats it is loaded from
typedef float vec __attribute__((vector_size(VL * sizeof(float)), aligned(4), may_alias));
// Local arrays of vec (register tiles, row scales) are declared VEC_ALIGNED: clang reads and writes their elements
// with aligned vector moves whatever the typedef says, and under its ASan, which lays the stack out otherwise,
// such an array landed on a 32-byte boundary and the 64-byte store faulted.
#define VEC_ALIGNED alignas(VL * sizeof(float))

// Weight types kept as whole blocks in their panels (not F16, BF16 or Q8_0, which are laid [k][NR] like floats).
inline bool raw_blocks(uint32_t type) { return type != GGML_F16 && type != GGML_BF16 && type != GGML_Q8_0; }
// rows k0 .. k0+kc of panel p of a stored matrix -> tile [kc][NR] floats, each exactly its dequantised value
// (gemm.cpp). k0 and kc are whole blocks of the type.
void dequantize_slice(float* tile, const weight_matrix& w, int64_t p, int k0, int kc);

#if defined(__AVX512F__)
// dst[i][j] = src[j][i] for a 16 x 16 square (row strides in floats): unpacks pair rows, then 64-bit pairs,
// then 128-bit lanes twice
inline void transpose16(float* dst, int dst_stride, const float* src, int src_stride) {
    __m512 r[16], t[16];
    const __mmask16 all = 0xFFFF; // the zero-masked forms: the plain ones start from GCC's "undefined" vector, which
                                  // -Wuninitialized reports inside avx512fintrin.h
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + (size_t)i * src_stride);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_maskz_unpacklo_ps(all, r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_maskz_unpackhi_ps(all, r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) {
            t[8 * h + i] = _mm512_maskz_shuffle_f32x4(all, r[8 * h + i], r[8 * h + i + 4], 0x88);
            t[8 * h + i + 4] = _mm512_maskz_shuffle_f32x4(all, r[8 * h + i], r[8 * h + i + 4], 0xDD);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_maskz_shuffle_f32x4(all, t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_maskz_shuffle_f32x4(all, t[i], t[i + 8], 0xDD);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + (size_t)i * dst_stride, r[i]);
}
#endif

// c [R][ldc] (cols <= NR valid columns) = acc + bias [NR] (when not null), then the epilogue: the end of a register
// tile's last slice (micro_kernel, and gemm.cpp's stored_kernel)
template <int R>
inline void store_tile(float* c, int ldc, int cols, vec (&acc)[R][NV], const float* bias, epilogue epi) {
    if (bias)
        GB_UNROLL
        for (int j = 0; j < NV; j++) {
            const vec bj = *(const vec*)(bias + j * VL);
            GB_UNROLL
            for (int r = 0; r < R; r++) acc[r][j] += bj;
        }
    if (epi == EPILOGUE_GELU)
        GB_UNROLL
        for (int r = 0; r < R; r++)
            GB_UNROLL
            for (int j = 0; j < NV; j++) acc[r][j] = gelu_lanes(acc[r][j]);
    GB_UNROLL
    for (int r = 0; r < R; r++) {
        if (cols == NR) {
            GB_UNROLL
            for (int j = 0; j < NV; j++) *(vec*)(c + (size_t)r * ldc + j * VL) = acc[r][j];
        } else {
            float row[NR];
            GB_UNROLL
            for (int j = 0; j < NV; j++) *(vec*)(row + j * VL) = acc[r][j];
            std::memcpy(c + (size_t)r * ldc, row, sizeof(float) * cols);
        }
    }
}

// c [R][ldc] (cols <= NR valid columns) (+)= a [kc][MR] (R rows used) * b [kc][NR]; meanwhile one cache line
// of pf per k step, for the first pf_lines steps, is fetched into L2 (the next slice of the panel stream).
// On the last slice (last): + bias [NR] when not null, then the epilogue, on the registers before the store.
template <int R>
inline void micro_kernel(float* c, int ldc, int cols, const float* a, const float* b, int kc, bool accumulate,
                         const char* pf, int pf_lines, bool last, const float* bias, epilogue epi) {
    VEC_ALIGNED vec acc[R][NV];
    if (accumulate && cols == NR) {
        GB_UNROLL
        for (int r = 0; r < R; r++)
            GB_UNROLL
            for (int j = 0; j < NV; j++) acc[r][j] = *(const vec*)(c + (size_t)r * ldc + j * VL);
    } else if (accumulate) { // the last, partial panel
        GB_UNROLL
        for (int r = 0; r < R; r++) {
            float row[NR] = {};
            std::memcpy(row, c + (size_t)r * ldc, sizeof(float) * cols);
            GB_UNROLL
            for (int j = 0; j < NV; j++) acc[r][j] = *(const vec*)(row + j * VL);
        }
    } else {
        GB_UNROLL
        for (int r = 0; r < R; r++)
            GB_UNROLL
            for (int j = 0; j < NV; j++) acc[r][j] = vec{};
    }
    // the prefetches are spread evenly over the slice: issued back to back they fill the line-fill buffers
    // and the kernel's own loads from L2 wait behind them
    const int pf_every = pf_lines > 0 ? std::max(1, kc / pf_lines) : kc + 1;
    int pf_next = 0, pf_done = 0;
    for (int k = 0; k < kc; k++) {
        if (k == pf_next && pf_done < pf_lines) {
            __builtin_prefetch(pf + (size_t)pf_done * 64, 0, 2);
            pf_done++;
            pf_next += pf_every;
        }
        VEC_ALIGNED vec bk[NV];
        GB_UNROLL
        for (int j = 0; j < NV; j++) bk[j] = *(const vec*)(b + (size_t)k * NR + j * VL);
        GB_UNROLL
        for (int r = 0; r < R; r++) {
            const float ar = a[k * MR + r]; // broadcast by the scalar-vector product
            GB_UNROLL
            for (int j = 0; j < NV; j++) acc[r][j] += ar * bk[j];
        }
    }
    store_tile<R>(c, ldc, cols, acc, last ? bias : nullptr, last ? epi : EPILOGUE_NONE);
}

using kernel_fn = void (*)(float*, int, int, const float*, const float*, int, bool, const char*, int, bool,
                          const float*, epilogue);
template <int... R>
struct kernel_table {
    static constexpr kernel_fn by_rows[] = {nullptr, micro_kernel<R>...};
};
#if defined(__AVX512F__)
using kernels = kernel_table<1, 2, 3, 4, 5, 6, 7, 8>;
#else
using kernels = kernel_table<1, 2, 3, 4>;
#endif
static_assert(sizeof(kernels::by_rows) / sizeof(kernel_fn) == MR + 1, "one kernel per row count 1..MR");

// x [rows][K] (rows ld floats apart; 0: K) -> slice-major packed blocks: slice s (depth wide) holds [blocks][kc][MR], rows past n are zero.
// One (slice, block) pair per call, so threads can share the packing.
inline void pack_rows(float* packed, const float* x, int n, int K, int blocks, int k0, int ib, int depth, int ld = 0) {
    const int kc = std::min(depth, K - k0);
    float* dst = packed + (size_t)k0 * blocks * MR + (size_t)ib * kc * MR;
    for (int r = 0; r < MR; r++) {
        const int row = ib * MR + r;
        if (row < n) {
            const float* src = x + (size_t)row * (ld ? ld : K) + k0;
            for (int k = 0; k < kc; k++) dst[k * MR + r] = src[k];
        } else {
            for (int k = 0; k < kc; k++) dst[k * MR + r] = 0.0f;
        }
    }
}

} // namespace gb
