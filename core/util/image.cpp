// Image decoding (stb_image, from the system's libstb) and HF-style preprocessing; see image.h.
#include "util/image.h"

#include <stb/stb_image.h> // the implementation is in libstb

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/error.h"
#include "util/json_util.h"

namespace gb {

// ---- decoding ----

image decode_image(const uint8_t* bytes, size_t n, const std::string& what) {
    auto fail = [&](const std::string& why) -> error {
        return error(what + ": cannot read the image (" + why + ")");
    };
    if (n == 0) throw fail("the file is empty");
    if (n > (size_t)INT32_MAX) throw fail("larger than 2 GiB");
    int w = 0, h = 0, comp = 0;
    if (!stbi_info_from_memory(bytes, (int)n, &w, &h, &comp))
        throw fail(std::string("stb_image: ") + (stbi_failure_reason() ? stbi_failure_reason() : "unknown format"));
    if (w < 1 || h < 1 || (int64_t)w * h > image_max_pixels)
        throw fail(std::to_string(w) + " x " + std::to_string(h) + " pixels, more than " +
                   std::to_string(image_max_pixels) + " are refused");
    stbi_uc* px = stbi_load_from_memory(bytes, (int)n, &w, &h, &comp, 3); // 3: grey replicated, alpha dropped
    if (!px)
        throw fail(std::string("stb_image: ") + (stbi_failure_reason() ? stbi_failure_reason() : "decoding failed"));
    image out;
    out.width = w;
    out.height = h;
    out.rgb.assign(px, px + (size_t)w * h * 3);
    stbi_image_free(px);
    return out;
}

image load_image(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error(path + ": cannot read the image (" + std::strerror(errno) + ")");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw error(path + ": cannot read the image (I/O error)");
    return decode_image(bytes.data(), bytes.size(), path);
}

// ---- resizing: Pillow's Image.resize ----

namespace {

// Pillow's filters, by distance in source pixels (at scale 1). Its box is 1 on (-0.5, 0.5].
double box_f(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
double triangle_f(double x) {
    x = std::fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}
double cubic_f(double x) { // Keys' cubic convolution with a = -0.5
    const double a = -0.5;
    x = std::fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}
double hamming_f(double x) {
    x = std::fabs(x);
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x *= M_PI;
    return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}
double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return std::sin(x) / x;
}
double lanczos_f(double x) { return (x >= -3.0 && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0; }

struct filter_def {
    double support;
    double (*f)(double);
};

filter_def filter_for(int resample) {
    switch (resample) {
    case resample_lanczos: return {3.0, lanczos_f};
    case resample_bilinear: return {1.0, triangle_f};
    case resample_bicubic: return {2.0, cubic_f};
    case resample_box: return {0.5, box_f};
    case resample_hamming: return {1.0, hamming_f};
    default: throw error("resample " + std::to_string(resample) + " is not a Pillow filter (0 to 5)");
    }
}

// Pillow keeps its weights as fixed point with 22 fractional bits (8-bit samples, sums in 32 bits) and starts
// each sum at one half, so the shift at the end rounds.
constexpr int weight_bits = 22;

// The weights of one pass: output pixel o reads source pixels first[o] .. first[o] + count[o] - 1 with weights
// w[o * ksize ...].
struct pass_weights {
    int ksize = 0;
    std::vector<int> first, count;
    std::vector<int32_t> w;
};

pass_weights make_weights(int in_size, int out_size, const filter_def& fd) {
    const double scale = (double)in_size / out_size;
    const double filterscale = std::max(scale, 1.0); // shrinking widens the filter by the scale
    const double support = fd.support * filterscale;
    pass_weights pw;
    pw.ksize = (int)std::ceil(support) * 2 + 1;
    pw.first.resize(out_size);
    pw.count.resize(out_size);
    pw.w.assign((size_t)out_size * pw.ksize, 0);
    std::vector<double> k(pw.ksize);
    for (int o = 0; o < out_size; o++) {
        const double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5); // truncation, as Pillow's cast does
        int hi = (int)(center + support + 0.5);
        lo = std::max(lo, 0);
        hi = std::min(hi, in_size);
        const int n = std::min(std::max(hi - lo, 0), pw.ksize);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            k[i] = fd.f((i + lo - center + 0.5) / filterscale);
            sum += k[i];
        }
        for (int i = 0; i < n; i++) {
            double v = sum != 0.0 ? k[i] / sum : k[i];
            double fixed = v * (1 << weight_bits);
            pw.w[(size_t)o * pw.ksize + i] = (int32_t)(v < 0 ? fixed - 0.5 : fixed + 0.5);
        }
        pw.first[o] = lo;
        pw.count[o] = n;
    }
    return pw;
}

inline uint8_t to_u8(int64_t acc) {
    if (acc < 0) return 0;
    acc >>= weight_bits;
    return (uint8_t)std::min<int64_t>(acc, 255);
}

constexpr int64_t half = int64_t(1) << (weight_bits - 1);

// Resamples rows of in (w_in wide) to w_out, for every row.
image horizontal_pass(const image& in, int w_out, const filter_def& fd) {
    pass_weights pw = make_weights(in.width, w_out, fd);
    image out;
    out.width = w_out;
    out.height = in.height;
    out.rgb.resize((size_t)w_out * in.height * 3);
#pragma omp parallel for schedule(static) if ((int64_t)w_out * in.height > 65536)
    for (int y = 0; y < in.height; y++) {
        const uint8_t* row = &in.rgb[(size_t)y * in.width * 3];
        uint8_t* dst = &out.rgb[(size_t)y * w_out * 3];
        for (int o = 0; o < w_out; o++) {
            const int32_t* k = &pw.w[(size_t)o * pw.ksize];
            const uint8_t* src = row + (size_t)pw.first[o] * 3;
            int64_t r = half, g = half, b = half;
            for (int i = 0; i < pw.count[o]; i++) {
                r += (int64_t)src[i * 3 + 0] * k[i];
                g += (int64_t)src[i * 3 + 1] * k[i];
                b += (int64_t)src[i * 3 + 2] * k[i];
            }
            dst[o * 3 + 0] = to_u8(r);
            dst[o * 3 + 1] = to_u8(g);
            dst[o * 3 + 2] = to_u8(b);
        }
    }
    return out;
}

image vertical_pass(const image& in, int h_out, const filter_def& fd) {
    pass_weights pw = make_weights(in.height, h_out, fd);
    const size_t stride = (size_t)in.width * 3;
    image out;
    out.width = in.width;
    out.height = h_out;
    out.rgb.resize(stride * h_out);
#pragma omp parallel for schedule(static) if ((int64_t)in.width * h_out > 65536)
    for (int o = 0; o < h_out; o++) {
        const int32_t* k = &pw.w[(size_t)o * pw.ksize];
        const uint8_t* src = &in.rgb[(size_t)pw.first[o] * stride];
        uint8_t* dst = &out.rgb[(size_t)o * stride];
        for (size_t x = 0; x < stride; x++) {
            int64_t acc = half;
            for (int i = 0; i < pw.count[o]; i++) acc += (int64_t)src[i * stride + x] * k[i];
            dst[x] = to_u8(acc);
        }
    }
    return out;
}

// Pillow's nearest resize (an affine scale): the source index of output pixel o is the truncated position of its
// centre, which Pillow steps along by adding the scale (in double) per pixel rather than multiplying.
std::vector<int> nearest_index(int in_size, int out_size) {
    std::vector<int> idx(out_size);
    const double step = (double)in_size / out_size;
    double pos = step * 0.5;
    for (int o = 0; o < out_size; o++) {
        int i = pos < 0 ? 0 : (int)pos;
        idx[o] = std::min(i, in_size - 1);
        pos += step;
    }
    return idx;
}

void check_image(const image& in, const char* fn) {
    if (in.width < 1 || in.height < 1 || in.rgb.size() != (size_t)in.width * in.height * 3)
        throw error(std::string(fn) + ": the image is " + std::to_string(in.width) + " x " +
                    std::to_string(in.height) + " with " + std::to_string(in.rgb.size()) +
                    " bytes; it needs at least one pixel and 3 bytes per pixel");
}

void check_size(int w, int h, const char* fn) {
    if (w < 1 || h < 1 || (int64_t)w * h > image_max_pixels)
        throw error(std::string(fn) + ": cannot make a " + std::to_string(w) + " x " + std::to_string(h) +
                    " image");
}

} // namespace

image resize_image(const image& in, int w, int h, int resample) {
    check_image(in, "resize_image");
    check_size(w, h, "resize_image");
    if (resample == resample_nearest) {
        if (w == in.width && h == in.height) return in;
        std::vector<int> xs = nearest_index(in.width, w), ys = nearest_index(in.height, h);
        image out;
        out.width = w;
        out.height = h;
        out.rgb.resize((size_t)w * h * 3);
        for (int y = 0; y < h; y++) {
            const uint8_t* row = &in.rgb[(size_t)ys[y] * in.width * 3];
            uint8_t* dst = &out.rgb[(size_t)y * w * 3];
            for (int x = 0; x < w; x++) std::memcpy(dst + x * 3, row + (size_t)xs[x] * 3, 3);
        }
        return out;
    }
    const filter_def fd = filter_for(resample);
    // Pillow runs the horizontal pass first, each pass only where its size changes
    if (w != in.width && h != in.height) return vertical_pass(horizontal_pass(in, w, fd), h, fd);
    if (w != in.width) return horizontal_pass(in, w, fd);
    if (h != in.height) return vertical_pass(in, h, fd);
    return in;
}

image center_crop(const image& in, int w, int h) {
    check_image(in, "center_crop");
    check_size(w, h, "center_crop");
    // Python's floor division: negative where the crop is larger, and then the padding falls at
    // ceil(difference / 2) before the image
    auto floor_half = [](int d) { return d >= 0 ? d / 2 : -((-d + 1) / 2); };
    const int left = floor_half(in.width - w), top = floor_half(in.height - h);
    image out;
    out.width = w;
    out.height = h;
    out.rgb.assign((size_t)w * h * 3, 0);
    const int x0 = std::max(0, -left), x1 = std::min(w, in.width - left); // output columns with a source
    if (x1 <= x0) return out;
    for (int y = 0; y < h; y++) {
        const int sy = y + top;
        if (sy < 0 || sy >= in.height) continue;
        std::memcpy(&out.rgb[((size_t)y * w + x0) * 3], &in.rgb[((size_t)sy * in.width + x0 + left) * 3],
                    (size_t)(x1 - x0) * 3);
    }
    return out;
}

// ---- preprocessing ----

void preprocess_size(int& w, int& h, const image& in, const image_preprocess& p) {
    w = in.width;
    h = in.height;
    if (!p.do_resize) return;
    if (p.shortest_edge > 0) {
        const bool portrait = in.width <= in.height;
        const int64_t s = in.width <= in.height ? in.width : in.height, l = in.width <= in.height ? in.height : in.width;
        // Python: int(size * long / short), a true (double) division truncated
        const int64_t long_side = (int64_t)((double)((int64_t)p.shortest_edge * l) / (double)s);
        if (long_side > image_max_pixels)
            throw error("preprocess: resizing a " + std::to_string(in.width) + " x " + std::to_string(in.height) +
                        " image to a shortest edge of " + std::to_string(p.shortest_edge) + " is too large");
        w = portrait ? p.shortest_edge : (int)long_side;
        h = portrait ? (int)long_side : p.shortest_edge;
    } else {
        w = p.resize_w;
        h = p.resize_h;
    }
}

std::vector<float> preprocess_image(const image& in, const image_preprocess& p, int& out_w, int& out_h) {
    check_image(in, "preprocess_image");
    for (int c = 0; c < 3; c++)
        if (p.do_normalize && p.std[c] == 0.0f)
            throw error("preprocess_image: std[" + std::to_string(c) + "] is 0");
    image img;
    const image* cur = &in;
    if (p.do_resize) {
        int w, h;
        preprocess_size(w, h, in, p);
        img = resize_image(in, w, h, p.resample);
        cur = &img;
    }
    if (p.do_center_crop) {
        img = center_crop(*cur, p.crop_w, p.crop_h);
        cur = &img;
    }
    const int W = cur->width, H = cur->height;
    const size_t plane = (size_t)W * H;
    std::vector<float> out(3 * plane);
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++) {
            const uint8_t u = cur->rgb[i * 3 + c];
            // HF: image.astype(float64) * scale, then astype(float32); normalize in float32
            float v = p.do_rescale ? (float)((double)u * p.rescale_factor) : (float)u;
            if (p.do_normalize) v = (v - p.mean[c]) / p.std[c];
            out[c * plane + i] = v;
        }
    out_w = W;
    out_h = H;
    return out;
}

std::vector<float> preprocess_image(const image& in, const image_preprocess& p) {
    int w, h;
    return preprocess_image(in, p, w, h);
}

// ---- preprocessor_config.json ----

namespace {

std::string brief(const nlohmann::json& v) {
    std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 60) + "..." : s;
}

constexpr int max_side = 1 << 16;

int side(const nlohmann::json& v, const std::string& key, const std::string& path) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > max_side)
        throw error(path + ": " + key + " must be a whole number from 1 to " + std::to_string(max_side) +
                    ", found " + brief(v));
    return (int)v.get<int64_t>();
}

// "size" / "crop_size": {"height", "width"}, {"shortest_edge"}, [height, width] or an int (square, or the
// shortest edge where int_is_shortest). Sets w and h, or shortest (if allowed).
void read_size(const nlohmann::json& v, const std::string& key, const std::string& path, bool int_is_shortest,
               bool shortest_allowed, int& w, int& h, int& shortest) {
    shortest = 0;
    if (v.is_number()) {
        int s = side(v, key, path);
        if (int_is_shortest) shortest = s;
        else w = h = s;
    } else if (v.is_array()) {
        if (v.size() != 2) throw error(path + ": " + key + " must be [height, width], found " + brief(v));
        h = side(v[0], key + "[0]", path);
        w = side(v[1], key + "[1]", path);
    } else if (v.is_object()) {
        const bool hw = v.contains("height") || v.contains("width");
        if (v.contains("longest_edge") || v.contains("max_height") || v.contains("max_width"))
            throw error(path + ": " + key + " " + brief(v) +
                        ": longest_edge / max_height / max_width resizing is not supported");
        if (hw) {
            if (!v.contains("height") || !v.contains("width") || v.contains("shortest_edge"))
                throw error(path + ": " + key + " must hold both height and width, or shortest_edge, found " +
                            brief(v));
            h = side(v["height"], key + ".height", path);
            w = side(v["width"], key + ".width", path);
        } else if (v.contains("shortest_edge")) {
            if (!shortest_allowed) throw error(path + ": " + key + " must hold height and width, found " + brief(v));
            shortest = side(v["shortest_edge"], key + ".shortest_edge", path);
        } else {
            throw error(path + ": " + key + " must hold height and width, or shortest_edge, found " + brief(v));
        }
    } else {
        throw error(path + ": " + key + " must be an object, a list or a number, found " + brief(v));
    }
}

// image_mean / image_std: three numbers, or one for all channels.
void read_triple(const nlohmann::json& v, const std::string& key, const std::string& path, float out[3]) {
    if (v.is_number()) {
        out[0] = out[1] = out[2] = v.get<float>();
        return;
    }
    if (!v.is_array() || v.size() != 3)
        throw error(path + ": " + key + " must be a list of 3 numbers (R, G, B), found " + brief(v));
    for (int c = 0; c < 3; c++) {
        if (!v[c].is_number())
            throw error(path + ": " + key + " must be a list of 3 numbers (R, G, B), found " + brief(v));
        out[c] = v[c].get<float>();
        if (!std::isfinite(out[c])) throw error(path + ": " + key + " holds " + brief(v[c]));
    }
}

bool present(const nlohmann::json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

} // namespace

image_preprocess read_preprocessor_config(const std::string& path) {
    const nlohmann::json j = read_json_file(path);
    return json_guard(path, [&] {
        if (!j.is_object()) throw error(path + ": expected a JSON object, found " + brief(j));
        image_preprocess p;
        p.do_resize = json_bool(j, "do_resize", p.do_resize, path);
        p.do_center_crop = json_bool(j, "do_center_crop", p.do_center_crop, path);
        p.do_rescale = json_bool(j, "do_rescale", p.do_rescale, path);
        p.do_normalize = json_bool(j, "do_normalize", p.do_normalize, path);
        // HF's get_size_dict turns an int size into a square, except for processors built with
        // default_to_square=False (CLIP, BiT), where it is the shortest edge
        std::string type = json_string(j, "image_processor_type", "", path);
        if (type.empty()) type = json_string(j, "feature_extractor_type", "", path);
        const bool int_is_shortest = type.find("CLIP") != std::string::npos || type.rfind("Bit", 0) == 0;
        if (present(j, "size"))
            read_size(j["size"], "size", path, int_is_shortest, true, p.resize_w, p.resize_h, p.shortest_edge);
        if (present(j, "crop_size")) {
            int unused = 0;
            read_size(j["crop_size"], "crop_size", path, false, false, p.crop_w, p.crop_h, unused);
        }
        if (present(j, "crop_pct"))
            throw error(path + ": crop_pct " + brief(j["crop_pct"]) +
                        ": resizing by a crop percentage (ConvNeXT, PoolFormer, LeViT style) is not supported");
        if (present(j, "resample")) {
            const nlohmann::json& r = j["resample"];
            if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > 5)
                throw error(path + ": resample must be a Pillow filter code from 0 to 5, found " + brief(r));
            p.resample = (int)r.get<int64_t>();
        }
        if (present(j, "rescale_factor")) {
            const nlohmann::json& r = j["rescale_factor"];
            if (!r.is_number() || !std::isfinite(r.get<double>()) || r.get<double>() <= 0)
                throw error(path + ": rescale_factor must be a number above 0, found " + brief(r));
            p.rescale_factor = r.get<double>();
        }
        if (present(j, "image_mean")) read_triple(j["image_mean"], "image_mean", path, p.mean);
        if (present(j, "image_std")) read_triple(j["image_std"], "image_std", path, p.std);
        for (int c = 0; c < 3; c++)
            if (p.std[c] == 0.0f) throw error(path + ": image_std holds 0, which normalizing would divide by");
        return p;
    });
}

} // namespace gb
