// The int8 kernel (--matmul int8): a product by Q4_K weights kept as stored reads its activations rounded to 8 bits,
// as llama.cpp does, and multiplies on AVX-512 VNNI. Not exact: each row's block of 256 inputs becomes
// s * q with q in -127..127 and s = max |x| / 127, so an input errs by up to s / 2 (docs/internals.md "The int8
// kernel"). Every other product keeps the fp32 kernel. Internal to core/kernels (gemm.cpp calls it).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/gemm.h"

namespace gb::int8 {

// Whether this build and CPU run the VNNI kernel; when not, why.
bool usable(std::string* why = nullptr);

// x [n][K] -> q [n][K] (int8), scale [n][K/256] (s; NaN for a block holding NaN or Inf, whose q are 0) and
// sums [n][K/32] (each 32 q's sum, int16). K a multiple of 256.
void quantize_rows(int8_t* q, float* scale, int16_t* sums, const float* x, int n, int K);

// out [n][ldc] (w.out columns) = x [n][w.in] * W (+ bias [w.out]), then epi; W a Q4_K matrix kept as stored.
// usable() must hold (set_matmul_kind checks it before any matrix is marked for this kernel).
void gemm_q4k(float* out, int ldc, const float* x, const weight_matrix& w, const float* bias, int n,
              gemm_scratch& scratch, epilogue epi);

} // namespace gb::int8
