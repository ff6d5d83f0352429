// The Patching tab's own inputs (its row in the tab table makes them; inputs_of reads them), which the Circuit tab
// reads too: the corrupted prompt, the target and contrast, the fast mode, which of its analyses it shows, and
// causal tracing's subject.
#pragma once
#include <string>

#include "app_state.h"

namespace gbui {

struct patching_inputs {
    std::string corrupt;       // patching's second prompt
    analysis_kind shown = ANALYSIS_PATCHING; // the analysis the tab shows: activation patching, or causal tracing
                                             // (its row, found by name)
    std::string subject;       // causal tracing's subject: words of the prompt
    int target = -1, contrast = -1; // -1: clean top-1 / the corrupted run's top-1
    bool fast = true;          // the fast mode: the attribution-patching estimate first
    bool diff = false;         // beside the exact maps, estimate - exact (normalized)
};

} // namespace gbui
