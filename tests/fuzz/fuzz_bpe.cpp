// Fuzz target: encoding arbitrary bytes with a byte-level BPE (with merges) and a SentencePiece-style
// vocabulary; valid UTF-8 must round-trip, invalid UTF-8 must be refused with gb::error.
#include <cstdlib>
#include <filesystem>

#include "fuzz_common.h"
#include "model.h"
#include "tokenizer.h"

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
    std::string text((const char*)data, size);
    bool valid = gb::utf8_invalid_at(text) < 0;
    try {
        std::vector<int> ids = gb::encode(tok, text);
        if (!valid) std::abort();                             // invalid UTF-8 must not encode
        if (gb::decode(tok, ids) != text) std::abort();       // valid UTF-8 must round-trip
    } catch (const gb::error&) {
        if (valid) std::abort();
    }
    return 0;
}
