// Vision Transformers (ViT, DeiT): what an image classifier's positions are called and how an image becomes the
// forward's input. The forward itself is the encoder's (forward.h) with patch embeddings for token rows.
#pragma once
#include <string>
#include <vector>

#include "model/model.h"
#include "util/image.h"

namespace gb {

// The name of position t: "[CLS]", "[DIST]", then each patch by its grid row and column, "r2c5"
std::string vision_piece(const model_config& c, int t);
// The grid cell of position t ({row, col}), or {-1, -1} for [CLS] / [DIST]
std::pair<int, int> vision_cell(const model_config& c, int t);
// The tokens a vision forward takes: its positions 0 .. n_ctx-1
std::vector<int> vision_tokens(const model_config& c);
// The image as the model sees it, in RGB: resized and cropped as m.image_prep says, before rescaling and
// normalising (the picture the app draws the patch grid on)
image vision_view(const model& m, const image& img);
// The model's pixels [C][S][S] of a view (vision_view's result): rescaled and normalised as m.image_prep says;
// throws when the view is not the model's size or the model does not read RGB
std::vector<float> view_pixels(const model& m, const image& view);
// The model's pixels of an image: view_pixels(m, vision_view(m, img)), one resize
std::vector<float> vision_pixels(const model& m, const image& img);

} // namespace gb
