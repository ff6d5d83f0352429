// The patching maps' text (patch, atp): see patch_text.h.
#include "patch_text.h"

#include <cmath>
#include <cstdio>

#include "run/record.h"
#include "tokenizer/tokenizer.h"

#include "args.h"

namespace cli {

void print_patch_positions(const gb::model& m, const std::vector<int>& clean, const std::vector<float>& normalized,
                           int n_layer, int T) {
    const std::vector<std::string> labels = gb::resid_labels(n_layer);
    // at each point the position whose clean stream brings the answer back most (the largest value), and, when a
    // position pushes the metric further the other way than that, the one that hurts most (the smallest)
    for (int pt = 0; pt < 2 * n_layer + 1; pt++) {
        const float* row = &normalized[(size_t)pt * T];
        int hi = 0, lo = 0;
        for (int t = 1; t < T; t++) {
            if (row[t] > row[hi]) hi = t;
            if (row[t] < row[lo]) lo = t;
        }
        std::printf("  %-9s restores most at %2d (\"%s\") %+.3f", labels[pt].c_str(), hi,
                    visible(gb::token_text(m.tok, clean[hi])).c_str(), row[hi]);
        if (row[lo] < 0 && -row[lo] > std::fabs(row[hi]))
            std::printf(", hurts most at %2d (\"%s\") %+.3f", lo, visible(gb::token_text(m.tok, clean[lo])).c_str(), row[lo]);
        std::printf("\n");
    }
}

} // namespace cli
