// Head scores from attention patterns, and the repeated-random-tokens prompt of the induction test.
#include "head_scores.h"

#include <cmath>
#include <limits>
#include <unordered_set>

#include "error.h"

namespace gb {

const char* head_score_name(head_score_kind k) {
    static const char* const names[SCORE_COUNT] = {"prev_token", "first_token", "induction", "duplicate_token", "entropy"};
    return k >= 0 && k < SCORE_COUNT ? names[k] : "?";
}

head_scores score_heads(const record& r) {
    const int L = r.n_layer, H = r.n_head, T = r.n_tokens;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    head_scores s;
    s.n_layer = L;
    s.n_head = H;
    for (auto& v : s.score) v.assign((size_t)L * H, nan);
    // (i, j): j is the most recent earlier occurrence of token i, and j + 1 < i
    std::vector<std::pair<int, int>> repeats;
    for (int i = 1; i < T; i++)
        for (int j = i - 1; j >= 0; j--)
            if (r.tokens[j] == r.tokens[i]) {
                if (j + 1 < i) repeats.push_back({i, j});
                break;
            }
    s.n_induction_positions = (int)repeats.size();
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float* A = r.head(l, h);
            if (!A) continue;
            const size_t k = (size_t)l * H + h;
            double prev = 0, first = 0, ent = 0;
            for (int i = 0; i < T; i++) {
                const float* row = A + (size_t)i * T;
                if (i > 0) prev += row[i - 1];
                first += row[0];
                for (int j = 0; j <= i; j++)
                    if (row[j] > 0) ent -= (double)row[j] * std::log((double)row[j]);
            }
            if (T > 1) s.score[SCORE_PREV_TOKEN][k] = (float)(prev / (T - 1));
            s.score[SCORE_FIRST_TOKEN][k] = (float)(first / T);
            s.score[SCORE_ENTROPY][k] = (float)(ent / T);
            if (!repeats.empty()) {
                double ind = 0, dup = 0;
                for (auto [i, j] : repeats) {
                    ind += A[(size_t)i * T + j + 1];
                    dup += A[(size_t)i * T + j];
                }
                s.score[SCORE_INDUCTION][k] = (float)(ind / repeats.size());
                s.score[SCORE_DUPLICATE_TOKEN][k] = (float)(dup / repeats.size());
            }
        }
    return s;
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
