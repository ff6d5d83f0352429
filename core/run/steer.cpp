// Steering as interventions: checking a vector against the model, and its ADD interventions.
#include "run/steer.h"

#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace gb {

std::vector<int> steering::applied_layers() const {
    if (!layers.empty() || !vec) return layers;
    return vec->layers();
}

std::string steering::describe() const {
    if (!any()) return "none";
    char a[32];
    std::snprintf(a, sizeof a, "%g", scale);
    std::string s = "steer " + std::string(a) + " x " + (vec->name.empty() ? std::string("vector") : vec->name) + " at L";
    const std::vector<int> ls = applied_layers();
    for (size_t i = 0; i < ls.size(); i++) s += (i ? "," : "") + std::to_string(ls[i]);
    return s + (from > 0 ? " from position " + std::to_string(from) : "");
}

void check_steering(const steering& s, const model_config& c) {
    if (!s.vec) return;
    const steer_vector& v = *s.vec;
    if (v.d_model != c.d_model)
        throw error("steering vector is " + std::to_string(v.d_model) + " wide, the model's stream is " +
                    std::to_string(c.d_model) + (v.model_hint.empty() ? "" : " (the vector was made on " + v.model_hint + ")"));
    if (!std::isfinite(s.scale)) throw error("steering scale must be a finite number");
    if (s.from < 0 || s.from >= c.n_ctx)
        throw error("steering from position " + std::to_string(s.from) + " is outside the context (0.." +
                    std::to_string(c.n_ctx - 1) + ")");
    for (int l : s.applied_layers()) {
        if (l < 0 || l >= c.n_layer)
            throw error("steering at layer " + std::to_string(l) + ": the model has layers 0.." + std::to_string(c.n_layer - 1));
        if (!v.has(l)) {
            std::string have;
            for (int k : v.layers()) have += (have.empty() ? "" : ",") + std::to_string(k);
            throw error("steering at layer " + std::to_string(l) + ": the vector has no direction there (it has " + have + ")");
        }
    }
}

std::vector<intervention> steering_interventions(const steering& s, const model_config& c,
                                                 std::vector<std::vector<float>>& values) {
    std::vector<intervention> out;
    values.clear();
    if (!s.any()) return out;
    check_steering(s, c);
    const std::vector<int> ls = s.applied_layers();
    values.reserve(ls.size()); // the pointers below stay valid: nothing is added after
    for (int l : ls) {
        std::vector<float> row = s.vec->dirs[l];
        for (float& x : row) x *= s.scale;
        values.push_back(std::move(row));
    }
    for (size_t i = 0; i < ls.size(); i++) {
        intervention iv;
        iv.kind = INTERVENE_ADD;
        iv.point = HOOK_RESID_POST;
        iv.layer = ls[i];
        iv.from = s.from;
        iv.values = values[i].data();
        out.push_back(iv);
    }
    return out;
}

std::vector<int> parse_layer_list(const std::string& list, const std::string& what) {
    std::vector<int> out;
    size_t i = 0;
    while (i <= list.size()) {
        size_t j = list.find(',', i);
        if (j == std::string::npos) j = list.size();
        const std::string item = list.substr(i, j - i);
        if (!item.empty()) {
            if (item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
                throw error(what + ": '" + item + "' is not a layer number (expected e.g. 3,4)");
            out.push_back(std::stoi(item));
        }
        i = j + 1;
    }
    if (out.empty()) throw error(what + ": no layer given (expected e.g. 3,4)");
    return out;
}

} // namespace gb
