// Dense products of the forward pass: which kernel runs (fp32 here, AMX in gemm_amx.cpp), and the fp32 kernel,
// a packed-panel GEMM with a register-tiled micro-kernel.
//
// Why not Eigen for everything (gemm_table.cpp uses it for the LM head's rows): Eigen repacks the weight matrix on every call and its kernel is tuned for
// large square products; here the weights are the same for every call and the row count is small (the
// prompt's tokens), so the weights are packed once at load (pack_matrix) and each call only packs the
// few activation rows. The kernel is written with GCC/Clang vector extensions, so the same source becomes
// AVX-512, AVX2 or SSE code depending on -march (native by default, x86-64-v2 for a portable build).
//
// Loops, outermost first: row chunks of MC rows | column panels (split over threads) | KC-deep slices of
// the inner dimension | MR-row blocks | the MR x NR micro-kernel over the slice. A panel slice
// (KC x NR floats) stays in L1/L2 while every row block of the chunk passes over it.
#include "kernels/gemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/gemm_amx.h"
#include "kernels/gemm_int8.h"
#include "kernels/gemm_tile.h"
#include "kernels/stored_panels.h"
#include "kernels/stored_values.h"
#include "util/error.h"
#include "util/half.h"
#include "util/simd_math.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Which kernel
// ---------------------------------------------------------------------------------------------
const char* matmul_name(matmul_kind k) { return k == MATMUL_AMX ? "amx" : k == MATMUL_INT8 ? "int8" : "fp32"; }

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

// A kernel's check, run once per process; its reason kept for every later caller
template <bool (*detect)(std::string&)>
static bool checked_once(std::string* why) {
    static std::once_flag once;
    static bool ok = false;
    static std::string reason;
    std::call_once(once, [] { ok = detect(reason); });
    if (why) *why = ok ? "" : reason;
    return ok;
}
bool amx_usable(std::string* why) { return checked_once<detect_amx>(why); }
bool int8_usable(std::string* why) { return checked_once<int8::detect>(why); }

const char* int8_path_name(int8_path p) { return p == INT8_AMX ? "amx" : int8::row_path_name(); }

bool int8_amx_usable(std::string* why) {
    std::string because;
    const bool ok = int8_usable(&because) && amx_usable(&because);
    if (why) *why = ok ? "" : because;
    return ok;
}

static std::atomic<int> chosen_int8_path{-1}; // -1: not chosen yet

void set_int8_path(int8_path p) {
    std::string why;
    if (p == INT8_AMX && !int8_amx_usable(&why)) throw error("the int8 kernel's AMX path cannot run here: " + why);
    chosen_int8_path = p;
}

int8_path int8_path_now() {
    int p = chosen_int8_path;
    if (p < 0) {
        int8_path want = int8_amx_usable() ? INT8_AMX : INT8_VNNI;
        if (const char* env = std::getenv("GLASSBOX_INT8"); env && *env) {
            const std::string name = env;
            if (name == "vnni") want = INT8_VNNI;
            else if (name == "amx") want = int8_amx_usable() ? INT8_AMX : INT8_VNNI;
            else throw error("GLASSBOX_INT8='" + name + "' is unknown (expected vnni or amx)");
        }
        int expected = -1;
        chosen_int8_path.compare_exchange_strong(expected, want);
        p = chosen_int8_path;
    }
    return (int8_path)p;
}

matmul_kind parse_matmul_kind(const std::string& name) {
    if (name == "fp32") return MATMUL_FP32;
    if (name == "amx") return MATMUL_AMX;
    if (name == "int8") return MATMUL_INT8;
    if (name == "auto") return amx_usable() ? MATMUL_AMX : MATMUL_FP32;
    throw error("matmul kernel '" + name + "' is unknown (expected fp32, amx, int8 or auto)");
}

static std::atomic<int> chosen_kind{-1}; // -1: not chosen yet

void set_matmul_kind(matmul_kind k) {
    std::string why;
    if (k == MATMUL_AMX && !amx_usable(&why)) throw error("the AMX matmul kernel cannot run here: " + why);
    if (k == MATMUL_INT8 && !int8_usable(&why)) throw error("the int8 matmul kernel cannot run here: " + why);
    chosen_kind = k;
}

matmul_kind matmul_kind_now() {
    int k = chosen_kind;
    if (k < 0) {
        const char* env = std::getenv("GLASSBOX_MATMUL");
        matmul_kind want = amx_usable() ? MATMUL_AMX : MATMUL_FP32;
        if (env && *env) {
            want = parse_matmul_kind(env); // a bad value is an error, not a silent default
            if ((want == MATMUL_AMX && !amx_usable()) || (want == MATMUL_INT8 && !int8_usable())) want = MATMUL_FP32;
        }
        int expected = -1;
        chosen_kind.compare_exchange_strong(expected, want);
        k = chosen_kind;
    }
    return (matmul_kind)k;
}

matmul_kind matmul_of(const model& m) {
    bool amx = false, int8 = false;
    auto look = [&](const weight_matrix& w) {
        amx |= w.amx(), int8 |= w.int8;
        for (const weight_matrix& p : w.parts) amx |= p.amx(), int8 |= p.int8;
    };
    for (const layer_weights& l : m.weights.layers) {
        for (const weight_matrix* w : {&l.w_qkv, &l.w_o, &l.w_up, &l.w_gate, &l.w_down}) look(*w);
        for (const auto* e : {&l.exp_gate, &l.exp_up, &l.exp_down})
            for (const weight_matrix& w : *e) look(w);
    }
    return amx ? MATMUL_AMX : int8 ? MATMUL_INT8 : MATMUL_FP32;
}

constexpr int MC = 128; // rows per chunk: the chunk's packed rows (MC x KC floats) stay in L2
const int weight_panel = NR;

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

weight_matrix pack_transposed(const float* w, int64_t in, int64_t out, bool finite) {
    if (in <= 0 || out <= 0 || in > (1 << 30) || out > (1 << 30))
        throw error("internal: pack_transposed as [" + std::to_string(in) + "][" + std::to_string(out) + "]");
    weight_matrix m; // [out][in]
    m.in = (int)out;
    m.out = (int)in;
    m.finite = finite;
    if (matmul_kind_now() == MATMUL_AMX && m.finite && m.in <= amx::max_in) {
        pack_digits(m, w, true); // w is the new matrix stored transposed
        return m;
    }
    // panels of W^T: panel p, row j, lane c holds W^T[j][p * NR + c] = w[p * NR + c][j]
    const int64_t panels = (in + NR - 1) / NR;
    m.data.resize((size_t)(panels * out * NR));
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; p++) {
        float* dst = &m.data[(size_t)(p * out * NR)];
        const int64_t k0 = p * NR, cols = std::min<int64_t>(NR, in - k0);
        int64_t j0 = 0;
#if defined(__AVX512F__)
        if (cols == NR) // 16 x 16 squares in registers
            for (; j0 + 16 <= out; j0 += 16)
                for (int c0 = 0; c0 < NR; c0 += 16)
                    transpose16(dst + j0 * NR + c0, NR, w + (size_t)((k0 + c0) * out + j0), (int)out);
#endif
        for (int64_t j = j0; j < out; j++)
            for (int64_t c = 0; c < NR; c++) dst[j * NR + c] = c < cols ? w[(size_t)((k0 + c) * out + j)] : 0.0f;
    }
    return m;
}

weight_matrix pack_head(const row_table& emb) {
    weight_matrix m;
    const int64_t V = emb.rows, d = emb.cols;
    if (matmul_kind_now() == MATMUL_INT8 && emb.type == GGML_Q4_K && d % 256 == 0 && V > 0 && V <= INT32_MAX) {
        m.in = (int)d, m.out = (int)V, m.int8 = true; // no data: the table's rows are read as they are
        return m;
    }
    // a stored F16/BF16/Q8_0 table stays as it is: its rows are read by gemm_table (digits would triple it)
    if (matmul_kind_now() != MATMUL_AMX || emb.type != GGML_F32 || V <= 0 || d <= 0 || d > amx::max_in ||
        V > (1 << 30))
        return m;
    const float* e = (const float*)emb.data;
    if (!all_finite(e, emb.size())) return m;
    m.in = (int)d;
    m.out = (int)V;
    pack_digits(m, e, true);
    return m;
}

void gemm_head(float* out, const float* x, const weight_matrix& head, const row_table& emb, int n, gemm_scratch& gs) {
    static const std::vector<float> no_bias;
    if (head.amx()) gemm(out, x, head, no_bias, n, gs);
    else if (head.int8) int8::gemm_table_q4k(out, x, emb, n, gs);
    else gemm_table(out, x, emb, n);
}

// ---------------------------------------------------------------------------------------------
// Weights kept as stored (F16, BF16, Q8_0): packed into panels of their own type
// ---------------------------------------------------------------------------------------------
bool kept_as_stored(uint32_t type) {
    int64_t values, bytes;
    return type != GGML_F32 && ggml_block(type, values, bytes);
}

// Four panel forms: F16/BF16 values and Q8_0's int8 values laid [k][NR] like f32 panels (esize bytes each);
// Q4_K interleaved (below); the other block types keep their blocks whole, [in / block][NR][block bytes]. Memory
// is the file's bytes.
static size_t stored_value_bytes(uint32_t type) { return type == GGML_Q8_0 ? 1 : 2; }
// Rows of a panel turned into floats at a time: a whole number of blocks (256 for the K types)
constexpr int KC_BLOCKS = 512;
// Bytes before row k of panel p in a stored matrix's panels (k a multiple of its block)
static size_t stored_offset(const weight_matrix& w, int64_t p, int64_t k) {
    int64_t bv, bb;
    ggml_block(w.type, bv, bb);
    if (!raw_blocks(w.type)) bb = (int64_t)stored_value_bytes(w.type), bv = 1;
    return (size_t)((p * w.in + k) * NR / bv * bb);
}
static int slice_depth(const weight_matrix& w) {
    int64_t values = 1, bytes;
    if (!w.stored.empty()) ggml_block(w.type, values, bytes);
    return values > 32 ? KC_BLOCKS : KC;
}

// Panel p of a 2-byte type (F16, BF16) as [in][NR]: its columns (fewer at the right edge; the rest stay 0), column j
// of the whole being column col[j] of its part. Transposed in blocks along in, so that the block being written stays
// in L1 while each column's run is read (a whole column at a time wrote 196 KB of strided lines per column), with
// each column's next run prefetched (the load of a 1B-shape F16 file spent half its time waiting on those reads). Returns whether every value
// is finite: exp_mask's bits are not all set (F16 0x7c00, BF16 0x7f80), checked on the panel while it is in cache.
static bool pack_panel_16(uint16_t* dst, const std::vector<matrix_part>& parts, const std::vector<std::pair<int, int64_t>>& col,
                          int64_t p, int64_t in, int64_t M, uint16_t exp_mask) {
    const int64_t n = std::min<int64_t>(NR, M - p * NR);
    const uint8_t* src[NR];
    int64_t step[NR]; // column jj's value k is 2 bytes at src[jj] + 2 * k * step[jj]
    for (int64_t jj = 0; jj < n; jj++) {
        const matrix_part& part = parts[(size_t)col[(size_t)(p * NR + jj)].first];
        const int64_t c = col[(size_t)(p * NR + jj)].second;
        src[jj] = part.data + (size_t)(2 * (part.out_major ? c * in : c));
        step[jj] = part.out_major ? 1 : part.out;
    }
    constexpr int64_t KB = 256; // values along in per block: the block written is 256 x NR x 2 bytes (24 KB, in L1)
    for (int64_t k0 = 0; k0 < in; k0 += KB) {
        const int64_t k1 = std::min<int64_t>(in, k0 + KB);
        for (int64_t jj = 0; jj < n; jj++) {
            const uint8_t* s = src[jj];
            const int64_t st = 2 * step[jj];
            // the reads jump from column to column (NR streams a page apart, too many for the hardware prefetcher:
            // the loads waited on memory): ask for this column's next block while this one is copied
            if (st == 2)
                for (int64_t k = k1; k < std::min<int64_t>(in, k1 + KB); k += 32) __builtin_prefetch(s + 2 * k);
            for (int64_t k = k0; k < k1; k++) std::memcpy(&dst[k * NR + jj], s + k * st, 2); // (the file's data may be unaligned)
        }
    }
    int bad = 0;
    for (int64_t i = 0; i < in * NR; i++) bad |= (dst[i] & exp_mask) == exp_mask;
    return !bad;
}

weight_matrix pack_parts(const std::vector<matrix_part>& parts, int64_t in, bool keep_stored) {
    int64_t M = 0;
    for (const matrix_part& p : parts) {
        if (p.out <= 0 || !p.data || !ggml_bytes(p.type, in)) throw error("internal: pack_parts of a bad part");
        M += p.out;
    }
    if (parts.empty() || in <= 0 || in > (1 << 30) || M > (1 << 30)) throw error("internal: pack_parts shape");
    const uint32_t type = parts[0].type;
    bool mixed = false, all_kept = keep_stored;
    for (const matrix_part& p : parts) mixed |= p.type != type, all_kept &= kept_as_stored(p.type);
    if (mixed && all_kept) { // e.g. q and k in Q4_K, v in Q6_K (llama.cpp's _M mixes): each part kept in its type
        weight_matrix m;
        m.in = (int)in;
        m.out = (int)M;
        m.type = type;
        for (const matrix_part& p : parts) {
            m.parts.push_back(pack_parts({p}, in, true));
            m.finite &= m.parts.back().finite;
        }
        bool whole = true; // a part its type could not keep (blocks across in) went to f32: then all go
        for (const weight_matrix& p : m.parts) whole &= !p.stored.empty();
        if (whole) return m;
    }
    bool stored = keep_stored && kept_as_stored(type);
    int64_t block_values = 1, block_bytes = 0;
    ggml_block(type, block_values, block_bytes);
    for (const matrix_part& p : parts)
        stored &= p.type == type && (block_values == 1 || (p.out_major && in % block_values == 0));
    if (!stored) { // dequantise into the plain [in][M] and pack for the process's kernel
        std::vector<float> w((size_t)(in * M)), row((size_t)in);
        int64_t col0 = 0;
        for (const matrix_part& p : parts) {
            if (p.out_major) {
                const size_t row_bytes = ggml_bytes(p.type, in);
                for (int64_t o = 0; o < p.out; o++) {
                    dequantize(row.data(), p.data + (size_t)o * row_bytes, p.type, in);
                    for (int64_t k = 0; k < in; k++) w[(size_t)(k * M + col0 + o)] = row[(size_t)k];
                }
            } else {
                std::vector<float> all((size_t)(in * p.out));
                dequantize(all.data(), p.data, p.type, in * p.out);
                for (int64_t k = 0; k < in; k++)
                    std::copy_n(&all[(size_t)(k * p.out)], p.out, &w[(size_t)(k * M + col0)]);
            }
            col0 += p.out;
        }
        return pack_matrix(w, in, M);
    }
    weight_matrix m;
    m.in = (int)in;
    m.out = (int)M;
    m.type = type;
    const bool two_bytes = type == GGML_F16 || type == GGML_BF16; // checked panel by panel as they are packed
    if (!two_bytes)
        for (const matrix_part& p : parts) m.finite &= stored_finite(p.data, type, in * p.out);
    const int64_t panels = (M + NR - 1) / NR, esize = (int64_t)stored_value_bytes(type);
    if (raw_blocks(type)) m.stored.assign((size_t)(panels * (in / block_values) * NR * block_bytes), 0);
    else m.stored.assign((size_t)(panels * in * NR * esize), 0);
    if (type == GGML_Q8_0) m.scale.assign((size_t)(panels * (in / 32) * NR), 0.0f);
    // column j of the whole -> (part, column in the part)
    std::vector<std::pair<int, int64_t>> col((size_t)M);
    for (int64_t j = 0, pi = 0, c = 0; j < M; j++, c++) {
        while (c >= parts[(size_t)pi].out) pi++, c = 0;
        col[(size_t)j] = {(int)pi, c};
    }
    int not_finite = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(| : not_finite)
    for (int64_t p = 0; p < panels; p++) {
        if (two_bytes) {
            not_finite |= !pack_panel_16((uint16_t*)m.stored.data() + (size_t)(p * in * NR), parts, col, p, in, M,
                                         type == GGML_F16 ? 0x7c00 : 0x7f80);
            continue;
        }
        for (int64_t jj = 0; jj < NR && p * NR + jj < M; jj++) {
            const matrix_part& part = parts[(size_t)col[(size_t)(p * NR + jj)].first];
            const int64_t c = col[(size_t)(p * NR + jj)].second;
            if (raw_blocks(type)) { // column c's blocks, one after another along in
                const int64_t nb = in / block_values;
                const uint8_t* src = part.data + (size_t)(c * nb * block_bytes);
                if (type == GGML_Q4_K || type == GGML_Q6_K) {
                    for (int64_t b = 0; b < nb; b++)
                        (type == GGML_Q4_K ? k4_put : k6_put)(m.stored.data() + (size_t)((p * nb + b) * NR * block_bytes), jj,
                                                              src + (size_t)(b * block_bytes));
                    continue;
                }
                uint8_t* dst = m.stored.data() + (size_t)((p * nb * NR + jj) * block_bytes);
                for (int64_t b = 0; b < nb; b++)
                    std::memcpy(dst + (size_t)(b * NR * block_bytes), src + (size_t)(b * block_bytes), (size_t)block_bytes);
            } else if (type == GGML_Q8_0) { // blocks of 34 bytes along in: f16 scale, then 32 int8
                const uint8_t* src = part.data + (size_t)(c * (in / 32) * 34);
                int8_t* q = (int8_t*)m.stored.data() + (size_t)(p * in * NR + jj);
                float* sc = m.scale.data() + (size_t)(p * (in / 32) * NR + jj);
                for (int64_t b = 0; b < in / 32; b++, src += 34) {
                    sc[b * NR] = f16_to_f32((uint16_t)(src[0] | src[1] << 8));
                    for (int i = 0; i < 32; i++) q[(b * 32 + i) * NR] = (int8_t)src[2 + i];
                }
            } else {
                throw error("internal: pack_parts of " + std::string(ggml_type_name(type))); // (kept_as_stored)
            }
        }
    }
    if (not_finite) m.finite = false;
    m.int8 = type == GGML_Q4_K && matmul_kind_now() == MATMUL_INT8; // chosen at load, as the AMX digits are
    return m;
}


// rows k0 .. k0+kc of panel p of a stored matrix -> tile [kc][NR] floats. Each value is exactly its dequantised
// value (F16/BF16 widen exactly; a Q8_0 scale times an 8-bit integer is exact in fp32), so the fp32 micro-kernel
// on the tile computes what it computes on weights dequantised at load.
void dequantize_slice(float* tile, const weight_matrix& w, int64_t p, int k0, int kc) {
    const size_t first = ((size_t)p * w.in + k0) * NR, count = (size_t)kc * NR;
    if (w.type == GGML_F16 || w.type == GGML_BF16) { // the slice's values are one run: widened as a row is
        dequantize(tile, w.stored.data() + first * 2, w.type, (int64_t)count);
    } else if (w.type == GGML_Q4_K) { // interleaved: each row of levels is NR columns' bytes
        const int64_t nb = w.in / 256;
        VEC_ALIGNED vec dsc[8][NV], dmn[8][NV];
        for (int64_t b = k0 / 256; b < (k0 + kc) / 256; b++) {
            const uint8_t* row = w.stored.data() + (size_t)((p * nb + b) * NR * 144);
            k4_row_scales(dsc, dmn, row);
            float* t = tile + (size_t)(b * 256 - k0) * NR;
            for (int g = 0; g < 4; g++)
                for (int l = 0; l < 32; l++)
                    for (int j = 0; j < NV; j++) {
                        *(vec*)(t + (size_t)(64 * g + l) * NR + j * VL) = k4_value<false>(row + 16 * NR, g, l, j, dsc, dmn);
                        *(vec*)(t + (size_t)(64 * g + 32 + l) * NR + j * VL) = k4_value<true>(row + 16 * NR, g, l, j, dsc, dmn);
                    }
        }
    } else if (w.type == GGML_Q6_K) { // interleaved too
        const int64_t nb = w.in / 256;
        VEC_ALIGNED vec ds[16][NV], ds32[16][NV];
        for (int64_t b = k0 / 256; b < (k0 + kc) / 256; b++) {
            const uint8_t* row = w.stored.data() + (size_t)((p * nb + b) * NR * 210);
            k6_row_scales(ds, ds32, row);
            float* t = tile + (size_t)(b * 256 - k0) * NR;
            for (int i = 0; i < 64; i++)
                for (int j = 0; j < NV; j++) {
                    const i32v g = k6_group(row, i, j);
                    *(vec*)(t + (size_t)(4 * i) * NR + j * VL) = k6_value<0>(g, i, j, ds, ds32);
                    *(vec*)(t + (size_t)(4 * i + 1) * NR + j * VL) = k6_value<1>(g, i, j, ds, ds32);
                    *(vec*)(t + (size_t)(4 * i + 2) * NR + j * VL) = k6_value<2>(g, i, j, ds, ds32);
                    *(vec*)(t + (size_t)(4 * i + 3) * NR + j * VL) = k6_value<3>(g, i, j, ds, ds32);
                }
        }
    } else if (raw_blocks(w.type)) {
        // per block row: the NR columns' blocks dequantised one after another (NR x bv floats, in L1), then
        // written to the tile row by row; written down each column instead, every store touched another line
        int64_t bv, bb;
        ggml_block(w.type, bv, bb);
        const int64_t nb = w.in / bv;
        alignas(64) static thread_local float cols[NR * 256];
        for (int64_t b = k0 / bv; b < (k0 + kc) / bv; b++) {
            const uint8_t* src = w.stored.data() + (size_t)((p * nb + b) * NR * bb);
            for (int jj = 0; jj < NR; jj++) dequantize(cols + (size_t)jj * bv, src + (size_t)jj * bb, w.type, bv);
            float* t = tile + (size_t)(b * bv - k0) * NR;
            int64_t i0 = 0;
#if defined(__AVX512F__)
            for (; i0 + 16 <= bv; i0 += 16) // 16 x 16 squares through registers: the copy was a third of a Q4_K product
                for (int jj = 0; jj < NR; jj += 16) transpose16(t + (size_t)i0 * NR + jj, NR, cols + (size_t)jj * bv + i0, (int)bv);
#endif
            for (int64_t i = i0; i < bv; i++)
                for (int jj = 0; jj < NR; jj++) t[(size_t)i * NR + jj] = cols[(size_t)jj * bv + i];
        }
    } else { // Q8_0
        const int8_t* q = (const int8_t*)w.stored.data() + first;
        for (int k = 0; k < kc; k++) {
            const float* sc = w.scale.data() + ((size_t)p * (w.in / 32) + (size_t)(k0 + k) / 32) * NR;
            float* t = tile + (size_t)k * NR;
            const int8_t* qk = q + (size_t)k * NR;
            int j = 0;
#if defined(__AVX512F__)
            for (; j + 16 <= NR; j += 16)
                _mm512_store_ps(t + j, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                          _mm_loadu_si128((const __m128i*)(qk + j)))),
                                                      _mm512_loadu_ps(sc + j)));
#endif
            for (; j < NR; j++) t[j] = sc[j] * (float)qk[j];
        }
    }
}

std::vector<float> unpack_matrix(const weight_matrix& m) {
    std::vector<float> w((size_t)m.in * m.out);
    unpack_matrix(w.data(), m);
    return w;
}

void unpack_matrix(float* w, const weight_matrix& m) {
    if (m.amx()) {
        amx::unpack_weights(w, m.digits.data(), m.row_exp.data(), m.col_exp.data(), m.in, m.out);
        return;
    }
    if (!m.parts.empty()) { // side by side
        int64_t col0 = 0;
        for (const weight_matrix& p : m.parts) {
            const std::vector<float> part = unpack_matrix(p);
            for (int64_t k = 0; k < m.in; k++)
                std::copy_n(&part[(size_t)(k * p.out)], p.out, w + (size_t)(k * m.out + col0));
            col0 += p.out;
        }
        return;
    }
    const int64_t panels = ((int64_t)m.out + NR - 1) / NR;
#pragma omp parallel if ((int64_t)m.in * m.out >= parallel_min_work)
    {
        aligned_vector<float> tile(m.stored.empty() ? 0 : (size_t)m.in * NR);
#pragma omp for schedule(static)
        for (int64_t p = 0; p < panels; p++) {
            const int64_t j0 = p * NR, cols = std::min<int64_t>(NR, m.out - j0);
            if (!m.stored.empty()) dequantize_slice(tile.data(), m, p, 0, m.in);
            const float* src = m.stored.empty() ? &m.data[(size_t)(p * m.in * NR)] : tile.data();
            for (int64_t k = 0; k < m.in; k++) std::copy_n(src + k * NR, cols, w + (size_t)(k * m.out + j0));
        }
    }
}



// Whether a small product by a stored matrix converts its values in registers (stored_kernel) rather than into a
// tile first
static bool converts_in_registers(uint32_t type) {
    return type == GGML_F16 || type == GGML_BF16 || type == GGML_Q8_0 || type == GGML_Q4_K || type == GGML_Q6_K;
}

// c [R][ldc] (cols <= NR valid columns) = x [R][K] (rows K apart) * panel p of a stored matrix (+ bias [NR]),
// then the epilogue: micro_kernel's sums in its order, one k after another from zero, on the values
// dequantize_slice would write, converted in registers. For products of one row block (generation's single
// token), where a tile would be written for one pass over it: each weight byte is read once, straight from the
// stream.
template <int R>
static void stored_kernel(float* c, int ldc, int cols, const float* x, int K, const weight_matrix& w, int64_t p,
                          const float* bias, epilogue epi) {
    VEC_ALIGNED vec acc[R][NV];
    GB_UNROLL
    for (int r = 0; r < R; r++)
        GB_UNROLL
        for (int j = 0; j < NV; j++) acc[r][j] = vec{};
    auto step = [&](int k, const vec* bk) __attribute__((always_inline)) {
        GB_UNROLL
        for (int r = 0; r < R; r++) {
            const float ar = x[(size_t)r * K + k];
            GB_UNROLL
            for (int j = 0; j < NV; j++) acc[r][j] += ar * bk[j];
        }
    };
    VEC_ALIGNED vec bk[NV];
    if (w.type == GGML_Q8_0) {
        const int8_t* q = (const int8_t*)w.stored.data() + (size_t)p * K * NR;
        const float* scales = w.scale.data() + (size_t)p * (K / 32) * NR;
        for (int kb = 0; kb < K / 32; kb++) {
            VEC_ALIGNED vec sc[NV];
            GB_UNROLL
            for (int j = 0; j < NV; j++) sc[j] = *(const vec*)(scales + (size_t)kb * NR + j * VL);
            for (int k = 32 * kb; k < 32 * kb + 32; k++) {
                __builtin_prefetch(q + (size_t)k * NR + 4096, 0, 2); // 4 KB ahead on the stream, as for Q4_K
                GB_UNROLL
                for (int j = 0; j < NV; j++) bk[j] = q8_values(q + (size_t)k * NR + j * VL, sc[j]);
                step(k, bk);
            }
        }
    } else if (w.type == GGML_Q4_K) {
        const int64_t nb = K / 256;
        VEC_ALIGNED vec dsc[8][NV], dmn[8][NV];
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t* row = w.stored.data() + (size_t)((p * nb + b) * NR * 144);
            // the next block row (after a panel's last, the next panel's first: this thread's next one under the
            // static split; a prefetch past the matrix's end is harmless), a line every second k: the hardware
            // prefetcher alone left the conversions waiting on memory (36.8 against 26.3 ms a 1B Q4_K token)
            const char* next = (const char*)row + NR * 144;
            k4_row_scales(dsc, dmn, row);
            const uint8_t* q = row + 16 * NR;
            for (int g = 0; g < 4; g++) {
                for (int l = 0; l < 32; l++) { // sub-block 2g: the low nibbles
                    if (!(l & 1)) __builtin_prefetch(next + (size_t)(64 * g + l) * 32, 0, 2);
                    GB_UNROLL
                    for (int j = 0; j < NV; j++) bk[j] = k4_value<false>(q, g, l, j, dsc, dmn);
                    step((int)(b * 256) + 64 * g + l, bk);
                }
                for (int l = 0; l < 32; l++) { // sub-block 2g + 1: the high nibbles of the same bytes
                    if (!(l & 1)) __builtin_prefetch(next + (size_t)(64 * g + 32 + l) * 32, 0, 2);
                    GB_UNROLL
                    for (int j = 0; j < NV; j++) bk[j] = k4_value<true>(q, g, l, j, dsc, dmn);
                    step((int)(b * 256) + 64 * g + 32 + l, bk);
                }
            }
        }
    } else if (w.type == GGML_Q6_K) {
        const int64_t nb = K / 256;
        VEC_ALIGNED vec ds[16][NV], ds32[16][NV];
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t* row = w.stored.data() + (size_t)((p * nb + b) * NR * 210);
            const char* next = (const char*)row + NR * 210; // as for Q4_K: the next block row, 10 KB, a line a k
            k6_row_scales(ds, ds32, row);
            for (int i = 0; i < 64; i++) { // values 4 i .. 4 i + 3
                for (int e = 0; e < 4; e++) __builtin_prefetch(next + (size_t)(4 * i + e) * 40, 0, 2);
                VEC_ALIGNED i32v g[NV];
                GB_UNROLL
                for (int j = 0; j < NV; j++) g[j] = k6_group(row, i, j);
                const int k = (int)(b * 256) + 4 * i;
                GB_UNROLL
                for (int j = 0; j < NV; j++) bk[j] = k6_value<0>(g[j], i, j, ds, ds32);
                step(k, bk);
                GB_UNROLL
                for (int j = 0; j < NV; j++) bk[j] = k6_value<1>(g[j], i, j, ds, ds32);
                step(k + 1, bk);
                GB_UNROLL
                for (int j = 0; j < NV; j++) bk[j] = k6_value<2>(g[j], i, j, ds, ds32);
                step(k + 2, bk);
                GB_UNROLL
                for (int j = 0; j < NV; j++) bk[j] = k6_value<3>(g[j], i, j, ds, ds32);
                step(k + 3, bk);
            }
        }
    } else { // F16, BF16
        const uint16_t* h = (const uint16_t*)w.stored.data() + (size_t)p * K * NR;
        const bool f16 = w.type == GGML_F16;
        for (int k = 0; k < K; k++) {
            __builtin_prefetch(h + (size_t)k * NR + 2048, 0, 2); // 4 KB ahead: 2 NR bytes a step, two lines
            __builtin_prefetch(h + (size_t)k * NR + 2048 + 32, 0, 2);
            GB_UNROLL
            for (int j = 0; j < NV; j++)
                bk[j] = f16 ? f16_values(h + (size_t)k * NR + j * VL) : bf16_values(h + (size_t)k * NR + j * VL);
            step(k, bk);
        }
    }
    store_tile<R>(c, ldc, cols, acc, bias, epi);
}
using stored_fn = void (*)(float*, int, int, const float*, int, const weight_matrix&, int64_t, const float*, epilogue);
template <int... R>
struct stored_table {
    static constexpr stored_fn by_rows[] = {nullptr, stored_kernel<R>...};
};
#if defined(__AVX512F__)
using stored_kernels = stored_table<1, 2, 3, 4, 5, 6, 7, 8>;
#else
using stored_kernels = stored_table<1, 2, 3, 4>;
#endif
static_assert(sizeof(stored_kernels::by_rows) / sizeof(stored_fn) == MR + 1, "one kernel per row count 1..MR");

// The fp32 and stored paths: out [n][ldc] (w.out columns of it) = x [n][w.in] * W (+ bias [w.out]).
static void gemm_panels(float* out, int ldc, const float* x, const weight_matrix& w, const float* bias, int n,
                        gemm_scratch& scratch, epilogue epi) {
    const int K = w.in, M = w.out;
    const int blocks = (n + MR - 1) / MR; // MR-row blocks of x
    const int depth = slice_depth(w); // KC, or a whole number of a stored type's blocks
    const int slices = (K + depth - 1) / depth;
    aligned_vector<float>& a_scratch = scratch.rows;
    if (a_scratch.size() < (size_t)blocks * MR * K) a_scratch.resize((size_t)blocks * MR * K);
    float* packed = a_scratch.data();
    const int panels = (M + NR - 1) / NR;
    const bool threaded = (int64_t)n * K * M > parallel_min_work && panels > 1;
    // One parallel region per product: the threads pack the rows together, meet once, then split the panels.
    // (Packing on one thread while the other waited cost about 3% of a forward at 64 tokens.)
    const bool stored = !w.stored.empty();
    if (w.int8) return int8::gemm_q4k(out, ldc, x, w, bias, n, scratch, epi);
    if (stored && blocks == 1 && converts_in_registers(w.type)) { // one row block: no tile, no packed rows
#pragma omp parallel for schedule(static) if (threaded)
        for (int p = 0; p < panels; p++) {
            const int j0 = p * NR, cols = std::min(NR, M - j0);
            float bias_tile[NR] = {};
            if (bias) std::copy_n(bias + j0, cols, bias_tile);
            stored_kernels::by_rows[n](out + j0, ldc, cols, x, K, w, p, bias ? bias_tile : nullptr, epi);
        }
        return;
    }
#pragma omp parallel if (threaded)
    {
        // a stored matrix's slice as floats: depth x NR per thread (72-96 KB with AVX-512), kept between calls
        static thread_local aligned_vector<float> tile;
        if (stored && tile.size() < (size_t)depth * NR) tile.resize((size_t)depth * NR);
#pragma omp for schedule(static)
        for (int job = 0; job < slices * blocks; job++)
            pack_rows(packed, x, n, K, blocks, (job / blocks) * depth, job % blocks, depth);
        for (int ib0 = 0; ib0 < blocks; ib0 += MC / MR) {
            const int ib1 = std::min(blocks, ib0 + MC / MR);
#pragma omp for schedule(static)
            for (int p = 0; p < panels; p++) {
                const int j0 = p * NR, cols = std::min(NR, M - j0);
                float bias_tile[NR] = {}; // the panel's bias, zero past the last column
                if (bias) std::copy_n(bias + j0, cols, bias_tile);
                for (int k0 = 0; k0 < K; k0 += depth) {
                    const int kc = std::min(depth, K - k0);
                    const float* b;
                    const char *next, *end; // the rest of the stream of panel bytes
                    if (stored) { // the slice in floats, once for all the row blocks that pass over it
                        dequantize_slice(tile.data(), w, p, k0, kc);
                        b = tile.data();
                        next = (const char*)w.stored.data() + stored_offset(w, p, k0 + kc);
                        end = (const char*)w.stored.data() + w.stored.size();
                    } else {
                        b = w.data.data() + ((size_t)p * K + k0) * NR;
                        next = (const char*)(b + (size_t)kc * NR);
                        end = (const char*)(w.data.data() + w.data.size());
                    }
                    const float* slice = packed + (size_t)k0 * blocks * MR;
                    // The panel data a thread reads is one contiguous stream: while the row blocks reuse this
                    // slice from cache, each fetches its share of the next slice into L2, so the first block of
                    // the next slice does not wait on memory.
                    const size_t next_lines = std::min<size_t>(stored ? stored_offset(w, 0, depth) : (size_t)KC * NR * sizeof(float),
                                                               next < end ? (size_t)(end - next) : 0) / 64;
                    const int share = (int)((next_lines + (ib1 - ib0) - 1) / (ib1 - ib0));
                    for (int ib = ib0; ib < ib1; ib++) {
                        const int first = (ib - ib0) * share;
                        const int lines = std::max(0, std::min(share, (int)next_lines - first));
                        const int rows = std::min(MR, n - ib * MR);
                        kernels::by_rows[rows](out + (size_t)ib * MR * ldc + j0, ldc, cols, slice + (size_t)ib * kc * MR,
                                               b, kc, k0 > 0, next + (size_t)first * 64, lines, k0 + kc == K,
                                               bias ? bias_tile : nullptr, epi);
                    }
                }
            }
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
    if (!w.parts.empty()) { // a fused matrix whose parts are stored in different types: each writes its columns
        int col0 = 0;
        for (const weight_matrix& p : w.parts) {
            gemm_panels(out + col0, M, x, p, bias.empty() ? nullptr : bias.data() + col0, n, scratch, epi);
            col0 += p.out;
        }
        return;
    }
    gemm_panels(out, M, x, w, bias.empty() ? nullptr : bias.data(), n, scratch, epi);
}

} // namespace gb
