// What the previous result shares with a new one (derived.h): the head scores resume from it
// (gb::score_heads_resume), the pixels too (heatmaps.cpp).
#include "derived.h"

#include <algorithm>

namespace gbui {

reuse_plan plan_reuse(const gb::record& now, const gb::record* before, bool same_inputs) {
    reuse_plan p;
    p.same_layer.assign(now.n_layer, 0);
    if (!before || before->n_layer != now.n_layer || before->n_head != now.n_head) return p;
    for (int l = 0; l < now.n_layer; l++)
        if (now.has_layer(l) && before->has_layer(l) &&
            now.acts[gb::HOOK_PATTERN][now.slot[gb::HOOK_PATTERN][l]] ==
                before->acts[gb::HOOK_PATTERN][before->slot[gb::HOOK_PATTERN][l]])
            p.same_layer[l] = 1;
    if (same_inputs && now.causal) { // causal: row i depends on tokens 0..i only (an encoder's on every token)
        const int n = std::min(now.n_tokens, before->n_tokens);
        while (p.same_rows < n && now.tokens[p.same_rows] == before->tokens[p.same_rows]) p.same_rows++;
    }
    return p;
}

} // namespace gbui
