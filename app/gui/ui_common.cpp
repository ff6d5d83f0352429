// Small helpers shared by the panels, sessions and capture export.
#include <algorithm>
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

void load_session(app_state& s, const std::string& path) {
    std::ifstream f(path);
    if (!f) throw gb::error("cannot open session " + path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
        if (!j.contains("glassbox_session")) throw gb::error("not a Glassbox session");
        app_state next = s;
        next.prompt = j.at("prompt").get<std::string>();
        next.bos = j.value("bos", false);
        const auto& a = j.at("ablation");
        next.ablation = {};
        next.ablation.no_residual = layer_set_from(a.at("no_residual"));
        next.ablation.no_layernorm = layer_set_from(a.at("no_layernorm"));
        next.ablation.no_attention = layer_set_from(a.at("no_attention"));
        for (const auto& h : a.at("heads")) next.ablation.heads.push_back({h.at(0).get<int>(), h.at(1).get<int>()});
        next.sel_layer = j.at("selected_head").at(0);
        next.sel_head = j.at("selected_head").at(1);
        next.sel_token = j.value("selected_token", -1);
        next.model_path_input = j.value("model", "");
        if (s.model) gb::check_ablation(next.ablation, s.model->config);
        s = next;
    } catch (const gb::error& e) {
        throw gb::error(path + ": " + e.what());
    } catch (const std::exception& e) {
        throw gb::error(path + ": malformed session (" + std::string(e.what()) + ")");
    }
}

void export_capture(const app_state& s, const std::string& dir) {
    if (!s.result) throw gb::error("nothing to export yet");
    gb::write_capture_npy(dir, s.result->cap);
    gb::write_json(dir + "/capture.json", gb::capture_json(*s.result->model, s.result->cap, s.result->ablation, s.top_k));
}

} // namespace gbui
