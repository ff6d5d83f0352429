// The forward pass's elementwise and row-wise ops (see ops.h): norms, SwiGLU, RoPE, residual steps, and the
// per-head split of the attention output.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <omp.h>
#include <string>

#include "util/error.h"
#include "util/lanes.h"
#include "util/simd_math.h"

namespace gb {

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
void norm_forward(float* out, const float* x, const std::vector<float>* g, const std::vector<float>* b,
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

// ---------------------------------------------------------------------------------------------
// bookkeeping
// ---------------------------------------------------------------------------------------------
// f(i0, i1) over [0, n) in a chunk per thread
template <class F> static void split(size_t n, F f) {
#pragma omp parallel if ((int64_t)n >= parallel_min_rows)
    {
        const size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t chunk = (n / nt + 15) / 16 * 16; // whole cache lines per thread
        const size_t i0 = std::min(n, t * chunk), i1 = t + 1 == nt ? n : std::min(n, i0 + chunk);
        if (i0 < i1) f(i0, i1);
    }
}

void copy_floats(float* y, const float* x, size_t n) {
    split(n, [&](size_t i0, size_t i1) { std::copy(x + i0, x + i1, y + i0); });
}

void fill_floats(float* y, float v, size_t n) {
    split(n, [&](size_t i0, size_t i1) { std::fill(y + i0, y + i1, v); });
}

void add_floats(float* y, const float* x, size_t n) {
    split(n, [&](size_t i0, size_t i1) {
        for (size_t i = i0; i < i1; i++) y[i] += x[i];
    });
}

// SwiGLU: up [n] <- silu(gate) * up = up * gate / (1 + e^-gate). Whole vectors from the start of the buffer and
// the tail through the same exp on a padded copy: every element gets the same arithmetic wherever the buffer
// sits (Eigen's array version peeled the unaligned head off to scalar code, so a result's last bit depended on
// the heap address).
void swiglu_forward(float* up, const float* gate, size_t n) {
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
void geglu_forward(float* up, const float* gate, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i];
        up[i] *= 0.5f * g * (1.0f + std::tanh(0.7978845608f * (g + 0.044715f * g * g * g)));
    }
}

// x [n] in place through f (lanes -> lanes), in chunks over the threads, the tail in one zero-padded vector
template <typename F> static void map_lanes(float* x, size_t n, F f) {
    const int64_t chunk = 4096;
    const int64_t chunks = ((int64_t)n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if ((int64_t)n > parallel_min_work / 8)
    for (int64_t ci = 0; ci < chunks; ci++) {
        const int64_t i0 = ci * chunk, len = std::min<int64_t>(chunk, (int64_t)n - i0);
        int64_t i = 0;
        for (; i + AL <= len; i += AL) *(avec*)(x + i0 + i) = f(*(const avec*)(x + i0 + i));
        if (i < len) {
            avec v = {};
            for (int64_t t = i; t < len; t++) v[t - i] = x[i0 + t];
            v = f(v);
            for (int64_t t = i; t < len; t++) x[i0 + t] = v[t - i];
        }
    }
}

// Marian's swish
void silu_forward(float* x, size_t n) {
    map_lanes(x, n, [](avec v) { return v / (1.0f + exp_lanes(-v)); });
}

void gelu_erf_forward(float* x, size_t n) { map_lanes(x, n, [](avec v) { return gelu_erf_lanes(v); }); }
void gelu_forward(float* x, size_t n) { map_lanes(x, n, [](avec v) { return gelu_lanes(v); }); }

void softcap_forward(float* x, size_t n, float cap) {
    for (size_t i = 0; i < n; i++) x[i] = cap * std::tanh(x[i] / cap);
}

void rms_groups(float* x, int stride, int n, int groups, int width, const std::vector<float>& g, float eps) {
    for (int t = 0; t < n; t++)
        for (int k = 0; k < groups; k++) {
            float* v = x + (size_t)t * stride + (size_t)k * width;
            const float inv = (float)(1.0 / std::sqrt(row_sum<true>(v, width, 0.0) / width + eps));
            for (int i = 0; i < width; i++) v[i] = v[i] * inv * g[i];
        }
}

void rope_forward(float* x, int stride, int n, int n_heads, int d_head, int pos0,
                         const std::vector<double>& freq, rope_pairing pairing) {
    const int half = (int)freq.size();
    if (half == 0 || 2 * half > d_head)
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
bool residual_step(float* x, const float* f, bool replace, float* norms, int n, int d) {
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

void head_outputs(float* out, const float* z, int z_stride, const weight_matrix& w_o, int n, int H, int dh,
                  std::vector<float>& blocks, gemm_scratch& gs) {
    const int hd = H * dh, d = w_o.out;
    // positions per product: the block-diagonal rows are H times z's size, so they go in chunks
    const int chunk = std::max(1, std::min(n, (1 << 22) / std::max(1, H * hd)));
    if (blocks.size() < (size_t)chunk * H * hd) blocks.resize((size_t)chunk * H * hd);
    static const std::vector<float> no_bias;
    for (int t0 = 0; t0 < n; t0 += chunk) {
        const int rows = std::min(chunk, n - t0);
        std::fill_n(blocks.data(), (size_t)rows * H * hd, 0.0f);
        for (int t = 0; t < rows; t++)
            for (int h = 0; h < H; h++)
                std::copy_n(z + (size_t)(t0 + t) * z_stride + (size_t)h * dh, dh,
                            blocks.data() + ((size_t)t * H + h) * hd + (size_t)h * dh);
        gemm(out + (size_t)t0 * H * d, blocks.data(), w_o, no_bias, rows * H, gs);
    }
}

void final_norm_forward(float* out, const float* x, int n, const model& m, bool identity, gemm_scratch& gs) {
    const model_config& c = m.config;
    const model_weights& w = m.weights;
    const arch_info& arch = arch_table(c.arch);
    const size_t nd = (size_t)n * c.d_model;
    if (arch.mlm_head) {
        gemm(out, x, w.head_dense, w.head_dense_b, n, gs);
        gelu_erf_forward(out, nd);
        x = out;
    }
    if (identity || w.normf_g.empty()) { // BART and Marian stacks have no final norm
        if (x != out) std::copy_n(x, nd, out);
        return;
    }
    norm_forward(out, x, &w.normf_g, &w.normf_b, arch.norm, c.norm_eps, n, c.d_model);
}

void patch_embed_forward(float* x, const float* pixels, const model& m, gemm_scratch& gs) {
    const model_config& c = m.config;
    const model_weights& w = m.weights;
    const int d = c.d_model, P = c.patch_size, S = c.image_size, G = c.grid(), C = c.n_channels;
    const int cpp = C * P * P;
    std::copy_n(w.cls_tok.data(), d, x);
    if (c.n_prefix > 1) std::copy_n(w.dist_tok.data(), d, x + d);
    std::vector<float> patches((size_t)G * G * cpp); // [patches][C*P*P]
    for (int gr = 0; gr < G; gr++)
        for (int gc = 0; gc < G; gc++) {
            float* p = &patches[((size_t)gr * G + gc) * cpp];
            for (int ch = 0; ch < C; ch++)
                for (int y = 0; y < P; y++)
                    std::copy_n(pixels + ((size_t)ch * S + gr * P + y) * S + gc * P, P, p + (ch * P + y) * P);
        }
    gemm(x + (size_t)c.n_prefix * d, patches.data(), w.patch, w.patch_b, G * G, gs);
}

void distill_average(float* logits0, const float* x1, const model& m) {
    const model_weights& w = m.weights;
    const int d = m.config.d_model, V = m.config.vocab_size;
    std::vector<float> e(d);
    for (int v = 0; v < V; v++) {
        table_row(e.data(), w.dist_head, v);
        double sum = w.dist_head_b.empty() ? 0.0 : w.dist_head_b[v];
        for (int i = 0; i < d; i++) sum += (double)x1[i] * e[i];
        logits0[v] = (float)(0.5 * ((double)logits0[v] + sum));
    }
}

double lm_head_logit(float* row, const float* x, int id, const model& m) {
    const model_weights& w = m.weights;
    table_row(row, w.unembedding(), id);
    double sum = w.lm_head_b.empty() ? 0.0 : w.lm_head_b[id];
    for (int i = 0; i < m.config.d_model; i++) sum += (double)x[i] * row[i];
    return sum;
}

void lm_head_forward(float* logits, const float* x, int n, const model& m, gemm_scratch& gs) {
    const model_weights& w = m.weights;
    gemm_head(logits, x, w.head, w.unembedding(), n, gs);
    if (w.lm_head_b.empty()) return;
    const int V = m.config.vocab_size;
    for (int t = 0; t < n; t++)
        for (int v = 0; v < V; v++) logits[(size_t)t * V + v] += w.lm_head_b[v];
}

void sum_heads(float* out, const float* head_out, const std::vector<float>& bias, int n, int H, int d) {
    for (int t = 0; t < n; t++) {
        float* o = out + (size_t)t * d;
        if (bias.empty()) std::fill_n(o, d, 0.0f);
        else std::copy_n(bias.data(), d, o);
        for (int h = 0; h < H; h++) {
            const float* src = head_out + ((size_t)t * H + h) * d;
            for (int i = 0; i < d; i++) o[i] += src[i];
        }
    }
}

} // namespace gb
