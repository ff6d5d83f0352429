// glassbox-cli attribute: direct logit attribution, what each head and MLP writes into a token's logit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/attribution.h"
#include "model/model.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

int cmd_attribute(const args& a) {
    gb::model m = open_model(a);
    gb::session_request rq = read_input(a, m);
    keep_for_analyses(rq);
    with_backend(rq, a);
    const int target = token_arg(a, m, "target", true), contrast = token_arg(a, m, "contrast", false);
    const int T = (int)rq.tokens.size();
    const int pos = (int)parse_int(a.get("position", std::to_string(T - 1)), "--position", 0, T - 1);
    const gb::session_result sr = run_once(m, rq);
    const gb::record& r = *sr.run;
    gb::attribution at = gb::attribute(r, m, {}, target, contrast, pos);
    std::printf("direct logit attribution of logit(%s)%s at position %d (\"%s\")\n", quoted(m, target).c_str(),
                contrast >= 0 ? (" - logit(" + quoted(m, contrast) + ")").c_str() : "", pos, visible(r.pieces[pos]).c_str());
    // the largest components, by magnitude
    std::vector<std::pair<double, std::string>> parts{{at.embed, "embeddings"}};
    if (at.has_final_bias) parts.push_back({at.bias, "final norm bias"});
    for (int l = 0; l < at.n_layer; l++) {
        parts.push_back({at.mlp[l], "L" + std::to_string(l) + " mlp"});
        if (at.has_attn_bias) parts.push_back({at.attn_bias[l], "L" + std::to_string(l) + " attn bias"});
        for (int h = 0; h < at.n_head; h++)
            parts.push_back({at.heads[(size_t)l * at.n_head + h], "head " + std::to_string(l) + "." + std::to_string(h)});
    }
    std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return std::fabs(x.first) > std::fabs(y.first); });
    for (size_t i = 0; i < parts.size() && i < 12; i++) std::printf("  %-16s %+9.4f\n", parts[i].second.c_str(), parts[i].first);
    std::printf("  sum of components %+.6f, the run's logit difference %+.6f (residual %.2g)\n", at.sum(), at.total,
                at.total - at.sum());
    write_outputs(a, gb::attribution_json(at, m.tok), [&](const std::string& d) { gb::write_attribution_npy(d, at); });
    return 0;
}

} // namespace cli
