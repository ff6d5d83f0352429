// .npy and JSON writers for captures (CLI --npy-dir/--json, GUI export).
#include "export.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "error.h"

namespace gb {

static void write_npy_raw(const std::string& path, const std::vector<int64_t>& shape, const char* descr,
                          const void* data, size_t elem_size) {
    std::string dims;
    size_t count = 1;
    for (size_t i = 0; i < shape.size(); i++) {
        dims += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
        count *= (size_t)shape[i];
    }
    std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64, ending in \n
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    if (!f) throw error("cannot write " + path);
    const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
    f.write(magic, 8);
    uint16_t len = (uint16_t)header.size();
    const char len_le[2] = {(char)(len & 0xff), (char)(len >> 8)};
    f.write(len_le, 2);
    f.write(header.data(), (std::streamsize)header.size());
    f.write((const char*)data, (std::streamsize)(count * elem_size));
    if (!f) throw error("cannot write " + path + " (disk full?)");
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    write_npy_raw(path, shape, "<f4", data, 4);
}
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const int32_t* data) {
    write_npy_raw(path, shape, "<i4", data, 4);
}

void write_capture_npy(const std::string& dir, const capture& cap) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("cannot create directory " + dir + ": " + ec.message());
    const int64_t T = cap.n_tokens, L = cap.n_layer, H = cap.n_head;
    std::vector<int32_t> ids(cap.tokens.begin(), cap.tokens.end());
    write_npy(dir + "/tokens.npy", {T}, ids.data());
    write_npy(dir + "/logits.npy", {(int64_t)(cap.logits.size() / cap.vocab), cap.vocab}, cap.logits.data());
    std::vector<float> att((size_t)(L * H * T * T), 0.0f);
    for (int l = 0; l < L; l++)
        if (cap.has_layer(l)) std::memcpy(&att[(size_t)l * H * T * T], cap.head(l, 0), sizeof(float) * H * T * T);
    write_npy(dir + "/attention.npy", {L, H, T, T}, att.data());
    write_npy(dir + "/residual_norms.npy", {2 * L + 1, T}, cap.resid_norm.data());
}

nlohmann::json model_json(const model& m) {
    const model_config& c = m.config;
    return {{"arch", c.model_type},     {"n_layer", c.n_layer},       {"n_head", c.n_head},
            {"n_kv_head", c.n_kv_head}, {"d_model", c.d_model},       {"vocab_size", c.vocab_size},
            {"n_ctx", c.n_ctx},         {"n_params", count_params(m).total()}, {"path", m.path},
            {"format", m.format}};
}

nlohmann::json capture_json(const model& m, const capture& cap, const ablation& ab, int top_k) {
    nlohmann::json j;
    j["model"] = model_json(m);
    j["ablation"] = ab.describe();
    j["tokens"] = nlohmann::json::array();
    for (int t = 0; t < cap.n_tokens; t++) j["tokens"].push_back({{"id", cap.tokens[t]}, {"text", cap.pieces[t]}});
    j["top_k"] = nlohmann::json::array();
    for (const token_prob& tp : top_k_probs(cap.last_logits(), cap.vocab, top_k))
        j["top_k"].push_back({{"id", tp.id}, {"text", token_text(m.tok, tp.id)}, {"prob", tp.prob}});
    nlohmann::json values = nlohmann::json::array();
    for (int p = 0; p < 2 * cap.n_layer + 1; p++)
        values.push_back(std::vector<float>(cap.resid_norm.begin() + (size_t)p * cap.n_tokens,
                                            cap.resid_norm.begin() + (size_t)(p + 1) * cap.n_tokens));
    j["residual_norms"] = {{"labels", resid_labels(cap.n_layer)}, {"values", values}};
    j["timing_ms"] = {{"total", cap.timing.total_ms},
                      {"matmul", cap.timing.matmul_ms},
                      {"attention", cap.timing.attention_ms},
                      {"rest", cap.timing.rest_ms}};
    if (cap.nonfinite_layer >= 0) j["nonfinite"] = {{"layer", cap.nonfinite_layer}, {"where", cap.nonfinite_where}};
    return j;
}

void write_json(const std::string& path, const nlohmann::json& j) {
    std::ofstream f(path);
    if (!f) throw error("cannot write " + path);
    f << j.dump(1) << "\n";
    if (!f) throw error("cannot write " + path + " (disk full?)");
}

} // namespace gb
