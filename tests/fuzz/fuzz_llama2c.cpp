// Fuzz target: llama2.c checkpoint header + weights and tokenizer.bin. The first input byte picks which file
// the rest of the input becomes; the other one is a small valid file.
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "model.h"
#include "tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    static const std::string model = fuzz_path("model.bin"), tok = fuzz_path("tokenizer.bin");
    if (data[0] & 1) {
        fuzz_write(tok, data + 1, size - 1);
        expect_only_gb_errors([&] {
            gb::tokenizer t = gb::load_llama2c_tokenizer(tok, -1);
            gb::encode(t, "Once upon a time");
        });
    } else {
        fuzz_write(model, data + 1, size - 1);
        gb::load_options lo;
        lo.tokenizer_path = tok;
        expect_only_gb_errors([&] { gb::load_model(model, lo); });
    }
    return 0;
}
