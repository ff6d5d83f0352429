// glassbox-cli lens: the logit lens, what the residual stream predicts after every sublayer.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/lens.h"
#include "model/model.h"
#include "run/seq2seq.h"

#include "args.h"
#include "commands.h"

namespace cli {

// An encoder–decoder's lens reads its decoder: each target token's prediction of the next target token.
int cmd_lens(const args& a) {
    gb::model m = open_model(a);
    const bool s2s = reads_source(a, m);
    std::vector<int> src;
    const std::vector<int> ids = s2s ? seq2seq_target(a, m, src = gb::source_ids(m, a.need("source")), {}) : analysis_prompt(m, a);
    const int k = (int)parse_int(a.get("top-k", "5"), "--top-k", 1, m.config.vocab_size);
    const int target = token_arg(a, m, "target", false);
    gb::record plain;
    gb::seq2seq_record rs;
    if (s2s) gb::run_seq2seq(rs, m, src, ids, {}, analysis_options(a));
    else plain = analysis_run(m, ids, a);
    const gb::record& r = s2s ? rs.decoder : plain;
    gb::lens_result l = gb::logit_lens(r, m, {}, k, target);
    const int T = l.n_tokens;
    std::printf("logit lens at the last %sposition (\"%s\"): top-%d at each residual point\n", s2s ? "target " : "",
                visible(r.pieces[T - 1]).c_str(), std::min(k, 3));
    for (int p = 0; p < l.n_points; p++) {
        std::printf("  %s", padded(l.points[p], s2s ? 14 : 9).c_str());
        for (int j = 0; j < std::min(k, 3); j++) {
            const size_t o = ((size_t)p * T + T - 1) * k + j;
            std::printf("  %s %.3f", padded(quoted(m, l.top_ids[o]), 14).c_str(), l.top_probs[o]);
        }
        std::printf("   p(%s) = %.3f\n", quoted(m, l.target_ids[T - 1]).c_str(), l.target_prob[(size_t)p * T + T - 1]);
    }
    write_outputs(a, gb::lens_json(l, r, m.tok), [&](const std::string& d) { gb::write_lens_npy(d, l); });
    return 0;
}

} // namespace cli
