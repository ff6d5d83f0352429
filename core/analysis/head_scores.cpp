// Head scores from attention patterns, and the repeated-random-tokens prompt of the induction test.
#include "analysis/head_scores.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "util/error.h"

namespace gb {

const char* head_score_name(head_score_kind k) {
    static const char* const names[SCORE_COUNT] = {"prev_token", "first_token", "induction", "duplicate_token", "entropy"};
    return k >= 0 && k < SCORE_COUNT ? names[k] : "?";
}

head_scores score_heads(const record& r) {
    score_sums sums;
    return score_heads_resume(sums, r, {}, 0);
}

enum { SUM_PREV, SUM_FIRST, SUM_ENT, SUM_IND, SUM_DUP, SUM_COUNT };

head_scores score_heads_resume(score_sums& S, const record& r, const std::vector<uint8_t>& same_layer, int same_rows) {
    const int L = r.n_layer, H = r.n_head, T = r.n_tokens;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    head_scores out;
    out.n_layer = L;
    out.n_head = H;
    for (auto& v : out.score) v.assign((size_t)L * H, nan);
    if (S.n_layer != L || S.n_head != H) S = score_sums{L, H, std::vector<std::vector<double>>((size_t)L * H)};
    // pair[i] = j: j is the most recent earlier occurrence of token i, and j + 1 < i
    std::vector<int> pair(T, -1);
    int n_rep = 0;
    for (int i = 1; i < T; i++)
        for (int j = i - 1; j >= 0; j--)
            if (r.tokens[j] == r.tokens[i]) {
                if (j + 1 < i) pair[i] = j, n_rep++;
                break;
            }
    out.n_induction_positions = n_rep;
    // heads are independent: scoring a new prompt spreads over the cores like the forward
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < L * H; k++) {
        const int l = k / H, h = k % H;
        std::vector<double>& rows = S.rows[k];
        const float* A = r.head(l, h);
        if (!A) {
            rows.clear();
            continue;
        }
        int from = 0; // first row to add
        if (same_layer.size() == (size_t)L && same_layer[l] && rows.size() == (size_t)T * SUM_COUNT) from = T;
        else if (rows.size() >= (size_t)same_rows * SUM_COUNT) from = std::min(same_rows, T);
        rows.resize((size_t)T * SUM_COUNT);
        double sum[SUM_COUNT] = {};
        if (from > 0) std::copy_n(&rows[(size_t)(from - 1) * SUM_COUNT], SUM_COUNT, sum);
        for (int i = from; i < T; i++) {
            const float* row = A + (size_t)i * T;
            if (i > 0) sum[SUM_PREV] += row[i - 1];
            sum[SUM_FIRST] += row[0];
            for (int j = 0; j <= i; j++)
                if (row[j] > 0) sum[SUM_ENT] -= (double)row[j] * std::log((double)row[j]);
            if (pair[i] >= 0) {
                sum[SUM_IND] += row[pair[i] + 1];
                sum[SUM_DUP] += row[pair[i]];
            }
            std::copy_n(sum, SUM_COUNT, &rows[(size_t)i * SUM_COUNT]);
        }
        const double* last = &rows[(size_t)(T - 1) * SUM_COUNT];
        if (T > 1) out.score[SCORE_PREV_TOKEN][k] = (float)(last[SUM_PREV] / (T - 1));
        out.score[SCORE_FIRST_TOKEN][k] = (float)(last[SUM_FIRST] / T);
        out.score[SCORE_ENTROPY][k] = (float)(last[SUM_ENT] / T);
        if (n_rep > 0) {
            out.score[SCORE_INDUCTION][k] = (float)(last[SUM_IND] / n_rep);
            out.score[SCORE_DUPLICATE_TOKEN][k] = (float)(last[SUM_DUP] / n_rep);
        }
    }
    return out;
}

std::vector<int> repeated_random_tokens(const tokenizer& tok, int vocab, int n, uint64_t seed, bool bos) {
    if (n < 1) throw error("--repeat-random: expected at least 1 token, got " + std::to_string(n));
    std::unordered_set<int> special{tok.bos_id, tok.eos_id};
    if (auto unk = tok.ids.find("<unk>"); unk != tok.ids.end()) special.insert(unk->second); // SentencePiece, llama2.c
    for (const std::string& sp : tok.specials) {
        auto it = tok.ids.find(sp);
        if (it != tok.ids.end()) special.insert(it->second);
    }
    int usable = 0;
    for (int id = 0; id < vocab && usable == 0; id++) usable += !special.count(id);
    if (!usable) throw error("the vocabulary has no ordinary tokens to draw random ones from");
    std::mt19937_64 rng(seed);
    std::vector<int> half;
    while ((int)half.size() < n) {
        // rng() % vocab is the same everywhere, unlike std::uniform_int_distribution
        const int id = (int)(rng() % (uint64_t)vocab);
        if (!special.count(id)) half.push_back(id);
    }
    std::vector<int> ids;
    if (bos && tok.bos_id >= 0) ids.push_back(tok.bos_id);
    ids.insert(ids.end(), half.begin(), half.end());
    ids.insert(ids.end(), half.begin(), half.end());
    return ids;
}

} // namespace gb
