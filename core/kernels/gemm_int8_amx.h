// The int8 kernel's AMX-INT8 part (core/kernels/gemm_int8_amx.cpp, built with AMX and AVX-512 enabled, as
// gemm_amx.cpp): the integer sums of one Q4_K block for 16 rows at a time, on TDPBSUD tiles. gemm_int8.cpp does
// everything else (rounding the rows, the block tile, the three float operations), so the sums and the bits are
// the VNNI path's. Plain pointers only, nothing inline or templated shared with other translation units (the
// reason gemm_amx.h gives). Call only where gb::int8_amx_usable().
#pragma once
#include <cstdint>

namespace gb::int8::amx {

// This thread's tile registers configured for block_sums (once per product, before the first block_sums), and
// released after its last one.
void begin();
void end();

// tot [nr/16][16][16] (column chunk, row, column): for 16 rows of activations rounded to 8 bits (xq: the block's
// first input of row 0, rows ldx bytes apart, all 16 readable) and the block's nr columns, sum_s sc_s (q . x_q)_s
// over the block's 8 sub-blocks of 32 inputs; exact in int32 (gemm_int8.cpp's bound).
// levels [8 s][8 t][nr][4] (u8 0..15: a column's 4 inputs 4t.. of sub-block s), sc [8 s][nr] (int32 0..63): the
// block tile gemm_int8.cpp builds.
void block_sums(int32_t* tot, const int8_t* xq, int ldx, const uint8_t* levels, const int32_t* sc, int nr);

} // namespace gb::int8::amx
