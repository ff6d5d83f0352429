// BPE: merging (shared by byte-level and SentencePiece-style BPE), byte-level encode (GPT-2, Llama 3, Qwen2,
// RoBERTa), SentencePiece-style encode (Llama 2, llama2.c) with llama2.c's tokenizer.bin loader, and
// tokenizer.json's BPE model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/internal.h"
#include "util/error.h"
#include "util/json_util.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// BPE merging, shared by both kinds: a linked list of symbols and a heap of candidate pairs, O(n log n) in
// the word's length (a naive rescan after each merge is quadratic: a 100 KB word without spaces took minutes).
// ---------------------------------------------------------------------------------------------
struct bpe_symbol {
    std::string s;  // the symbol's text as the vocabulary spells it
    int prev, next; // neighbours in the word, -1 at the ends
    bool alive;     // false once merged into its left neighbour
};

// Merging symbol `left` with its right neighbour `right`; stale once either has changed since it was queued
// (symbols only grow, so their lengths tell).
struct bpe_candidate {
    double priority; // lower merges first: the merge's rank, or minus the merged token's score
    int left, right;
    size_t left_len, right_len;
};

struct bpe_later { // the heap's order: lowest priority first, then leftmost
    bool operator()(const bpe_candidate& a, const bpe_candidate& b) const {
        return a.priority != b.priority ? a.priority > b.priority : a.left > b.left;
    }
};

enum bpe_order {
    BPE_RANK_ROUNDS, // GPT-2's encoder.py: take the lowest-ranked pair, merge all its occurrences left to right
    BPE_RANK,        // SentencePiece-style tokenizer.json: one merge at a time, lowest rank, merged token known
    BPE_SCORE,       // llama2.c: one merge at a time, highest score of the merged token, leftmost on ties
};

// Priority of merging a and b under the order, false when they do not merge.
static bool bpe_priority(double& priority, const tokenizer& t, bpe_order order, const std::string& a,
                         const std::string& b, std::string& key) {
    encode_steps++;
    if (order == BPE_SCORE) {
        key.assign(a).append(b);
        auto it = t.ids.find(key);
        if (it == t.ids.end() || it->second >= (int)t.scores.size()) return false;
        priority = -(double)t.scores[it->second];
        return true;
    }
    key.assign(a).append(" ").append(b);
    auto r = t.merge_rank.find(key);
    if (r == t.merge_rank.end()) return false;
    if (order == BPE_RANK && !t.ids.count(a + b)) return false;
    priority = r->second;
    return true;
}

// Merges the symbols of one word in place until no adjacent pair merges; leaves the surviving symbols in order.
static void bpe_merge(std::vector<std::string>& word, const tokenizer& t, bpe_order order) {
    if (word.size() < 2) return;
    std::vector<bpe_symbol> sym(word.size());
    for (size_t i = 0; i < word.size(); i++)
        sym[i] = {std::move(word[i]), (int)i - 1, i + 1 < word.size() ? (int)i + 1 : -1, true};
    std::vector<bpe_candidate> heap, pending;
    std::string key;
    auto consider = [&](std::vector<bpe_candidate>& into, int l, int r) {
        double p;
        if (l < 0 || r < 0 || !bpe_priority(p, t, order, sym[l].s, sym[r].s, key)) return;
        into.push_back({p, l, r, sym[l].s.size(), sym[r].s.size()});
        if (&into == &heap) std::push_heap(heap.begin(), heap.end(), bpe_later());
    };
    for (int i = 0; i + 1 < (int)sym.size(); i++) consider(pending, i, i + 1);
    heap.swap(pending);
    std::make_heap(heap.begin(), heap.end(), bpe_later());
    auto valid = [&](const bpe_candidate& c) {
        return sym[c.left].alive && sym[c.right].alive && sym[c.left].next == c.right &&
               sym[c.left].s.size() == c.left_len && sym[c.right].s.size() == c.right_len;
    };
    // GPT-2 queues the pairs a round creates only after the round, so a lower-ranked pair made by merging
    // cannot cut into the round (it never does with a trained merge list, where a merge ranks after its parts)
    std::vector<bpe_candidate>& fresh = order == BPE_RANK_ROUNDS ? pending : heap;
    while (!heap.empty()) {
        encode_steps++;
        std::pop_heap(heap.begin(), heap.end(), bpe_later());
        bpe_candidate c = heap.back();
        heap.pop_back();
        if (!valid(c)) continue;
        for (;;) {
            bpe_symbol& l = sym[c.left];
            bpe_symbol& r = sym[c.right];
            l.s += r.s;
            r.alive = false;
            l.next = r.next;
            if (r.next >= 0) sym[r.next].prev = c.left;
            consider(fresh, l.prev, c.left);
            consider(fresh, c.left, l.next);
            if (order != BPE_RANK_ROUNDS) break;
            // the rest of this round: the same pair further right (stale ones are dropped on the way)
            bool more = false;
            while (!heap.empty() && heap.front().priority == c.priority) {
                encode_steps++;
                std::pop_heap(heap.begin(), heap.end(), bpe_later());
                bpe_candidate n = heap.back();
                heap.pop_back();
                if (valid(n)) {
                    c = n, more = true;
                    break;
                }
            }
            if (!more) break;
        }
        for (const bpe_candidate& p : pending) heap.push_back(p), std::push_heap(heap.begin(), heap.end(), bpe_later());
        pending.clear();
    }
    word.clear();
    for (int i = 0; i >= 0; i = sym[i].next) word.push_back(std::move(sym[i].s));
}

// Byte-level BPE of one pre-token (its bytes already mapped to their stand-in characters).
static void bpe_word(std::vector<int>& out, const tokenizer& t, std::vector<std::string>& sym) {
    bpe_merge(sym, t, BPE_RANK_ROUNDS);
    for (const std::string& s : sym) {
        auto it = t.ids.find(s);
        if (it == t.ids.end()) throw error("tokenizer: symbol '" + s + "' has no id (incomplete vocabulary)");
        out.push_back(it->second);
    }
}

void encode_byte_bpe(std::vector<int>& out, const tokenizer& t, const std::string& text) {
    const byte_map& bm = bytes_unicode();
    std::vector<std::string> pieces;
    split_pieces(pieces, text, t.split_regex.empty() ? gpt2_split_regex : t.split_regex);
    std::vector<std::string> sym;
    for (const std::string& p : pieces) {
        sym.clear();
        std::string whole;
        for (unsigned char c : p) sym.push_back(bm.to_unicode[c]), whole += bm.to_unicode[c];
        if (t.ignore_merges) { // Llama 3: a pre-token that is itself in the vocabulary is not split
            auto it = t.ids.find(whole);
            if (it != t.ids.end()) {
                out.push_back(it->second);
                continue;
            }
        }
        bpe_word(out, t, sym);
    }
}

// ---------------------------------------------------------------------------------------------
// SentencePiece-style BPE (llama2.c): code points, then merges by best score, <0xXX> byte fallback
// ---------------------------------------------------------------------------------------------
tokenizer load_llama2c_tokenizer(const std::string& path, int expected_vocab) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("cannot open tokenizer " + path);
    f.seekg(0, std::ios::end);
    const int64_t size = f.tellg();
    f.seekg(0);
    auto read_i32 = [&](const char* what) {
        int32_t v;
        if (!f.read((char*)&v, 4)) throw error(path + ": truncated while reading " + std::string(what));
        return v;
    };
    tokenizer t;
    t.kind = TOK_SPM_BPE;
    t.dummy_prefix = true;
    t.add_bos = true;
    int32_t max_len = read_i32("max_token_length");
    if (max_len <= 0 || max_len > 1 << 16) throw error(path + ": max_token_length " + std::to_string(max_len) + " is absurd");
    // each token needs at least 8 bytes (score + length): bounds the count before anything is allocated
    int64_t max_tokens = (size - 4) / 8;
    int n = expected_vocab > 0 ? expected_vocab : (int)std::min<int64_t>(max_tokens, 1 << 22);
    if (n > max_tokens) throw error(path + ": file too small for " + std::to_string(n) + " tokens (truncated?)");
    t.vocab.reserve(n);
    t.scores.reserve(n);
    for (int i = 0; i < n; i++) {
        if (expected_vocab <= 0 && f.peek() == EOF) break;
        float score;
        if (!f.read((char*)&score, 4)) throw error(path + ": truncated at token " + std::to_string(i));
        int32_t len = read_i32("a token length");
        if (len < 0 || len > max_len) throw error(path + ": token " + std::to_string(i) + " has length " +
                                                 std::to_string(len) + " (max_token_length " + std::to_string(max_len) + ")");
        std::string s(len, '\0');
        if (len && !f.read(&s[0], len)) throw error(path + ": truncated inside token " + std::to_string(i));
        t.vocab.push_back(s);
        t.scores.push_back(std::isfinite(score) ? score : -1e30f);
        t.ids.emplace(s, i); // first occurrence wins, as llama2.c's sorted lookup finds one of them
    }
    if ((int)t.vocab.size() > 2) t.bos_id = 1, t.eos_id = 2;
    return t;
}

// One word of SentencePiece-style text (spaces already spelled as the vocabulary spells them): code points,
// <0xXX> byte fallback for those not in the vocabulary, then merges.
static void encode_spm_word(std::vector<int>& out, const tokenizer& t, const std::string& s) {
    std::vector<int> ids;
    for (size_t i = 0; i < s.size();) {
        int n = utf8_seq_len(s, i);
        std::string cp = s.substr(i, n);
        encode_steps++;
        auto it = t.ids.find(cp);
        if (it != t.ids.end()) {
            ids.push_back(it->second);
        } else { // byte fallback: <0x00> is id 3 in llama2.c vocabularies; look the piece up to be sure
            for (unsigned char b : cp) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", b);
                auto bt = t.ids.find(name);
                if (bt == t.ids.end()) throw error("tokenizer: byte " + std::string(name) + " is not in the vocabulary");
                ids.push_back(bt->second);
            }
        }
        i += n;
    }
    // merge adjacent pieces whose concatenation is in the vocabulary: by merge rank (tokenizer.json) or by the
    // merged token's score (llama2.c, GGUF)
    std::vector<std::string> word;
    word.reserve(ids.size());
    for (int id : ids) word.push_back(t.vocab[id]);
    bpe_merge(word, t, t.scores.empty() ? BPE_RANK : BPE_SCORE);
    ids.clear();
    for (const std::string& w : word) {
        auto it = t.ids.find(w);
        if (it == t.ids.end()) throw error("tokenizer: piece '" + w + "' has no id");
        ids.push_back(it->second);
    }
    out.insert(out.end(), ids.begin(), ids.end());
}

// at_start: the text begins the input (no special token before it).
void encode_spm(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start) {
    if (text.empty()) return;
    // The dummy prefix: llama2.c, GGUF (llama.cpp) and a Prepend normalizer put a space before every piece of
    // text, also right after a special token; a Metaspace pre-tokenizer only where the piece does not already
    // start with one, and with prepend_scheme "first" only at the very start of the input.
    const bool starts_with_space = text[0] == ' ' || text.compare(0, 3, underline) == 0;
    const bool prefix = t.dummy_prefix && (!t.prefix_first_only || at_start) && !(t.prefix_unless_space && starts_with_space);
    std::string s = prefix ? " " + text : text;
    if (t.space_is_underline) { // tokenizer.json / GGUF SentencePiece vocabularies spell a space as "▁"
        std::string u;
        u.reserve(s.size() + s.size() / 4);
        for (char c : s)
            if (c == ' ') u += underline;
            else u += c;
        s.swap(u);
    }
    if (!t.split_words) {
        encode_spm_word(out, t, s);
        return;
    }
    // Metaspace split: a word starts at each "▁" (which belongs to the word after it); merges stay inside words
    for (size_t w = 0; w < s.size();) {
        size_t next = s.find(underline, w + 1); // w + 1 and w + 2 are inside the "▁" at w, if any
        if (next == std::string::npos) next = s.size();
        encode_spm_word(out, t, s.substr(w, next - w));
        w = next;
    }
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json with a BPE model
// ---------------------------------------------------------------------------------------------

tokenizer parse_bpe_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path) {
    tokenizer t;
    t.kind = TOK_BYTE_BPE;
    t.split_regex = gpt2_split_regex;
    // Two families: ByteLevel (GPT-2, Llama 3, Qwen2; a Split pre-tokenizer brings its own regex) and
    // SentencePiece-style "▁" for spaces with <0xXX> byte fallback (Llama 2, TinyLlama, Mistral), written
    // either as a Prepend+Replace normalizer or as a Metaspace pre-tokenizer.
    std::vector<const nlohmann::json*> pre, norm;
    if (j.contains("pre_tokenizer")) flatten_components(pre, j["pre_tokenizer"], "pretokenizers", path + ": pre_tokenizer");
    if (j.contains("normalizer")) flatten_components(norm, j["normalizer"], "normalizers", path + ": normalizer");
    bool byte_level = false, metaspace = false, prepend_norm = false, underline_norm = false, split = false;
    int digits = 0; // a Digits pre-tokenizer before ByteLevel: 1 individual digits, 2 runs of digits
    std::string unsupported;
    for (const nlohmann::json* p : norm) {
        std::string nt = json_string(*p, "type", "", path + ": normalizer");
        if (nt == "NFC") t.nfc = true;
        if (nt == "Prepend" && json_string(*p, "prepend", "", path + ": Prepend normalizer") == underline)
            prepend_norm = underline_norm = true;
        if (nt == "Replace" && json_string(*p, "content", "", path + ": Replace normalizer") == underline)
            underline_norm = true;
    }
    for (const nlohmann::json* p : pre) {
        const std::string where = path + ": pre_tokenizer";
        std::string pt = json_string(*p, "type", "", where);
        if (pt == "ByteLevel") {
            byte_level = true;
        } else if (pt == "Digits") { // SmolLM: digits cut out one by one before ByteLevel's GPT-2 pattern
            if (!byte_level) digits = json_bool(*p, "individual_digits", false, where) ? 1 : 2;
        } else if (pt == "Metaspace") {
            metaspace = true;
            read_metaspace(t, *p, where);
        } else if (pt == "Split") {
            if (p->contains("pattern") && (*p)["pattern"].is_object() && (*p)["pattern"].contains("Regex")) {
                t.split_regex = json_string((*p)["pattern"], "Regex", "", where + ": Split pattern");
                split = true;
            }
        } else if (pt != "Sequence") {
            unsupported = pt;
        }
    }
    if (metaspace || underline_norm || json_bool(m, "byte_fallback", false, path + ": model")) {
        t.kind = TOK_SPM_BPE;
        t.space_is_underline = true;
        t.split_regex.clear();
        if (prepend_norm) t.dummy_prefix = true; // Prepend normalizer: every piece of text, even after a special
    } else if (!byte_level && !pre.empty()) {
        if (unsupported.empty()) unsupported = json_string(*pre.front(), "type", "", path + ": pre_tokenizer");
        throw error(path + ": pre-tokenizer '" + unsupported + "' is not supported (expected ByteLevel or Metaspace)");
    }
    if (t.kind == TOK_BYTE_BPE && digits && !split) t.split_regex = gpt2_digits_split_regex(digits == 1);
    t.ignore_merges = json_bool(m, "ignore_merges", false, path + ": model");
    if (!t.split_regex.empty()) { // a bad pattern is the file's fault: say so now, not at the first encode
        try {
            regex_for(t.split_regex);
        } catch (const error& e) {
            throw error(path + ": " + e.what());
        }
    }
    if (!m.contains("vocab")) throw error(path + ": model has no vocab");
    set_vocab(t, m["vocab"], path);
    if (m.contains("merges") && m["merges"].is_array()) {
        size_t n = 0;
        for (const auto& e : m["merges"]) {
            n++;
            if (e.is_string()) {
                std::string s = e;
                size_t sp = s.find(' ');
                if (sp == std::string::npos) throw error(path + ": merge " + std::to_string(n) + " is not 'left right'");
                add_merge(t, s.substr(0, sp), s.substr(sp + 1), path, n);
            } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
                add_merge(t, e[0], e[1], path, n);
            } else {
                throw error(path + ": merge " + std::to_string(n) + " is neither 'a b' nor [a, b]");
            }
        }
    }
    read_added_tokens(t, j, path);
    find_specials(t);
    if (t.kind == TOK_SPM_BPE) { // the usual ids; tokenizer_config.json may say otherwise
        auto b = t.ids.find("<s>"), e = t.ids.find("</s>");
        if (b != t.ids.end()) t.bos_id = b->second, t.add_bos = true;
        if (e != t.ids.end()) t.eos_id = e->second;
    }
    return t;
}

} // namespace gb
