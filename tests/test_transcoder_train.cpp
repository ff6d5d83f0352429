// Transcoder training (analysis/sae_train.h train_coder, analysis/transcoder_train.h, glassbox-cli
// train-transcoder): the shared trainer's first steps against a plain double-precision trainer written here with
// naive loops (an SAE, y = x, and a transcoder with a skip, TopK, ReLU + L1 and JumpReLU + L0), a transcoder trained on a tiny
// model's (mlp_in, mlp_out) reaching a stated explained variance on held-out positions, resuming bit for bit, and
// the CLI end to end: the set it writes reads back with read_transcoders, graph runs on it, its errors are one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "analysis/sae_train.h"
#include "analysis/transcoder_train.h"
#include "io/loader.h"
#include "io/transcoders.h"
#include "run/forward.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tiny_encoder.h"
#include "tiny_family.h"
#include "tiny_model.h"

namespace {

// The plain trainer: weights and Adam's moments in double, the same initialisation and batches as train_coder
// (sae_train.cpp's documented draws), every product a naive loop.
struct ref_trainer {
    int di = 0, dout = 0, F = 0;
    bool same = true, skip = false, jumprelu = false;
    std::vector<double> We, be, Wd, bd, S, lt; // [d_in][F], [F], [F][d_out], [d_out], [d_in][d_out], [F] log θ
    std::vector<double> m[6], v[6];
    int64_t step = 0;
    std::vector<double>* param(int i) {
        return i == 0 ? &We : i == 1 ? &be : i == 2 ? &Wd : i == 3 ? &bd : i == 4 ? &S : &lt;
    }
};

// Random unit rows drawn as the trainer draws them (std::normal_distribution<float>, each row normalised).
std::vector<float> ref_unit_rows(int rows, int cols, std::mt19937_64& rng) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> w((size_t)rows * cols);
    for (int i = 0; i < rows; i++) {
        double norm = 0;
        for (int j = 0; j < cols; j++) norm += std::pow(w[(size_t)i * cols + j] = g(rng), 2);
        for (int j = 0; j < cols; j++) w[(size_t)i * cols + j] /= (float)std::sqrt(norm);
    }
    return w;
}

ref_trainer ref_init(const std::vector<float>& y, int64_t n, int di, int dout, const gb::sae_train_options& o, bool same) {
    ref_trainer t;
    t.di = di, t.dout = dout, t.F = o.d_sae, t.same = same, t.skip = o.skip;
    std::mt19937_64 rng(o.seed);
    const std::vector<float> dec = ref_unit_rows(t.F, dout, rng);
    const std::vector<float> enc = same ? dec : ref_unit_rows(t.F, di, rng);
    t.Wd.assign(dec.begin(), dec.end());
    t.We.assign((size_t)di * t.F, 0.0);
    for (int f = 0; f < t.F; f++)
        for (int j = 0; j < di; j++) t.We[(size_t)j * t.F + f] = enc[(size_t)f * di + j];
    t.be.assign(t.F, 0.0);
    t.bd.assign(dout, 0.0);
    const int64_t rows = std::min<int64_t>(n, 8192);
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < dout; j++) t.bd[j] += y[(size_t)r * dout + j] / (double)rows;
    t.S.assign(o.skip ? (size_t)di * dout : 0, 0.0);
    t.jumprelu = o.jumprelu;
    t.lt.assign(o.jumprelu ? t.F : 0, std::log((double)o.threshold));
    for (int i = 0; i < 6; i++) t.m[i].assign(t.param(i)->size(), 0.0), t.v[i].assign(t.param(i)->size(), 0.0);
    return t;
}

// One step of the loss mean_b Σ_j (ŷ - y)² (+ l1 mean_b Σ f, or l0 mean_b #{f > 0}) with its gradient written out
// element by element; JumpReLU's log θ by the rectangle-kernel pseudo-derivative: where |pre - θ| < ε/2, d a/d θ is
// -θ/ε and d #{f > 0}/d θ is -1/ε, and d/d log θ = θ d/d θ.
void ref_step(ref_trainer& t, const std::vector<float>& x, const std::vector<float>& y, int64_t n, const gb::sae_train_options& o) {
    const int B = o.batch, F = t.F, di = t.di, dout = t.dout;
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + (uint64_t)t.step);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    std::vector<int64_t> rows(B);
    for (int b = 0; b < B; b++) rows[b] = pick(rng);
    std::vector<double> g[6];
    for (int i = 0; i < 6; i++) g[i].assign(t.param(i)->size(), 0.0);
    for (int b = 0; b < B; b++) {
        const float* xr = x.data() + rows[b] * di;
        const float* yr = y.data() + rows[b] * dout;
        std::vector<double> xin(di), pre(F, 0.0), f(F, 0.0), yhat(dout, 0.0), G(dout);
        for (int j = 0; j < di; j++) xin[j] = xr[j] - (t.same ? t.bd[j] : 0.0);
        for (int i = 0; i < F; i++) {
            pre[i] = t.be[i];
            for (int j = 0; j < di; j++) pre[i] += xin[j] * t.We[(size_t)j * F + i];
        }
        if (o.k > 0) {
            std::vector<int> ord(F);
            std::iota(ord.begin(), ord.end(), 0);
            std::sort(ord.begin(), ord.end(), [&](int a, int c) { return pre[a] > pre[c]; });
            for (int r = 0; r < o.k; r++) f[ord[r]] = std::max(0.0, pre[ord[r]]);
        } else if (t.jumprelu) {
            for (int i = 0; i < F; i++) f[i] = pre[i] > std::exp(t.lt[i]) && pre[i] > 0 ? pre[i] : 0.0;
        } else {
            for (int i = 0; i < F; i++) f[i] = std::max(0.0, pre[i]);
        }
        for (int j = 0; j < dout; j++) {
            yhat[j] = t.bd[j];
            for (int i = 0; i < F; i++) yhat[j] += f[i] * t.Wd[(size_t)i * dout + j];
            if (t.skip)
                for (int q = 0; q < di; q++) yhat[j] += (double)xr[q] * t.S[(size_t)q * dout + j];
            G[j] = 2.0 * (yhat[j] - yr[j]) / B;
        }
        for (int i = 0; i < F; i++) {
            double dpre = 0;
            for (int j = 0; j < dout; j++) g[2][(size_t)i * dout + j] += f[i] * G[j], dpre += G[j] * t.Wd[(size_t)i * dout + j];
            if (t.jumprelu) {
                const double th = std::exp(t.lt[i]), eps = o.bandwidth;
                if (std::abs(pre[i] - th) < eps / 2) g[5][i] += th * (dpre * (-th / eps) - o.l0 / (B * eps));
            } else if (o.k == 0) {
                dpre += o.l1 / B;
            }
            if (f[i] <= 0) continue;
            for (int j = 0; j < di; j++) g[0][(size_t)j * F + i] += xin[j] * dpre;
            g[1][i] += dpre;
            if (t.same)
                for (int j = 0; j < di; j++) g[3][j] -= t.We[(size_t)j * F + i] * dpre; // b_dec is in the SAE's input
        }
        for (int j = 0; j < dout; j++) g[3][j] += G[j];
        if (t.skip)
            for (int q = 0; q < di; q++)
                for (int j = 0; j < dout; j++) g[4][(size_t)q * dout + j] += (double)xr[q] * G[j];
    }
    for (int i = 0; i < F; i++) { // the decoder's gradient along its unit sphere
        double dot = 0;
        for (int j = 0; j < dout; j++) dot += g[2][(size_t)i * dout + j] * t.Wd[(size_t)i * dout + j];
        for (int j = 0; j < dout; j++) g[2][(size_t)i * dout + j] -= dot * t.Wd[(size_t)i * dout + j];
    }
    t.step++;
    const double c1 = 1 - std::pow(0.9, (double)t.step), c2 = 1 - std::pow(0.999, (double)t.step);
    for (int k = 0; k < 6; k++) {
        std::vector<double>& w = *t.param(k);
        for (size_t i = 0; i < w.size(); i++) {
            t.m[k][i] = 0.9 * t.m[k][i] + 0.1 * g[k][i];
            t.v[k][i] = 0.999 * t.v[k][i] + 0.001 * g[k][i] * g[k][i];
            w[i] -= o.lr * (t.m[k][i] / c1) / (std::sqrt(t.v[k][i] / c2) + 1e-8);
        }
    }
    for (int i = 0; i < F; i++) {
        double nn = 0;
        for (int j = 0; j < dout; j++) nn += t.Wd[(size_t)i * dout + j] * t.Wd[(size_t)i * dout + j];
        for (int j = 0; j < dout; j++) t.Wd[(size_t)i * dout + j] /= std::sqrt(nn);
    }
}

double max_diff_tc(const std::vector<float>& got, const std::vector<double>& want) {
    EXPECT_EQ(got.size(), want.size());
    double m = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); i++) m = std::max(m, std::abs(got[i] - want[i]));
    return m;
}

// Rows y = a nonlinear function of x (a small random ReLU MLP): something a transcoder can learn.
void mlp_data(int64_t n, int di, int dout, uint32_t seed, std::vector<float>& x, std::vector<float>& y) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const int h = 24;
    std::vector<float> A((size_t)di * h), Bm((size_t)h * dout);
    for (float& a : A) a = g(rng) / std::sqrt((float)di);
    for (float& b : Bm) b = g(rng) / std::sqrt((float)h);
    x.resize((size_t)n * di), y.assign((size_t)n * dout, 0.0f);
    for (int64_t r = 0; r < n; r++) {
        for (int j = 0; j < di; j++) x[r * di + j] = g(rng);
        for (int k = 0; k < h; k++) {
            float a = 0;
            for (int j = 0; j < di; j++) a += x[r * di + j] * A[(size_t)j * h + k];
            a = std::max(a, 0.0f);
            for (int j = 0; j < dout; j++) y[r * dout + j] += a * Bm[(size_t)k * dout + j];
        }
        for (int j = 0; j < dout && j < di; j++) y[r * dout + j] += 0.5f * x[r * di + j]; // a linear part for the skip
    }
}

int lines(const std::string& s) {
    std::string t = s;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t.empty() ? 0 : 1 + (int)std::count(t.begin(), t.end(), '\n');
}

const char* corpus_text =
    "the cat sat on the mat. the dog sat on the log. a cat and a dog met on a mat.\n"
    "hello world, hello there, the world says hello. when the sun is out the cat sleeps and the dog runs.\n"
    "a small bird sang in the tree; the cat looked up, the dog looked at the cat, and the bird flew away.\n";

} // namespace

TEST(TranscoderTrain, StepsMatchAPlainDoubleTrainer) {
    struct tc { const char* name; bool same; int k; float l1; bool skip; float l0 = -1; };
    for (const tc& c : {tc{"sae topk", true, 3, 0, false}, tc{"sae relu+l1", true, 0, 0.05f, false},
                        tc{"transcoder topk skip", false, 3, 0, true}, tc{"transcoder relu+l1", false, 0, 0.05f, false},
                        tc{"transcoder topk", false, 4, 0, false}, tc{"sae jumprelu", true, 0, 0, false, 0.2f},
                        tc{"transcoder jumprelu skip", false, 0, 0, true, 0.2f}}) {
        const int di = 6, dout = c.same ? 6 : 5;
        const int64_t n = 300;
        std::vector<float> x, y;
        mlp_data(n, di, dout, 11, x, y);
        if (c.same) y = x;
        gb::sae_train_options o;
        o.d_sae = 10, o.k = c.k, o.l1 = c.l1, o.skip = c.skip, o.batch = 16, o.lr = 1e-2f, o.seed = 5, o.dead_after = 0;
        // JumpReLU: a window of 0.8 around θ = 0.3 holds about a third of the N(0, 1) pre-activations, so that
        // every step moves some thresholds
        if (c.l0 >= 0) o.jumprelu = true, o.l0 = c.l0, o.bandwidth = 0.8f, o.threshold = 0.3f;
        ref_trainer r = ref_init(y, n, di, dout, o, c.same);
        const std::vector<double> We0 = r.We, Wd0 = r.Wd;
        for (int steps = 1; steps <= 3; steps++) {
            o.steps = steps;
            const gb::trained_coder got = gb::train_coder(x.data(), c.same ? x.data() : y.data(), n, di, dout, o, "", {});
            ref_step(r, x, y, n, o);
            EXPECT_LT(max_diff_tc(got.s.W_enc, r.We), 1e-5) << c.name << " step " << steps;
            EXPECT_LT(max_diff_tc(got.s.b_enc, r.be), 1e-5) << c.name << " step " << steps;
            EXPECT_LT(max_diff_tc(got.s.W_dec, r.Wd), 1e-5) << c.name << " step " << steps;
            EXPECT_LT(max_diff_tc(got.s.b_dec, r.bd), 1e-5) << c.name << " step " << steps;
            if (c.skip) EXPECT_LT(max_diff_tc(got.skip, r.S), 1e-5) << c.name << " step " << steps;
            else EXPECT_TRUE(got.skip.empty());
            if (o.jumprelu) {
                std::vector<double> theta(r.lt.size());
                double moved = 0;
                for (size_t i = 0; i < theta.size(); i++)
                    theta[i] = std::exp(r.lt[i]), moved = std::max(moved, std::abs(theta[i] - o.threshold));
                EXPECT_EQ(got.s.arch, gb::SAE_JUMPRELU);
                EXPECT_LT(max_diff_tc(got.s.threshold, theta), 1e-5) << c.name << " step " << steps;
                EXPECT_GT(moved, 1e-3) << c.name << ": the thresholds moved";
            } else {
                EXPECT_TRUE(got.s.threshold.empty());
            }
            // the steps move the weights by about lr (1e-2): the tolerance is a thousandth of one step
            EXPECT_GT(max_diff_tc(got.s.W_enc, We0), 5e-3) << c.name;
            EXPECT_GT(max_diff_tc(got.s.W_dec, Wd0), 5e-3) << c.name;
            EXPECT_EQ(got.s.transcoder, !c.same);
            EXPECT_EQ(got.s.apply_b_dec_to_input, c.same);
        }
    }
}

TEST(TranscoderTrain, LearnsANonlinearMapOnHeldOutRows) {
    const int di = 8, dout = 8;
    const int64_t n = 12000, held = 2000;
    std::vector<float> x, y;
    mlp_data(n, di, dout, 3, x, y);
    for (bool skip : {false, true}) {
        gb::sae_train_options o;
        o.d_sae = 96, o.k = 8, o.skip = skip, o.steps = 1500, o.batch = 128, o.lr = 3e-3f, o.seed = 1, o.dead_after = 300;
        const gb::trained_coder c = gb::train_coder(x.data(), y.data(), n - held, di, dout, o, "", {});
        const double ev = gb::coder_explained(c.s, c.skip, x.data() + (n - held) * di, y.data() + (n - held) * dout, held);
        EXPECT_GT(ev, 0.85) << (skip ? "with" : "without") << " a skip: held-out explained variance";
    }
}

TEST(TranscoderTrain, JumpReluLearnsAndItsL0CoefficientSetsTheSparsity) {
    const int di = 8, dout = 8;
    const int64_t n = 12000, held = 2000;
    std::vector<float> x, y;
    mlp_data(n, di, dout, 3, x, y);
    double l0_at[2] = {0, 0}, ev_at[2] = {0, 0};
    const float coef[2] = {0.002f, 0.05f};
    for (int c = 0; c < 2; c++) {
        gb::sae_train_options o;
        o.d_sae = 96, o.jumprelu = true, o.l0 = coef[c], o.bandwidth = 0.1f, o.threshold = 0.1f, o.skip = true;
        o.steps = 1500, o.batch = 128, o.lr = 3e-3f, o.seed = 1, o.dead_after = 300;
        const gb::trained_coder tc = gb::train_coder(x.data(), y.data(), n - held, di, dout, o, "", {});
        ev_at[c] = gb::coder_explained(tc.s, tc.skip, x.data() + (n - held) * di, y.data() + (n - held) * dout, held);
        std::vector<float> f;
        gb::sae_encode(f, tc.s, x.data() + (n - held) * di, (int)held);
        for (float a : f) l0_at[c] += a > 0;
        l0_at[c] /= (double)held;
        std::printf("l0 %g: held-out explained %.3f, %.1f active features a row\n", coef[c], ev_at[c], l0_at[c]);
    }
    // --threshold and --bandwidth "auto" (0): θ starts at σ, the RMS of the input's entries over the first 8,192 rows
    {
        gb::sae_train_options o;
        o.d_sae = 16, o.jumprelu = true, o.l0 = 0.01f, o.steps = 1, o.lr = 1e-9f, o.batch = 8;
        const gb::trained_coder tc = gb::train_coder(x.data(), y.data(), n, di, dout, o, "", {});
        double ss = 0;
        for (int64_t i = 0; i < 8192 * di; i++) ss += (double)x[i] * x[i];
        const double sigma = std::sqrt(ss / (8192.0 * di));
        ASSERT_EQ(tc.s.threshold.size(), 16u);
        for (float th : tc.s.threshold) EXPECT_NEAR(th, sigma, 1e-4 * sigma);
    }
    // measured: 0.976 with 33.8 features active a row, 0.943 with 2.9
    EXPECT_GT(ev_at[0], 0.9) << "held-out explained variance at the small L0 coefficient";
    EXPECT_GT(ev_at[1], 0.8) << "held-out explained variance at the large L0 coefficient";
    EXPECT_LT(l0_at[1], 0.3 * l0_at[0]) << "a larger L0 coefficient keeps fewer features active";
}

TEST(TranscoderTrain, TinyModelTranscodersExplainHeldOutMlpOutputs) {
    tiny_spec spec;
    spec.n_layer = 2, spec.d_model = 16;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir("tct-model"), spec);
    const gb::model m = gb::load_model(tm.dir);
    std::string text;
    for (int i = 0; i < 12; i++) text += corpus_text;
    const gb::mlp_pairs p = gb::collect_mlp_pairs(m, {1, 0}, text, 32, 100000, false);
    ASSERT_EQ(p.layers, (std::vector<int>{0, 1}));
    ASSERT_GT(p.n, 1000);
    // the pairs are the run's own mlp_in and mlp_out
    {
        gb::forward_options opt;
        opt.keep.points = gb::hook_bit(gb::HOOK_MLP_IN) | gb::hook_bit(gb::HOOK_MLP_OUT);
        gb::record rec;
        const std::vector<int> ids = gb::encode(m.tok, text);
        gb::run_forward(rec, m, std::vector<int>(ids.begin(), ids.begin() + 32), {}, opt);
        for (int j = 0; j < 32 * 16; j++) {
            ASSERT_EQ(p.x[1][j], rec.get(gb::HOOK_MLP_IN, 1)[j]);
            ASSERT_EQ(p.y[1][j], rec.get(gb::HOOK_MLP_OUT, 1)[j]);
        }
    }
    const int64_t held = p.n / 5, train = p.n - held;
    for (size_t k = 0; k < 2; k++) {
        gb::sae_train_options o;
        o.d_sae = 128, o.k = 8, o.steps = 1500, o.batch = 128, o.lr = 3e-3f, o.seed = 2, o.dead_after = 300;
        const gb::trained_coder c = gb::train_coder(p.x[k].data(), p.y[k].data(), train, 16, 16, o, "", {});
        const double ev = gb::coder_explained(c.s, c.skip, p.x[k].data() + train * 16, p.y[k].data() + train * 16, held);
        EXPECT_GT(ev, 0.8) << "layer " << p.layers[k] << ": held-out explained variance of the MLP output";
    }
}

TEST(TranscoderTrain, ResumingGivesTheSameWeightsBitForBit) {
    std::vector<float> x, y;
    mlp_data(3000, 10, 10, 9, x, y);
    const std::string dir = test_temp_dir("tct-resume");
    gb::sae_train_options o;
    o.d_sae = 24, o.k = 3, o.skip = true, o.steps = 120, o.batch = 64, o.seed = 2, o.dead_after = 40, o.save_every = 60;
    for (bool jumprelu : {false, true}) {
        const std::string tag = jumprelu ? "jumprelu" : "topk";
        if (jumprelu) o.k = 0, o.jumprelu = true, o.l0 = 0.05f, o.bandwidth = 0.5f, o.threshold = 0.2f;
        o.steps = 120;
        const gb::trained_coder straight = gb::train_coder(x.data(), y.data(), 3000, 10, 10, o, dir + "/a" + tag, {});
        o.steps = 60;
        gb::train_coder(x.data(), y.data(), 3000, 10, 10, o, dir + "/b" + tag, {});
        o.steps = 120;
        int64_t at = -1;
        const gb::trained_coder resumed = gb::train_coder(x.data(), y.data(), 3000, 10, 10, o, dir + "/b" + tag, {}, &at);
        EXPECT_EQ(at, 60) << tag;
        EXPECT_EQ(resumed.s.W_enc, straight.s.W_enc) << tag;
        EXPECT_EQ(resumed.s.b_enc, straight.s.b_enc) << tag;
        EXPECT_EQ(resumed.s.W_dec, straight.s.W_dec) << tag;
        EXPECT_EQ(resumed.s.b_dec, straight.s.b_dec) << tag;
        EXPECT_EQ(resumed.skip, straight.skip) << tag;
        EXPECT_EQ(resumed.s.threshold, straight.s.threshold) << tag;
        EXPECT_EQ(resumed.s.threshold.empty(), !jumprelu) << tag;
    }
    // a JumpReLU state is not a TopK one: the same folder with --k starts afresh
    o.k = 3, o.jumprelu = false, o.steps = 60;
    int64_t topk_at = -1;
    gb::train_coder(x.data(), y.data(), 3000, 10, 10, o, dir + "/bjumprelu", {}, &topk_at);
    EXPECT_EQ(topk_at, 0);
    // an SAE's state is not a transcoder's: the same options on y = x start afresh
    o.skip = false;
    int64_t sae_at = -1;
    gb::train_coder(x.data(), x.data(), 3000, 10, 10, o, dir + "/btopk", {}, &sae_at);
    EXPECT_EQ(sae_at, 0);
}

TEST(TranscoderTrain, CliWritesASetThatReadsBackAndGraphs) {
    const std::string dir = test_temp_dir("tct-cli");
    for (const char* fam : {"gpt2", "llama"}) {
        std::string model_dir;
        int L = 2, d = 16;
        if (std::string(fam) == "gpt2") {
            tiny_spec spec;
            spec.n_layer = 2, spec.d_model = 16;
            model_dir = write_tiny_gpt2(dir + "/gpt2", spec).dir;
        } else {
            family_spec s;
            s.family = "llama";
            s.n_layer = 2, s.d_model = 16, s.n_head = 4, s.n_kv_head = 2, s.d_ff = 24, s.vocab = 300;
            model_dir = write_tiny_family(dir + "/llama", s).hf_dir;
        }
        std::ofstream(dir + "/corpus.txt") << corpus_text << corpus_text;
        const std::string out = dir + "/tc-" + fam;
        const std::string base = "train-transcoder --model " + model_dir + " --corpus " + dir + "/corpus.txt --features 32 --k 4 "
                                 "--batch 32 --skip --out " + out + " --json " + dir + "/t.json";
        command_result r = run_cli(base + " --steps 30");
        ASSERT_EQ(r.code, 0) << r.err << r.out;
        EXPECT_NE(r.out.find("L1: held-out explained"), std::string::npos) << r.out;
        r = run_cli(base + " --steps 60");
        ASSERT_EQ(r.code, 0) << r.err << r.out;
        EXPECT_NE(r.out.find("resumed at step 30"), std::string::npos) << r.out;
        const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/t.json"));
        ASSERT_EQ(j["layers"].size(), 2u);
        EXPECT_EQ(j["layers"][0]["resumed_at"], 30);
        EXPECT_TRUE(j["layers"][1]["heldout_explained"].is_number());
        const gb::transcoder_set t = gb::read_transcoders(out);
        EXPECT_EQ(t.n_layer, L);
        EXPECT_EQ(t.d_model, d);
        EXPECT_EQ(t.d_tc, 32);
        EXPECT_EQ(t.arch, gb::SAE_TOPK);
        EXPECT_EQ(t.k, 4);
        EXPECT_TRUE(t.input_normed);
        EXPECT_FALSE(t.cross_layer);
        EXPECT_TRUE(t.has_skip());
        EXPECT_FALSE(t.model_name.empty());
        r = run_cli("graph --model " + model_dir + " --transcoders " + out + " --prompt 'the cat sat on the' --json " + dir + "/g.json");
        ASSERT_EQ(r.code, 0) << r.err << r.out;
        const nlohmann::json g = nlohmann::json::parse(read_file(dir + "/g.json"));
        EXPECT_GT(g["n_active_features"].get<int>(), 0);
        EXPECT_GE(g["replacement_score"].get<double>(), 0.0);
        EXPECT_LE(g["replacement_score"].get<double>(), 1.0);
    }
    // --layers: the others are written empty
    tiny_spec spec;
    spec.n_layer = 2, spec.d_model = 16;
    const std::string model_dir = dir + "/gpt2";
    command_result r = run_cli("train-transcoder --model " + model_dir + " --corpus " + dir + "/corpus.txt --features 16 --l1 0.01 "
                               "--steps 10 --batch 16 --layers 1 --out " + dir + "/one");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("1 left empty"), std::string::npos) << r.out;
    const gb::transcoder_set one = gb::read_transcoders(dir + "/one");
    EXPECT_EQ(one.arch, gb::SAE_RELU);
    EXPECT_EQ(*std::max_element(one.layers[0].W_enc.begin(), one.layers[0].W_enc.end()), 0.0f);
    EXPECT_NE(*std::max_element(one.layers[1].W_enc.begin(), one.layers[1].W_enc.end()), 0.0f);
    // JumpReLU: the learnt thresholds are written (the empty layer's too), config.yaml says jump_relu, and graph
    // runs on the set (it once crashed: read_active_transcoders dropped the thresholds of a layer where nothing fired)
    r = run_cli("train-transcoder --model " + model_dir + " --corpus " + dir + "/corpus.txt --features 16 --l0 0.001 "
                "--bandwidth 0.2 --threshold 0.1 --steps 40 --batch 16 --layers 1 --out " + dir + "/jump --json " +
                dir + "/j.json");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("JumpReLU + L0 0.001"), std::string::npos) << r.out;
    EXPECT_NE(read_file(dir + "/jump/config.yaml").find("activation_function: jump_relu"), std::string::npos);
    const gb::transcoder_set jump = gb::read_transcoders(dir + "/jump");
    EXPECT_EQ(jump.arch, gb::SAE_JUMPRELU);
    ASSERT_EQ(jump.layers[0].threshold.size(), 16u);
    ASSERT_EQ(jump.layers[1].threshold.size(), 16u);
    int moved = 0;
    for (float th : jump.layers[1].threshold) moved += std::abs(th - 0.1f) > 1e-4f;
    EXPECT_GT(moved, 0) << "no threshold was learnt";
    const nlohmann::json jj = nlohmann::json::parse(read_file(dir + "/j.json"));
    EXPECT_EQ(jj["jumprelu"], true);
    EXPECT_NEAR(jj["l0"].get<double>(), 0.001, 1e-9);
    r = run_cli("graph --model " + model_dir + " --transcoders " + dir + "/jump --prompt 'the cat sat on the' --json " +
                dir + "/gj.json");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
}

TEST(TranscoderTrain, CliErrorsAreOneLine) {
    const std::string dir = test_temp_dir("tct-errors");
    tiny_spec spec;
    spec.n_layer = 2, spec.d_model = 16;
    const std::string model_dir = write_tiny_gpt2(dir + "/model", spec).dir;
    encoder_spec es;
    const std::string enc_dir = write_tiny_encoder(dir + "/bert", es).dir;
    std::ofstream(dir + "/corpus.txt") << corpus_text;
    std::ofstream(dir + "/bad.txt", std::ios::binary) << "the cat \xff\xfe sat";
    struct bad { std::string args, needle; };
    const std::string ok = " --corpus " + dir + "/corpus.txt --out " + dir + "/o --steps 2";
    for (const bad& b : {bad{"--model " + model_dir + " --corpus " + dir + "/missing.txt --out " + dir + "/o", "cannot open"},
                         bad{"--model " + model_dir + " --corpus " + dir + "/bad.txt --out " + dir + "/o", "not valid UTF-8 (byte 8)"},
                         bad{"--model " + enc_dir + ok, "is a masked-language-model encoder"},
                         bad{"--model " + model_dir + ok + " --k 2 --l1 0.1", "give one of"},
                         bad{"--model " + model_dir + ok + " --k 2 --l0 0.1", "give one of"},
                         bad{"--model " + model_dir + ok + " --bandwidth 0.1", "--l0"},
                         bad{"--model " + model_dir + ok + " --l0 0.1 --threshold 0", "--threshold"},
                         bad{"--model " + model_dir + ok + " --layers 0,7", "--layers"},
                         bad{"--model " + model_dir + ok + " --features 4 --k 9", "--k"},
                         bad{"--model " + model_dir + " --out " + dir + "/o", "--corpus"}}) {
        const command_result r = run_cli("train-transcoder " + b.args);
        EXPECT_NE(r.code, 0) << b.args;
        EXPECT_EQ(lines(r.err), 1) << b.args << "\n" << r.err;
        EXPECT_NE(r.err.find(b.needle), std::string::npos) << b.args << "\n" << r.err;
    }
    const command_result h = run_cli("train-transcoder --help");
    EXPECT_EQ(h.code, 0);
    EXPECT_NE(h.out.find("--skip"), std::string::npos) << h.out;
}

// The set shipped with the default model (assets/transcoders/glassbox-tiny-en, docs/graphs.md "On the default
// model"): it reads back as trained, and the Eiffel graph on the default model keeps the scores documented there.
TEST(TranscoderTrain, ShippedSetGraphsTheDefaultModel) {
    const std::string dir = std::string(GLASSBOX_SOURCE_DIR) + "/assets/transcoders/glassbox-tiny-en";
    const gb::transcoder_set t = gb::read_transcoders(dir);
    EXPECT_EQ(t.model_name, "glassbox-tiny-en");
    EXPECT_EQ(t.n_layer, 6);
    EXPECT_EQ(t.d_model, 256);
    EXPECT_EQ(t.d_tc, 1024);
    EXPECT_EQ(t.arch, gb::SAE_TOPK);
    EXPECT_EQ(t.k, 32);
    EXPECT_TRUE(t.has_skip());
    const nlohmann::json info = nlohmann::json::parse(read_file(dir + "/train.json"));
    ASSERT_EQ(info["layers"].size(), 6u);
    for (const auto& l : info["layers"]) EXPECT_GT(l["heldout_explained"].get<double>(), 0.75) << l["layer"];
    const std::string out = test_temp_dir("tct-shipped");
    const command_result r = run_cli("graph --transcoders " + dir + " --prompt 'The Eiffel Tower is in the city of' --json " + out + "/g.json");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    const nlohmann::json g = nlohmann::json::parse(read_file(out + "/g.json"));
    EXPECT_EQ(g["logits"][0]["text"], " Paris");
    EXPECT_NEAR(g["replacement_score"].get<double>(), 0.772, 0.01);
    EXPECT_NEAR(g["completeness_score"].get<double>(), 0.931, 0.01);
    // without --transcoders the default model takes its own set (and prints its path); another model is asked for one
    const command_result d = run_cli("graph --prompt 'The Eiffel Tower is in the city of' --json " + out + "/d.json");
    ASSERT_EQ(d.code, 0) << d.err << d.out;
    const nlohmann::json dg = nlohmann::json::parse(read_file(out + "/d.json"));
    EXPECT_EQ(std::filesystem::weakly_canonical(dg["transcoders"].get<std::string>()), std::filesystem::weakly_canonical(dir));
    EXPECT_EQ(dg["replacement_score"], g["replacement_score"]);
    const command_result other = run_cli("graph " + cli_test_model_arg() + " --prompt 'the cat'");
    EXPECT_EQ(other.code, 2) << other.err;
    EXPECT_NE(other.err.find("--transcoders"), std::string::npos) << other.err;
}
