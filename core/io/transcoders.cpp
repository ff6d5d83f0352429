// Reading and writing circuit-tracer's transcoder folders (per-layer and cross-layer), and encoding with them.
#include "io/transcoders.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "io/safetensors.h"
#include "util/error.h"

namespace gb {
namespace fs = std::filesystem;

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

// The set's description from dir (config.yaml and the files present), its layers not read yet.
transcoder_set open_set(const std::string& dir, sae_arch& config_arch) {
    transcoder_set t;
    t.path = dir;
    if (!fs::is_directory(dir)) throw error("transcoders " + dir + ": not a folder");
    bool cross = false, kind_given = false;
    read_config(t, dir, cross, kind_given);
    config_arch = t.arch;
    const bool per_layer_files = fs::exists(dir + "/layer_0.safetensors");
    const bool cross_files = fs::exists(dir + "/W_enc_0.safetensors");
    if (!per_layer_files && !cross_files)
        throw error("transcoders " + dir + ": neither layer_0.safetensors (per-layer) nor W_enc_0.safetensors "
                    "(cross-layer) is there");
    if (!kind_given) cross = !per_layer_files;
    t.cross_layer = cross;
    int L = 0;
    while (fs::exists(dir + (cross ? "/W_enc_" : "/layer_") + std::to_string(L) + ".safetensors")) L++;
    if (L == 0)
        throw error("transcoders " + dir + ": config.yaml says " + (cross ? "cross_layer_transcoder" : "transcoder_set") +
                    " but " + (cross ? "W_enc_0.safetensors" : "layer_0.safetensors") + " is not there");
    t.n_layer = L;
    t.layers.resize(L);
    return t;
}

// Layer i of t read into t.layers[i] (layer 0 sets d_tc and d_model), checked.
void read_layer(transcoder_set& t, int i) {
    const std::string& dir = t.path;
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
        if (!l.threshold.empty()) l.threshold.resize(width, 0.0f);
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
