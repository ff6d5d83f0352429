#include "analysis/fill_mask.h"

#include "util/error.h"

namespace gb {

std::vector<int> mask_positions(const record& r, const tokenizer& tok) {
    std::vector<int> at;
    if (tok.mask_id < 0) return at;
    for (int t = 0; t < r.n_tokens; t++)
        if (r.tokens[t] == tok.mask_id) at.push_back(t);
    return at;
}

std::vector<fill_slot> fill_mask(const record& r, const std::vector<int>& positions, int k) {
    const int T = r.n_tokens, V = r.vocab;
    if (!r.all_logits || !r.logit_ids.empty() || r.logits.size() != (size_t)T * V)
        throw error("fill mask needs every position's logits, and this run kept only the last position's "
                    "(a decoder's run: fill mask is for encoders such as BERT)");
    std::vector<fill_slot> out;
    for (int t : positions) {
        if (t < 0 || t >= T)
            throw error("fill mask: position " + std::to_string(t) + " is outside the prompt (0.." + std::to_string(T - 1) + ")");
        out.push_back({t, top_k_probs(&r.logits[(size_t)t * V], V, std::min(k, V))});
    }
    return out;
}

nlohmann::json fill_mask_json(const std::vector<fill_slot>& slots, const record& r, const tokenizer& tok) {
    nlohmann::json a = nlohmann::json::array();
    for (const fill_slot& s : slots) {
        nlohmann::json top = nlohmann::json::array();
        for (const token_prob& p : s.top) top.push_back({{"id", p.id}, {"text", token_text(tok, p.id)}, {"prob", p.prob}});
        a.push_back({{"position", s.position}, {"token", r.pieces[s.position]}, {"top", top}});
    }
    return a;
}

} // namespace gb
