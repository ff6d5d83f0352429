// The forward pass (Eigen + OpenMP): ops as free functions, one per-layer loop, capture and ablations.
//
// Sections: ablation helpers | ops (norms, matmul, activations, rope) | attention_cpu | eval | sampling
#include "forward.h"

// threads are ours (OpenMP over columns and heads); Eigen must not start its own inside or outside them
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Dense>
#include <algorithm>
#include <malloc.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <chrono>
#include <cmath>
#include <numeric>
#include <omp.h>
#include <sstream>

#include "error.h"
#include "gemm.h"
#include "simd_math.h"

namespace gb {

using mat_r = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using map_r = Eigen::Map<mat_r, 0, Eigen::OuterStride<>>;
using cmap_r = Eigen::Map<const mat_r, 0, Eigen::OuterStride<>>;

// ---------------------------------------------------------------------------------------------
// Ablation helpers
// ---------------------------------------------------------------------------------------------
bool layer_set::covers(int layer) const {
    if (!on) return false;
    return layers.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end();
}

bool layer_set::covers_all(int n_layer) const {
    if (!on) return false;
    for (int l = 0; l < n_layer; l++)
        if (!covers(l)) return false;
    return true;
}

bool ablation::any() const { return no_attention.on || no_residual.on || no_layernorm.on || !heads.empty(); }

static void describe_set(std::ostringstream& o, const char* name, const layer_set& s) {
    if (!s.on) return;
    if (o.tellp() > 0) o << ' ';
    o << name;
    if (!s.layers.empty()) {
        o << '[';
        for (size_t i = 0; i < s.layers.size(); i++) o << (i ? "," : "") << s.layers[i];
        o << ']';
    }
}

std::string ablation::describe() const {
    std::ostringstream o;
    describe_set(o, "no-residual", no_residual);
    describe_set(o, "no-layernorm", no_layernorm);
    describe_set(o, "no-attention", no_attention);
    if (!heads.empty()) {
        if (o.tellp() > 0) o << ' ';
        o << "heads";
        for (size_t i = 0; i < heads.size(); i++) o << (i ? "," : " ") << heads[i].layer << '.' << heads[i].head;
    }
    return o.tellp() > 0 ? o.str() : "none";
}

void check_ablation(const ablation& ab, const model_config& c) {
    for (const layer_set* s : {&ab.no_attention, &ab.no_residual, &ab.no_layernorm})
        for (int l : s->layers)
            if (l < 0 || l >= c.n_layer)
                throw error("ablation layer " + std::to_string(l) + " is outside the model (layers 0.." +
                            std::to_string(c.n_layer - 1) + ")");
    for (const head_ref& h : ab.heads)
        if (h.layer < 0 || h.layer >= c.n_layer || h.head < 0 || h.head >= c.n_head)
            throw error("ablated head " + std::to_string(h.layer) + "." + std::to_string(h.head) +
                        " is outside the model (" + std::to_string(c.n_layer) + " layers x " +
                        std::to_string(c.n_head) + " heads)");
}

static std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, ','))
        if (!cur.empty()) out.push_back(cur);
    return out;
}

static int parse_index(const std::string& s, const std::string& what) {
    char* end = nullptr;
    long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > 1000000)
        throw error(what + ": expected a non-negative integer, got '" + s + "'");
    return (int)v;
}

ablation parse_ablation(const std::string& ablate, const std::string& layers, const std::string& heads) {
    ablation ab;
    std::vector<int> ls;
    for (const std::string& s : split_list(layers)) ls.push_back(parse_index(s, "--layers"));
    for (const std::string& name : split_list(ablate)) {
        layer_set* set = name == "no-residual"    ? &ab.no_residual
                         : name == "no-layernorm" ? &ab.no_layernorm
                         : name == "no-attention" ? &ab.no_attention
                                                  : nullptr;
        if (!set)
            throw error("--ablate: unknown ablation '" + name + "' (expected no-residual, no-layernorm, no-attention)");
        set->on = true;
        set->layers = ls;
    }
    if (!ls.empty() && !ab.any()) throw error("--layers restricts --ablate, but no --ablate was given");
    for (const std::string& s : split_list(heads)) {
        size_t dot = s.find('.');
        if (dot == std::string::npos) throw error("--heads: expected LAYER.HEAD like 5.1, got '" + s + "'");
        ab.heads.push_back({parse_index(s.substr(0, dot), "--heads"), parse_index(s.substr(dot + 1), "--heads")});
    }
    return ab;
}

std::vector<std::string> resid_labels(int n_layer) {
    std::vector<std::string> labels{"embed"};
    for (int l = 0; l < n_layer; l++) {
        labels.push_back("L" + std::to_string(l) + " attn");
        labels.push_back("L" + std::to_string(l) + " mlp");
    }
    return labels;
}

// ---------------------------------------------------------------------------------------------
// Ops: output first, sizes last, no hidden state
// ---------------------------------------------------------------------------------------------
// Below this many multiply-adds an op runs on one thread: a parallel region's barrier costs more than it
// saves for tiny models, and much more when the machine is busy.
static const int64_t parallel_min_work = 1 << 20;
// Row-wise passes (norms, residual adds) are cheap per element but run 2L+1 times per forward: split the rows
// over the threads from a few rows of GPT-2 width up.
static const int64_t parallel_min_rows = 1 << 14;

// Sum over a row in double: of x - c, or of (x - c)^2 with sq. Four independent vector accumulators: with one,
// each add waits for the previous (the simd reduction it replaces took ~4x as long at d = 768).
template <bool sq>
static double row_sum(const float* x, int d, double c) {
    typedef double v8d __attribute__((vector_size(8 * sizeof(double))));
    typedef float v8f __attribute__((vector_size(8 * sizeof(float)), aligned(4), may_alias));
    v8d acc[4] = {};
    int i = 0;
    for (; i + 32 <= d; i += 32)
        for (int j = 0; j < 4; j++) {
            const v8d v = __builtin_convertvector(*(const v8f*)(x + i + 8 * j), v8d) - c;
            acc[j] += sq ? v * v : v;
        }
    const v8d all = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    double s = 0;
    for (int j = 0; j < 8; j++) s += all[j];
    for (; i < d; i++) s += sq ? (x[i] - c) * (x[i] - c) : x[i] - c;
    return s;
}

// out [n][d] = LayerNorm(x) * g + b, or RMSNorm(x) * g when b is empty; identity when g is null.
static void norm_forward(float* out, const float* x, const std::vector<float>* g, const std::vector<float>* b,
                         norm_kind kind, float eps, int n, int d) {
#pragma omp parallel for schedule(static) if (n > 1 && (int64_t)n * d >= parallel_min_rows)
    for (int t = 0; t < n; t++) {
        const float* xt = x + (size_t)t * d;
        float* ot = out + (size_t)t * d;
        if (!g) {
            std::copy(xt, xt + d, ot);
            continue;
        }
        // two passes in double: the mean, then the squares about it (no cancellation when |mean| >> spread)
        const double mean = kind == NORM_LAYERNORM ? row_sum<false>(xt, d, 0.0) / d : 0.0;
        const double var = row_sum<true>(xt, d, mean) / d;
        // rsqrt of the (centred) second moment; eps inside the root as both HF implementations do
        float inv = (float)(1.0 / std::sqrt(var + eps));
        const float* gp = g->data();
        if (kind == NORM_LAYERNORM) {
            const float* bp = b->data();
            for (int i = 0; i < d; i++) ot[i] = (xt[i] - (float)mean) * inv * gp[i] + bp[i];
        } else {
            for (int i = 0; i < d; i++) ot[i] = xt[i] * inv * gp[i];
        }
    }
}

// floats per vector of the elementwise and attention loops below
#if defined(__AVX512F__)
constexpr int AL = 16; // floats per vector
#elif defined(__AVX__)
constexpr int AL = 8;
#else
constexpr int AL = 4;
#endif
typedef float avec __attribute__((vector_size(AL * sizeof(float)), aligned(4), may_alias));

// SwiGLU: up [n] <- silu(gate) * up = up * gate / (1 + e^-gate). Whole vectors from the start of the buffer and
// the tail through the same exp on a padded copy: every element gets the same arithmetic wherever the buffer
// sits (Eigen's array version peeled the unaligned head off to scalar code, so a result's last bit depended on
// the heap address).
static void swiglu_forward(float* up, const float* gate, size_t n) {
    const int64_t chunk = 4096;
    const int64_t chunks = ((int64_t)n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if ((int64_t)n > parallel_min_work / 8)
    for (int64_t ci = 0; ci < chunks; ci++) {
        const int64_t i0 = ci * chunk, len = std::min<int64_t>(chunk, (int64_t)n - i0);
        int64_t i = 0;
        for (; i + AL <= len; i += AL) {
            const avec g = *(const avec*)(gate + i0 + i);
            *(avec*)(up + i0 + i) = *(const avec*)(up + i0 + i) * g / (1.0f + exp_lanes(-g));
        }
        if (i < len) {
            avec g = {}, u = {};
            for (int64_t t = i; t < len; t++) g[t - i] = gate[i0 + t], u[t - i] = up[i0 + t];
            const avec r = u * g / (1.0f + exp_lanes(-g));
            for (int64_t t = i; t < len; t++) up[i0 + t] = r[t - i];
        }
    }
}

// Rotary embedding in place on the heads of x [n][stride] for positions pos0.. (n_heads heads from col 0).
// freq [d_head/2]: radians per position of pair i, scaling included (model_config::rope_freq, made at load).
static void rope_forward(float* x, int stride, int n, int n_heads, int d_head, int pos0,
                         const std::vector<double>& freq, rope_pairing pairing) {
    const int half = d_head / 2;
    if ((int)freq.size() != half)
        throw error("internal: RoPE table has " + std::to_string(freq.size()) + " frequencies for head size " +
                    std::to_string(d_head) + " (rope_init_freqs not called?)");
    std::vector<float> cs(2 * (size_t)half); // [half][cos, sin] at one position, shared by every head
    for (int t = 0; t < n; t++) {
        const double pos = pos0 + t;
        for (int i = 0; i < half; i++) {
            double ang = pos * freq[i];
            cs[2 * i] = (float)std::cos(ang), cs[2 * i + 1] = (float)std::sin(ang);
        }
        for (int h = 0; h < n_heads; h++) {
            float* v = x + (size_t)t * stride + (size_t)h * d_head;
            for (int i = 0; i < half; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1];
                int a = pairing == ROPE_HALF ? i : 2 * i;
                int b = pairing == ROPE_HALF ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
}

// x [n][d] <- x + f, or f alone when replace (no residual); f may be null (x as it is). Then, with norms [n],
// each row's L2 norm. The sum of squares is in double, so it is finite exactly when every element is (a float
// squared cannot overflow a double): returns false when some element of x is not finite (only checked with norms).
static bool residual_step(float* x, const float* f, bool replace, float* norms, int n, int d) {
    bool finite = true;
#pragma omp parallel for schedule(static) reduction(&& : finite) if (n > 1 && (int64_t)n * d >= parallel_min_rows)
    for (int t = 0; t < n; t++) {
        float* xt = x + (size_t)t * d;
        if (f) {
            const float* ft = f + (size_t)t * d;
            if (replace) std::copy(ft, ft + d, xt);
            else
                for (int i = 0; i < d; i++) xt[i] += ft[i];
        }
        if (norms) {
            const double ss = row_sum<true>(xt, d, 0.0);
            finite = finite && std::isfinite(ss);
            norms[t] = (float)std::sqrt(ss);
        }
    }
    return finite;
}

// ---------------------------------------------------------------------------------------------
// Attention on the CPU: per head, scores -> causal softmax -> weighted values
// ---------------------------------------------------------------------------------------------
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
            for (int r = 0; r < R; r++) {
                const float qr = q[(size_t)r * q_stride + d];
                acc[r][0] += qr * k0;
                acc[r][1] += qr * k1;
            }
        }
        const int keys = std::min(SK, n_keys - j0);
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

// In place on row [0, n): softmax over the first `valid` entries (max-subtracted, summed in double), zeros after.
static void softmax_causal_row(float* row, int valid, int n) {
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
        for (int c = 0; c < C; c++) vj[c] = *(const avec*)(v + (size_t)j * v_stride + d0 + c * AL);
        for (int r = 0; r < R; r++) {
            const float pr = p[(size_t)r * ld + j];
            for (int c = 0; c < C; c++) acc[r][c] += pr * vj[c];
        }
    }
    for (int r = 0; r < R; r++) {
        float* dst = out + (size_t)r * out_stride + d0;
        if (dims == C * AL) {
            for (int c = 0; c < C; c++) *(avec*)(dst + c * AL) = acc[r][c];
        } else {
            float tile[C * AL];
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
// from K's rows (transposing K would cost more than the scores). p rows [rows][ld], keys [0, n_past + r] each.
static void attention_scores_direct(float* p, int ld, const float* q, int q_stride, int rows, const float* K,
                                    int kv_stride, int dh, int n_past, float scale) {
    for (int r = 0; r < rows; r++) {
        const float* qr = q + (size_t)r * q_stride;
        const int n_keys = n_past + r + 1;
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

void attention_cpu(const attention_args& a) {
    const int n_kv = a.n_past + a.n_q, dh = a.d_head;
    const int group = a.n_head / a.n_kv_head;
    const float scale = 1.0f / std::sqrt((float)dh);
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
        float* p = a.probs ? a.probs + (size_t)h * a.n_q * n_kv : nullptr;
        if (!p) {
            if (scratch.size() < (size_t)a.n_q * n_kv) scratch.resize((size_t)a.n_q * n_kv);
            p = scratch.data();
        }
        const int g = h / group;
        const float* K = a.k + (size_t)g * dh;
        const float* V = a.v + (size_t)g * dh;
        const bool direct = a.n_q <= direct_queries;
        if (!direct) {
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
        if (direct) {
            attention_scores_direct(p, n_kv, Q, a.q_stride, a.n_q, K, a.kv_stride, dh, a.n_past, scale);
            for (int r = 0; r < a.n_q; r++) softmax_causal_row(p + (size_t)r * n_kv, a.n_past + r + 1, n_kv);
        }
        for (int i0 = 0; i0 < a.n_q && !direct; i0 += SR) {
            const int rows = std::min(SR, a.n_q - i0);
            float* prow = p + (size_t)i0 * n_kv;
            // keys after the block's last query are masked for every row of it
            score_rows::scores[rows](prow, n_kv, Q + (size_t)i0 * a.q_stride, a.q_stride, kt.data(), kt_ld, dh,
                                     a.n_past + i0 + rows, scale);
            for (int r = 0; r < rows; r++) softmax_causal_row(prow + (size_t)r * n_kv, a.n_past + i0 + r + 1, n_kv);
        }
        for (int i0 = 0; i0 < a.n_q; i0 += OR) {
            const int rows = std::min(OR, a.n_q - i0);
            // probabilities past each row's own position are zero: the block's last row bounds the keys
            value_rows::values[rows](a.out + (size_t)i0 * a.out_stride + (size_t)h * dh, a.out_stride,
                                     p + (size_t)i0 * n_kv, n_kv, V, v_stride, dh, a.n_past + i0 + rows);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------
void state_init(forward_state& s, const model_config& c, int n_ctx) {
    if (n_ctx <= 0 || n_ctx > c.n_ctx) n_ctx = c.n_ctx;
    s.n_ctx = n_ctx;
    s.n_past = 0;
    // allocated by the first eval that keeps keys: one run that fills the whole context never needs them
    s.k_cache.clear();
    s.v_cache.clear();
}

using clock_type = std::chrono::steady_clock;
static double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
}

void eval(std::vector<float>& logits, capture* cap, forward_state& s, const model& m, const int* tokens, int n,
          const ablation& ab, const forward_options& opt) {
    const model_config& c = m.config;
    const model_weights& w = m.weights;
    const arch_info& arch = arch_table(c.arch);
    const int d = c.d_model, dh = c.d_head, H = c.n_head, KV = c.n_kv_head, L = c.n_layer, V = c.vocab_size;
    const int qkv_w = (H + 2 * KV) * dh; // fused projection width
    const int kv_w = KV * dh;
    const int n0 = s.n_past;
    const int n_keys = n0 + n;
    static const std::vector<float> no_bias; // SwiGLU's gate has none
    auto t_start = clock_type::now();
    forward_timing tm;

    if (n <= 0) throw error("empty prompt: nothing to run");
    if (s.n_ctx == 0) state_init(s, c, c.n_ctx);
    if (n_keys > s.n_ctx)
        throw error("prompt too long: " + std::to_string(n_keys) + " tokens, the model's context is " +
                    std::to_string(s.n_ctx));
    if (cap && n0 != 0) throw error("internal: a capture needs the prompt from position 0");
    check_ablation(ab, c);
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            throw error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                        std::to_string(V - 1) + ")");

    // The cache is written only when a later call can read it: this call continues earlier ones, or leaves room for
    // more. Otherwise (a capture run over the whole context) attention reads this call's keys and values in place.
    const bool use_cache = n0 > 0 || n_keys < s.n_ctx;
    if (use_cache) {
        grow(s.k_cache, (size_t)L * s.n_ctx * kv_w);
        grow(s.v_cache, (size_t)L * s.n_ctx * kv_w);
    }
    grow(s.x, (size_t)n * d);
    grow(s.xn, (size_t)n * d);
    grow(s.qkv, (size_t)n * qkv_w);
    grow(s.att_out, (size_t)n * H * dh);
    grow(s.att, (size_t)n * d);
    grow(s.ff, (size_t)n * c.d_ff);
    if (arch.mlp == MLP_SWIGLU) grow(s.ff2, (size_t)n * c.d_ff);
    float* x = s.x.data();

    if (cap) {
        cap->n_layer = L;
        cap->n_head = H;
        cap->n_tokens = n;
        cap->vocab = V;
        cap->all_logits = opt.all_logits;
        cap->tokens.assign(tokens, tokens + n);
        cap->pieces.resize(n);
        for (int t = 0; t < n; t++) cap->pieces[t] = token_text(m.tok, tokens[t]);
        cap->layer_slot.assign(L, -1);
        int kept = 0;
        if (opt.capture_attention)
            for (int l = 0; l < L; l++)
                if (opt.attention_layers.empty() || (l < (int)opt.attention_layers.size() && opt.attention_layers[l]))
                    cap->layer_slot[l] = kept++;
        cap->attention.assign((size_t)kept * H * n * n, 0.0f);
        cap->resid_norm.assign((size_t)(2 * L + 1) * n, 0.0f);
        cap->nonfinite_layer = -1;
        cap->nonfinite_where.clear();
    }
    // residual point p: x <- x + f (f alone without the residual), then record norms and the first non-finite value
    auto residual = [&](const float* f, bool replace, int point, int layer, const char* where) {
        const bool finite = residual_step(x, f, replace, cap ? &cap->resid_norm[(size_t)point * n] : nullptr, n, d);
        if (cap && cap->nonfinite_layer < 0 && !finite) {
            cap->nonfinite_layer = std::max(layer, 0);
            cap->nonfinite_where = layer < 0 ? std::string(where) : "L" + std::to_string(layer) + " " + where;
        }
    };

    // embeddings: token row (+ learned position row)
    auto t0 = clock_type::now();
    for (int t = 0; t < n; t++) {
        const float* te = &w.tok_emb[(size_t)tokens[t] * d];
        float* xt = x + (size_t)t * d;
        if (arch.pos == POS_LEARNED) {
            const float* pe = &w.pos_emb[(size_t)(n0 + t) * d];
            for (int i = 0; i < d; i++) xt[i] = te[i] + pe[i];
        } else {
            std::copy(te, te + d, xt);
        }
    }
    residual(nullptr, false, 0, -1, "embed");
    tm.rest_ms += ms_since(t0);

    for (int l = 0; l < L; l++) {
        const layer_weights& lw = w.layers[l];
        const bool no_norm = ab.no_layernorm.covers(l);
        const bool no_resid = ab.no_residual.covers(l);
        const bool no_attn = ab.no_attention.covers(l);
        float* k_cache = use_cache ? &s.k_cache[(size_t)l * s.n_ctx * kv_w] : nullptr;
        float* v_cache = use_cache ? &s.v_cache[(size_t)l * s.n_ctx * kv_w] : nullptr;

        // ---- attention sublayer ----
        t0 = clock_type::now();
        norm_forward(s.xn.data(), x, no_norm ? nullptr : &lw.norm1_g, &lw.norm1_b, arch.norm, c.norm_eps, n, d);
        tm.rest_ms += ms_since(t0);
        t0 = clock_type::now();
        gemm(s.qkv.data(), s.xn.data(), lw.w_qkv, lw.b_qkv, n, s.gemm);
        tm.matmul_ms += ms_since(t0);
        t0 = clock_type::now();
        float* q = s.qkv.data();
        float* k_new = q + H * dh;
        float* v_new = k_new + kv_w;
        if (arch.pos == POS_ROPE) {
            rope_forward(q, qkv_w, n, H, dh, n0, c.rope_freq, c.rope);
            rope_forward(k_new, qkv_w, n, KV, dh, n0, c.rope_freq, c.rope);
        }
        if (use_cache)
            for (int t = 0; t < n; t++) { // append this chunk's keys and values to the cache
                std::copy(k_new + (size_t)t * qkv_w, k_new + (size_t)t * qkv_w + kv_w, k_cache + (size_t)(n0 + t) * kv_w);
                std::copy(v_new + (size_t)t * qkv_w, v_new + (size_t)t * qkv_w + kv_w, v_cache + (size_t)(n0 + t) * kv_w);
            }
        tm.rest_ms += ms_since(t0);
        t0 = clock_type::now();
        attention_args aa;
        aa.q = q;
        aa.q_stride = qkv_w;
        aa.k = use_cache ? k_cache : k_new;
        aa.v = use_cache ? v_cache : v_new;
        aa.kv_stride = use_cache ? kv_w : qkv_w;
        aa.n_q = n;
        aa.n_past = n0;
        aa.n_head = H;
        aa.n_kv_head = KV;
        aa.d_head = dh;
        aa.probs = cap && cap->layer_slot[l] >= 0 ? &cap->attention[(size_t)cap->layer_slot[l] * H * n * n] : nullptr;
        aa.out = s.att_out.data();
        aa.out_stride = H * dh;
        if (opt.attention) opt.attention(aa);
        else attention_cpu(aa);
        // head ablation: the head's weighted value vector is zero before the output projection
        for (const head_ref& hr : ab.heads)
            if (hr.layer == l)
                for (int t = 0; t < n; t++)
                    std::fill_n(s.att_out.data() + (size_t)t * H * dh + (size_t)hr.head * dh, dh, 0.0f);
        tm.attention_ms += ms_since(t0);
        t0 = clock_type::now();
        if (no_attn) {
            std::fill_n(s.att.data(), (size_t)n * d, 0.0f);
        } else {
            gemm(s.att.data(), s.att_out.data(), lw.w_o, lw.b_o, n, s.gemm);
        }
        tm.matmul_ms += ms_since(t0);
        t0 = clock_type::now();
        residual(s.att.data(), no_resid, 2 * l + 1, l, "attn");

        // ---- MLP sublayer ----
        norm_forward(s.xn.data(), x, no_norm ? nullptr : &lw.norm2_g, &lw.norm2_b, arch.norm, c.norm_eps, n, d);
        tm.rest_ms += ms_since(t0);
        t0 = clock_type::now();
        // GPT-2's GELU is applied inside the product, to each output tile while it is in cache
        gemm(s.ff.data(), s.xn.data(), lw.w_up, lw.b_up, n, s.gemm,
             arch.mlp == MLP_GELU ? EPILOGUE_GELU : EPILOGUE_NONE);
        if (arch.mlp == MLP_SWIGLU) gemm(s.ff2.data(), s.xn.data(), lw.w_gate, no_bias, n, s.gemm);
        tm.matmul_ms += ms_since(t0);
        t0 = clock_type::now();
        if (arch.mlp == MLP_SWIGLU) swiglu_forward(s.ff.data(), s.ff2.data(), (size_t)n * c.d_ff);
        tm.rest_ms += ms_since(t0);
        t0 = clock_type::now();
        gemm(s.att.data(), s.ff.data(), lw.w_down, lw.b_down, n, s.gemm);
        tm.matmul_ms += ms_since(t0);
        t0 = clock_type::now();
        residual(s.att.data(), no_resid, 2 * l + 2, l, "mlp");
        tm.rest_ms += ms_since(t0);
    }

    // final norm and LM head, only for the positions whose logits are wanted
    t0 = clock_type::now();
    const int n_out = opt.all_logits ? n : 1;
    const float* x_out = x + (size_t)(n - n_out) * d;
    const bool final_identity = ab.no_layernorm.covers_all(L);
    norm_forward(s.xn.data(), x_out, final_identity ? nullptr : &w.normf_g, &w.normf_b, arch.norm, c.norm_eps,
                 n_out, d);
    tm.rest_ms += ms_since(t0);
    t0 = clock_type::now();
    logits.resize((size_t)n_out * V);
    if (w.head.amx()) {
        gemm(logits.data(), s.xn.data(), w.head, no_bias, n_out, s.gemm);
    } else {
        const std::vector<float>& head = w.lm_head.empty() ? w.tok_emb : w.lm_head;
        gemm_rows_transposed(logits.data(), s.xn.data(), head.data(), n_out, d, V);
    }
    tm.matmul_ms += ms_since(t0);
    if (cap && cap->nonfinite_layer < 0 && !all_finite(logits.data(), logits.size())) {
        cap->nonfinite_layer = L - 1;
        cap->nonfinite_where = "logits";
    }

    s.n_past = n_keys;
    tm.total_ms = ms_since(t_start);
    if (cap) cap->timing = tm;
}

size_t attention_capture_bytes(const model_config& c, int n_tokens) {
    return sizeof(float) * (size_t)c.n_layer * c.n_head * n_tokens * n_tokens;
}

std::vector<uint8_t> attention_layers_for_budget(const model_config& c, int n_tokens, size_t budget_bytes, int focus_layer) {
    if (attention_capture_bytes(c, n_tokens) <= budget_bytes) return {};
    size_t per_layer = sizeof(float) * (size_t)c.n_head * n_tokens * n_tokens;
    int fit = (int)std::max<size_t>(1, budget_bytes / std::max<size_t>(per_layer, 1));
    focus_layer = std::min(std::max(focus_layer, 0), c.n_layer - 1);
    std::vector<uint8_t> keep(c.n_layer, 0);
    keep[focus_layer] = 1; // then alternate outwards: focus+1, focus-1, focus+2, ...
    for (int d = 1, kept = 1; kept < fit && (focus_layer - d >= 0 || focus_layer + d < c.n_layer); d++) {
        if (focus_layer + d < c.n_layer && kept < fit) keep[focus_layer + d] = 1, kept++;
        if (focus_layer - d >= 0 && kept < fit) keep[focus_layer - d] = 1, kept++;
    }
    return keep;
}

void keep_freed_buffers_in_heap() {
    mallopt(M_MMAP_THRESHOLD, 256 << 20); // blocks below this come from the heap, not a fresh mmap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap's top is not handed back after each forward
}

void run_forward(capture& out, const model& m, const std::vector<int>& tokens, const ablation& ab,
                 const forward_options& opt) {
    if (tokens.empty()) throw error("empty prompt: nothing to run");
    if ((int)tokens.size() > m.config.n_ctx)
        throw error("prompt too long: " + std::to_string(tokens.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    forward_state s;
    state_init(s, m.config, (int)tokens.size());
    eval(out.logits, &out, s, m, tokens.data(), (int)tokens.size(), ab, opt);
}

// ---------------------------------------------------------------------------------------------
// Probabilities, sampling, generation
// ---------------------------------------------------------------------------------------------
// Logits as the probabilities see them, so a broken model still shows something: NaN counts as -inf; when some
// logit is +inf those share all the mass; when none is finite or +inf (all NaN / -inf) every token is equally
// likely. Writes the cleaned copy to out and returns its maximum, always finite.
static float clean_logits(std::vector<float>& out, const float* logits, int vocab) {
    const float inf = std::numeric_limits<float>::infinity();
    out.assign(logits, logits + vocab);
    bool any_pos_inf = false;
    float mx = -inf;
    for (float& x : out) {
        if (std::isnan(x)) x = -inf;
        any_pos_inf |= x == inf;
        mx = std::max(mx, x);
    }
    if (any_pos_inf)
        for (float& x : out) x = x == inf ? 0.0f : -inf;
    else if (mx == -inf)
        std::fill(out.begin(), out.end(), 0.0f);
    return any_pos_inf || mx == -inf ? 0.0f : mx;
}

void softmax_probs(std::vector<float>& probs, const float* logits_in, int vocab) {
    std::vector<float> logits;
    const float mx = clean_logits(logits, logits_in, vocab);
    probs.resize(vocab);
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += std::exp((double)logits[i] - mx);
    for (int i = 0; i < vocab; i++) probs[i] = (float)(std::exp((double)logits[i] - mx) / sum);
}

std::vector<token_prob> top_k_probs(const float* logits, int vocab, int k) {
    std::vector<float> p;
    softmax_probs(p, logits, vocab);
    k = std::max(0, std::min(k, vocab));
    std::vector<int> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
        return p[a] != p[b] ? p[a] > p[b] : a < b;
    });
    std::vector<token_prob> out;
    for (int i = 0; i < k; i++) out.push_back({idx[i], p[idx[i]]});
    return out;
}

// uniform double in [0,1) from 53 random bits: identical on every platform, unlike std distributions
static double uniform01(std::mt19937_64& rng) { return (double)(rng() >> 11) * (1.0 / 9007199254740992.0); }

int sample_token(const float* logits_in, int vocab, const sampling& sp, std::mt19937_64& rng) {
    if (sp.temperature <= 0.0f) { // greedy: the first largest logit, NaN counting as -inf (no copy per token)
        int best = -1; // stays -1 while every logit seen is NaN or -inf; then all are equally likely: id 0
        for (int i = 0; i < vocab; i++) {
            const float x = logits_in[i];
            if (!std::isnan(x) && (best < 0 ? x > -std::numeric_limits<float>::infinity() : x > logits_in[best])) best = i;
        }
        return best < 0 ? 0 : best;
    }
    std::vector<float> clean; // NaN as -inf, as softmax_probs: the sort below needs a strict order
    clean_logits(clean, logits_in, vocab);
    const float* logits = clean.data();
    std::vector<int> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    int keep = sp.top_k > 0 ? std::min(sp.top_k, vocab) : vocab;
    // only the kept prefix needs ordering (the same prefix a full sort gives: ties broken by id)
    std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(),
                      [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
    std::vector<double> p(keep);
    double sum = 0;
    for (int i = 0; i < keep; i++) {
        p[i] = std::exp(((double)logits[idx[i]] - logits[idx[0]]) / sp.temperature);
        sum += p[i];
    }
    if (sp.top_p > 0.0f && sp.top_p < 1.0f) { // smallest prefix whose mass reaches top_p
        double cum = 0;
        int cut = keep;
        for (int i = 0; i < keep; i++) {
            cum += p[i] / sum;
            if (cum >= sp.top_p) {
                cut = i + 1;
                break;
            }
        }
        keep = cut;
        sum = std::accumulate(p.begin(), p.begin() + keep, 0.0);
    }
    double r = uniform01(rng) * sum;
    for (int i = 0; i < keep; i++) {
        r -= p[i];
        if (r < 0) return idx[i];
    }
    return idx[keep - 1];
}

generation generate(const model& m, const std::vector<int>& prompt, int max_new, const sampling& sp,
                    const ablation& ab, const std::function<bool(int)>& on_token) {
    auto t_start = clock_type::now();
    generation g;
    if (prompt.empty()) throw error("empty prompt: nothing to continue");
    if ((int)prompt.size() > m.config.n_ctx)
        throw error("prompt too long: " + std::to_string(prompt.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    if (max_new < 0) throw error("max new tokens must be >= 0");
    int n_ctx = std::min<int64_t>(m.config.n_ctx, (int64_t)prompt.size() + max_new);
    forward_state s;
    state_init(s, m.config, n_ctx);
    forward_options opt;
    opt.capture_attention = false;
    std::vector<float> logits;
    std::mt19937_64 rng(sp.seed);
    eval(logits, nullptr, s, m, prompt.data(), (int)prompt.size(), ab, opt); // the prompt once
    for (int i = 0; i < max_new; i++) {
        int next = sample_token(logits.data(), m.config.vocab_size, sp, rng);
        if (next == m.tok.eos_id) {
            g.hit_eos = true;
            break;
        }
        g.ids.push_back(next);
        if (on_token && !on_token(next)) break;
        if (i + 1 == max_new || s.n_past >= s.n_ctx) break; // done, or the context is full
        eval(logits, nullptr, s, m, &next, 1, ab, opt);       // one new token through the cache
    }
    g.ms = ms_since(t_start);
    return g;
}

} // namespace gb
