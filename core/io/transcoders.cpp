// Reading and writing circuit-tracer's transcoder folders (per-layer and cross-layer), and encoding with them.
#include "io/transcoders.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <regex>

#include "io/safetensors.h"
#include "util/error.h"
#include "util/json_util.h"

namespace gb {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::pair<std::string, std::string>> read_flat_yaml(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw error("cannot open " + path);
    std::vector<std::pair<std::string, std::string>> out;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == '-') continue;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon), value = line.substr(colon + 1);
        const size_t hash = value.find(" #");
        if (hash != std::string::npos) value.resize(hash);
        auto trim = [](std::string& s) {
            while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
            size_t i = 0;
            while (i < s.size() && std::isspace((unsigned char)s[i])) i++;
            s.erase(0, i);
        };
        trim(key);
        trim(value);
        if (value.size() >= 2 && (value[0] == '"' || value[0] == '\'') && value.back() == value[0])
            value = value.substr(1, value.size() - 2);
        out.emplace_back(key, value);
    }
    return out;
}

namespace {

struct reader {
    std::string path;
    safetensors_file f;
    explicit reader(const std::string& p) : path(p), f(open_safetensors(p)) {}
    bool has(const std::string& name) const { return f.tensors.count(name) > 0; }
    // the tensor as f32 of the shape asked (a tensor with the same element count, e.g. [1][d_tc] for [d_tc], too)
    std::vector<float> get(const std::string& name, const std::vector<int64_t>& shape) const {
        auto it = f.tensors.find(name);
        if (it == f.tensors.end()) throw error(path + ": no tensor " + name);
        std::vector<int64_t> want = shape;
        const int64_t n = std::accumulate(shape.begin(), shape.end(), (int64_t)1, std::multiplies<int64_t>());
        const int64_t have = std::accumulate(it->second.shape.begin(), it->second.shape.end(), (int64_t)1,
                                             std::multiplies<int64_t>());
        if (have == n && it->second.shape.size() != shape.size() && shape.size() == 1) want = it->second.shape;
        std::vector<float> v = tensor_f32(f, it->second, want);
        for (float x : v)
            if (!std::isfinite(x)) throw error(path + ": tensor " + name + " holds NaN or Inf");
        return v;
    }
    std::vector<int64_t> shape(const std::string& name) const {
        auto it = f.tensors.find(name);
        if (it == f.tensors.end()) throw error(path + ": no tensor " + name);
        return it->second.shape;
    }
};

std::vector<float> transposed(const std::vector<float>& w, int rows, int cols) {
    std::vector<float> t((size_t)rows * cols);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) t[(size_t)c * rows + r] = w[(size_t)r * cols + c];
    return t;
}

void read_config(transcoder_set& t, const std::string& dir, bool& cross_said, bool& kind_given) {
    const std::string path = dir + "/config.yaml";
    if (!fs::exists(path)) return;
    for (const auto& [key, value] : read_flat_yaml(path)) {
        if (key == "model_kind") {
            if (value != "transcoder_set" && value != "cross_layer_transcoder")
                throw error(path + ": model_kind " + value + " (glassbox reads transcoder_set and cross_layer_transcoder)");
            kind_given = true;
            cross_said = value == "cross_layer_transcoder";
        } else if (key == "model_name") {
            t.model_name = value;
        } else if (key == "feature_input_hook") {
            if (value == "hook_resid_mid") t.input_normed = false;
            else if (value != "mlp.hook_in" && value != "ln2.hook_normalized")
                throw error(path + ": feature_input_hook " + value +
                            " (glassbox reads mlp.hook_in, ln2.hook_normalized or hook_resid_mid)");
        } else if (key == "feature_output_hook") {
            if (value != "mlp.hook_out" && value != "hook_mlp_out")
                throw error(path + ": feature_output_hook " + value + " (glassbox reads mlp.hook_out or hook_mlp_out)");
        } else if (key == "activation_function") {
            if (value == "relu") t.arch = SAE_RELU;
            else if (value == "jump_relu" || value == "jumprelu") t.arch = SAE_JUMPRELU;
            else if (value == "topk") t.arch = SAE_TOPK;
            else throw error(path + ": activation_function " + value + " (glassbox reads relu, jump_relu, topk)");
        } else if (key == "top_k") {
            t.k = std::atoi(value.c_str());
        }
    }
}

void check_layer(const transcoder_set& t, const transcoder_layer& l, const std::string& file) {
    if (t.arch == SAE_JUMPRELU && l.threshold.empty())
        throw error(file + ": a JumpReLU set without a threshold in this layer");
}

} // namespace

namespace {

// Gemma Scope 2's config.json (path): what it says of the set into t; affine: whether it says the layers have a
// skip (-1: not said).
void read_gs2_config(transcoder_set& t, const std::string& path, int& affine, int& width) {
    affine = -1, width = 0;
    if (!fs::exists(path)) return;
    const json c = read_json_file(path);
    if (!c.is_object()) throw error(path + ": not a JSON object");
    auto str = [&](const char* key) {
        return c.contains(key) && c.at(key).is_string() ? c.at(key).get<std::string>() : std::string();
    };
    const std::string type = str("type");
    if (type == "sae")
        throw error(path + ": an SAE (type sae), not a transcoder: open it as an SAE (features --sae, the Features tab)");
    if (!type.empty() && type != "transcoder" && type != "clt")
        throw error(path + ": type " + type + " (glassbox reads Gemma Scope 2's transcoder and clt)");
    const std::string arch = str("architecture");
    if (arch == "jump_relu" || arch == "jumprelu" || arch.empty()) t.arch = SAE_JUMPRELU;
    else if (arch == "relu") t.arch = SAE_RELU;
    else throw error(path + ": architecture " + arch + " (glassbox reads jump_relu and relu)");
    // the module names after "layers.{i}." (or a CLT's, which may name no layer)
    auto point = [](const std::string& hook) {
        static const std::regex layer_re(R"(^.*layers\.(\d+|\{\w*\})\.)");
        return std::regex_replace(hook, layer_re, "");
    };
    const std::string in = str("hf_hook_point_in"), out = str("hf_hook_point_out");
    if (!in.empty()) {
        const std::string p = point(in);
        if (p != "pre_feedforward_layernorm.output" && p != "mlp.input")
            throw error(path + ": hf_hook_point_in " + in + " (glassbox reads transcoders of the MLP's input after its "
                        "norm, pre_feedforward_layernorm.output)");
        t.input_normed = true;
    }
    if (!out.empty()) {
        const std::string p = point(out);
        if (p == "post_feedforward_layernorm.output") t.output_normed = true;
        else if (p == "mlp.output" || p == "mlp.down_proj.output") t.output_normed = false;
        else
            throw error(path + ": hf_hook_point_out " + out + " (glassbox reads transcoders writing the MLP's output, "
                        "post_feedforward_layernorm.output or mlp.output)");
    }
    if (c.contains("affine_connection") && c.at("affine_connection").is_boolean()) affine = c.at("affine_connection").get<bool>();
    if (c.contains("width") && c.at("width").is_number_integer()) width = c.at("width").get<int>();
    const std::string name = str("model_name");
    if (!name.empty()) t.model_name = name;
}

// A Gemma Scope 2 per-layer set's folders: parent/layer_{i}_{variant} for i = 0, 1, ... while params.safetensors is
// there.
std::vector<std::string> gs2_layer_files(const fs::path& parent, const std::string& variant) {
    std::vector<std::string> files;
    for (int i = 0;; i++) {
        const fs::path f = parent / ("layer_" + std::to_string(i) + "_" + variant) / "params.safetensors";
        if (!fs::exists(f)) break;
        files.push_back(f.string());
    }
    return files;
}

const std::regex gs2_layer_re(R"(layer_(\d+)_(.+))");

// folder (a trailing '/' allowed) as one layer's folder of a Gemma Scope 2 per-layer set: its set's name (the
// `width_..._l0_...` after layer_{i}_), "" when it is not one (no such name, no params.safetensors).
std::string gs2_layer_variant(const fs::path& folder) {
    std::error_code ec;
    const fs::path p = fs::absolute(folder, ec).lexically_normal();
    const std::string name = p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, gs2_layer_re) || !fs::exists(folder / "params.safetensors", ec)) return "";
    return m[2].str();
}

// dir as a Gemma Scope 2 set: its files (empty: not one). A layer folder, the folder above one holding a single
// set, or a cross-layer folder.
std::vector<std::string> gs2_files(const std::string& dir, bool& cross) {
    cross = false;
    std::vector<std::string> files;
    if (fs::exists(dir + "/params_layer_0.safetensors")) {
        cross = true;
        for (int i = 0; fs::exists(dir + "/params_layer_" + std::to_string(i) + ".safetensors"); i++)
            files.push_back(dir + "/params_layer_" + std::to_string(i) + ".safetensors");
        return files;
    }
    const fs::path p = fs::absolute(fs::path(dir)).lexically_normal();
    const fs::path folder = p.has_filename() ? p : p.parent_path();
    const std::string variant = gs2_layer_variant(folder);
    if (!variant.empty()) {
        files = gs2_layer_files(folder.parent_path(), variant);
        if (files.empty())
            throw error("transcoders " + dir + ": a Gemma Scope 2 layer folder, but layer_0_" + variant +
                        " is not beside it");
        return files;
    }
    std::smatch m;
    std::vector<std::string> variants;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
        const std::string n = e.path().filename().string();
        if (e.is_directory() && std::regex_match(n, m, gs2_layer_re) && m[1].str() == "0" &&
            fs::exists(e.path() / "params.safetensors"))
            variants.push_back(m[2].str());
    }
    std::sort(variants.begin(), variants.end());
    if (variants.size() > 1) {
        std::string list;
        for (size_t i = 0; i < variants.size() && i < 4; i++) list += (i ? ", " : "") + variants[i];
        if (variants.size() > 4) list += ", ...";
        throw error("transcoders " + dir + ": " + std::to_string(variants.size()) + " Gemma Scope 2 sets are here (" +
                    list + "): open one layer's folder of the one you want, such as layer_0_" + variants[0]);
    }
    if (variants.size() == 1) files = gs2_layer_files(folder, variants[0]);
    return files;
}

// The set's description from dir (config.yaml or config.json and the files present), its layers not read yet.
transcoder_set open_set(const std::string& dir_in, sae_arch& config_arch) {
    transcoder_set t;
    t.path = dir_in;
    std::string dir = dir_in;
    if (fs::is_regular_file(dir) && fs::path(dir).filename() == "params.safetensors")
        dir = fs::path(dir).parent_path().string(); // one layer's params of a Gemma Scope 2 set
    if (!fs::is_directory(dir)) throw error("transcoders " + dir + ": not a folder");
    const bool per_layer_files = fs::exists(dir + "/layer_0.safetensors");
    const bool cross_files = fs::exists(dir + "/W_enc_0.safetensors");
    if (!per_layer_files && !cross_files) {
        bool cross = false;
        t.files = gs2_files(dir, cross);
        if (t.files.empty())
            throw error("transcoders " + dir + ": neither layer_0.safetensors (per-layer) nor W_enc_0.safetensors "
                        "(cross-layer) is there, nor a Gemma Scope 2 set (layer_{i}_.../params.safetensors, "
                        "params_layer_{i}.safetensors)");
        t.layout = TC_GEMMA_SCOPE_2;
        t.cross_layer = cross;
        t.arch = SAE_JUMPRELU;
        t.output_normed = true; // the release's transcoders write post_feedforward_layernorm.output
        int affine = -1, width = 0;
        read_gs2_config(t, (fs::path(t.files[0]).parent_path() / "config.json").string(), affine, width);
        t.gs2_affine = affine, t.gs2_width = width;
        config_arch = t.arch;
        t.n_layer = (int)t.files.size();
        t.layers.resize(t.n_layer);
        return t;
    }
    bool cross = false, kind_given = false;
    read_config(t, dir, cross, kind_given);
    config_arch = t.arch;
    if (!kind_given) cross = !per_layer_files;
    t.cross_layer = cross;
    int L = 0;
    while (fs::exists(dir + (cross ? "/W_enc_" : "/layer_") + std::to_string(L) + ".safetensors")) L++;
    if (L == 0)
        throw error("transcoders " + dir + ": config.yaml says " + (cross ? "cross_layer_transcoder" : "transcoder_set") +
                    " but " + (cross ? "W_enc_0.safetensors" : "layer_0.safetensors") + " is not there");
    t.n_layer = L;
    t.layers.resize(L);
    for (int i = 0; i < L; i++)
        t.files.push_back(dir + (cross ? "/W_enc_" : "/layer_") + std::to_string(i) + ".safetensors");
    return t;
}

// Layer i of a Gemma Scope 2 set into t.layers[i] (layer 0 sets d_tc and d_model).
void read_gs2_layer(transcoder_set& t, int i) {
    const std::string& file = t.files[i];
    transcoder_layer& l = t.layers[i];
    reader r(file);
    const std::vector<int64_t> es = r.shape("w_enc");
    if (es.size() != 2) throw error(file + ": w_enc has shape " + shape_str(es) + ", expected [d_model, d_tc]");
    if (i == 0) {
        t.d_model = (int)es[0];
        t.d_tc = (int)es[1];
        if (t.gs2_width > 0 && t.gs2_width != t.d_tc)
            throw error(file + ": w_enc has " + std::to_string(t.d_tc) + " features, config.json says width " +
                        std::to_string(t.gs2_width));
    }
    const int n = t.d_tc, d = t.d_model, L = t.n_layer;
    l.W_enc = transposed(r.get("w_enc", {d, n}), d, n); // [d][d_tc] -> [d_tc][d]
    l.b_enc = r.get("b_enc", {n});
    l.b_dec = r.get("b_dec", {d});
    if (r.has("threshold")) l.threshold = r.get("threshold", {n});
    if (r.has("affine_skip_connection")) l.skip = r.get("affine_skip_connection", {d, d}); // x A: [in][out] already
    if (t.gs2_affine == 1 && l.skip.empty())
        throw error(file + ": config.json says affine_connection but there is no affine_skip_connection");
    if (t.gs2_affine == 0 && !l.skip.empty())
        throw error(file + ": an affine_skip_connection, but config.json says affine_connection false");
    if (t.cross_layer) {
        const std::vector<float> w = r.get("w_dec", {n, L, d}); // every layer's, of which i .. L-1 are written
        l.W_dec.resize((size_t)n * (L - i) * d);
        for (int f = 0; f < n; f++)
            std::copy_n(w.begin() + ((size_t)f * L + i) * d, (size_t)(L - i) * d, l.W_dec.begin() + (size_t)f * (L - i) * d);
    } else {
        l.W_dec = r.get("w_dec", {n, d});
    }
    if (l.skip.empty() != t.layers[0].skip.empty())
        throw error(file + ": some layers have a skip connection and some do not");
    check_layer(t, l, file);
}

// Layer i of t read into t.layers[i] (layer 0 sets d_tc and d_model), checked.
void read_layer(transcoder_set& t, int i) {
    if (t.layout == TC_GEMMA_SCOPE_2) return read_gs2_layer(t, i);
    const std::string dir = fs::path(t.files[i]).parent_path().string();
    const bool cross = t.cross_layer;
    const int L = t.n_layer;
    const std::string si = std::to_string(i);
    transcoder_layer& l = t.layers[i];
    const std::string file = dir + (cross ? "/W_enc_" + si : "/layer_" + si) + ".safetensors";
    reader r(file);
    const std::string enc = cross ? "W_enc_" + si : "W_enc";
    const std::vector<int64_t> es = r.shape(enc);
    if (es.size() != 2) throw error(file + ": " + enc + " has shape " + shape_str(es) + ", expected [d_tc, d_model]");
    if (i == 0) {
        t.d_tc = (int)es[0];
        t.d_model = (int)es[1];
    }
    const int n = t.d_tc, d = t.d_model;
    l.W_enc = r.get(enc, {n, d});
    l.b_enc = r.get(cross ? "b_enc_" + si : "b_enc", {n});
    l.b_dec = r.get(cross ? "b_dec_" + si : "b_dec", {d});
    const std::string thr = cross ? "threshold_" + si : "activation_function.threshold";
    if (r.has(thr)) {
        l.threshold = r.get(thr, {n});
        if (t.arch == SAE_RELU) t.arch = SAE_JUMPRELU;
    }
    const std::string skip = cross ? "W_skip_" + si : "W_skip";
    if (r.has(skip)) {
        const std::vector<float> w = r.get(skip, {d, d});
        l.skip = cross ? w : transposed(w, d, d); // per-layer: out = x W_skip^T; cross-layer: out = x W_skip
    }
    if (cross) {
        const std::string dfile = dir + "/W_dec_" + si + ".safetensors";
        if (!fs::exists(dfile)) throw error("transcoders " + dir + ": W_dec_" + si + ".safetensors is missing");
        reader rd(dfile);
        l.W_dec = rd.get("W_dec_" + si, {n, L - i, d});
    } else {
        l.W_dec = r.get("W_dec", {n, d});
    }
    if ((int)l.skip.empty() != (int)t.layers[0].skip.empty())
        throw error(file + ": some layers have a skip connection and some do not");
    check_layer(t, l, file);
}

void check_topk(const transcoder_set& t, sae_arch config_arch) {
    if (config_arch == SAE_TOPK && t.k <= 0) throw error(t.path + "/config.yaml: activation_function topk needs top_k > 0");
}

} // namespace

transcoder_set read_transcoders(const std::string& dir) {
    sae_arch config_arch;
    transcoder_set t = open_set(dir, config_arch);
    check_topk(t, config_arch);
    for (int i = 0; i < t.n_layer; i++) read_layer(t, i);
    return t;
}

transcoder_set read_active_transcoders(const std::string& dir, const std::vector<float>& mlp_in,
                                       const std::vector<float>& resid_mid, int n, int n_layer, int d,
                                       std::vector<std::vector<int>>& kept, int& full_d_tc) {
    sae_arch config_arch;
    transcoder_set t = open_set(dir, config_arch);
    check_topk(t, config_arch);
    if (t.n_layer != n_layer)
        throw error("transcoders " + dir + ": " + std::to_string(t.n_layer) + " layers, the model has " +
                    std::to_string(n_layer));
    kept.assign(t.n_layer, {});
    std::vector<float> acts;
    int width = 1;
    for (int i = 0; i < t.n_layer; i++) {
        read_layer(t, i);
        if (t.d_model != d)
            throw error("transcoders " + dir + ": d_model " + std::to_string(t.d_model) + ", the model's is " +
                        std::to_string(d));
        const std::vector<float>& x = t.input_normed ? mlp_in : resid_mid;
        transcoder_encode(acts, t, i, x.data() + (size_t)i * n * d, n);
        const int m = t.d_tc, n_out = t.n_out(i);
        for (int f = 0; f < m; f++)
            for (int r = 0; r < n; r++)
                if (acts[(size_t)r * m + f] != 0) {
                    kept[i].push_back(f);
                    break;
                }
        // the kept rows alone
        transcoder_layer& l = t.layers[i];
        transcoder_layer c;
        for (int f : kept[i]) {
            c.W_enc.insert(c.W_enc.end(), l.W_enc.begin() + (size_t)f * d, l.W_enc.begin() + (size_t)(f + 1) * d);
            c.b_enc.push_back(l.b_enc[f]);
            if (!l.threshold.empty()) c.threshold.push_back(l.threshold[f]);
            c.W_dec.insert(c.W_dec.end(), l.W_dec.begin() + (size_t)f * n_out * d, l.W_dec.begin() + (size_t)(f + 1) * n_out * d);
        }
        c.b_dec = std::move(l.b_dec);
        c.skip = std::move(l.skip);
        l = std::move(c);
        width = std::max(width, (int)kept[i].size());
    }
    // every layer `width` wide: the padding features never fire (W_enc 0, b_enc -1: pre-activation -1)
    full_d_tc = t.d_tc;
    t.d_tc = width;
    for (int i = 0; i < t.n_layer; i++) {
        transcoder_layer& l = t.layers[i];
        const int n_out = t.n_out(i);
        l.W_enc.resize((size_t)width * d, 0.0f);
        l.b_enc.resize(width, -1.0f);
        // a JumpReLU layer where nothing fires kept no threshold either: it needs `width` of them all the same
        if (t.arch == SAE_JUMPRELU) l.threshold.resize(width, 0.0f);
        l.W_dec.resize((size_t)width * n_out * d, 0.0f);
    }
    return t;
}

void write_transcoders(const std::string& dir, const transcoder_set& t) {
    fs::create_directories(dir);
    const int n = t.d_tc, d = t.d_model, L = t.n_layer;
    {
        std::ofstream c(dir + "/config.yaml");
        if (!c) throw error("cannot write " + dir + "/config.yaml");
        c << "model_kind: " << (t.cross_layer ? "cross_layer_transcoder" : "transcoder_set") << "\n";
        if (!t.model_name.empty()) c << "model_name: " << t.model_name << "\n";
        c << "feature_input_hook: " << (t.input_normed ? "mlp.hook_in" : "hook_resid_mid") << "\n";
        c << "feature_output_hook: mlp.hook_out\n";
        if (t.arch == SAE_TOPK) c << "activation_function: topk\ntop_k: " << t.k << "\n";
        if (t.arch == SAE_JUMPRELU) c << "activation_function: jump_relu\n";
    }
    for (int i = 0; i < L; i++) {
        const std::string si = std::to_string(i);
        const transcoder_layer& l = t.layers[i];
        std::vector<st_out> ts;
        if (t.cross_layer) {
            ts.push_back({"W_enc_" + si, {n, d}, l.W_enc});
            ts.push_back({"b_enc_" + si, {n}, l.b_enc});
            ts.push_back({"b_dec_" + si, {d}, l.b_dec});
            if (!l.threshold.empty()) ts.push_back({"threshold_" + si, {n}, l.threshold});
            if (!l.skip.empty()) ts.push_back({"W_skip_" + si, {d, d}, l.skip});
            write_safetensors(dir + "/W_enc_" + si + ".safetensors", ts);
            write_safetensors(dir + "/W_dec_" + si + ".safetensors", {{"W_dec_" + si, {n, L - i, d}, l.W_dec}});
        } else {
            ts.push_back({"W_enc", {n, d}, l.W_enc});
            ts.push_back({"W_dec", {n, d}, l.W_dec});
            ts.push_back({"b_enc", {n}, l.b_enc});
            ts.push_back({"b_dec", {d}, l.b_dec});
            if (!l.threshold.empty()) ts.push_back({"activation_function.threshold", {n}, l.threshold});
            if (!l.skip.empty()) ts.push_back({"W_skip", {d, d}, transposed(l.skip, d, d)});
            write_safetensors(dir + "/layer_" + si + ".safetensors", ts);
        }
    }
}

void write_gemma_scope_2(const std::string& dir, const transcoder_set& t, const std::string& variant) {
    const int n = t.d_tc, d = t.d_model, L = t.n_layer;
    for (int i = 0; i < L; i++) {
        const transcoder_layer& l = t.layers[i];
        const std::string folder = t.cross_layer ? dir : dir + "/layer_" + std::to_string(i) + "_" + variant;
        fs::create_directories(folder);
        std::vector<st_out> ts;
        ts.push_back({"w_enc", {d, n}, transposed(l.W_enc, n, d)});
        ts.push_back({"b_enc", {n}, l.b_enc});
        ts.push_back({"b_dec", {d}, l.b_dec});
        if (!l.threshold.empty()) ts.push_back({"threshold", {n}, l.threshold});
        if (!l.skip.empty()) ts.push_back({"affine_skip_connection", {d, d}, l.skip});
        if (t.cross_layer) { // [d_tc][L][d], the layers below i zero
            std::vector<float> w((size_t)n * L * d, 0.0f);
            for (int f = 0; f < n; f++)
                std::copy_n(l.W_dec.begin() + (size_t)f * (L - i) * d, (size_t)(L - i) * d, w.begin() + ((size_t)f * L + i) * d);
            ts.push_back({"w_dec", {n, L, d}, std::move(w)});
        } else {
            ts.push_back({"w_dec", {n, d}, l.W_dec});
        }
        write_safetensors(folder + (t.cross_layer ? "/params_layer_" + std::to_string(i) : std::string("/params")) +
                              ".safetensors", ts);
        if (t.cross_layer && i > 0) continue;
        json c;
        const std::string at = t.cross_layer ? "{layer}" : std::to_string(i);
        c["hf_hook_point_in"] = "model.layers." + at + ".pre_feedforward_layernorm.output";
        c["hf_hook_point_out"] = "model.layers." + at + (t.output_normed ? ".post_feedforward_layernorm.output" : ".mlp.output");
        c["width"] = n;
        c["model_name"] = t.model_name;
        c["architecture"] = t.arch == SAE_RELU ? "relu" : "jump_relu";
        c["affine_connection"] = !l.skip.empty();
        c["type"] = t.cross_layer ? "clt" : "transcoder";
        std::ofstream f(folder + "/config.json");
        if (!(f << c.dump(2) << "\n")) throw error("cannot write " + folder + "/config.json");
    }
}

bool is_transcoder_folder(const std::string& dir) {
    std::error_code ec;
    const fs::path p(dir);
    if (!fs::is_directory(p, ec)) return false;
    if (fs::exists(p / "layer_0.safetensors", ec) || fs::exists(p / "W_enc_0.safetensors", ec) ||
        fs::exists(p / "params_layer_0.safetensors", ec))
        return true;
    if (gs2_layer_variant(p).empty()) return false;
    try { // a Gemma Scope 2 SAE's folder is named the same way
        const json c = read_json_file((p / "config.json").string());
        return c.is_object() && c.contains("type") && c.at("type") == "transcoder";
    } catch (const std::exception&) {
        return false;
    }
}

void write_random_transcoders(const std::string& dir, int n_layer, int d, int d_tc, float bias, bool skip,
                              const std::string& dtype, uint64_t seed) {
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
        throw error("random transcoders: dtype " + dtype + " (F32, F16 or BF16)");
    const st_dtype dt = dtype == "F16" ? ST_F16 : dtype == "BF16" ? ST_BF16 : ST_F32;
    fs::create_directories(dir);
    {
        std::ofstream c(dir + "/config.yaml");
        if (!c) throw error("cannot write " + dir + "/config.yaml");
        c << "model_kind: transcoder_set\nmodel_name: random\nfeature_input_hook: mlp.hook_in\n"
             "feature_output_hook: mlp.hook_out\n";
    }
    const float enc = 1.0f / std::sqrt((float)d), dec = 0.5f / std::sqrt((float)d), sk = 0.3f / std::sqrt((float)d);
    for (int l = 0; l < n_layer; l++) {
        std::mt19937_64 rng(seed * 1000003 + l);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        auto draw = [&](size_t n, float scale, float mean) {
            std::vector<float> v(n);
            for (float& x : v) x = mean + scale * nd(rng);
            return v;
        };
        std::vector<st_out> ts;
        ts.push_back({"W_enc", {d_tc, d}, draw((size_t)d_tc * d, enc, 0), dt});
        ts.push_back({"W_dec", {d_tc, d}, draw((size_t)d_tc * d, dec, 0), dt});
        ts.push_back({"b_enc", {d_tc}, draw(d_tc, 0.1f, bias), ST_F32});
        ts.push_back({"b_dec", {d}, draw(d, 0.05f, 0), ST_F32});
        if (skip) ts.push_back({"W_skip", {d, d}, draw((size_t)d * d, sk, 0), dt});
        write_safetensors(dir + "/layer_" + std::to_string(l) + ".safetensors", ts);
    }
}

void transcoder_encode(std::vector<float>& acts, const transcoder_set& t, int layer, const float* x, int n) {
    const int d = t.d_model, m = t.d_tc;
    const transcoder_layer& l = t.layers[layer];
    acts.assign((size_t)n * m, 0.0f);
    // pre [n][m] in double, each element summed over i in order (b + w0 x0 + w1 x1 + ...), as a plain loop would;
    // R rows at a time, x transposed to xt [d][R] so that the rows are the vector lanes, threads over features
    constexpr int R = 16;
    std::vector<double> pre((size_t)n * m);
    for (int r0 = 0; r0 < n; r0 += R) {
        const int nr = std::min(R, n - r0);
        std::vector<double> xt((size_t)d * R, 0.0);
        for (int r = 0; r < nr; r++)
            for (int i = 0; i < d; i++) xt[(size_t)i * R + r] = x[(size_t)(r0 + r) * d + i];
#pragma omp parallel for schedule(static)
        for (int f = 0; f < m; f++) {
            const float* w = l.W_enc.data() + (size_t)f * d;
            double acc[R];
            for (int r = 0; r < R; r++) acc[r] = l.b_enc[f];
            for (int i = 0; i < d; i++) {
                const double wi = w[i];
                const double* xi = xt.data() + (size_t)i * R;
                for (int r = 0; r < R; r++) acc[r] += wi * xi[r];
            }
            for (int r = 0; r < nr; r++) pre[(size_t)(r0 + r) * m + f] = acc[r];
        }
    }
    std::vector<int> ids;
    for (int r = 0; r < n; r++) {
        const double* p = pre.data() + (size_t)r * m;
        float* a = acts.data() + (size_t)r * m;
        if (t.arch == SAE_TOPK) {
            ids.resize(m);
            std::iota(ids.begin(), ids.end(), 0);
            const int k = std::min(t.k, m);
            std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                              [&](int u, int v) { return p[u] > p[v] || (p[u] == p[v] && u < v); });
            for (int j = 0; j < k; j++) a[ids[j]] = (float)std::max(0.0, p[ids[j]]);
        } else if (t.arch == SAE_JUMPRELU) {
            for (int f = 0; f < m; f++) a[f] = p[f] > l.threshold[f] && p[f] > 0 ? (float)p[f] : 0.0f;
        } else {
            for (int f = 0; f < m; f++) a[f] = (float)std::max(0.0, p[f]);
        }
    }
}

} // namespace gb
