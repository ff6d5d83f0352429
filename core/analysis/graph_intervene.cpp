// Feature interventions in the replacement model, through the forward's hooks (graph_intervene.h).
#include "analysis/graph_intervene.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "run/forward.h"
#include "run/hooks.h"
#include "util/error.h"

namespace gb {

void parse_graph_edits(std::vector<graph_edit>& edits, const std::string& list, bool with_value, const std::string& what,
                       const transcoder_set& t, int T) {
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        const std::string item = list.substr(start, comma - start);
        start = comma + 1;
        if (item.empty()) continue;
        auto bad = [&](const std::string& why) { return error(what + " " + item + ": " + why); };
        std::string spec = item, value;
        const size_t eq = item.find('=');
        if (with_value) {
            if (eq == std::string::npos) throw bad("expected LAYER:POS:INDEX=VALUE");
            spec = item.substr(0, eq), value = item.substr(eq + 1);
        } else if (eq != std::string::npos) {
            throw bad("expected LAYER:POS:INDEX");
        }
        const size_t c1 = spec.find(':'), c2 = c1 == std::string::npos ? c1 : spec.find(':', c1 + 1);
        if (c2 == std::string::npos) throw bad(with_value ? "expected LAYER:POS:INDEX=VALUE" : "expected LAYER:POS:INDEX");
        auto number = [&](const std::string& s, long lo, long hi, const char* name) {
            char* end = nullptr;
            const long v = std::strtol(s.c_str(), &end, 10);
            if (s.empty() || *end || v < lo || v > hi)
                throw bad(std::string(name) + " " + s + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
            return (int)v;
        };
        graph_edit e;
        e.layer = number(spec.substr(0, c1), 0, t.n_layer - 1, "layer");
        const std::string p = spec.substr(c1 + 1, c2 - c1 - 1);
        e.pos = p == "*" ? -1 : number(p, 0, T - 1, "position");
        e.index = number(spec.substr(c2 + 1), 0, t.d_tc - 1, "feature");
        if (with_value) {
            char* end = nullptr;
            e.value = std::strtof(value.c_str(), &end);
            if (value.empty() || *end) throw bad("value " + value + " is not a number");
        }
        edits.push_back(e);
    }
}

std::vector<float> intervene_logits(const model& m, const transcoder_set& t, const replacement& r,
                                    const std::vector<graph_edit>& edits, bool freeze_attention,
                                    std::vector<float>* acts_out) {
    const int L = r.n_layer, T = r.n_tokens, d = r.d_model, H = r.n_head;
    for (const graph_edit& e : edits)
        if (e.pos >= 0 && e.pos < r.first_pos)
            throw error("feature L" + std::to_string(e.layer) + " #" + std::to_string(e.index) + " at position " +
                        std::to_string(e.pos) + ": the BOS carries no feature");
    std::vector<std::vector<float>> in(L), acts(L);
    forward_options opt;
    for (int l = 0; l < L; l++) {
        opt.hooks.push_back({t.input_normed ? HOOK_MLP_IN : HOOK_RESID_MID, l, [&, l](hook_tensor& x) {
                                 in[l].resize((size_t)T * d);
                                 for (int p = 0; p < x.n; p++) std::copy_n(x.row(p), d, in[l].begin() + (size_t)p * d);
                                 transcoder_encode(acts[l], t, l, in[l].data(), T);
                                 for (const graph_edit& e : edits)
                                     if (e.layer == l)
                                         for (int p = r.first_pos; p < T; p++)
                                             if (e.pos < 0 || e.pos == p) acts[l][(size_t)p * t.d_tc + e.index] = e.value;
                                 return false;
                             }});
        opt.hooks.push_back({HOOK_MLP_OUT, l, [&, l](hook_tensor& x) {
                                 for (int p = r.first_pos; p < x.n; p++) {
                                     float* out = x.row(p);
                                     const float* err = r.error.data() + ((size_t)l * T + p) * d;
                                     const float* xin = in[l].data() + (size_t)p * d;
                                     std::vector<double> o(d);
                                     for (int i = 0; i < d; i++) o[i] = (double)t.layers[l].b_dec[i] + err[i];
                                     if (!t.layers[l].skip.empty())
                                         for (int i = 0; i < d; i++)
                                             for (int j = 0; j < d; j++) o[j] += (double)xin[i] * t.layers[l].skip[(size_t)i * d + j];
                                     for (int i = 0; i <= l; i++) {
                                         if (i + t.n_out(i) <= l) continue;
                                         for (int f = 0; f < t.d_tc; f++) {
                                             const float a = acts[i][(size_t)p * t.d_tc + f];
                                             if (a == 0) continue;
                                             const float* dec = t.dec(i, f, l);
                                             for (int j = 0; j < d; j++) o[j] += (double)a * dec[j];
                                         }
                                     }
                                     if (r.mlp_post_norm()) { // the MLP's post-norm, its scale recomputed
                                         const std::vector<float>& g = m.weights.layers[l].post_mlp_norm;
                                         double mean = 0, v = 0;
                                         if (r.layernorm) {
                                             for (int j = 0; j < d; j++) mean += o[j];
                                             mean /= d;
                                         }
                                         for (int j = 0; j < d; j++) v += (o[j] - mean) * (o[j] - mean);
                                         const double sc = 1.0 / std::sqrt(v / d + m.config.norm_eps);
                                         for (int j = 0; j < d; j++) o[j] = (o[j] - mean) * sc * g[j];
                                     }
                                     for (int j = 0; j < d; j++) out[j] = (float)o[j];
                                 }
                                 return true;
                             }});
        if (freeze_attention)
            opt.hooks.push_back({HOOK_PATTERN, l, [&, l](hook_tensor& x) {
                                     for (int h = 0; h < H; h++)
                                         for (int q = 0; q < x.n; q++)
                                             std::copy_n(r.pattern.data() + (((size_t)l * H + h) * T + q) * T, T,
                                                         x.data + ((size_t)h * x.n + q) * x.stride);
                                     return true;
                                 }});
    }
    record rec;
    run_forward(rec, m, r.tokens, {}, opt);
    if (acts_out) {
        acts_out->assign((size_t)L * T * t.d_tc, 0.0f);
        for (int l = 0; l < L; l++) std::copy(acts[l].begin(), acts[l].end(), acts_out->begin() + (size_t)l * T * t.d_tc);
    }
    return std::vector<float>(rec.logits.end() - rec.vocab, rec.logits.end());
}

} // namespace gb
