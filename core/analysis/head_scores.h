// Head scores: what kind of head each one is, from its attention pattern A (query i, key j).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "run/record.h"
#include "tokenizer/tokenizer.h"

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

// The same scores, resumable: the sums after every query row are kept in `sums`, so that a record sharing rows
// or whole layers with the one the sums came from (a live run, core/run/live.h) adds only its new rows. The sums
// are taken in one order whatever is reused, so the scores are score_heads' numbers exactly.
struct score_sums {
    int n_layer = 0, n_head = 0;
    std::vector<std::vector<double>> rows; // [L*H] -> [T][5]: previous-token, first-token, entropy, induction and
                                           // duplicate-token sums after each query row (empty: layer not kept)
};
// same_layer [L] (or empty): 1 where r's pattern is the very tensor the sums were taken from; same_rows: query
// rows [0, same_rows) equal those the sums were taken from at every layer (0: start over).
head_scores score_heads_resume(score_sums& sums, const record& r, const std::vector<uint8_t>& same_layer, int same_rows);

// The standard induction test prompt: n random token ids (not BOS, EOS, <unk> or other special tokens) repeated twice,
// after BOS when bos is true. Deterministic for a seed on every platform.
std::vector<int> repeated_random_tokens(const tokenizer& tok, int vocab, int n, uint64_t seed, bool bos);

} // namespace gb
