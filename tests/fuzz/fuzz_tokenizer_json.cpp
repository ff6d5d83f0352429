// Fuzz target: tokenizer.json loading, then encoding text from the input with whatever loaded. The input is
// the file up to its first NUL byte (JSON text never holds one) and the text after it; without a NUL, a fixed
// text is encoded.
#include <cstring>

#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = fuzz_path("tokenizer.json");
    const uint8_t* nul = (const uint8_t*)std::memchr(data, 0, size);
    const size_t file_len = nul ? (size_t)(nul - data) : size;
    const std::string text = nul ? std::string((const char*)nul + 1, size - file_len - 1) : "Hello world, caf\xc3\xa9 42!";
    fuzz_write(path, data, file_len);
    expect_only_gb_errors([&] {
        gb::tokenizer t = gb::load_tokenizer_json(path);
        std::vector<int> ids = gb::encode_prompt(t, text, false);
        gb::decode(t, ids);
        for (int id : ids) gb::token_text(t, id);
    });
    return 0;
}
