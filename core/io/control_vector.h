// Steering vectors as files hold them: llama.cpp's control-vector GGUF (general.architecture "controlvector", one
// F32 tensor "direction.N" of n_embd floats per layer) and NumPy .npy ([L][d], or one [d] direction with its layer).
//
// The layer index is llama.cpp's: direction.N is added to the residual stream after (0-based) layer N, what Glassbox
// calls resid_post of layer N (llama.cpp's llama_adapter_cvec keeps no tensor for layer 0, its loader refuses a
// direction.0, and only layers 1 .. n_layer-1 are applied). The same index, from 0, names a row of a [L][d] .npy.
#pragma once
#include <string>
#include <vector>

namespace gb {

struct steer_vector {
    int d_model = 0;                       // d: every direction's width
    std::vector<std::vector<float>> dirs;  // [layers][d] by layer index; an empty row: no direction at that layer
    std::string model_hint;                // the model it was made on ("gpt2", ...), as controlvector.model_hint says
    std::string name;                      // how steering's describe() names it (a file's name; not written)
    bool has(int layer) const { return layer >= 0 && layer < (int)dirs.size() && !dirs[layer].empty(); }
    std::vector<int> layers() const;       // the layers with a direction, ascending
    void set(int layer, std::vector<float> dir); // grows dirs as needed
};

// A .gguf (llama.cpp's control vector) or a .npy by its extension. npy_layer: the layer of a one-dimensional [d]
// .npy (-1: none given, then such a file is refused in one line). Throws gb::error naming the file and what is
// wrong: unreadable, another architecture than controlvector, no direction tensor, direction.0, widths that
// differ, a type other than F32, NaN or Inf, an all-zero file.
steer_vector read_steer_vector(const std::string& path, int npy_layer = -1);
// llama.cpp's layout: general.architecture = "controlvector", controlvector.model_hint, controlvector.layer_count
// (i32, the tensors written), then one F32 tensor direction.N of shape {d} per layer N with a direction, in
// ascending order. A direction at layer 0 is refused (llama.cpp has no direction.0: use .npy).
void write_control_vector_gguf(const std::string& path, const steer_vector& v);
// The layers of `layers` that a file at path can hold: all of them for a .npy; for llama.cpp's .gguf, which has no
// direction.0, layer 0 is dropped when drop_layer0 (a range such as "all", or a vector that has one) and refused,
// naming path, when it was asked for by itself.
std::vector<int> storable_steer_layers(const std::string& path, std::vector<int> layers, bool drop_layer0);
// [L][d] float32 with L = the last layer with a direction + 1; layers without one are rows of zeros (read back as
// no direction).
void write_steer_npy(const std::string& path, const steer_vector& v);
// By the extension of path: .gguf or .npy (anything else is refused naming both).
void write_steer_vector(const std::string& path, const steer_vector& v);

} // namespace gb
