// SAE training: activations collected from the model, then Adam steps on x ≈ f(x) W_dec + b_dec with the
// gradients written out by hand (they are short), a resumable state file.
#include "analysis/sae_train.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "run/forward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gb {
namespace {

using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using vec = Eigen::RowVectorXf;
using mmap = Eigen::Map<mat>;
using vmap = Eigen::Map<vec>;

// The weights, Adam's moments for each (W_enc, b_enc, W_dec, b_dec, skip) and when each feature last fired.
struct trainer {
    sae s;
    std::vector<float> skip;         // [d_in][d_out] empty without o.skip
    std::vector<float> log_theta;    // [d_sae] JumpReLU's log θ; empty otherwise
    float theta0 = 0, bandwidth = 0; // JumpReLU: θ's start and the kernel's width, as given or from the data
    bool same = true;                // y is x: an SAE
    std::vector<float> m[6], v[6];
    int64_t step = 0;
    int resampled = 0;
    std::vector<int64_t> last_fired; // [d_sae] the last step (counted from 1) it fired in; 0: never
    static constexpr int n_slots = 6;
    // slot i holds a parameter in this training (the skip and log θ are optional)
    bool has(int i) const { return i < 4 || (i == 4 ? !skip.empty() : !log_theta.empty()); }
    std::vector<float>* param(int i) {
        return i == 0 ? &s.W_enc : i == 1 ? &s.b_enc : i == 2 ? &s.W_dec : i == 3 ? &s.b_dec
                                                                            : i == 4 ? &skip : &log_theta;
    }
};

// The state file's first bytes: an SAE's (as before transcoders came) or a transcoder's (whose signature is longer).
const char sae_magic[] = "GBSAETRAIN1", transcoder_magic[] = "GBTCTRAIN01";
static_assert(sizeof sae_magic == sizeof transcoder_magic, "one length");
const char* state_magic(const trainer& t) { return t.same ? sae_magic : transcoder_magic; }

// What a state file must agree on to be resumed (an SAE's as before transcoders came).
std::vector<double> signature(const trainer& t, const sae_train_options& o) {
    std::vector<double> sig = {(double)t.s.d_in, (double)o.d_sae, (double)o.k, (double)o.l1, (double)o.lr, (double)o.batch, (double)o.seed, (double)o.dead_after};
    if (!t.same) sig.insert(sig.end(), {(double)t.s.d_out, (double)o.skip, 1.0});
    if (o.jumprelu) sig.insert(sig.end(), {2.0, (double)o.l0, (double)o.bandwidth, (double)o.threshold});
    return sig;
}

void save_state(trainer& t, const sae_train_options& o, const std::string& path) {
    std::ofstream f(path + ".tmp", std::ios::binary);
    auto arr = [&](const std::vector<float>& a) { f.write((const char*)a.data(), (std::streamsize)(a.size() * 4)); };
    f.write(state_magic(t), sizeof sae_magic);
    const std::vector<double> sig = signature(t, o);
    f.write((const char*)sig.data(), (std::streamsize)(sig.size() * 8));
    f.write((const char*)&t.step, 8);
    f.write((const char*)&t.resampled, 4);
    for (int i = 0; i < trainer::n_slots; i++)
        if (t.has(i)) arr(*t.param(i)), arr(t.m[i]), arr(t.v[i]);
    f.write((const char*)t.last_fired.data(), (std::streamsize)(t.last_fired.size() * 8));
    f.close();
    if (!f) throw error("cannot write " + path);
    std::filesystem::rename(path + ".tmp", path);
}

bool load_state(trainer& t, const sae_train_options& o, const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    char magic[sizeof sae_magic];
    if (!f.read(magic, sizeof magic) || std::memcmp(magic, state_magic(t), sizeof magic) != 0) return false;
    std::vector<double> sig(signature(t, o).size());
    if (!f.read((char*)sig.data(), (std::streamsize)(sig.size() * 8)) || sig != signature(t, o)) return false;
    f.read((char*)&t.step, 8);
    f.read((char*)&t.resampled, 4);
    auto arr = [&](std::vector<float>& a) { f.read((char*)a.data(), (std::streamsize)(a.size() * 4)); };
    for (int i = 0; i < trainer::n_slots; i++)
        if (t.has(i)) arr(*t.param(i)), arr(t.m[i]), arr(t.v[i]);
    f.read((char*)t.last_fired.data(), (std::streamsize)(t.last_fired.size() * 8));
    if (!t.log_theta.empty())
        for (int i = 0; i < t.s.d_sae; i++) t.s.threshold[i] = std::exp(t.log_theta[i]);
    return (bool)f;
}

// Random unit rows [rows][cols].
void unit_rows(std::vector<float>& w, int rows, int cols, std::mt19937_64& rng) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    w.resize((size_t)rows * cols);
    for (int i = 0; i < rows; i++) {
        double norm = 0;
        for (int j = 0; j < cols; j++) norm += std::pow(w[(size_t)i * cols + j] = g(rng), 2);
        for (int j = 0; j < cols; j++) w[(size_t)i * cols + j] /= (float)std::sqrt(norm);
    }
}

void init(trainer& t, const float* x, const float* y, int64_t n, int d_in, int d_out, const sae_train_options& o) {
    sae& s = t.s;
    t.same = x == y;
    s.arch = o.k > 0 ? SAE_TOPK : o.jumprelu ? SAE_JUMPRELU : SAE_RELU;
    s.k = o.k;
    s.transcoder = !t.same;
    s.apply_b_dec_to_input = t.same; // a transcoder's b_dec lives in the output's space, not the input's
    s.d_in = d_in, s.d_out = d_out, s.d_sae = o.d_sae;
    std::mt19937_64 rng(o.seed);
    unit_rows(s.W_dec, o.d_sae, d_out, rng);
    std::vector<float> enc = s.W_dec; // an SAE's encoder starts as the decoder's transpose
    if (!t.same) unit_rows(enc, o.d_sae, d_in, rng); // a transcoder's reads another space: random unit directions
    s.W_enc.resize((size_t)d_in * o.d_sae);
    for (int i = 0; i < o.d_sae; i++)
        for (int j = 0; j < d_in; j++) s.W_enc[(size_t)j * o.d_sae + i] = enc[(size_t)i * d_in + j];
    s.b_enc.assign(o.d_sae, 0.0f);
    s.b_dec.assign(d_out, 0.0f); // the target's mean
    const int64_t rows = std::min<int64_t>(n, 8192);
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < d_out; j++) s.b_dec[j] += y[(size_t)r * d_out + j] / rows;
    t.skip.clear();
    if (o.skip) t.skip.assign((size_t)d_in * d_out, 0.0f);
    t.log_theta.clear();
    s.threshold.clear();
    if (o.jumprelu) {
        // "auto" (0): in units of σ, the RMS of the encoder's input entries over the same rows, about the spread of a
        // fresh feature's pre-activation (a random unit direction): θ starts at σ (a sixth of the features fire at
        // first), the kernel is σ/5 wide
        double ss = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int j = 0; j < d_in; j++) {
                const double v = x[(size_t)r * d_in + j] - (t.same ? s.b_dec[j] : 0.0f);
                ss += v * v;
            }
        const float sigma = (float)std::sqrt(ss / std::max<double>(1, (double)rows * d_in));
        t.theta0 = o.threshold > 0 ? o.threshold : std::max(sigma, 1e-6f);
        t.bandwidth = o.bandwidth > 0 ? o.bandwidth : std::max(sigma / 5, 1e-6f);
        t.log_theta.assign(o.d_sae, std::log(t.theta0)), s.threshold.assign(o.d_sae, t.theta0);
    }
    for (int i = 0; i < trainer::n_slots; i++)
        if (t.has(i)) t.m[i].assign(t.param(i)->size(), 0.0f), t.v[i].assign(t.param(i)->size(), 0.0f);
    t.last_fired.assign(o.d_sae, 0);
}

// Features that have not fired for dead_after steps get the direction of one of the batch's worst-predicted rows:
// decoder: the unit residual; encoder: an SAE's the same direction, a transcoder's that row's input direction,
// times the alive features' mean encoder norm / 5; b_enc 0, fresh moments.
void resample(trainer& t, const mat& X, const mat& err, const sae_train_options& o) {
    sae& s = t.s;
    const int di = s.d_in, dout = s.d_out, B = (int)err.rows();
    std::vector<int> dead;
    double alive_norm = 0;
    int alive = 0;
    for (int i = 0; i < s.d_sae; i++) {
        if (t.step - t.last_fired[i] > o.dead_after) dead.push_back(i);
        else {
            double nn = 0;
            for (int j = 0; j < di; j++) nn += std::pow(s.W_enc[(size_t)j * s.d_sae + i], 2);
            alive_norm += std::sqrt(nn), alive++;
        }
    }
    if (dead.empty()) return;
    const float scale = alive ? (float)(alive_norm / alive / 5) : 0.2f;
    std::vector<int> rows(B);
    for (int b = 0; b < B; b++) rows[b] = b;
    std::sort(rows.begin(), rows.end(), [&](int a, int c) { return err.row(a).squaredNorm() > err.row(c).squaredNorm(); });
    for (size_t k = 0; k < dead.size(); k++) {
        const int i = dead[k];
        vec dir = -err.row(rows[k % B]);
        const float nn = dir.norm();
        if (nn == 0) continue;
        dir /= nn;
        vec edir = dir;
        if (!t.same) {
            edir = X.row(rows[k % B]);
            const float en = edir.norm();
            if (en == 0) continue;
            edir /= en;
        }
        for (int j = 0; j < dout; j++) {
            s.W_dec[(size_t)i * dout + j] = dir[j];
            t.m[2][(size_t)i * dout + j] = t.v[2][(size_t)i * dout + j] = 0;
        }
        for (int j = 0; j < di; j++) {
            s.W_enc[(size_t)j * s.d_sae + i] = edir[j] * scale;
            t.m[0][(size_t)j * s.d_sae + i] = t.v[0][(size_t)j * s.d_sae + i] = 0;
        }
        s.b_enc[i] = 0, t.m[1][i] = t.v[1][i] = 0;
        if (!t.log_theta.empty()) {
            t.log_theta[i] = std::log(t.theta0), t.m[5][i] = t.v[5][i] = 0;
            s.threshold[i] = t.theta0;
        }
        t.last_fired[i] = t.step;
        t.resampled++;
    }
}

// One Adam step on a batch; returns the batch's progress numbers (not the dead fraction).
sae_train_progress step(trainer& t, const float* x, const float* y, int64_t n, const sae_train_options& o) {
    sae& s = t.s;
    const int di = s.d_in, dout = s.d_out, B = o.batch, F = s.d_sae;
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + (uint64_t)t.step); // the batch depends on the step alone
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    mat X(B, di), Y(B, dout); // [B][d_in], [B][d_out] (an SAE: Y = X)
    for (int b = 0; b < B; b++) {
        const int64_t r = pick(rng);
        X.row(b) = Eigen::Map<const vec>(x + (size_t)r * di, di);
        Y.row(b) = Eigen::Map<const vec>(y + (size_t)r * dout, dout);
    }
    mmap We(s.W_enc.data(), di, F), Wd(s.W_dec.data(), F, dout);
    vmap bd(s.b_dec.data(), dout);
    const mat Xin = t.same ? mat(X.rowwise() - bd) : X; // what the encoder reads
    std::vector<float> f;
    sae_encode(f, s, X.data(), B); // the architecture's activation (TopK, ReLU) on the same batch
    const mmap Fm(f.data(), B, F);
    mat Yhat = (Fm * Wd).rowwise() + bd;
    if (!t.skip.empty()) Yhat += X * mmap(t.skip.data(), di, dout);
    const mat E = Yhat - Y; // [B][d_out]
    sae_train_progress p;
    const mat centred = Y.rowwise() - Y.colwise().mean();
    p.loss = E.squaredNorm() / B + (o.jumprelu ? o.l0 * (double)(Fm.array() > 0).count() : o.l1 * Fm.sum()) / B;
    p.explained = 1.0 - E.squaredNorm() / std::max(1e-30, (double)centred.squaredNorm());
    p.active = (double)(Fm.array() > 0).count() / B;
    const mat G = E * (2.0f / B); // d loss / d ŷ
    std::vector<float> grad[trainer::n_slots];
    mat gWd = Fm.transpose() * G;
    for (int i = 0; i < F; i++) gWd.row(i) -= gWd.row(i).dot(Wd.row(i)) * Wd.row(i); // along the unit sphere
    mat dPre = G * Wd.transpose(); // d loss / d f
    if (o.jumprelu) { // θ's pseudo-gradient from d loss / d f at the pre-activations, before the gate below
        const mat Pre = (Xin * We).rowwise() + vmap(s.b_enc.data(), F);
        grad[5].resize(F);
        jumprelu_log_threshold_grad(grad[5].data(), Pre.data(), dPre.data(), s.threshold.data(), B, F, o.l0,
                                    t.bandwidth);
    } else if (o.k == 0) {
        dPre.array() += o.l1 / B;
    }
    for (int b = 0; b < B; b++)
        for (int i = 0; i < F; i++)
            if (Fm(b, i) <= 0) dPre(b, i) = 0;
            else t.last_fired[i] = t.step + 1; // the number of the step this is
    const mat gWe = Xin.transpose() * dPre;
    const vec gbe = dPre.colwise().sum();
    vec gbd = G.colwise().sum();
    if (t.same) gbd -= (We * gbe.transpose()).transpose(); // b_dec is also subtracted from the SAE's input
    grad[0].assign(gWe.data(), gWe.data() + gWe.size());
    grad[1].assign(gbe.data(), gbe.data() + gbe.size());
    grad[2].assign(gWd.data(), gWd.data() + gWd.size());
    grad[3].assign(gbd.data(), gbd.data() + gbd.size());
    if (!t.skip.empty()) {
        const mat gS = X.transpose() * G; // [d_in][d_out]
        grad[4].assign(gS.data(), gS.data() + gS.size());
    }
    t.step++;
    const double c1 = 1 - std::pow(0.9, (double)t.step), c2 = 1 - std::pow(0.999, (double)t.step);
    for (int k = 0; k < trainer::n_slots; k++) {
        if (!t.has(k)) continue;
        std::vector<float>& w = *t.param(k);
        for (size_t i = 0; i < w.size(); i++) {
            t.m[k][i] = 0.9f * t.m[k][i] + 0.1f * grad[k][i];
            t.v[k][i] = 0.999f * t.v[k][i] + 0.001f * grad[k][i] * grad[k][i];
            w[i] -= (float)(o.lr * (t.m[k][i] / c1) / (std::sqrt(t.v[k][i] / c2) + 1e-8));
        }
    }
    for (int i = 0; i < F; i++) Wd.row(i).normalize();
    if (o.jumprelu)
        for (int i = 0; i < F; i++) s.threshold[i] = std::exp(t.log_theta[i]);
    if (o.dead_after > 0 && t.step % std::max(1, o.dead_after / 2) == 0 && t.step >= o.dead_after) resample(t, X, E, o);
    return p;
}

} // namespace

std::string coder_name(const sae_train_options& o) {
    char buf[64];
    if (o.k > 0) std::snprintf(buf, sizeof buf, "TopK k %d", o.k);
    else if (o.jumprelu) std::snprintf(buf, sizeof buf, "JumpReLU + L0 %g", o.l0);
    else std::snprintf(buf, sizeof buf, "ReLU + L1 %g", o.l1);
    return buf;
}

void jumprelu_log_threshold_grad(float* g, const float* pre, const float* dl_da, const float* theta, int B, int F,
                                 float l0, float bandwidth) {
    const double eps = bandwidth;
    for (int i = 0; i < F; i++) {
        const double th = theta[i];
        double d = 0;
        for (int b = 0; b < B; b++) {
            const double z = pre[(size_t)b * F + i];
            if (std::fabs(z - th) < eps / 2) d += dl_da[(size_t)b * F + i] * (-th / eps) - l0 / (B * eps);
        }
        g[i] = (float)(th * d);
    }
}

trained_coder train_coder(const float* x, const float* y, int64_t n, int d_in, int d_out, const sae_train_options& o,
                          const std::string& state_path, const std::function<void(const sae_train_progress&)>& progress,
                          int64_t* resumed_at) {
    const char* who = x == y ? "train-sae" : "train-transcoder";
    if (n < 1 || d_in < 1 || d_out < 1) throw error(std::string(who) + ": no activations to train on");
    if (x == y && d_in != d_out) throw error("train-sae: an SAE's input and output widths differ");
    if (x == y && o.skip) throw error("train-sae: a skip is for transcoders (an SAE's would learn the identity)");
    if (o.d_sae < 1 || o.batch < 1 || o.steps < 1 || !(o.lr > 0)) throw error(std::string(who) + ": features, batch, steps and lr must be positive");
    if (o.k > o.d_sae) throw error(std::string(who) + ": --k " + std::to_string(o.k) + " is more than --features " + std::to_string(o.d_sae));
    if (o.k == 0 && !(o.l1 >= 0)) throw error(std::string(who) + ": --l1 must be 0 or more");
    if (o.jumprelu && (o.k > 0 || o.l1 != 0))
        throw error(std::string(who) + ": JumpReLU takes --l0, not --k or --l1");
    if (o.jumprelu && !(o.l0 >= 0 && o.bandwidth >= 0 && o.threshold >= 0))
        throw error(std::string(who) + ": JumpReLU needs --l0, --bandwidth and --threshold of 0 or more");
    trainer t;
    init(t, x, y, n, d_in, d_out, o);
    if (!state_path.empty() && std::filesystem::exists(state_path) && !load_state(t, o, state_path)) {
        init(t, x, y, n, d_in, d_out, o); // another training's state: start afresh (it is overwritten)
        t.step = 0;
    }
    if (resumed_at) *resumed_at = t.step;
    // small products: one thread (OpenMP's threads would wait on each other, far longer than the work); restored after
    const int threads = Eigen::nbThreads();
    struct restore {
        int n;
        ~restore() { Eigen::setNbThreads(n); }
    } put_back{threads};
    if ((double)o.batch * o.d_sae * std::max(d_in, d_out) < 64.0 * 1024 * 1024) Eigen::setNbThreads(1);
    sae_train_progress sum;
    int in_sum = 0;
    while (t.step < o.steps) {
        const sae_train_progress p = step(t, x, y, n, o);
        sum.loss += p.loss, sum.explained += p.explained, sum.active += p.active, in_sum++;
        const bool last = t.step == o.steps;
        if (progress && (t.step % std::max(1, o.report_every) == 0 || last)) {
            sae_train_progress r;
            r.step = t.step, r.steps = o.steps, r.loss = sum.loss / in_sum, r.explained = sum.explained / in_sum;
            r.active = sum.active / in_sum;
            const int64_t window = o.dead_after > 0 ? o.dead_after : 1000;
            int dead = 0;
            for (int64_t lf : t.last_fired) dead += lf == 0 || t.step - lf >= window; // never fired, or not lately
            r.dead_fraction = (double)dead / o.d_sae;
            r.resampled = t.resampled;
            progress(r);
            sum = {}, in_sum = 0;
        }
        if (!state_path.empty() && ((o.save_every > 0 && t.step % o.save_every == 0) || last)) save_state(t, o, state_path);
    }
    return {t.s, t.skip};
}

sae train_sae(const float* x, int64_t n, int d, const sae_train_options& o, const std::string& state_path,
              const std::function<void(const sae_train_progress&)>& progress, int64_t* resumed_at) {
    return train_coder(x, x, n, d, d, o, state_path, progress, resumed_at).s;
}

double sae_explained(const sae& s, const float* x, int64_t n) { return coder_explained(s, {}, x, x, n); }

double coder_explained(const sae& s, const std::vector<float>& skip, const float* x, const float* y, int64_t n) {
    const int di = s.d_in, d = s.d_out;
    if (n <= 0) throw error("sae_explained: no activations");
    std::vector<double> mean(d, 0.0);
    for (int64_t r = 0; r < n; r++)
        for (int j = 0; j < d; j++) mean[j] += y[r * d + j];
    for (double& v : mean) v /= (double)n;
    double err = 0, var = 0;
    std::vector<float> f, yhat;
    const int chunk = 1024;
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
        const int rows = (int)std::min<int64_t>(chunk, n - r0);
        sae_encode(f, s, x + r0 * di, rows);
        sae_decode(yhat, s, f.data(), rows);
        if (!skip.empty()) {
            const Eigen::Map<const mat> X(x + r0 * di, rows, di), S(skip.data(), di, d);
            mmap(yhat.data(), rows, d) += X * S;
        }
        for (int64_t i = 0; i < (int64_t)rows * d; i++) {
            const double a = y[r0 * d + i], e = a - yhat[i], c = a - mean[i % d];
            err += e * e, var += c * c;
        }
    }
    return 1.0 - err / std::max(1e-30, var);
}

std::vector<float> collect_activations(const model& m, hook_point p, int layer, const std::string& text, int window,
                                       int64_t max_rows, bool bos) {
    if (layer < 0 || layer >= m.config.n_layer)
        throw error("train-sae: layer " + std::to_string(layer) + " is outside the model (0.." + std::to_string(m.config.n_layer - 1) + ")");
    if (window < 1 + (bos ? 1 : 0)) throw error("train-sae: a window of " + std::to_string(window) + " tokens holds no text");
    const std::vector<int> ids = encode(m.tok, text);
    if (ids.empty()) throw error("train-sae: the corpus holds no tokens");
    if (bos && m.tok.bos_id < 0) throw error("--bos: the model has no BOS token");
    const int body = bos ? window - 1 : window;
    forward_options opt;
    opt.keep.points = hook_bit(p);
    opt.keep.layers.assign(m.config.n_layer, 0);
    opt.keep.layers[layer] = 1;
    opt.keep.resid_norms = false;
    const int w = hook_width(p, m.config, 1);
    std::vector<float> out;
    for (size_t i = 0; i < ids.size() && (int64_t)(out.size() / w) < max_rows; i += body) {
        std::vector<int> c;
        if (bos) c.push_back(m.tok.bos_id);
        c.insert(c.end(), ids.begin() + i, ids.begin() + std::min(ids.size(), i + body));
        record rec;
        run_forward(rec, m, c, {}, opt);
        const float* a = rec.get(p, layer);
        const int from = bos ? 1 : 0; // the BOS position's activation is not the text's
        for (int t = from; t < rec.n_tokens && (int64_t)(out.size() / w) < max_rows; t++) out.insert(out.end(), a + (size_t)t * w, a + (size_t)(t + 1) * w);
    }
    return out;
}

void name_trained_sae(sae& s, const model& m, hook_point p, int layer) {
    s.hook_in = s.hook_out = hook_name(p);
    s.layer = layer;
    s.hook_name = "blocks." + std::to_string(layer) + ".hook_" + hook_name(p);
    s.model_name = std::filesystem::path(m.path.empty() ? "default" : m.path).filename().string();
}

} // namespace gb
