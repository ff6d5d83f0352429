// Which experts ran: an MoE record's router weights read as, per layer and token, the experts chosen and their
// mixing weights (the app's Experts view, the CLI's routing lines and JSON).
#pragma once
#include <cstdint>
#include <vector>

#include "run/record.h"

namespace gb {

// The experts that ran for every kept layer and token of a record (non-zero mixing weight), largest weight
// first: what displays show (the app's Experts view, the CLI's routing lines and JSON).
struct routing_table {
    int n_layer = 0, n_tokens = 0, n_expert = 0;
    int k = 0;                  // slots per cell
    std::vector<int> ids;       // [L][T][k] expert ids, -1 in a slot left empty (fewer experts ran)
    std::vector<float> weights; // [L][T][k] their mixing weights (0 in an empty slot)
    std::vector<uint8_t> kept;  // [L] 1 when the record kept that layer's router (else its cells are empty)
    bool empty() const { return n_expert == 0; }
    const int* cell_ids(int l, int t) const { return &ids[((size_t)l * n_tokens + t) * k]; }
    const float* cell_weights(int l, int t) const { return &weights[((size_t)l * n_tokens + t) * k]; }
};
// At most k experts per cell (the model's n_expert_used, or rec.n_expert for all that ran). Empty for a dense
// model's record.
routing_table routing_of(const record& rec, int k);

} // namespace gb
