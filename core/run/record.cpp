// Activation record: request planning under a memory budget, and lookups.
#include "run/record.h"

#include <algorithm>
#include <cstdlib>

#include "util/error.h"

namespace gb {

bool record_plan::any(hook_point p) const {
    return std::find(keep[p].begin(), keep[p].end(), 1) != keep[p].end();
}

size_t record_layer_bytes(hook_point p, const model_config& c, int T, int n_out, int S) {
    if (p == HOOK_PATTERN) return sizeof(float) * (size_t)c.n_head * T * T;
    if (p == HOOK_CROSS_PATTERN) return sizeof(float) * (size_t)c.n_head * T * S;
    const int rows = hook_is_final(p) ? n_out : T;
    return sizeof(float) * (size_t)rows * hook_width(p, c, T);
}

record_plan plan_record(const record_request& rq, const model_config& c, int T, int n_out, int S) {
    const int L = c.n_layer;
    record_plan pl;
    for (int p = 0; p < HOOK_COUNT; p++) {
        const hook_point hp = (hook_point)p;
        pl.keep[p].assign(hook_is_final(hp) ? 1 : L, 0);
        // the pattern bit asks for both attentions' patterns (an encoder–decoder's cross-attention too)
        const bool asked = (rq.points & hook_bit(hp)) || (hp == HOOK_CROSS_PATTERN && (rq.points & hook_bit(HOOK_PATTERN)));
        const bool wanted = asked && hook_exists(hp, c);
        for (int l = 0; l < (int)pl.keep[p].size(); l++) {
            const bool in_layers = hook_is_final(hp) || rq.layers.empty() || (l < (int)rq.layers.size() && rq.layers[l]);
            bool k = wanted && in_layers;
            if (rq.resid_stream && ((hp == HOOK_RESID_PRE && l == 0) || hp == HOOK_RESID_MID || hp == HOOK_RESID_POST))
                k = true;
            pl.keep[p][l] = k;
        }
    }
    auto total = [&] {
        size_t b = 0;
        for (int p = 0; p < HOOK_COUNT; p++)
            for (uint8_t k : pl.keep[p]) b += k ? record_layer_bytes((hook_point)p, c, T, n_out, S) : 0;
        return b;
    };
    pl.bytes = total();
    pl.mlp_pre = rq.mlp_pre && arch_table(c.arch).kind != KIND_MOE;
    if (!rq.budget_bytes || pl.bytes <= rq.budget_bytes) return pl;

    // Over budget: the largest per-layer points give up layers first, farthest from the focus layer first,
    // each keeping at least the layer nearest the focus.
    const int focus = std::min(std::max(rq.focus_layer, 0), L - 1);
    std::vector<int> order(HOOK_COUNT);
    for (int p = 0; p < HOOK_COUNT; p++) order[p] = p;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return record_layer_bytes((hook_point)a, c, T, n_out, S) > record_layer_bytes((hook_point)b, c, T, n_out, S);
    });
    std::vector<int> by_distance(L); // layers, farthest from the focus first; at equal distance the earlier one
    for (int l = 0; l < L; l++) by_distance[l] = l;
    std::stable_sort(by_distance.begin(), by_distance.end(), [&](int a, int b) {
        const int da = std::abs(a - focus), db = std::abs(b - focus);
        return da != db ? da > db : a < b;
    });
    std::vector<std::pair<hook_point, std::string>> pieces; // what each point keeps, for the note
    for (int p : order) {
        const hook_point hp = (hook_point)p;
        if (hook_is_final(hp)) continue;
        const int wanted = (int)std::count(pl.keep[p].begin(), pl.keep[p].end(), 1);
        int kept = wanted;
        const size_t per_layer = record_layer_bytes(hp, c, T, n_out, S);
        for (int l : by_distance) {
            if (pl.bytes <= rq.budget_bytes || kept <= 1) break;
            if (!pl.keep[p][l]) continue;
            pl.keep[p][l] = 0;
            pl.bytes -= per_layer;
            kept--;
        }
        if (kept < wanted)
            pieces.push_back({hp, std::string(hook_name(hp)) + " of " + std::to_string(kept) + " of " + std::to_string(wanted) + " layers"});
        if (pl.bytes <= rq.budget_bytes) break;
    }
    // Still over: the one pattern layer left keeps as many heads as the rest of the budget holds, at least one, in
    // a block of that many that holds the focus head (a block, so that selecting a head near it keeps the run).
    const size_t per_head = sizeof(float) * (size_t)T * T;
    const int H = c.n_head;
    if (pl.bytes > rq.budget_bytes && pl.any(HOOK_PATTERN) && H > 1) {
        const int l = (int)(std::find(pl.keep[HOOK_PATTERN].begin(), pl.keep[HOOK_PATTERN].end(), 1) - pl.keep[HOOK_PATTERN].begin());
        const size_t others = pl.bytes - per_head * H;
        const int fit = (int)std::min<size_t>(H - 1, std::max<size_t>(1, others < rq.budget_bytes ? (rq.budget_bytes - others) / per_head : 1));
        const int focus_head = std::min(std::max(rq.focus_head, 0), H - 1);
        pl.part.layer = l;
        pl.part.count = fit;
        pl.part.head0 = std::min(focus_head / fit * fit, H - fit);
        pl.bytes = others + per_head * fit;
        const std::string text = "pattern of " + std::to_string(fit) + " of " + std::to_string(H) + " heads (" +
                                 std::to_string(pl.part.head0) + ".." + std::to_string(pl.part.head0 + fit - 1) +
                                 ") of 1 of " + std::to_string(L) + " layers";
        auto it = std::find_if(pieces.begin(), pieces.end(), [](const auto& piece) { return piece.first == HOOK_PATTERN; });
        if (it != pieces.end()) it->second = text;
        else pieces.insert(pieces.begin(), {HOOK_PATTERN, text});
    }
    std::string note;
    for (const auto& piece : pieces) note += (note.empty() ? "" : ", ") + piece.second;
    const size_t mb = rq.budget_bytes >> 20;
    pl.note = note + " kept (memory budget " + (mb ? std::to_string(mb) + " MB" : std::to_string(rq.budget_bytes) + " bytes") +
              (pl.bytes > rq.budget_bytes ? ", still exceeded: one layer of each, one head of the pattern, is the least kept" : "") + ")";
    return pl;
}

size_t record::layer_floats(hook_point p) const {
    const int T = n_tokens;
    switch (p) {
    case HOOK_Q:
    case HOOK_Z:
    case HOOK_CROSS_Z: return (size_t)T * n_head * d_head;
    case HOOK_CROSS_PATTERN: return (size_t)n_head * T * n_source;
    case HOOK_K:
    case HOOK_V: return (size_t)T * n_kv_head * d_head;
    case HOOK_PATTERN: return (size_t)n_head * T * T;
    case HOOK_HEAD_OUT: return (size_t)T * n_head * d_model;
    case HOOK_MLP_POST: return (size_t)T * d_ff;
    case HOOK_ROUTER: return (size_t)T * n_expert;
    case HOOK_FINAL_NORM: return (all_logits ? (size_t)T : 1) * d_model;
    case HOOK_LOGITS: return (all_logits ? (size_t)T : 1) * vocab;
    default: return (size_t)T * d_model;
    }
}

bool record::has(hook_point p, int layer) const {
    if (p < 0 || p >= HOOK_COUNT) return false;
    const int l = hook_is_final(p) ? 0 : layer;
    return l >= 0 && l < (int)slot[p].size() && slot[p][l] >= 0;
}

const float* record::get(hook_point p, int layer) const {
    if (!has(p, layer)) return nullptr;
    const int l = hook_is_final(p) ? 0 : layer;
    return acts[p][slot[p][l]]->data();
}

float* record::get_mut(hook_point p, int layer) { return const_cast<float*>(get(p, layer)); }

std::vector<float> record::flat(hook_point p) const {
    std::vector<float> out;
    for (const auto& a : acts[p]) out.insert(out.end(), a->begin(), a->end());
    return out;
}

const float* record::head(int layer, int h) const {
    const float* p = get(HOOK_PATTERN, layer);
    const int k = h >= 0 && h < n_head ? part.slot(layer, h) : -1;
    return p && k >= 0 ? p + (size_t)k * n_tokens * n_tokens : nullptr;
}

size_t record::bytes() const {
    size_t n = mlp_pre.size() + logits.size() + resid_norm.size();
    for (const auto& point : acts)
        for (const auto& t : point) n += t ? t->size() : 0;
    return n * sizeof(float);
}

size_t record::tensor_floats(hook_point p, int layer) const {
    if (p == HOOK_PATTERN) return (size_t)part.heads(layer, n_head) * n_tokens * n_tokens;
    return layer_floats(p);
}

void resid_point_hook(int point, hook_point& p, int& layer) {
    if (point <= 0) p = HOOK_RESID_PRE, layer = 0;
    else if (point % 2) p = HOOK_RESID_MID, layer = (point - 1) / 2;
    else p = HOOK_RESID_POST, layer = point / 2 - 1;
}

const float* record::resid(int point) const {
    if (point < 0 || point > 2 * n_layer) return nullptr;
    hook_point p;
    int l;
    resid_point_hook(point, p, l);
    if (const float* x = get(p, l)) return x;
    if (p == HOOK_RESID_POST && l + 1 < n_layer) return get(HOOK_RESID_PRE, l + 1); // the same stream
    return nullptr;
}

std::vector<std::string> resid_labels(int n_layer, bool cross) {
    std::vector<std::string> labels{"embed"};
    for (int l = 0; l < n_layer; l++) {
        labels.push_back("L" + std::to_string(l) + (cross ? " self-attn" : " attn"));
        labels.push_back("L" + std::to_string(l) + (cross ? " cross+mlp" : " mlp"));
    }
    return labels;
}

} // namespace gb
