// What patch and atp print of a [2L+1][T] normalized patching map: at each residual point the position that restores
// the clean answer most and, where a position pushes the other way further, the one that hurts most.
#pragma once
#include <vector>

#include "model/model.h"

namespace cli {

void print_patch_positions(const gb::model& m, const std::vector<int>& clean, const std::vector<float>& normalized,
                           int n_layer, int T);

} // namespace cli
