// The Sampling tab's own inputs (its row in the tab table makes them; inputs_of reads them): the prompt continued
// at three temperatures from one seed and top-k. Its analysis: compute_sampling (analysis_compute.cpp).
#pragma once
#include <cstdint>

namespace gbui {

struct sampling_inputs {
    float temps[3] = {0.3f, 0.8f, 1.5f};
    int top_k = 40;  // 0 = every token
    int tokens = 30;
    uint64_t seed = 1;
};

} // namespace gbui
