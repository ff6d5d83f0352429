// Fuzz target: the GGUF parser (header, metadata, tensor infos, offsets) and model loading from it.
#include "fuzz_common.h"
#include "io/gguf.h"
#include "io/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = fuzz_path("model.gguf");
    fuzz_write(path, data, size);
    expect_only_gb_errors([&] { gb::load_model(path); });
    return 0;
}
