// Small helpers shared by the panels, sessions and capture export.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "error.h"
#include "export.h"
#include "ui.h"

namespace gbui {

void remember_item(ui_context& ui, const std::string& name) {
    ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    ui.widgets[name] = ImVec4(a.x, a.y, b.x, b.y);
}

void add_text_vertical(ImDrawList* dl, ImVec2 at, ImU32 col, const char* text, float font_size) {
    if (font_size <= 0) font_size = ImGui::GetFontSize();
    // lay the text out horizontally where the clip rectangle keeps every glyph, then turn it: a vertex at
    // offset (dx, dy) from the text's top-left goes to (dy, -dx) from `at`
    ImVec2 q = dl->GetClipRectMin();
    int first = dl->VtxBuffer.Size;
    dl->AddText(ImGui::GetFont(), font_size, q, col, text);
    for (int i = first; i < dl->VtxBuffer.Size; i++) {
        ImVec2& v = dl->VtxBuffer[i].pos;
        float dx = v.x - q.x, dy = v.y - q.y;
        v = ImVec2(at.x + dy, at.y - dx);
    }
}

std::string short_label(const std::string& s, size_t max_chars) {
    std::string v = visible_token(s);
    // cut on UTF-8 boundaries
    size_t n = 0, i = 0;
    while (i < v.size() && n < max_chars) {
        unsigned char ch = v[i];
        i += ch < 0x80 ? 1 : ch < 0xe0 ? 2 : ch < 0xf0 ? 3 : 4;
        n++;
    }
    return i < v.size() ? v.substr(0, i) + "\u2026" : v;
}

int label_step(int n, float spacing, float need) {
    if (n <= 1 || spacing <= 0) return 1;
    return std::max(1, (int)std::ceil(need / spacing - 1e-4f));
}

ImU32 viridis_u32(float t, float alpha) {
    uint8_t c[3];
    viridis(t, c);
    return IM_COL32(c[0], c[1], c[2], (int)(alpha * 255));
}

bool head_ablated(const gb::ablation& ab, int layer, int head) {
    return std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{layer, head}) != ab.heads.end();
}

void toggle_head(gb::ablation& ab, int layer, int head) {
    auto it = std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{layer, head});
    if (it != ab.heads.end()) ab.heads.erase(it);
    else ab.heads.push_back({layer, head});
}

void panel_title(const char* title, const char* hint) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.55f, 0.8f, 1.0f, 1.0f));
    ImGui::TextUnformatted(title);
    ImGui::PopStyleColor();
    if (hint) {
        ImGui::SameLine();
        ImGui::TextDisabled("%s", hint);
    }
    ImGui::Separator();
}

static nlohmann::json layer_set_json(const gb::layer_set& s) { return {{"on", s.on}, {"layers", s.layers}}; }
static gb::layer_set layer_set_from(const nlohmann::json& j) {
    gb::layer_set s;
    s.on = j.value("on", false);
    if (j.contains("layers")) s.layers = j["layers"].get<std::vector<int>>();
    return s;
}

void save_session(const app_state& s, const std::string& path) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : s.ablation.heads) heads.push_back({h.layer, h.head});
    nlohmann::json j = {{"glassbox_session", 1},
                        {"model", s.model ? s.model->path : ""},
                        {"prompt", s.prompt},
                        {"bos", s.bos},
                        {"ablation",
                         {{"no_residual", layer_set_json(s.ablation.no_residual)},
                          {"no_layernorm", layer_set_json(s.ablation.no_layernorm)},
                          {"no_attention", layer_set_json(s.ablation.no_attention)},
                          {"heads", heads}}},
                        {"selected_head", {s.sel_layer, s.sel_head}},
                        {"selected_token", s.sel_token}};
    gb::write_json(path, j);
}

session_file read_session(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw gb::error("cannot open session " + path);
    try {
        nlohmann::json j = nlohmann::json::parse(f);
        if (!j.contains("glassbox_session")) throw gb::error("not a Glassbox session");
        session_file out;
        out.prompt = j.at("prompt").get<std::string>();
        out.bos = j.value("bos", false);
        out.model = j.value("model", "");
        pending_settings& p = out.settings;
        p.source = "session " + path;
        const auto& a = j.at("ablation");
        p.has_ablation = true;
        p.ablation.no_residual = layer_set_from(a.at("no_residual"));
        p.ablation.no_layernorm = layer_set_from(a.at("no_layernorm"));
        p.ablation.no_attention = layer_set_from(a.at("no_attention"));
        for (const auto& h : a.at("heads")) p.ablation.heads.push_back({h.at(0).get<int>(), h.at(1).get<int>()});
        p.sel_layer = j.at("selected_head").at(0);
        p.sel_head = j.at("selected_head").at(1);
        p.sel_token = j.value("selected_token", -1);
        if (p.sel_layer < 0 || p.sel_head < 0) throw gb::error("selected_head must be two indices >= 0");
        return out; // layer and head indices are checked against the session's model once it has loaded
    } catch (const gb::error& e) {
        throw gb::error(path + ": " + e.what());
    } catch (const std::exception& e) {
        throw gb::error(path + ": malformed session (" + std::string(e.what()) + ")");
    }
}

void open_session(app_state& s, worker& w, const std::string& path) {
    session_file f = read_session(path);
    s.prompt = f.prompt;
    s.bos = f.bos;
    s.warning.clear();
    if (!f.model.empty() && (!s.model || s.model->path != f.model)) {
        s.model_path_input = f.model;
        s.pending = f.settings; // applied by adopt_model once the session's model has loaded
        w.load(f.model);
    } else {
        apply_settings(s, f.settings);
    }
}

void apply_settings(app_state& s, const pending_settings& p) {
    if (!s.model) {
        s.pending = p;
        return;
    }
    const gb::model_config& c = s.model->config;
    std::string problems;
    if (p.has_ablation) {
        try {
            gb::check_ablation(p.ablation, c);
            s.ablation = p.ablation;
        } catch (const gb::error& e) {
            s.ablation = {};
            problems = "ablation \"" + p.ablation.describe() + "\" not applied: " + e.what();
        }
    }
    if (p.sel_layer >= 0) {
        if (p.sel_layer < c.n_layer && p.sel_head >= 0 && p.sel_head < c.n_head) {
            s.sel_layer = p.sel_layer, s.sel_head = p.sel_head;
            s.selection_pinned = true;
        } else {
            problems += std::string(problems.empty() ? "" : "; ") + "head " + std::to_string(p.sel_layer) + "." +
                        std::to_string(p.sel_head) + " not selected: the model has " + std::to_string(c.n_layer) +
                        " layers x " + std::to_string(c.n_head) + " heads";
        }
    }
    if (p.sel_token >= 0) s.sel_token = p.sel_token; // positions are clamped to the prompt by the panels
    if (!problems.empty()) s.warning = p.source + ": " + problems;
}

// Keeps the layers of set that exist in a model of n_layer layers; returns false if any were dropped.
static bool fit_layers(gb::layer_set& set, int n_layer) {
    if (!set.on || set.layers.empty()) return true;
    size_t n = set.layers.size();
    set.layers.erase(std::remove_if(set.layers.begin(), set.layers.end(), [&](int l) { return l < 0 || l >= n_layer; }),
                     set.layers.end());
    if (set.layers.empty()) set.on = false; // an empty list would mean "every layer"
    return set.layers.size() == n;
}

void adopt_model(app_state& s, std::shared_ptr<const gb::model> m, const std::string& path) {
    s.model = std::move(m);
    s.error.clear();
    s.warning.clear();
    s.status = "loaded " + path;
    auto& r = s.recent_models;
    r.erase(std::remove(r.begin(), r.end(), path), r.end());
    r.insert(r.begin(), path);
    if (r.size() > 8) r.resize(8);
    write_recent(s.config_dir, r);
    if (s.pending) { // settings that came with this model (command line, session): checked against it
        pending_settings p = *s.pending;
        s.pending.reset();
        apply_settings(s, p);
        return;
    }
    // otherwise keep what still means something in the new model (and let it pick a first head to show)
    s.selection_pinned = false;
    const gb::model_config& c = s.model->config;
    gb::ablation& ab = s.ablation;
    std::string before = ab.describe();
    bool fits = fit_layers(ab.no_residual, c.n_layer) & fit_layers(ab.no_layernorm, c.n_layer) &
                fit_layers(ab.no_attention, c.n_layer);
    size_t n_heads = ab.heads.size();
    ab.heads.erase(std::remove_if(ab.heads.begin(), ab.heads.end(),
                                  [&](const gb::head_ref& h) { return h.layer >= c.n_layer || h.head >= c.n_head; }),
                   ab.heads.end());
    if (!fits || ab.heads.size() != n_heads)
        s.warning = "ablation \"" + before + "\" does not fit this model (" + std::to_string(c.n_layer) + " layers x " +
                    std::to_string(c.n_head) + " heads): kept \"" + ab.describe() + "\"";
    if (s.sel_layer >= c.n_layer || s.sel_head >= c.n_head) s.sel_layer = s.sel_head = 0;
}

std::vector<std::string> read_recent(const std::string& config_dir) {
    std::vector<std::string> out;
    if (config_dir.empty()) return out;
    std::ifstream f(config_dir + "/recent.txt");
    for (std::string l; std::getline(f, l) && out.size() < 8;)
        if (!l.empty()) out.push_back(l);
    return out;
}

void write_recent(const std::string& config_dir, const std::vector<std::string>& paths) {
    if (config_dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(config_dir, ec);
    std::ofstream f(config_dir + "/recent.txt");
    for (const std::string& p : paths) f << p << "\n"; // not being able to remember is not worth an error
}

void export_capture(const app_state& s, const std::string& dir) {
    if (!s.result) throw gb::error("nothing to export yet");
    gb::write_capture_npy(dir, s.result->cap);
    gb::write_json(dir + "/capture.json", gb::capture_json(*s.result->model, s.result->cap, s.result->ablation, s.top_k));
}

} // namespace gbui
