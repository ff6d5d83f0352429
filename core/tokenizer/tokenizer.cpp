// Tokenizers: byte-level BPE (GPT-2, Llama 3, Qwen2, RoBERTa), SentencePiece-style BPE (Llama 2, llama2.c),
// WordPiece (BERT) and SentencePiece Unigram (T5, Marian, mBART-50): loaders, encode/decode, UTF-8 helpers.
//
// Sections: UTF-8 | byte <-> unicode map | loading | pre-tokenizer (PCRE2) | BPE merging | byte-level encode |
// SentencePiece-style encode | WordPiece | Unigram | encode/decode
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <utf8proc.h>

#include "util/error.h"
#include "util/json_util.h"

namespace gb {

// The largest vocabulary any loader accepts (config.json and GGUF say the same): ids beyond it are lies that
// would size allocations.
static const int64_t max_vocab = 4000000;

// GPT-2's pre-tokenizer: contractions, letters, digits, other symbols, whitespace (not before non-space)
static const char* gpt2_split_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// HF's Digits pre-tokenizer (and llama.cpp's "\p{N}" pass) cuts digits out (one by one, or in runs) before
// GPT-2's pattern runs on the text between them. As one pattern: digits first; " ?\p{N}+" dropped (a space
// and the digit after it are never one piece); and whitespace before a digit counts as trailing, as it would
// at the end of the text in between: "a  5" -> "a", "  ", "5" (not "a", " ", " ", "5").
std::string gpt2_digits_split_regex(bool individual_digits) {
    return std::string(individual_digits ? "\\p{N}" : "\\p{N}+") +
           R"(|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+)";
}

// ---------------------------------------------------------------------------------------------
// UTF-8
// ---------------------------------------------------------------------------------------------
// Length of the valid UTF-8 sequence at s[i], or 0 if invalid (overlong, surrogate, > U+10FFFF, truncated).
static int utf8_seq_len(const std::string& s, size_t i) {
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

long utf8_invalid_at(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        int n = utf8_seq_len(s, i);
        if (!n) return (long)i;
        i += n;
    }
    return -1;
}

std::string utf8_sanitize(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        int n = utf8_seq_len(s, i);
        if (n) {
            out.append(s, i, n);
            i += n;
        } else {
            out += "\xEF\xBF\xBD"; // U+FFFD for each invalid byte
            i++;
        }
    }
    return out;
}

static std::string utf8_encode(uint32_t cp) {
    std::string o;
    if (cp < 0x80) o += (char)cp;
    else if (cp < 0x800) o += (char)(0xc0 | (cp >> 6)), o += (char)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        o += (char)(0xe0 | (cp >> 12)), o += (char)(0x80 | ((cp >> 6) & 0x3f)), o += (char)(0x80 | (cp & 0x3f));
    else
        o += (char)(0xf0 | (cp >> 18)), o += (char)(0x80 | ((cp >> 12) & 0x3f)),
            o += (char)(0x80 | ((cp >> 6) & 0x3f)), o += (char)(0x80 | (cp & 0x3f));
    return o;
}

// The code point of the valid n-byte sequence at s[i] (n from utf8_seq_len).
static uint32_t utf8_code_point(const std::string& s, size_t i, int n) {
    const unsigned char* p = (const unsigned char*)s.data() + i;
    if (n == 1) return p[0];
    uint32_t cp = p[0] & (0x7f >> n);
    for (int k = 1; k < n; k++) cp = (cp << 6) | (p[k] & 0x3f);
    return cp;
}

// Unicode White_Space (Rust's char::is_whitespace, which HF's tokenizers use): TAB..CR, space, NEL, NBSP, the
// other Zs spaces, LINE and PARAGRAPH SEPARATOR. Stable since Unicode 6.3 dropped U+180E.
static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// ---------------------------------------------------------------------------------------------
// GPT-2's reversible byte -> printable unicode map
// ---------------------------------------------------------------------------------------------
struct byte_map {
    std::string to_unicode[256];                    // byte -> UTF-8 of its stand-in character
    std::unordered_map<std::string, int> to_byte;   // stand-in character -> byte
};

static const byte_map& bytes_unicode() {
    static const byte_map m = [] {
        byte_map b;
        int extra = 0;
        for (int c = 0; c < 256; c++) {
            bool printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff);
            uint32_t cp = printable ? (uint32_t)c : (uint32_t)(256 + extra++);
            b.to_unicode[c] = utf8_encode(cp);
            b.to_byte[b.to_unicode[c]] = c;
        }
        return b;
    }();
    return m;
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------
static const pcre2_code* regex_for(const std::string& pattern); // pre-tokenizer section below

static void set_vocab(tokenizer& t, const nlohmann::json& v, const std::string& path) {
    if (!v.is_object()) throw error(path + ": vocabulary is not a JSON object of token -> id");
    if ((int64_t)v.size() > max_vocab) throw error(path + ": vocabulary has more than " + std::to_string(max_vocab) + " tokens");
    int max_id = -1;
    for (auto it = v.begin(); it != v.end(); ++it) {
        if (!it.value().is_number_integer()) throw error(path + ": id of token '" + it.key() + "' is not an integer");
        int64_t id = it.value().is_number_unsigned() ? (int64_t)std::min<uint64_t>(it.value().get<uint64_t>(), INT64_MAX)
                                                     : it.value().get<int64_t>();
        if (id < 0 || id >= std::min<int64_t>((int64_t)v.size() * 2 + 1024, max_vocab))
            throw error(path + ": id " + std::to_string(id) + " of token '" + it.key() + "' is out of range");
        max_id = std::max(max_id, (int)id);
    }
    t.vocab.assign(max_id + 1, "");
    for (auto it = v.begin(); it != v.end(); ++it) {
        int id = it.value().get<int>();
        if (!t.vocab[id].empty()) throw error(path + ": id " + std::to_string(id) + " is used twice");
        t.vocab[id] = it.key();
        t.ids[it.key()] = id;
    }
}

static void add_merge(tokenizer& t, const std::string& a, const std::string& b, const std::string& path, size_t line) {
    if (!t.ids.count(a) || !t.ids.count(b) || !t.ids.count(a + b))
        throw error(path + ": merge " + std::to_string(line) + " '" + a + " " + b + "' names a token not in the vocabulary");
    t.merge_rank.emplace(a + " " + b, (int)t.merge_rank.size());
}

static void find_specials(tokenizer& t) {
    auto it = t.ids.find("<|endoftext|>");
    if (it != t.ids.end()) {
        if (std::find(t.specials.begin(), t.specials.end(), "<|endoftext|>") == t.specials.end())
            t.specials.push_back("<|endoftext|>");
        t.eos_id = it->second;
        if (t.bos_id < 0) t.bos_id = it->second; // GPT-2 uses end-of-text as its BOS too
    }
}

tokenizer load_gpt2_tokenizer(const std::string& vocab_json, const std::string& merges_txt) {
    tokenizer t;
    t.kind = TOK_BYTE_BPE;
    t.split_regex = gpt2_split_regex;
    set_vocab(t, read_json_file(vocab_json), vocab_json);
    std::ifstream f(merges_txt, std::ios::binary);
    if (!f) throw error("cannot open " + merges_txt);
    std::string line;
    size_t n = 0;
    while (std::getline(f, line)) {
        n++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
            throw error(merges_txt + ": line " + std::to_string(n) + " is not 'left right'");
        add_merge(t, line.substr(0, sp), line.substr(sp + 1), merges_txt, n);
    }
    find_specials(t);
    return t;
}

// A pre-tokenizer or normalizer and, for a Sequence, its members (recursively), in order. The recursion is
// bounded by the JSON nesting depth, which read_json_file limits.
static void flatten_components(std::vector<const nlohmann::json*>& out, const nlohmann::json& p, const char* members,
                               const std::string& where) {
    if (p.is_null()) return;
    if (!p.is_object()) throw error(where + " is a JSON " + std::string(p.type_name()) + ", expected an object");
    out.push_back(&p);
    if (p.contains(members) && !p[members].is_null()) {
        const nlohmann::json& list = p[members];
        if (!list.is_array()) throw error(where + ": " + members + " is not an array");
        for (const nlohmann::json& q : list) flatten_components(out, q, members, where);
    }
}

static const char* const underline = "\xE2\x96\x81"; // "▁", SentencePiece's space

// tokenizer.json "added_tokens": each extends the vocabulary (or names an entry already in it) and is matched
// verbatim in the raw text; lstrip / rstrip: the token absorbs the white space before / after it.
static void read_added_tokens(tokenizer& t, const nlohmann::json& j, const std::string& path) {
    if (!j.contains("added_tokens") || !j["added_tokens"].is_array()) return;
    // an id beyond the base vocabulary plus the number of added tokens is a lie that would size the vocabulary
    const nlohmann::json& added = j["added_tokens"];
    const int64_t base = (int64_t)t.vocab.size(), limit = std::min<int64_t>(base + (int64_t)added.size(), max_vocab);
    for (const auto& a : added) {
        if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["id"].is_number_integer() ||
            !a["content"].is_string())
            throw error(path + ": added_tokens entry needs id and content");
        int64_t id64 = a["id"].is_number_unsigned() ? (int64_t)std::min<uint64_t>(a["id"].get<uint64_t>(), INT64_MAX)
                                                    : a["id"].get<int64_t>();
        std::string content = a["content"];
        if (id64 < 0 || id64 >= limit)
            throw error(path + ": added token '" + content.substr(0, 40) + "' has id " + std::to_string(id64) +
                        ", outside 0.." + std::to_string(limit - 1) + " (" + std::to_string(base) +
                        " vocabulary entries + " + std::to_string(added.size()) + " added tokens)");
        const int id = (int)id64;
        if (id >= (int)t.vocab.size()) t.vocab.resize(id + 1);
        t.vocab[id] = content;
        t.ids[content] = id;
        t.specials.push_back(content);
        const std::string where = path + ": added token '" + content.substr(0, 40) + "'";
        if (json_bool(a, "lstrip", false, where)) t.lstrip_specials.push_back(content);
        if (json_bool(a, "rstrip", false, where)) t.rstrip_specials.push_back(content);
    }
}

// A Metaspace pre-tokenizer (HF): spaces become "▁"; a "▁" is prepended unless the piece already starts with
// one, with scheme "first" only to the piece at the very start of the input; split cuts words before each "▁".
// Files from before prepend_scheme say add_prefix_space (true: always).
static void read_metaspace(tokenizer& t, const nlohmann::json& p, const std::string& where) {
    std::string scheme = json_string(p, "prepend_scheme", "", where);
    if (scheme.empty()) scheme = json_bool(p, "add_prefix_space", true, where) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
        throw error(where + ": Metaspace prepend_scheme '" + scheme + "' is not one of always, first, never");
    t.dummy_prefix = scheme != "never";
    t.prefix_first_only = scheme == "first";
    t.prefix_unless_space = true;
    t.split_words = json_bool(p, "split", true, where);
}

static tokenizer parse_bpe_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path) {
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

// The id of a token the file names (a post-processor's special token, the model's unk_token).
static int named_token_id(const tokenizer& t, const std::string& token, const std::string& where) {
    auto it = t.ids.find(token);
    if (it == t.ids.end()) throw error(where + ": token '" + token.substr(0, 40) + "' is not in the vocabulary");
    return it->second;
}

// A post-processor's special tokens around a single text: prefix (before $A) and suffix (after it).
struct post_template {
    std::vector<int> prefix, suffix;
    bool encoder_style = false; // BertProcessing / RobertaProcessing: only encoders use these
    int cls = -1, sep = -1;     // their cls / sep token
};

// BertProcessing / RobertaProcessing name their tokens as ["[CLS]", 101]; the id is what the model sees.
static int processing_token(const tokenizer& t, const nlohmann::json& p, const char* key, const std::string& where) {
    if (!p.contains(key) || !p[key].is_array() || p[key].size() != 2 || !p[key][0].is_string() ||
        !p[key][1].is_number_integer())
        throw error(where + ": " + key + " is not [\"token\", id]");
    const int64_t id = p[key][1].is_number_unsigned() ? (int64_t)std::min<uint64_t>(p[key][1].get<uint64_t>(), INT64_MAX)
                                                      : p[key][1].get<int64_t>();
    if (id < 0 || id >= (int64_t)t.vocab.size())
        throw error(where + ": " + key + " id " + std::to_string(id) + " is outside the vocabulary (0.." +
                    std::to_string((int)t.vocab.size() - 1) + ")");
    return (int)id;
}

// Reads a post_processor (recursively through Sequence; ByteLevel adds no tokens). A later processor in a
// Sequence wraps what the earlier ones produced.
static void read_post_processor(post_template& out, const tokenizer& t, const nlohmann::json& p, const std::string& where) {
    if (p.is_null()) return;
    if (!p.is_object()) throw error(where + " is a JSON " + std::string(p.type_name()) + ", expected an object");
    const std::string type = json_string(p, "type", "", where);
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        out.cls = processing_token(t, p, "cls", where + " " + type);
        out.sep = processing_token(t, p, "sep", where + " " + type);
        out.prefix.insert(out.prefix.begin(), out.cls);
        out.suffix.push_back(out.sep);
        out.encoder_style = true;
    } else if (type == "TemplateProcessing") {
        // "single": [{"SpecialToken": {"id": "[CLS]", ...}}, {"Sequence": {"id": "A", ...}}, ...]; a special
        // token's ids come from "special_tokens" (they may be several), else from the vocabulary
        const std::string w = where + " TemplateProcessing";
        if (!p.contains("single") || !p["single"].is_array()) throw error(w + ": no \"single\" template");
        std::vector<int> before, after;
        bool seen_text = false;
        for (const nlohmann::json& item : p["single"]) {
            if (item.is_object() && item.contains("Sequence")) {
                const std::string id = json_string(item["Sequence"], "id", "A", w + ": Sequence");
                if (id != "A") throw error(w + ": the single template names sequence " + id + " (expected A)");
                seen_text = true;
                continue;
            }
            if (!item.is_object() || !item.contains("SpecialToken"))
                throw error(w + ": a template item is neither SpecialToken nor Sequence");
            const std::string name = json_string(item["SpecialToken"], "id", "", w + ": SpecialToken");
            std::vector<int> ids;
            const nlohmann::json* st = p.contains("special_tokens") && p["special_tokens"].is_object() &&
                                               p["special_tokens"].contains(name)
                                           ? &p["special_tokens"][name]
                                           : nullptr;
            if (st && st->is_object() && st->contains("ids") && (*st)["ids"].is_array()) {
                for (const nlohmann::json& v : (*st)["ids"]) {
                    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= (int64_t)t.vocab.size())
                        throw error(w + ": special token '" + name + "' has an id outside the vocabulary");
                    ids.push_back(v.get<int>());
                }
            } else {
                ids.push_back(named_token_id(t, name, w));
            }
            std::vector<int>& side = seen_text ? after : before;
            side.insert(side.end(), ids.begin(), ids.end());
        }
        if (!seen_text) throw error(w + ": the single template has no $A (the text)");
        out.prefix.insert(out.prefix.begin(), before.begin(), before.end());
        out.suffix.insert(out.suffix.end(), after.begin(), after.end());
    } else if (type == "Sequence") {
        if (!p.contains("processors") || !p["processors"].is_array()) throw error(where + ": processors is not an array");
        for (const nlohmann::json& q : p["processors"]) read_post_processor(out, t, q, where);
    } else if (type != "ByteLevel") {
        throw error(where + ": post-processor '" + type + "' is not supported (expected TemplateProcessing, "
                            "BertProcessing, RobertaProcessing, ByteLevel or a Sequence of them)");
    }
}

// tokenizer.json with a WordPiece model (BERT, DistilBERT): BertNormalizer, BertPreTokenizer.
static tokenizer parse_wordpiece_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path) {
    tokenizer t;
    t.kind = TOK_WORDPIECE;
    const std::string wm = path + ": WordPiece model";
    t.subword_prefix = json_string(m, "continuing_subword_prefix", "##", wm);
    if (m.contains("max_input_chars_per_word") && !m["max_input_chars_per_word"].is_null()) {
        const nlohmann::json& v = m["max_input_chars_per_word"];
        if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (1 << 30))
            throw error(wm + ": max_input_chars_per_word must be a positive integer, found " + v.dump().substr(0, 40));
        t.max_word_chars = v.get<int>();
    }
    // normalizer: BertNormalizer, alone or in a Sequence; Lowercase, and NFD + StripAccents, spell two of its steps
    std::vector<const nlohmann::json*> norm;
    if (j.contains("normalizer")) flatten_components(norm, j["normalizer"], "normalizers", path + ": normalizer");
    bool nfd = false;
    for (const nlohmann::json* p : norm) {
        const std::string where = path + ": normalizer";
        const std::string nt = json_string(*p, "type", "", where);
        if (nt == "BertNormalizer") {
            t.bert_clean_text = json_bool(*p, "clean_text", true, where);
            t.bert_chinese_chars = json_bool(*p, "handle_chinese_chars", true, where);
            t.bert_lowercase = json_bool(*p, "lowercase", true, where);
            t.bert_strip_accents = json_bool(*p, "strip_accents", t.bert_lowercase, where); // null: as lowercase
        } else if (nt == "Lowercase") {
            t.bert_lowercase = true;
        } else if (nt == "NFD") {
            nfd = true;
        } else if (nt == "StripAccents" && nfd) {
            t.bert_strip_accents = true;
        } else if (nt != "Sequence") {
            throw error(path + ": normalizer '" + nt + "' is not supported with WordPiece (expected BertNormalizer)");
        }
    }
    if (nfd && !t.bert_strip_accents)
        throw error(path + ": an NFD normalizer without StripAccents is not supported with WordPiece");
    std::vector<const nlohmann::json*> pre;
    if (j.contains("pre_tokenizer")) flatten_components(pre, j["pre_tokenizer"], "pretokenizers", path + ": pre_tokenizer");
    bool bert_pre = false;
    for (const nlohmann::json* p : pre) {
        const std::string pt = json_string(*p, "type", "", path + ": pre_tokenizer");
        if (pt == "BertPreTokenizer") bert_pre = true;
        else if (pt != "Sequence")
            throw error(path + ": pre-tokenizer '" + pt + "' is not supported with WordPiece (expected BertPreTokenizer)");
    }
    if (!bert_pre) throw error(path + ": a WordPiece model needs the BertPreTokenizer pre-tokenizer (none found)");
    if (!m.contains("vocab")) throw error(path + ": model has no vocab");
    set_vocab(t, m["vocab"], path);
    read_added_tokens(t, j, path);
    const std::string unk = json_string(m, "unk_token", "[UNK]", wm);
    auto u = t.ids.find(unk);
    if (u == t.ids.end())
        throw error(path + ": the WordPiece unk_token '" + unk + "' is not in the vocabulary (needed for words that do not split)");
    t.unk_id = u->second;
    return t;
}

// in the Unigram section below
static tokenizer parse_unigram_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path);

// encoder: honour a TemplateProcessing template also for a BPE model (the folder is a BERT-family encoder).
static tokenizer parse_tokenizer_json(const nlohmann::json& j, const std::string& path, bool encoder) {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
        throw error(path + ": no \"model\" object (not a tokenizer.json?)");
    const nlohmann::json& m = j["model"];
    std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
    // older files (distilbert's) leave out the type: a WordPiece model is the one with a subword prefix, no merges
    if (type.empty() && m.contains("continuing_subword_prefix") && m.contains("unk_token") && !m.contains("merges"))
        type = "WordPiece";
    // and T5's older files leave it out of a Unigram model, whose vocab is a list of [piece, score]
    if (type.empty() && m.contains("vocab") && m["vocab"].is_array()) type = "Unigram";
    if (type != "BPE" && type != "WordPiece" && type != "Unigram")
        throw error(path + ": model type '" + type + "' is not supported (expected BPE, WordPiece or Unigram)");
    tokenizer t = type == "WordPiece" ? parse_wordpiece_json(j, m, path)
                  : type == "Unigram" ? parse_unigram_json(j, m, path)
                                      : parse_bpe_json(j, m, path);
    if (t.unk_id < 0 && m.contains("unk_token") && m["unk_token"].is_string()) {
        auto u = t.ids.find(m["unk_token"].get<std::string>());
        if (u != t.ids.end()) t.unk_id = u->second;
    }
    for (const char* mask : {"[MASK]", "<mask>"}) {
        auto it = t.ids.find(mask);
        if (t.mask_id < 0 && it != t.ids.end()) t.mask_id = it->second;
    }
    // The post-processor's template. Decoder LMs (Llama's "<s> $A") keep their BOS in bos_id / add_bos, which a
    // caller can turn off, and must not get an EOS closing every prompt: only encoders take the template, and
    // Unigram tokenizers, which belong to encoders and encoder-decoders (T5's "$A </s>", mBART-50's
    // "en_XX $A </s>").
    post_template pt;
    const bool needs_template = t.kind == TOK_WORDPIECE || t.kind == TOK_UNIGRAM || encoder;
    if (j.contains("post_processor")) {
        try {
            read_post_processor(pt, t, j["post_processor"], path + ": post_processor");
        } catch (const error&) {
            if (needs_template) throw;
            pt = post_template{}; // a decoder LM's template is not used: an odd one must not stop it loading
        } catch (const nlohmann::json::exception&) {
            if (needs_template) throw;
            pt = post_template{};
        }
    }
    if (needs_template || pt.encoder_style) {
        t.prefix_ids = pt.prefix;
        t.suffix_ids = pt.suffix;
    }
    if (pt.encoder_style && t.kind != TOK_WORDPIECE) { // RoBERTa: <s> and </s> are its BOS and EOS
        if (t.bos_id < 0 || t.vocab[t.bos_id] == "<|endoftext|>") t.bos_id = pt.cls;
        if (t.eos_id < 0 || t.vocab[t.eos_id] == "<|endoftext|>") t.eos_id = pt.sep;
    }
    return t;
}

static tokenizer load_tokenizer_json_as(const std::string& path, bool encoder) {
    const nlohmann::json j = read_json_file(path);
    return json_guard(path, [&] { return parse_tokenizer_json(j, path, encoder); });
}

tokenizer load_tokenizer_json(const std::string& path) { return load_tokenizer_json_as(path, false); }

// A token a tokenizer_config.json names: "[MASK]" or {"content": "[MASK]", ...}; "" when absent or null.
static std::string config_token(const nlohmann::json& j, const char* key) {
    if (!j.contains(key) || j[key].is_null()) return "";
    const nlohmann::json& v = j[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return "";
}

static void apply_tokenizer_config_json(tokenizer& t, const nlohmann::json& j, const std::string& path) {
    if (!j.is_object()) throw error(path + ": not a JSON object");
    auto token_of = [&](const char* key) -> int {
        if (!j.contains(key) || j[key].is_null()) return -2;
        std::string s = config_token(j, key);
        auto it = t.ids.find(s);
        if (it == t.ids.end()) throw error(path + ": " + key + " '" + s + "' is not in the vocabulary");
        return it->second;
    };
    int b = token_of("bos_token"), e = token_of("eos_token");
    if (b >= 0) t.bos_id = b;
    if (b == -2 && t.kind == TOK_BYTE_BPE && t.bos_id >= 0 && t.vocab[t.bos_id] != "<|endoftext|>" && t.prefix_ids.empty())
        t.bos_id = -1;
    if (e >= 0) t.eos_id = e;
    if (j.contains("add_bos_token") && !j["add_bos_token"].is_null()) t.add_bos = json_bool(j, "add_bos_token", false, path);
    else if (b >= 0 && t.vocab[b] == "<|begin_of_text|>") t.add_bos = true; // Llama 3 adds it in its post-processor
    // the mask token, where the file names one the vocabulary has (a stray name is no reason to refuse a model)
    auto m = t.ids.find(config_token(j, "mask_token"));
    if (m != t.ids.end() && !m->first.empty()) t.mask_id = m->second;
}

void apply_tokenizer_config(tokenizer& t, const std::string& path) {
    if (!std::ifstream(path)) return; // no tokenizer_config.json: nothing to change
    const nlohmann::json j = read_json_file(path);
    json_guard(path, [&] { apply_tokenizer_config_json(t, j, path); });
}

tokenizer load_wordpiece_vocab(const std::string& vocab_txt, const std::string& config_path) {
    std::ifstream f(vocab_txt, std::ios::binary);
    if (!f) throw error("cannot open " + vocab_txt);
    tokenizer t;
    t.kind = TOK_WORDPIECE;
    std::string line;
    while (std::getline(f, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if ((int64_t)t.vocab.size() >= max_vocab)
            throw error(vocab_txt + ": more than " + std::to_string(max_vocab) + " tokens");
        t.ids[line] = (int)t.vocab.size(); // a repeated line: the later id wins, as in HF's loaders
        t.vocab.push_back(line);
    }
    if (t.vocab.empty()) throw error(vocab_txt + ": no tokens (expected one token per line)");
    // BertTokenizer's options: the BertNormalizer HF builds from them always cleans the text
    nlohmann::json cfg = nlohmann::json::object();
    if (!config_path.empty() && std::ifstream(config_path)) cfg = read_json_file(config_path);
    if (!cfg.is_object()) throw error(config_path + ": not a JSON object");
    std::string unk, cls, sep;
    json_guard(config_path, [&] {
        t.bert_clean_text = true;
        t.bert_lowercase = json_bool(cfg, "do_lower_case", true, config_path);
        t.bert_strip_accents = json_bool(cfg, "strip_accents", t.bert_lowercase, config_path);
        t.bert_chinese_chars = json_bool(cfg, "tokenize_chinese_chars", true, config_path);
        auto name = [&](const char* key, const char* def) {
            std::string s = config_token(cfg, key);
            return s.empty() ? std::string(def) : s;
        };
        unk = name("unk_token", "[UNK]"), cls = name("cls_token", "[CLS]"), sep = name("sep_token", "[SEP]");
        // the special tokens HF's converter lists as added tokens, matched verbatim in the raw text
        for (const std::string& s : {name("pad_token", "[PAD]"), unk, cls, sep, name("mask_token", "[MASK]")})
            if (t.ids.count(s)) t.specials.push_back(s);
        if (cfg.contains("additional_special_tokens") && cfg["additional_special_tokens"].is_array())
            for (const nlohmann::json& a : cfg["additional_special_tokens"]) {
                std::string s = a.is_string() ? a.get<std::string>()
                                : a.is_object() && a.contains("content") && a["content"].is_string() ? a["content"].get<std::string>()
                                                                                                     : "";
                if (t.ids.count(s)) t.specials.push_back(s);
            }
        auto m = t.ids.find(name("mask_token", "[MASK]"));
        if (m != t.ids.end()) t.mask_id = m->second;
    });
    for (const std::string* s : {&unk, &cls, &sep})
        if (!t.ids.count(*s))
            throw error(vocab_txt + ": no '" + *s + "' token (" +
                        (s == &unk ? "WordPiece needs it for words that do not split" : "BERT puts [CLS] text [SEP]") + ")");
    t.unk_id = t.ids[unk];
    t.prefix_ids = {t.ids[cls]};
    t.suffix_ids = {t.ids[sep]};
    return t;
}

// RoBERTa's vocab.json + merges.txt (no tokenizer.json): GPT-2's byte-level BPE and the conventions of HF's
// RobertaTokenizer: <s> text </s>, <mask> absorbing the white space before it; ids from the vocabulary.
static void apply_roberta_conventions(tokenizer& t, const std::string& vocab_json) {
    for (const char* s : {"<s>", "</s>"})
        if (!t.ids.count(s)) throw error(vocab_json + ": no '" + std::string(s) + "' token (RoBERTa puts <s> text </s>)");
    for (const char* s : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"})
        if (t.ids.count(s) && std::find(t.specials.begin(), t.specials.end(), s) == t.specials.end()) t.specials.push_back(s);
    if (t.ids.count("<mask>")) t.lstrip_specials.push_back("<mask>"), t.mask_id = t.ids["<mask>"];
    if (t.ids.count("<unk>")) t.unk_id = t.ids["<unk>"];
    t.prefix_ids = {t.ids["<s>"]};
    t.suffix_ids = {t.ids["</s>"]};
    if (t.bos_id < 0 || t.vocab[t.bos_id] == "<|endoftext|>") t.bos_id = t.ids["<s>"];
    if (t.eos_id < 0 || t.vocab[t.eos_id] == "<|endoftext|>") t.eos_id = t.ids["</s>"];
}

tokenizer load_folder_tokenizer(const std::string& dir, const std::string& model_type) {
    auto is_file = [](const std::string& p) {
        std::error_code ec;
        return std::filesystem::is_regular_file(p, ec);
    };
    const std::string json = dir + "/tokenizer.json", vocab = dir + "/vocab.json", merges = dir + "/merges.txt";
    const std::string config = dir + "/tokenizer_config.json";
    const bool have_json = is_file(json), have_bpe = is_file(vocab) && is_file(merges);
    const bool bert = model_type == "bert" || model_type == "distilbert", roberta = model_type == "roberta";
    if (have_json) {
        if (!(have_bpe && model_type == "gpt2")) {
            tokenizer t = load_tokenizer_json_as(json, bert || roberta);
            apply_tokenizer_config(t, config);
            return t;
        }
    } else if (bert) {
        if (is_file(dir + "/vocab.txt")) return load_wordpiece_vocab(dir + "/vocab.txt", config);
        throw error(dir + ": no tokenizer for " + model_type + " (looked for tokenizer.json, then vocab.txt)");
    } else if (roberta && have_bpe) {
        tokenizer t = load_gpt2_tokenizer(vocab, merges);
        apply_tokenizer_config(t, config);
        apply_roberta_conventions(t, vocab);
        return t;
    }
    if (have_bpe) return load_gpt2_tokenizer(vocab, merges);
    for (const char* spm : {"spiece.model", "source.spm", "sentencepiece.bpe.model", "tokenizer.model"})
        if (is_file(dir + "/" + spm))
            throw error(dir + ": no tokenizer.json, and SentencePiece's own model file (" + spm +
                        ") is not read: convert it to a tokenizer.json (Hugging Face's fast tokenizer)");
    std::string missing = is_file(vocab) ? " (merges.txt is missing)" : is_file(merges) ? " (vocab.json is missing)" : "";
    throw error(dir + ": no tokenizer (looked for tokenizer.json, or vocab.json + merges.txt" + missing + ")");
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer: the split regex through PCRE2 (compiled once per pattern, JIT when available)
// ---------------------------------------------------------------------------------------------
// GPT-2's pattern was written for Python's `regex` module, and tokenizer.json patterns for Oniguruma: in
// both, \s is Unicode White_Space (TAB..CR, NEL U+0085 and the Z categories). PCRE2 (UCP) also counts
// U+180E MONGOLIAN VOWEL SEPARATOR as a space, which Unicode has not done since 6.3, so \s and \S are spelled
// out before compiling. (\S inside a class is left to PCRE2: no pattern we know uses it.)
static std::string white_space_pattern(const std::string& p) {
    const std::string ws = "\\t-\\r\\x{85}\\p{Z}";
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < p.size(); i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < p.size()) { // an escape: \s and \S are rewritten, anything else copied
            char n = p[++i];
            if (n == 's') out += in_class ? ws : "[" + ws + "]";
            else if (n == 'S' && !in_class) out += "[^" + ws + "]";
            else out += c, out += n;
            continue;
        }
        out += c;
        if (!in_class && c == '[') {
            in_class = true;
            if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
            if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i]; // a ']' first in a class is literal
        } else if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') { // [:alpha:] inside a class
            size_t e = p.find(":]", i + 2);
            if (e != std::string::npos) out.append(p, i + 1, e + 2 - (i + 1)), i = e + 1;
        } else if (in_class && c == ']') {
            in_class = false;
        }
    }
    return out;
}

struct compiled_regex {
    pcre2_code* code = nullptr;
    compiled_regex() = default;
    compiled_regex(const compiled_regex&) = delete;
    compiled_regex& operator=(const compiled_regex&) = delete;
    ~compiled_regex() { pcre2_code_free(code); } // the cache lives until exit; free it so leak checkers stay quiet
};

// The compiled pattern, shared by all threads (a compiled PCRE2 pattern is read-only while matching).
static const pcre2_code* regex_for(const std::string& pattern) {
    static std::mutex mu;
    static std::unordered_map<std::string, compiled_regex> cache;
    std::lock_guard<std::mutex> lock(mu);
    compiled_regex& c = cache[pattern];
    if (!c.code) {
        int err = 0;
        PCRE2_SIZE off = 0;
        std::string p = white_space_pattern(pattern);
        c.code = pcre2_compile((PCRE2_SPTR)p.c_str(), p.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off,
                               nullptr);
        if (!c.code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            cache.erase(pattern);
            throw error("tokenizer split regex does not compile at offset " + std::to_string(off) + ": " +
                        std::string((const char*)msg) + " (pattern " + pattern.substr(0, 120) + ")");
        }
        pcre2_jit_compile(c.code, PCRE2_JIT_COMPLETE); // optional speed-up; falls back to the interpreter
    }
    return c.code;
}

// Appends the regex pieces of text (valid UTF-8) to out. Text the pattern does not match is kept as pieces
// of its own, so the pieces always concatenate back to the text.
static void split_pieces(std::vector<std::string>& out, const std::string& text, const std::string& pattern) {
    const pcre2_code* re = regex_for(pattern);
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create_from_pattern(re, nullptr),
                                                                     pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    size_t pos = 0;
    while (pos < text.size()) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text.data(), text.size(), pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) // e.g. the JIT's stack: the interpreter has its own limits
            rc = pcre2_match(re, (PCRE2_SPTR)text.data(), text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                             md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) { // no further match: the rest is one piece (not with GPT-2's pattern)
            out.push_back(text.substr(pos));
            break;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            throw error("tokenizer: the split regex failed at byte " + std::to_string(pos) + " of the text: " +
                        std::string((const char*)msg));
        }
        PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        if (ov[0] > pos) out.push_back(text.substr(pos, ov[0] - pos)); // unmatched gap kept, never dropped
        if (ov[1] == ov[0]) {                                           // empty match: step one character
            size_t step = 1;
            while (ov[0] + step < text.size() && ((unsigned char)text[ov[0] + step] & 0xc0) == 0x80) step++;
            out.push_back(text.substr(ov[0], step));
            pos = ov[0] + step;
        } else {
            out.push_back(text.substr(ov[0], ov[1] - ov[0]));
            pos = ov[1];
        }
    }
}

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

static void encode_byte_bpe(std::vector<int>& out, const tokenizer& t, const std::string& text) {
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
static void encode_spm(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start) {
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
// WordPiece (BERT): BertNormalizer, BertPreTokenizer, greedy longest-match-first pieces
// ---------------------------------------------------------------------------------------------
// NFC or NFD by utf8proc, with an explicit length: a NUL character is text like any other, not the end
static std::string utf8proc_normalize(const std::string& s, int options, const char* what) {
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t*)s.data(), (utf8proc_ssize_t)s.size(), &out,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | options));
    if (n < 0) throw error(std::string("tokenizer: ") + what + " normalisation failed: " + utf8proc_errmsg(n));
    std::string r((const char*)out, (size_t)n);
    free(out);
    return r;
}

// BertNormalizer's "control": Unicode categories Cc, Cf and Co (HF's is_other), except TAB, LF and CR, which
// count as white space.
static bool is_bert_control(uint32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    const utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO;
}

// The CJK ideograph blocks BERT spaces out (HF's ranges; Hangul, kana and CJK punctuation are not among them).
static bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df) ||
           (c >= 0x2a700 && c <= 0x2b73f) || (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b920 && c <= 0x2ceaf) ||
           (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
}

// BertPreTokenizer's punctuation, each its own word: every ASCII symbol that is not a letter, digit or space
// ("$", "+", "^" too), and the Unicode P* categories.
static bool is_bert_punctuation(uint32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO: return true;
    default: return false;
    }
}

// Lower case per character, as HF's BertNormalizer and Lowercase normalizer: Unicode's lower case, no
// final-sigma rule.
static std::string lowercase_chars(const std::string& s) {
    std::string l;
    l.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const int n = utf8_seq_len(s, i);
        const uint32_t c = utf8_code_point(s, i, n);
        // U+0130 (I with dot above) is the one character whose full lower case is two: "i" + U+0307;
        // utf8proc gives the simple mapping ("i") for every character
        if (c == 0x130) l += "i\xCC\x87";
        else if (c < 0x80) l += (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        else l += utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
        i += n;
    }
    return l;
}

// BertNormalizer on text between specials (valid UTF-8), in HF's order: clean, CJK spaces, accents, case.
static std::string bert_normalize(const tokenizer& t, const std::string& text) {
    std::string s;
    s.reserve(text.size() + text.size() / 8);
    for (size_t i = 0; i < text.size();) {
        const int n = utf8_seq_len(text, i);
        const uint32_t c = utf8_code_point(text, i, n);
        if (t.bert_clean_text && (c == 0 || c == 0xfffd || is_bert_control(c))) {
            // dropped (VT, FF and NEL are controls before they are white space)
        } else if (t.bert_clean_text && is_white_space(c)) {
            s += ' ';
        } else if (t.bert_chinese_chars && is_cjk_ideograph(c)) {
            s += ' ', s.append(text, i, n), s += ' ';
        } else {
            s.append(text, i, n);
        }
        i += n;
    }
    if (t.bert_strip_accents) { // NFD, then without the nonspacing marks the decomposition split off
        const std::string d = utf8proc_normalize(s, UTF8PROC_DECOMPOSE, "NFD");
        s.clear();
        for (size_t i = 0; i < d.size();) {
            const int n = utf8_seq_len(d, i);
            if (utf8proc_category((utf8proc_int32_t)utf8_code_point(d, i, n)) != UTF8PROC_CATEGORY_MN) s.append(d, i, n);
            i += n;
        }
    }
    if (t.bert_lowercase) s = lowercase_chars(s);
    return s;
}

// One word: the longest vocabulary entry from its start, then the longest "##" entry from where that ended,
// and so on. A word with a part that matches nothing, or longer than max_word_chars characters, is [UNK].
static void wordpiece_word(std::vector<int>& out, const tokenizer& t, const std::string& w) {
    std::vector<size_t> at; // byte offset of each character, then the end
    for (size_t i = 0; i < w.size(); i += utf8_seq_len(w, i)) at.push_back(i);
    const size_t n = at.size();
    at.push_back(w.size());
    if (n > (size_t)t.max_word_chars) {
        out.push_back(t.unk_id);
        return;
    }
    const size_t mark = out.size();
    std::string piece;
    for (size_t start = 0; start < n;) {
        size_t end = n;
        int id = -1;
        for (; end > start; end--) {
            piece.assign(start ? t.subword_prefix : std::string()).append(w, at[start], at[end] - at[start]);
            auto it = t.ids.find(piece);
            if (it != t.ids.end()) {
                id = it->second;
                break;
            }
        }
        if (id < 0) { // the whole word is unknown, not just this part
            out.resize(mark);
            out.push_back(t.unk_id);
            return;
        }
        out.push_back(id);
        start = end;
    }
}

static void encode_wordpiece(std::vector<int>& out, const tokenizer& t, const std::string& text) {
    if (t.unk_id < 0 || t.unk_id >= (int)t.vocab.size()) throw error("tokenizer: WordPiece without an [UNK] token");
    const std::string s = bert_normalize(t, text);
    // BertPreTokenizer: white space ends a word and is dropped; each punctuation character is a word
    size_t word = std::string::npos;
    for (size_t i = 0; i < s.size();) {
        const int n = utf8_seq_len(s, i);
        const uint32_t c = utf8_code_point(s, i, n);
        const bool space = is_white_space(c), punct = !space && is_bert_punctuation(c);
        if ((space || punct) && word != std::string::npos) {
            wordpiece_word(out, t, s.substr(word, i - word));
            word = std::string::npos;
        }
        if (punct) wordpiece_word(out, t, s.substr(i, n));
        else if (!space && word == std::string::npos) word = i;
        i += n;
    }
    if (word != std::string::npos) wordpiece_word(out, t, s.substr(word));
}

// ---------------------------------------------------------------------------------------------
// SentencePiece Unigram (T5, Marian, mBART-50, XLM-R): tokenizer.json's normalizers (the Precompiled charsmap,
// Unicode forms, Replace, ...), WhitespaceSplit / Metaspace, then the best segmentation by summed piece scores
// ---------------------------------------------------------------------------------------------
static size_t white_space_before(const std::string& text, size_t begin, size_t end); // encode / decode section
static size_t white_space_after(const std::string& text, size_t pos);

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
static void encode_unigram(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start) {
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

// tokenizer.json with a Unigram model: "vocab" [[piece, score], ...] (id = position), "unk_id", "byte_fallback".
static tokenizer parse_unigram_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path) {
    tokenizer t;
    t.kind = TOK_UNIGRAM;
    t.space_is_underline = true;
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

    std::vector<const nlohmann::json*> norm, pre, dec;
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

// ---------------------------------------------------------------------------------------------
// encode / decode
// ---------------------------------------------------------------------------------------------
static std::string nfc(const std::string& s) { return utf8proc_normalize(s, UTF8PROC_COMPOSE, "NFC"); }

// Text without special tokens -> ids, by the tokenizer's kind.
// at_start: the text begins the input rather than following a special token.
static void encode_segment(std::vector<int>& out, const tokenizer& t, const std::string& text, bool at_start) {
    switch (t.kind) {
    case TOK_BYTE_BPE: encode_byte_bpe(out, t, text); return;
    case TOK_SPM_BPE: encode_spm(out, t, text, at_start); return;
    case TOK_WORDPIECE: encode_wordpiece(out, t, text); return;
    case TOK_UNIGRAM: encode_unigram(out, t, text, at_start); return;
    case TOK_NONE: break;
    }
    throw error("tokenizer: no tokenizer loaded");
}

// Where the white space that ends text[begin, end) starts; where the white space from pos on ends.
static size_t white_space_before(const std::string& text, size_t begin, size_t end) {
    while (end > begin) {
        size_t i = end - 1;
        while (i > begin && ((unsigned char)text[i] & 0xc0) == 0x80) i--;
        if (!is_white_space(utf8_code_point(text, i, (int)(end - i)))) break;
        end = i;
    }
    return end;
}

static size_t white_space_after(const std::string& text, size_t pos) {
    while (pos < text.size()) {
        const int n = utf8_seq_len(text, pos);
        if (!is_white_space(utf8_code_point(text, pos, n))) break;
        pos += n;
    }
    return pos;
}

std::vector<int> encode(const tokenizer& t, const std::string& input) {
    long bad = utf8_invalid_at(input);
    if (bad >= 0) throw error("invalid UTF-8 at byte " + std::to_string(bad) + " of the text");
    if (t.kind == TOK_NONE) throw error("tokenizer: no tokenizer loaded");
    const std::string text = t.nfc ? nfc(input) : input;
    std::vector<int> out;
    // specials are matched verbatim first (longest at each position); the text between is encoded normally.
    // Only positions whose byte starts some special are tried (Llama 3 has 256 specials).
    bool starts[256] = {};
    for (const std::string& s : t.specials)
        if (!s.empty()) starts[(unsigned char)s[0]] = true;
    size_t pos = 0, start = 0;
    while (pos < text.size()) {
        size_t best_len = 0;
        const std::string* best = nullptr;
        if (starts[(unsigned char)text[pos]])
            for (const std::string& s : t.specials)
                if (s.size() > best_len && text.compare(pos, s.size(), s) == 0) best = &s, best_len = s.size();
        if (!best) {
            pos++;
            continue;
        }
        auto id = t.ids.find(*best);
        if (id == t.ids.end()) throw error("tokenizer: special token '" + *best + "' is not in the vocabulary");
        size_t end = pos; // lstrip (RoBERTa's <mask>): the white space before the token is part of it
        if (std::find(t.lstrip_specials.begin(), t.lstrip_specials.end(), *best) != t.lstrip_specials.end())
            end = white_space_before(text, start, pos);
        if (end > start) encode_segment(out, t, text.substr(start, end - start), start == 0);
        out.push_back(id->second);
        pos += best_len;
        if (std::find(t.rstrip_specials.begin(), t.rstrip_specials.end(), *best) != t.rstrip_specials.end())
            pos = white_space_after(text, pos);
        start = pos;
    }
    if (start < text.size()) encode_segment(out, t, text.substr(start), start == 0);
    return out;
}

// SentencePiece-style: "<0xE6>" is one raw byte, "▁" a space.
static std::string spm_piece_bytes(const std::string& s) {
    unsigned b;
    if (s.size() == 6 && std::sscanf(s.c_str(), "<0x%02X>", &b) == 1) return std::string(1, (char)b);
    std::string r;
    for (size_t i = 0; i < s.size(); i++)
        if (s.compare(i, 3, "\xE2\x96\x81") == 0) r += ' ', i += 2;
        else r += s[i];
    return r;
}

// Byte-level: each stand-in character is one byte; specials (and anything else) are their own text.
static std::string byte_level_piece_bytes(const tokenizer& t, const std::string& s) {
    if (std::find(t.specials.begin(), t.specials.end(), s) != t.specials.end()) return s;
    const byte_map& bm = bytes_unicode();
    std::string out;
    for (size_t i = 0; i < s.size();) {
        int n = utf8_seq_len(s, i);
        if (!n) n = 1;
        auto it = bm.to_byte.find(s.substr(i, n));
        if (it != bm.to_byte.end()) out += (char)it->second;
        else out += s.substr(i, n); // not a byte stand-in: keep the text as stored
        i += n;
    }
    return out;
}

std::string token_bytes(const tokenizer& t, int id) {
    if (id < 0 || id >= (int)t.vocab.size())
        throw error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                    std::to_string((int)t.vocab.size() - 1) + ")");
    switch (t.kind) {
    case TOK_BYTE_BPE: return byte_level_piece_bytes(t, t.vocab[id]);
    case TOK_SPM_BPE:
    case TOK_UNIGRAM: return spm_piece_bytes(t.vocab[id]);
    case TOK_WORDPIECE: // as stored: "##ing", "[CLS]"
    case TOK_NONE: break;
    }
    return t.vocab[id];
}

std::string decode(const tokenizer& t, const std::vector<int>& ids) {
    std::string out;
    if (t.kind == TOK_WORDPIECE) {
        // HF's WordPiece decoder with cleanup off: a space before each token but the first, except that a
        // continuation piece loses its "##" and joins the token before (the first token is kept as stored)
        for (size_t i = 0; i < ids.size(); i++) {
            const std::string s = token_bytes(t, ids[i]);
            const size_t p = t.subword_prefix.size();
            if (i == 0) out += s;
            else if (p && s.compare(0, p, t.subword_prefix) == 0) out.append(s, p, std::string::npos);
            else out += ' ', out += s;
        }
        return out;
    }
    if (t.kind == TOK_UNIGRAM) {
        // HF's Metaspace decoder: each "▁" is a space, except in the first token, where a prefix scheme drops it
        for (size_t i = 0; i < ids.size(); i++) {
            const std::string b = token_bytes(t, ids[i]); // "▁" a space, <0xXX> its byte
            const std::string& v = t.vocab[ids[i]];
            if (i > 0 || !t.decode_strip_space || (b.size() == 1 && v.size() == 6)) { // (the last: a byte piece)
                out += b;
                continue;
            }
            for (size_t k = 0; k < v.size(); k++)
                if (v.compare(k, 3, underline) == 0) k += 2;
                else out += v[k];
        }
        return out;
    }
    bool after_bos = false; // as llama2.c: the dummy-prefix space right after BOS is not part of the text
    for (int id : ids) {
        std::string b = token_bytes(t, id);
        if (t.kind == TOK_SPM_BPE && (id == t.bos_id || id == t.eos_id)) {
            after_bos = id == t.bos_id;
            continue;
        }
        if (after_bos && t.dummy_prefix && !b.empty() && b[0] == ' ') b.erase(0, 1);
        after_bos = false;
        out += b;
    }
    return out;
}

std::string token_text(const tokenizer& t, int id) {
    // a token holding part of a character shows its bytes, e.g. "<E6>", which teaches more than U+FFFD
    std::string b = token_bytes(t, id), out;
    for (size_t i = 0; i < b.size();) {
        int n = utf8_seq_len(b, i);
        if (n) {
            out.append(b, i, n);
            i += n;
        } else {
            char hex[8];
            snprintf(hex, sizeof hex, "<%02X>", (unsigned char)b[i]);
            out += hex;
            i++;
        }
    }
    return out;
}

int single_token_id(const tokenizer& tok, const std::string& text, const std::string& what) {
    std::vector<int> ids = encode(tok, text);
    if (ids.size() == 1) return ids[0];
    std::string how;
    for (size_t i = 0; i < ids.size() && i < 8; i++)
        how += std::string(i ? ", " : "") + std::to_string(ids[i]) + " '" + token_text(tok, ids[i]) + "'";
    if (ids.size() > 8) how += ", ...";
    throw error(what + " '" + text + "' encodes to " + std::to_string(ids.size()) + " tokens" +
                (ids.empty() ? "" : " (" + how + ")") + ", not one; give a single token (or its id)");
}

} // namespace gb
