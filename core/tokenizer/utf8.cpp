// UTF-8 and Unicode helpers the tokenizers share (validation, encoding, white space, utf8proc normal forms,
// per-character lower case) and GPT-2's reversible byte <-> unicode map.
#include <cstdlib>
#include <utf8proc.h>

#include "tokenizer/internal.h"
#include "util/error.h"

namespace gb {

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

std::string utf8_encode(uint32_t cp) {
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

// Where the white space that ends text[begin, end) starts; where the white space from pos on ends.
size_t white_space_before(const std::string& text, size_t begin, size_t end) {
    while (end > begin) {
        size_t i = end - 1;
        while (i > begin && ((unsigned char)text[i] & 0xc0) == 0x80) i--;
        if (!is_white_space(utf8_code_point(text, i, (int)(end - i)))) break;
        end = i;
    }
    return end;
}

size_t white_space_after(const std::string& text, size_t pos) {
    while (pos < text.size()) {
        const int n = utf8_seq_len(text, pos);
        if (!is_white_space(utf8_code_point(text, pos, n))) break;
        pos += n;
    }
    return pos;
}

// NFC or NFD by utf8proc, with an explicit length: a NUL character is text like any other, not the end
std::string utf8proc_normalize(const std::string& s, int options, const char* what) {
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t*)s.data(), (utf8proc_ssize_t)s.size(), &out,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | options));
    if (n < 0) throw error(std::string("tokenizer: ") + what + " normalisation failed: " + utf8proc_errmsg(n));
    std::string r((const char*)out, (size_t)n);
    free(out);
    return r;
}

// Lower case per character, as HF's BertNormalizer and Lowercase normalizer: Unicode's lower case, no
// final-sigma rule.
std::string lowercase_chars(const std::string& s) {
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

// ---------------------------------------------------------------------------------------------
// GPT-2's reversible byte -> printable unicode map
// ---------------------------------------------------------------------------------------------

const byte_map& bytes_unicode() {
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

} // namespace gb
