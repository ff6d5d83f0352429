// The steering options run, generate and steer-sweep share, and reading the prompt files of steer.
#include <fstream>
#include <sstream>

#include "args.h"
#include "io/control_vector.h"

namespace cli {

gb::steering parse_steering(const args& a, const gb::model& m) {
    gb::steering s;
    if (!a.has("steer")) {
        for (const char* o : {"steer-scale", "steer-layers", "steer-from"})
            if (a.has(o)) throw usage_error(std::string("--") + o + " needs --steer FILE (a .gguf control vector or a .npy)");
        return s;
    }
    refuse_unless(m, gb::FEATURE_STEERING, "--steer");
    if (a.has("steer-layers")) s.layers = gb::parse_layer_list(a.get("steer-layers"), "--steer-layers");
    const int npy_layer = s.layers.size() == 1 ? s.layers[0] : -1;
    s.vec = std::make_shared<const gb::steer_vector>(gb::read_steer_vector(a.get("steer"), npy_layer));
    s.scale = (float)parse_float(a.get("steer-scale", "1"), "--steer-scale", -1e6, 1e6);
    s.from = (int)parse_int(a.get("steer-from", "0"), "--steer-from", 0, m.config.n_ctx - 1);
    gb::check_steering(s, m.config);
    return s;
}

nlohmann::json steering_json(const gb::steering& s, const std::string& file) {
    if (!s.vec) return nullptr;
    return {{"file", file}, {"scale", s.scale}, {"layers", s.applied_layers()}, {"from", s.from},
            {"d_model", s.vec->d_model}, {"model_hint", s.vec->model_hint}};
}

std::string read_text_file(const std::string& path, const std::string& what) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw gb::error(what + ": cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw gb::error(what + ": " + path + " is empty");
    return text;
}

std::vector<std::string> read_prompt_lines(const std::string& path, const std::string& what) {
    std::istringstream in(read_text_file(path, what));
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(line);
    }
    return out;
}

} // namespace cli
