// Robustness of the loaders against hostile files: JSON nesting bounded and JSON values type-checked in every
// JSON file a model folder holds; counts that would size allocations (tokenizer.json added tokens, GGUF arrays)
// bounded by what the file holds; GGUF tokenizer metadata (pre-tokenizer types, add_space_prefix); NaN/Inf in
// weights and logits; the attention .npy written without a full-size buffer; the tests' own comparison helper.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/resource.h>

#include "analysis/export.h"
#include "cpu_growth.h"
#include "gguf_writer.h"
#include "io/gguf.h"
#include "io/loader.h"
#include "io/writers.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "run/generate.h"
#include "test_util.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_util.h"

namespace {

const std::string U = "\xE2\x96\x81"; // "▁"

// "[[[...]]]" nested depth deep
std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }
// {"a":{"a":...1...}} nested depth deep
std::string nested_objects(int depth) {
    std::string s;
    for (int i = 0; i < depth; i++) s += "{\"a\":";
    s += "1";
    return s + std::string(depth, '}');
}

// Peak resident memory of this process so far, in MB.
double peak_rss_mb() {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024.0;
}

// GPT-2's 256 byte stand-ins in byte order (ids 0..255 of random_gpt2's vocabulary).
std::vector<std::string> byte_stand_ins() {
    gb::model_config c;
    c.n_layer = 1, c.n_head = 1, c.d_model = 4, c.vocab_size = 257, c.n_ctx = 4;
    gb::model m = gb::random_gpt2(c, 1);
    return std::vector<std::string>(m.tok.vocab.begin(), m.tok.vocab.begin() + 256);
}

// The smallest GGUF model of an architecture ("gpt2" or "llama": 1 layer, d 4, 1 head, ff 4, context 8, small
// weights) with vocab_size V; the caller adds the tokenizer metadata.
gguf_out tiny_gguf(const std::string& arch, int64_t V) {
    const int64_t d = 4, ff = 4, ctx = 8;
    gguf_out g;
    g.str("general.architecture", arch);
    g.u32(arch + ".block_count", 1);
    g.u32(arch + ".embedding_length", (uint32_t)d);
    g.u32(arch + ".feed_forward_length", (uint32_t)ff);
    g.u32(arch + ".attention.head_count", 1);
    g.u32(arch + ".context_length", (uint32_t)ctx);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.1f);
    auto t = [&](const std::string& name, std::vector<int64_t> ne) {
        int64_t n = 1;
        for (int64_t v : ne) n *= v;
        std::vector<float> v((size_t)n);
        for (float& x : v) x = name.find("norm") != std::string::npos ? 1.0f : nd(rng);
        g.f32_tensor(name, ne, v);
    };
    t("token_embd.weight", {d, V});
    t("output_norm.weight", {d});
    if (arch == "gpt2") {
        t("position_embd.weight", {d, ctx});
        t("output_norm.bias", {d});
        for (const char* n : {"attn_norm.weight", "attn_norm.bias", "attn_output.bias", "ffn_norm.weight", "ffn_norm.bias",
                              "ffn_down.bias"})
            t(std::string("blk.0.") + n, {d});
        t("blk.0.attn_qkv.weight", {d, 3 * d});
        t("blk.0.attn_qkv.bias", {3 * d});
        t("blk.0.attn_output.weight", {d, d});
        t("blk.0.ffn_up.weight", {d, ff});
        t("blk.0.ffn_up.bias", {ff});
        t("blk.0.ffn_down.weight", {ff, d});
    } else {
        for (const char* n : {"attn_norm.weight", "ffn_norm.weight"}) t(std::string("blk.0.") + n, {d});
        for (const char* n : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"})
            t(std::string("blk.0.") + n, {d, d});
        t("blk.0.ffn_gate.weight", {d, ff});
        t("blk.0.ffn_up.weight", {d, ff});
        t("blk.0.ffn_down.weight", {ff, d});
    }
    return g;
}

// A byte-level vocabulary (the 256 stand-ins) plus extra tokens, and the merges given as "left right".
void byte_level_tokenizer(gguf_out& g, const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                          const std::string& pre) {
    std::vector<std::string> toks = byte_stand_ins();
    toks.insert(toks.end(), extra.begin(), extra.end());
    g.str("tokenizer.ggml.model", "gpt2");
    g.str("tokenizer.ggml.pre", pre);
    g.strs("tokenizer.ggml.tokens", toks);
    g.strs("tokenizer.ggml.merges", merges);
}

int id_of(const gb::tokenizer& t, const std::string& s) {
    auto it = t.ids.find(s);
    return it == t.ids.end() ? -1 : it->second;
}

} // namespace

// ---- JSON: nesting depth and value types ----

TEST(Json, DeeplyNestedTokenizerJsonIsRefusedNotACrash) {
    // a pre_tokenizer or normalizer nested 100000 deep once overflowed the stack (recursive dump() and scan)
    std::string dir = test_temp_dir("rob_json_deep");
    const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
    write_file(dir + "/pre.json", "{" + model + ", \"pre_tokenizer\": " + nested_objects(100000) + "}");
    write_file(dir + "/norm.json", "{" + model + ", \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": " +
                                       nested_arrays(100000) + "}}");
    for (const char* f : {"/pre.json", "/norm.json"}) {
        expect_gb_error([&] { gb::load_tokenizer_json(dir + f); }, "nested deeper than 64 levels");
        expect_gb_error([&] { gb::load_tokenizer_json(dir + f); }, f + 1);
    }
    // 64 levels are fine (the error, if any, is about content, not depth)
    write_file(dir + "/ok.json", "{" + model + ", \"extra\": " + nested_arrays(63) + "}");
    EXPECT_NO_THROW(gb::load_tokenizer_json(dir + "/ok.json"));
    // brackets inside strings do not count
    write_file(dir + "/str.json", "{" + model + ", \"extra\": \"" + std::string(1000, '[') + "\"}");
    EXPECT_NO_THROW(gb::load_tokenizer_json(dir + "/str.json"));
}

TEST(Json, EveryJsonFileOfAFolderIsBounded) {
    std::string dir = test_temp_dir("rob_json_files");
    auto fresh = [&](const std::string& name) {
        tiny_spec s;
        s.n_layer = 1;
        return write_tiny_gpt2(dir + "/" + name, s).dir;
    };
    const std::string deep = nested_arrays(200);
    auto patch = [&](const std::string& path, const std::string& key) { // adds "key": deep to a JSON object file
        nlohmann::json j = gb::read_json_file(path);
        std::string text = j.dump();
        text.insert(text.size() - 1, ",\"" + key + "\":" + deep);
        write_file(path, text);
    };
    std::string a = fresh("config");
    patch(a + "/config.json", "x");
    expect_gb_error([&] { gb::load_model(a); }, "config.json: JSON nested deeper");
    std::string b = fresh("vocab");
    patch(b + "/vocab.json", "x");
    expect_gb_error([&] { gb::load_model(b); }, "vocab.json: JSON nested deeper");
    // sharded: model.safetensors.index.json
    std::string c = fresh("index");
    std::filesystem::rename(c + "/model.safetensors", c + "/part.safetensors");
    write_file(c + "/model.safetensors.index.json", "{\"weight_map\": {\"wte.weight\": \"part.safetensors\"}, \"x\": " + deep + "}");
    expect_gb_error([&] { gb::load_model(c); }, "index.json: JSON nested deeper");
    // tokenizer_config.json next to a tokenizer.json
    std::string d = dir + "/tokcfg";
    std::filesystem::create_directories(d);
    write_file(d + "/tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
    write_file(d + "/tokenizer_config.json", "{\"x\": " + deep + "}");
    expect_gb_error([&] { gb::load_folder_tokenizer(d, "llama"); }, "tokenizer_config.json: JSON nested deeper");
    // the safetensors header
    std::string header = "{\"x\": " + deep + "}";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string st(8, '\0');
    for (int i = 0; i < 8; i++) st[i] = (char)((header.size() >> (8 * i)) & 0xff);
    write_file(dir + "/deep.safetensors", st + header);
    expect_gb_error([&] { gb::open_safetensors(dir + "/deep.safetensors"); }, "header: JSON nested deeper");
}

TEST(Json, WrongValueTypesAreErrorsNamingFileAndKey) {
    // these once escaped as nlohmann type_error 302 ("error: internal: ...", exit 1)
    std::string dir = test_temp_dir("rob_json_types");
    auto tok = [&](const std::string& name, const nlohmann::json& model_extra, const nlohmann::json& top_extra) {
        nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", nlohmann::json::array()}}}};
        j["model"].update(model_extra);
        j.update(top_extra);
        write_file(dir + "/" + name, j.dump());
        return dir + "/" + name;
    };
    std::string p = tok("im.json", {{"ignore_merges", "yes"}}, nlohmann::json::object());
    expect_gb_error([&] { gb::load_tokenizer_json(p); }, "im.json: model: ignore_merges must be true or false");
    p = tok("bf.json", {{"byte_fallback", 1}}, nlohmann::json::object());
    expect_gb_error([&] { gb::load_tokenizer_json(p); }, "bf.json: model: byte_fallback must be true or false, found 1");
    p = tok("pt.json", nlohmann::json::object(), {{"pre_tokenizer", {{"type", 5}}}});
    expect_gb_error([&] { gb::load_tokenizer_json(p); }, "pt.json: pre_tokenizer: type must be a string");
    p = tok("nt.json", nlohmann::json::object(), {{"normalizer", {{"type", "Sequence"}, {"normalizers", 3}}}});
    expect_gb_error([&] { gb::load_tokenizer_json(p); }, "nt.json: normalizer: normalizers is not an array");
    p = tok("ms.json", nlohmann::json::object(), {{"pre_tokenizer", {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}}}});
    expect_gb_error([&] { gb::load_tokenizer_json(p); }, "prepend_scheme 'sometimes'");
    // tokenizer_config.json
    std::string d = dir + "/cfg";
    std::filesystem::create_directories(d);
    std::filesystem::copy_file(tok("t.json", nlohmann::json::object(), nlohmann::json::object()), d + "/tokenizer.json");
    write_file(d + "/tokenizer_config.json", R"({"add_bos_token": "no"})");
    expect_gb_error([&] { gb::load_folder_tokenizer(d, "llama"); }, "tokenizer_config.json: add_bos_token must be true or false");
    write_file(d + "/tokenizer_config.json", "[1]");
    expect_gb_error([&] { gb::load_folder_tokenizer(d, "llama"); }, "tokenizer_config.json: not a JSON object");
    // config.json of a Llama-family model
    tiny_spec s;
    s.n_layer = 1;
    std::string m = write_tiny_gpt2(dir + "/llama", s).dir;
    nlohmann::json cfg = {{"model_type", "llama"}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                          {"hidden_size", 16}, {"intermediate_size", 32}, {"vocab_size", 300},
                          {"max_position_embeddings", 32}, {"tie_word_embeddings", "no"}};
    write_file(m + "/config.json", cfg.dump());
    expect_gb_error([&] { gb::load_model(m); }, "config.json: tie_word_embeddings must be true or false, found \"no\"");
    // whatever a loader does not check itself still ends as gb::error naming the file
    expect_gb_error([] { gb::json_guard("some.json", [] { return nlohmann::json(1).get<std::string>(); }); },
                    "some.json: unexpected JSON value (type must be string, but is number)");
}

// ---- counts that would size allocations ----

TEST(Counts, AddedTokenIdsAreBoundedByTheVocabulary) {
    // an added token with id 10M once resized the vocabulary to 10M entries
    std::string dir = test_temp_dir("rob_added");
    auto with_added = [&](int64_t id) {
        nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", nlohmann::json::array()}}},
                            {"added_tokens", {{{"id", id}, {"content", "<x>"}}, {{"id", 2}, {"content", "<y>"}}}}};
        write_file(dir + "/t.json", j.dump());
        return dir + "/t.json";
    };
    gb::tokenizer ok = gb::load_tokenizer_json(with_added(3)); // 2 base tokens + 2 added: ids up to 3
    EXPECT_EQ(ok.vocab.size(), 4u);
    EXPECT_EQ(gb::encode(ok, "a<x>b"), (std::vector<int>{0, 3, 1}));
    for (int64_t bad : {int64_t(4), int64_t(10000000), int64_t(1) << 40, int64_t(-1)})
        expect_gb_error([&] { gb::load_tokenizer_json(with_added(bad)); }, "added token '<x>' has id " + std::to_string(bad));
}

TEST(Counts, GgufArraysCostNoMemoryBeyondTheFile) {
    // a 5 MB GGUF holding one array of 5M u8 once took 440 MB (an 88-byte value per element); now numeric
    // arrays stay in the mapping, so reading the file's metadata costs the same for 50k elements as for 5M. A
    // count beyond what the remaining bytes can hold is refused outright.
    std::string dir = test_temp_dir("rob_gguf_array");
    auto write_array = [&](const std::string& name, uint32_t elem_type, uint64_t claimed, size_t bytes) {
        std::string b = "GGUF";
        auto put = [&](auto v) { b.append((const char*)&v, sizeof v); };
        put(uint32_t(3)), put(uint64_t(0)), put(uint64_t(1)); // version, tensors, metadata entries
        put(uint64_t(3)), b += "big", put(uint32_t(9)), put(elem_type), put(claimed);
        b.append(bytes, '\0');
        write_file(dir + "/" + name, b);
        return dir + "/" + name;
    };
    const size_t n = 5000000;
    std::string real = write_array("u8.gguf", 0, n, n + 64); // + room for the alignment before tensor data
    const std::string small = write_array("u8_small.gguf", 0, n / 100, n / 100 + 64);
    double before = peak_rss_mb();
    expect_gb_error([&] { gb::load_model(real); }, "general.architecture"); // the array itself is fine
    EXPECT_LT(peak_rss_mb() - before, 64.0) << "MB of peak memory for a 5 MB file";
    // CPU time of 100 times the elements: about 1x when the array stays in the mapping, 100x when each is read
    const double growth = cpu_growth(
        [&](int count) { expect_gb_error([&] { gb::load_model(count == (int)n ? real : small); }, "general.architecture"); },
        (int)n / 100, (int)n);
    EXPECT_LT(growth, 10.0) << "loading 100x the array's elements took " << growth << "x the CPU time";
    gb::gguf_file g = gb::open_gguf(real);
    ASSERT_EQ(g.meta.at("big").n, n);
    EXPECT_EQ(gb::gguf_array_int(g.meta.at("big"), n - 1), 0);
    // lying counts: 5M u32 (20 MB) or 5M strings (40 MB at least) in 5 MB
    expect_gb_error([&] { gb::open_gguf(write_array("u32.gguf", 4, n, n)); }, "array of 5000000 elements of 4 bytes exceeds");
    expect_gb_error([&] { gb::open_gguf(write_array("str.gguf", 8, n, n)); }, "array of 5000000 strings");
    expect_gb_error([&] { gb::open_gguf(write_array("nest.gguf", 9, 1, 64)); }, "arrays of arrays");
    EXPECT_LT(peak_rss_mb() - before, 64.0);
}

// ---- GGUF tokenizer metadata, as llama.cpp reads it ----

TEST(GgufTokenizer, SmolLmCutsDigitsOutBeforeGpt2Pattern) {
    // llama.cpp's smollm pre-tokenizer: single digits first, then GPT-2's pattern on the text between them
    // (it was mapped to Llama 3's pattern, which keeps up to three digits together)
    std::string dir = test_temp_dir("rob_smollm");
    const std::vector<std::string> bytes = byte_stand_ins();
    const std::string G = bytes[' '];
    gguf_out g = tiny_gguf("gpt2", 256 + 2);
    byte_level_tokenizer(g, {"12", G + G}, {"1 2", G + " " + G}, "smollm");
    g.write(dir + "/m.gguf");
    gb::model m = gb::load_model(dir + "/m.gguf");
    const int gg = id_of(m.tok, G + G);
    EXPECT_EQ(gb::encode(m.tok, "12"), (std::vector<int>{'1', '2'}));
    EXPECT_EQ(gb::encode(m.tok, "a  5"), (std::vector<int>{'a', gg, '5'})); // "  " before a digit ends a piece
    EXPECT_EQ(gb::encode(m.tok, "a  b"), (std::vector<int>{'a', ' ', ' ', 'b'}));
    EXPECT_EQ(gb::encode(m.tok, "x 12"), (std::vector<int>{'x', ' ', '1', '2'}));
    // the same vocabulary as tokenizer.json with SmolLM's Digits(individual_digits) + ByteLevel pre-tokenizer
    nlohmann::json vocab = nlohmann::json::object();
    for (int i = 0; i < 256; i++) vocab[bytes[i]] = i;
    vocab["12"] = 256, vocab[G + G] = 257;
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"1 2", G + " " + G}}}},
                        {"pre_tokenizer",
                         {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Digits"}, {"individual_digits", true}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}}}};
    write_file(dir + "/tokenizer.json", j.dump());
    gb::tokenizer t = gb::load_tokenizer_json(dir + "/tokenizer.json");
    for (const char* s : {"12", "a  5", "a  b", "x 12", "it's 2026!\n 7 "})
        EXPECT_EQ(gb::encode(t, s), gb::encode(m.tok, s)) << s;
}

TEST(GgufTokenizer, LlamaBpeIgnoresMerges) {
    // llama.cpp sets ignore_merges for llama-bpe (as Llama 3's tokenizer.json says): a whole pre-token in the
    // vocabulary is one token even when no merges lead to it
    std::string dir = test_temp_dir("rob_llama_bpe");
    gguf_out g = tiny_gguf("gpt2", 256 + 1);
    byte_level_tokenizer(g, {"abc"}, {}, "llama-bpe");
    g.write(dir + "/m.gguf");
    gb::model m = gb::load_model(dir + "/m.gguf");
    EXPECT_TRUE(m.tok.ignore_merges);
    EXPECT_EQ(gb::encode(m.tok, "abc"), (std::vector<int>{256}));
    EXPECT_EQ(gb::encode(m.tok, "abcd"), (std::vector<int>{'a', 'b', 'c', 'd'}));
}

TEST(GgufTokenizer, AddSpacePrefixIsHonoured) {
    std::string dir = test_temp_dir("rob_space_prefix");
    std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        toks.push_back(n);
    }
    for (const std::string& s : {U, std::string("h"), std::string("i"), std::string("hi"), U + "hi"}) toks.push_back(s);
    std::vector<float> scores(toks.size(), 0.0f);
    scores[toks.size() - 2] = -1, scores[toks.size() - 1] = -2;
    auto model_with = [&](int add_space_prefix) { // -1: key absent
        gguf_out g = tiny_gguf("llama", (int64_t)toks.size());
        g.str("tokenizer.ggml.model", "llama");
        g.strs("tokenizer.ggml.tokens", toks);
        g.floats("tokenizer.ggml.scores", scores);
        g.u32("tokenizer.ggml.bos_token_id", 1);
        if (add_space_prefix >= 0) g.u32("tokenizer.ggml.add_space_prefix", (uint32_t)add_space_prefix);
        std::string path = dir + "/m" + std::to_string(add_space_prefix + 1) + ".gguf";
        g.write(path);
        return gb::load_model(path);
    };
    const int hi = (int)toks.size() - 2, u_hi = (int)toks.size() - 1;
    EXPECT_EQ(gb::encode(model_with(-1).tok, "hi"), (std::vector<int>{u_hi}));
    EXPECT_EQ(gb::encode(model_with(1).tok, "hi"), (std::vector<int>{u_hi}));
    gb::model off = model_with(0);
    EXPECT_EQ(gb::encode(off.tok, "hi"), (std::vector<int>{hi}));
    EXPECT_EQ(gb::decode(off.tok, gb::encode_prompt(off.tok, "hi", true)), "hi");
}

// ---- tokenizer.json: Metaspace as Hugging Face applies it ----

namespace {

// "▁"-vocabulary with byte fallback: <unk> <s> </s>, 256 bytes, then the given pieces, merged by rank.
std::string metaspace_json(const std::string& dir, const nlohmann::json& pre, const std::vector<std::string>& pieces,
                           const std::vector<std::string>& merges) {
    nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        vocab[n] = 3 + b;
    }
    for (size_t i = 0; i < pieces.size(); i++) vocab[pieces[i]] = 259 + (int)i;
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"byte_fallback", true}}},
                        {"pre_tokenizer", pre},
                        {"added_tokens", {{{"id", 1}, {"content", "<s>"}}, {{"id", 2}, {"content", "</s>"}}}}};
    write_file(dir + "/tokenizer.json", j.dump());
    return dir + "/tokenizer.json";
}

} // namespace

TEST(TokenizerJson, MetaspacePrependSchemeFirstOnlyAtTheStart) {
    // HF: with prepend_scheme "first" the "▁" goes only before the piece at the very start of the input, not
    // after a special token; "always" puts it before every piece that does not already start with a space
    std::string dir = test_temp_dir("rob_metaspace");
    const std::vector<std::string> pieces = {U, "h", "i", U + "h", U + "hi", "hi"};
    const std::vector<std::string> merges = {U + " h", "h i", U + "h i"};
    const int hi = 264, u_hi = 263;
    nlohmann::json first = {{"type", "Metaspace"}, {"replacement", U}, {"prepend_scheme", "first"}, {"split", false}};
    gb::tokenizer f = gb::load_tokenizer_json(metaspace_json(dir, first, pieces, merges));
    EXPECT_EQ(gb::encode(f, "hi"), (std::vector<int>{u_hi}));
    EXPECT_EQ(gb::encode(f, "hi</s>hi"), (std::vector<int>{u_hi, 2, hi})) << "no ▁ after a special token";
    EXPECT_EQ(gb::encode(f, "<s>hi"), (std::vector<int>{1, hi})) << "the text starts with a special token";
    EXPECT_EQ(gb::encode(f, " hi"), (std::vector<int>{u_hi})) << "already starts with a space: no second ▁";
    EXPECT_EQ(gb::encode(f, "hi hi"), (std::vector<int>{u_hi, u_hi}));
    nlohmann::json always = first;
    always["prepend_scheme"] = "always";
    gb::tokenizer a = gb::load_tokenizer_json(metaspace_json(dir, always, pieces, merges));
    EXPECT_EQ(gb::encode(a, "hi</s>hi"), (std::vector<int>{u_hi, 2, u_hi}));
    EXPECT_EQ(gb::encode(a, " hi"), (std::vector<int>{u_hi}));
    nlohmann::json never = first;
    never["prepend_scheme"] = "never";
    EXPECT_EQ(gb::encode(gb::load_tokenizer_json(metaspace_json(dir, never, pieces, merges)), "hi"), (std::vector<int>{hi}));
    // older files: add_prefix_space true is "always"
    nlohmann::json legacy = {{"type", "Metaspace"}, {"replacement", U}, {"add_prefix_space", true}};
    EXPECT_EQ(gb::encode(gb::load_tokenizer_json(metaspace_json(dir, legacy, pieces, merges)), "hi</s>hi"),
              (std::vector<int>{u_hi, 2, u_hi}));
}

TEST(TokenizerJson, MetaspaceSplitKeepsMergesInsideWords) {
    // split (the default) cuts the text before each "▁": "▁▁" cannot merge across a word start
    std::string dir = test_temp_dir("rob_metaspace_split");
    const std::vector<std::string> pieces = {U, "a", U + U, U + "a"};
    const std::vector<std::string> merges = {U + " " + U, U + " a"};
    const int u = 259, uu = 261, ua = 262;
    nlohmann::json pre = {{"type", "Metaspace"}, {"replacement", U}, {"prepend_scheme", "always"}};
    gb::tokenizer split = gb::load_tokenizer_json(metaspace_json(dir, pre, pieces, merges));
    EXPECT_TRUE(split.split_words);
    EXPECT_EQ(gb::encode(split, "a  a"), (std::vector<int>{ua, u, ua})); // words "▁a", "▁", "▁a"
    pre["split"] = false;
    gb::tokenizer whole = gb::load_tokenizer_json(metaspace_json(dir, pre, pieces, merges));
    EXPECT_EQ(gb::encode(whole, "a  a"), (std::vector<int>{ua, uu, 260})); // "▁▁" merges first, then "a" alone
}

TEST(TokenizerJson, FolderPrefersTokenizerJsonExceptForGpt2) {
    // Qwen2 / SmolLM repositories ship vocab.json + merges.txt next to tokenizer.json; only tokenizer.json has
    // their split regex, NFC and special tokens
    std::string dir = test_temp_dir("rob_folder_tok");
    tiny_model tm = write_tiny_gpt2(dir + "/m", tiny_spec{});
    nlohmann::json vocab = gb::read_json_file(tm.dir + "/vocab.json");
    const int n = (int)vocab.size();
    nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                        {"normalizer", {{"type", "NFC"}}},
                        {"pre_tokenizer", {{"type", "ByteLevel"}}},
                        {"added_tokens", {{{"id", n}, {"content", "<|im_start|>"}, {"special", true}}}}};
    write_file(tm.dir + "/tokenizer.json", j.dump());
    gb::tokenizer qwen = gb::load_folder_tokenizer(tm.dir, "qwen2");
    EXPECT_TRUE(qwen.nfc);
    EXPECT_EQ(gb::encode(qwen, "<|im_start|>"), (std::vector<int>{n}));
    gb::tokenizer gpt2 = gb::load_folder_tokenizer(tm.dir, "gpt2");
    EXPECT_FALSE(gpt2.nfc);
    EXPECT_EQ(gpt2.vocab.size(), (size_t)n);
    std::filesystem::remove(tm.dir + "/vocab.json");
    EXPECT_TRUE(gb::load_folder_tokenizer(tm.dir, "gpt2").nfc) << "gpt2 without vocab.json reads tokenizer.json";
}

// ---- NaN / Inf ----

TEST(NonFinite, WeightsAreReportedAtLoadNamingTheFirstTensor) {
    std::string dir = test_temp_dir("rob_nan_weights");
    gb::model_config c;
    c.n_layer = 2, c.n_head = 2, c.d_model = 8, c.vocab_size = 260, c.n_ctx = 8;
    gb::model m = gb::random_gpt2(c, 2);
    gb::save_hf_gpt2(dir + "/clean", m);
    EXPECT_EQ(gb::load_model(dir + "/clean").nonfinite_tensor, "");
    m.weights.layers[1].b_up[3] = std::nanf("");
    m.weights.layers[1].norm2_g[0] = std::numeric_limits<float>::infinity(); // read before b_up: reported first
    gb::save_hf_gpt2(dir + "/nan", m);
    gb::model bad = gb::load_model(dir + "/nan");
    EXPECT_EQ(bad.nonfinite_tensor, "layer 1 norm2 gain");
    EXPECT_EQ(gb::model_json(bad)["nonfinite_tensor"], "layer 1 norm2 gain");
    EXPECT_TRUE(gb::model_json(gb::load_model(dir + "/clean"))["nonfinite_tensor"].is_null());
    // the forward still runs and the display still has probabilities
    gb::record cap;
    gb::run_forward(cap, bad, {1, 2, 3});
    std::vector<gb::token_prob> top = gb::top_k_probs(cap.last_logits(), cap.vocab, 3);
    ASSERT_EQ(top.size(), 3u);
    for (const gb::token_prob& tp : top) EXPECT_TRUE(std::isfinite(tp.prob));
}

TEST(NonFinite, NaNLogitsCountAsMinusInfinity) {
    const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
    std::vector<float> p;
    std::vector<float> l = {nan, 1.0f, 3.0f, nan};
    gb::softmax_probs(p, l.data(), 4);
    EXPECT_EQ(p[0], 0.0f);
    EXPECT_EQ(p[3], 0.0f);
    EXPECT_NEAR(p[2], 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
    EXPECT_NEAR(p[1] + p[2], 1.0, 1e-6);
    std::vector<gb::token_prob> top = gb::top_k_probs(l.data(), 4, 2);
    EXPECT_EQ(top[0].id, 2);
    EXPECT_EQ(top[1].id, 1);
    // all NaN: every token equally likely, nothing crashes
    std::vector<float> all(5, nan);
    gb::softmax_probs(p, all.data(), 5);
    for (float x : p) EXPECT_NEAR(x, 0.2, 1e-6);
    // +inf takes all the mass
    std::vector<float> big = {1.0f, inf, 2.0f, inf};
    gb::softmax_probs(p, big.data(), 4);
    EXPECT_EQ(p, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
    // sampling: greedy skips NaN; sampled never picks a NaN token; all NaN picks among all tokens
    std::mt19937_64 rng(1);
    gb::sampling greedy;
    std::vector<float> g = {nan, 1.0f, 5.0f, 2.0f};
    EXPECT_EQ(gb::sample_token(g.data(), 4, greedy, rng), 2);
    gb::sampling warm;
    warm.temperature = 1.0f;
    warm.top_p = 0.99f;
    std::vector<int> count(4, 0), count_all(5, 0);
    for (int i = 0; i < 2000; i++) count[gb::sample_token(g.data(), 4, warm, rng)]++;
    EXPECT_EQ(count[0], 0);
    EXPECT_GT(count[2], 1500);
    for (int i = 0; i < 2000; i++) count_all[gb::sample_token(all.data(), 5, warm, rng)]++;
    for (int c : count_all) EXPECT_GT(c, 250) << "uniform over all tokens";
}

// ---- export: attention.npy without a full-size buffer ----

TEST(Export, AttentionNpyIsWrittenLayerByLayer) {
    // a capture keeping one layer of 8 at T = 512 (8 MB) once allocated all 8 layers (64 MB) to write them
    const int L = 8, H = 8, T = 512, V = 16;
    gb::record cap;
    cap.n_layer = L, cap.n_head = H, cap.n_tokens = T, cap.vocab = V;
    cap.tokens.assign(T, 1);
    cap.slot[gb::HOOK_PATTERN].assign(L, -1);
    cap.slot[gb::HOOK_PATTERN][5] = 0;
    auto kept = std::make_shared<gb::tensor_buffer>((size_t)H * T * T, 0.0f);
    for (size_t i = 0; i < kept->size(); i += 7) (*kept)[i] = 0.25f;
    cap.acts[gb::HOOK_PATTERN] = {kept};
    cap.resid_norm.assign((size_t)(2 * L + 1) * T, 1.0f);
    cap.logits.assign(V, 0.5f);
    std::string dir = test_temp_dir("rob_npy");
    double before = peak_rss_mb();
    gb::write_capture_npy(dir, cap);
    EXPECT_LT(peak_rss_mb() - before, 32.0) << "MB of peak memory to write 64 MB";
    std::ifstream f(dir + "/attention.npy", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t hl = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    EXPECT_NE(bytes.find("'shape': (8, 8, 512, 512)"), std::string::npos);
    const size_t layer = (size_t)H * T * T;
    ASSERT_EQ(bytes.size(), 10 + hl + (size_t)L * layer * 4);
    const float* p = (const float*)(bytes.data() + 10 + hl);
    EXPECT_EQ(0, std::memcmp(p + 5 * layer, kept->data(), layer * 4)) << "layer 5 as captured";
    bool zeros = true;
    for (int l = 0; l < L; l++)
        if (l != 5)
            for (size_t i = 0; i < layer; i++) zeros &= p[l * layer + i] == 0.0f;
    EXPECT_TRUE(zeros) << "layers left out are zero";
}

// ---- the tests' own helper ----

TEST(TestSupport, MaxScaledErrorFailsOnNonFiniteResults) {
    // std::max(w, NaN) is w: a NaN in the result used to compare as a perfect match
    const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(max_scaled_error({1.0f, 2.0f}, {1.0, 2.0}), 0.0);
    EXPECT_FALSE(max_scaled_error({std::nanf(""), 2.0f}, {1.0, 2.0}) < 1e-4);
    EXPECT_FALSE(max_scaled_error({1.0f, (float)inf}, {1.0, 2.0}) < 1e-4);
    EXPECT_FALSE(max_scaled_error({1.0f, 2.0f}, {1.0, nan}) < 1e-4) << "a NaN reference is no pass either";
}

// Inputs that once aborted fuzz_tokenizer_json (a stack overflow in dump(), nlohmann type errors, a 10M-entry
// vocabulary) must load or fail with gb::error; tools/fuzz.sh replays them too.
TEST(Json, FuzzRegressionsFailCleanly) {
    std::string dir = std::string(GLASSBOX_SOURCE_DIR) + "/tests/fuzz/regressions/fuzz_tokenizer_json";
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        n++;
        try {
            gb::tokenizer t = gb::load_tokenizer_json(e.path().string());
            gb::encode(t, "Hello world");
        } catch (const gb::error&) {
        }
    }
    EXPECT_GE(n, 3);
}
