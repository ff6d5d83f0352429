// glassbox-cli break-it: each part of the model removed in turn, and what that changes.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/break_it.h"
#include "model/model.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

// The table, then each row's sentence; --json writes the numbers (analysis_json.h's break_it_json).
int cmd_break_it(const args& a) {
    gb::model m = open_model(a);
    const std::vector<int> ids = read_input(a, m).tokens;
    gb::break_options o;
    o.max_head_scan = (int)parse_int(a.get("scan-heads", "256"), "--scan-heads", 1, 1 << 20);
    const gb::break_result b = gb::break_it(m, ids, o);
    std::printf("break it: %zu tokens, %s; baseline top-1 %s %.1f %%, the last token's |x| after the last layer %.4g\n\n",
                ids.size(), m.config.model_type.c_str(), quoted(m, b.base_top_id).c_str(), 100.0 * b.base_top_prob,
                b.base_resid_norm);
    const std::string keeps = "p(" + quoted(m, b.base_top_id) + ")";
    std::printf("  %-28s %-16s %8s %12s %10s %10s\n", "removed", "top-1", "p", keeps.c_str(), "KL nats", "|x| last");
    auto num = [](double v) { // 0.4891, 85.81; 6595 and 19312 rather than 1.93e+04
        char s[32];
        std::snprintf(s, sizeof s, std::isfinite(v) && std::fabs(v) >= 1000 && std::fabs(v) < 1e9 ? "%.0f" : "%.4g", v);
        return std::string(s);
    };
    for (const gb::break_row& r : b.rows)
        std::printf("  %-28s %-16s %7.2f%% %11.2f%% %10s %10s\n", r.label.c_str(), quoted(m, r.top_id).c_str(),
                    100.0 * r.top_prob, 100.0 * r.base_top_prob, num(r.kl).c_str(), num(r.resid_norm).c_str());
    std::printf("\n");
    for (const gb::break_row& r : b.rows) std::printf("%s\n", terminal_safe(r.explanation, false).c_str());
    if (!b.note.empty()) std::printf("\nnote: %s\n", b.note.c_str());
    write_outputs(a, gb::break_it_json(b, m.tok), nullptr);
    return 0;
}

} // namespace cli
