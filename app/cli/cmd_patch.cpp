// glassbox-cli patch: activation patching, where the clean run's activations bring its answer back.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/patching.h"
#include "model/model.h"
#include "run/record.h"
#include "tokenizer/tokenizer.h"

#include "args.h"
#include "commands.h"
#include "input.h"
#include "patch_text.h"

namespace cli {

int cmd_patch(const args& a) {
    gb::model m = open_model(a);
    std::vector<int> clean = read_input(a, m).tokens, corrupt = read_input(a, m, "corrupt").tokens;
    int target = token_arg(a, m, "target", false), contrast = token_arg(a, m, "contrast", false);
    gb::patch_options po;
    po.attention = choose_backend(a);
    po.ab = parse_ablation(a, m);
    const std::vector<std::string> notes = check_knockouts(po.ab, m, (int)clean.size());
    // the app's rule for what is not given: the clean top-1 against the corrupted top-1
    const std::string chosen = gb::choose_patch_tokens(target, contrast, m, clean, corrupt, po.ab);
    if (!chosen.empty()) std::printf("(%s)\n", chosen.c_str());
    gb::patch_result p = gb::activation_patching(m, clean, corrupt, target, contrast, po);
    std::printf("metric logit(%s)%s at the last position: clean %+.4f, corrupt %+.4f\n", quoted(m, target).c_str(),
                contrast >= 0 ? (" - logit(" + quoted(m, contrast) + ")").c_str() : "", p.clean, p.corrupt);
    std::printf("%d patched runs in %.0f ms; normalized (1 = the clean answer is back):\n", p.runs, p.ms);
    print_patch_positions(m, clean, p.resid_normalized, p.n_layer, p.n_tokens);
    std::vector<int> order(p.heads.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int)i;
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return std::fabs(p.heads_normalized[x]) > std::fabs(p.heads_normalized[y]); });
    std::printf("  heads, largest |effect| first:");
    for (size_t i = 0; i < order.size() && i < 6; i++)
        std::printf("  %d.%d %+.3f", order[i] / p.n_head, order[i] % p.n_head, p.heads_normalized[order[i]]);
    std::printf("\n");
    nlohmann::json j = gb::patch_json(p, m.tok, clean, corrupt);
    j.update(knockouts_json(po.ab, notes));
    write_outputs(a, j, [&](const std::string& d) { gb::write_patch_npy(d, p); });
    return 0;
}

} // namespace cli
