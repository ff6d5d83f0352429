// glassbox-cli steer: a contrastive steering vector (mean resid_post of the positive prompts minus the negative
// ones, at the last token or over each prompt's positions) written as llama.cpp's control-vector GGUF or a .npy.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/export.h"
#include "analysis/steer.h"
#include "io/control_vector.h"
#include "util/text.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

// --layer L, a list (3,4) or all
std::vector<int> layers_asked(const args& a, const gb::model& m) {
    const std::string s = a.need("layer");
    std::vector<int> ls;
    if (s == "all")
        for (int l = 0; l < m.config.n_layer; l++) ls.push_back(l);
    else
        ls = gb::parse_layer_list(s, "--layer");
    for (int l : ls)
        if (l >= m.config.n_layer)
            throw usage_error("--layer " + std::to_string(l) + ": the model has layers 0.." + std::to_string(m.config.n_layer - 1));
    return ls;
}

std::vector<std::vector<int>> prompt_list(const args& a, const gb::model& m, const std::string& key) {
    std::vector<std::vector<int>> out;
    for (const std::string& p : read_prompt_lines(a.need(key), "--" + key)) out.push_back(prompt_ids(m, p, a.has("bos")));
    return out;
}

} // namespace

int cmd_steer(const args& a) {
    gb::model m = open_model(a);
    const std::string out = a.need("out");
    if (!gb::ends_with(out, ".gguf") && !gb::ends_with(out, ".npy"))
        throw usage_error("--out " + out + ": write a .gguf (llama.cpp's control vector) or a .npy");
    std::vector<int> layers = layers_asked(a, m);
    const gb::steer_position where = gb::parse_steer_position(a.get("position", "last"));
    try { // llama.cpp's format has no direction.0: "all" leaves layer 0 out, an explicit --layer 0 is a usage error
        layers = gb::storable_steer_layers(out, layers, a.get("layer") == "all");
    } catch (const gb::error& e) {
        throw usage_error(e.what());
    }
    if (layers.empty()) throw usage_error("--layer all on a one-layer model leaves no layer llama.cpp can steer; write a .npy");
    const auto pos = prompt_list(a, m, "positive"), neg = prompt_list(a, m, "negative");
    const gb::steer_vector v = gb::contrastive_vector(m, pos, neg, layers, where);
    gb::write_steer_vector(out, v);
    std::printf("%zu positive and %zu negative prompts, resid_post at the %s token%s\n", pos.size(), neg.size(),
                where == gb::STEER_LAST ? "last" : "mean over each prompt's", where == gb::STEER_LAST ? "" : "s");
    nlohmann::json norms = nlohmann::json::object();
    for (int l : v.layers()) {
        double n = 0;
        for (float x : v.dirs[l]) n += (double)x * x;
        std::printf("  layer %-3d |v| = %.4f\n", l, std::sqrt(n));
        norms[std::to_string(l)] = std::sqrt(n);
    }
    std::printf("wrote %s (%s, d = %d)\n", out.c_str(), gb::ends_with(out, ".gguf") ? "llama.cpp control vector" : "[L][d] float32",
                v.d_model);
    if (a.has("json"))
        gb::write_json(a.get("json"), {{"out", out}, {"layers", v.layers()}, {"position", a.get("position", "last")},
                                       {"positive", pos.size()}, {"negative", neg.size()}, {"d_model", v.d_model},
                                       {"norms", norms}});
    return 0;
}

} // namespace cli
