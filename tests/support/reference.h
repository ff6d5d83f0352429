// Plain reference forward for tests: naive loops in double precision over the HF-named tensors that the
// tests wrote themselves. Independent of core/forward.cpp (no Eigen, no shared helpers).
#pragma once
#include <vector>

#include "forward.h"
#include "tiny_model.h"

struct ref_result {
    std::vector<double> logits;     // [T][V]
    std::vector<double> attention;  // [L][H][T][T]
    std::vector<double> resid_norm; // [2L+1][T]
};

// GPT-2 block as HF computes it, with the ablation contract from the README.
ref_result reference_forward(const tiny_model& tm, const std::vector<int>& tokens, const gb::ablation& ab);
