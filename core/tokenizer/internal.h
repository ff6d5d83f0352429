// What the tokenizer's parts share (core/tokenizer only; the rest of the code includes tokenizer.h): UTF-8
// helpers, GPT-2's byte map, the split regexes, the JSON readers the tokenizer.json parsers have in common, and
// each algorithm's encoder and tokenizer.json parser, which tokenizer.cpp and load.cpp dispatch to.
#pragma once
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <pcre2.h>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace gb {

// The largest vocabulary any loader accepts (config.json and GGUF say the same): ids beyond it are lies that
// would size allocations.
constexpr int64_t max_vocab = 4000000;

constexpr const char* underline = "\xE2\x96\x81"; // "▁", SentencePiece's space

// ---- utf8.cpp: UTF-8 and Unicode ----
// (the three per-character helpers are inline: every encoder calls them in its inner loop)
// Length of the valid UTF-8 sequence at s[i], or 0 if invalid (overlong, surrogate, > U+10FFFF, truncated).
inline int utf8_seq_len(const std::string& s, size_t i) {
    const unsigned char* p = (const unsigned char*)s.data() + i;
    size_t left = s.size() - i;
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    int n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    if (left < (size_t)n) return 0;
    for (int k = 1; k < n; k++) {
        if ((p[k] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[k] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

// The code point of the valid n-byte sequence at s[i] (n from utf8_seq_len).
inline uint32_t utf8_code_point(const std::string& s, size_t i, int n) {
    const unsigned char* p = (const unsigned char*)s.data() + i;
    if (n == 1) return p[0];
    uint32_t cp = p[0] & (0x7f >> n);
    for (int k = 1; k < n; k++) cp = (cp << 6) | (p[k] & 0x3f);
    return cp;
}

// Unicode White_Space (Rust's char::is_whitespace, which HF's tokenizers use): TAB..CR, space, NEL, NBSP, the
// other Zs spaces, LINE and PARAGRAPH SEPARATOR. Stable since Unicode 6.3 dropped U+180E.
inline bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The UTF-8 of one code point.
std::string utf8_encode(uint32_t cp);
// Where the white space that ends text[begin, end) starts; where the white space from pos on ends.
size_t white_space_before(const std::string& text, size_t begin, size_t end);
size_t white_space_after(const std::string& text, size_t pos);
// s through utf8proc_map with UTF8PROC_STABLE | options (UTF8PROC_COMPOSE: NFC, ...); `what` names the form in
// the error when utf8proc fails.
std::string utf8proc_normalize(const std::string& s, int options, const char* what);
// Lower case per character, as HF's BertNormalizer and Lowercase normalizer (no final-sigma rule).
std::string lowercase_chars(const std::string& s);

// GPT-2's reversible byte -> printable unicode map
struct byte_map {
    std::string to_unicode[256];                    // byte -> UTF-8 of its stand-in character
    std::unordered_map<std::string, int> to_byte;   // stand-in character -> byte
};
const byte_map& bytes_unicode();

// ---- pretokenize.cpp: the split regex ----
extern const char* const gpt2_split_regex; // GPT-2's pre-tokenizer pattern
// The compiled pattern (cached, shared by all threads); throws gb::error when it does not compile.
const pcre2_code* regex_for(const std::string& pattern);
// Appends the regex pieces of text (valid UTF-8) to out; they always concatenate back to the text.
void split_pieces(std::vector<std::string>& out, const std::string& text, const std::string& pattern);

// ---- load.cpp: readers the vocabulary sources share (path / where: what errors name) ----
// tokenizer.json's "vocab" object, token -> id, into t.vocab [V] and t.ids.
void set_vocab(tokenizer& t, const nlohmann::json& v, const std::string& path);
// Merge "a b" (line: its number, for errors) at the next rank; a, b and ab must be in the vocabulary.
void add_merge(tokenizer& t, const std::string& a, const std::string& b, const std::string& path, size_t line);
// <|endoftext|> as a special token, the EOS and (when there is none) the BOS.
void find_specials(tokenizer& t);
// A pre-tokenizer or normalizer and, for a Sequence, its members (key `members`), recursively, in order.
void flatten_components(std::vector<const nlohmann::json*>& out, const nlohmann::json& p, const char* members,
                        const std::string& where);
// tokenizer.json "added_tokens": vocabulary entries matched verbatim in the raw text, lstrip / rstrip.
void read_added_tokens(tokenizer& t, const nlohmann::json& j, const std::string& path);
// A Metaspace pre-tokenizer's prepend scheme and split flag.
void read_metaspace(tokenizer& t, const nlohmann::json& p, const std::string& where);
// A token a tokenizer_config.json names: "[MASK]" or {"content": "[MASK]", ...}; "" when absent or null.
std::string config_token(const nlohmann::json& j, const char* key);

// ---- each algorithm's tokenizer.json model (j: the whole file, m: its "model"), called by load.cpp; in bpe.cpp,
// wordpiece.cpp and unigram.cpp ----
tokenizer parse_bpe_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path);
tokenizer parse_wordpiece_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path);
tokenizer parse_unigram_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path);

// ---- each algorithm's encoder, called by tokenizer.cpp: text between specials (valid UTF-8) -> ids appended
// to out; at_start: the text begins the input (no special token before it), for the prefix schemes ----
void encode_byte_bpe(std::vector<int>& out, const tokenizer& t, const std::string& text);               // bpe.cpp
void encode_spm(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start);     // bpe.cpp
void encode_wordpiece(std::vector<int>& out, const tokenizer& t, const std::string& text);              // wordpiece.cpp
void encode_unigram(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start); // unigram.cpp

// ---- encode's work, counted (tokenizer.cpp) ----
// Steps gb::encode has taken on this thread: one per special token compared (tokenizer.cpp), split regex match
// (pretokenize.cpp), BPE pair looked up or candidate taken from the heap, code point looked up (bpe.cpp),
// WordPiece vocabulary lookup (wordpiece.cpp) and byte by which a Unigram lattice position narrows the sorted
// pieces (unigram.cpp). Tests read it around an encode to check that the work grows linearly with the text: a
// count does not vary with the machine's load as a clock does.
extern thread_local uint64_t encode_steps;

} // namespace gb
