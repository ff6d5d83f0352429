// The interleaved panels of Q4_K and Q6_K weights kept as stored (gemm.cpp's pack_parts writes them, its
// dequantize_slice and stored_kernel read them): where each column's bytes lie in a block row of NR columns, and
// their values as fp32 vectors, each exactly what quant.cpp's dequantize gives. Internal to core/kernels.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/gemm_tile.h"     // NR, NV, vec
#include "kernels/stored_values.h" // the conversions in registers

namespace gb {

// Q4_K's panels are interleaved. Block row b of panel p (the NR columns' block b, NR * 144 bytes, where the
// other block types have the NR blocks one after another) holds d [NR] and dmin [NR] (f16), the 12 scale bytes
// [12][NR], then the 128 level bytes [128][NR]. Byte i of VL columns is then one vector load, so a slice turns into
// floats [k][NR] in registers, with no transpose, and a small product converts as it multiplies.
inline void k4_put(uint8_t* row, int64_t jj, const uint8_t* block) {
    std::memcpy(row + 2 * jj, block, 2);
    std::memcpy(row + 2 * NR + 2 * jj, block + 2, 2);
    for (int i = 0; i < 12; i++) row[(4 + i) * NR + jj] = block[4 + i];
    for (int i = 0; i < 128; i++) row[(16 + i) * NR + jj] = block[16 + i];
}
// A block row's scales and mins for each sub-block s: dsc[s][j] and dmn[s][j], the VL columns of vector j
// (k4_scales' values, which dequantize computes)
inline void k4_row_scales(vec dsc[8][NV], vec dmn[8][NV], const uint8_t* row) {
    for (int j = 0; j < NV; j++) {
        const vec d = f16_values((const uint16_t*)row + j * VL), dmin = f16_values((const uint16_t*)(row + 2 * NR) + j * VL);
        // the 12 scale bytes in 32-bit lanes, where shifts are native (nibble_values)
        VEC_ALIGNED i32v b[12];
        for (int i = 0; i < 12; i++) b[i] = widen_bytes(row + (4 + i) * NR + j * VL);
        for (int s = 0; s < 4; s++) {
            dsc[s][j] = d * int32_values(b[s] & 63);
            dmn[s][j] = dmin * int32_values(b[s + 4] & 63);
            dsc[s + 4][j] = d * int32_values((b[s + 8] & 0xF) | ((b[s] >> 6) << 4));
            dmn[s + 4][j] = dmin * int32_values((b[s + 8] >> 4) | ((b[s + 4] >> 6) << 4));
        }
    }
}
// Value 64 g + 32 high + l of an interleaved block row (levels at q = the row's byte 16 NR), vector j, as floats:
// level byte 32 g + l, its low nibble (sub-block 2 g) or high one (2 g + 1)
template <bool high>
inline vec k4_value(const uint8_t* q, int g, int l, int j, const vec dsc[8][NV], const vec dmn[8][NV]) {
    return k_values(dsc[2 * g + high][j], nibble_values<high>(q + (size_t)(32 * g + l) * NR + j * VL), dmn[2 * g + high][j]);
}

// Q6_K's panels are interleaved too, with the levels repacked: block row b holds d [NR] (f16), the 16 scale bytes
// [16][NR] (int8), then the 256 six-bit levels (q - 32 + 32, 0..63) four at a time, [64][NR][3] bytes: column jj's
// values 4 i .. 4 i + 3 are the 24 bits at byte 3 (i NR + jj), lowest first. The same 210 bytes a column as the
// file's block (ql, qh), but VL columns' four values are one 24-byte load and one shuffle into 32-bit lanes, each
// value a shift and a mask: the file's split of 4 + 2 bits cost two loads and five operations a value.
inline void k6_put(uint8_t* row, int64_t jj, const uint8_t* block) {
    std::memcpy(row + 2 * jj, block + 208, 2);
    for (int i = 0; i < 16; i++) row[(2 + i) * NR + jj] = block[192 + i];
    uint8_t q[256]; // the file's levels, k = 128 h + 32 c + l
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t* ql = block + 64 * h, *qh = block + 128 + 32 * h;
            q[128 * h + l] = (uint8_t)((ql[l] & 0xF) | ((qh[l] & 3) << 4));
            q[128 * h + 32 + l] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            q[128 * h + 64 + l] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
            q[128 * h + 96 + l] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
        }
    for (int i = 0; i < 64; i++) {
        const uint32_t w = q[4 * i] | q[4 * i + 1] << 6 | q[4 * i + 2] << 12 | (uint32_t)q[4 * i + 3] << 18;
        uint8_t* dst = row + 18 * NR + (size_t)(i * NR + jj) * 3;
        dst[0] = (uint8_t)w, dst[1] = (uint8_t)(w >> 8), dst[2] = (uint8_t)(w >> 16);
    }
}
// A block row's d * scale for each group of 16 values: ds[i][j], the VL columns of vector j; ds32 = 32 ds
inline void k6_row_scales(vec ds[16][NV], vec ds32[16][NV], const uint8_t* row) {
    for (int j = 0; j < NV; j++) {
        const vec d = f16_values((const uint16_t*)row + j * VL);
        for (int i = 0; i < 16; i++) ds[i][j] = d * int_values<true>(row + (2 + i) * NR + j * VL), ds32[i][j] = 32.0f * ds[i][j];
    }
}
// Values 4 i .. 4 i + 3 of an interleaved Q6_K block row, vector j: the VL columns' 24-bit words (k6_words)
inline i32v k6_group(const uint8_t* row, int i, int j) { return k6_words(row + 18 * NR + (size_t)(i * NR + j * VL) * 3); }
// Value 4 i + e of them as a float: ds * q - 32 ds (k6_values), the group of 16 being i / 4
template <int e>
inline vec k6_value(i32v w, int i, int j, const vec ds[16][NV], const vec ds32[16][NV]) {
    const i32v q = e == 3 ? w >> 18 : e == 0 ? w & 63 : (w >> (6 * e)) & 63; // bits 24-31 are 0
    return k6_values(ds[i / 4][j], ds32[i / 4][j], int32_values(q));
}

} // namespace gb
