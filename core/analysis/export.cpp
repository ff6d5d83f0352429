// .npy and JSON writers for captures (CLI --npy-dir/--json, GUI export).
#include "analysis/export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/softmax.h"
#include "run/predict.h"
#include "util/error.h"

namespace gb {

// Writes one point's layers [L, ...] to path: kept layers from the record, zeros for the layers (and a part
// layer's heads) the capture budget left out, layer by layer (never the whole [L, ...] array the budget exists to avoid).
static void write_layers_npy(const std::string& path, const record& rec, hook_point p, const std::vector<int64_t>& shape) {
    std::ofstream f;
    open_npy(f, path, shape, "<f4");
    // the pattern head by head: a part layer (record::part) keeps some of its heads
    const int parts = p == HOOK_PATTERN ? rec.n_head : 1;
    const size_t floats = rec.layer_floats(p) / parts;
    const std::vector<float> zeros(std::min<size_t>(floats, 1 << 16), 0.0f);
    for (int l = 0; l < rec.n_layer; l++)
        for (int h = 0; h < parts; h++) {
            if (const float* x = p == HOOK_PATTERN ? rec.head(l, h) : rec.get(p, l)) {
                f.write((const char*)x, (std::streamsize)(floats * sizeof(float)));
                continue;
            }
            for (size_t done = 0; done < floats;) {
                const size_t n = std::min(floats - done, zeros.size());
                f.write((const char*)zeros.data(), (std::streamsize)(n * sizeof(float)));
                done += n;
            }
        }
    if (!f) throw error("cannot write " + path + " (disk full?)");
}

void write_capture_npy(const std::string& dir, const record& cap, const std::string& prefix) {
    make_dir(dir);
    const int64_t T = cap.n_tokens, L = cap.n_layer, H = cap.n_head;
    const std::string at = dir + "/" + prefix;
    std::vector<int32_t> ids(cap.tokens.begin(), cap.tokens.end());
    write_npy(at + "tokens.npy", {T}, ids.data());
    if (!cap.logits.empty()) // (an encoder–decoder's encoder stack has no head)
        write_npy(at + "logits.npy", {(int64_t)(cap.logits.size() / cap.vocab), cap.vocab}, cap.logits.data());
    write_layers_npy(at + "attention.npy", cap, HOOK_PATTERN, {L, H, T, T});
    if (cap.n_source > 0) write_layers_npy(dir + "/cross_attention.npy", cap, HOOK_CROSS_PATTERN, {L, H, T, cap.n_source});
    write_npy(at + "residual_norms.npy", {2 * L + 1, T}, cap.resid_norm.data());
}

std::vector<std::string> write_record_npy(const std::string& dir, const record& rec, const std::string& prefix) {
    make_dir(dir);
    std::vector<std::string> written;
    const int64_t L = rec.n_layer, T = rec.n_tokens, H = rec.n_head, KV = rec.n_kv_head, dh = rec.d_head, d = rec.d_model;
    for (int pi = 0; pi < HOOK_COUNT; pi++) {
        const hook_point p = (hook_point)pi;
        if (hook_is_pattern(p) || p == HOOK_LOGITS) continue; // attention.npy, cross_attention.npy, logits.npy
        bool any = false;
        for (int l = 0; l < (hook_is_final(p) ? 1 : rec.n_layer); l++) any = any || rec.has(p, l);
        if (!any) continue;
        const std::string name = prefix + hook_name(p) + ".npy";
        if (p == HOOK_FINAL_NORM) {
            const int64_t rows = (int64_t)(rec.layer_floats(p) / d);
            write_npy(dir + "/" + name, {rows, d}, rec.get(p, 0));
        } else if (p == HOOK_RESID_PRE && !rec.has(p, 1) && rec.n_layer > 1) {
            continue; // only layer 0 (the embeddings, part of the stream below)
        } else {
            std::vector<int64_t> shape = {L, T, d};
            if (p == HOOK_Q || p == HOOK_Z || p == HOOK_CROSS_Z) shape = {L, T, H, dh};
            else if (p == HOOK_K || p == HOOK_V) shape = {L, T, KV, dh};
            else if (p == HOOK_HEAD_OUT) shape = {L, T, H, d};
            else if (p == HOOK_MLP_POST) shape = {L, T, rec.d_ff};
            else if (p == HOOK_ROUTER) shape = {L, T, rec.n_expert};
            write_layers_npy(dir + "/" + name, rec, p, shape);
        }
        written.push_back(name);
    }
    bool stream = true;
    for (int pt = 0; pt <= 2 * rec.n_layer; pt++) stream = stream && rec.resid(pt);
    if (stream) {
        const std::string path = dir + "/" + prefix + "resid_stream.npy";
        std::ofstream f;
        open_npy(f, path, {2 * L + 1, T, d}, "<f4");
        for (int pt = 0; pt <= 2 * rec.n_layer; pt++) f.write((const char*)rec.resid(pt), (std::streamsize)(T * d * sizeof(float)));
        if (!f) throw error("cannot write " + path + " (disk full?)");
        written.push_back(prefix + "resid_stream.npy");
    }
    return written;
}

nlohmann::json model_json(const model& m) {
    const model_config& c = m.config;
    nlohmann::json j = {{"arch", c.model_type},     {"n_layer", c.n_layer},       {"n_head", c.n_head},
            {"n_kv_head", c.n_kv_head}, {"d_model", c.d_model},       {"vocab_size", c.vocab_size},
            {"n_ctx", c.n_ctx},         {"n_params", count_params(m).total()}, {"path", m.path},
            {"format", m.format}, {"nonfinite_tensor", m.nonfinite_tensor.empty() ? nlohmann::json() : nlohmann::json(m.nonfinite_tensor)}};
    j["family"] = arch_table(c.arch).name; // the architecture table's row (arch is the file's own name)
    j["kind"] = kind_info_of(c).name; // decoder, moe, encoder, encoder-decoder, vision (core/model/kind.h)
    j["kind_title"] = kind_info_of(c).title;
    if (m.encoder) { // the numbers above are the decoder's
        const model_config& e = m.encoder->config;
        j["encoder"] = {{"n_layer", e.n_layer}, {"n_head", e.n_head}, {"d_ff", e.d_ff}};
        j["blocks"] = arch_table(c.arch).post_ln ? "Post-LN" : "Pre-LN";
        j["positions"] = arch_table(c.arch).pos == POS_SINUSOID ? "sinusoidal" : "learned";
        j["decoder_start_id"] = c.decoder_start_id;
        j["eos_id"] = c.eos_id;
    }
    if (kind_of(c) == KIND_VISION)
        j["vision"] = {{"image_size", c.image_size}, {"patch_size", c.patch_size}, {"grid", c.grid()},
                       {"prefix_tokens", c.n_prefix}, {"classes", c.vocab_size}};
    j["d_head"] = c.d_head;
    // what differs from plain attention and blocks, only where it does
    if (c.rope_dims > 0 && c.rope_dims < c.d_head) j["rope_dims"] = c.rope_dims;
    if (c.sliding_window > 0)
        j["sliding_window"] = {{"tokens", c.sliding_window}, {"every", c.window_every}, {"from_layer", c.window_first}};
    if (c.attn_softcap > 0) j["attn_softcap"] = c.attn_softcap;
    if (c.final_softcap > 0) j["final_softcap"] = c.final_softcap;
    if (c.parallel) j["parallel"] = true;
    if (kind_of(c) == KIND_MOE)
        j["experts"] = {{"n_expert", c.n_expert}, {"n_expert_used", c.n_expert_used}, {"d_ff_expert", c.d_ff_expert},
                        {"d_ff_shared", c.d_ff_shared}, {"norm_topk", c.norm_topk}};
    return j;
}

nlohmann::json routing_json(const record& rec, int k) {
    if (rec.n_expert <= 0) return nullptr;
    const routing_table rt = routing_of(rec, rec.n_expert); // every expert that ran (a hook may add some)
    nlohmann::json ids = nlohmann::json::array(), weights = nlohmann::json::array();
    for (int l = 0; l < rt.n_layer; l++) {
        if (!rt.kept[l]) { // left out by the capture budget
            ids.push_back(nullptr);
            weights.push_back(nullptr);
            continue;
        }
        nlohmann::json li = nlohmann::json::array(), lw = nlohmann::json::array();
        for (int t = 0; t < rt.n_tokens; t++) {
            const int* id = rt.cell_ids(l, t);
            const int m = (int)(std::find(id, id + rt.k, -1) - id);
            li.push_back(std::vector<int>(id, id + m));
            lw.push_back(std::vector<float>(rt.cell_weights(l, t), rt.cell_weights(l, t) + m));
        }
        ids.push_back(li);
        weights.push_back(lw);
    }
    return {{"n_expert", rec.n_expert}, {"experts_per_token", k}, {"experts", ids}, {"weights", weights}};
}

nlohmann::json capture_json(const model& m, const record& cap, const ablation& ab, int top_k) {
    nlohmann::json j;
    j["model"] = model_json(m);
    j["ablation"] = ab.describe();
    j["tokens"] = nlohmann::json::array();
    for (int t = 0; t < cap.n_tokens; t++) j["tokens"].push_back({{"id", cap.tokens[t]}, {"text", cap.pieces[t]}});
    j["top_k"] = nlohmann::json::array();
    const int at = prediction_position(m, cap); // [CLS] for a classifier, an encoder's first mask, else the last
    const float* row = cap.all_logits && cap.logit_ids.empty() ? &cap.logits[(size_t)at * cap.vocab] : cap.last_logits();
    for (const token_prob& tp : top_k_probs(row, cap.vocab, top_k))
        j["top_k"].push_back({{"id", tp.id}, {"text", token_text(m.tok, tp.id)}, {"prob", tp.prob}});
    nlohmann::json values = nlohmann::json::array();
    for (int p = 0; p < 2 * cap.n_layer + 1; p++)
        values.push_back(std::vector<float>(cap.resid_norm.begin() + (size_t)p * cap.n_tokens,
                                            cap.resid_norm.begin() + (size_t)(p + 1) * cap.n_tokens));
    j["residual_norms"] = {{"labels", resid_labels(cap.n_layer, cap.n_source > 0)}, {"values", values}};
    j["timing_ms"] = {{"total", cap.timing.total_ms},
                      {"matmul", cap.timing.matmul_ms},
                      {"attention", cap.timing.attention_ms},
                      {"rest", cap.timing.rest_ms}};
    nlohmann::json kept = nlohmann::json::array(); // layers whose attention the capture budget kept
    for (int l = 0; l < cap.n_layer; l++)
        if (cap.has_layer(l)) kept.push_back(l);
    j["attention_layers_kept"] = kept;
    if (cap.part.layer >= 0) { // one layer's pattern was over the budget alone: the heads it kept
        std::vector<int> heads(cap.part.count);
        for (int h = 0; h < cap.part.count; h++) heads[h] = cap.part.head0 + h;
        j["attention_heads_kept"] = {{"layer", cap.part.layer}, {"heads", heads}};
    }
    if (kind_of(m.config) == KIND_MOE) j["routing"] = routing_json(cap, m.config.n_expert_used);
    if (cap.nonfinite_layer >= 0) j["nonfinite"] = {{"layer", cap.nonfinite_layer}, {"where", cap.nonfinite_where}};
    return j;
}

void write_json(const std::string& path, const nlohmann::json& j) {
    // its folder is made as --npy-dir's is (a missing one failed after the command had printed its results)
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    std::ofstream f(path);
    if (!f) throw error("cannot write " + path);
    f << j.dump(1) << "\n";
    if (!f) throw error("cannot write " + path + " (disk full?)");
}

nlohmann::json fill_mask_json(const std::vector<fill_slot>& slots, const record& r, const tokenizer& tok) {
    nlohmann::json a = nlohmann::json::array();
    for (const fill_slot& s : slots) {
        nlohmann::json top = nlohmann::json::array();
        for (const token_prob& p : s.top) top.push_back({{"id", p.id}, {"text", token_text(tok, p.id)}, {"prob", p.prob}});
        a.push_back({{"position", s.position}, {"token", r.pieces[s.position]}, {"top", top}});
    }
    return a;
}

} // namespace gb
