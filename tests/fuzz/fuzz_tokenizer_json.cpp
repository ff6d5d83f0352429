// Fuzz target: tokenizer.json loading, then encoding a fixed text with whatever loaded.
#include "fuzz_common.h"
#include "tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = fuzz_path("tokenizer.json");
    fuzz_write(path, data, size);
    expect_only_gb_errors([&] {
        gb::tokenizer t = gb::load_tokenizer_json(path);
        std::vector<int> ids = gb::encode(t, "Hello world, caf\xc3\xa9 42!");
        gb::decode(t, ids);
    });
    return 0;
}
