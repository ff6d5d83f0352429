// Fuzz target: what a vision model reads from the user, an image file and a preprocessor_config.json.
// Byte 0 picks the input: odd, the rest is a preprocessor_config.json; even, the rest is an image file (PNG,
// JPEG, ...) that is decoded, then resized, cropped and normalised with settings taken from bytes 1..4.
#include <stb/stb_image.h>

#include "fuzz_common.h"
#include "util/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 5) return 0;
    if (data[0] & 1) {
        static const std::string path = fuzz_path("preprocessor_config.json");
        fuzz_write(path, data + 1, size - 1);
        expect_only_gb_errors([&] { gb::read_preprocessor_config(path); });
        return 0;
    }
    const uint8_t* img = data + 5;
    const size_t n = size - 5;
    // a header may promise a huge image: decoding it is stb_image's time, not our code's (the loader's limit
    // is image_max_pixels); keep each run short
    int w = 0, h = 0, ch = 0;
    if (n > 0 && stbi_info_from_memory(img, (int)n, &w, &h, &ch) && (int64_t)w * h > (1 << 20)) return 0;
    gb::image_preprocess p;
    p.resize_w = 1 + data[1] % 48, p.resize_h = 1 + data[2] % 48;
    p.resample = data[3] % 6;
    p.do_center_crop = data[4] & 1;
    p.crop_w = 1 + (data[4] >> 1) % 40, p.crop_h = 1 + (data[4] >> 4) % 40;
    if (data[4] & 0x80) p.shortest_edge = p.resize_w;
    expect_only_gb_errors([&] {
        const gb::image im = gb::decode_image(img, n, "fuzz input");
        gb::preprocess_image(im, p);
    });
    return 0;
}
