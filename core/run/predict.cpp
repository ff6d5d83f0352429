// What each kind predicts, read from a record: fill mask, attention rollout, routing, and the prediction itself.
#include "run/predict.h"

#include <algorithm>

#include "kernels/moe.h" // moe_top
#include "run/seq2seq.h"
#include "util/error.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Fill mask
// ---------------------------------------------------------------------------------------------
std::vector<int> mask_positions(const record& r, const tokenizer& tok) {
    std::vector<int> at;
    if (tok.mask_id < 0) return at;
    for (int t = 0; t < r.n_tokens; t++)
        if (r.tokens[t] == tok.mask_id) at.push_back(t);
    return at;
}

std::vector<fill_slot> fill_mask(const record& r, const std::vector<int>& positions, int k) {
    const int T = r.n_tokens, V = r.vocab;
    if (!r.all_logits || !r.logit_ids.empty() || r.logits.size() != (size_t)T * V)
        throw error("fill mask needs every position's logits, and this run kept only the last position's "
                    "(a decoder's run: fill mask is for encoders such as BERT)");
    std::vector<fill_slot> out;
    for (int t : positions) {
        if (t < 0 || t >= T)
            throw error("fill mask: position " + std::to_string(t) + " is outside the prompt (0.." + std::to_string(T - 1) + ")");
        out.push_back({t, top_k_probs(&r.logits[(size_t)t * V], V, std::min(k, V))});
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Attention rollout
// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
// Routing
// ---------------------------------------------------------------------------------------------
routing_table routing_of(const record& rec, int k) {
    routing_table rt;
    if (rec.n_expert <= 0) return rt;
    const int L = rec.n_layer, T = rec.n_tokens, E = rec.n_expert;
    rt.n_layer = L, rt.n_tokens = T, rt.n_expert = E, rt.k = k = std::max(1, std::min(k, E));
    rt.ids.assign((size_t)L * T * k, -1);
    rt.weights.assign((size_t)L * T * k, 0.0f);
    rt.kept.assign(L, 0);
    for (int l = 0; l < L; l++) {
        const float* w = rec.get(HOOK_ROUTER, l);
        if (!w) continue;
        rt.kept[l] = 1;
        for (int t = 0; t < T; t++) {
            const size_t at = ((size_t)l * T + t) * k;
            moe_top(w + (size_t)t * E, E, k, &rt.ids[at], &rt.weights[at]);
        }
    }
    return rt;
}

// ---------------------------------------------------------------------------------------------
// The prediction, by kind
// ---------------------------------------------------------------------------------------------
int prediction_position(const model& m, const record& r) {
    const int T = r.n_tokens;
    switch (kind_info_of(m.config).output) {
    case OUTPUT_CLASSES: return 0;
    case OUTPUT_FILL_MASK: {
        const std::vector<int> masks = mask_positions(r, m.tok);
        return !masks.empty() ? masks[0] : std::max(0, T - 1 - (int)m.tok.suffix_ids.size());
    }
    default: return T - 1;
    }
}

void predict(prediction& out, const model& m, const record& run, const record& base, int top_k) {
    const kind_info& kind = kind_info_of(m.config);
    const int V = m.config.vocab_size;
    if (run.logits.empty() || base.logits.empty()) throw error("internal: a prediction needs the run's logits");
    out = prediction();
    out.output = kind.output;
    out.position = prediction_position(m, run);
    if (kind.output == OUTPUT_FILL_MASK) {
        out.masks = mask_positions(run, m.tok);
        out.fills = fill_mask(run, out.masks, top_k);
        out.base_fills = &base != &run ? fill_mask(base, out.masks, top_k) : out.fills;
    }
    // the row read: the last one a decoder kept, else that position's of every position's logits
    auto row = [&](const record& r) {
        return r.all_logits ? &r.logits[(size_t)out.position * V] : r.last_logits();
    };
    const float* logits = row(run);
    const float* base_logits = row(base);
    softmax_probs(out.probs, logits, V);
    if (&base != &run) softmax_probs(out.base_probs, base_logits, V);
    else out.base_probs = out.probs;
    out.kl = kl_divergence(base_logits, logits, V);
    out.top = top_k_probs(logits, V, std::min(top_k, V));
    out.base_top = top_k_probs(base_logits, V, std::min(top_k, V));
    if (kind.output == OUTPUT_CLASSES) out.rollout = attention_rollout(run);
    if (kind.output == OUTPUT_NEXT_TARGET) out.alignment = cross_alignment(run);
    if (kind_of(m.config) == KIND_MOE) {
        out.routing = routing_of(run, m.config.n_expert_used);
        out.base_routing = &base != &run ? routing_of(base, m.config.n_expert_used) : out.routing;
    }
}

} // namespace gb
