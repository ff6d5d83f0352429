// Reading and writing SAEs and transcoders: SAELens's cfg.json + safetensors, Gemma Scope's params.npz.
#include "io/sae.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/npz.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "util/json_util.h"
#include "util/npy.h"

namespace gb {
namespace fs = std::filesystem;
using nlohmann::json;

const char* sae_arch_name(sae_arch a) {
    switch (a) {
    case SAE_RELU: return "standard";
    case SAE_TOPK: return "topk";
    case SAE_JUMPRELU: return "jumprelu";
    }
    return "?";
}

void map_hook_name(const std::string& hook, std::string& point, int& layer) {
    static const std::regex re(R"(blocks\.(\d+)\.(.+))");
    std::smatch m;
    const char* known = "blocks.L.hook_resid_pre, hook_resid_mid, hook_resid_post, hook_attn_out, hook_mlp_out, "
                        "hook_mlp_in, ln1.hook_normalized, ln2.hook_normalized, attn.hook_z, mlp.hook_post";
    if (!std::regex_match(hook, m, re) || m[1].length() > 6)
        throw error("SAE hook " + hook + ": glassbox has no such point (it reads " + known + ")");
    layer = std::stoi(m[1]);
    static const std::vector<std::pair<std::string, std::string>> names = {
        {"hook_resid_pre", "resid_pre"}, {"hook_resid_mid", "resid_mid"}, {"hook_resid_post", "resid_post"},
        {"hook_attn_out", "attn_out"},   {"hook_mlp_out", "mlp_out"},     {"hook_mlp_in", "resid_mid"},
        {"ln1.hook_normalized", "attn_in"}, {"ln2.hook_normalized", "mlp_in"}, {"attn.hook_z", "z"},
        {"mlp.hook_post", "mlp_post"}};
    for (const auto& n : names)
        if (m[2] == n.first) {
            point = n.second;
            return;
        }
    throw error("SAE hook " + hook + ": glassbox has no such point (it reads " + known + ")");
}

namespace {

// cfg's key, at the top or (SAELens 6) under metadata; null when neither has it.
json cfg_get(const json& cfg, const std::string& key) {
    if (cfg.contains(key)) return cfg[key];
    if (cfg.contains("metadata") && cfg["metadata"].is_object() && cfg["metadata"].contains(key)) return cfg["metadata"][key];
    return nullptr;
}

bool truthy(const json& v) { return v.is_boolean() ? v.get<bool>() : (v.is_number() ? v.get<double>() != 0 : false); }

// Architecture, k, hooks and the options of cfg into s; refuses what we do not implement.
void read_cfg(sae& s, const json& cfg, const std::string& file) {
    auto refuse = [&](const std::string& what) { throw error(file + ": " + what + " is not supported"); };
    const json arch = cfg_get(cfg, "architecture"), act = cfg_get(cfg, "activation_fn_str").is_null()
                                                             ? cfg_get(cfg, "activation_fn") : cfg_get(cfg, "activation_fn_str");
    const std::string a = arch.is_string() ? arch.get<std::string>() : "";
    const std::string f = act.is_string() ? act.get<std::string>() : "relu";
    if (a == "transcoder" || a == "jumprelu_transcoder") s.transcoder = true;
    if (a == "jumprelu" || a == "jumprelu_transcoder") s.arch = SAE_JUMPRELU;
    else if (a == "topk" || (a.empty() && f == "topk")) s.arch = SAE_TOPK;
    else if (a == "standard" || a == "transcoder" || a.empty()) {
        if (f != "relu") refuse("activation function " + f);
        s.arch = SAE_RELU;
    } else refuse("architecture " + a);
    if (s.arch == SAE_TOPK) {
        json k = cfg_get(cfg, "k");
        const json kw = cfg_get(cfg, "activation_fn_kwargs");
        if (k.is_null() && kw.is_object() && kw.contains("k")) k = kw["k"];
        if (!k.is_number_integer() || k.get<long>() < 1) throw error(file + ": a TopK SAE needs k (a positive integer)");
        s.k = k.get<int>();
    }
    const json norm = cfg_get(cfg, "normalize_activations");
    if (!norm.is_null() && !(norm.is_string() && norm.get<std::string>() == "none"))
        refuse("normalize_activations " + (norm.is_string() ? norm.get<std::string>() : norm.dump()) + " (only none)");
    if (truthy(cfg_get(cfg, "rescale_acts_by_decoder_norm"))) refuse("rescale_acts_by_decoder_norm");
    if (truthy(cfg_get(cfg, "finetuning_scaling_factor"))) refuse("finetuning_scaling_factor");
    if (!cfg_get(cfg, "hook_head_index").is_null()) refuse("hook_head_index (an SAE on one head)");
    s.apply_b_dec_to_input = truthy(cfg_get(cfg, "apply_b_dec_to_input"));
    if (s.transcoder && s.apply_b_dec_to_input) refuse("apply_b_dec_to_input on a transcoder");
    const json hook = cfg_get(cfg, "hook_name");
    if (!hook.is_string()) throw error(file + ": no hook_name");
    s.hook_name = hook.get<std::string>();
    map_hook_name(s.hook_name, s.hook_in, s.layer);
    const json reshape = cfg_get(cfg, "reshape_activations");
    if (reshape.is_string() && reshape.get<std::string>() != "none" &&
        !(reshape.get<std::string>() == "hook_z" && s.hook_in == "z"))
        refuse("reshape_activations " + reshape.get<std::string>());
    s.hook_out = s.hook_in;
    if (s.transcoder) {
        const json out = cfg_get(cfg, "hook_name_out");
        if (!out.is_string()) throw error(file + ": a transcoder needs hook_name_out");
        int lo = 0;
        map_hook_name(out.get<std::string>(), s.hook_out, lo);
        if (lo != s.layer) throw error(file + ": a transcoder from layer " + std::to_string(s.layer) + " to " + std::to_string(lo) + " is not supported (same layer only)");
    }
    const json mn = cfg_get(cfg, "model_name");
    if (mn.is_string()) s.model_name = mn.get<std::string>();
    for (const char* key : {"d_in", "d_sae", "d_out"}) {
        const json v = cfg_get(cfg, key);
        if (!v.is_null() && !v.is_number_integer()) throw error(file + ": " + key + " is not an integer");
    }
    s.d_in = cfg_get(cfg, "d_in").is_null() ? 0 : cfg_get(cfg, "d_in").get<int>();
    s.d_sae = cfg_get(cfg, "d_sae").is_null() ? 0 : cfg_get(cfg, "d_sae").get<int>();
    s.d_out = cfg_get(cfg, "d_out").is_null() ? 0 : cfg_get(cfg, "d_out").get<int>();
}

// The tensors by name (W_enc, b_enc, W_dec, b_dec, threshold) checked against each other and cfg's sizes.
using tensor_get = std::function<bool(const std::string& name, std::vector<int64_t>& shape, std::vector<float>& data)>;

void read_tensors(sae& s, const tensor_get& get, const std::string& file) {
    std::vector<int64_t> sh;
    auto need = [&](const char* name, std::vector<float>& into) {
        if (!get(name, sh, into)) throw error(file + ": missing tensor " + name);
        return sh;
    };
    const std::vector<int64_t> we = need("W_enc", s.W_enc);
    if (we.size() != 2) throw error(file + ": W_enc is " + shape_str(we) + ", expected [d_in, d_sae]");
    const int d_in = (int)we[0], d_sae = (int)we[1];
    if ((s.d_in && s.d_in != d_in) || (s.d_sae && s.d_sae != d_sae))
        throw error(file + ": W_enc is " + shape_str(we) + ", cfg says d_in " + std::to_string(s.d_in) + ", d_sae " + std::to_string(s.d_sae));
    const std::vector<int64_t> wd = need("W_dec", s.W_dec);
    if (wd.size() != 2 || wd[0] != d_sae) throw error(file + ": W_dec is " + shape_str(wd) + ", expected [" + std::to_string(d_sae) + ", d_out]");
    const int d_out = (int)wd[1];
    if ((!s.transcoder && d_out != d_in) || (s.d_out && s.d_out != d_out))
        throw error(file + ": W_dec is " + shape_str(wd) + ", expected [" + std::to_string(d_sae) + ", " +
                    std::to_string(s.transcoder ? s.d_out : d_in) + "]");
    s.d_in = d_in, s.d_sae = d_sae, s.d_out = d_out;
    auto vec = [&](const char* name, std::vector<float>& into, int n) {
        const std::vector<int64_t> v = need(name, into);
        if (v.size() != 1 || v[0] != n) throw error(file + ": " + name + " is " + shape_str(v) + ", expected [" + std::to_string(n) + "]");
    };
    vec("b_enc", s.b_enc, d_sae);
    vec("b_dec", s.b_dec, d_out);
    if (s.arch == SAE_JUMPRELU) {
        std::vector<float> log_t;
        if (get("threshold", sh, s.threshold)) vec("threshold", s.threshold, d_sae);
        else if (get("log_threshold", sh, log_t)) {
            vec("log_threshold", s.threshold, d_sae);
            for (float& t : s.threshold) t = std::exp(t);
        } else throw error(file + ": missing tensor threshold (a JumpReLU SAE)");
    }
    if (s.arch == SAE_TOPK && s.k > d_sae) throw error(file + ": k " + std::to_string(s.k) + " is more than d_sae " + std::to_string(d_sae));
    for (const auto* t : {&s.W_enc, &s.b_enc, &s.W_dec, &s.b_dec, &s.threshold})
        for (float x : *t)
            if (!std::isfinite(x)) throw error(file + ": a weight is NaN or infinite");
}

// The tensors from a safetensors file (SAELens's sae_weights.safetensors, Gemma Scope's params.safetensors).
void read_safetensors_tensors(sae& s, const std::string& file) {
    const safetensors_file st = open_safetensors(file);
    read_tensors(s, [&](const std::string& name, std::vector<int64_t>& shape, std::vector<float>& data) {
        auto it = st.tensors.find(name);
        if (it == st.tensors.end()) return false;
        shape = it->second.shape;
        data = tensor_f32(st, it->second, shape);
        return true;
    }, file);
}

sae read_saelens(const std::string& dir) {
    sae s;
    s.path = dir, s.format = "saelens";
    const std::string cfg_path = dir + "/cfg.json", st_path = dir + "/sae_weights.safetensors";
    try {
        read_cfg(s, read_json_file(cfg_path), cfg_path);
    } catch (const json::exception& e) {
        throw error(cfg_path + ": " + e.what());
    }
    if (!fs::exists(st_path)) throw error(dir + ": no sae_weights.safetensors beside cfg.json");
    read_safetensors_tensors(s, st_path);
    return s;
}

// Gemma Scope names its SAEs by where they sit: gemma-scope-2b-pt-res/layer_20/width_16k/average_l0_71.
void hook_from_path(sae& s, const std::string& path) {
    // the folders that name the release: one with "gemma-scope" in it (a download's folder or the hub cache's
    // models--google--gemma-scope-...), else the three above layer_N (ORG/NAME, or the cache's snapshot levels);
    // never the rest of the path, where a folder of the user's own may say "transcoder"
    static const std::regex layer_re(R"(layer_(\d{1,5}))");
    std::vector<std::string> parts;
    for (const fs::path& part : fs::path(path)) parts.push_back(part.string());
    int at = -1;
    std::smatch m;
    for (int i = 0; i < (int)parts.size(); i++)
        if (std::regex_match(parts[i], m, layer_re)) at = i;
    if (at < 0)
        throw error(path + ": cannot tell the SAE's hook point (no cfg.json with hook_name beside it, no layer_N in the path)");
    const std::string L = parts[at].substr(6);
    std::string release;
    for (int i = 0; i < at; i++)
        if (parts[i].find("gemma-scope") != std::string::npos) release += parts[i] + "/";
    if (release.empty())
        for (int i = std::max(0, at - 3); i < at; i++) release += parts[i] + "/";
    if (release.find("transcoder") != std::string::npos) {
        s.transcoder = true;
        s.hook_name = "blocks." + L + ".ln2.hook_normalized";
        s.hook_in = "mlp_in", s.hook_out = "mlp_out";
    } else if (release.find("-res") != std::string::npos) s.hook_name = "blocks." + L + ".hook_resid_post";
    else if (release.find("-mlp") != std::string::npos) s.hook_name = "blocks." + L + ".hook_mlp_out";
    else if (release.find("-att") != std::string::npos) s.hook_name = "blocks." + L + ".attn.hook_z";
    else throw error(path + ": cannot tell the SAE's hook point (no cfg.json with hook_name beside it; the folders above "
                            "layer_" + L + " name none of -res, -mlp, -att, transcoders)");
    if (!s.transcoder) map_hook_name(s.hook_name, s.hook_in, s.layer), s.hook_out = s.hook_in;
    else s.layer = std::stoi(L);
}

// params.npz or params.safetensors: JumpReLU, no cfg.json of its own (one beside it is read for the hook).
sae read_gemma_scope(const std::string& file) {
    sae s;
    s.path = file, s.format = "gemma-scope";
    s.arch = SAE_JUMPRELU;
    const std::string cfg_path = (fs::path(file).parent_path() / "cfg.json").string();
    if (fs::exists(cfg_path)) {
        json cfg = read_json_file(cfg_path);
        if (!cfg_get(cfg, "architecture").is_string()) cfg["architecture"] = "jumprelu";
        read_cfg(s, cfg, cfg_path);
    } else hook_from_path(s, fs::absolute(file).string());
    if (file.size() > 12 && file.compare(file.size() - 12, 12, ".safetensors") == 0) {
        read_safetensors_tensors(s, file);
        return s;
    }
    const std::map<std::string, npy_array> arrays = read_npz(file);
    read_tensors(s, [&](const std::string& name, std::vector<int64_t>& shape, std::vector<float>& data) {
        auto it = arrays.find(name);
        if (it == arrays.end()) return false;
        shape = it->second.shape;
        data = it->second.data;
        return true;
    }, file);
    return s;
}

} // namespace

sae read_sae(const std::string& path) {
    if (fs::is_directory(path)) {
        if (fs::exists(path + "/cfg.json") && fs::exists(path + "/sae_weights.safetensors")) return read_saelens(path);
        if (fs::exists(path + "/params.npz")) return read_gemma_scope(path + "/params.npz");
        if (fs::exists(path + "/params.safetensors")) return read_gemma_scope(path + "/params.safetensors");
        if (fs::exists(path + "/cfg.json")) return read_saelens(path);
        throw error(path + ": not an SAE folder (no cfg.json + sae_weights.safetensors, no params.npz or params.safetensors)");
    }
    if (!fs::exists(path)) throw error("cannot open SAE " + path + ": no such file or folder");
    if ((path.size() > 4 && path.compare(path.size() - 4, 4, ".npz") == 0) ||
        (path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0))
        return read_gemma_scope(path);
    throw error(path + ": not an SAE (a SAELens folder, a Gemma Scope params.npz or params.safetensors or its folder)");
}

void write_sae_saelens(const std::string& dir, const sae& s) {
    make_dir(dir);
    json cfg = {{"architecture", s.transcoder ? (s.arch == SAE_JUMPRELU ? "jumprelu_transcoder" : "transcoder") : sae_arch_name(s.arch)},
                {"d_in", s.d_in}, {"d_sae", s.d_sae}, {"dtype", "float32"}, {"device", "cpu"},
                {"apply_b_dec_to_input", s.apply_b_dec_to_input}, {"normalize_activations", "none"},
                {"hook_name", s.hook_name}, {"hook_head_index", nullptr}, {"model_name", s.model_name},
                {"activation_fn_str", s.arch == SAE_TOPK ? "topk" : "relu"}};
    if (s.arch == SAE_TOPK) cfg["k"] = s.k, cfg["activation_fn_kwargs"] = {{"k", s.k}};
    if (s.transcoder) {
        cfg["d_out"] = s.d_out;
        cfg["hook_name_out"] = "blocks." + std::to_string(s.layer) + ".hook_" + s.hook_out;
    }
    std::ofstream f(dir + "/cfg.json");
    f << cfg.dump(2) << "\n";
    if (!f) throw error("cannot write " + dir + "/cfg.json");
    std::vector<st_out> t = {{"W_enc", {s.d_in, s.d_sae}, s.W_enc}, {"b_enc", {s.d_sae}, s.b_enc},
                             {"W_dec", {s.d_sae, s.d_out}, s.W_dec}, {"b_dec", {s.d_out}, s.b_dec}};
    if (s.arch == SAE_JUMPRELU) t.push_back({"threshold", {s.d_sae}, s.threshold});
    write_safetensors(dir + "/sae_weights.safetensors", t);
}

void write_sae_npz(const std::string& dir, const sae& s, bool safetensors) {
    make_dir(dir);
    if (safetensors) {
        write_safetensors(dir + "/params.safetensors", {{"W_enc", {s.d_in, s.d_sae}, s.W_enc}, {"b_enc", {s.d_sae}, s.b_enc},
                                                        {"W_dec", {s.d_sae, s.d_out}, s.W_dec}, {"b_dec", {s.d_out}, s.b_dec},
                                                        {"threshold", {s.d_sae}, s.threshold}});
        return;
    }
    std::map<std::string, npy_array> a = {{"W_enc", {{s.d_in, s.d_sae}, s.W_enc}}, {"b_enc", {{s.d_sae}, s.b_enc}},
                                          {"W_dec", {{s.d_sae, s.d_out}, s.W_dec}}, {"b_dec", {{s.d_out}, s.b_dec}},
                                          {"threshold", {{s.d_sae}, s.threshold}}};
    write_npz(dir + "/params.npz", a);
}

} // namespace gb
