// Training a sparse autoencoder or a transcoder on activations (no Python): TopK, ReLU + L1 or JumpReLU + L0
// (thresholds learnt through straight-through pseudo-derivatives, Rajamanoharan et al. 2024), Adam, decoder rows
// kept at unit norm, dead features resampled from badly reconstructed inputs, progress after every few steps, and
// a state file the training resumes from. One trainer: it learns x [n][d_in] -> y [n][d_out]; an SAE is y = x
// (the SAE subtracts b_dec from its input), a transcoder reads one point and writes another (mlp_in -> mlp_out,
// core/analysis/transcoder_train.h), optionally with a linear skip. The result is a plain sae (core/io/sae.h)
// that write_sae_saelens writes in SAELens's format.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/features.h"
#include "io/sae.h"

namespace gb {

struct sae_train_options {
    int d_sae = 0;
    int k = 0;            // > 0: TopK with this k
    float l1 = 0;         // k == 0: ReLU with this L1 coefficient on the activations (decoder rows are unit norm)
    float lr = 1e-3f;
    int batch = 256;
    int64_t steps = 2000;
    uint32_t seed = 0;
    int dead_after = 500; // steps without firing after which a feature is resampled (0: never)
    int report_every = 50; // progress after every this many steps (and the last)
    int save_every = 500;  // the state file after every this many steps (and the last); 0: only the last
    bool skip = false;     // transcoders only: a linear skip, y ≈ f W_dec + b_dec + x W_skip
    // JumpReLU (k == 0, l1 == 0): f = pre where pre > θ, a θ per feature learnt as log θ; the loss adds l0 times
    // the number of active features, whose derivative (zero almost everywhere) is replaced by the rectangle-kernel
    // pseudo-derivative of width `bandwidth` around θ, as is a's with respect to θ.
    bool jumprelu = false;
    float l0 = 0;             // the L0 coefficient (in the loss's units: squared error per row)
    float bandwidth = 0;      // the kernel's width ε, in the pre-activations' units (0: σ/5)
    float threshold = 0;      // θ's starting value, and a resampled feature's (0: σ)
    // σ: the RMS of the encoder's input entries over the first 8,192 rows, the spread of a fresh feature's
    // pre-activation (its encoder row is a random unit direction)
};

// JumpReLU's pseudo-gradient of the batch loss (Σ_b ||y_b - ŷ_b||² / B + l0 Σ_b L0_b / B) with respect to each
// feature's log θ, into g [F]: with K = 1 where |pre - θ| < ε/2, else 0,
//   d/dθ = Σ_b K · (dl_da[b][i] · (-θ/ε) - l0 / (B ε)),   d/d log θ = θ · d/dθ.
// pre [B][F] the pre-activations, dl_da [B][F] the loss's derivative with respect to each activation, theta [F].
void jumprelu_log_threshold_grad(float* g, const float* pre, const float* dl_da, const float* theta, int B, int F,
                                 float l0, float bandwidth);

// "TopK k 32", "ReLU + L1 0.001" or "JumpReLU + L0 0.01": the coder o trains, as progress lines name it.
std::string coder_name(const sae_train_options& o);

struct sae_train_progress {
    int64_t step = 0, steps = 0;
    double loss = 0;          // the batch's mean over rows of Σ_d (y - ŷ)² (plus the L1 term); an SAE's y is x
    double explained = 0;     // 1 - FVU of the batch (Σ (y - ŷ)² over Σ (y - ȳ)², ȳ its mean)
    double active = 0;        // features active a row (L0), the batch's mean
    double dead_fraction = 0; // features that have not fired for dead_after steps
    int resampled = 0;        // features resampled at this report so far
};

// What train_coder learns: the coder (s.d_in, s.d_out; s.transcoder when y is not x) and, with o.skip, the skip.
struct trained_coder {
    sae s;
    std::vector<float> skip; // [d_in][d_out] ŷ += x skip; empty without o.skip
};

// Trains ŷ = f(x) W_dec + b_dec (+ x skip) to predict y [n][d_out] from x [n][d_in] (row r of each: one position).
// y == x (the same pointer, d_in == d_out): an SAE, whose encoder reads x - b_dec; otherwise a transcoder, whose
// encoder reads x itself. state_path and progress as train_sae's.
trained_coder train_coder(const float* x, const float* y, int64_t n, int d_in, int d_out, const sae_train_options& o,
                          const std::string& state_path, const std::function<void(const sae_train_progress&)>& progress,
                          int64_t* resumed_at = nullptr);

// An SAE: train_coder with y = x. Trains on x [n][d] (each row one position's activation). state_path: read first
// when it holds a training of the same shape and options (resuming where it stopped), and written as the options
// say ("" : no state file). progress (may be empty) after every report_every steps. The result's hooks and model
// name are left for the caller.
sae train_sae(const float* x, int64_t n, int d, const sae_train_options& o, const std::string& state_path,
              const std::function<void(const sae_train_progress&)>& progress, int64_t* resumed_at = nullptr);

// The hook names, layer and model name of an SAE trained on model m's point p of layer (for cfg.json).
void name_trained_sae(sae& s, const model& m, hook_point p, int layer);

// 1 - FVU of s on x [n][d] taken as one set: Σ (x - x̂)² over Σ (x - x̄)², x̄ the mean of x over its n rows (the
// explained variance on held-out activations; computed in chunks, in double).
double sae_explained(const sae& s, const float* x, int64_t n);
// The same for a coder from x [n][d_in] to y [n][d_out] with an optional skip [d_in][d_out] (sae_explained is y = x).
double coder_explained(const sae& s, const std::vector<float>& skip, const float* x, const float* y, int64_t n);

// The activations at point p of layer for text cut into windows of `window` tokens (at most max_rows rows).
std::vector<float> collect_activations(const model& m, hook_point p, int layer, const std::string& text, int window,
                                       int64_t max_rows, bool bos);

} // namespace gb
