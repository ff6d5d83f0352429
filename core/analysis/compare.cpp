// Probabilities, top-k and KL divergence of next-token distributions.
#include "compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gb {

float clean_logits(std::vector<float>& out, const float* logits, int vocab) {
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

void log_softmax(std::vector<double>& out, const float* logits, int V) {
    double mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = std::max(mx, (double)logits[v]);
    double sum = 0;
    for (int v = 0; v < V; v++) sum += std::exp((double)logits[v] - mx);
    const double lse = mx + std::log(sum);
    out.resize(V);
    for (int v = 0; v < V; v++) out[v] = (double)logits[v] - lse;
}

double kl_divergence(const float* p_logits, const float* q_logits, int V) {
    std::vector<double> lp, lq;
    log_softmax(lp, p_logits, V);
    log_softmax(lq, q_logits, V);
    double kl = 0;
    for (int v = 0; v < V; v++)
        if (std::isfinite(lp[v])) kl += std::exp(lp[v]) * (lp[v] - lq[v]);
    return std::isfinite(kl) ? std::max(0.0, kl) : kl;
}

} // namespace gb
