// Fill mask: what an encoder's masked-LM head puts at each [MASK] / <mask> of the prompt. An encoder's run keeps
// every position's logits (record::all_logits), so this reads them; no extra forward.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/softmax.h"
#include "run/record.h"
#include "tokenizer/tokenizer.h"

namespace gb {

struct fill_slot {
    int position = 0;             // in the prompt (the [CLS] at 0 counts)
    std::vector<token_prob> top;  // [k] the most probable fillers, best first (softmax over the whole vocabulary)
};

// Positions of the prompt holding the tokenizer's mask token (none when it has none).
std::vector<int> mask_positions(const record& r, const tokenizer& tok);
// The top-k fillers at each of the positions (usually mask_positions; any position shows what the head puts there); throws
// gb::error naming what is missing when the record has no logits for a position (a decoder's run keeps only the
// last position's) or a position is outside the prompt.
std::vector<fill_slot> fill_mask(const record& r, const std::vector<int>& positions, int k);
// [{"position", "token" (the piece there), "top": [{"id", "text", "prob"}]}]
nlohmann::json fill_mask_json(const std::vector<fill_slot>& slots, const record& r, const tokenizer& tok);

} // namespace gb
