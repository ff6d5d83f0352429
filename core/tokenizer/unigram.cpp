// SentencePiece Unigram (T5, Marian, mBART-50, XLM-R): tokenizer.json's normalizers (the Precompiled charsmap,
// Unicode forms, Replace, ...), WhitespaceSplit / Metaspace, the best segmentation by summed piece scores
// (Viterbi), and the Unigram model's tokenizer.json part.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "tokenizer/internal.h"
#include "util/error.h"
#include "util/json_util.h"

namespace gb {

// Standard base64 (RFC 4648), '=' padding optional; false on any other character.
static bool base64_decode(const std::string& in, std::string& out) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    size_t n = in.size();
    while (n > 0 && in[n - 1] == '=' && in.size() - n < 2) n--;
    if (n % 4 == 1) return false;
    out.clear();
    out.reserve(n / 4 * 3 + 2);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const int v = value(in[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += (char)((acc >> bits) & 0xff);
        }
    }
    return true;
}

// A Precompiled normalizer's precompiled_charsmap (base64): a little-endian uint32 byte size of the trie, the
// trie's uint32 units, then the replacement strings. Null or "": a step that changes nothing.
static void read_precompiled(normalizer_step& st, const nlohmann::json& p, const std::string& where) {
    if (!p.contains("precompiled_charsmap") || p["precompiled_charsmap"].is_null()) return;
    if (!p["precompiled_charsmap"].is_string()) throw error(where + ": precompiled_charsmap is not a base64 string");
    std::string bytes;
    if (!base64_decode(p["precompiled_charsmap"].get<std::string>(), bytes))
        throw error(where + ": precompiled_charsmap is not valid base64");
    if (bytes.empty()) return;
    if (bytes.size() < 4) throw error(where + ": precompiled_charsmap is shorter than its 4-byte header");
    const unsigned char* b = (const unsigned char*)bytes.data();
    const uint64_t trie_bytes = (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24;
    if (trie_bytes % 4 != 0 || trie_bytes > bytes.size() - 4)
        throw error(where + ": precompiled_charsmap's trie of " + std::to_string(trie_bytes) + " bytes does not fit its " +
                    std::to_string(bytes.size() - 4) + " bytes (or is not whole uint32 units)");
    st.trie.resize(trie_bytes / 4);
    for (size_t i = 0; i < st.trie.size(); i++) {
        const unsigned char* u = b + 4 + 4 * i;
        st.trie[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    st.normalized = bytes.substr(4 + trie_bytes);
    const long bad = utf8_invalid_at(st.normalized);
    if (bad >= 0)
        throw error(where + ": precompiled_charsmap's replacement strings are not valid UTF-8 (byte " +
                    std::to_string(bad) + ")");
}

// The charsmap's rule for the shortest prefix of key[0, n) it has one for (HF's spm_precompiled takes the first
// match of the trie's common-prefix search), as its replacement; false when none. A NUL byte ends the key.
// Darts-clone units: bits 0-7 the label (bit 31 set: not a node), bit 8 "has a leaf", bits 10-31 the offset to
// the children (shifted left by 8 when bit 9 is set); a leaf unit's low 31 bits are its value.
static bool charsmap_rule(const normalizer_step& st, const char* key, size_t n, std::string& replacement) {
    const std::vector<uint32_t>& a = st.trie;
    if (a.empty()) return false;
    auto offset = [](uint32_t u) { return (size_t)((u >> 10) << ((u & (1u << 9)) >> 6)); };
    size_t pos = offset(a[0]);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)key[i];
        if (c == 0) return false;
        pos ^= c;
        if (pos >= a.size()) return false;
        const uint32_t u = a[pos];
        if ((u & 0x800000ffu) != c) return false;
        pos ^= offset(u);
        if ((u >> 8) & 1) {
            if (pos >= a.size()) return false;
            const size_t v = a[pos] & 0x7fffffffu;
            if (v > st.normalized.size())
                throw error("tokenizer: the Precompiled charsmap points past its replacement strings (offset " +
                            std::to_string(v) + " of " + std::to_string(st.normalized.size()) + ")");
            size_t e = st.normalized.find('\0', v);
            if (e == std::string::npos) e = st.normalized.size();
            replacement.assign(st.normalized, v, e - v);
            if (utf8_invalid_at(replacement) >= 0)
                throw error("tokenizer: the Precompiled charsmap points into the middle of a character (offset " +
                            std::to_string(v) + ")");
            return true;
        }
    }
    return false;
}

// The charsmap over a text as HF's tokenizers apply it: per extended grapheme cluster, a cluster under 6 bytes
// that the charsmap has a rule for (a rule for any prefix of it) is replaced whole by that rule's text;
// otherwise each character by its own rule, or kept. (SentencePiece itself takes the longest rule at each
// position; we follow HF.)
static std::string precompiled_normalize(const normalizer_step& st, const std::string& s) {
    if (st.trie.empty()) return s;
    std::string out, rep;
    out.reserve(s.size());
    utf8proc_int32_t state = 0;
    size_t g = 0; // the current cluster's start
    auto flush = [&](size_t end) {
        if (end - g < 6 && charsmap_rule(st, s.data() + g, end - g, rep)) {
            out += rep;
            return;
        }
        for (size_t i = g; i < end;) {
            const int n = utf8_seq_len(s, i);
            if (charsmap_rule(st, s.data() + i, (size_t)n, rep)) out += rep;
            else out.append(s, i, n);
            i += n;
        }
    };
    uint32_t prev = 0;
    for (size_t i = 0; i < s.size();) {
        const int n = utf8_seq_len(s, i);
        const uint32_t c = utf8_code_point(s, i, n);
        if (i > 0 && utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)c, &state)) {
            flush(i);
            g = i;
        }
        prev = c;
        i += n;
    }
    if (!s.empty()) flush(s.size());
    return out;
}

// Every match of a Replace normalizer's string or regex replaced by its content (literally). An empty regex
// match puts the content before the next character and moves on, as JavaScript's and Rust's replace-all do.
static std::string replace_all(const normalizer_step& st, const std::string& s) {
    std::string out;
    if (!st.regex) {
        size_t pos = 0;
        for (size_t f; (f = s.find(st.pattern, pos)) != std::string::npos; pos = f + st.pattern.size())
            out.append(s, pos, f - pos).append(st.content);
        return out.append(s, pos, std::string::npos);
    }
    const pcre2_code* re = regex_for(st.pattern);
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create_from_pattern(re, nullptr),
                                                                     pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    size_t pos = 0;
    while (pos <= s.size()) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s.data(), s.size(), pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            rc = pcre2_match(re, (PCRE2_SPTR)s.data(), s.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.get(),
                             nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            throw error("tokenizer: the Replace normalizer's regex failed at byte " + std::to_string(pos) + ": " +
                        std::string((const char*)msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        out.append(s, pos, ov[0] - pos).append(st.content);
        if (ov[1] > ov[0]) {
            pos = ov[1];
        } else if (ov[0] < s.size()) { // empty match: keep the next character, look again after it
            const int n = utf8_seq_len(s, ov[0]);
            out.append(s, ov[0], n);
            pos = ov[0] + n;
        } else {
            pos = s.size() + 1;
        }
    }
    if (pos < s.size()) out.append(s, pos, std::string::npos);
    return out;
}

// The normalizer steps in order, on text between specials (valid UTF-8 in, valid UTF-8 out).
static std::string unigram_normalize(const tokenizer& t, std::string s) {
    for (const normalizer_step& st : t.normalizers) {
        switch (st.kind) {
        case NORM_NFC: s = utf8proc_normalize(s, UTF8PROC_COMPOSE, "NFC"); break;
        case NORM_NFD: s = utf8proc_normalize(s, UTF8PROC_DECOMPOSE, "NFD"); break;
        case NORM_NFKC: s = utf8proc_normalize(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT, "NFKC"); break;
        case NORM_NFKD: s = utf8proc_normalize(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, "NFKD"); break;
        case NORM_LOWERCASE: s = lowercase_chars(s); break;
        case NORM_STRIP: {
            size_t b = 0, e = s.size();
            if (st.strip_left) b = white_space_after(s, 0);
            if (st.strip_right) e = std::max(b, white_space_before(s, b, e));
            s = s.substr(b, e - b);
            break;
        }
        case NORM_REPLACE: s = replace_all(st, s); break;
        case NORM_PREPEND:
            if (!s.empty()) s.insert(0, st.content);
            break;
        case NORM_PRECOMPILED: s = precompiled_normalize(st, s); break;
        }
    }
    return s;
}

// The model id of exactly this piece, -1 when the model has none (added tokens are not model pieces).
static int model_piece_id(const tokenizer& t, const std::string& piece) {
    auto it = std::lower_bound(t.pieces_sorted.begin(), t.pieces_sorted.end(), piece,
                               [&](int id, const std::string& p) { return t.vocab[id] < p; });
    return it != t.pieces_sorted.end() && t.vocab[*it] == piece ? *it : -1;
}

// One pre-tokenized word: the segmentation into model pieces with the highest summed score (Viterbi), as HF's
// Unigram::encode_optimized: at each character start, every piece the word continues with (shortest first)
// competes for the position where it ends, a later candidate winning only with a strictly higher score; a
// character no single-character piece covers may be the unknown piece (score unk_score). Consecutive unknown
// pieces become one; a piece that is no model piece then (an unknown run) is its bytes' <0xXX> pieces with
// byte_fallback when all exist, else the unknown id.
static void unigram_word(std::vector<int>& out, const tokenizer& t, const std::string& w) {
    struct best_end {
        double score = 0; // the best segmentation of w[0, here)
        size_t start = 0; // where its last piece starts
        int id = -1;      // its last piece; -1: no segmentation reaches here (yet)
    };
    const size_t n = w.size();
    std::vector<best_end> best(n + 1);
    best[0].id = -2; // the empty start
    auto offer = [&](size_t start, size_t end, double score, int id) {
        const double s = best[start].score + score;
        if (best[end].id == -1 || s > best[end].score) best[end] = {s, start, id};
    };
    for (size_t i = 0; i < n;) {
        const int mblen = utf8_seq_len(w, i);
        bool single = false;
        // the model pieces w[i..] starts with: narrow the sorted pieces one byte at a time
        size_t lo = 0, hi = t.pieces_sorted.size();
        for (size_t k = 0; i + k < n && lo < hi; k++) {
            encode_steps++;
            if (t.vocab[t.pieces_sorted[lo]].size() == k) lo++; // the piece w[i, i+k) itself, already offered
            const unsigned char c = (unsigned char)w[i + k];
            auto byte_k = [&](int id) { return (unsigned char)t.vocab[id][k]; };
            lo = std::partition_point(t.pieces_sorted.begin() + lo, t.pieces_sorted.begin() + hi,
                                      [&](int id) { return byte_k(id) < c; }) - t.pieces_sorted.begin();
            hi = std::partition_point(t.pieces_sorted.begin() + lo, t.pieces_sorted.begin() + hi,
                                      [&](int id) { return byte_k(id) <= c; }) - t.pieces_sorted.begin();
            if (lo < hi && t.vocab[t.pieces_sorted[lo]].size() == k + 1) {
                const int id = t.pieces_sorted[lo];
                offer(i, i + k + 1, t.piece_scores[id], id);
                if (k + 1 == (size_t)mblen) single = true;
            }
        }
        if (!single) {
            if (t.unk_id < 0)
                throw error("tokenizer: '" + w.substr(i, mblen) +
                            "' is not in the Unigram vocabulary and the model has no unk_id");
            offer(i, i + mblen, t.unk_score, t.unk_id);
        }
        i += mblen;
    }
    // back from the end; runs of the unknown id fuse into one piece
    std::vector<std::pair<size_t, size_t>> pieces; // [start, end) of each piece, last first
    std::vector<int> piece_ids;
    for (size_t end = n; end > 0;) {
        const best_end& b = best[end];
        if (b.id == t.unk_id && !piece_ids.empty() && piece_ids.back() == t.unk_id) pieces.back().first = b.start;
        else pieces.push_back({b.start, end}), piece_ids.push_back(b.id);
        end = b.start;
    }
    for (size_t k = pieces.size(); k-- > 0;) {
        if (piece_ids[k] != t.unk_id) {
            out.push_back(piece_ids[k]);
            continue;
        }
        const std::string s = w.substr(pieces[k].first, pieces[k].second - pieces[k].first);
        const int id = model_piece_id(t, s); // a literal "<unk>" is that piece
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        if (t.byte_fallback) {
            std::vector<int> bytes;
            for (unsigned char c : s) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", c);
                const int b = model_piece_id(t, name);
                if (b < 0) break;
                bytes.push_back(b);
            }
            if (bytes.size() == s.size()) {
                out.insert(out.end(), bytes.begin(), bytes.end());
                continue;
            }
        }
        out.push_back(t.unk_id);
    }
}

// Text between specials: normalizers, WhitespaceSplit, Metaspace, then each word's pieces.
// at_start: the text begins the input (Metaspace prepend_scheme "first").
void encode_unigram(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start) {
    const std::string s = unigram_normalize(t, text);
    std::vector<std::pair<size_t, size_t>> words; // [begin, end) in s
    if (t.whitespace_split) {
        for (size_t i = 0; i < s.size();) {
            const size_t b = white_space_after(s, i);
            if (b >= s.size()) break;
            size_t e = b;
            while (e < s.size()) {
                const int n = utf8_seq_len(s, e);
                if (is_white_space(utf8_code_point(s, e, n))) break;
                e += n;
            }
            words.push_back({b, e});
            i = e;
        }
    } else if (!s.empty()) {
        words.push_back({0, s.size()});
    }
    for (size_t k = 0; k < words.size(); k++) {
        std::string w = s.substr(words[k].first, words[k].second - words[k].first);
        if (!t.metaspace) {
            unigram_word(out, t, w);
            continue;
        }
        std::string u; // " " -> "▁", then the prefix
        u.reserve(w.size() + 8);
        for (char c : w)
            if (c == ' ') u += underline;
            else u += c;
        // "first": only the word at the very start of the input (HF: the word's offset in the original is 0)
        const bool first = at_start && words[k].first == 0;
        if (t.dummy_prefix && (!t.prefix_first_only || first) && u.compare(0, 3, underline) != 0)
            u.insert(0, underline);
        if (!t.split_words) {
            unigram_word(out, t, u);
            continue;
        }
        for (size_t b = 0; b < u.size();) { // a word starts at each "▁" (the "▁" belongs to the word after it)
            size_t e = u.find(underline, b + 1);
            if (e == std::string::npos) e = u.size();
            unigram_word(out, t, u.substr(b, e - b));
            b = e;
        }
    }
}

// The Unigram model's pieces (id = position in "vocab") and scores, unk_id and byte_fallback.
static void read_unigram_model(tokenizer& t, const nlohmann::json& m, const std::string& path) {
    const std::string um = path + ": Unigram model";
    if (!m.contains("vocab") || !m["vocab"].is_array()) throw error(um + ": vocab is not a list of [piece, score]");
    const nlohmann::json& v = m["vocab"];
    if (v.empty()) throw error(um + ": vocab is empty");
    if ((int64_t)v.size() > max_vocab)
        throw error(um + ": vocab has more than " + std::to_string(max_vocab) + " pieces");
    t.vocab.reserve(v.size());
    t.piece_scores.reserve(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        const nlohmann::json& e = v[i];
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
            throw error(um + ": vocab entry " + std::to_string(i) + " is not [piece, score] (" +
                        e.dump().substr(0, 60) + ")");
        const std::string piece = e[0].get<std::string>();
        const double score = e[1].get<double>();
        if (!std::isfinite(score)) throw error(um + ": the score of piece " + std::to_string(i) + " is not finite");
        t.ids[piece] = (int)i; // a repeated piece: the later id, as HF
        t.vocab.push_back(piece);
        t.piece_scores.push_back(score);
    }
    t.unk_score = *std::min_element(t.piece_scores.begin(), t.piece_scores.end()) - 10.0;
    for (size_t i = 0; i < t.vocab.size(); i++)
        if (!t.vocab[i].empty() && t.ids[t.vocab[i]] == (int)i) t.pieces_sorted.push_back((int)i);
    std::sort(t.pieces_sorted.begin(), t.pieces_sorted.end(), [&](int a, int b) { return t.vocab[a] < t.vocab[b]; });
    if (m.contains("unk_id") && !m["unk_id"].is_null()) {
        const nlohmann::json& u = m["unk_id"];
        if (!u.is_number_integer() || u.get<int64_t>() < 0 || u.get<int64_t>() >= (int64_t)t.vocab.size())
            throw error(um + ": unk_id " + u.dump().substr(0, 40) + " is outside the vocab (0.." +
                        std::to_string(t.vocab.size() - 1) + ")");
        t.unk_id = u.get<int>();
    }
    t.byte_fallback = json_bool(m, "byte_fallback", false, um);
}

// tokenizer.json's normalizer, flattened into t.normalizers in order.
static void read_unigram_normalizers(tokenizer& t, const nlohmann::json& j, const std::string& path) {
    std::vector<const nlohmann::json*> norm;
    if (j.contains("normalizer")) flatten_components(norm, j["normalizer"], "normalizers", path + ": normalizer");
    for (const nlohmann::json* p : norm) {
        const std::string where = path + ": normalizer";
        const std::string nt = json_string(*p, "type", "", where);
        normalizer_step st;
        if (nt == "Sequence") continue;
        if (nt == "NFC") st.kind = NORM_NFC;
        else if (nt == "NFD") st.kind = NORM_NFD;
        else if (nt == "NFKC") st.kind = NORM_NFKC;
        else if (nt == "NFKD") st.kind = NORM_NFKD;
        else if (nt == "Lowercase") st.kind = NORM_LOWERCASE;
        else if (nt == "Strip") {
            st.kind = NORM_STRIP;
            st.strip_left = json_bool(*p, "strip_left", false, where + " Strip");
            st.strip_right = json_bool(*p, "strip_right", false, where + " Strip");
        } else if (nt == "Prepend") {
            st.kind = NORM_PREPEND;
            st.content = json_string(*p, "prepend", "", where + " Prepend");
        } else if (nt == "Replace") {
            // "pattern": {"String": "..."} or {"Regex": "..."}; "content": the replacement
            st.kind = NORM_REPLACE;
            const std::string w = where + " Replace";
            const nlohmann::json* pat = p->contains("pattern") ? &(*p)["pattern"] : nullptr;
            if (pat && pat->is_object() && pat->contains("String") && (*pat)["String"].is_string()) {
                st.pattern = (*pat)["String"].get<std::string>();
            } else if (pat && pat->is_object() && pat->contains("Regex") && (*pat)["Regex"].is_string()) {
                st.pattern = (*pat)["Regex"].get<std::string>();
                st.regex = true;
                try {
                    regex_for(st.pattern);
                } catch (const error& e) {
                    throw error(w + ": " + e.what());
                }
            } else {
                throw error(w + ": pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
            }
            if (st.pattern.empty()) throw error(w + ": the pattern is empty");
            if (!p->contains("content") || !(*p)["content"].is_string()) throw error(w + ": content is not a string");
            st.content = (*p)["content"].get<std::string>();
        } else if (nt == "Precompiled") {
            st.kind = NORM_PRECOMPILED;
            read_precompiled(st, *p, where + " Precompiled");
        } else {
            throw error(path + ": normalizer '" + nt +
                        "' is not supported with Unigram (expected Precompiled, NFKC, NFKD, NFC, NFD, Replace, Strip, "
                        "Lowercase, Prepend or a Sequence of them)");
        }
        t.normalizers.push_back(std::move(st));
    }
}

// tokenizer.json with a Unigram model: "vocab" [[piece, score], ...] (id = position), "unk_id", "byte_fallback".
tokenizer parse_unigram_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path) {
    tokenizer t;
    t.kind = TOK_UNIGRAM;
    t.space_is_underline = true;
    read_unigram_model(t, m, path);
    read_unigram_normalizers(t, j, path);

    std::vector<const nlohmann::json*> pre, dec;
    if (j.contains("pre_tokenizer"))
        flatten_components(pre, j["pre_tokenizer"], "pretokenizers", path + ": pre_tokenizer");
    for (const nlohmann::json* p : pre) {
        const std::string where = path + ": pre_tokenizer";
        const std::string pt = json_string(*p, "type", "", where);
        if (pt == "Sequence") continue;
        if (pt == "WhitespaceSplit") {
            if (t.metaspace)
                throw error(where + ": WhitespaceSplit after Metaspace is not supported (expected it before)");
            t.whitespace_split = true;
        } else if (pt == "Metaspace") {
            if (t.metaspace) throw error(where + ": more than one Metaspace pre-tokenizer");
            const std::string rep = json_string(*p, "replacement", underline, where + " Metaspace");
            if (rep != underline)
                throw error(where + ": Metaspace replacement '" + rep + "' is not supported (expected \"▁\")");
            t.metaspace = true;
            read_metaspace(t, *p, where + " Metaspace");
        } else {
            throw error(path + ": pre-tokenizer '" + pt +
                        "' is not supported with Unigram (expected Metaspace, WhitespaceSplit or a Sequence of them)");
        }
    }
    // the decoder: a Metaspace decoder with a prefix scheme drops the first token's "▁"s; others only turn "▁"
    // into spaces and <0xXX> into bytes, as decode() always does
    if (j.contains("decoder")) flatten_components(dec, j["decoder"], "decoders", path + ": decoder");
    for (const nlohmann::json* p : dec) {
        const std::string where = path + ": decoder Metaspace";
        if (json_string(*p, "type", "", path + ": decoder") != "Metaspace") continue;
        std::string scheme = json_string(*p, "prepend_scheme", "", where);
        if (scheme.empty()) scheme = json_bool(*p, "add_prefix_space", true, where) ? "always" : "never";
        t.decode_strip_space = scheme != "never";
    }

    const std::vector<std::string> pieces = t.vocab;
    read_added_tokens(t, j, path);
    for (size_t i = 0; i < pieces.size(); i++) // the lattice looks pieces up by their ids
        if (t.vocab[i] != pieces[i])
            throw error(path + ": added token '" + t.vocab[i].substr(0, 40) + "' has id " + std::to_string(i) +
                        ", which the Unigram vocab gives to '" + pieces[i].substr(0, 40) + "'");
    auto b = t.ids.find("<s>"), e = t.ids.find("</s>");
    if (b != t.ids.end()) t.bos_id = b->second;
    if (e != t.ids.end()) t.eos_id = e->second;
    return t;
}

} // namespace gb
