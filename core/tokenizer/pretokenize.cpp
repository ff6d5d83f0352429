// The pre-tokenizer: split regexes (GPT-2's and its digit-splitting variant) compiled once through PCRE2 and
// applied to cut text into pieces.
#include <memory>
#include <mutex>

#include "tokenizer/internal.h"
#include "util/error.h"

namespace gb {

// GPT-2's pre-tokenizer: contractions, letters, digits, other symbols, whitespace (not before non-space)
const char* const gpt2_split_regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// HF's Digits pre-tokenizer (and llama.cpp's "\p{N}" pass) cuts digits out (one by one, or in runs) before
// GPT-2's pattern runs on the text between them. As one pattern: digits first; " ?\p{N}+" dropped (a space
// and the digit after it are never one piece); and whitespace before a digit counts as trailing, as it would
// at the end of the text in between: "a  5" -> "a", "  ", "5" (not "a", " ", " ", "5").
std::string gpt2_digits_split_regex(bool individual_digits) {
    return std::string(individual_digits ? "\\p{N}" : "\\p{N}+") +
           R"(|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+)";
}

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
const pcre2_code* regex_for(const std::string& pattern) {
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
void split_pieces(std::vector<std::string>& out, const std::string& text, const std::string& pattern) {
    const pcre2_code* re = regex_for(pattern);
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create_from_pattern(re, nullptr),
                                                                     pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    size_t pos = 0;
    while (pos < text.size()) {
        encode_steps++;
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

} // namespace gb
