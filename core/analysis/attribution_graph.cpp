// Attribution graphs: nodes, the rows of the adjacency by backward reads, and the choice of features by estimated
// influence when there are more than max_feature_nodes (attribution_graph.h).
#include "analysis/attribution_graph.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace gb {

void pick_logits(std::vector<int>& ids, std::vector<float>& probs, const float* logits, int V, int max_logits,
                 double logit_prob) {
    double mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = std::max(mx, (double)logits[v]);
    std::vector<double> p(V);
    double z = 0;
    for (int v = 0; v < V; v++) z += p[v] = std::exp((double)logits[v] - mx);
    for (double& x : p) x /= z;
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(max_logits, V);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    // the first index whose cumulative probability reaches logit_prob, plus one (all k when none does)
    double cum = 0;
    int cut = k;
    for (int i = 0; i < k; i++) {
        cum += (float)p[order[i]];
        if (cum >= logit_prob) {
            cut = i + 1;
            break;
        }
    }
    ids.assign(order.begin(), order.begin() + cut);
    probs.clear();
    for (int id : ids) probs.push_back((float)p[id]);
}

namespace {

// Influence of every column estimated from the rows computed so far (circuit-tracer's partial influences): the
// row-normalised |rows|, walked from the logits' probabilities through the rows' nodes, w Â + w Â² + ... rows
// [n][n_col]; row_node [n]: the column each row belongs to (logits: logit_col0 + i); row_layer [n]: its read's layer
// (logits: n_layer). A feature reads only writes from layers below its own, so walking the rows from the logits
// down by layer gives each row its node's whole influence before the row passes it on: one pass, not a power
// series of as many products as the graph is deep.
std::vector<double> partial_influence(const std::vector<float>& rows, int n, int n_col, const std::vector<int>& row_node,
                                      const std::vector<int>& row_layer, const std::vector<float>& logit_probs,
                                      int logit_col0) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row_layer[a] > row_layer[b]; });
    std::vector<double> infl(n_col + logit_probs.size(), 0.0);
    for (int r : order) {
        const int node = row_node[r];
        const double coef = infl[node] + (node >= logit_col0 ? (double)logit_probs[node - logit_col0] : 0.0);
        if (coef == 0) continue;
        const float* row = rows.data() + (size_t)r * n_col;
        double s = 0;
        for (int c = 0; c < n_col; c++) s += std::fabs(row[c]);
        const double w = coef / std::max(s, 1e-8);
        for (int c = 0; c < n_col; c++) infl[c] += w * std::fabs(row[c]);
    }
    return infl;
}

} // namespace

// The adjacency over the selected features (visited), in the rows' memory: each of the n_rows rows (row_node: its
// feature's active index, or n_src + i for logit i) renumbered to the graph's columns (every column of a row is a
// selected feature's, an error's or a token's), then moved to its target's place; g.features gets the selected ones.
static void rows_into_adjacency(attribution_graph& g, std::vector<float>& rows, const replacement& r,
                                const std::vector<uint8_t>& visited, const std::vector<int>& row_node, int n_rows, int n_src) {
    const int n_act = (int)r.active.size();
    std::vector<int> sel_rank(n_act, -1);
    for (int j = 0; j < n_act; j++)
        if (visited[j]) {
            sel_rank[j] = (int)g.features.size();
            g.features.push_back(r.active[j]);
        }
    const int n_sel = g.n_features(), N = g.n_nodes();
    std::vector<int> col_map(n_src);
    for (int j = 0; j < n_act; j++) col_map[j] = sel_rank[j];
    for (int c = n_act; c < n_src; c++) col_map[c] = c - n_act + n_sel;
    // row rr moves from rr * n_src to rr * N: forwards when N <= n_src, else backwards, so that no row is
    // overwritten before it is read
    std::vector<float> one(N);
    for (int i = 0; i < n_rows; i++) {
        const int rr = N <= n_src ? i : n_rows - 1 - i;
        const float* src = rows.data() + (size_t)rr * n_src;
        for (int c = 0; c < n_src; c++)
            if (col_map[c] >= 0) one[col_map[c]] = src[c];
        std::copy(one.begin(), one.end(), rows.begin() + (size_t)rr * N);
    }
    std::vector<int> target(n_rows);
    for (int rr = 0; rr < n_rows; rr++)
        target[rr] = row_node[rr] >= n_src ? g.logit_index(row_node[rr] - n_src) : sel_rank[row_node[rr]];
    std::vector<uint8_t> original(n_rows, 1), filled(N, 0); // slot rr still holds row rr; slot holds its final row
    std::vector<float> carry(N), next(N);
    auto slot = [&](int i) { return rows.data() + (size_t)i * N; };
    for (int start = 0; start < n_rows; start++) {
        if (!original[start]) continue;
        original[start] = 0;
        if (target[start] == start) {
            filled[start] = 1;
            continue;
        }
        std::copy_n(slot(start), N, carry.begin());
        for (int from = start;;) { // carry holds row `from`
            const int to = target[from];
            filled[to] = 1;
            if (to < n_rows && original[to]) {
                original[to] = 0;
                std::copy_n(slot(to), N, next.begin());
                std::copy_n(carry.begin(), N, slot(to));
                carry.swap(next);
                from = to;
            } else {
                std::copy_n(carry.begin(), N, slot(to));
                break;
            }
        }
    }
    for (int i = 0; i < N; i++)
        if (!filled[i]) std::fill_n(slot(i), N, 0.0f);
    rows.resize((size_t)N * N);
    g.adjacency = std::move(rows);
}

attribution_graph build_graph(const model& m, const transcoder_set& t, const std::vector<int>& tokens,
                              const graph_options& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    if (opt.progress) opt.progress("forward", 0, 1);
    const replacement r = build_replacement(m, t, tokens, opt.bos);
    const double forward_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    attribution_graph g = build_graph(m, t, r, opt);
    g.seconds_forward = forward_s;
    return g;
}

attribution_graph build_graph(const model& m, const transcoder_set& t, const replacement& r, const graph_options& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model, fp = r.first_pos;
    const int n_act = (int)r.active.size(), n_err = L * (T - fp);
    const int n_src = n_act + n_err + T;
    attribution_graph g;
    g.tokens = r.tokens;
    g.n_layer = L;
    g.first_pos = fp;
    g.n_active = n_act;
    pick_logits(g.logit_tokens, g.logit_probs, r.logits.data(), (int)r.logits.size(), opt.max_logits, opt.logit_prob);
    const int n_l = g.n_logits();

    std::vector<int> feature_src(n_act), error_src((size_t)L * T, -1), token_src(T);
    std::iota(feature_src.begin(), feature_src.end(), 0);
    for (int k = 0; k < L; k++)
        for (int p = fp; p < T; p++) error_src[(size_t)k * T + p] = n_act + k * (T - fp) + (p - fp);
    for (int p = 0; p < T; p++) token_src[p] = n_act + n_err + p;
    const source_writes w = gather_writes(m, r, t, feature_src, error_src, token_src, n_src);

    // logit reads: the demeaned unembedding rows at the last position
    std::vector<float> logit_vecs((size_t)n_l * d);
    std::vector<float> row(d);
    for (int i = 0; i < n_l; i++) {
        table_row(row.data(), m.weights.unembedding(), g.logit_tokens[i]);
        for (int j = 0; j < d; j++) logit_vecs[(size_t)i * d + j] = (float)(row[j] - r.unembed_mean[j]);
    }
    const int n_sel_max = std::min(std::max(opt.max_feature_nodes, 0), n_act);
    // rows [n_l + n_sel_max][n_src], later the adjacency [N][N] in the same memory (N <= n_max)
    const size_t n_max = (size_t)n_sel_max + n_err + T + n_l;
    std::vector<float> rows(std::max((size_t)(n_l + n_sel_max) * n_src, n_max * n_max), 0.0f);
    g.bytes_rows = rows.size() * sizeof(float);
    std::vector<int> row_node;  // per row: its column (features: active index; logits: n_src + i)
    std::vector<int> row_layer; // per row: its read's layer (logits: L)
    std::vector<graph_read> reads;
    for (int i = 0; i < n_l; i++) {
        reads.push_back({L, T - 1, logit_vecs.data() + (size_t)i * d});
        row_node.push_back(n_src + i);
        row_layer.push_back(L);
    }
    read_rows(rows.data(), m, r, w, reads, opt.batch, opt.cancelled);

    std::vector<uint8_t> visited(n_act, 0);
    int n_rows = n_l;
    auto run_features = [&](const std::vector<int>& ids) {
        for (size_t i = 0; i < ids.size(); i += (size_t)opt.batch * 4) {
            reads.clear();
            const size_t e = std::min(ids.size(), i + (size_t)opt.batch * 4);
            for (size_t j = i; j < e; j++) {
                const active_feature& a = r.active[ids[j]];
                reads.push_back({a.layer, a.pos, t.layers[a.layer].W_enc.data() + (size_t)a.index * d});
                row_node.push_back(ids[j]);
                row_layer.push_back(a.layer);
                visited[ids[j]] = 1;
            }
            read_rows(rows.data() + (size_t)n_rows * n_src, m, r, w, reads, opt.batch, opt.cancelled);
            n_rows += (int)reads.size();
            if (opt.progress) opt.progress("feature rows", n_rows - n_l, n_sel_max);
        }
    };
    if (n_sel_max == n_act) {
        std::vector<int> all(n_act);
        std::iota(all.begin(), all.end(), 0);
        run_features(all);
    } else {
        while (n_rows - n_l < n_sel_max) {
            const std::vector<double> infl = partial_influence(rows, n_rows, n_src, row_node, row_layer, g.logit_probs, n_src);
            std::vector<int> rank(n_act);
            std::iota(rank.begin(), rank.end(), 0);
            std::stable_sort(rank.begin(), rank.end(), [&](int a, int b) { return infl[a] > infl[b]; });
            const int want = std::min(4 * opt.batch, n_sel_max - (n_rows - n_l));
            std::vector<int> next;
            for (int j : rank) {
                if ((int)next.size() >= want) break;
                if (!visited[j]) next.push_back(j);
            }
            if (next.empty()) break;
            run_features(next);
        }
    }

    rows_into_adjacency(g, rows, r, visited, row_node, n_rows, n_src);
    g.seconds_rows = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return g;
}

std::vector<double> edge_head_loadings(const model& m, const transcoder_set& t, const replacement& r,
                                       const attribution_graph& g, int target, int source) {
    const int N = g.n_nodes(), L = r.n_layer, T = r.n_tokens, fp = r.first_pos, d = r.d_model;
    if (target < 0 || target >= N || source < 0 || source >= N)
        throw error("head loadings: node " + std::to_string(target < 0 || target >= N ? target : source) +
                    " is not in the graph (0.." + std::to_string(N - 1) + ")");
    if (target >= g.n_features() && target < g.logit_index(0))
        throw error("head loadings: node " + std::to_string(target) + " is an error or token node, which reads nothing");
    // sources numbered as g's nodes
    std::vector<int> feature_src(r.active.size(), -1), error_src((size_t)L * T, -1), token_src(T);
    for (size_t j = 0, i = 0; j < r.active.size() && i < g.features.size(); j++) {
        const active_feature& a = r.active[j];
        const active_feature& f = g.features[i];
        if (a.layer == f.layer && a.pos == f.pos && a.index == f.index) feature_src[j] = (int)i++;
    }
    for (int k = 0; k < L; k++)
        for (int p = fp; p < T; p++) error_src[(size_t)k * T + p] = g.error_index(k, p);
    for (int p = 0; p < T; p++) token_src[p] = g.token_index(p);
    const source_writes w = gather_writes(m, r, t, feature_src, error_src, token_src, N);
    std::vector<float> vec(d);
    graph_read read;
    if (target < g.n_features()) {
        const active_feature& f = g.features[target];
        std::copy_n(t.layers[f.layer].W_enc.data() + (size_t)f.index * d, d, vec.begin());
        read = {f.layer, f.pos, vec.data()};
    } else {
        std::vector<float> row(d);
        table_row(row.data(), m.weights.unembedding(), g.logit_tokens[target - g.logit_index(0)]);
        for (int j = 0; j < d; j++) vec[j] = (float)(row[j] - r.unembed_mean[j]);
        read = {L, T - 1, vec.data()};
    }
    return head_loadings(m, r, w, read, source);
}

} // namespace gb
