// glassbox-cli grad: the gradients of a metric of the logits at every residual point, and which prompt tokens it
// leans on (gradient x input, integrated gradients at the embeddings' residual point).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/gradients.h"
#include "model/model.h"
#include "run/record.h"
#include "tokenizer/tokenizer.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

// The metric the options ask for: --metric, --target / --target-id, --contrast / --contrast-id, --position.
static gb::metric_spec read_metric(const args& a, const gb::model& m, int T) {
    gb::metric_spec ms;
    ms.kind = gb::parse_metric(a.get("metric", "logit-diff"));
    ms.target = token_arg(a, m, "target", true);
    ms.contrast = token_arg(a, m, "contrast", false);
    if (ms.kind == gb::metric_spec::LOGIT_DIFF && ms.contrast < 0)
        throw usage_error("--metric logit-diff needs --contrast or --contrast-id (or use --metric logit)");
    if (ms.kind != gb::metric_spec::LOGIT_DIFF && ms.contrast >= 0)
        throw usage_error(std::string("--contrast: the metric ") + gb::metric_name(ms.kind) + " has no contrast");
    ms.position = (int)parse_int(a.get("position", std::to_string(T - 1)), "--position", 0, T - 1);
    return ms;
}

int cmd_grad(const args& a) {
    gb::model m = open_model(a);
    const std::vector<int> tokens = read_input(a, m).tokens;
    const int T = (int)tokens.size();
    const gb::metric_spec ms = read_metric(a, m, T);
    const int steps = (int)parse_int(a.get("steps", "32"), "--steps", 0, 4096);
    const gb::ablation ab = parse_ablation(a, m);
    const std::vector<std::string> notes = check_knockouts(ab, m, T);
    const gb::saliency_result s = gb::saliency(m, tokens, ms, steps, ab);
    const std::string label = ms.kind == gb::metric_spec::LOGPROB ? "log p(" + quoted(m, ms.target) + ")"
                              : ms.contrast >= 0 ? "logit(" + quoted(m, ms.target) + ") - logit(" + quoted(m, ms.contrast) + ")"
                                                 : "logit(" + quoted(m, ms.target) + ")";
    std::printf("metric %s = %+.6f at position %d (\"%s\")\n", label.c_str(), s.value, ms.position,
                visible(gb::token_text(m.tok, tokens[ms.position])).c_str());
    std::printf("  %-4s %-16s %14s %14s\n", "pos", "token", "grad x input", steps > 0 ? "integrated" : "");
    for (int t = 0; t < T; t++) {
        std::printf("  %-4d %s %+14.6f", t, padded(quoted(m, tokens[t]), 16).c_str(), s.grad_x_input[t]);
        if (steps > 0) std::printf(" %+14.6f", s.integrated[t]);
        std::printf("\n");
    }
    if (steps > 0)
        std::printf("integrated gradients, %d midpoint steps from a zero stream: metric(x) - metric(0) = %+.6f, "
                    "their sum %+.6f, completeness gap %+.3g\n",
                    steps, s.value - s.baseline, s.value - s.baseline - s.completeness_gap(), s.completeness_gap());
    if (steps > 0) // what a large gap usually means
        std::printf("(a norm rescales the nearly zero stream near alpha = 0, so the metric jumps there and is nearly flat "
                    "after: more --steps close the gap, slowly)\n");
    nlohmann::json j = gb::saliency_json(s, m.tok, tokens);
    j.update(knockouts_json(ab, notes));
    write_outputs(a, j, [&](const std::string& d) { gb::write_saliency_npy(d, s); });
    return 0;
}

} // namespace cli
