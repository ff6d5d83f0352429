// Fuzz target: encoding arbitrary bytes with every tokenizer family, each built once from a small vocabulary:
// GPT-2 byte level with merges; tokenizer.json SentencePiece style (Metaspace "first", split, byte fallback,
// <s> </s>); tokenizer.json byte level with NFC, Qwen2's split regex and an added special; llama2.c
// tokenizer.bin. Invalid UTF-8 must be refused with gb::error; valid UTF-8 must encode and round-trip.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "io/writers.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::string U = "\xE2\x96\x81"; // "▁"

// (a) tokenizer.json, SentencePiece style: Metaspace (prepend_scheme "first", split), byte fallback, <s> </s>
gb::tokenizer metaspace_tokenizer() {
    nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        vocab[n] = 3 + b;
    }
    const std::vector<std::string> pieces = {U, "t", "h", "e", "th", "the", U + "t", U + "th", U + "the", "\xc3\xa9", U + U};
    for (size_t i = 0; i < pieces.size(); i++) vocab[pieces[i]] = 259 + (int)i;
    nlohmann::json j = {
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"byte_fallback", true},
                   {"merges", {"t h", "th e", U + " t", U + "t h", U + "th e", U + " " + U}}}},
        {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", U}, {"prepend_scheme", "first"}, {"split", true}}},
        {"added_tokens", {{{"id", 1}, {"content", "<s>"}}, {{"id", 2}, {"content", "</s>"}}}}};
    std::string path = fuzz_path("metaspace.json");
    std::string text = j.dump();
    fuzz_write(path, (const uint8_t*)text.data(), text.size());
    return gb::load_tokenizer_json(path);
}

// (b) tokenizer.json, byte level: NFC, Qwen2's split regex, an added special token
gb::tokenizer nfc_byte_level_tokenizer(const gb::tokenizer& gpt2) {
    nlohmann::json vocab = nlohmann::json::object();
    for (int i = 0; i < 256; i++) vocab[gpt2.vocab[i]] = i;
    const std::string G = gpt2.vocab[' '];
    for (const std::string& s : {std::string("th"), std::string("the"), G + "t", G + "the", G + G, std::string("12")})
        vocab[s] = (int)vocab.size();
    nlohmann::json j = {
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t h", "th e", G + " t", G + " the", G + " " + G, "1 2"}}}},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern",
              {{"Regex", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
             {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
        {"added_tokens", {{{"id", (int)vocab.size()}, {"content", "<|im_start|>"}, {"special", true}}}}};
    std::string path = fuzz_path("nfc.json");
    std::string text = j.dump();
    fuzz_write(path, (const uint8_t*)text.data(), text.size());
    return gb::load_tokenizer_json(path);
}

// (c) llama2.c tokenizer.bin: <unk> <s> </s>, 256 byte tokens, a few pieces merged by score
gb::tokenizer llama2c_tokenizer() {
    std::vector<std::string> vocab = {"<unk>", "\n<s>\n", "\n</s>\n"};
    for (int b = 0; b < 256; b++) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        vocab.push_back(n);
    }
    for (const char* s : {" ", "t", "h", "e", "th", "the", " t", " the", "\xc3\xa9"}) vocab.push_back(s);
    std::string bin;
    auto put = [&](auto v) { bin.append((const char*)&v, sizeof v); };
    put(int32_t(16));
    for (size_t i = 0; i < vocab.size(); i++) {
        put(float(i >= 259 ? vocab[i].size() : 0)); // longer pieces merge first
        put(int32_t(vocab[i].size()));
        bin += vocab[i];
    }
    std::string path = fuzz_path("tok.bin");
    fuzz_write(path, (const uint8_t*)bin.data(), bin.size());
    return gb::load_llama2c_tokenizer(path, (int)vocab.size());
}

bool in_vocab(const gb::tokenizer& t, const std::vector<int>& ids) {
    for (int id : ids)
        if (id < 0 || id >= (int)t.vocab.size()) return false;
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const gb::tokenizer tok = [] {
        gb::model_config c;
        c.n_layer = 1, c.n_head = 1, c.d_model = 4, c.vocab_size = 300, c.n_ctx = 4;
        gb::model m = gb::random_gpt2(c, 1);
        // a few merges so BPE has work to do: "t h" -> "th", "th e" -> "the"
        for (const char* s : {"th", "the", "\xc4\xa0t"}) {
            int id = (int)m.tok.vocab.size();
            m.tok.vocab.push_back(s);
            m.tok.ids[s] = id;
        }
        m.tok.merge_rank = {{"t h", 0}, {"th e", 1}, {"\xc4\xa0 t", 2}};
        return m.tok;
    }();
    static const gb::tokenizer spm = metaspace_tokenizer(), nfc = nfc_byte_level_tokenizer(tok), l2c = llama2c_tokenizer();
    std::string text((const char*)data, size);
    bool valid = gb::utf8_invalid_at(text) < 0;
    // every tokenizer: invalid UTF-8 is refused with gb::error, valid UTF-8 always encodes (each vocabulary
    // covers all bytes) to ids inside the vocabulary, and decodes without error
    auto check = [&](const gb::tokenizer& t, const std::function<void(const std::vector<int>&)>& more) {
        try {
            std::vector<int> ids = gb::encode(t, text);
            if (!valid || !in_vocab(t, ids)) std::abort();
            more(ids);
        } catch (const gb::error&) {
            if (valid) std::abort();
        }
    };
    // GPT-2 byte level: exact round trip
    check(tok, [&](const std::vector<int>& ids) {
        if (gb::decode(tok, ids) != text) std::abort();
    });
    // Metaspace: round trip after BOS for text without "▁", <s>, </s> or a leading space (those map to spaces,
    // vanish, or take the place of the dummy prefix)
    check(spm, [&](const std::vector<int>& ids) {
        std::vector<int> with_bos = gb::encode_prompt(spm, text, false);
        if (!in_vocab(spm, with_bos)) std::abort();
        std::string back = gb::decode(spm, with_bos);
        bool plain = text.find(U) == std::string::npos && text.find("<s>") == std::string::npos &&
                     text.find("</s>") == std::string::npos && (text.empty() || text[0] != ' ');
        if (plain && back != text) std::abort();
        gb::decode(spm, ids);
    });
    // NFC byte level: decoding gives the NFC text, which encodes to the same ids again
    check(nfc, [&](const std::vector<int>& ids) {
        if (gb::encode(nfc, gb::decode(nfc, ids)) != ids) std::abort();
    });
    // llama2.c: BOS, dummy prefix, decode drops both
    check(l2c, [&](const std::vector<int>&) {
        std::vector<int> with_bos = gb::encode_prompt(l2c, text, false);
        if (!in_vocab(l2c, with_bos) || gb::decode(l2c, with_bos) != text) std::abort();
    });
    return 0;
}
