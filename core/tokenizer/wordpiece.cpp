// WordPiece (BERT): BertNormalizer, BertPreTokenizer, greedy longest-match-first pieces, and its two sources:
// tokenizer.json's WordPiece model and vocab.txt with tokenizer_config.json.
#include <fstream>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "tokenizer/internal.h"
#include "util/error.h"
#include "util/json_util.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// WordPiece (BERT): BertNormalizer, BertPreTokenizer, greedy longest-match-first pieces
// ---------------------------------------------------------------------------------------------
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
            encode_steps++;
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

void encode_wordpiece(std::vector<int>& out, const tokenizer& t, const std::string& text) {
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
// Loading: tokenizer.json's WordPiece model, vocab.txt
// ---------------------------------------------------------------------------------------------

// tokenizer.json with a WordPiece model (BERT, DistilBERT): BertNormalizer, BertPreTokenizer.
tokenizer parse_wordpiece_json(const nlohmann::json& j, const nlohmann::json& m, const std::string& path) {
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

} // namespace gb
