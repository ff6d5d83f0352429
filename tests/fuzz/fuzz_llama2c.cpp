// Fuzz target: llama2.c checkpoint header + weights and tokenizer.bin. The first input byte picks which file
// the rest of the input becomes; the other one is a small valid file. For tokenizer.bin, the second byte is the
// length of a text at the end of the input, encoded (with BOS) and decoded with whatever loaded.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "io/loader.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    static const std::string model = fuzz_path("model.bin"), tok = fuzz_path("tokenizer.bin");
    if (data[0] & 1) {
        // data[1] = length of a text taken from the end of the input; the bytes between are tokenizer.bin
        size_t text_len = size >= 2 ? std::min<size_t>(data[1], size - 2) : 0;
        const uint8_t* file = data + std::min<size_t>(size, 2);
        const size_t file_len = size - std::min<size_t>(size, 2) - text_len;
        std::string text((const char*)file + file_len, text_len);
        fuzz_write(tok, file, file_len);
        expect_only_gb_errors([&] {
            gb::tokenizer t = gb::load_llama2c_tokenizer(tok, -1);
            std::vector<int> ids = gb::encode_prompt(t, text, false);
            gb::decode(t, ids);
            for (int id : ids) gb::token_text(t, id);
        });
    } else {
        fuzz_write(model, data + 1, size - 1);
        gb::load_options lo;
        lo.tokenizer_path = tok;
        expect_only_gb_errors([&] { gb::load_model(model, lo); });
    }
    return 0;
}
