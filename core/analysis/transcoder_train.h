// Training per-layer transcoders (circuit-tracer's layout, core/io/transcoders.h) on a model's own activations:
// each layer's MLP input after its norm (mlp_in) -> that layer's MLP output (mlp_out), with train_coder
// (core/analysis/sae_train.h: TopK, ReLU + L1 or JumpReLU + L0, optionally a linear skip), the pairs collected
// from text.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/sae_train.h"
#include "io/transcoders.h"

namespace gb {

struct model;

// Paired activations of some layers, position for position.
struct mlp_pairs {
    std::vector<int> layers;           // the layers collected, ascending
    int d = 0;                         // d_model
    int64_t n = 0;                     // rows (positions) per layer
    std::vector<std::vector<float>> x; // [layers.size()][n][d] mlp_in: the MLP's input after its norm
    std::vector<std::vector<float>> y; // [layers.size()][n][d] mlp_out: the MLP's output
};

// mlp_in and mlp_out of each of `layers` for text cut into windows of `window` tokens (with a BOS first when bos;
// its position is not kept), at most max_rows positions. One forward pass per window keeps every layer.
mlp_pairs collect_mlp_pairs(const model& m, const std::vector<int>& layers, const std::string& text, int window,
                            int64_t max_rows, bool bos);

// One layer of a transcoder set from what train_coder learnt (W_enc transposed to [d_tc][d]; the skip as it is).
transcoder_layer transcoder_layer_of(const trained_coder& c);

// An empty layer of d_tc features (every weight 0: nothing fires, the whole MLP output is the error) for the
// layers a training leaves out (a JumpReLU set's with thresholds).
transcoder_layer empty_transcoder_layer(int d_tc, int d, bool skip, bool jumprelu = false);

// The set's fields for model m's layers (input mlp_in, output mlp_out, arch and k from the options, model_name
// from the model's folder).
transcoder_set new_transcoder_set(const model& m, const sae_train_options& o, std::vector<transcoder_layer> layers);

} // namespace gb
