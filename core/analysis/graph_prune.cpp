// Influence, pruning and scores of an attribution graph (graph_prune.h), in double.
#include "analysis/graph_prune.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "util/error.h"

namespace gb {

std::vector<double> influence(const float* A, int N, const std::vector<double>& w, const std::vector<uint8_t>& keep,
                              std::vector<double>* div_out) {
    auto kept = [&](int i) { return keep.empty() || keep[i]; };
    std::vector<double> div(N, 0.0);
    for (int r = 0; r < N; r++) {
        if (!kept(r)) continue;
        const float* a = A + (size_t)r * N;
        double s = 0;
        for (int c = 0; c < N; c++)
            if (kept(c)) s += std::fabs((double)a[c]);
        div[r] = std::max(s, 1e-10);
    }
    std::vector<double> cur((size_t)N, 0.0), next((size_t)N), total((size_t)N, 0.0);
    auto step = [&](const std::vector<double>& x, std::vector<double>& y) { // y = x Â
        std::fill(y.begin(), y.end(), 0.0);
        for (int r = 0; r < N; r++) {
            if (x[r] == 0 || !kept(r)) continue;
            const double f = x[r] / div[r];
            const float* a = A + (size_t)r * N;
            if (keep.empty())
                for (int c = 0; c < N; c++) y[c] += f * std::fabs((double)a[c]);
            else
                for (int c = 0; c < N; c++)
                    if (keep[c]) y[c] += f * std::fabs((double)a[c]);
        }
    };
    step(w, cur);
    total = cur;
    for (int it = 0; std::any_of(cur.begin(), cur.end(), [](double v) { return v != 0; }); it++) {
        if (it >= 1000) throw error("attribution graph: influence did not converge after 1000 steps (the graph has a cycle)");
        step(cur, next);
        cur.swap(next);
        for (int i = 0; i < N; i++) total[i] += cur[i];
    }
    if (div_out) *div_out = std::move(div);
    return total;
}

double find_threshold(std::vector<double> scores, double threshold) {
    // scores are >= 0: the zeros add nothing to the running sum and the cut-off never falls on one
    double total = 0;
    for (double s : scores) total += s;
    scores.erase(std::remove_if(scores.begin(), scores.end(), [](double s) { return !(s > 0); }), scores.end());
    if (scores.empty()) return 0.0;
    std::sort(scores.begin(), scores.end(), std::greater<double>());
    double cum = 0;
    for (size_t i = 0; i < scores.size(); i++) {
        cum += scores[i];
        if (cum / total >= threshold) return scores[i];
    }
    return scores.back();
}

prune_result prune_graph(const float* A, const graph_layout& lay, const std::vector<float>& logit_probs,
                         double node_threshold, double edge_threshold) {
    if (!(node_threshold >= 0 && node_threshold <= 1)) throw error("node threshold must be between 0 and 1");
    if (!(edge_threshold >= 0 && edge_threshold <= 1)) throw error("edge threshold must be between 0 and 1");
    const int N = lay.n(), nf = lay.n_features, ne = lay.n_errors, nt = lay.n_tokens, nl = lay.n_logits;
    const int kept_from = N - nl - nt; // tokens and logits are always kept
    prune_result res;
    std::vector<double> w((size_t)N, 0.0);
    for (int i = 0; i < nl; i++) w[N - nl + i] = logit_probs[i];

    std::vector<double> div;
    res.node_influence = influence(A, N, w, {}, &div);
    res.node_cutoff = find_threshold(res.node_influence, node_threshold);
    res.node_mask.assign(N, 0);
    for (int i = 0; i < N; i++) res.node_mask[i] = i >= kept_from || res.node_influence[i] >= res.node_cutoff;

    // edge scores of the pruned matrix: |A| over the kept nodes, row-normalised, times the target's influence + weight
    std::vector<double> pdiv;
    std::vector<double> pinf = influence(A, N, w, res.node_mask, &pdiv);
    for (int i = 0; i < N; i++) pinf[i] += w[i];
    auto score = [&](int r, int c) {
        return res.node_mask[r] && res.node_mask[c] ? std::fabs((double)A[(size_t)r * N + c]) / pdiv[r] * pinf[r] : 0.0;
    };
    std::vector<double> positive;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            const double v = score(r, c);
            if (v > 0) positive.push_back(v);
        }
    res.edge_cutoff = find_threshold(std::move(positive), edge_threshold);
    res.edge_mask.assign((size_t)N * N, 0);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            const double v = score(r, c);
            res.edge_mask[(size_t)r * N + c] = v >= res.edge_cutoff;
        }

    auto update = [&] { // features and errors need an outgoing edge, features an incoming one
        std::vector<uint8_t> out_any(N, 0), in_any(N, 0);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < kept_from; c++)
                if (res.edge_mask[(size_t)r * N + c]) out_any[c] = 1, in_any[r] = 1;
        for (int r = 0; r < nf; r++)
            for (int c = kept_from; c < N && !in_any[r]; c++) in_any[r] |= res.edge_mask[(size_t)r * N + c];
        for (int c = 0; c < kept_from; c++) res.node_mask[c] &= out_any[c];
        for (int r = 0; r < nf; r++) res.node_mask[r] &= in_any[r];
    };
    std::vector<uint8_t> old = res.node_mask;
    update();
    while (old != res.node_mask) {
        old = res.node_mask;
        for (int r = 0; r < N; r++)
            for (int c = 0; c < N; c++)
                if (!res.node_mask[r] || !res.node_mask[c]) res.edge_mask[(size_t)r * N + c] = 0;
        update();
    }

    std::vector<int> order(N);
    for (int i = 0; i < N; i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return res.node_influence[a] > res.node_influence[b]; });
    double total = 0;
    for (double v : res.node_influence) total += v;
    res.cumulative_scores.assign(N, 0.0);
    double cum = 0;
    for (int i = 0; i < N; i++) {
        cum += res.node_influence[order[i]];
        res.cumulative_scores[order[i]] = cum / total;
    }

    double tok = 0, err = 0;
    for (int i = nf; i < nf + ne; i++) err += res.node_influence[i];
    for (int i = nf + ne; i < nf + ne + nt; i++) tok += res.node_influence[i];
    res.replacement_score = tok / (tok + err);
    double num = 0, den = 0;
    for (int r = 0; r < N; r++) {
        double e = 0;
        for (int c = nf; c < nf + ne; c++) e += std::fabs((double)A[(size_t)r * N + c]) / div[r];
        const double oi = res.node_influence[r] + w[r];
        num += (1 - e) * oi;
        den += oi;
    }
    res.completeness_score = num / den;
    return res;
}

} // namespace gb
