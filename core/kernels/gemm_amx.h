// The AMX kernel's entry points (core/kernels/gemm_amx.cpp, built with AMX and AVX-512 enabled). Plain pointers only:
// that translation unit instantiates no template shared with the rest of the program, so no code built for
// AMX machines can be picked by the linker for code that runs elsewhere. Call only when amx_usable().
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/gemm.h"

namespace gb {
namespace amx {

constexpr int max_in = 32768; // inner sizes up to this cannot overflow the int32 tile accumulators
inline int64_t k_tiles(int64_t in) { return (in + 63) / 64; }  // the inner dimension in tiles of 64
inline int64_t col_blocks(int64_t out) { return (out + 15) / 16; } // output columns in tiles of 16
inline size_t weight_digit_bytes(int64_t in, int64_t out) { return (size_t)(col_blocks(out) * k_tiles(in) * 4 * 1024); }
inline size_t row_digit_bytes(int64_t n, int64_t in) { return (size_t)(((n + 15) / 16) * k_tiles(in) * 4 * 1024); }

// w [in][out] (finite) -> digits [col_blocks][k_tiles][4][16][64], row_exp [k_tiles*64], col_exp [col_blocks*16].
// transposed: w is stored [out][in] (an embedding table used as the LM head).
void pack_weights(int8_t* digits, float* row_exp, float* col_exp, const float* w, int in, int out, bool transposed);
// The inverse, to within 2^-31 of each row's and column's largest weight.
void unpack_weights(float* w, const int8_t* digits, const float* row_exp, const float* col_exp, int in, int out);
// Rows k0 .. k0+kc of columns n0 .. n0+cols (n0 and cols multiples of 16) as floats, dst [kc][ld]: exactly
// unpack_weights' values, 16 columns at a time; columns past the packed width are 0 (the backward's slices).
void unpack_rows(float* dst, int ld, const int8_t* digits, const float* row_exp, const float* col_exp, int in, int out,
                 int k0, int kc, int n0, int cols);
// out [n][out] = x [n][in] * W (+ bias [out] when not null), then epi. a_digits [row_digit_bytes(n, in)] and
// a_exp [ceil(n/16)*16] are the caller's scratch.
void gemm(float* out, const float* x, int n, const int8_t* digits, const float* row_exp, const float* col_exp,
          int in, int out_cols, const float* bias, epilogue epi, int8_t* a_digits, float* a_exp, bool threaded);

} // namespace amx
} // namespace gb
