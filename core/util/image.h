// Images for vision models: decoding PNG/JPEG (stb_image) and the Hugging Face image preprocessing of a model
// folder's preprocessor_config.json (ViTImageProcessor, DeiTImageProcessor, CLIPImageProcessor, ...), so that
// pixel_values match what transformers feeds the model. Resizing reproduces Pillow's Image.resize, which the
// HF (slow) image processors call, to the uint8.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gb {

struct image {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb; // [height][width][3], rows top to bottom
};

// Any format stb_image reads (PNG, JPEG, BMP, GIF's first frame, TGA, PSD, HDR, PNM) as 8-bit RGB, like Pillow's
// convert("RGB"): grey is replicated into the three channels, alpha is dropped (not composited), 16-bit samples
// keep their high byte. Throws "PATH: cannot read the image (stb_image: <reason>)"; images above
// image_max_pixels are refused before they are decoded.
image load_image(const std::string& path);
// The same from bytes[0, n); `what` names the source in errors.
image decode_image(const uint8_t* bytes, size_t n, const std::string& what);
constexpr int64_t image_max_pixels = int64_t(1) << 28;

// Pillow's resampling filters, by their codes (what "resample" holds in preprocessor_config.json).
enum resample_filter : int {
    resample_nearest = 0,
    resample_lanczos = 1,
    resample_bilinear = 2,
    resample_bicubic = 3,
    resample_box = 4,
    resample_hamming = 5,
};

// What a preprocessor_config.json asks for, in the order HF applies it: resize, center crop, rescale, normalize.
struct image_preprocess {
    bool do_resize = true;
    int resize_w = 224, resize_h = 224; // size {"height", "width"}: the image is resized to exactly this
    int shortest_edge = 0;              // > 0: size {"shortest_edge"}: the shorter side becomes this, aspect kept
    int resample = resample_bilinear;   // resample_filter
    bool do_center_crop = false;
    int crop_w = 224, crop_h = 224;
    bool do_rescale = true;
    double rescale_factor = 1 / 255.0; // HF multiplies in double, then rounds to float32
    bool do_normalize = true;
    float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.5f, 0.5f}; // per channel R, G, B
};

// Reads preprocessor_config.json; keys it lacks keep image_preprocess's defaults (ViTImageProcessor's). "size" may
// be {"height", "width"}, {"shortest_edge"}, [height, width] or an int (square, or the shortest edge for CLIP- and
// BiT-style processors, as HF's get_size_dict does for them); "crop_size" likewise, an int being square.
// Throws gb::error naming the file and the key for a value of the wrong type or out of range, and for what this
// reader does not reproduce (crop_pct, longest_edge). A missing file throws "cannot open PATH"; whether that is
// an error is the caller's business.
image_preprocess read_preprocessor_config(const std::string& path);

// Pillow's Image.resize((w, h), resample) of an RGB image: separable, horizontal pass then vertical, each
// rounded to uint8; when shrinking, the filter's support grows by the scale factor (antialiasing). A pass whose
// size does not change is skipped, so an unchanged size is an exact copy. Nearest takes the source pixel under
// each output pixel's centre. Throws gb::error for w or h < 1, an empty input or an unknown resample code.
image resize_image(const image& in, int w, int h, int resample);

// HF image_transforms.center_crop: the w x h window whose top-left corner is at ((W - w) // 2, (H - h) // 2),
// floor division; where the window reaches outside the image (crop larger than the image) those pixels are 0,
// i.e. the image is padded with black, centred with the extra pixel of an odd difference at the top/left.
image center_crop(const image& in, int w, int h);

// The output size of the resize step (HF get_resize_output_image_size): (resize_w, resize_h), or for
// shortest_edge s the short side s and the long side int(s * long / short). The input's size when !do_resize.
void preprocess_size(int& w, int& h, const image& in, const image_preprocess& p);

// pixel_values for one image: resize, center crop, then per value x = float(u8 * rescale_factor) and
// (x - mean[c]) / std[c] in float32, as HF does. Returns [3][H][W] (channel-first), H and W after crop.
std::vector<float> preprocess_image(const image& in, const image_preprocess& p);
// The same, also giving the size of the result.
std::vector<float> preprocess_image(const image& in, const image_preprocess& p, int& out_w, int& out_h);

} // namespace gb
