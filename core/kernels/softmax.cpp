// Probabilities, top-k and KL divergence of next-token distributions.
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/lanes.h"
#include "util/simd_math.h"

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

softmax_row softmax_stats(const float* lg, int V) {
    softmax_row s;
    avec mv = avec{} - INFINITY;
    int v = 0;
    for (; v + AL <= V; v += AL) {
        const avec x = *(const avec*)(lg + v);
        mv = x > mv ? x : mv; // NaN compares false: skipped
    }
    float mx = -INFINITY;
    for (int l = 0; l < AL; l++) mx = std::max(mx, mv[l]);
    for (; v < V; v++)
        if (lg[v] > mx) mx = lg[v];
    if (mx == INFINITY) {
        for (v = 0; v < V; v++) s.n_inf += lg[v] == INFINITY;
        return s;
    }
    if (mx == -INFINITY) return s; // all NaN or -inf: uniform
    s.mx = mx;
    avec acc = {};
    for (v = 0; v + AL <= V; v += AL) {
        const avec x = *(const avec*)(lg + v);
        const avec e = exp_lanes(x - mx);
        acc += x == x ? e : avec{}; // NaN lanes add nothing
    }
    for (int l = 0; l < AL; l++) s.sum += acc[l];
    for (; v < V; v++)
        if (!std::isnan(lg[v])) s.sum += std::exp((double)lg[v] - mx);
    return s;
}

float softmax_prob(const softmax_row& s, const float* lg, int V, int v) {
    if (s.n_inf) return lg[v] == INFINITY ? 1.0f / s.n_inf : 0.0f;
    if (s.sum > 0) return std::isnan(lg[v]) ? 0.0f : (float)(std::exp((double)lg[v] - s.mx) / s.sum);
    return 1.0f / V;
}

void top_k_ids(int* ids, const float* lg, int V, int k) {
    auto before = [&](int a, int b) { // a ranks before b
        const bool na = std::isnan(lg[a]), nb = std::isnan(lg[b]);
        if (na != nb) return nb;
        return lg[a] != lg[b] && !na ? lg[a] > lg[b] : a < b;
    };
    int n = 0;
    for (int v = 0; v < V && k > 0; v++) {
        if (n == k && !before(v, ids[k - 1])) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && before(v, ids[j - 1])) ids[j] = ids[j - 1], j--;
        ids[j] = v;
    }
}

void softmax_probs(std::vector<float>& probs, const float* logits, int vocab) {
    const softmax_row s = softmax_stats(logits, vocab);
    probs.resize(vocab);
    for (int v = 0; v < vocab; v++) probs[v] = softmax_prob(s, logits, vocab, v);
}

std::vector<token_prob> top_k_probs(const float* logits, int vocab, int k) {
    k = std::max(0, std::min(k, vocab));
    std::vector<int> ids(k);
    top_k_ids(ids.data(), logits, vocab, k);
    const softmax_row s = softmax_stats(logits, vocab);
    std::vector<token_prob> out;
    for (int id : ids) out.push_back({id, softmax_prob(s, logits, vocab, id)});
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
