#include "analysis/rollout.h"

#include <algorithm>

#include "util/error.h"

namespace gb {

std::vector<float> attention_rollout(const record& r, int up_to) {
    const int T = r.n_tokens, H = r.n_head;
    if (up_to < 0 || up_to >= r.n_layer) up_to = r.n_layer - 1;
    std::vector<double> roll((size_t)T * T, 0.0), a((size_t)T * T), next((size_t)T * T);
    for (int i = 0; i < T; i++) roll[(size_t)i * T + i] = 1.0;
    for (int l = 0; l <= up_to; l++) {
        if (!r.has_layer(l)) throw error("attention rollout: the run did not keep layer " + std::to_string(l) + "'s pattern");
        // A' = (mean over heads + I) / 2, its rows renormalised (a causal or windowed pattern's rows already sum to 1)
        std::fill(a.begin(), a.end(), 0.0);
        for (int h = 0; h < H; h++) {
            const float* p = r.head(l, h);
            for (size_t i = 0; i < a.size(); i++) a[i] += p[i];
        }
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) sum += a[(size_t)i * T + j] = 0.5 * a[(size_t)i * T + j] / H + (i == j ? 0.5 : 0.0);
            for (int j = 0; j < T; j++) a[(size_t)i * T + j] /= sum;
        }
        // R <- A' R, row by row: each row of R added in with its weight (contiguous, vectorised inner loop)
        std::fill(next.begin(), next.end(), 0.0);
        for (int i = 0; i < T; i++) {
            double* out = &next[(size_t)i * T];
            for (int k = 0; k < T; k++) {
                const double w = a[(size_t)i * T + k];
                const double* src = &roll[(size_t)k * T];
                for (int j = 0; j < T; j++) out[j] += w * src[j];
            }
        }
        roll.swap(next);
    }
    return std::vector<float>(roll.begin(), roll.end());
}

} // namespace gb
