// Dense products of the forward pass: which kernel runs (fp32 here, AMX in gemm_amx.cpp), and the fp32 kernel,
// a packed-panel GEMM with a register-tiled micro-kernel.
//
// Why not Eigen for everything: Eigen repacks the weight matrix on every call and its kernel is tuned for
// large square products; here the weights are the same for every call and the row count is small (the
// prompt's tokens), so the weights are packed once at load (pack_matrix) and each call only packs the
// few activation rows. The kernel is written with GCC/Clang vector extensions, so the same source becomes
// AVX-512, AVX2 or SSE code depending on -march (native by default, x86-64-v2 for a portable build).
//
// Loops, outermost first: row chunks of MC rows | column panels (split over threads) | KC-deep slices of
// the inner dimension | MR-row blocks | the MR x NR micro-kernel over the slice. A panel slice
// (KC x NR floats) stays in L1/L2 while every row block of the chunk passes over it.
#include "gemm.h"

#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "error.h"
#include "gemm_amx.h"
#include "simd_math.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Which kernel
// ---------------------------------------------------------------------------------------------
const char* matmul_name(matmul_kind k) { return k == MATMUL_AMX ? "amx" : "fp32"; }

// CPU: AMX-TILE, AMX-INT8 and the AVX-512 subsets gemm_amx.cpp is built with; OS: the AVX-512 and tile state in
// XCR0, and Linux's per-process permission for tile data (arch_prctl ARCH_REQ_XCOMP_PERM, kernel 5.16+).
static bool detect_amx(std::string& why) {
#if defined(__x86_64__) && defined(GLASSBOX_AMX)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return why = "the CPU reports no extended features", false;
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return why = "the CPU has no AMX-INT8", false;
    const unsigned avx512 = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31); // F, DQ, BW, VL
    if ((b & avx512) != avx512 || !(c & (1u << 1)) || !(c & (1u << 11)))    // and VBMI, VNNI
        return why = "the CPU has AMX but not the AVX-512 subsets the kernel uses", false;
    __get_cpuid(1, &a, &b, &c, &d);
    if (!(c & (1u << 27))) return why = "the OS has not enabled XSAVE", false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const unsigned state = 0x6u | 0xE0u | (3u << 17); // SSE+AVX, AVX-512, tile config+data
    if ((lo & state) != state) return why = "the OS does not save AVX-512 or AMX tile state", false;
    const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        return why = "the kernel refused AMX tile data to this process (Linux 5.16 or later is needed)", false;
    return true;
#else
    why = "this build has no AMX kernel (compiler without -mamx-int8, or not x86-64)";
    return false;
#endif
}

bool amx_usable(std::string* why) {
    static std::once_flag once;
    static bool ok = false;
    static std::string reason;
    std::call_once(once, [] { ok = detect_amx(reason); });
    if (why) *why = ok ? "" : reason;
    return ok;
}

matmul_kind parse_matmul_kind(const std::string& name) {
    if (name == "fp32") return MATMUL_FP32;
    if (name == "amx") return MATMUL_AMX;
    if (name == "auto") return amx_usable() ? MATMUL_AMX : MATMUL_FP32;
    throw error("matmul kernel '" + name + "' is unknown (expected fp32, amx or auto)");
}

static std::atomic<int> chosen_kind{-1}; // -1: not chosen yet

void set_matmul_kind(matmul_kind k) {
    std::string why;
    if (k == MATMUL_AMX && !amx_usable(&why)) throw error("the AMX matmul kernel cannot run here: " + why);
    chosen_kind = k;
}

matmul_kind matmul_kind_now() {
    int k = chosen_kind;
    if (k < 0) {
        const char* env = std::getenv("GLASSBOX_MATMUL");
        matmul_kind want = amx_usable() ? MATMUL_AMX : MATMUL_FP32;
        if (env && *env) {
            want = parse_matmul_kind(env); // a bad value is an error, not a silent default
            if (want == MATMUL_AMX && !amx_usable()) want = MATMUL_FP32;
        }
        int expected = -1;
        chosen_kind.compare_exchange_strong(expected, want);
        k = chosen_kind;
    }
    return (matmul_kind)k;
}

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
constexpr int MC = 128; // rows per chunk: the chunk's packed rows (MC x KC floats) stay in L2
const int weight_panel = NR;

// below this many multiply-adds a product runs on one thread (a barrier costs more than it saves)
constexpr int64_t parallel_min_work = 1 << 20;

// loads and stores need no alignment, and the type may alias the floats it is loaded from
typedef float vec __attribute__((vector_size(VL * sizeof(float)), aligned(4), may_alias));

// m.in x m.out weights w (stored transposed when asked) -> m's AMX digits and scales
static void pack_digits(weight_matrix& m, const float* w, bool transposed) {
    m.digits.resize(amx::weight_digit_bytes(m.in, m.out));
    m.row_exp.resize((size_t)amx::k_tiles(m.in) * 64);
    m.col_exp.resize((size_t)amx::col_blocks(m.out) * 16);
    amx::pack_weights(m.digits.data(), m.row_exp.data(), m.col_exp.data(), w, m.in, m.out, transposed);
}

weight_matrix pack_matrix(const std::vector<float>& w, int64_t in, int64_t out, bool exact) {
    if (in <= 0 || out <= 0 || (int64_t)w.size() != in * out || in > (1 << 30) || out > (1 << 30))
        throw error("internal: pack_matrix of " + std::to_string(w.size()) + " floats as [" + std::to_string(in) +
                    "][" + std::to_string(out) + "]");
    weight_matrix m;
    m.in = (int)in;
    m.out = (int)out;
    m.finite = all_finite(w.data(), w.size());
    // NaN or Inf have no fixed-point digits: such a matrix stays on the fp32 kernel, which propagates them
    if (!exact && matmul_kind_now() == MATMUL_AMX && m.finite && in <= amx::max_in) {
        pack_digits(m, w.data(), false);
        return m;
    }
    const int64_t panels = (out + NR - 1) / NR;
    m.data.assign((size_t)(panels * in * NR), 0.0f);
    for (int64_t p = 0; p < panels; p++) {
        const int64_t j0 = p * NR, cols = std::min<int64_t>(NR, out - j0);
        float* dst = &m.data[(size_t)(p * in * NR)];
        for (int64_t k = 0; k < in; k++) std::copy_n(&w[(size_t)(k * out + j0)], cols, dst + k * NR);
    }
    return m;
}

weight_matrix pack_head(const std::vector<float>& emb, int64_t V, int64_t d) {
    weight_matrix m;
    if (matmul_kind_now() != MATMUL_AMX || V <= 0 || d <= 0 || (int64_t)emb.size() != V * d || d > amx::max_in ||
        V > (1 << 30))
        return m;
    if (!all_finite(emb.data(), emb.size())) return m;
    m.in = (int)d;
    m.out = (int)V;
    pack_digits(m, emb.data(), true);
    return m;
}

std::vector<float> unpack_matrix(const weight_matrix& m) {
    std::vector<float> w((size_t)m.in * m.out);
    if (m.amx()) {
        amx::unpack_weights(w.data(), m.digits.data(), m.row_exp.data(), m.col_exp.data(), m.in, m.out);
        return w;
    }
    const int64_t panels = ((int64_t)m.out + NR - 1) / NR;
    for (int64_t p = 0; p < panels; p++) {
        const int64_t j0 = p * NR, cols = std::min<int64_t>(NR, m.out - j0);
        const float* src = &m.data[(size_t)(p * m.in * NR)];
        for (int64_t k = 0; k < m.in; k++) std::copy_n(src + k * NR, cols, &w[(size_t)(k * m.out + j0)]);
    }
    return w;
}

// c [R][ldc] (cols <= NR valid columns) (+)= a [kc][MR] (R rows used) * b [kc][NR]; meanwhile one cache line
// of pf per k step, for the first pf_lines steps, is fetched into L2 (the next slice of the panel stream).
// On the last slice (last): + bias [NR] when not null, then the epilogue, on the registers before the store.
template <int R>
static void micro_kernel(float* c, int ldc, int cols, const float* a, const float* b, int kc, bool accumulate,
                         const char* pf, int pf_lines, bool last, const float* bias, epilogue epi) {
    vec acc[R][NV];
    if (accumulate && cols == NR) {
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NV; j++) acc[r][j] = *(const vec*)(c + (size_t)r * ldc + j * VL);
    } else if (accumulate) { // the last, partial panel
        for (int r = 0; r < R; r++) {
            float row[NR] = {};
            std::memcpy(row, c + (size_t)r * ldc, sizeof(float) * cols);
            for (int j = 0; j < NV; j++) std::memcpy(&acc[r][j], row + j * VL, sizeof(vec));
        }
    } else {
        for (int r = 0; r < R; r++)
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
        vec bk[NV];
        for (int j = 0; j < NV; j++) bk[j] = *(const vec*)(b + (size_t)k * NR + j * VL);
        for (int r = 0; r < R; r++) {
            const float ar = a[k * MR + r]; // broadcast by the scalar-vector product
            for (int j = 0; j < NV; j++) acc[r][j] += ar * bk[j];
        }
    }
    if (last && bias)
        for (int j = 0; j < NV; j++) {
            const vec bj = *(const vec*)(bias + j * VL);
            for (int r = 0; r < R; r++) acc[r][j] += bj;
        }
    if (last && epi == EPILOGUE_GELU)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NV; j++) acc[r][j] = gelu_lanes(acc[r][j]);
    for (int r = 0; r < R; r++) {
        if (cols == NR) {
            for (int j = 0; j < NV; j++) *(vec*)(c + (size_t)r * ldc + j * VL) = acc[r][j];
        } else {
            float row[NR];
            for (int j = 0; j < NV; j++) std::memcpy(row + j * VL, &acc[r][j], sizeof(vec));
            std::memcpy(c + (size_t)r * ldc, row, sizeof(float) * cols);
        }
    }
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

// x [rows][K] -> slice-major packed blocks: slice s (KC wide) holds [blocks][kc][MR], rows past n are zero.
// One (slice, block) pair per call, so threads can share the packing.
static void pack_rows(float* packed, const float* x, int n, int K, int blocks, int k0, int ib) {
    const int kc = std::min(KC, K - k0);
    float* dst = packed + (size_t)k0 * blocks * MR + (size_t)ib * kc * MR;
    for (int r = 0; r < MR; r++) {
        const int row = ib * MR + r;
        if (row < n) {
            const float* src = x + (size_t)row * K + k0;
            for (int k = 0; k < kc; k++) dst[k * MR + r] = src[k];
        } else {
            for (int k = 0; k < kc; k++) dst[k * MR + r] = 0.0f;
        }
    }
}

void gemm(float* out, const float* x, const weight_matrix& w, const std::vector<float>& bias, int n,
          gemm_scratch& scratch, epilogue epi) {
    const int K = w.in, M = w.out;
    if (n <= 0) return;
    if (w.amx()) {
        const size_t rows = (size_t)(n + 15) / 16 * 16;
        if (scratch.digits.size() < amx::row_digit_bytes(n, K)) scratch.digits.resize(amx::row_digit_bytes(n, K));
        if (scratch.row_exp.size() < rows) scratch.row_exp.resize(rows);
        const bool threaded = (int64_t)n * K * M > parallel_min_work && M > 16;
        amx::gemm(out, x, n, w.digits.data(), w.row_exp.data(), w.col_exp.data(), K, M,
                  bias.empty() ? nullptr : bias.data(), epi, scratch.digits.data(), scratch.row_exp.data(), threaded);
        return;
    }
    const int blocks = (n + MR - 1) / MR; // MR-row blocks of x
    const int slices = (K + KC - 1) / KC;
    aligned_vector<float>& a_scratch = scratch.rows;
    if (a_scratch.size() < (size_t)blocks * MR * K) a_scratch.resize((size_t)blocks * MR * K);
    float* packed = a_scratch.data();
    const int panels = (M + NR - 1) / NR;
    const bool threaded = (int64_t)n * K * M > parallel_min_work && panels > 1;
    // One parallel region per product: the threads pack the rows together, meet once, then split the panels.
    // (Packing on one thread while the other waited cost about 3% of a forward at 64 tokens.)
#pragma omp parallel if (threaded)
    {
#pragma omp for schedule(static)
        for (int job = 0; job < slices * blocks; job++)
            pack_rows(packed, x, n, K, blocks, (job / blocks) * KC, job % blocks);
        for (int ib0 = 0; ib0 < blocks; ib0 += MC / MR) {
            const int ib1 = std::min(blocks, ib0 + MC / MR);
#pragma omp for schedule(static)
            for (int p = 0; p < panels; p++) {
                const int j0 = p * NR, cols = std::min(NR, M - j0);
                float bias_tile[NR] = {}; // the panel's bias, zero past the last column
                if (!bias.empty()) std::copy_n(bias.data() + j0, cols, bias_tile);
                for (int k0 = 0; k0 < K; k0 += KC) {
                    const int kc = std::min(KC, K - k0);
                    const float* b = w.data.data() + ((size_t)p * K + k0) * NR;
                    const float* slice = packed + (size_t)k0 * blocks * MR;
                    // The panel data a thread reads is one contiguous stream: while the row blocks reuse this
                    // slice from cache, each fetches its share of the next slice into L2, so the first block of
                    // the next slice does not wait on memory.
                    const char* next = (const char*)(b + (size_t)kc * NR);
                    const char* end = (const char*)(w.data.data() + w.data.size());
                    const size_t next_lines = std::min<size_t>((size_t)KC * NR * sizeof(float),
                                                               next < end ? (size_t)(end - next) : 0) / 64;
                    const int share = (int)((next_lines + (ib1 - ib0) - 1) / (ib1 - ib0));
                    for (int ib = ib0; ib < ib1; ib++) {
                        const int first = (ib - ib0) * share;
                        const int lines = std::max(0, std::min(share, (int)next_lines - first));
                        const int rows = std::min(MR, n - ib * MR);
                        kernels::by_rows[rows](out + (size_t)ib * MR * M + j0, M, cols, slice + (size_t)ib * kc * MR,
                                               b, kc, k0 > 0, next + (size_t)first * 64, lines, k0 + kc == K,
                                               bias.empty() ? nullptr : bias_tile, epi);
                    }
                }
            }
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
    // Two accumulators per row halve the add chains.
#pragma omp parallel for schedule(static) if (threaded)
    for (int v0 = 0; v0 < V; v0 += 4) {
        const int rows = std::min(4, V - v0);
        const float* e = emb + (size_t)v0 * d;
        for (int r = 0; r < n; r++) {
            const float* xr = x + (size_t)r * d;
            vec a[4] = {}, b[4] = {};
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
}

} // namespace gb
