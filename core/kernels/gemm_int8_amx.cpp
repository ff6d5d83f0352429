// The int8 kernel's block sums on AMX-INT8 tiles (gemm_int8_amx.h).
//
// A sub-block s of 32 inputs, 16 rows by 16 columns, is one TDPBSUD: A = the rows' 32 rounded inputs (int8, a
// tile of 16 rows x 32 bytes, read straight from the rows), B = the columns' 32 levels (u8, 8 rows x 64 bytes:
// group t of 4 inputs, then [16 columns][4], the layout the VNNI path's block tile already has, so B is read from
// it with a stride of nr * 4 bytes), C = (q . x_q)_s [16 rows][16 columns] in int32. Each sub-block has its own
// scale sc_s per column, and the 6-bit scale times a level does not fit 8 bits, so the sub-blocks cannot share
// one accumulator tile: four sub-blocks at a time go to tiles 0..3, are stored (4 KB, in L1), and AVX-512 adds
// sc_s * C into the 16 rows' running sums (one vector a row). Integer sums, so the order changes nothing: the
// same int32 as vpdpbusd's.
//
// Tiles: 0..3 the sums of four sub-blocks, 4 and 6 inputs (A), 5 and 7 levels (B); alternating operand
// registers let a load go ahead while the previous product still reads the other (tiles are not renamed).
#include "kernels/gemm_int8_amx.h"

#include <immintrin.h>
#include <string.h>

namespace gb::int8::amx {
namespace {

struct alignas(64) tile_config {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

// C [16][16] int32 x 4 at t, +1024 apart
static void store_sums(int32_t* t) {
    _tile_stored(0, t, 64);
    _tile_stored(1, t + 256, 64);
    _tile_stored(2, t + 512, 64);
    _tile_stored(3, t + 768, 64);
}

} // namespace

void begin() {
    tile_config c;
    for (int i = 0; i < 4; i++) c.colsb[i] = 64, c.rows[i] = 16; // C: 16 rows x 16 int32
    c.colsb[4] = c.colsb[6] = 32, c.rows[4] = c.rows[6] = 16;    // A: 16 rows x 32 int8
    c.colsb[5] = c.colsb[7] = 64, c.rows[5] = c.rows[7] = 8;     // B: 8 groups x [16][4] u8
    // GCC's _tile_loadconfig tells the compiler it reads 8 bytes: make the whole config be written first
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig(&c);
}

void end() { _tile_release(); }

void block_sums(int32_t* tot, const int8_t* xq, int ldx, const uint8_t* levels, const int32_t* sc, int nr) {
    alignas(64) int32_t part[4][16][16]; // [sub-block of the four][row][column]
    const size_t lb = (size_t)nr * 4;    // bytes from one group t of levels to the next
    for (int jj = 0; jj < nr / 16; jj++) {
        __m512i acc[16];
        for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) { // sub-blocks 4h .. 4h + 3
            const int8_t* a = xq + 128 * h;
            const uint8_t* b = levels + (size_t)(32 * h) * lb + 64 * jj; // group 8 s of sub-block s = 4h, chunk jj
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            _tile_loadd(4, a, ldx);
            _tile_loadd(5, b, lb);
            _tile_dpbsud(0, 4, 5);
            _tile_loadd(6, a + 32, ldx);
            _tile_loadd(7, b + 8 * lb, lb);
            _tile_dpbsud(1, 6, 7);
            _tile_loadd(4, a + 64, ldx);
            _tile_loadd(5, b + 16 * lb, lb);
            _tile_dpbsud(2, 4, 5);
            _tile_loadd(6, a + 96, ldx);
            _tile_loadd(7, b + 24 * lb, lb);
            _tile_dpbsud(3, 6, 7);
            store_sums(&part[0][0][0]);
            for (int u = 0; u < 4; u++) {
                const __m512i scv = _mm512_loadu_si512((const void*)(sc + (size_t)(4 * h + u) * nr + 16 * jj));
                for (int r = 0; r < 16; r++)
                    acc[r] = _mm512_add_epi32(acc[r], _mm512_mullo_epi32(_mm512_load_si512((const void*)part[u][r]), scv));
            }
        }
        for (int r = 0; r < 16; r++) _mm512_storeu_si512((void*)(tot + ((size_t)jj * 16 + r) * 16), acc[r]);
    }
}

} // namespace gb::int8::amx
