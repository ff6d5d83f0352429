// SentencePiece Unigram tokenizers from tokenizer.json (T5, Marian, mBART-50 style): compared with the
// transformers.js tokenizers of the npm package @lenml/tokenizers under node (tests/node/json_encode.js) on
// vocabularies these tests write, with a Precompiled charsmap built here; HF's behaviour where the reference
// has none (byte fallback, the charsmap's per-grapheme rules); decoding; loaders' errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "test_util.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

const std::string kUnigramSpace = "\xE2\x96\x81"; // "▁"

// ---- a SentencePiece double-array trie (darts-clone layout), built here for the Precompiled charsmap ----
// Unit bits: 0-7 label, 8 has-leaf, 9 offset scale (unused here), 10-31 offset; a leaf unit: bit 31 + value.
std::string build_charsmap(const std::map<std::string, std::string>& rules) {
    struct node {
        std::map<unsigned char, int> kids;
        int value = -1; // offset of the replacement, -1: no rule ends here
    };
    std::vector<node> nodes(1);
    std::string normalized;
    for (const auto& [key, rep] : rules) {
        int n = 0;
        for (unsigned char c : key) {
            auto it = nodes[n].kids.find(c);
            if (it == nodes[n].kids.end()) {
                nodes.push_back({});
                it = nodes[n].kids.emplace(c, (int)nodes.size() - 1).first;
            }
            n = it->second;
        }
        nodes[n].value = (int)normalized.size();
        normalized += rep;
        normalized += '\0';
    }
    std::vector<uint32_t> units(1, 0);
    std::vector<bool> used(1, true), base_used; // a slot taken; a base taken (two nodes never share one, or a
                                                // label one node lacks could find the other's child)
    std::vector<int> at(nodes.size(), -1); // each node's unit
    at[0] = 0;
    auto grow = [&](size_t n) {
        if (units.size() < n) units.resize(n, 0), used.resize(n, false), base_used.resize(n, false);
    };
    std::vector<int> queue = {0};
    for (size_t q = 0; q < queue.size(); q++) {
        const node& nd = nodes[queue[q]];
        if (nd.kids.empty() && nd.value < 0) continue;
        uint32_t base = 1;
        for (;; base++) { // the first base whose slots (base ^ label, base for the leaf) are free
            grow(base + 256);
            bool ok = !base_used[base] && !(nd.value >= 0 && used[base]);
            for (const auto& k : nd.kids) ok = ok && !used[base ^ k.first];
            if (ok) break;
        }
        base_used[base] = true;
        const uint32_t self = (uint32_t)at[queue[q]];
        units[self] |= (self ^ base) << 10;
        if (nd.value >= 0) units[base] = 0x80000000u | (uint32_t)nd.value, used[base] = true, units[self] |= 1u << 8;
        for (const auto& k : nd.kids) {
            const uint32_t slot = base ^ k.first;
            units[slot] = k.first, used[slot] = true;
            at[k.second] = (int)slot;
            queue.push_back(k.second);
        }
    }
    while (units.size() > 1 && !used[units.size() - 1]) units.pop_back();
    std::string blob;
    const uint32_t trie_bytes = (uint32_t)units.size() * 4;
    for (int i = 0; i < 4; i++) blob += (char)(trie_bytes >> (8 * i));
    for (uint32_t u : units)
        for (int i = 0; i < 4; i++) blob += (char)(u >> (8 * i));
    return blob + normalized;
}

std::string base64(const std::string& b) {
    static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string o;
    for (size_t i = 0; i < b.size(); i += 3) {
        uint32_t v = (uint8_t)b[i] << 16;
        if (i + 1 < b.size()) v |= (uint8_t)b[i + 1] << 8;
        if (i + 2 < b.size()) v |= (uint8_t)b[i + 2];
        o += a[v >> 18], o += a[(v >> 12) & 63];
        o += i + 1 < b.size() ? a[(v >> 6) & 63] : '=';
        o += i + 2 < b.size() ? a[v & 63] : '=';
    }
    return o;
}

std::string utf8(uint32_t cp) {
    std::string o;
    if (cp < 0x80) o += (char)cp;
    else if (cp < 0x800) o += (char)(0xc0 | (cp >> 6)), o += (char)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        o += (char)(0xe0 | (cp >> 12)), o += (char)(0x80 | ((cp >> 6) & 0x3f)), o += (char)(0x80 | (cp & 0x3f));
    else
        o += (char)(0xf0 | (cp >> 18)), o += (char)(0x80 | ((cp >> 12) & 0x3f)), o += (char)(0x80 | ((cp >> 6) & 0x3f)),
            o += (char)(0x80 | (cp & 0x3f));
    return o;
}

// The rules of nmt_nfkc that transformers.js hard-codes for every Precompiled normalizer (it does not read the
// charsmap): control characters dropped, some spaces made " ", then NFKC; here for the characters the texts
// below use, so this charsmap and the reference agree on them. Two keys are two characters ("e" + U+0301).
std::map<std::string, std::string> nmt_rules() {
    std::map<std::string, std::string> r;
    for (uint32_t c = 1; c <= 8; c++) r[utf8(c)] = "";
    for (uint32_t c = 0x0e; c <= 0x1f; c++) r[utf8(c)] = "";
    for (uint32_t c : {0x0bu, 0x7fu, 0x8fu, 0x9fu}) r[utf8(c)] = "";
    for (uint32_t c : {0x09u, 0x0au, 0x0cu, 0x0du, 0xa0u, 0x1680u, 0x2028u, 0x2029u, 0x202fu, 0x205fu, 0x2581u, 0x3000u,
                       0xfeffu, 0xfffdu})
        r[utf8(c)] = " ";
    for (uint32_t c = 0x2000; c <= 0x200f; c++) r[utf8(c)] = " ";
    for (uint32_t c = 0; c < 26; c++) r[utf8(0xff21 + c)] = std::string(1, (char)('A' + c)); // fullwidth letters
    for (uint32_t c = 0; c < 26; c++) r[utf8(0xff41 + c)] = std::string(1, (char)('a' + c));
    for (uint32_t c = 0; c < 10; c++) r[utf8(0xff10 + c)] = std::string(1, (char)('0' + c));
    r["\xEF\xAC\x81"] = "fi";         // U+FB01 ligature
    r["\xEF\xAC\x82"] = "fl";         // U+FB02
    r["\xC2\xB2"] = "2";              // superscript two
    r["\xE2\x85\xAB"] = "XII";        // roman numeral twelve
    r["\xE2\x80\xA6"] = "...";        // ellipsis
    r["\xE2\x84\xA2"] = "TM";         // trade mark
    r["\xE2\x91\xA0"] = "1";          // circled one
    r["\xEF\xBC\x81"] = "!";          // fullwidth !
    r["e\xCC\x81"] = "\xC3\xA9";      // e + combining acute -> é
    r["a\xCC\x88"] = "\xC3\xA4";      // a + combining diaeresis -> ä
    r["\xE2\x84\xA4"] = "Z";          // double-struck Z
    r["\xEF\xBD\xB6\xEF\xBE\x9E"] = "\xE3\x82\xAC"; // halfwidth ka + voiced mark (6 bytes: never a whole cluster)
    r["\xEF\xBD\xB6"] = "\xE3\x82\xAB";             // halfwidth ka -> ka
    r["\xEF\xBE\x9E"] = "\xE3\x82\x99";             // halfwidth voiced mark -> combining U+3099
    return r;
}

// ---- the vocabulary: specials, "▁", ASCII, words and pieces in several scripts, the 256 byte pieces ----
std::vector<std::pair<std::string, double>> unigram_vocab() {
    std::vector<std::pair<std::string, double>> v = {{"<pad>", 0}, {"</s>", 0}, {"<unk>", 0}, {kUnigramSpace, -2.5}};
    // scores in 1/64 steps: sums are exact, so a tie is a tie however the lattice is cut (transformers.js runs
    // one lattice over a Metaspace-split text, HF one per word: with inexact scores, rounding could break a
    // tie between "." + "..." and "..." + "." differently)
    std::mt19937 rng(7);
    auto score = [&](double lo, double hi) { return lo + (double)(rng() % (uint32_t)((hi - lo) * 64)) / 64.0; };
    std::map<std::string, double> fixed = {
        {"x", -2},  {"y", -2},  {"xy", -4}, {"p", -0.1}, {"q", -0.2}, {"pq", -0.30000001}, {"ab", -6}, {"abc", -9},
        {"bc", -5}, {"bcd", -7}, {"cd", -5.5}, {"a", -6}, {"c", -6},   {"t", -6},   {"at", -5},  {kUnigramSpace + "a", -3},
        {kUnigramSpace + "cat", -3.5}, {kUnigramSpace + "hello", -3}, {kUnigramSpace + "world", -3}};
    std::vector<std::string> pieces;
    for (int c = 33; c < 127; c++) pieces.push_back(std::string(1, (char)c));
    for (const char* w :
         {"th", "he", "in", "ing", "ed", "er", "es", "at", "on", "an", "ll", "lo", "wor", "ld", "ello", "believ", "able",
          "iz", "ization", "ation", "ken", "to", "ne", "fi", "fl", "ab", "abc", "bc", "bcd", "cd", "xy", "pq", "...", "TM",
          "XII", "12", "2024", "14", "é", "è", "ü", "ö", "ß", "ï", "ä", "É", "Ü", "café", "caf", "日", "本", "語", "日本",
          "日本語", "中", "文", "中文", "の", "テ", "キ", "ス", "ト", "テキスト", "カ", "ガ", "한", "국", "어", "🙂", "п", "р", "и",
          "в", "е", "т", "при", "вет", "α", "β", "γ", "δ", "ελ", "ε", "λ", "ο", "σ", "ς", "ı", "i\xCC\x87"})
        pieces.push_back(w);
    for (const char* w : {"the", "The", "cat", "sat", "on", "mat", "hello", "Hello", "world", "World", "un", "token",
                          "fine", "fi", "caf", "café", "naïve", "Zürich", "2024", "12", "a", "t", "c", "s", "h", "w",
                          "T", "H", "1", "(", "\"", "日本", "🙂", "при", "p", "<", "en", "été"})
        pieces.push_back(kUnigramSpace + w);
    for (const std::string& p : pieces) {
        auto f = fixed.find(p);
        const size_t chars = p.size() > 3 && p.compare(0, 3, kUnigramSpace) == 0 ? 2 : 1;
        v.push_back({p, f != fixed.end() ? f->second : chars == 1 && p.size() <= 4 ? score(-11, -6) : score(-10, -3)});
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.push_back({name, 0.0});
    }
    return v;
}

int piece_id(const std::string& piece) {
    static const auto v = unigram_vocab();
    for (size_t i = 0; i < v.size(); i++)
        if (v[i].first == piece) return (int)i;
    ADD_FAILURE() << "test vocabulary has no " << piece;
    return -1;
}

struct unigram_options {
    std::string style = "t5";       // t5 | mbart | nfkc | plain | prepend (see unigram_tokenizer_json)
    bool byte_fallback = false;
    nlohmann::json unk_id = 2;
    std::map<std::string, std::string> rules = nmt_rules();
};

nlohmann::json added(int id, const std::string& s) {
    return {{"id", id}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
            {"normalized", false}, {"special", true}};
}

nlohmann::json template_post(const std::vector<std::pair<std::string, int>>& before,
                             const std::vector<std::pair<std::string, int>>& after) {
    nlohmann::json single = nlohmann::json::array(), specials = nlohmann::json::object();
    auto add = [&](const std::pair<std::string, int>& s) {
        single.push_back({{"SpecialToken", {{"id", s.first}, {"type_id", 0}}}});
        specials[s.first] = {{"id", s.first}, {"ids", {s.second}}, {"tokens", {s.first}}};
    };
    for (const auto& s : before) add(s);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    for (const auto& s : after) add(s);
    return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
}

// Four pipelines:
//   t5:    Precompiled, Strip (right), Replace " {2,}" -> "▁"; WhitespaceSplit + Metaspace; "$A </s>"
//   mbart: Precompiled, Replace " {2,}" -> " "; Metaspace; "en_XX $A </s>" (en_XX an added token past the vocab)
//   nfkc:  Strip, NFKC, Lowercase, Replace "``" -> "\""; Metaspace (split false); "$A </s>"
//   plain: no normalizer; Metaspace prepend_scheme "first"; no post-processor
//   prepend: NFC, Prepend "▁", Replace " " -> "▁" (Llama 2's way of writing Metaspace); no pre-tokenizer
nlohmann::json unigram_tokenizer_json(const unigram_options& o) {
    nlohmann::json vocab = nlohmann::json::array();
    const auto v = unigram_vocab();
    for (const auto& p : v) vocab.push_back({p.first, p.second});
    nlohmann::json add = {added(0, "<pad>"), added(1, "</s>"), added(2, "<unk>")};
    const int eos = 1, en = (int)v.size();
    nlohmann::json metaspace = {{"type", "Metaspace"}, {"replacement", kUnigramSpace}, {"add_prefix_space", true},
                                {"prepend_scheme", "always"}, {"split", true}};
    auto precompiled = [&] {
        return nlohmann::json{{"type", "Precompiled"}, {"precompiled_charsmap", base64(build_charsmap(o.rules))}};
    };
    nlohmann::json norm, pre, post;
    if (o.style == "t5") {
        norm = {{"type", "Sequence"},
                {"normalizers",
                 {precompiled(), {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}},
                  {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", kUnigramSpace}}}}};
        pre = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, metaspace}}};
        post = template_post({}, {{"</s>", eos}});
    } else if (o.style == "mbart") {
        norm = {{"type", "Sequence"},
                {"normalizers",
                 {precompiled(), {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}}}};
        pre = metaspace;
        post = template_post({{"en_XX", en}}, {{"</s>", eos}});
        add.push_back(added(en, "en_XX"));
    } else if (o.style == "nfkc") {
        norm = {{"type", "Sequence"},
                {"normalizers",
                 {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                  {{"type", "NFKC"}},
                  {{"type", "Lowercase"}},
                  {{"type", "Replace"}, {"pattern", {{"String", "``"}}}, {"content", "\""}}}}};
        pre = metaspace;
        pre["split"] = false;
        post = template_post({}, {{"</s>", eos}});
    } else if (o.style == "plain") {
        norm = nullptr;
        pre = metaspace;
        pre["prepend_scheme"] = "first";
        post = nullptr;
    } else {
        norm = {{"type", "Sequence"},
                {"normalizers",
                 {{{"type", "NFC"}}, {{"type", "Prepend"}, {"prepend", kUnigramSpace}},
                  {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kUnigramSpace}}}}};
        pre = nullptr;
        post = template_post({}, {{"</s>", eos}});
    }
    nlohmann::json dec = metaspace;
    return {{"version", "1.0"},      {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", add},
            {"normalizer", norm},    {"pre_tokenizer", pre},  {"post_processor", post}, {"decoder", dec},
            {"model", {{"type", "Unigram"}, {"unk_id", o.unk_id}, {"vocab", vocab}, {"byte_fallback", o.byte_fallback}}}};
}

struct written_ug {
    std::string dir, json, config;
};

written_ug write_unigram(const std::string& name, const unigram_options& o) {
    written_ug w;
    w.dir = test_temp_dir(name);
    w.json = w.dir + "/tokenizer.json";
    w.config = w.dir + "/tokenizer_config.json";
    write_file(w.json, unigram_tokenizer_json(o).dump());
    write_file(w.config, nlohmann::json({{"tokenizer_class", "T5Tokenizer"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"},
                                         {"pad_token", "<pad>"}})
                             .dump());
    return w;
}

// Texts every pipeline must agree with the reference on. Left out on purpose, where transformers.js departs
// from HF's tokenizers (checked against HF's behaviour in C++ below): a mapped character followed by a
// combining mark or ZWJ (HF rewrites the whole grapheme), halfwidth kana with a voiced mark (one 6-byte
// grapheme: HF maps its characters one by one, transformers.js composes them), CR LF without a following space
// collapse, NEL and BOM as white space, a final capital sigma, literal byte pieces ("<0x41>") in decoding.
std::vector<std::string> tricky_texts_ug() {
    return {"Hello world", "hello world", "The cat sat on the mat.", "  leading and trailing  ", "", " ", "   ",
            "multiple   spaces\t\ttabs\r\nCRLF\n\nnewlines", "unbelievable tokenization", "abcd bcd abc cd",
            "xy xyxy pq pqp", "café naïve Zürich été", "cafe\xCC\x81 decomposed", "CAFÉ ÜBER", "日本語のテキスト",
            "中文 日本 テキスト", "한국어", "привет мир", "αβγδ ελ", "emoji 🙂 👍🏽 👨‍👩‍👧 ❤️", "☃", "☃☃ ☃", "a☃☃b☃c",
            "Ж ЖЖ ℤ ☃x", std::string("nul\0inside", 10), "12 123 2024 3.14 1,000", "punctuation!!! ??? ... --- ;;;",
            "(a)[b]{c}<d> $5 +1 ^_^ @#%&* ~`|\\", "``quoted'' text", "\xEF\xAC\x81ne \xEF\xAC\x82y",
            "Ｈｅｌｌｏ　ｗｏｒｌｄ１２", "x\xC2\xB2 \xE2\x85\xAB \xE2\x80\xA6 \xE2\x84\xA2 \xE2\x91\xA0\xEF\xBC\x81",
            "nbsp\xC2\xA0here\xE2\x80\x83" "em\xE3\x80\x80ideographic zero\xE2\x80\x8Bwidth",
            "control\x01\x02\x7f chars\x0b\x0c ff", "\xEF\xBF\xBD replacement",
            "\xE2\x96\x81literal underline\xE2\x96\x81\xE2\x96\x81x", "a\xCC\x88 ä", "\xEF\xBD\xB6", "</s>", "a</s>b",
            "</s> hello </s>", "<unk> x<pad>", "<0x41>", "İstanbul", std::string(300, 'a'), "wor" + std::string(50, 'l') + "d"};
}

std::string random_text(std::mt19937& rng) {
    static const std::vector<std::string> frags = {
        " ", "  ", "\t", "\n", "\xC2\xA0", "\xE3\x80\x80", "the", "The", "cat", "hello", "Hello", "world", "ing", "ed",
        "un", "believ", "able", "token", "ization", "café", "naïve", "Zürich", "CAFÉ", "日本語", "中文", "の", "テキスト",
        "한국어", "привет", "αβγ", "🙂", "👍", "☃", "Ж", "x", "y", "xy", "p", "q", "pq", "ab", "abc", "bcd", "cd", "12",
        "2024", "3.14", ".", ",", "!", "?", "...", "-", "(", ")", "\"", "'", "`", "``", "</s>", "<pad>", "<unk>",
        "\xEF\xAC\x81", "Ｈｅｌｌｏ", "１２", "\xC2\xB2", "\xE2\x80\xA6", "\x01", "\x7f", "\xE2\x80\x8B", "\xEF\xBF\xBD",
        "e\xCC\x81", "\xE2\x96\x81", "İ", "A", "Z", "EN", "ü"};
    std::string s;
    for (int n = 1 + (int)(rng() % 14); n > 0; n--) s += frags[rng() % frags.size()];
    return s;
}

std::vector<std::string> texts_with_random_ug(uint32_t seed, int n) {
    std::vector<std::string> t = tricky_texts_ug();
    std::mt19937 rng(seed);
    for (int i = 0; i < n; i++) t.push_back(random_text(rng));
    return t;
}

// encode_prompt of every text equals the reference's ids; returns ours. collapse_bytes: a run of byte pieces
// counts as the one unknown id the reference (which has no byte fallback for Unigram) gives for it.
std::vector<std::vector<int>> expect_matches_node_ug(const gb::tokenizer& t, const written_ug& w,
                                                  const std::vector<std::string>& texts, const std::string& what,
                                                  bool collapse_bytes = false) {
    nlohmann::json out = run_json_encode(w.json, w.config, texts, false);
    std::vector<std::vector<int>> got;
    if (!out.is_array() || out.size() != texts.size()) {
        ADD_FAILURE() << "could not run node " << node_dir << "/json_encode.js (@lenml/tokenizers): run tools/setup.sh --tests";
        return got;
    }
    const int first_byte = piece_id("<0x00>");
    int bad = 0;
    for (size_t i = 0; i < texts.size(); i++) {
        got.push_back(gb::encode_prompt(t, texts[i], false));
        std::vector<int> cmp = got.back();
        if (collapse_bytes) {
            cmp.clear();
            for (int id : got.back()) {
                const bool byte = id >= first_byte && id < first_byte + 256;
                if (!byte) cmp.push_back(id);
                else if (cmp.empty() || cmp.back() != t.unk_id) cmp.push_back(t.unk_id);
            }
        }
        const std::vector<int> want = out[i].get<std::vector<int>>();
        if (cmp != want && bad++ < 12)
            ADD_FAILURE() << what << ": " << nlohmann::json(texts[i]).dump() << "\n  got  " << nlohmann::json(got.back()).dump()
                          << "\n  want " << nlohmann::json(want).dump();
    }
    EXPECT_EQ(bad, 0) << what << ": texts encoded differently from @lenml/tokenizers";
    return got;
}

std::vector<int> ids_of(std::initializer_list<const char*> pieces) {
    std::vector<int> r;
    for (const char* p : pieces) r.push_back(piece_id(p));
    return r;
}

} // namespace

// ---- against the reference ----

TEST(UnigramTokenizer, T5StyleMatchesReference) {
    written_ug w = write_unigram("unigram_t5", unigram_options{});
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_EQ(t.kind, gb::TOK_UNIGRAM);
    EXPECT_TRUE(t.prefix_ids.empty());
    EXPECT_EQ(t.suffix_ids, std::vector<int>{1});
    EXPECT_EQ(t.unk_id, 2);
    EXPECT_EQ(t.eos_id, 1);
    expect_matches_node_ug(t, w, texts_with_random_ug(31, 400), "t5");
}

TEST(UnigramTokenizer, MbartStyleMatchesReference) {
    unigram_options o;
    o.style = "mbart";
    written_ug w = write_unigram("unigram_mbart", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    const int en = (int)unigram_vocab().size();
    EXPECT_EQ(t.prefix_ids, std::vector<int>{en}); // an added token past the vocab
    EXPECT_EQ(t.piece_scores.size(), (size_t)en);
    std::vector<std::string> texts = texts_with_random_ug(32, 400);
    texts.push_back("en_XX hello en_XX");
    expect_matches_node_ug(t, w, texts, "mbart");
}

TEST(UnigramTokenizer, NfkcLowercaseMatchesReferenceAndBytesFallBack) {
    unigram_options o;
    o.style = "nfkc";
    o.byte_fallback = true;
    written_ug w = write_unigram("unigram_nfkc", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_TRUE(t.byte_fallback);
    std::vector<std::string> texts;
    for (const std::string& s : texts_with_random_ug(33, 400))
        if (s.find("<0x") == std::string::npos) texts.push_back(s); // a literal byte piece: not a fallback run
    // transformers.js has no byte fallback for Unigram: its unknown id stands for each run of bytes here
    expect_matches_node_ug(t, w, texts, "nfkc + lowercase, byte fallback", true);
    // HF: the run's bytes, when every byte has its piece
    EXPECT_EQ(gb::encode(t, "☃"), ids_of({"▁", "<0xE2>", "<0x98>", "<0x83>"}));
    EXPECT_EQ(gb::encode(t, "a☃☃"), ids_of({"▁a", "<0xE2>", "<0x98>", "<0x83>", "<0xE2>", "<0x98>", "<0x83>"}));
    EXPECT_EQ(gb::decode(t, gb::encode(t, "a☃☃ b Ж")), "a☃☃ b ж");
}

TEST(UnigramTokenizer, MetaspaceFirstWithoutPostProcessorMatchesReference) {
    unigram_options o;
    o.style = "plain";
    written_ug w = write_unigram("unigram_plain", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_TRUE(t.prefix_ids.empty() && t.suffix_ids.empty());
    EXPECT_TRUE(t.prefix_first_only);
    std::vector<std::string> texts;
    // prepend_scheme "first": transformers.js prefixes every word of the first section after WhitespaceSplit and
    // after a normalizer dropped leading text; neither happens here (no normalizer, no WhitespaceSplit)
    for (const std::string& s : texts_with_random_ug(34, 400)) texts.push_back(s);
    for (const char* s : {"</s>abc", "</s> abc", "abc</s>abc", "x</s>", "<pad><pad>x"}) texts.push_back(s);
    std::vector<std::vector<int>> got = expect_matches_node_ug(t, w, texts, "plain, first");
    // after a special token, no prefix; at the start, one
    EXPECT_EQ(gb::encode(t, "</s>cat"), (std::vector<int>{1, piece_id("c"), piece_id("at")}));
    EXPECT_EQ(gb::encode(t, "cat"), ids_of({"▁cat"}));
}

TEST(UnigramTokenizer, PrependNormalizerWithoutPreTokenizerMatchesReference) {
    unigram_options o;
    o.style = "prepend";
    written_ug w = write_unigram("unigram_prepend", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_FALSE(t.metaspace);
    EXPECT_EQ(t.normalizers.size(), 3u);
    expect_matches_node_ug(t, w, texts_with_random_ug(36, 300), "NFC, Prepend, Replace");
    EXPECT_EQ(gb::encode(t, "cafe\xCC\x81"), gb::encode(t, "caf\xC3\xA9")); // NFC composes the accent
}

TEST(UnigramTokenizer, DecodeMatchesReferenceAndReencodes) {
    for (const char* style : {"t5", "mbart"}) {
        unigram_options o;
        o.style = style;
        written_ug w = write_unigram(std::string("unigram_dec_") + style, o);
        gb::tokenizer t = gb::load_tokenizer_json(w.json);
        std::vector<std::vector<int>> ids;
        std::vector<std::string> texts;
        for (const std::string& s : texts_with_random_ug(35, 300)) {
            if (s.find("<0x") != std::string::npos) continue; // transformers.js does not decode byte pieces
            texts.push_back(s);
            ids.push_back(gb::encode_prompt(t, s, false));
        }
        nlohmann::json want = run_json_encode(w.json, w.config, ids, true);
        NODE_RESULTS(want, ids.size());
        for (size_t i = 0; i < ids.size(); i++) {
            const std::string d = gb::decode(t, ids[i]);
            EXPECT_EQ(d, want[i].get<std::string>()) << style << ": decode of " << nlohmann::json(texts[i]).dump();
            // decoding is lossy (normalisation, spaces, unknowns) but stable where nothing was unknown: the
            // decoded text encodes to the same ids, the specials included
            if (std::find(ids[i].begin(), ids[i].end(), t.unk_id) == ids[i].end()) {
                EXPECT_EQ(gb::encode(t, d), ids[i]) << style << ": re-encoding " << nlohmann::json(d).dump();
            }
        }
    }
}

// ---- details: Viterbi, unknowns, byte fallback, the charsmap as HF applies it ----

TEST(UnigramTokenizer, ViterbiPicksTheBestSumAndBreaksTiesLikeHF) {
    unigram_options o;
    o.style = "nfkc";
    gb::tokenizer t = gb::load_tokenizer_json(write_unigram("unigram_viterbi", o).json);
    // the best sum of a brute force over every segmentation
    for (const char* word : {"abcd", "xyxy", "pqpq", "bcdab", "helloworld", "日本語のテキスト"}) {
        std::vector<int> got = gb::encode(t, word);
        const std::string s = kUnigramSpace + std::string(word);
        std::vector<double> best(s.size() + 1, -1e300);
        best[0] = 0;
        for (size_t i = 0; i < s.size(); i++) {
            if (best[i] == -1e300) continue;
            for (size_t e = i + 1; e <= s.size(); e++) {
                auto it = t.ids.find(s.substr(i, e - i));
                if (it == t.ids.end() || it->second >= (int)t.piece_scores.size()) continue;
                const double v = best[i] + t.piece_scores[it->second];
                best[e] = std::max(best[e], v);
            }
        }
        double sum = 0;
        for (int id : got) sum += t.piece_scores[id];
        EXPECT_DOUBLE_EQ(sum, best[s.size()]) << word;
        EXPECT_EQ(gb::decode(t, got), word);
    }
    // x + y = xy = -4 exactly: the longer last piece, offered first, keeps the tie (HF and transformers.js alike)
    EXPECT_EQ(gb::encode(t, "q xy"), ids_of({"▁", "q", "▁", "xy"}));
    // ▁ + p + q = (-2.5 - 0.1) - 0.2 = -2.8000000000000003 beats ▁ + pq = -2.5 - 0.30000001 = -2.8000000099999998
    // in doubles; in floats the two tie and pq would win
    EXPECT_EQ(gb::encode(t, "q pq"), ids_of({"▁", "q", "▁", "p", "q"}));
}

TEST(UnigramTokenizer, UnknownRunsFuseAndByteFallbackNeedsEveryByte) {
    unigram_options o;
    o.style = "t5";
    gb::tokenizer t = gb::load_tokenizer_json(write_unigram("unigram_unk", o).json);
    double lo = 0;
    for (double s : t.piece_scores) lo = std::min(lo, s);
    EXPECT_DOUBLE_EQ(t.unk_score, lo - 10);
    EXPECT_EQ(gb::encode(t, "☃☃"), ids_of({"▁", "<unk>"}));
    EXPECT_EQ(gb::encode(t, "a☃☃b☃"), ids_of({"▁a", "<unk>", "b", "<unk>"}));
    EXPECT_EQ(gb::encode(t, "☃ ☃"), ids_of({"▁", "<unk>", "▁", "<unk>"}));
    EXPECT_EQ(gb::decode(t, gb::encode_prompt(t, "a☃☃b", false)), "a<unk>b</s>");
    // byte fallback: every byte of the run or, when one has no piece, the unknown id
    o.byte_fallback = true;
    nlohmann::json j = unigram_tokenizer_json(o);
    const std::string dir = test_temp_dir("unigram_bytes");
    write_file(dir + "/all.json", j.dump());
    gb::tokenizer b = gb::load_tokenizer_json(dir + "/all.json");
    EXPECT_EQ(gb::encode(b, "Ж☃"), ids_of({"▁", "<0xD0>", "<0x96>", "<0xE2>", "<0x98>", "<0x83>"}));
    EXPECT_EQ(gb::decode(b, gb::encode(b, "Ж☃ 👍🏽")), "Ж☃ 👍🏽");
    for (auto& e : j["model"]["vocab"])
        if (e[0] == "<0x83>") e[0] = "<0x83-gone>";
    write_file(dir + "/gap.json", j.dump());
    gb::tokenizer g = gb::load_tokenizer_json(dir + "/gap.json");
    EXPECT_EQ(gb::encode(g, "Ж☃"), ids_of({"▁", "<unk>"}));      // the run fused, then one byte missing
    EXPECT_EQ(gb::encode(g, "Ж"), ids_of({"▁", "<0xD0>", "<0x96>"}));
    // without unk_id an unknown character is an error naming it (HF refuses too)
    o.byte_fallback = false;
    o.unk_id = nullptr;
    gb::tokenizer n = gb::load_tokenizer_json(write_unigram("unigram_no_unk", o).json);
    EXPECT_EQ(n.unk_id, -1);
    EXPECT_EQ(gb::encode(n, "cat"), ids_of({"▁cat"}));
    expect_gb_error([&] { gb::encode(n, "a☃"); }, "'☃' is not in the Unigram vocabulary and the model has no unk_id");
}

TEST(UnigramTokenizer, PrecompiledCharsmapAsHFAppliesIt) {
    // HF's tokenizers (spm_precompiled): per grapheme cluster under 6 bytes, the shortest rule for a prefix of the
    // cluster replaces the whole cluster; longer clusters go character by character
    unigram_options o;
    o.style = "mbart";
    o.rules = {{"e", "E"}, {"e\xCC\x81", "\xC3\xA9"}, {"a", "b"}, {"\xEF\xAC\x81", "fi"}, {"\x01", ""}, {"\t", " "}};
    gb::tokenizer t = gb::load_tokenizer_json(write_unigram("unigram_charsmap", o).json);
    ASSERT_EQ(t.normalizers.size(), 2u);
    ASSERT_EQ(t.normalizers[0].kind, gb::NORM_PRECOMPILED);
    auto norm_text = [&](const std::string& s) { // what the pieces spell, without the template and prefix
        std::vector<int> ids = gb::encode(t, s);
        return gb::decode(t, ids);
    };
    EXPECT_EQ(norm_text("e"), "E");
    EXPECT_EQ(norm_text("e\xCC\x81"), "E");              // "e" is the first rule found: the accent goes with it
    EXPECT_EQ(norm_text("a\xCC\x81\xCC\x81"), "b");      // 5 bytes: the whole cluster
    EXPECT_EQ(norm_text("a\xCC\x81\xCC\x81\xCC\x81"), "b<unk>"); // 7 bytes: per character (the accents unknown)
    EXPECT_EQ(norm_text("\xEF\xAC\x81no"), "fino");
    EXPECT_EQ(norm_text("x\x01y\tz"), "xy z");
    EXPECT_EQ(norm_text(std::string("x\0y", 3)), std::string("x<unk>y")); // NUL ends a key: no rule, unknown
    // the reference rules: halfwidth ka + voiced mark is one 6-byte cluster, so each character maps alone
    o.rules = nmt_rules();
    gb::tokenizer r = gb::load_tokenizer_json(write_unigram("unigram_charsmap2", o).json);
    EXPECT_EQ(gb::decode(r, gb::encode(r, "\xEF\xBD\xB6\xEF\xBE\x9E")), "\xE3\x82\xAB<unk>");
    EXPECT_EQ(gb::decode(r, gb::encode(r, "Ｈｅｌｌｏ\xE3\x80\x80ｗｏｒｌｄ")), "Hello world");
    // null or empty charsmap: no rewriting
    nlohmann::json j = unigram_tokenizer_json(o);
    j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = nullptr;
    const std::string dir = test_temp_dir("unigram_charsmap_null");
    write_file(dir + "/t.json", j.dump());
    gb::tokenizer z = gb::load_tokenizer_json(dir + "/t.json");
    EXPECT_EQ(gb::decode(z, gb::encode(z, "Ｈｅ")), "<unk>");
}

TEST(UnigramTokenizer, RoundTripsAndEdgeCases) {
    gb::tokenizer t = gb::load_tokenizer_json(write_unigram("unigram_rt", unigram_options{}).json);
    EXPECT_EQ(gb::encode(t, ""), std::vector<int>{});
    EXPECT_EQ(gb::encode_prompt(t, "", false), std::vector<int>{1});
    EXPECT_EQ(gb::encode_prompt(t, "", true), std::vector<int>{1}); // the template wins over a BOS request
    EXPECT_EQ(gb::encode(t, " \t\n "), std::vector<int>{});
    for (const char* s : {"Hello world", "The cat sat on the mat.", "café naïve Zürich", "日本語のテキスト 中文",
                          "12 2024 3.14", "(a)[b]{c} $5 +1", "xy pq abcd"})
        EXPECT_EQ(gb::decode(t, gb::encode(t, s)), s);
    EXPECT_EQ(gb::decode(t, gb::encode(t, "  Hello    world  ")), "Hello world");
    EXPECT_EQ(gb::decode(t, gb::encode(t, "\xEF\xAC\x81ne  Ｈｅｌｌｏ\xE2\x80\xA6")), "fine Hello...");
    EXPECT_EQ(gb::decode(t, gb::encode_prompt(t, "Hi", false)), "Hi</s>");
    EXPECT_EQ(gb::token_text(t, piece_id("▁cat")), " cat");
    EXPECT_EQ(gb::token_bytes(t, piece_id("<0xE2>")), "\xE2");
    EXPECT_EQ(gb::token_text(t, piece_id("<0xE2>")), "<E2>");
    EXPECT_EQ(gb::single_token_id(t, "cat", "--target"), piece_id("▁cat"));
    expect_gb_error([&] { gb::decode(t, {100000}); }, "outside the vocabulary");
    expect_gb_error([&] { gb::encode(t, "bad \xff"); }, "invalid UTF-8 at byte 4");
    // a long word: work linear in its length (a quadratic lattice would do about ten times the work per byte
    // for ten times the word); counted, not timed
    auto long_word = [](int parts) {
        std::string w;
        for (int i = 0; i < parts; i++) w += i % 7 ? "ab" : "☃";
        return w;
    };
    std::vector<int> ids = expect_linear_encode_work(t, long_word(2000), long_word(20000), "Unigram, one long word");
    EXPECT_GT(ids.size(), 1000u);
}

TEST(UnigramTokenizer, FolderAndTypelessModel) {
    // a T5 folder (tokenizer.json + tokenizer_config.json); T5's older files leave out the model's type
    nlohmann::json j = unigram_tokenizer_json(unigram_options{});
    j["model"].erase("type");
    const std::string dir = test_temp_dir("unigram_folder");
    write_file(dir + "/tokenizer.json", j.dump());
    write_file(dir + "/tokenizer_config.json", R"({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"})");
    gb::tokenizer t = gb::load_folder_tokenizer(dir, "t5");
    EXPECT_EQ(t.kind, gb::TOK_UNIGRAM);
    EXPECT_EQ(gb::encode_prompt(t, "hello world", false), (std::vector<int>{piece_id("▁hello"), piece_id("▁world"), 1}));
    // a Marian folder has SentencePiece's own files and no tokenizer.json: said so, not "merges.txt is missing"
    const std::string marian = test_temp_dir("unigram_marian");
    write_file(marian + "/source.spm", "not read");
    write_file(marian + "/vocab.json", "{}");
    expect_gb_error([&] { gb::load_folder_tokenizer(marian, "marian"); },
                    "no tokenizer.json, and SentencePiece's own model file (source.spm) is not read");
}

TEST(UnigramTokenizer, BadFilesGiveClearErrors) {
    const std::string dir = test_temp_dir("unigram_bad");
    int n = 0;
    auto expect_load_error = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& needle) {
        nlohmann::json j = unigram_tokenizer_json(unigram_options{});
        edit(j);
        const std::string path = dir + "/bad" + std::to_string(n++) + ".json";
        write_file(path, j.dump());
        expect_gb_error([&] { gb::load_tokenizer_json(path); }, needle);
    };
    expect_load_error([](nlohmann::json& j) { j["model"]["vocab"] = nlohmann::json::array(); },
                      "Unigram model: vocab is empty");
    expect_load_error([](nlohmann::json& j) { j["model"]["vocab"][5] = "a"; }, "vocab entry 5 is not [piece, score]");
    expect_load_error([](nlohmann::json& j) { j["model"]["vocab"][5] = {"a", "x"}; }, "vocab entry 5 is not [piece, score]");
    expect_load_error([](nlohmann::json& j) { j["model"]["unk_id"] = 100000; }, "unk_id 100000 is outside the vocab");
    expect_load_error([](nlohmann::json& j) { j["model"]["unk_id"] = -1; }, "unk_id -1 is outside the vocab");
    expect_load_error([](nlohmann::json& j) { j["model"]["byte_fallback"] = "yes"; }, "byte_fallback");
    expect_load_error([](nlohmann::json& j) { j["normalizer"]["normalizers"][0] = {{"type", "BertNormalizer"}}; },
                      "normalizer 'BertNormalizer' is not supported with Unigram (expected Precompiled, NFKC, NFKD, NFC, "
                      "NFD, Replace, Strip, Lowercase, Prepend or a Sequence of them)");
    expect_load_error([](nlohmann::json& j) { j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "not base64!"; },
                      "Precompiled: precompiled_charsmap is not valid base64");
    expect_load_error([](nlohmann::json& j) { j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = "AAA="; },
                      "precompiled_charsmap is shorter than its 4-byte header");
    auto charsmap = [](const std::string& bytes) {
        return [bytes](nlohmann::json& j) { j["normalizer"]["normalizers"][0]["precompiled_charsmap"] = base64(bytes); };
    };
    expect_load_error(charsmap(std::string("\x10\0\0\0abcd", 8)), "precompiled_charsmap's trie of 16 bytes does not fit its 4 bytes");
    expect_load_error(charsmap(std::string("\0\0\0\0\xff", 5)), "replacement strings are not valid UTF-8");
    expect_load_error([](nlohmann::json& j) { j["normalizer"]["normalizers"][2]["pattern"] = {{"Regex", "(unclosed"}}; },
                      "Replace: tokenizer split regex does not compile");
    expect_load_error([](nlohmann::json& j) { j["normalizer"]["normalizers"][2]["pattern"] = {{"Glob", "x"}}; },
                      "Replace: pattern is neither");
    expect_load_error([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}}; },
                      "pre-tokenizer 'Whitespace' is not supported with Unigram (expected Metaspace, WhitespaceSplit or a "
                      "Sequence of them)");
    expect_load_error([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][1]["replacement"] = "_"; },
                      "Metaspace replacement '_' is not supported");
    expect_load_error([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][1]["prepend_scheme"] = "sometimes"; },
                      "prepend_scheme 'sometimes' is not one of always, first, never");
    expect_load_error(
        [](nlohmann::json& j) {
            auto& p = j["pre_tokenizer"]["pretokenizers"];
            std::swap(p[0], p[1]);
        },
        "WhitespaceSplit after Metaspace is not supported");
    expect_load_error([](nlohmann::json& j) { j["added_tokens"].push_back(added(7, "<mask>")); },
                      "added token '<mask>' has id 7, which the Unigram vocab gives to");
    expect_load_error([](nlohmann::json& j) { j["post_processor"]["single"][1]["SpecialToken"]["id"] = "</nope>"; },
                      "post_processor TemplateProcessing");
    expect_load_error([](nlohmann::json& j) { j["model"]["type"] = "WordLevel"; },
                      "model type 'WordLevel' is not supported (expected BPE, WordPiece or Unigram)");
}
