// Fuzz target: config.json parsing (and the loader's shape checks) next to a small valid model folder.
#include <filesystem>

#include "fuzz_common.h"
#include "io/loader.h"
#include "io/writers.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string dir = [] {
        std::string d = fuzz_path("config-model");
        std::filesystem::create_directories(d);
        gb::model_config c;
        c.n_layer = 1, c.n_head = 2, c.d_model = 8, c.vocab_size = 260, c.n_ctx = 8;
        gb::save_hf_gpt2(d, gb::random_gpt2(c, 1));
        return d;
    }();
    fuzz_write(dir + "/config.json", data, size);
    expect_only_gb_errors([&] { gb::load_model(dir); });
    return 0;
}
