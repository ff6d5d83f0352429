// Steering vectors in files: llama.cpp's control-vector GGUF (read through open_gguf, written here) and .npy (a
// small reader for the float arrays NumPy writes, and write_npy).
//
// Sections: the vector | GGUF | .npy | by extension
#include "io/control_vector.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "io/gguf.h"
#include "util/error.h"
#include "util/npy.h"
#include "util/text.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// The vector
// ---------------------------------------------------------------------------------------------
std::vector<int> steer_vector::layers() const {
    std::vector<int> out;
    for (int l = 0; l < (int)dirs.size(); l++)
        if (has(l)) out.push_back(l);
    return out;
}

void steer_vector::set(int layer, std::vector<float> dir) {
    if ((int)dirs.size() <= layer) dirs.resize((size_t)layer + 1);
    dirs[layer] = std::move(dir);
}

// NaN or Inf anywhere, or nothing but zeros: one line naming the file
static void check_values(const std::string& path, const steer_vector& v) {
    bool any = false;
    for (int l : v.layers())
        for (size_t i = 0; i < v.dirs[l].size(); i++) {
            if (!std::isfinite(v.dirs[l][i]))
                throw error(path + ": the direction of layer " + std::to_string(l) + " holds a non-finite value (" +
                            std::to_string(v.dirs[l][i]) + " at " + std::to_string(i) + ")");
            any |= v.dirs[l][i] != 0.0f;
        }
    if (!any) throw error(path + ": every direction is zero: nothing to steer with");
}

// ---------------------------------------------------------------------------------------------
// GGUF
// ---------------------------------------------------------------------------------------------
static steer_vector read_gguf(const std::string& path) {
    const gguf_file g = open_gguf(path);
    auto arch = g.meta.find("general.architecture");
    if (arch == g.meta.end() || arch->second.type != 8 || arch->second.s != "controlvector")
        throw error(path + ": not a control vector (general.architecture is " +
                    (arch == g.meta.end() ? std::string("missing") : "'" + arch->second.s + "'") +
                    ", llama.cpp's control vectors say 'controlvector')");
    steer_vector v;
    auto hint = g.meta.find("controlvector.model_hint");
    if (hint != g.meta.end() && hint->second.type == 8) v.model_hint = hint->second.s;
    for (const auto& kv : g.tensors) {
        const gguf_tensor& t = kv.second;
        if (t.name.compare(0, 10, "direction.") != 0) continue; // llama.cpp skips other tensors too
        const std::string idx = t.name.substr(10);
        if (idx.empty() || idx.size() > 6 || idx.find_first_not_of("0123456789") != std::string::npos)
            throw error(path + ": tensor '" + t.name + "' is not direction.N with a layer number N");
        const int layer = std::stoi(idx);
        if (layer == 0)
            throw error(path + ": direction.0: llama.cpp's control vectors start at layer 1 (it adds direction.N after "
                               "layer N, and has none for layer 0)");
        if (t.ne.size() != 1 || t.ne[0] < 1)
            throw error(path + ": " + t.name + " is not one-dimensional (a direction is n_embd floats)");
        if (t.type != GGML_F32 && t.type != GGML_F16 && t.type != GGML_BF16)
            throw error(path + ": " + t.name + " is " + ggml_type_name(t.type) + ", a direction is F32");
        if (v.d_model && t.ne[0] != v.d_model)
            throw error(path + ": " + t.name + " has " + std::to_string(t.ne[0]) + " floats, the others " +
                        std::to_string(v.d_model));
        v.d_model = (int)t.ne[0];
        v.set(layer, gguf_tensor_f32(g, t.name, {t.ne[0]}));
    }
    if (v.d_model == 0) throw error(path + ": no direction.N tensor: not a control vector llama.cpp can apply");
    check_values(path, v);
    return v;
}

std::vector<int> storable_steer_layers(const std::string& path, std::vector<int> layers, bool drop_layer0) {
    const bool gguf = path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
    if (!gguf || std::find(layers.begin(), layers.end(), 0) == layers.end()) return layers;
    if (!drop_layer0)
        throw error(path + ": a direction at layer 0 cannot go to llama.cpp's format (it has no direction.0: it adds "
                           "direction.N after layer N >= 1); write a .npy instead");
    layers.erase(std::find(layers.begin(), layers.end(), 0));
    return layers;
}

void write_control_vector_gguf(const std::string& path, const steer_vector& v) {
    const std::vector<int> layers = v.layers();
    if (layers.empty()) throw error(path + ": the vector has no direction to write");
    storable_steer_layers(path, layers, false);
    std::string h = "GGUF";
    auto put = [&](auto x) { h.append((const char*)&x, sizeof x); };
    auto str = [&](const std::string& s) { put((uint64_t)s.size()), h += s; };
    put((uint32_t)3), put((uint64_t)layers.size()), put((uint64_t)3);
    str("general.architecture"), put((uint32_t)8), str("controlvector");
    str("controlvector.model_hint"), put((uint32_t)8), str(v.model_hint);
    str("controlvector.layer_count"), put((uint32_t)5), put((int32_t)layers.size());
    // tensor infos: each [d] F32 at a multiple of 32 bytes (the default general.alignment)
    const uint64_t align = 32, bytes = (uint64_t)v.d_model * 4, padded = (bytes + align - 1) / align * align;
    for (size_t i = 0; i < layers.size(); i++) {
        str("direction." + std::to_string(layers[i]));
        put((uint32_t)1), put((uint64_t)v.d_model), put((uint32_t)GGML_F32), put((uint64_t)(i * padded));
    }
    h.append((align - h.size() % align) % align, '\0');
    for (int l : layers) {
        if ((int)v.dirs[l].size() != v.d_model) throw error("internal: a direction of the wrong width");
        h.append((const char*)v.dirs[l].data(), bytes);
        h.append(padded - bytes, '\0');
    }
    std::ofstream o(path, std::ios::binary);
    if (!o) throw error("cannot write " + path);
    o.write(h.data(), (std::streamsize)h.size());
    if (!o) throw error("cannot write " + path + " (disk full?)");
}

// ---------------------------------------------------------------------------------------------
// .npy: float32 or float64, little-endian, C order, one or two dimensions
// ---------------------------------------------------------------------------------------------
// The value of key in a .npy header dict ("'descr': '<f4', 'fortran_order': False, 'shape': (4, 256), }")
static std::string header_field(const std::string& h, const std::string& key) {
    const size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) return "";
    size_t a = h.find(':', k);
    if (a == std::string::npos) return "";
    a = h.find_first_not_of(' ', a + 1);
    size_t b = h[a] == '(' ? h.find(')', a) + 1 : h.find(',', a);
    return h.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

static steer_vector read_npy(const std::string& path, int npy_layer) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("cannot open " + path);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw error(path + ": not a .npy file");
    const int major = (uint8_t)bytes[6];
    const size_t len_bytes = major == 1 ? 2 : 4, start = 8 + len_bytes;
    size_t hlen = 0;
    for (size_t i = 0; i < len_bytes; i++) hlen |= (size_t)(uint8_t)bytes[8 + i] << (8 * i);
    if (bytes.size() < start + hlen) throw error(path + ": the .npy header runs past the end of the file");
    const std::string h = bytes.substr(start, hlen);
    const std::string descr = header_field(h, "descr"), order = header_field(h, "fortran_order");
    const bool f4 = descr == "'<f4'", f8 = descr == "'<f8'";
    if (!f4 && !f8) throw error(path + ": dtype " + descr + ": a steering vector is float32 or float64");
    if (order.compare(0, 5, "False") != 0) throw error(path + ": Fortran order: save it in C order");
    std::vector<int64_t> shape;
    const std::string s = header_field(h, "shape");
    for (size_t i = 1; i < s.size();) {
        const size_t j = s.find_first_of(",)", i);
        const std::string num = s.substr(i, j - i);
        if (num.find_first_not_of(' ') != std::string::npos) shape.push_back(std::stoll(num));
        if (j == std::string::npos || s[j] == ')') break;
        i = j + 1;
    }
    if (shape.empty() || shape.size() > 2 || shape.back() < 1 || shape[0] < 1)
        throw error(path + ": shape " + s + ": a steering vector is [layers][d] or one direction [d]");
    const int64_t rows = shape.size() == 2 ? shape[0] : 1, d = shape.back(), esz = f4 ? 4 : 8;
    if (bytes.size() < start + hlen + (size_t)(rows * d * esz)) throw error(path + ": the .npy data is cut short");
    if (shape.size() == 1 && npy_layer < 0)
        throw error(path + ": one direction [" + std::to_string(d) + "] without a layer: give its layer (--steer-layers L)");
    steer_vector v;
    v.d_model = (int)d;
    const char* p = bytes.data() + start + hlen;
    for (int64_t r = 0; r < rows; r++) {
        std::vector<float> row((size_t)d);
        bool nonzero = false;
        for (int64_t i = 0; i < d; i++) {
            if (f4) std::memcpy(&row[i], p + (r * d + i) * 4, 4);
            else {
                double x;
                std::memcpy(&x, p + (r * d + i) * 8, 8);
                row[i] = (float)x;
            }
            nonzero |= row[i] != 0.0f || !std::isfinite(row[i]);
        }
        if (nonzero) v.set(shape.size() == 1 ? npy_layer : (int)r, std::move(row));
    }
    check_values(path, v);
    return v;
}

void write_steer_npy(const std::string& path, const steer_vector& v) {
    const std::vector<int> layers = v.layers();
    if (layers.empty()) throw error(path + ": the vector has no direction to write");
    const int L = layers.back() + 1;
    std::vector<float> all((size_t)L * v.d_model, 0.0f);
    for (int l : layers) std::copy(v.dirs[l].begin(), v.dirs[l].end(), all.begin() + (size_t)l * v.d_model);
    write_npy(path, {L, v.d_model}, all.data());
}

// ---------------------------------------------------------------------------------------------
// By extension
// ---------------------------------------------------------------------------------------------
steer_vector read_steer_vector(const std::string& path, int npy_layer) {
    steer_vector v;
    if (ends_with(path, ".gguf")) v = read_gguf(path);
    else if (ends_with(path, ".npy")) v = read_npy(path, npy_layer);
    else throw error(path + ": a steering vector is a .gguf (llama.cpp's control vector) or a .npy");
    v.name = path.substr(path.find_last_of('/') + 1);
    return v;
}

void write_steer_vector(const std::string& path, const steer_vector& v) {
    if (ends_with(path, ".gguf")) return write_control_vector_gguf(path, v);
    if (ends_with(path, ".npy")) return write_steer_npy(path, v);
    throw error(path + ": write a steering vector as .gguf (llama.cpp's control vector) or .npy");
}

} // namespace gb
