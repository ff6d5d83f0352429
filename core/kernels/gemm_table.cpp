// Products with the rows of a table: the LM head's logits, x times each row of the embedding (tied heads) or of
// a table kept as stored (F16, BF16, Q8_0, Q4_K, Q6_K), converted in registers. Split from gemm.cpp, whose
// packed-panel products these are not: a table is read one row per output, as it is laid.
#include "kernels/gemm.h"

#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Dense>
#include <algorithm>
#include <cstring>
#include <omp.h>

#include "kernels/gemm_tile.h"
#include "kernels/stored_values.h"
#include "util/error.h"
#include "util/half.h"

namespace gb {

// out[r][v0 + j] = x[r] . e[j] for the n (<= 4) rows of x and the rows (<= 4) of e [rows][d]. Two accumulators
// per row halve the add chains.
static void dot_rows(float* out, const float* x, const float* e, int n, int d, int V, int v0, int rows) {
    for (int r = 0; r < n; r++) {
        const float* xr = x + (size_t)r * d;
        VEC_ALIGNED vec a[4] = {}, b[4] = {};
        int i = 0;
        for (; i + 2 * VL <= d; i += 2 * VL) {
            const vec x0 = *(const vec*)(xr + i), x1 = *(const vec*)(xr + i + VL);
            for (int j = 0; j < rows; j++) {
                a[j] += x0 * *(const vec*)(e + (size_t)j * d + i);
                b[j] += x1 * *(const vec*)(e + (size_t)j * d + i + VL);
            }
        }
        for (int j = 0; j < rows; j++) {
            const vec ab = a[j] + b[j];
            float s = 0.0f;
            for (int l = 0; l < VL; l++) s += ab[l];
            for (int k = i; k < d; k++) s += xr[k] * e[(size_t)j * d + k];
            out[(size_t)r * V + v0 + j] = s;
        }
    }
}
// One float in every lane, as a load: `vec{} + s` is an add (0 + -0 is +0), and GCC kept one before each broadcast
static inline vec splat(const float* s) {
#if defined(__AVX512F__)
    const __m512 v = _mm512_set1_ps(*s);
#elif defined(__AVX__)
    const __m256 v = _mm256_broadcast_ss(s);
#else
    vec v;
    for (int l = 0; l < VL; l++) v[l] = *s;
#endif
    vec out;
    std::memcpy(&out, &v, sizeof out);
    return out;
}

// k4_scales with the 8 sub-blocks in 8 lanes: the same 6-bit integers times the same d and dmin, so the same floats.
// Scalar, a block's 16 scales cost more than its 256 levels' conversions in the LM head.
static inline void k4_scales_lanes(float dsc[8], float dmn[8], const uint8_t* block) {
#if defined(__AVX2__)
    const __m128i q = _mm_loadu_si128((const __m128i*)(block + 4)); // the 12 scale bytes, then 4 level bytes
    auto lanes = [&](__m128i pick) { return _mm256_cvtepu8_epi32(_mm_shuffle_epi8(q, pick)); };
    const __m256i a = lanes(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0)); // sc's low bits
    const __m256i b = lanes(_mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0)); // s >= 4: sc's top 2
    const __m256i c = lanes(_mm_setr_epi8(4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0)); // m's low bits
    const __m256i e = lanes(_mm_setr_epi8(4, 5, 6, 7, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0)); // s >= 4: m's top 2
    const __m256i low = _mm256_setr_epi32(63, 63, 63, 63, 15, 15, 15, 15), top = _mm256_setr_epi32(0, 0, 0, 0, 48, 48, 48, 48);
    const __m256i sc = _mm256_or_si256(_mm256_and_si256(a, low), _mm256_and_si256(_mm256_srli_epi32(b, 2), top));
    const __m256i m = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi32(c, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), low),
                                      _mm256_and_si256(_mm256_srli_epi32(e, 2), top));
    const float d = half_value((uint16_t)(block[0] | block[1] << 8)), dmin = half_value((uint16_t)(block[2] | block[3] << 8));
    _mm256_storeu_ps(dsc, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sc)));
    _mm256_storeu_ps(dmn, _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(m)));
#else
    k4_scales(dsc, dmn, block);
#endif
}

// dot_stored_rows for Q4_K, rows v0 .. v0 + m - 1 (m <= U) side by side: each row's two add chains in the order
// dot_rows adds them (the same bits), 2 U chains in flight. One row's chains waited on the FMA's latency: on AVX2
// the LM head of a 1B-shape Q4_K file took a quarter of each generated token.
template <int U>
static void dot_q4k_rows(float* out, const float* x, const row_table& t, int n, int v0, int m) {
    const int d = (int)t.cols, V = (int)t.rows;
    const size_t row_bytes = ggml_bytes(t.type, d);
    const uint8_t* row[U];
    for (int u = 0; u < U; u++) row[u] = (const uint8_t*)t.data + (size_t)(v0 + std::min(u, m - 1)) * row_bytes;
    for (int r = 0; r < n; r++) {
        const float* xr = x + (size_t)r * d;
        for (int u = 0; u < m; u++)
            for (size_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(row[u] + 2 * U * row_bytes + o, 0, 2);
        VEC_ALIGNED vec a[U] = {}, b[U] = {};
        alignas(32) float dsc[U][8], dmn[U][8];
        for (int i0 = 0; i0 < d; i0 += 256) {
            GB_UNROLL
            for (int u = 0; u < U; u++) k4_scales_lanes(dsc[u], dmn[u], row[u] + (size_t)(i0 / 256) * 144);
            // sub-block s = 2 g + high: the low or high nibbles of level bytes 32 g .. 32 g + 31
            auto sub = [&](auto high, int g) __attribute__((always_inline)) {
                constexpr bool hi = decltype(high)::value;
                const int s = 2 * g + hi;
                VEC_ALIGNED vec ds[U], dm[U];
                GB_UNROLL
                for (int u = 0; u < U; u++) ds[u] = splat(&dsc[u][s]), dm[u] = splat(&dmn[u][s]);
                GB_UNROLL
                for (int l = 0; l < 32; l += 2 * VL) {
                    const int i = i0 + 32 * s + l;
                    const vec x0 = *(const vec*)(xr + i), x1 = *(const vec*)(xr + i + VL);
                    GB_UNROLL
                    for (int u = 0; u < U; u++) {
                        const uint8_t* q = row[u] + (size_t)(i0 / 256) * 144 + 16 + 32 * g + l;
                        a[u] += x0 * k_values(ds[u], nibble_values<hi>(q), dm[u]);
                        b[u] += x1 * k_values(ds[u], nibble_values<hi>(q + VL), dm[u]);
                    }
                }
            };
            for (int g = 0; g < 4; g++) sub(std::false_type{}, g), sub(std::true_type{}, g);
        }
        for (int u = 0; u < m; u++) {
            const vec ab = a[u] + b[u];
            float sum = 0.0f;
            for (int l = 0; l < VL; l++) sum += ab[l];
            out[(size_t)r * V + v0 + u] = sum;
        }
    }
}
#ifndef GB_Q4K_ROWS
#define GB_Q4K_ROWS 2
#endif

// The same on rows of a stored table (F16, BF16, Q8_0, Q4_K, Q6_K; d a whole number of blocks and of 2 VL), converted
// in registers to the values dequantize gives: each (r, j) sums what dot_rows sums on the dequantised rows, in its
// order, bit for bit. One row at a time (dot_rows interleaves four): its two accumulators stay in registers; Q4_K
// two rows at a time (dot_q4k_rows).
static void dot_stored_rows(float* out, const float* x, const row_table& t, int n, int v0, int rows) {
    const int d = (int)t.cols, V = (int)t.rows;
    const size_t row_bytes = ggml_bytes(t.type, d);
    if (t.type == GGML_Q4_K) { // two rows at a time (dot_q4k_rows)
        for (int j = 0; j < rows; j += GB_Q4K_ROWS) dot_q4k_rows<GB_Q4K_ROWS>(out, x, t, n, v0 + j, std::min(GB_Q4K_ROWS, rows - j));
        return;
    }
    for (int r = 0; r < n; r++) {
        const float* xr = x + (size_t)r * d;
        for (int j = 0; j < rows; j++) {
            const uint8_t* row = (const uint8_t*)t.data + (size_t)(v0 + j) * row_bytes;
            for (size_t o = 0; o < row_bytes; o += 64) __builtin_prefetch(row + 4 * row_bytes + o, 0, 2); // 4 rows on
            vec a = {}, b = {};
            auto add = [&](int i, vec e0, vec e1) __attribute__((always_inline)) {
                a += *(const vec*)(xr + i) * e0;
                b += *(const vec*)(xr + i + VL) * e1;
            };
            if (t.type == GGML_F16) {
                for (int i = 0; i < d; i += 2 * VL)
                    add(i, f16_values((const uint16_t*)row + i), f16_values((const uint16_t*)row + i + VL));
            } else if (t.type == GGML_BF16) {
                for (int i = 0; i < d; i += 2 * VL)
                    add(i, bf16_values((const uint16_t*)row + i), bf16_values((const uint16_t*)row + i + VL));
            } else if (t.type == GGML_Q8_0) { // blocks of 34 bytes: f16 scale, 32 int8
                for (int i0 = 0; i0 < d; i0 += 32) {
                    const uint8_t* block = row + (size_t)(i0 / 32) * 34;
                    const vec sc = vec{} + half_value((uint16_t)(block[0] | block[1] << 8));
                    const int8_t* q = (const int8_t*)block + 2;
                    for (int l = 0; l < 32; l += 2 * VL) add(i0 + l, q8_values(q + l, sc), q8_values(q + l + VL, sc));
                }
            } else if (t.type == GGML_Q6_K) { // blocks of 210 bytes: ql [128], qh [64], int8 scales [16], f16 d
                for (int i0 = 0; i0 < d; i0 += 256) {
                    const uint8_t* block = row + (size_t)(i0 / 256) * 210;
                    const float dd = half_value((uint16_t)(block[208] | block[209] << 8));
                    const int8_t* sc = (const int8_t*)(block + 192);
                    // values 128 h + 32 c + l: quarter c's nibble and bit shifts as immediates (k6_quarter's)
                    auto quarter = [&](auto cc, int h) __attribute__((always_inline)) {
                        constexpr int c = decltype(cc)::value;
                        for (int l = 0; l < 32; l += 2 * VL) {
                            VEC_ALIGNED vec e[2];
                            for (int v = 0; v < 2; v++) { // one scale per vector (groups of 16 >= VL)
                                const int ll = l + v * VL;
                                const i32v lo = widen_bytes(block + 64 * h + 32 * (c & 1) + ll);
                                const i32v hi = widen_bytes(block + 128 + 32 * h + ll);
                                const i32v q = (c < 2 ? lo & 0xF : lo >> 4) | (((hi >> (2 * c)) & 3) << 4);
                                const vec ds = vec{} + dd * (float)sc[8 * h + 2 * c + ll / 16];
                                e[v] = k6_values(ds, 32.0f * ds, int32_values(q));
                            }
                            add(i0 + 128 * h + 32 * c + l, e[0], e[1]);
                        }
                    };
                    k6_quarters(quarter);
                }
            }
            const vec ab = a + b;
            float sum = 0.0f;
            for (int l = 0; l < VL; l++) sum += ab[l];
            out[(size_t)r * V + v0 + j] = sum;
        }
    }
}

void gemm_rows_transposed(float* out, const float* x, const float* emb, int n, int d, int V) {
    const bool threaded = (int64_t)n * d * V > parallel_min_work;
    if (n > 4) { // many positions (--all-logits): a real product, where Eigen's blocking pays off
        using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        Eigen::Map<const mat> X(x, n, d);
        const int nt = threaded ? omp_get_max_threads() : 1;
        const int parts = std::max(1, std::min(nt * 8, V / 256));
#pragma omp parallel for schedule(dynamic, 1) if (parts > 1)
        for (int pi = 0; pi < parts; pi++) {
            const int v0 = (int)((int64_t)V * pi / parts), v1 = (int)((int64_t)V * (pi + 1) / parts);
            Eigen::Map<const mat> E(emb + (size_t)v0 * d, v1 - v0, d);
            Eigen::Map<mat, 0, Eigen::OuterStride<>> O(out + v0, n, v1 - v0, Eigen::OuterStride<>(V));
            O.noalias() = X * E.transpose();
        }
        return;
    }
    // One pass over the embedding rows, four at a time, each group dotted with the n (<= 4) positions while it is
    // in L1: four rows are four streams in flight (one row at a time reached 15-20 GB/s here, four rows 23).
#pragma omp parallel for schedule(static) if (threaded)
    for (int v0 = 0; v0 < V; v0 += 4) dot_rows(out, x, emb + (size_t)v0 * d, n, d, V, v0, std::min(4, V - v0));
}

void gemm_table(float* out, const float* x, const row_table& t, int n) {
    const int d = (int)t.cols, V = (int)t.rows;
    if (t.type == GGML_F32) return gemm_rows_transposed(out, x, (const float*)t.data, n, d, V);
    const bool threaded = (int64_t)n * d * V > parallel_min_work;
    int64_t bv, bb;
    ggml_block(t.type, bv, bb);
    if (n <= 4 && d % (2 * VL) == 0 && d % bv == 0 &&
        (t.type == GGML_F16 || t.type == GGML_BF16 || t.type == GGML_Q8_0 || t.type == GGML_Q4_K || t.type == GGML_Q6_K)) {
        // the few positions of generation: one pass over the stored rows, converted in registers
#pragma omp parallel for schedule(static) if (threaded)
        for (int v0 = 0; v0 < V; v0 += 4) dot_stored_rows(out, x, t, n, v0, std::min(4, V - v0));
        return;
    }
    // Otherwise its rows are dequantised a group at a time into a thread's buffer, then multiplied as f32 rows are,
    // so the logits are those of the dequantised table.
    const int group = n > 4 ? 256 : 4;
#pragma omp parallel if (threaded)
    {
        static thread_local std::vector<float> rows;
        if (rows.size() < (size_t)group * d) rows.resize((size_t)group * d);
#pragma omp for schedule(static)
        for (int v0 = 0; v0 < V; v0 += group) {
            const int count = std::min(group, V - v0);
            for (int j = 0; j < count; j++) table_row(rows.data() + (size_t)j * d, t, v0 + j);
            if (n > 4) {
                using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
                Eigen::Map<const mat> X(x, n, d), E(rows.data(), count, d);
                Eigen::Map<mat, 0, Eigen::OuterStride<>> O(out + v0, n, count, Eigen::OuterStride<>(V));
                O.noalias() = X * E.transpose();
            } else {
                dot_rows(out, x, rows.data(), n, d, V, v0, count);
            }
        }
    }
}

} // namespace gb
