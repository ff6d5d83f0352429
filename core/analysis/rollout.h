// Attention rollout (Abnar & Zuidema, 2020): how much each position's final representation draws on each input
// position, following attention through every layer. Each layer's head-averaged pattern gets the residual's
// share, A' = (A + I) / 2, and the layers multiply: R = A'_{L-1} ... A'_0. A Vision Transformer's row 0 ([CLS])
// is the classic "where the model looked" map.
#pragma once
#include <vector>

#include "run/record.h"

namespace gb {

// [T][T] the rollout through layers 0 .. up_to (inclusive; -1 = all); rows sum to 1. Throws gb::error naming the
// layer when the record did not keep its pattern.
std::vector<float> attention_rollout(const record& r, int up_to = -1);

} // namespace gb
