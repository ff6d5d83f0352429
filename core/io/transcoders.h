// Transcoder sets for attribution graphs (core/analysis/attribution_graph.h), as circuit-tracer lays them out:
// - per-layer: a folder with layer_{i}.safetensors for every layer i (W_enc [d_tc][d], W_dec [d_tc][d], b_enc [d_tc],
//   b_dec [d], optional activation_function.threshold [d_tc] (JumpReLU) and W_skip [d][d], the skip being
//   x W_skip^T);
// - cross-layer: W_enc_{i}.safetensors (W_enc_{i} [d_tc][d], b_enc_{i}, b_dec_{i}, optional threshold_{i} and
//   W_skip_{i}, the skip being x W_skip_{i}) and W_dec_{i}.safetensors (W_dec_{i} [d_tc][L - i][d]: layer i's
//   features write into the MLP outputs of layers i .. L-1);
// with an optional config.yaml beside them, of which the flat `key: value` lines are read: model_kind
// (transcoder_set or cross_layer_transcoder), model_name, feature_input_hook, feature_output_hook, and ours:
// activation_function (relu, jump_relu, topk) with top_k.
// And Gemma Scope 2's (google/gemma-scope-2-*), JumpReLU, a config.json beside the params (type, architecture,
// hf_hook_point_in / _out, affine_connection, model_name, width):
// - per-layer (transcoder_all/layer_{i}_width_{W}_l0_{X}[_affine]/params.safetensors): w_enc [d][d_tc] (the
//   encoder transposed), w_dec [d_tc][d], b_enc, b_dec, threshold, optional affine_skip_connection [d][d] (the
//   skip x A); opened from any one layer's folder (or its params.safetensors), or from the folder above when it
//   holds a single set;
// - cross-layer (clt/width_{W}_l0_{X}[_affine]/params_layer_{i}.safetensors): the same names, w_dec [d_tc][L][d]
//   of which layer i's features use the layers i .. L-1.
// Its transcoders read the MLP's input after its norm (pre_feedforward_layernorm.output) and write the MLP's output
// after its post-norm (post_feedforward_layernorm.output): output_normed.
// A single SAELens transcoder (core/io/sae.h) is one layer; this is the whole stack, every layer covered.
#pragma once
#include <string>
#include <vector>

#include "io/sae.h"

namespace gb {

// One layer's transcoder: it reads the MLP's input of that layer and writes the MLP outputs of n_out layers.
struct transcoder_layer {
    std::vector<float> W_enc;     // [d_tc][d] row f: feature f's encoder (pre-activation = W_enc[f] . x + b_enc[f])
    std::vector<float> b_enc;     // [d_tc]
    std::vector<float> threshold; // [d_tc] JumpReLU only
    std::vector<float> W_dec;     // [d_tc][n_out][d]: feature f's write into the MLP output of layer + o
    std::vector<float> b_dec;     // [d] added to this layer's MLP output
    std::vector<float> skip;      // [d][d] this layer's MLP output gets x skip (row-major [in][out]); empty: none
};

enum transcoder_layout { TC_CIRCUIT_TRACER, TC_GEMMA_SCOPE_2 };

struct transcoder_set {
    std::string path;
    transcoder_layout layout = TC_CIRCUIT_TRACER;
    std::vector<std::string> files; // [n_layer] each layer's file (a circuit-tracer cross-layer set: its W_enc_{i})
    std::string model_name;       // config.yaml's (config.json's), "" without
    bool cross_layer = false;
    bool input_normed = true;     // the input is the MLP's input after its norm (mlp_in); false: resid_mid
    bool output_normed = false;   // the writes are the MLP's output after its post-norm (Gemma Scope 2); on a model
                                  // without post-norms the same point as before one
    int gs2_affine = -1, gs2_width = 0; // Gemma Scope 2's config.json: affine_connection (-1: unsaid), width (0)
    sae_arch arch = SAE_RELU;     // SAE_RELU, SAE_JUMPRELU or SAE_TOPK (k)
    int k = 0;
    int n_layer = 0, d_model = 0, d_tc = 0;
    std::vector<transcoder_layer> layers; // [n_layer]
    bool has_skip() const { return !layers.empty() && !layers[0].skip.empty(); }
    int n_out(int layer) const { return cross_layer ? n_layer - layer : 1; }
    // [d] feature f of `layer`'s write into the MLP output of layer `target` (layer <= target < layer + n_out)
    const float* dec(int layer, int f, int target) const {
        return layers[layer].W_dec.data() + ((size_t)f * n_out(layer) + (target - layer)) * d_model;
    }
};

// The set in dir (per-layer or cross-layer, told apart by the files). Throws gb::error, one line naming the file:
// no layer files, a layer missing, a tensor missing or of the wrong shape, a non-finite weight, a config.yaml value
// we do not implement (another model_kind, input or output hook, activation function).
transcoder_set read_transcoders(const std::string& dir);
// The set in dir with only the features that fire on some row of the inputs, read and encoded a layer at a time
// (memory: one layer's matrices as floats, then the kept rows): mlp_in and resid_mid [n_layer][n][d] are each
// layer's MLP input after its norm and the stream before it (the set's feature_input_hook picks one). Layer l's
// feature j is the file's feature kept[l][j] (increasing); every layer is as wide as the widest, the rest padded
// with features that never fire (W_enc 0, b_enc -1, W_dec 0). full_d_tc: the file's width. Encoding these inputs
// with it gives the activations of the whole set, bit for bit (attribution graphs: cmd_graph). Throws as
// read_transcoders does, and for a layer count or width that is not n_layer or d.
transcoder_set read_active_transcoders(const std::string& dir, const std::vector<float>& mlp_in,
                                       const std::vector<float>& resid_mid, int n, int n_layer, int d,
                                       std::vector<std::vector<int>>& kept, int& full_d_tc);
// Writes t into dir in circuit-tracer's layout (config.yaml too), F32. The tests' sets and train-transcoder's.
void write_transcoders(const std::string& dir, const transcoder_set& t);
// Writes t in Gemma Scope 2's layout, F32, config.json included: per-layer into dir/layer_{i}_{variant}/, cross-
// layer into dir/params_layer_{i}.safetensors (variant unused). The tests' sets.
void write_gemma_scope_2(const std::string& dir, const transcoder_set& t, const std::string& variant);

// Whether dir is a transcoder set's folder that read_transcoders opens as it is (circuit-tracer's, a Gemma Scope 2
// cross-layer folder, or one layer's folder of a Gemma Scope 2 per-layer set): the file browser's choices.
bool is_transcoder_folder(const std::string& dir);

// A random per-layer ReLU set of n_layer x d_tc features for a model of width d, written into dir layer by layer
// (memory: one layer as floats) in circuit-tracer's layout, its matrices stored as dtype ("F32", "F16", "BF16"):
// W_enc N(0, 1/d) so that a pre-activation on an input of norm sqrt(d) is about N(bias, 1), b_enc bias + N(0, 0.1),
// W_dec N(0, 0.25/d), b_dec N(0, 0.05^2), with skip a W_skip N(0, 0.09/d). For benchmarks (make-random --transcoders).
void write_random_transcoders(const std::string& dir, int n_layer, int d, int d_tc, float bias, bool skip,
                              const std::string& dtype, uint64_t seed);

// acts [n][d_tc] of `layer`'s features from x [n][d] (its input), in double inside: ReLU, JumpReLU (pre where
// pre > threshold), TopK (the k largest pre-activations through ReLU).
void transcoder_encode(std::vector<float>& acts, const transcoder_set& t, int layer, const float* x, int n);

// The flat `key: value` lines of a YAML file (quotes stripped; lists, nested blocks and comments skipped).
std::vector<std::pair<std::string, std::string>> read_flat_yaml(const std::string& path);

} // namespace gb
