// glassbox-cli lens: the logit lens, what the residual stream predicts after every sublayer (of a prompt, an
// image, or an encoder–decoder's decoder).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/export.h"
#include "analysis/lens.h"
#include "model/kind.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/predict.h"
#include "run/seq2seq.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

// The lens at every position goes to --json and --npy-dir; the text shows the position the kind predicts at: an
// image classifier's [CLS], an encoder's first mask, else the last (an encoder–decoder's: the last target token).
int cmd_lens(const args& a) {
    gb::model m = open_model(a);
    const gb::kind_info& kind = gb::kind_info_of(m.config);
    const bool classes = kind.output == gb::OUTPUT_CLASSES, s2s = kind.input == gb::INPUT_SOURCE_TARGET;
    // (gb::lens_json names each position by its token id's text, which an image's positions do not have)
    if (classes && a.has("json"))
        throw usage_error("--json: " + m.path + " is an image classifier, whose positions are [CLS] and patches "
                          "rather than tokens, and the lens's JSON names tokens: use --npy-dir");
    const int k = (int)parse_int(a.get("top-k", "5"), "--top-k", 1, m.config.vocab_size);
    const int target = token_arg(a, m, "target", false);
    // the run the lens reads: the prompt's, an image's, or an encoder–decoder's decoder on its target (given, or
    // the greedy translation of --source), each target token predicting the next
    gb::session_request rq = read_input(a, m);
    keep_for_analyses(rq);
    with_backend(rq, a);
    const gb::session_result sr = run_once(m, rq);
    const gb::record& r = *sr.run;
    const gb::lens_result l = gb::logit_lens(r, m, {}, k, target);
    const int T = l.n_tokens;
    const int at = gb::prediction_position(m, r); // [CLS], an encoder's mask, else the last position
    std::printf("logit lens at %s (\"%s\"): top-%d at each residual point\n",
                classes ? "the classifier's position" : s2s ? "the last target position"
                : kind.output == gb::OUTPUT_FILL_MASK ? "the position the masked-LM head fills" : "the last position",
                visible(r.pieces[at]).c_str(), k);
    if (classes && !m.weights.dist_head.empty())
        std::printf("(through the [CLS] classifier alone: the model's own prediction also averages in the distillation "
                    "head at [DIST])\n");
    for (int p = 0; p < l.n_points; p++) {
        std::printf("  %s", padded(l.points[p], s2s ? 14 : 9).c_str());
        for (int j = 0; j < k; j++) {
            const size_t o = ((size_t)p * T + at) * k + j;
            std::printf("  %s %.3f", padded(quoted(m, l.top_ids[o]), 14).c_str(), l.top_probs[o]);
        }
        std::printf("   p(%s) = %.3f\n", quoted(m, l.target_ids[at]).c_str(), l.target_prob[(size_t)p * T + at]);
    }
    if (a.has("json")) gb::write_json(a.get("json"), gb::lens_json(l, r, m.tok)); // (only when asked: see above)
    if (a.has("npy-dir")) gb::write_lens_npy(a.get("npy-dir"), l);
    return 0;
}

} // namespace cli
