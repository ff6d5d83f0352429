// Attention on the CPU: per head, scores -> causal (and sliding-window, soft-capped) softmax -> weighted values;
// non-causal (encoders): the same loops with every row running over all keys.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/unroll.h" // GB_UNROLL
#include "util/error.h"
#include "util/lanes.h"
#include "util/simd_math.h"

namespace gb {

// Register-tiled loops instead of Eigen's general product: at 64 tokens a head is 64 x 64 x 64, where a
// general GEMM spends more on packing than on multiply-adds, and the causal half above the diagonal need not
// be computed at all. Scores: SR query rows x SK keys per tile, keys from a transposed copy of K. Weighted
// values: OR rows x OD output dimensions per tile, straight from V.
constexpr int SR = 8, SK = 2 * AL; // score tile: 8 queries x 2 vectors of keys
constexpr int OR = 4, OV = 4;      // output tile: 4 queries x 4 vectors of dimensions

// p [R][ld] (row r at query i0 + r) = scale * q . k for keys [0, n_keys), from kt [dh][kt_ld]. R is a template
// argument so the 2R accumulators stay in registers.
template <int R>
static void attention_scores(float* p, int ld, const float* q, int q_stride, const float* kt, int kt_ld, int dh,
                             int n_keys, float scale) {
    for (int j0 = 0; j0 < n_keys; j0 += SK) {
        avec acc[R][2] = {};
        for (int d = 0; d < dh; d++) {
            const avec k0 = *(const avec*)(kt + (size_t)d * kt_ld + j0);
            const avec k1 = *(const avec*)(kt + (size_t)d * kt_ld + j0 + AL);
            GB_UNROLL
            for (int r = 0; r < R; r++) {
                const float qr = q[(size_t)r * q_stride + d];
                acc[r][0] += qr * k0;
                acc[r][1] += qr * k1;
            }
        }
        const int keys = std::min(SK, n_keys - j0);
        GB_UNROLL
        for (int r = 0; r < R; r++) {
            float* dst = p + (size_t)r * ld + j0;
            if (keys == SK) {
                *(avec*)dst = acc[r][0] * scale;
                *(avec*)(dst + AL) = acc[r][1] * scale;
            } else {
                float tile[SK];
                *(avec*)tile = acc[r][0] * scale;
                *(avec*)(tile + AL) = acc[r][1] * scale;
                for (int t = 0; t < keys; t++) dst[t] = tile[t];
            }
        }
    }
}

// In place on row [0, n): softmax over the entries [first, valid) (max-subtracted, summed in double), after
// soft-capping them when softcap > 0; zeros before first (outside a sliding window) and from valid on.
static void softmax_causal_row(float* row, int first, int valid, int n, float softcap) {
    std::fill(row, row + first, 0.0f);
    row += first, valid -= first, n -= first;
    if (softcap > 0)
        for (int t = 0; t < valid; t++) row[t] = softcap * std::tanh(row[t] / softcap);
    avec mv = avec{} - INFINITY;
    int j = 0;
    for (; j + AL <= valid; j += AL) {
        const avec v = *(const avec*)(row + j);
        mv = v > mv ? v : mv;
    }
    float mx = -INFINITY;
    for (int l = 0; l < AL; l++) mx = std::max(mx, mv[l]);
    for (int t = j; t < valid; t++) mx = std::max(mx, row[t]);
    double sum = 0;
    avec sv = {};
    for (j = 0; j + AL <= valid; j += AL) {
        const avec e = exp_lanes(*(const avec*)(row + j) - mx);
        *(avec*)(row + j) = e;
        sv += e;
    }
    for (int l = 0; l < AL; l++) sum += sv[l];
    for (int t = j; t < valid; t++) sum += row[t] = std::exp(row[t] - mx);
    const float inv = (float)(1.0 / sum);
    for (j = 0; j + AL <= valid; j += AL) *(avec*)(row + j) *= inv;
    for (int t = j; t < valid; t++) row[t] *= inv;
    std::fill(row + valid, row + n, 0.0f);
}

// out rows [R][out_stride] (dims [0, dh)) = p rows [R][ld] (keys [0, n_keys)) . v [n_keys][v_stride], v's rows
// padded so whole vectors of dims can be read (v_stride >= ceil(dh / AL) * AL). C vectors of dims per pass.
template <int R, int C>
static void attention_values_tile(float* out, int out_stride, const float* p, int ld, const float* v, int v_stride,
                                  int d0, int dims, int n_keys) {
    avec acc[R][C] = {};
    for (int j = 0; j < n_keys; j++) {
        avec vj[C];
        GB_UNROLL
        for (int c = 0; c < C; c++) vj[c] = *(const avec*)(v + (size_t)j * v_stride + d0 + c * AL);
        GB_UNROLL
        for (int r = 0; r < R; r++) {
            const float pr = p[(size_t)r * ld + j];
            GB_UNROLL
            for (int c = 0; c < C; c++) acc[r][c] += pr * vj[c];
        }
    }
    GB_UNROLL
    for (int r = 0; r < R; r++) {
        float* dst = out + (size_t)r * out_stride + d0;
        if (dims == C * AL) {
            GB_UNROLL
            for (int c = 0; c < C; c++) *(avec*)(dst + c * AL) = acc[r][c];
        } else {
            float tile[C * AL];
            GB_UNROLL
            for (int c = 0; c < C; c++) *(avec*)(tile + c * AL) = acc[r][c];
            for (int t = 0; t < dims; t++) dst[t] = tile[t];
        }
    }
}

template <int R>
static void attention_values(float* out, int out_stride, const float* p, int ld, const float* v, int v_stride,
                             int dh, int n_keys) {
    for (int d0 = 0; d0 < dh; d0 += OV * AL) {
        const int dims = std::min(OV * AL, dh - d0);
        switch ((dims + AL - 1) / AL) {
        case 1: attention_values_tile<R, 1>(out, out_stride, p, ld, v, v_stride, d0, dims, n_keys); break;
        case 2: attention_values_tile<R, 2>(out, out_stride, p, ld, v, v_stride, d0, dims, n_keys); break;
        case 3: attention_values_tile<R, 3>(out, out_stride, p, ld, v, v_stride, d0, dims, n_keys); break;
        default: attention_values_tile<R, OV>(out, out_stride, p, ld, v, v_stride, d0, dims, n_keys); break;
        }
    }
}

// Tables of the row-count instantiations, indexed by the rows of the last (partial) block.
template <int... R>
struct attention_kernels {
    using scores_fn = void (*)(float*, int, const float*, int, const float*, int, int, int, float);
    using values_fn = void (*)(float*, int, const float*, int, const float*, int, int, int);
    static constexpr scores_fn scores[] = {nullptr, attention_scores<R>...};
    static constexpr values_fn values[] = {nullptr, attention_values<R>...};
};
using score_rows = attention_kernels<1, 2, 3, 4, 5, 6, 7, 8>;
using value_rows = attention_kernels<1, 2, 3, 4>;
static_assert(SR == 8 && OR == 4, "one kernel per row count");

// A few queries (generation: one) against many keys: scores as dot products along the head dimension, straight
// from K's rows (transposing K would cost more than the scores). p rows [rows][ld], keys [0, n_past + r] each
// when causal, else all ld keys.
static void attention_scores_direct(float* p, int ld, const float* q, int q_stride, int rows, const float* K,
                                    int kv_stride, int dh, int n_past, float scale, bool causal) {
    for (int r = 0; r < rows; r++) {
        const float* qr = q + (size_t)r * q_stride;
        const int n_keys = causal ? n_past + r + 1 : ld;
        for (int j = 0; j < n_keys; j++) {
            const float* kj = K + (size_t)j * kv_stride;
            avec acc = {};
            int d = 0;
            for (; d + AL <= dh; d += AL) acc += *(const avec*)(qr + d) * *(const avec*)(kj + d);
            float sum = 0.0f;
            for (int l = 0; l < AL; l++) sum += acc[l];
            for (; d < dh; d++) sum += qr[d] * kj[d];
            p[(size_t)r * ld + j] = sum * scale;
        }
    }
}

// kt [dh][kt_ld] = K [n_kv][dh] (rows kv_stride apart) transposed, keys past n_kv zero. Scalar stores down
// the columns of kt cost 40 % of the attention; a gather builds each row of 16 keys at once.
static void transpose_keys(float* kt, int kt_ld, const float* K, int kv_stride, int n_kv, int dh) {
    int j0 = 0;
#if defined(__AVX512F__)
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(kv_stride));
    if ((int64_t)kv_stride * 16 < (1LL << 31))
        for (; j0 + 16 <= n_kv; j0 += 16)
            for (int d = 0; d < dh; d++)
                _mm512_storeu_ps(kt + (size_t)d * kt_ld + j0, _mm512_i32gather_ps(rows, K + (size_t)j0 * kv_stride + d, 4));
#endif
    for (int d = 0; d < dh; d++) {
        for (int j = j0; j < n_kv; j++) kt[(size_t)d * kt_ld + j] = K[(size_t)j * kv_stride + d];
        std::fill(kt + (size_t)d * kt_ld + n_kv, kt + (size_t)(d + 1) * kt_ld, 0.0f);
    }
}

// Per head: scores and softmax into the probabilities (unless !scores: a.probs already holds them), then the
// weighted values. Causal rows stop at their own position (and a block of rows at its last row's); non-causal
// rows all run over the n_kv keys.
static void attention_heads(const attention_args& a, bool scores) {
    if (!a.causal && a.window > 0) // a window bounds the keys before a query; it has no meaning for those after
        throw error("attention: a sliding window (" + std::to_string(a.window) +
                    " tokens) needs causal attention; non-causal (encoder) attention must have window 0");
    const int n_kv = key_count(a), dh = a.d_head;
    const int group = a.n_head / a.n_kv_head;
    const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt((float)dh);
    const int kt_ld = (n_kv + SK - 1) / SK * SK;      // K^T rows, padded to whole key tiles
    const int dh_pad = (dh + AL - 1) / AL * AL;       // V rows as read: whole vectors
    const bool copy_v = dh_pad != dh;                 // reading whole vectors past dh would leave the buffer
    // a head is cheap, but one token against a long context is already tens of microseconds a head
    const bool threaded = (int64_t)a.n_head * a.n_q * n_kv * dh > parallel_min_work / 4;
    const int direct_queries = 4; // up to this many queries, scores straight from K's rows
#pragma omp parallel for schedule(dynamic, 1) if (threaded)
    for (int h = 0; h < a.n_head; h++) {
        // per-thread scratch, kept between calls: K^T, V padded, and the probabilities when the caller keeps none
        thread_local std::vector<float> kt, vpad, scratch;
        const bool kept = a.probs && (a.probs_heads < 0 || (h >= a.probs_head0 && h < a.probs_head0 + a.probs_heads));
        float* p = kept ? a.probs + (size_t)(a.probs_heads < 0 ? h : h - a.probs_head0) * a.n_q * n_kv : nullptr;
        if (!p) {
            if (scratch.size() < (size_t)a.n_q * n_kv) scratch.resize((size_t)a.n_q * n_kv);
            p = scratch.data();
        }
        const int g = h / group;
        const float* K = a.k + (size_t)g * dh;
        const float* V = a.v + (size_t)g * dh;
        const bool direct = a.n_q <= direct_queries;
        if (scores && !direct) {
            if (kt.size() < (size_t)dh * kt_ld) kt.resize((size_t)dh * kt_ld);
            transpose_keys(kt.data(), kt_ld, K, a.kv_stride, n_kv, dh);
        }
        int v_stride = a.kv_stride;
        if (copy_v) {
            if (vpad.size() < (size_t)n_kv * dh_pad) vpad.resize((size_t)n_kv * dh_pad);
            for (int j = 0; j < n_kv; j++) {
                std::copy_n(V + (size_t)j * a.kv_stride, dh, &vpad[(size_t)j * dh_pad]);
                std::fill_n(&vpad[(size_t)j * dh_pad + dh], dh_pad - dh, 0.0f);
            }
            V = vpad.data();
            v_stride = dh_pad;
        }
        const float* Q = a.q + (size_t)h * dh;
        if (scores && direct) {
            attention_scores_direct(p, n_kv, Q, a.q_stride, a.n_q, K, a.kv_stride, dh, a.n_past, scale, a.causal);
            for (int r = 0; r < a.n_q; r++)
                softmax_causal_row(p + (size_t)r * n_kv, first_key(a, a.n_past + r), end_key(a, a.n_past + r), n_kv,
                                   a.softcap);
        }
        for (int i0 = 0; i0 < a.n_q && scores && !direct; i0 += SR) {
            const int rows = std::min(SR, a.n_q - i0);
            float* prow = p + (size_t)i0 * n_kv;
            // keys after the block's last query are masked for every row of it (causal)
            score_rows::scores[rows](prow, n_kv, Q + (size_t)i0 * a.q_stride, a.q_stride, kt.data(), kt_ld, dh,
                                     end_key(a, a.n_past + i0 + rows - 1), scale);
            for (int r = 0; r < rows; r++) {
                const int i = a.n_past + i0 + r;
                softmax_causal_row(prow + (size_t)r * n_kv, first_key(a, i), end_key(a, i), n_kv, a.softcap);
            }
        }
        for (int i0 = 0; i0 < a.n_q; i0 += OR) {
            const int rows = std::min(OR, a.n_q - i0);
            // causal: probabilities past each row's own position are zero, the block's last row bounds the keys
            const int n_keys = end_key(a, a.n_past + i0 + rows - 1);
            value_rows::values[rows](a.out + (size_t)i0 * a.out_stride + (size_t)h * dh, a.out_stride,
                                     p + (size_t)i0 * n_kv, n_kv, V, v_stride, dh, n_keys);
        }
    }
}

void attention_cpu(const attention_args& a) { attention_heads(a, true); }

void attention_values_cpu(const attention_args& a) { attention_heads(a, false); }

} // namespace gb
