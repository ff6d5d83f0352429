// The int8 kernel (--matmul int8): a product by Q4_K weights kept as stored reads its activations rounded to 8 bits,
// as llama.cpp does, and multiplies on AVX-512 VNNI, or for prompts on AMX-INT8 tiles where the CPU and OS allow
// them (gemm.h int8_path_now; the same integer sums either way, so the same bits). Not exact: each row's block of 256 inputs becomes
// s * q with q in -127..127 and s = max |x| / 127, so an input errs by up to s / 2 (docs/internals.md "The int8
// kernel"). Every other product keeps the fp32 kernel. Internal to core/kernels (gemm.cpp calls it).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/gemm.h"

namespace gb::int8 {

// Whether this build and CPU run the kernel (AVX-512 VNNI, or in a build for AVX2 without AVX-512 its AVX2 form);
// when not, why. (gemm.h int8_usable asks it once.)
bool detect(std::string& why);
// The row kernel's name for this build: "vnni", or "avx2" (gemm.h int8_path_name of INT8_VNNI)
const char* row_path_name();

// out [n][ldc] (w.out columns) = x [n][w.in] * W (+ bias [w.out]), then epi; W a Q4_K matrix kept as stored.
// int8_usable() must hold (set_matmul_kind checks it before any matrix is marked for this kernel).
void gemm_q4k(float* out, int ldc, const float* x, const weight_matrix& w, const float* bias, int n,
              gemm_scratch& scratch, epilogue epi);

// out [n][t.rows] = x [n][t.cols] * t^T for a Q4_K table (the LM head of a Q4_K file under --matmul int8): each
// output what gemm_q4k gives for the same weights laid as a matrix, bit for bit.
void gemm_table_q4k(float* out, const float* x, const row_table& t, int n, gemm_scratch& scratch);

} // namespace gb::int8
