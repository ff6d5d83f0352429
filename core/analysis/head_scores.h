// Head scores: what kind of head each one is, from its attention pattern A (query i, key j).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "record.h"
#include "tokenizer.h"

namespace gb {

enum head_score_kind { SCORE_PREV_TOKEN, SCORE_FIRST_TOKEN, SCORE_INDUCTION, SCORE_DUPLICATE_TOKEN, SCORE_ENTROPY, SCORE_COUNT };
// "prev_token", "first_token", "induction", "duplicate_token", "entropy"
const char* head_score_name(head_score_kind k);

struct head_scores {
    int n_layer = 0, n_head = 0;
    // [SCORE_COUNT][L][H]; NaN where undefined (no position qualifies) or where the record has no pattern for the layer
    std::vector<float> score[SCORE_COUNT];
    int n_induction_positions = 0; // positions i that induction and duplicate_token average over
    float at(head_score_kind k, int layer, int head) const { return score[k][(size_t)layer * n_head + head]; }
};

// From r's patterns, in double:
//   prev_token      mean over i >= 1 of A[i][i-1]
//   first_token     mean over i of A[i][0]
//   induction       mean over positions i whose token occurred earlier, with j its most recent earlier occurrence
//                   and j + 1 < i, of A[i][j+1]
//   duplicate_token the same mean of A[i][j]
//   entropy         mean over i of -sum_j A[i][j] ln A[i][j] (nats)
head_scores score_heads(const record& r);

// The standard induction test prompt: n random token ids (not BOS, EOS, <unk> or other special tokens) repeated twice,
// after BOS when bos is true. Deterministic for a seed on every platform.
std::vector<int> repeated_random_tokens(const tokenizer& tok, int vocab, int n, uint64_t seed, bool bos);

} // namespace gb
