// Tokenizers: byte-level BPE (GPT-2, Llama 3, Qwen2, RoBERTa), SentencePiece-style BPE (Llama 2, llama2.c),
// WordPiece (BERT) and SentencePiece Unigram (T5, Marian, mBART-50): encode (special tokens, then the kind's
// encoder), decode, token_bytes / token_text, single_token_id.
//
// The parts: utf8.cpp (UTF-8, byte map) | pretokenize.cpp (PCRE2 split) | load.cpp (vocabulary sources) |
// bpe.cpp | wordpiece.cpp | unigram.cpp; internal.h declares what they share.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <utf8proc.h>

#include "tokenizer/internal.h"
#include "util/error.h"

namespace gb {

thread_local uint64_t encode_steps = 0;

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
            for (const std::string& s : t.specials) {
                encode_steps++;
                if (s.size() > best_len && text.compare(pos, s.size(), s) == 0) best = &s, best_len = s.size();
            }
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
    // most words are single tokens only with the space before them (" Mary"): say so when that is the case
    std::string hint;
    if (!text.empty() && text[0] != ' ' && encode(tok, " " + text).size() == 1)
        hint = "; did you mean ' " + text + "' (with the space before it)?";
    throw error(what + " '" + text + "' encodes to " + std::to_string(ids.size()) + " tokens" +
                (ids.empty() ? "" : " (" + how + ")") + ", not one; give a single token (or its id)" + hint);
}

} // namespace gb
