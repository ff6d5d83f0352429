// Plain reference forward for tests: naive loops in double precision over the HF-named tensors that the
// tests wrote themselves. Independent of core/run/forward.cpp (no Eigen, no shared helpers).
#pragma once
#include <algorithm>
#include <vector>

#include "ref_trace.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "tiny_model.h"

// Whether an ablation's layer set holds layer l, read independently of gb::layer_set::covers (the references'
// own reading, shared by reference.cpp and tiny_llama.cpp)
inline bool in_set(const gb::layer_set& s, int l) {
    return s.on && (s.layers.empty() || std::find(s.layers.begin(), s.layers.end(), l) != s.layers.end());
}

// logits [T][V], attention [L][H][T][T], resid_norm [2L+1][T], and every intermediate (ref_trace.h)
using ref_result = ref_trace;

// GPT-2 block as HF computes it, with the ablation contract of docs/interpretability.md; opt patches or edits the run.
ref_result reference_forward(const tiny_model& tm, const std::vector<int>& tokens, const gb::ablation& ab,
                             const ref_options& opt = {});
// ln_f and the unembedding (lm_head or wte) in double, and each layer's c_proj bias.
ref_readout reference_readout(const tiny_model& tm);
