// Circuits by edge attribution patching, and their faithfulness (circuit.h).
#include "analysis/circuit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "analysis/gradients.h"
#include "analysis/patching.h"
#include "model/kind.h"
#include "run/backward.h"
#include "run/forward.h"
#include "util/error.h"

namespace gb {

const char* circuit_kind_name(circuit_node::kind_t k) {
    switch (k) {
    case circuit_node::EMBED: return "embed";
    case circuit_node::HEAD: return "head";
    case circuit_node::MLP: return "mlp";
    default: return "logits";
    }
}

// The nodes in circuit_result's order, scores 0
static std::vector<circuit_node> make_nodes(int L, int H) {
    std::vector<circuit_node> nodes;
    circuit_node n;
    n.id = "embed";
    nodes.push_back(n);
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < H; h++) {
            n.kind = circuit_node::HEAD, n.layer = l, n.head = h;
            n.id = "L" + std::to_string(l) + ".H" + std::to_string(h);
            nodes.push_back(n);
        }
        n.kind = circuit_node::MLP, n.layer = l, n.head = -1;
        n.id = "L" + std::to_string(l) + ".MLP";
        nodes.push_back(n);
    }
    n.kind = circuit_node::LOGITS, n.layer = -1, n.head = -1, n.id = "logits";
    nodes.push_back(n);
    return nodes;
}

// dst [T][d] = a - b for rows of width d taken `stride` floats apart from a and b
static void row_diff(float* dst, const float* a, const float* b, int T, int d, int stride) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < d; i++) dst[(size_t)t * d + i] = a[(size_t)t * stride + i] - b[(size_t)t * stride + i];
}

static double dot(const float* a, const float* b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// The first node that is not upstream of node v: nodes before it in the order feed v
static int upstream_end(const circuit_result& r, int v) {
    const circuit_node& n = r.nodes[v];
    if (n.kind == circuit_node::HEAD) return r.node_of_head(n.layer, 0);
    if (n.kind == circuit_node::MLP) return r.mlp_reads_layer_input ? r.node_of_head(n.layer, 0) : v;
    return v;
}

circuit_result circuit_scores(const model& m, const std::vector<int>& clean, const std::vector<int>& corrupt,
                              int target, int contrast, const ablation& ab) {
    const auto t0 = std::chrono::steady_clock::now();
    const model_config& c = m.config;
    check_patch_prompts(clean, corrupt, c);
    require(m, FEATURE_GRADIENTS);
    require(m, FEATURE_PATCHING); // its edges estimate patching one prompt into another of a decoder-only model
    metric_spec ms;
    ms.kind = contrast >= 0 ? metric_spec::LOGIT_DIFF : metric_spec::LOGIT;
    ms.target = target;
    ms.contrast = contrast;
    const uint32_t outputs = hook_bit(HOOK_HEAD_OUT) | hook_bit(HOOK_MLP_OUT) | hook_bit(HOOK_Z);
    record rc, rx;
    record_request keep;
    keep.points = outputs;
    keep.resid_stream = true;
    gradients g;
    corrupt_and_clean_runs(rc, rx, g, m, clean, corrupt, ms, ab, keep, true);
    const int L = c.n_layer, H = c.n_head, dh = c.d_head, d = c.d_model, T = (int)clean.size();
    const size_t Td = (size_t)T * d;
    circuit_result r;
    r.n_layer = L, r.n_head = H, r.n_tokens = T, r.d_model = d, r.d_head = dh, r.target = target, r.contrast = contrast;
    r.clean = metric_of_ids(rc.last_logits(), ms);
    r.corrupt = g.metric_value;
    r.mlp_reads_layer_input = g.mlp_reads_layer_input;
    r.nodes = make_nodes(L, H);
    const int N = (int)r.nodes.size();
    // each node's output difference [N - 1][T][d] and input gradient [N][T][d] (the embeddings read nothing)
    std::vector<float> delta((size_t)(N - 1) * Td), grad((size_t)N * Td, 0.0f);
    row_diff(delta.data(), rc.resid(0), rx.resid(0), T, d, d);
    r.corrupt_embed.assign(rx.resid(0), rx.resid(0) + Td);
    r.corrupt_z.resize((size_t)L * H * T * dh);
    r.corrupt_mlp.resize((size_t)L * Td);
    for (int l = 0; l < L; l++) {
        const float *hc = rc.get(HOOK_HEAD_OUT, l), *hx = rx.get(HOOK_HEAD_OUT, l), *zx = rx.get(HOOK_Z, l);
        const float *mc = rc.get(HOOK_MLP_OUT, l), *mx = rx.get(HOOK_MLP_OUT, l);
        if (!hc || !hx || !zx || !mc || !mx) throw error("internal: the circuit's runs did not keep their outputs");
        for (int h = 0; h < H; h++) {
            const int v = r.node_of_head(l, h);
            row_diff(delta.data() + v * Td, hc + (size_t)h * d, hx + (size_t)h * d, T, d, H * d);
            std::copy_n(g.head_in.data() + ((size_t)l * H + h) * Td, Td, grad.data() + v * Td);
            for (int t = 0; t < T; t++)
                std::copy_n(zx + (size_t)t * H * dh + h * dh, dh, r.corrupt_z.data() + (((size_t)l * H + h) * T + t) * dh);
        }
        const int v = r.node_of_mlp(l);
        row_diff(delta.data() + v * Td, mc, mx, T, d, d);
        std::copy_n(g.mlp_in.data() + (size_t)l * Td, Td, grad.data() + v * Td);
        std::copy_n(mx, Td, r.corrupt_mlp.data() + (size_t)l * Td);
    }
    std::copy_n(g.resid_at(2 * L), Td, grad.data() + (size_t)(N - 1) * Td);
    // each reader's incoming edges on its own thread (each dot product in order: the same sums on any thread count)
    std::vector<std::vector<double>> in(N);
#pragma omp parallel for schedule(dynamic, 4)
    for (int v = 1; v < N; v++) {
        in[v].resize(upstream_end(r, v));
        for (int u = 0; u < (int)in[v].size(); u++) in[v][u] = dot(delta.data() + u * Td, grad.data() + v * Td, Td);
    }
    for (int v = 1; v < N; v++)
        for (int u = 0; u < (int)in[v].size(); u++) {
            circuit_edge e;
            e.from = u, e.to = v;
            e.score = in[v][u];
            r.nodes[u].score += e.score;
            if (v == N - 1) r.nodes[v].score += e.score;
            r.edges.push_back(e);
        }
    std::stable_sort(r.edges.begin(), r.edges.end(),
                     [](const circuit_edge& a, const circuit_edge& b) { return std::fabs(a.score) > std::fabs(b.score); });
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

std::vector<unsigned char> circuit_members(const circuit_result& r, int n_edges) {
    std::vector<unsigned char> in(r.nodes.size(), 0);
    if (!in.empty()) in.back() = 1;
    const int n = std::max(0, std::min(n_edges, (int)r.edges.size()));
    for (int i = 0; i < n; i++) in[r.edges[i].from] = in[r.edges[i].to] = 1;
    return in;
}

std::vector<intervention> circuit_interventions(const circuit_result& r, const std::vector<unsigned char>& members) {
    if (members.size() != r.nodes.size()) throw error("internal: circuit members do not match its nodes");
    const size_t Td = (size_t)r.n_tokens * r.d_model;
    std::vector<intervention> iv;
    if (!members[0]) {
        intervention e{INTERVENE_SET, HOOK_RESID_PRE, 0};
        e.values = r.corrupt_embed.data();
        iv.push_back(e);
    }
    for (int l = 0; l < r.n_layer; l++) {
        for (int h = 0; h < r.n_head; h++) {
            if (members[r.node_of_head(l, h)]) continue;
            intervention z{INTERVENE_SET, HOOK_Z, l, h};
            z.values = r.corrupt_z.data() + ((size_t)l * r.n_head + h) * r.n_tokens * r.d_head;
            iv.push_back(z);
        }
        if (members[r.node_of_mlp(l)]) continue;
        intervention mo{INTERVENE_SET, HOOK_MLP_OUT, l};
        mo.values = r.corrupt_mlp.data() + (size_t)l * Td;
        iv.push_back(mo);
    }
    return iv;
}

double circuit_metric(const model& m, const circuit_result& r, const std::vector<int>& clean,
                      const std::vector<unsigned char>& members, const ablation& ab) {
    if ((int)clean.size() != r.n_tokens) throw error("internal: the circuit was found on another prompt");
    forward_options o;
    o.interventions = circuit_interventions(r, members);
    o.keep.points = 0;
    o.keep.resid_norms = false;
    record rec;
    run_forward(rec, m, clean, ab, o);
    metric_spec ms;
    ms.kind = r.contrast >= 0 ? metric_spec::LOGIT_DIFF : metric_spec::LOGIT;
    ms.target = r.target;
    ms.contrast = r.contrast;
    return metric_of(rec.last_logits(), m.config.vocab_size, ms);
}

double circuit_faithfulness(const circuit_result& r, double metric) {
    const double span = r.clean - r.corrupt;
    return span != 0 ? (metric - r.corrupt) / span : std::numeric_limits<double>::quiet_NaN();
}

} // namespace gb
