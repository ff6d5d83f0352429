// glassbox-cli atp: attribution patching, activation patching estimated from one backward pass of the corrupted
// run; with --exact, next to exact patching and how far the estimate is from it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/gradients.h"
#include "analysis/patching.h"
#include "model/model.h"
#include "run/record.h"
#include "tokenizer/tokenizer.h"

#include "args.h"
#include "commands.h"
#include "input.h"
#include "patch_text.h"

namespace cli {

static void print_error(const char* what, const gb::estimate_error& e) {
    std::printf("  %-5s normalized estimate - exact: max %.4f, RMS %.4f, correlation %.4f\n", what, e.max, e.rms,
                e.correlation);
}

int cmd_atp(const args& a) {
    gb::model m = open_model(a);
    gb::require(m, gb::FEATURE_PATCHING); // its estimates are of patching: a decoder-only model's two prompts
    const std::vector<int> clean = read_input(a, m).tokens, corrupt = read_input(a, m, "corrupt").tokens;
    int target = token_arg(a, m, "target", false), contrast = token_arg(a, m, "contrast", false);
    const gb::ablation ab = parse_ablation(a, m);
    const std::vector<std::string> notes = check_knockouts(ab, m, (int)clean.size());
    const std::string chosen = gb::choose_patch_tokens(target, contrast, m, clean, corrupt, ab); // as patch and the app
    if (!chosen.empty()) std::printf("(%s)\n", chosen.c_str());
    const gb::patch_result p = gb::attribution_patching(m, clean, corrupt, target, contrast, ab);
    std::printf("metric logit(%s)%s at the last position: clean %+.4f, corrupt %+.4f\n", quoted(m, target).c_str(),
                contrast >= 0 ? (" - logit(" + quoted(m, contrast) + ")").c_str() : "", p.clean, p.corrupt);
    std::printf("attribution patching in %.0f ms (one backward pass); estimated normalized (1 = the clean answer is "
                "back):\n", p.ms);
    print_patch_positions(m, clean, p.resid_normalized, p.n_layer, p.n_tokens);
    std::unique_ptr<gb::patch_result> exact;
    if (a.has("exact")) {
        gb::patch_options po;
        po.ab = ab;
        exact = std::make_unique<gb::patch_result>(gb::activation_patching(m, clean, corrupt, target, contrast, po));
        std::printf("exact patching: %d patched runs in %.0f ms\n", exact->runs, exact->ms);
        print_error("resid", gb::compare_estimate(p.resid_normalized, exact->resid_normalized));
        print_error("heads", gb::compare_estimate(p.heads_normalized, exact->heads_normalized));
    }
    nlohmann::json j = gb::atp_json(p, exact.get(), m.tok, clean, corrupt);
    j.update(knockouts_json(ab, notes));
    write_outputs(a, j,
                  [&](const std::string& d) { gb::write_atp_npy(d, p, exact.get()); });
    return 0;
}

} // namespace cli
