#include "run/vision.h"

#include <numeric>

#include "util/error.h"

namespace gb {

std::string vision_piece(const model_config& c, int t) {
    if (t == 0) return "[CLS]";
    if (t < c.n_prefix) return "[DIST]";
    const auto [r, col] = vision_cell(c, t);
    return "r" + std::to_string(r) + "c" + std::to_string(col);
}

std::pair<int, int> vision_cell(const model_config& c, int t) {
    if (t < c.n_prefix || c.grid() <= 0) return {-1, -1};
    const int k = t - c.n_prefix;
    return {k / c.grid(), k % c.grid()};
}

std::vector<int> vision_tokens(const model_config& c) {
    std::vector<int> t(c.n_ctx);
    std::iota(t.begin(), t.end(), 0);
    return t;
}

image vision_view(const model& m, const image& img) {
    const image_preprocess& p = m.image_prep;
    int w = img.width, h = img.height;
    preprocess_size(w, h, img, p);
    image out = p.do_resize && (w != img.width || h != img.height) ? resize_image(img, w, h, p.resample) : img;
    if (p.do_center_crop) out = center_crop(out, p.crop_w, p.crop_h);
    return out;
}

std::vector<float> vision_pixels(const model& m, const image& img) { return view_pixels(m, vision_view(m, img)); }

std::vector<float> view_pixels(const model& m, const image& view) {
    const model_config& c = m.config;
    if (c.n_channels != 3)
        throw error("the model reads " + std::to_string(c.n_channels) + "-channel images; Glassbox opens RGB images only");
    image_preprocess p = m.image_prep; // the view is already resized and cropped: only rescale and normalise
    p.do_resize = p.do_center_crop = false;
    std::vector<float> px = preprocess_image(view, p);
    const size_t want = (size_t)3 * c.image_size * c.image_size;
    if (px.size() != want)
        throw error("the preprocessing made " + std::to_string(px.size() / 3) + " pixels, the model reads " +
                    std::to_string(c.image_size) + "x" + std::to_string(c.image_size));
    return px;
}

} // namespace gb
