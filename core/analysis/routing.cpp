#include "analysis/routing.h"

#include <algorithm>

#include "kernels/moe.h" // moe_top

namespace gb {

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

} // namespace gb
