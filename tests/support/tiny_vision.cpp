// Tiny image classifiers in HF layout and their double-precision reference (see tiny_vision.h).
#include "tiny_vision.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "io/safetensors.h"

namespace {

// Logical key -> HF name. Keys: cls dist pos patch.{w,b}; L<l>.{ln1,q,k,v,o,ln2,up,down}.{w,b}; ln.{w,b};
// head.{w,b} dhead.{w,b}
std::string hf_name(const vision_spec& s, const std::string& key) {
    const std::string p = s.family + ".";
    const std::string wb = key.back() == 'w' ? "weight" : "bias";
    const std::string part = key.substr(0, key.rfind('.'));
    if (key == "cls") return p + "embeddings.cls_token";
    if (key == "dist") return p + "embeddings.distillation_token";
    if (key == "pos") return p + "embeddings.position_embeddings";
    if (part == "patch") return p + "embeddings.patch_embeddings.projection." + wb;
    if (part == "ln") return p + "layernorm." + wb;
    if (part == "head") return (s.family == "deit" && s.teacher ? "cls_classifier." : "classifier.") + wb;
    if (part == "dhead") return "distillation_classifier." + wb;
    if (key[0] == 'L') {
        const size_t dot = key.find('.');
        const std::string l = key.substr(1, dot - 1), what = key.substr(dot + 1, key.rfind('.') - dot - 1);
        static const std::map<std::string, std::string> n = {
            {"ln1", "layernorm_before"}, {"q", "attention.attention.query"}, {"k", "attention.attention.key"},
            {"v", "attention.attention.value"}, {"o", "attention.output.dense"}, {"ln2", "layernorm_after"},
            {"up", "intermediate.dense"}, {"down", "output.dense"}};
        return p + "encoder.layer." + l + "." + n.at(what) + "." + wb;
    }
    throw std::runtime_error("tiny_vision: no HF name for " + key);
}

std::string lk(const std::string& k, int l) { return "L" + std::to_string(l) + "." + k; }

} // namespace

const std::vector<float>& tiny_vision::at(const std::string& name) const {
    auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("tiny_vision: no tensor " + name);
    return it->second;
}

tiny_vision write_tiny_vision(const std::string& dir, const vision_spec& s) {
    tiny_vision m;
    m.dir = dir;
    m.spec = s;
    m.n_prefix = s.family == "deit" ? 2 : 1;
    const int d = s.d_model, ff = s.d_ff, V = s.labels, G = s.image / s.patch, T = m.n_prefix + G * G;
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float sd, float mean = 0) {
        std::vector<float> v(n);
        for (float& x : v) x = mean + sd * nd(rng);
        return v;
    };
    std::vector<gb::st_out> out;
    auto add = [&](const std::string& key, std::vector<int64_t> shape, std::vector<float> v) {
        out.push_back({hf_name(s, key), shape, v, gb::ST_F32});
        m.w[key] = std::move(v);
    };
    add("cls", {1, 1, d}, rnd(d, 0.5f));
    if (m.n_prefix > 1) add("dist", {1, 1, d}, rnd(d, 0.5f));
    add("pos", {1, T, d}, rnd((size_t)T * d, 0.5f));
    const int cpp = s.channels * s.patch * s.patch;
    add("patch.w", {d, s.channels, s.patch, s.patch}, rnd((size_t)d * cpp, s.std));
    add("patch.b", {d}, rnd(d, 0.1f));
    for (int l = 0; l < s.n_layer; l++) {
        add(lk("ln1.w", l), {d}, rnd(d, 0.1f, 1.0f));
        add(lk("ln1.b", l), {d}, rnd(d, 0.1f));
        for (const char* k : {"q", "k", "v", "o"}) {
            add(lk(std::string(k) + ".w", l), {d, d}, rnd((size_t)d * d, s.std));
            add(lk(std::string(k) + ".b", l), {d}, rnd(d, 0.1f));
        }
        add(lk("ln2.w", l), {d}, rnd(d, 0.1f, 1.0f));
        add(lk("ln2.b", l), {d}, rnd(d, 0.1f));
        add(lk("up.w", l), {ff, d}, rnd((size_t)ff * d, s.std));
        add(lk("up.b", l), {ff}, rnd(ff, 0.1f));
        add(lk("down.w", l), {d, ff}, rnd((size_t)d * ff, s.std));
        add(lk("down.b", l), {d}, rnd(d, 0.1f));
    }
    add("ln.w", {d}, rnd(d, 0.1f, 1.0f));
    add("ln.b", {d}, rnd(d, 0.1f));
    if (s.with_head) add("head.w", {V, d}, rnd((size_t)V * d, s.std));
    if (s.with_head) add("head.b", {V}, rnd(V, 0.5f));
    if (s.family == "deit" && s.teacher && s.with_head) {
        add("dhead.w", {V, d}, rnd((size_t)V * d, s.std));
        add("dhead.b", {V}, rnd(V, 0.5f));
    }
    std::filesystem::create_directories(dir);
    gb::write_safetensors(dir + "/model.safetensors", out);
    nlohmann::json c;
    c["model_type"] = s.family;
    c["architectures"] = {s.family == "vit" ? "ViTForImageClassification"
                          : s.teacher        ? "DeiTForImageClassificationWithTeacher"
                                             : "DeiTForImageClassification"};
    c["num_hidden_layers"] = s.n_layer, c["num_attention_heads"] = s.n_head, c["hidden_size"] = d;
    c["intermediate_size"] = ff, c["hidden_act"] = "gelu", c["layer_norm_eps"] = 1e-12;
    c["image_size"] = s.image, c["patch_size"] = s.patch, c["num_channels"] = s.channels, c["qkv_bias"] = true;
    for (int i = 0; i < V; i++) c["id2label"][std::to_string(i)] = "label" + std::to_string(i);
    std::ofstream(dir + "/config.json") << c.dump(1);
    nlohmann::json p;
    p["do_resize"] = true, p["size"] = {{"height", s.image}, {"width", s.image}}, p["resample"] = 2;
    p["do_rescale"] = true, p["rescale_factor"] = 1.0 / 255, p["do_normalize"] = true;
    p["image_mean"] = {0.5, 0.5, 0.5}, p["image_std"] = {0.5, 0.5, 0.5};
    std::ofstream(dir + "/preprocessor_config.json") << p.dump(1);
    return m;
}

std::vector<float> random_pixels(const vision_spec& s, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> px((size_t)s.channels * s.image * s.image);
    for (float& v : px) v = u(rng);
    return px;
}

ref_trace reference_vision(const tiny_vision& m, const std::vector<float>& pixels, const gb::ablation& ab,
                           const ref_options& opt) {
    const vision_spec& s = m.spec;
    const int d = s.d_model, H = s.n_head, dh = d / H, L = s.n_layer, V = s.labels, ff = s.d_ff;
    const int G = s.image / s.patch, P = s.patch, S = s.image, C = s.channels, n = m.n_prefix + G * G;
    const double eps = 1e-12;
    using vec = std::vector<double>;
    auto W = [&](const std::string& k, int l) -> const std::vector<float>& { return m.at(lk(k, l)); };
    ref_trace r;
    ref_points at(r, opt, L, n, d, dh);
    auto layernorm = [&](const vec& v, const std::vector<float>& g, const std::vector<float>& b, bool off) {
        return ref_layernorm(v, g, b, n, d, eps, off);
    };
    auto linear = [&](const std::vector<float>& w, const std::vector<float>& b, const vec& v, int out, int in) {
        return ref_linear(w, b, v, n, out, in);
    };

    // embeddings: the P-strided convolution evaluated directly, per output channel and patch
    vec x((size_t)n * d);
    const std::vector<float>& k = m.at("patch.w");
    for (int i = 0; i < d; i++) {
        x[i] = m.at("cls")[i];
        if (m.n_prefix > 1) x[(size_t)d + i] = m.at("dist")[i];
    }
    for (int gr = 0; gr < G; gr++)
        for (int gc = 0; gc < G; gc++)
            for (int o = 0; o < d; o++) {
                double acc = m.at("patch.b")[o];
                for (int ch = 0; ch < C; ch++)
                    for (int y = 0; y < P; y++)
                        for (int xx = 0; xx < P; xx++)
                            acc += (double)k[(((size_t)o * C + ch) * P + y) * P + xx] *
                                   pixels[((size_t)ch * S + gr * P + y) * S + gc * P + xx];
                x[(size_t)(m.n_prefix + gr * G + gc) * d + o] = acc;
            }
    for (size_t i = 0; i < x.size(); i++) x[i] += m.at("pos")[i];
    at.at(gb::HOOK_RESID_PRE, 0, x);
    for (int l = 0; l < L; l++) {
        const bool no_norm = ab.no_layernorm.covers(l), no_res = ab.no_residual.covers(l), no_attn = ab.no_attention.covers(l);
        if (l > 0) at.at(gb::HOOK_RESID_PRE, l, x);
        vec h = layernorm(x, W("ln1.w", l), W("ln1.b", l), no_norm);
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec q = linear(W("q.w", l), W("q.b", l), h, d, d), kk = linear(W("k.w", l), W("k.b", l), h, d, d),
            v = linear(W("v.w", l), W("v.b", l), h, d, d);
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, kk);
        at.at(gb::HOOK_V, l, v);
        vec pattern = ref_full_pattern(q, kk, n, H, dh);
        at.at(gb::HOOK_PATTERN, l, pattern);
        vec z = ref_pattern_values(pattern, v, n, H, dh, l, ab);
        at.at(gb::HOOK_Z, l, z);
        const std::vector<float>& wo = W("o.w", l);
        vec head_out = ref_head_outputs(wo, z, n, H, dh, d);
        at.at(gb::HOOK_HEAD_OUT, l, head_out);
        vec a = linear(wo, W("o.b", l), z, d, d);
        if (no_attn) std::fill(a.begin(), a.end(), 0.0);
        at.at(gb::HOOK_ATTN_OUT, l, a);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        at.at(gb::HOOK_RESID_MID, l, x);
        h = layernorm(x, W("ln2.w", l), W("ln2.b", l), no_norm);
        at.at(gb::HOOK_MLP_IN, l, h);
        vec u = linear(W("up.w", l), W("up.b", l), h, ff, d);
        for (double& e : u) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
        at.at(gb::HOOK_MLP_POST, l, u);
        vec o = linear(W("down.w", l), W("down.b", l), u, d, ff);
        at.at(gb::HOOK_MLP_OUT, l, o);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? o[i] : x[i] + o[i];
        at.at(gb::HOOK_RESID_POST, l, x);
    }
    vec f = layernorm(x, m.at("ln.w"), m.at("ln.b"), ab.no_layernorm.covers_all(L));
    at.at(gb::HOOK_FINAL_NORM, L, f);
    vec logits = linear(m.at("head.w"), m.at("head.b"), f, V, d);
    if (s.family == "deit" && s.teacher) { // HF's prediction: the two heads' average
        const std::vector<float>& dw = m.at("dhead.w");
        for (int c = 0; c < V; c++) {
            double acc = m.at("dhead.b")[c];
            for (int i = 0; i < d; i++) acc += (double)dw[(size_t)c * d + i] * f[(size_t)d + i];
            logits[c] = 0.5 * (logits[c] + acc);
        }
    }
    at.at(gb::HOOK_LOGITS, L, logits);
    at.finish(H);
    return r;
}
