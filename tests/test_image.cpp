// Images for vision models (core/util/image.h): decoding PNG/JPEG, Pillow-exact resizing checked against a naive
// double-precision resampler written here (and against Pillow itself, run by /usr/bin/python3), HF's
// center crop and normalization, and reading preprocessor_config.json.
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>

#include "test_util.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/image.h"

namespace {

using gb::image;

// Test images, [h][w][3]: uniform noise (the worst case for rounding), a smooth pattern, and hard stripes
// (which make bicubic and lanczos overshoot, so the uint8 clipping between the passes matters).
image make_image(int w, int h, int kind, uint32_t seed) {
    image im;
    im.width = w;
    im.height = h;
    im.rgb.resize((size_t)w * h * 3);
    std::mt19937 rng(seed);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                int v;
                if (kind == 0) v = (int)(rng() % 256);
                else if (kind == 1) v = (int)std::lround(127.5 + 127.5 * std::sin(x / 7.0 + c) * std::cos(y / 5.0 - c));
                else v = ((x / (c + 1) + y / 3) % 2) * 255;
                im.rgb[((size_t)y * w + x) * 3 + c] = (uint8_t)v;
            }
    return im;
}

uint8_t px(const image& im, int x, int y, int c) { return im.rgb[((size_t)y * im.width + x) * 3 + c]; }

// ---- the naive reference: Pillow's resampling written from its definition, in double ----

double ref_filter(int resample, double x) {
    x = std::fabs(x);
    const double pi = 3.14159265358979323846;
    switch (resample) {
    case gb::resample_bilinear: return x < 1 ? 1 - x : 0; // triangle
    case gb::resample_bicubic: { // Keys' cubic, a = -0.5
        const double a = -0.5;
        if (x < 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
        if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
        return 0;
    }
    case gb::resample_hamming:
        if (x >= 1) return 0;
        return x == 0 ? 1 : std::sin(pi * x) / (pi * x) * (0.54 + 0.46 * std::cos(pi * x));
    case gb::resample_lanczos: {
        if (x >= 3) return 0;
        auto sinc = [&](double t) { return t == 0 ? 1.0 : std::sin(pi * t) / (pi * t); };
        return sinc(x) * sinc(x / 3);
    }
    }
    ADD_FAILURE() << "no reference filter for resample " << resample;
    return 0;
}
double ref_support(int resample) {
    return resample == gb::resample_bicubic ? 2 : resample == gb::resample_lanczos ? 3 : 1;
}

// Weights over all n source pixels for output pixel o of m: the filter centred on the output pixel's centre in
// source coordinates, stretched by the scale when shrinking, normalized over the pixels inside the image.
std::vector<double> ref_weights(int resample, int n, int m, int o) {
    std::vector<double> w(n, 0.0);
    if (n == m) { // Pillow leaves a dimension whose size does not change alone
        w[o] = 1;
        return w;
    }
    const double scale = (double)n / m, stretch = std::max(1.0, scale);
    const double centre = (o + 0.5) * scale;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double d = (i + 0.5 - centre) / stretch;
        if (std::fabs(d) < ref_support(resample)) w[i] = ref_filter(resample, d);
        sum += w[i];
    }
    for (double& v : w) v /= sum;
    return w;
}

// Per output pixel: each source row filtered horizontally and clipped to [0, 255] (Pillow stores the first
// pass as uint8), then those rows filtered vertically, rounded and clipped.
image ref_resize(const image& in, int W, int H, int resample) {
    image out;
    out.width = W;
    out.height = H;
    out.rgb.resize((size_t)W * H * 3);
    std::vector<std::vector<double>> wx(W), wy(H);
    // the span of nonzero weights, only to keep the test quick
    auto span = [](const std::vector<double>& w) {
        int lo = 0, hi = (int)w.size();
        while (lo < hi && w[lo] == 0) lo++;
        while (hi > lo && w[hi - 1] == 0) hi--;
        return std::make_pair(lo, hi);
    };
    std::vector<std::pair<int, int>> sx(W), sy(H);
    for (int o = 0; o < W; o++) sx[o] = span(wx[o] = ref_weights(resample, in.width, W, o));
    for (int o = 0; o < H; o++) sy[o] = span(wy[o] = ref_weights(resample, in.height, H, o));
    for (int oy = 0; oy < H; oy++)
        for (int ox = 0; ox < W; ox++)
            for (int c = 0; c < 3; c++) {
                double v = 0;
                for (int y = sy[oy].first; y < sy[oy].second; y++) {
                    double row = 0;
                    for (int x = sx[ox].first; x < sx[ox].second; x++) row += wx[ox][x] * px(in, x, y, c);
                    v += wy[oy][y] * std::clamp(row, 0.0, 255.0);
                }
                out.rgb[((size_t)oy * W + ox) * 3 + c] = (uint8_t)std::lround(std::clamp(v, 0.0, 255.0));
            }
    return out;
}

int max_diff(const image& a, const image& b) {
    EXPECT_EQ(a.width, b.width);
    EXPECT_EQ(a.height, b.height);
    if (a.rgb.size() != b.rgb.size()) return 256;
    int m = 0;
    for (size_t i = 0; i < a.rgb.size(); i++) m = std::max(m, std::abs((int)a.rgb[i] - (int)b.rgb[i]));
    return m;
}

struct resize_case {
    int w, h, W, H;
};
// shrinking (by large and by odd factors), growing, one side only, aspect changes, degenerate sizes
const resize_case resize_cases[] = {{640, 480, 224, 224}, {500, 375, 224, 224}, {97, 131, 224, 224},
                                  {256, 256, 224, 224}, {333, 777, 224, 523}, {224, 300, 224, 224},
                                  {300, 224, 224, 224}, {5, 7, 64, 48},       {1, 1, 3, 3},
                                  {1000, 12, 224, 224}, {1601, 1201, 224, 224}};

TEST(Resize, MatchesTheNaiveReference) {
    int worst = 0;
    for (int resample : {gb::resample_bilinear, gb::resample_bicubic, gb::resample_lanczos, gb::resample_hamming})
        for (const resize_case& s : resize_cases)
            for (int kind = 0; kind < 3; kind++) {
                image in = make_image(s.w, s.h, kind, 7 + kind);
                image got = gb::resize_image(in, s.W, s.H, resample);
                image want = ref_resize(in, s.W, s.H, resample);
                int d = max_diff(got, want);
                worst = std::max(worst, d);
                EXPECT_LE(d, 1) << "resample " << resample << ", kind " << kind << ", " << s.w << "x" << s.h
                                << " -> " << s.W << "x" << s.H;
            }
    std::printf("largest difference from the double-precision reference: %d\n", worst);
}

TEST(Resize, NearestTakesThePixelUnderTheCentre) {
    for (const resize_case& s : resize_cases) {
        image in = make_image(s.w, s.h, 0, 3);
        image got = gb::resize_image(in, s.W, s.H, gb::resample_nearest);
        ASSERT_EQ(got.width, s.W);
        ASSERT_EQ(got.height, s.H);
        // source index floor((o + 0.5) * n / m), exactly, in integers; Pillow steps in double, so where the
        // centre falls exactly on a pixel edge it may land on the pixel before
        auto ok = [](int n, int m, int o, int i) {
            int64_t num = (int64_t)(2 * o + 1) * n, den = 2 * (int64_t)m;
            int64_t want = num / den;
            return i == want || (num % den == 0 && i == want - 1);
        };
        for (int y = 0; y < s.H; y++)
            for (int x = 0; x < s.W; x++) {
                // find a source pixel with these values at an allowed position
                bool found = false;
                for (int sy : {(int)((2 * y + 1) * (int64_t)s.h / (2 * s.H)), (int)((2 * y + 1) * (int64_t)s.h / (2 * s.H)) - 1})
                    for (int sx : {(int)((2 * x + 1) * (int64_t)s.w / (2 * s.W)), (int)((2 * x + 1) * (int64_t)s.w / (2 * s.W)) - 1})
                        if (sy >= 0 && sx >= 0 && ok(s.h, s.H, y, sy) && ok(s.w, s.W, x, sx) &&
                            px(got, x, y, 0) == px(in, sx, sy, 0) && px(got, x, y, 1) == px(in, sx, sy, 1) &&
                            px(got, x, y, 2) == px(in, sx, sy, 2))
                            found = true;
                ASSERT_TRUE(found) << s.w << "x" << s.h << " -> " << s.W << "x" << s.H << " at " << x << "," << y;
            }
    }
}

TEST(Resize, SameSizeIsAnExactCopy) {
    image in = make_image(37, 23, 0, 1);
    for (int r = 0; r <= 5; r++) {
        image out = gb::resize_image(in, 37, 23, r);
        EXPECT_EQ(out.width, 37);
        EXPECT_EQ(out.height, 23);
        EXPECT_EQ(out.rgb, in.rgb) << "resample " << r;
    }
}

TEST(Resize, KnownValuesOnTinyImages) {
    auto grey = [](int w, int h, std::vector<int> v) {
        image im;
        im.width = w;
        im.height = h;
        for (int x : v)
            for (int c = 0; c < 3; c++) im.rgb.push_back((uint8_t)x);
        return im;
    };
    auto values = [](const image& im) {
        std::vector<int> v;
        for (size_t i = 0; i < im.rgb.size(); i += 3) v.push_back(im.rgb[i]);
        return v;
    };
    // 2x2 -> 1x1: the mean, for bilinear, bicubic and box alike (the kernels are symmetric about the centre)
    for (int r : {gb::resample_bilinear, gb::resample_bicubic, gb::resample_box, gb::resample_hamming})
        EXPECT_EQ(values(gb::resize_image(grey(2, 2, {10, 20, 30, 40}), 1, 1, r)), std::vector<int>{25}) << r;
    // rounding after each pass, half up: rows (10+21)/2 = 15.5 -> 16 and (30+40)/2 = 35, then 25.5 -> 26
    EXPECT_EQ(values(gb::resize_image(grey(2, 2, {10, 21, 30, 40}), 1, 1, gb::resample_bilinear)),
              std::vector<int>{26});
    // growing 2 -> 4 interpolates between the pixel centres; the outer quarter pixels take the edge value
    EXPECT_EQ(values(gb::resize_image(grey(2, 1, {0, 100}), 4, 1, gb::resample_bilinear)),
              (std::vector<int>{0, 25, 75, 100}));
    // shrinking 4 -> 2 widens the triangle to 2 source pixels (antialiasing): 0*.75+70*.75+140*.25 over 1.75
    // = 50, not the 35 that interpolating at 1.0 would give
    EXPECT_EQ(values(gb::resize_image(grey(4, 1, {0, 70, 140, 210}), 2, 1, gb::resample_bilinear)),
              (std::vector<int>{50, 160}));
    // nearest: 4 -> 2 takes pixels 1 and 3 (centres at 1.0 and 3.0); 3 -> 5 has centres at 0.3 0.9 1.5 2.1 2.7
    EXPECT_EQ(values(gb::resize_image(grey(4, 1, {1, 2, 3, 4}), 2, 1, gb::resample_nearest)),
              (std::vector<int>{2, 4}));
    EXPECT_EQ(values(gb::resize_image(grey(3, 1, {7, 8, 9}), 5, 1, gb::resample_nearest)),
              (std::vector<int>{7, 7, 8, 9, 9}));
    // bicubic overshoots at an edge and is clipped: 0 0 255 255 -> 8 wide dips below 0 before the edge
    std::vector<int> up = values(gb::resize_image(grey(4, 1, {0, 0, 255, 255}), 8, 1, gb::resample_bicubic));
    EXPECT_EQ(up.front(), 0);
    EXPECT_EQ(up.back(), 255);
    EXPECT_TRUE(std::is_sorted(up.begin(), up.end()));
    // a constant image stays constant whatever the filter and size
    for (int r = 0; r <= 5; r++) {
        image c = gb::resize_image(grey(3, 5, std::vector<int>(15, 77)), 11, 2, r);
        EXPECT_EQ(values(c), std::vector<int>(22, 77)) << r;
    }
}

TEST(Resize, RefusesBadArguments) {
    image in = make_image(4, 4, 0, 1);
    expect_gb_error([&] { gb::resize_image(in, 0, 4, 2); }, "resize_image");
    expect_gb_error([&] { gb::resize_image(in, 4, -1, 2); }, "resize_image");
    expect_gb_error([&] { gb::resize_image(in, 8, 8, 6); }, "resample 6");
    expect_gb_error([&] { gb::resize_image(image{}, 8, 8, 2); }, "at least one pixel");
}

// ---- center crop ----

image numbered(int w, int h) { // pixel (x, y) holds (x, y, 200)
    image im;
    im.width = w;
    im.height = h;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) im.rgb.insert(im.rgb.end(), {(uint8_t)x, (uint8_t)y, 200});
    return im;
}

TEST(CenterCrop, OffsetsAndPadding) {
    // inside: the corner at ((W - w) // 2, (H - h) // 2)
    image c = gb::center_crop(numbered(5, 4), 3, 2);
    ASSERT_EQ(c.width, 3);
    ASSERT_EQ(c.height, 2);
    EXPECT_EQ(px(c, 0, 0, 0), 1);
    EXPECT_EQ(px(c, 0, 0, 1), 1);
    c = gb::center_crop(numbered(6, 7), 3, 4); // odd differences round down: (1, 1)
    EXPECT_EQ(px(c, 0, 0, 0), 1);
    EXPECT_EQ(px(c, 0, 0, 1), 1);
    EXPECT_EQ(px(c, 2, 3, 0), 3);
    EXPECT_EQ(px(c, 2, 3, 1), 4);
    c = gb::center_crop(numbered(256, 256), 224, 224);
    EXPECT_EQ(px(c, 0, 0, 0), 16);
    EXPECT_EQ(px(c, 223, 223, 1), 239);
    // larger than the image: padded with 0, the image at ceil(difference / 2), i.e. the extra pixel before it
    c = gb::center_crop(numbered(3, 3), 6, 4);
    ASSERT_EQ(c.width, 6);
    ASSERT_EQ(c.height, 4);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 6; x++) {
            bool inside = x >= 2 && x < 5 && y >= 1 && y < 4;
            EXPECT_EQ(px(c, x, y, 2), inside ? 200 : 0) << x << "," << y;
            if (inside) {
                EXPECT_EQ(px(c, x, y, 0), x - 2);
                EXPECT_EQ(px(c, x, y, 1), y - 1);
            }
        }
    // wider but shorter: padded across, cropped down
    c = gb::center_crop(numbered(2, 9), 5, 3);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++) {
            bool inside = x >= 2 && x < 4;
            EXPECT_EQ(px(c, x, y, 2), inside ? 200 : 0);
            if (inside) {
                EXPECT_EQ(px(c, x, y, 0), x - 2);
                EXPECT_EQ(px(c, x, y, 1), y + 3);
            }
        }
    // the same size is a copy
    image n = numbered(7, 5);
    EXPECT_EQ(gb::center_crop(n, 7, 5).rgb, n.rgb);
    expect_gb_error([&] { gb::center_crop(n, 0, 5); }, "center_crop");
}

// ---- preprocessing ----

TEST(Preprocess, RescaleAndNormalizeAreHFsFloatMaths) {
    image im = numbered(4, 3);
    gb::image_preprocess p;
    p.do_resize = false;
    p.mean[0] = 0.485f, p.mean[1] = 0.456f, p.mean[2] = 0.406f;
    p.std[0] = 0.229f, p.std[1] = 0.224f, p.std[2] = 0.225f;
    int W = 0, H = 0;
    std::vector<float> v = gb::preprocess_image(im, p, W, H);
    ASSERT_EQ(W, 4);
    ASSERT_EQ(H, 3);
    ASSERT_EQ(v.size(), (size_t)3 * 4 * 3);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++) {
                float r = (float)(px(im, x, y, c) * (1 / 255.0)); // float64 product, then float32
                float want = (r - p.mean[c]) / p.std[c];
                EXPECT_EQ(v[(size_t)c * 12 + y * 4 + x], want) << c << " " << x << " " << y; // [3][H][W]
            }
    // ViT's defaults: mean = std = 0.5 maps 0..255 onto -1..1
    gb::image_preprocess vit;
    vit.do_resize = false;
    image ends;
    ends.width = 2;
    ends.height = 1;
    ends.rgb = {0, 0, 0, 255, 255, 255};
    v = gb::preprocess_image(ends, vit);
    EXPECT_FLOAT_EQ(v[0], -1.0f);
    EXPECT_FLOAT_EQ(v[1], 1.0f);
    // no rescale: normalize the raw values; neither: the raw values as floats
    vit.do_rescale = false;
    v = gb::preprocess_image(ends, vit);
    EXPECT_FLOAT_EQ(v[1], (255 - 0.5f) / 0.5f);
    vit.do_normalize = false;
    v = gb::preprocess_image(ends, vit);
    EXPECT_EQ(v[1], 255.0f);
}

TEST(Preprocess, ResizeThenCropThenNormalize) {
    image im = make_image(300, 200, 1, 5);
    gb::image_preprocess p; // DeiT: 256 bicubic, crop 224, ImageNet mean/std
    p.resize_w = p.resize_h = 256;
    p.resample = gb::resample_bicubic;
    p.do_center_crop = true;
    p.crop_w = p.crop_h = 224;
    int W = 0, H = 0;
    std::vector<float> v = gb::preprocess_image(im, p, W, H);
    ASSERT_EQ(W, 224);
    ASSERT_EQ(H, 224);
    image steps = gb::center_crop(gb::resize_image(im, 256, 256, gb::resample_bicubic), 224, 224);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 224 * 224; i++)
            ASSERT_EQ(v[(size_t)c * 224 * 224 + i], ((float)(steps.rgb[(size_t)i * 3 + c] / 255.0) - 0.5f) / 0.5f);
}

TEST(Preprocess, ShortestEdgeKeepsTheAspect) {
    gb::image_preprocess p;
    p.shortest_edge = 224;
    int w = 0, h = 0;
    gb::preprocess_size(w, h, numbered(640, 480), p); // int(224 * 640 / 480) = 298
    EXPECT_EQ(w, 298);
    EXPECT_EQ(h, 224);
    gb::preprocess_size(w, h, numbered(480, 640), p);
    EXPECT_EQ(w, 224);
    EXPECT_EQ(h, 298);
    gb::preprocess_size(w, h, numbered(100, 100), p);
    EXPECT_EQ(w, 224);
    EXPECT_EQ(h, 224);
    p.do_resize = false;
    gb::preprocess_size(w, h, numbered(100, 50), p);
    EXPECT_EQ(w, 100);
    EXPECT_EQ(h, 50);
    // CLIP: shortest edge 224 then crop 224 x 224
    p.do_resize = true;
    p.do_center_crop = true;
    p.resample = gb::resample_bicubic;
    int W = 0, H = 0;
    std::vector<float> v = gb::preprocess_image(make_image(200, 100, 1, 2), p, W, H);
    EXPECT_EQ(W, 224);
    EXPECT_EQ(H, 224);
    EXPECT_EQ(v.size(), (size_t)3 * 224 * 224);
}

// ---- decoding ----

TEST(LoadImage, PngRoundTripRgbaAndGrey) {
    const std::string dir = test_temp_dir("image_png");
    const int w = 13, h = 7;
    std::vector<uint8_t> rgba(w * h * 4), grey(w * h), grey_alpha(w * h * 2), rgb(w * h * 3);
    std::mt19937 rng(11);
    for (auto& b : rgba) b = (uint8_t)rng();
    for (auto& b : grey) b = (uint8_t)rng();
    for (auto& b : grey_alpha) b = (uint8_t)rng();
    for (auto& b : rgb) b = (uint8_t)rng();
    ASSERT_TRUE(stbi_write_png((dir + "/rgba.png").c_str(), w, h, 4, rgba.data(), w * 4));
    ASSERT_TRUE(stbi_write_png((dir + "/grey.png").c_str(), w, h, 1, grey.data(), w));
    ASSERT_TRUE(stbi_write_png((dir + "/ga.png").c_str(), w, h, 2, grey_alpha.data(), w * 2));
    ASSERT_TRUE(stbi_write_png((dir + "/rgb.png").c_str(), w, h, 3, rgb.data(), w * 3));

    image a = gb::load_image(dir + "/rgba.png"); // alpha dropped, not composited
    ASSERT_EQ(a.width, w);
    ASSERT_EQ(a.height, h);
    for (int i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++) ASSERT_EQ(a.rgb[i * 3 + c], rgba[i * 4 + c]) << i;
    image g = gb::load_image(dir + "/grey.png"); // grey replicated
    for (int i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++) ASSERT_EQ(g.rgb[i * 3 + c], grey[i]) << i;
    image ga = gb::load_image(dir + "/ga.png");
    for (int i = 0; i < w * h; i++)
        for (int c = 0; c < 3; c++) ASSERT_EQ(ga.rgb[i * 3 + c], grey_alpha[i * 2]) << i;
    image rgb_in = gb::load_image(dir + "/rgb.png");
    EXPECT_EQ(rgb_in.rgb, rgb);
    // from memory: the same
    std::string bytes = read_file(dir + "/rgb.png");
    image m = gb::decode_image((const uint8_t*)bytes.data(), bytes.size(), "memory");
    EXPECT_EQ(m.rgb, rgb);
}

TEST(LoadImage, JpegLoadsWithPlausibleValues) {
    const std::string dir = test_temp_dir("image_jpg");
    image src = make_image(64, 48, 1, 4); // smooth, so JPEG keeps it close
    ASSERT_TRUE(stbi_write_jpg((dir + "/a.jpg").c_str(), src.width, src.height, 3, src.rgb.data(), 95));
    image j = gb::load_image(dir + "/a.jpg");
    ASSERT_EQ(j.width, 64);
    ASSERT_EQ(j.height, 48);
    double sum = 0;
    int worst = 0;
    for (size_t i = 0; i < j.rgb.size(); i++) {
        int d = std::abs((int)j.rgb[i] - (int)src.rgb[i]);
        sum += d;
        worst = std::max(worst, d);
    }
    EXPECT_LT(sum / j.rgb.size(), 4.0);
    EXPECT_LT(worst, 48);
}

TEST(LoadImage, ErrorsNameThePath) {
    const std::string dir = test_temp_dir("image_bad");
    write_file(dir + "/garbage.png", "this is not an image at all");
    expect_gb_error([&] { gb::load_image(dir + "/garbage.png"); }, dir + "/garbage.png: cannot read the image (stb_image: ");
    expect_gb_error([&] { gb::load_image(dir + "/missing.png"); }, dir + "/missing.png: cannot read the image");
    write_file(dir + "/empty.jpg", "");
    expect_gb_error([&] { gb::load_image(dir + "/empty.jpg"); }, dir + "/empty.jpg: cannot read the image");
    // a PNG cut short
    std::vector<uint8_t> rgb(32 * 32 * 3, 9);
    ASSERT_TRUE(stbi_write_png((dir + "/whole.png").c_str(), 32, 32, 3, rgb.data(), 32 * 3));
    std::string bytes = read_file(dir + "/whole.png");
    write_file(dir + "/cut.png", bytes.substr(0, bytes.size() / 2));
    expect_gb_error([&] { gb::load_image(dir + "/cut.png"); }, dir + "/cut.png: cannot read the image");
    expect_gb_error([&] { gb::decode_image((const uint8_t*)"xy", 2, "upload"); }, "upload: cannot read the image");
}

// ---- preprocessor_config.json ----

gb::image_preprocess read_config(const std::string& text) {
    static int n = 0;
    const std::string path = test_temp_dir("image_cfg" + std::to_string(n++)) + "/preprocessor_config.json";
    write_file(path, text);
    return gb::read_preprocessor_config(path);
}

TEST(PreprocessorConfig, ViTStyle) {
    gb::image_preprocess p = read_config(R"({
      "do_normalize": true, "do_rescale": true, "do_resize": true,
      "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "ViTImageProcessor",
      "image_std": [0.5, 0.5, 0.5], "resample": 2, "rescale_factor": 0.00392156862745098,
      "size": {"height": 384, "width": 320}})");
    EXPECT_TRUE(p.do_resize);
    EXPECT_EQ(p.resize_w, 320);
    EXPECT_EQ(p.resize_h, 384);
    EXPECT_EQ(p.shortest_edge, 0);
    EXPECT_EQ(p.resample, 2);
    EXPECT_FALSE(p.do_center_crop);
    EXPECT_TRUE(p.do_rescale);
    EXPECT_EQ(p.rescale_factor, 0.00392156862745098);
    EXPECT_TRUE(p.do_normalize);
    for (int c = 0; c < 3; c++) EXPECT_EQ(p.mean[c], 0.5f);
    for (int c = 0; c < 3; c++) EXPECT_EQ(p.std[c], 0.5f);
    // the old feature extractor: an int size is square, and missing keys keep the defaults
    p = read_config(R"({"feature_extractor_type": "ViTFeatureExtractor", "size": 224, "do_resize": true,
                        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2})");
    EXPECT_EQ(p.resize_w, 224);
    EXPECT_EQ(p.resize_h, 224);
    EXPECT_EQ(p.shortest_edge, 0);
    EXPECT_TRUE(p.do_rescale);
    // an empty object is ViTImageProcessor's defaults
    p = read_config("{}");
    EXPECT_EQ(p.resize_w, 224);
    EXPECT_EQ(p.resample, 2);
}

TEST(PreprocessorConfig, DeiTStyle) {
    gb::image_preprocess p = read_config(R"({
      "crop_size": {"height": 224, "width": 224}, "do_center_crop": true, "do_normalize": true,
      "do_rescale": true, "do_resize": true, "image_mean": [0.485, 0.456, 0.406],
      "image_processor_type": "DeiTImageProcessor", "image_std": [0.229, 0.224, 0.225],
      "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"height": 256, "width": 256}})");
    EXPECT_EQ(p.resize_w, 256);
    EXPECT_EQ(p.resize_h, 256);
    EXPECT_TRUE(p.do_center_crop);
    EXPECT_EQ(p.crop_w, 224);
    EXPECT_EQ(p.crop_h, 224);
    EXPECT_EQ(p.resample, 3);
    EXPECT_EQ(p.mean[0], 0.485f);
    EXPECT_EQ(p.mean[2], 0.406f);
    EXPECT_EQ(p.std[1], 0.224f);
    // the old DeiT feature extractor: ints, square
    p = read_config(R"({"crop_size": 224, "do_center_crop": true, "do_normalize": true, "do_resize": true,
                        "feature_extractor_type": "DeiTFeatureExtractor", "image_mean": [0.485, 0.456, 0.406],
                        "image_std": [0.229, 0.224, 0.225], "resample": 3, "size": 256})");
    EXPECT_EQ(p.resize_w, 256);
    EXPECT_EQ(p.resize_h, 256);
    EXPECT_EQ(p.shortest_edge, 0);
    EXPECT_EQ(p.crop_w, 224);
    EXPECT_EQ(p.crop_h, 224);
    // shortest_edge
    p = read_config(R"({"size": {"shortest_edge": 256}, "crop_size": {"height": 224, "width": 224},
                        "do_center_crop": true, "resample": 3})");
    EXPECT_EQ(p.shortest_edge, 256);
    EXPECT_EQ(p.crop_w, 224);
    // CLIP's int size is the shortest edge, its int crop_size a square; [h, w] lists are height first
    p = read_config(R"({"feature_extractor_type": "CLIPFeatureExtractor", "size": 224, "crop_size": 224,
                        "do_center_crop": true, "resample": 3})");
    EXPECT_EQ(p.shortest_edge, 224);
    EXPECT_EQ(p.crop_w, 224);
    EXPECT_EQ(p.crop_h, 224);
    p = read_config(R"({"size": [300, 200], "image_mean": 0.25})");
    EXPECT_EQ(p.resize_h, 300);
    EXPECT_EQ(p.resize_w, 200);
    EXPECT_EQ(p.mean[1], 0.25f);
}

TEST(PreprocessorConfig, BadFieldsAreNamed) {
    auto bad = [](const std::string& text, const std::string& needle) {
        expect_gb_error([&] { read_config(text); }, needle);
        expect_gb_error([&] { read_config(text); }, "preprocessor_config.json: ");
    };
    bad(R"({"resample": "bilinear"})", "resample must be");
    bad(R"({"resample": 9})", "resample must be");
    bad(R"({"size": {"height": 224}})", "size must hold");
    bad(R"({"size": {"height": 0, "width": 224}})", "size.height must be");
    bad(R"({"size": {"longest_edge": 224}})", "longest_edge");
    bad(R"({"size": "big"})", "size must be");
    bad(R"({"crop_size": {"shortest_edge": 224}})", "crop_size must hold height and width");
    bad(R"({"image_mean": [0.5, 0.5]})", "image_mean must be a list of 3 numbers");
    bad(R"({"image_std": [0.5, 0, 0.5]})", "image_std holds 0");
    bad(R"({"do_resize": "yes"})", "do_resize must be true or false");
    bad(R"({"rescale_factor": -1})", "rescale_factor must be");
    bad(R"({"crop_pct": 0.875, "size": {"shortest_edge": 224}})", "crop_pct");
    bad(R"([1, 2])", "expected a JSON object");
    bad(R"({"size": )", "not valid JSON");
    const std::string dir = test_temp_dir("image_cfg_missing");
    expect_gb_error([&] { gb::read_preprocessor_config(dir + "/preprocessor_config.json"); }, "cannot open " + dir);
}

// ---- Pillow itself: Debian's /usr/bin/python3 with python3-pil and python3-numpy (tools/setup.sh --tests) ----

TEST(Resize, MatchesPillow) {
    command_result have = run_command("/usr/bin/python3 -c 'import PIL, numpy'");
    ASSERT_EQ(have.code, 0) << "/usr/bin/python3 cannot import PIL and numpy (run tools/setup.sh --tests, which "
                               "installs python3-pil and python3-numpy): " << have.err;
    const std::string dir = test_temp_dir("image_pil");
    // each case: the input as raw RGB, Pillow's resize of it, and a DeiT-style pipeline written as HF does it
    struct pil_case {
        resize_case s;
        int resample, kind;
    };
    std::vector<pil_case> cases;
    int n = 0;
    for (const resize_case& s : resize_cases)
        for (int r = 0; r <= 5; r++) cases.push_back({s, r, n++ % 3});
    std::ostringstream list;
    for (size_t i = 0; i < cases.size(); i++) {
        const pil_case& c = cases[i];
        image in = make_image(c.s.w, c.s.h, c.kind, 100 + (uint32_t)i);
        std::ofstream(dir + "/in" + std::to_string(i) + ".raw", std::ios::binary)
            .write((const char*)in.rgb.data(), (std::streamsize)in.rgb.size());
        list << i << " " << c.s.w << " " << c.s.h << " " << c.s.W << " " << c.s.H << " " << c.resample << "\n";
    }
    write_file(dir + "/cases.txt", list.str());
    write_file(dir + "/pil.py", R"(import sys, numpy as np
from PIL import Image
d = sys.argv[1]
for line in open(d + '/cases.txt'):
    i, w, h, W, H, r = map(int, line.split())
    a = np.fromfile(f'{d}/in{i}.raw', np.uint8).reshape(h, w, 3)
    np.asarray(Image.fromarray(a).resize((W, H), resample=r)).tofile(f'{d}/out{i}.raw')
    # HF ViTImageProcessor / DeiTImageProcessor: PIL resize, center crop, float64 rescale to float32, normalize
    x = np.asarray(Image.fromarray(a).resize((W, H), resample=r))
    ch, cw = 3 * H // 4 + 1, 3 * W // 4 + 1
    top, left = (H - ch) // 2, (W - cw) // 2
    x = x[top:top + ch, left:left + cw]
    x = (x.astype(np.float64) * 0.00392156862745098).astype(np.float32)
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32)
    x = ((x - mean) / std).transpose(2, 0, 1)
    np.ascontiguousarray(x).tofile(f'{d}/px{i}.raw')
)");
    command_result r = run_command("/usr/bin/python3 '" + dir + "/pil.py' '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    int worst = 0;
    for (size_t i = 0; i < cases.size(); i++) {
        const pil_case& c = cases[i];
        image in = make_image(c.s.w, c.s.h, c.kind, 100 + (uint32_t)i);
        image got = gb::resize_image(in, c.s.W, c.s.H, c.resample);
        image want;
        want.width = c.s.W;
        want.height = c.s.H;
        std::string b = read_file(dir + "/out" + std::to_string(i) + ".raw");
        want.rgb.assign(b.begin(), b.end());
        int d = max_diff(got, want);
        worst = std::max(worst, d);
        EXPECT_LE(d, 1) << "resample " << c.resample << ", " << c.s.w << "x" << c.s.h << " -> " << c.s.W << "x"
                        << c.s.H;
        gb::image_preprocess p;
        p.resize_w = c.s.W, p.resize_h = c.s.H, p.resample = c.resample;
        p.do_center_crop = true;
        p.crop_w = 3 * c.s.W / 4 + 1, p.crop_h = 3 * c.s.H / 4 + 1;
        p.mean[0] = 0.485f, p.mean[1] = 0.456f, p.mean[2] = 0.406f;
        p.std[0] = 0.229f, p.std[1] = 0.224f, p.std[2] = 0.225f;
        std::vector<float> v = gb::preprocess_image(in, p);
        std::string pb = read_file(dir + "/px" + std::to_string(i) + ".raw");
        ASSERT_EQ(pb.size(), v.size() * sizeof(float)) << i;
        if (d == 0) { // the same pixels give the same floats, to the bit
            EXPECT_EQ(std::memcmp(pb.data(), v.data(), pb.size()), 0) << "pixel_values of case " << i;
        }
    }
    RecordProperty("max_uint8_difference_from_pillow", worst);
    std::printf("largest difference from Pillow: %d\n", worst);
}

} // namespace
