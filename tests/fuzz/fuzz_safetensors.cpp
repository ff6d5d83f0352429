// Fuzz target: the safetensors header / offset parser and tensor conversion.
#include "fuzz_common.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = fuzz_path("model.safetensors");
    fuzz_write(path, data, size);
    expect_only_gb_errors([&] {
        gb::safetensors_file f = gb::open_safetensors(path);
        for (const auto& [name, t] : f.tensors)
            if (t.nbytes <= (64u << 20)) gb::tensor_f32(f, t, t.shape);
    });
    return 0;
}
