// Training a sparse autoencoder on activations (no Python): TopK or ReLU + L1, Adam, decoder rows kept at unit
// norm, dead features resampled from badly reconstructed inputs, progress after every few steps, and a state file
// the training resumes from. The result is a plain sae (core/io/sae.h) that write_sae_saelens writes in
// SAELens's format.
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
};

struct sae_train_progress {
    int64_t step = 0, steps = 0;
    double loss = 0;          // the batch's mean over rows of Σ_d (x - x̂)² (plus the L1 term)
    double explained = 0;     // 1 - FVU of the batch (Σ (x - x̂)² over Σ (x - x̄)², x̄ its mean)
    double dead_fraction = 0; // features that have not fired for dead_after steps
    int resampled = 0;        // features resampled at this report so far
};

// Trains on x [n][d] (each row one position's activation). state_path: read first when it holds a training of
// the same shape and options (resuming where it stopped), and written as the options say ("" : no state file).
// progress (may be empty) after every report_every steps. The result's hooks and model name are left for the caller.
sae train_sae(const float* x, int64_t n, int d, const sae_train_options& o, const std::string& state_path,
              const std::function<void(const sae_train_progress&)>& progress, int64_t* resumed_at = nullptr);

// The hook names, layer and model name of an SAE trained on model m's point p of layer (for cfg.json).
void name_trained_sae(sae& s, const model& m, hook_point p, int layer);

// 1 - FVU of s on x [n][d] taken as one set: Σ (x - x̂)² over Σ (x - x̄)², x̄ the mean of x over its n rows (the
// explained variance on held-out activations; computed in chunks, in double).
double sae_explained(const sae& s, const float* x, int64_t n);

// The activations at point p of layer for text cut into windows of `window` tokens (at most max_rows rows).
std::vector<float> collect_activations(const model& m, hook_point p, int layer, const std::string& text, int window,
                                       int64_t max_rows, bool bos);

} // namespace gb
