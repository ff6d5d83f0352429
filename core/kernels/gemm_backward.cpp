// The backward pass's transposed product, out [n][in] (+)= g [n][out] * W^T, with W as the forward holds it.
//
// The forward's weights are column panels [in][NR] (fp32 floats, a stored type, or AMX digits, gemm.h). Per chunk
// of out's columns (rows of W, a thread's unit) and slice of the inner dimension (whole panels), the slice's
// weights are turned into floats where they are not (the stored types' slice conversion, the AMX digits' exact
// unpacking) and transposed in 16 x 16 register squares into a tile [depth][NR] per NR columns of out, which
// every row block then passes over with the forward's own micro-kernel (gemm_tile.h). The tile (72 KB with
// AVX-512) stays in L2 while the row blocks reuse it.
//
// The second product over a matrix also keeps W^T itself (backward_tiles, held by the weight_matrix): its values
// transposed and packed for the process's kernel (pack_transposed), so later products are plain forward products
// by W^T. On GPT-2 small's matrices at 64 rows those ran at 330-430 GFLOP/s on the fp32 kernel against the
// transposing path's 260-310, and at 540-720 on AMX, which this path cannot use. The first product still
// transposes on the fly: a one-off backward (the CLI's) would pay for packing it never reads again. Kept W^T
// costs about 4 bytes a weight, counted against a process-wide budget (backward_tiles_budget, gemm.h); past it a
// matrix is transposed per call. The two paths add in different orders (and AMX rounds its inputs to 31 bits):
// they agree to rounding, not bit for bit.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "kernels/gemm.h"
#include "kernels/gemm_amx.h"
#include "kernels/gemm_tile.h"
#include "kernels/ops.h"
#include "util/aligned.h"
#include "util/error.h"

namespace gb {

static std::mutex tiles_mutex;            // every weight_matrix::backward slot is read and set under it
static std::atomic<size_t> tiles_bytes{0}; // held by every matrix's kept W^T

struct backward_tiles {
    const void* from = nullptr; // the weights' buffer W^T was made from
    int in = 0, out = 0;
    bool making = false;        // a product is making wt (no other call waits for it or makes it too)
    bool ready = false;         // wt is made: read it
    weight_matrix wt;           // [out][in]: W^T packed for the process's kernel
    size_t bytes = 0;           // counted in tiles_bytes
    ~backward_tiles() { tiles_bytes -= bytes; }
};

static std::atomic<size_t> tiles_budget{size_t(1) << 30};

size_t backward_tiles_bytes() { return tiles_bytes; }
size_t backward_tiles_budget() { return tiles_budget; }
void set_backward_tiles_budget(size_t bytes) { tiles_budget = bytes; }

namespace {

// out's columns per chunk and the inner depth per slice: a chunk holds whole blocks of a block type (Q4_K: 256
// rows of W) and whole NR-column sub-blocks; the depth keeps a slice's tile near KC x NR floats.
struct backward_shape {
    int chunk, depth;
};
backward_shape shape_of(const weight_matrix& w) {
    int64_t values = 1, bytes = 0;
    if (!w.stored.empty() && raw_blocks(w.type)) ggml_block(w.type, values, bytes);
    int chunk = NR;
    while (chunk % values) chunk += NR; // block sizes are powers of two: lcm(NR, block)
    return {chunk, std::max(NR, KC * NR / chunk / NR * NR)};
}

// Rows k0 .. k0+kc of panel p (W's columns p*NR ..) as floats [kc][NR]: fp32 panels in place, the others
// converted into buf.
const float* panel_rows(float* buf, const weight_matrix& w, int64_t p, int k0, int kc) {
    if (w.amx()) {
#if defined(__x86_64__) && defined(GLASSBOX_AMX)
        amx::unpack_rows(buf, NR, w.digits.data(), w.row_exp.data(), w.col_exp.data(), w.in, w.out, k0, kc,
                         (int)(p * NR), NR);
        return buf;
#else
        throw error("internal: AMX weights in a build without the AMX kernel");
#endif
    }
    if (!w.stored.empty()) {
        dequantize_slice(buf, w, p, k0, kc);
        return buf;
    }
    return w.data.data() + ((size_t)p * w.in + k0) * NR;
}

// tile [chunk / NR][depth][NR]: sub-block b, row (p - p0) * NR + jj, column kk holds W[k0 + b*NR + kk][p*NR + jj]
// for the panels p0 .. p1 and W's rows k0 .. k0+kc (columns past kc are 0).
void transpose_slice(float* tile, int depth, float* buf, const weight_matrix& w, int p0, int p1, int k0, int kc) {
    const bool in_place = !w.amx() && w.stored.empty(); // fp32 panels, read where they are
    const int64_t panels = ((int64_t)w.out + NR - 1) / NR;
    for (int p = p0; p < p1; p++) {
        // the next panel's rows, a jump the hardware prefetcher does not follow (the AMX digits do the same in
        // unpack_rows)
        if (in_place && p + 1 < panels) {
            const char* next = (const char*)(w.data.data() + ((size_t)(p + 1) * w.in + k0) * NR);
            for (size_t at = 0; at < (size_t)kc * NR * sizeof(float); at += 64) __builtin_prefetch(next + at, 0, 3);
        }
        const float* src = panel_rows(buf, w, p, k0, kc); // [kc][NR]
        for (int b = 0; b * NR < kc; b++) {
            const int kb = b * NR, cols = std::min(NR, kc - kb);
            float* dst = tile + (size_t)b * depth * NR + (size_t)(p - p0) * NR * NR; // [NR jj][NR kk]
#if defined(__AVX512F__)
            if (cols == NR) {
                for (int j0 = 0; j0 < NR; j0 += 16)
                    for (int c0 = 0; c0 < NR; c0 += 16)
                        transpose16(dst + (size_t)j0 * NR + c0, NR, src + (size_t)(kb + c0) * NR + j0, NR);
                continue;
            }
#endif
            for (int jj = 0; jj < NR; jj++)
                for (int kk = 0; kk < NR; kk++) dst[(size_t)jj * NR + kk] = kk < cols ? src[(size_t)(kb + kk) * NR + jj] : 0.0f;
        }
    }
}

const void* buffer_of(const weight_matrix& w) {
    return w.amx() ? (const void*)w.digits.data() : !w.stored.empty() ? (const void*)w.stored.data() : (const void*)w.data.data();
}

// The matrix's kept W^T: ready (multiply by it), or new and owned by this call (make it), or none: the matrix's
// first product (a one-off backward, as the CLI's, would pay for a W^T it never reads again), a spent budget, or
// another thread making it. With none the call transposes into a thread's tile.
std::shared_ptr<backward_tiles> kept_transpose(const weight_matrix& w) {
    std::lock_guard<std::mutex> lock(tiles_mutex);
    std::shared_ptr<backward_tiles>& slot = w.backward;
    if (slot && (slot->from != buffer_of(w) || slot->in != w.in || slot->out != w.out)) slot.reset(); // a copy's
    if (!slot) { // the first product: note the matrix, keep nothing yet
        slot = std::make_shared<backward_tiles>();
        slot->from = buffer_of(w), slot->in = w.in, slot->out = w.out;
        return nullptr;
    }
    if (slot->ready) return slot;
    if (slot->making || tiles_bytes + (size_t)w.in * w.out * sizeof(float) > tiles_budget) return nullptr;
    slot->making = true;
    return slot;
}

// W^T as a matrix of its own, [w.out][w.in], packed for the process's kernel.
// (W's floats go through a buffer kept for the next matrix: a fresh one per matrix was a third of the time, in
// zeroing and first touches)
weight_matrix transposed_matrix(const weight_matrix& w) {
    static thread_local std::vector<float> v;
    if (v.size() < (size_t)w.in * w.out) v.resize((size_t)w.in * w.out);
    unpack_matrix(v.data(), w);
    return pack_transposed(v.data(), w.in, w.out, w.finite);
}

// out [n][wt.out] (+)= g [n][wt.in] (rows ldg floats apart) * wt, through gemm's contiguous rows where needed.
void product_by_kept(float* out, const float* g, int ldg, const weight_matrix& wt, int n, gemm_scratch& scratch,
                     bool accumulate) {
    static const std::vector<float> no_bias;
    static thread_local std::vector<float> gin, prod;
    const float* x = g;
    if (ldg != wt.in) { // a part of a fused matrix: its columns of g
        gin.resize((size_t)n * wt.in);
        for (int r = 0; r < n; r++) std::copy_n(g + (size_t)r * ldg, wt.in, gin.data() + (size_t)r * wt.in);
        x = gin.data();
    }
    if (!accumulate) return gemm(out, x, wt, no_bias, n, scratch);
    prod.resize((size_t)n * wt.out);
    gemm(prod.data(), x, wt, no_bias, n, scratch);
    add_floats(out, prod.data(), prod.size());
}

// One matrix (or one part of a fused one): g's columns are W's, ldg floats apart.
void transposed_panels(float* out, const float* g, int ldg, const weight_matrix& w, int n, gemm_scratch& scratch,
                       bool accumulate) {
    const int K = w.in, M = w.out; // out [n][K], g [n][M]
    if (const std::shared_ptr<backward_tiles> kept = kept_transpose(w)) {
        if (!kept->ready) { // this call makes it (outside the lock: other products go on transposing meanwhile)
            weight_matrix wt = transposed_matrix(w);
            std::lock_guard<std::mutex> lock(tiles_mutex);
            kept->wt = std::move(wt);
            kept->bytes = kept->wt.bytes();
            tiles_bytes += kept->bytes;
            kept->ready = true;
        }
        return product_by_kept(out, g, ldg, kept->wt, n, scratch, accumulate);
    }
    backward_shape sh = shape_of(w);
    sh.depth = std::min(sh.depth, (M + NR - 1) / NR * NR); // one slice of a narrow W: its tile no deeper than W
    const int blocks = (n + MR - 1) / MR, slices = (M + sh.depth - 1) / sh.depth, chunks = (K + sh.chunk - 1) / sh.chunk;
    aligned_vector<float>& packed = scratch.rows;
    if (packed.size() < (size_t)blocks * MR * M) packed.resize((size_t)blocks * MR * M);
    const bool threaded = (int64_t)n * K * M > parallel_min_work && chunks > 1;
#pragma omp parallel if (threaded)
    {
        static thread_local aligned_vector<float> tile, buf;
        if (tile.size() < (size_t)sh.depth * sh.chunk) tile.resize((size_t)sh.depth * sh.chunk);
        if (buf.size() < (size_t)sh.chunk * NR) buf.resize((size_t)sh.chunk * NR);
#pragma omp for schedule(static)
        for (int job = 0; job < slices * blocks; job++)
            pack_rows(packed.data(), g, n, M, blocks, (job / blocks) * sh.depth, job % blocks, sh.depth, ldg);
#pragma omp for schedule(dynamic, 1)
        for (int c = 0; c < chunks; c++) {
            const int k0 = c * sh.chunk, kc = std::min(sh.chunk, K - k0);
            for (int s = 0; s < slices; s++) {
                const int j0 = s * sh.depth, jc = std::min(sh.depth, M - j0);
                float* t = tile.data();
                transpose_slice(t, sh.depth, buf.data(), w, j0 / NR, (j0 + jc + NR - 1) / NR, k0, kc);
                const float* slice = packed.data() + (size_t)j0 * blocks * MR;
                for (int b = 0; b * NR < kc; b++)
                    for (int ib = 0; ib < blocks; ib++)
                        kernels::by_rows[std::min(MR, n - ib * MR)](
                            out + (size_t)ib * MR * K + k0 + b * NR, K, std::min(NR, kc - b * NR),
                            slice + (size_t)ib * jc * MR, t + (size_t)b * sh.depth * NR, jc, accumulate || s > 0,
                            nullptr, 0, false, nullptr, EPILOGUE_NONE);
            }
        }
    }
}

} // namespace

void gemm_backward(float* out, const float* g, const weight_matrix& w, int n, gemm_scratch& scratch, bool accumulate) {
    if (n <= 0) return;
    if (w.parts.empty()) return transposed_panels(out, g, w.out, w, n, scratch, accumulate);
    int col0 = 0; // a fused matrix whose parts have their own types: each part's columns of g, summed
    for (const weight_matrix& p : w.parts) {
        transposed_panels(out, g + col0, w.out, p, n, scratch, accumulate || col0 > 0);
        col0 += p.out;
    }
}

} // namespace gb
