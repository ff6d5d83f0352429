// Small helpers shared by the panels (colour maps, token pickers), and sessions (capture export: analysis_export.cpp).
//
// Sections: drawing helpers | colour maps | token picker | names | sessions | model adoption
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/analysis_json.h"
#include "analysis/export.h"
#include "io/loader.h"
#include "patching_inputs.h"
#include "sampling_inputs.h"
#include "settings.h"
#include "tab_inputs.h"
#include "text_scale.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

void remember_item(ui_context& ui, const std::string& name) {
    ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    ui.widgets[name] = ImVec4(a.x, a.y, b.x, b.y);
    ui.widget_frame[name] = ImGui::GetFrameCount();
}

void note_drawn(ui_context& ui, const std::string& name, ImVec2 a, ImVec2 b) { ui.drawn[name] = ImVec4(a.x, a.y, b.x, b.y); }
void note_text(ui_context& ui, const std::string& name, const std::string& text) { ui.texts[name] = text; }

grid_view begin_grid(const char* id, ImVec2 size, float label_w, float header_h, float cw, float ch, int rows, int cols,
                     ImGuiWindowFlags flags) {
    grid_view g;
    g.label_w = label_w, g.header_h = header_h, g.cw = cw, g.ch = ch, g.rows = rows, g.cols = cols;
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
    // the extent end_grid reserves, known before the child begins: a scroll asked for (SetNextWindowScroll) reaches
    // the end of a grid that just grew in this very frame
    ImGui::SetNextWindowContentSize(ImVec2(label_w + cols * cw, header_h + rows * ch));
    ImGui::BeginChild(id, size, false, ImGuiWindowFlags_HorizontalScrollbar | flags);
    g.dl = ImGui::GetWindowDrawList();
    g.o = ImGui::GetCursorScreenPos();
    g.wp = ImGui::GetWindowPos();
    g.ws = ImGui::GetWindowSize();
    const float sx = ImGui::GetScrollX(), sy = ImGui::GetScrollY();
    g.c0 = std::max(0, (int)(sx / cw)), g.c1 = std::min(cols, (int)((sx + g.ws.x - label_w) / cw) + 1);
    g.r0 = std::max(0, (int)(sy / ch)), g.r1 = std::min(rows, (int)((sy + g.ws.y - header_h) / ch) + 1);
    const ImVec2 m = ImGui::GetMousePos();
    if (ImGui::IsWindowHovered() && m.x > g.wp.x + label_w && m.y > g.wp.y + header_h) {
        g.hover_c = (int)((m.x - g.o.x - label_w) / cw), g.hover_r = (int)((m.y - g.o.y - header_h) / ch);
        if (g.hover_c < 0 || g.hover_c >= cols || g.hover_r < 0 || g.hover_r >= rows) g.hover_r = g.hover_c = -1;
    }
    return g;
}

int grid_view::hovered_label(ImVec2 m) const {
    if (!ImGui::IsWindowHovered() || m.x < wp.x || m.x >= wp.x + label_w || m.y <= wp.y + header_h) return -1;
    const int r = (int)((m.y - o.y - header_h) / ch);
    return r >= 0 && r < rows ? r : -1;
}

void end_grid(const grid_view& g) {
    ImGui::Dummy(ImVec2(g.label_w + g.cols * g.cw, g.header_h + g.rows * g.ch)); // the scrolled extent
    ImGui::EndChild();
    ImGui::PopStyleVar();
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

// ---------------------------------------------------------------------------------------------
// Colour maps
// ---------------------------------------------------------------------------------------------
ImU32 diverging_u32(float t) {
    // ColorBrewer RdBu (5 classes) from blue (-1) through white (0) to red (+1)
    static const uint8_t pts[5][3] = {{33, 102, 172}, {103, 169, 207}, {247, 247, 247}, {239, 138, 98}, {178, 24, 43}};
    if (!std::isfinite(t)) return IM_COL32(70, 70, 78, 255);
    t = (std::min(1.0f, std::max(-1.0f, t)) + 1.0f) * 2.0f; // 0..4
    int i = std::min(3, (int)t);
    float f = t - i;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)std::lround(pts[i][k] * (1 - f) + pts[i + 1][k] * f);
    return IM_COL32(c[0], c[1], c[2], 255);
}

ImU32 text_on(ImU32 c) {
    float r = (c >> IM_COL32_R_SHIFT) & 255, g = (c >> IM_COL32_G_SHIFT) & 255, b = (c >> IM_COL32_B_SHIFT) & 255;
    return 0.299f * r + 0.587f * g + 0.114f * b > 140 ? IM_COL32(15, 15, 20, 255) : IM_COL32(240, 240, 240, 255);
}

float colour_bar(ImDrawList* dl, ImVec2 a, float w, bool diverging, const char* lo, const char* mid, const char* hi) {
    const int steps = 64;
    const float h = px(12);
    for (int i = 0; i < steps; i++) {
        float x0 = a.x + w * i / steps, x1 = a.x + w * (i + 1) / steps + 1, t = (i + 0.5f) / steps;
        dl->AddRectFilled(ImVec2(x0, a.y), ImVec2(x1, a.y + h), diverging ? diverging_u32(2 * t - 1) : viridis_u32(t));
    }
    ImU32 tc = IM_COL32(200, 200, 200, 255);
    dl->AddText(ImVec2(a.x, a.y + h + px(2)), tc, lo);
    if (mid) dl->AddText(ImVec2(a.x + w / 2 - ImGui::CalcTextSize(mid).x / 2, a.y + h + px(2)), tc, mid);
    dl->AddText(ImVec2(a.x + w - ImGui::CalcTextSize(hi).x, a.y + h + px(2)), tc, hi);
    return h + px(4) + ImGui::GetTextLineHeight();
}

// ---------------------------------------------------------------------------------------------
// Token picker
// ---------------------------------------------------------------------------------------------
std::string quoted(const gb::tokenizer& tok, int id) {
    return id < 0 ? "(none)" : "\u2018" + visible_token(gb::token_text(tok, id)) + "\u2019";
}

std::string visible_quotes(const std::string& s) {
    static const std::string open = "\u2018", close = "\u2019";
    std::string out;
    size_t i = 0;
    for (size_t a; (a = s.find(open, i)) != std::string::npos;) {
        const size_t b = s.find(close, a + open.size());
        if (b == std::string::npos) break;
        out += s.substr(i, a - i) + open + visible_token(s.substr(a + open.size(), b - a - open.size())) + close;
        i = b + close.size();
    }
    return out + s.substr(i);
}

void text_wrapped_at_spaces(const ImVec4& col, const std::string& text, float width) {
    ImGui::BeginGroup();
    std::string line;
    size_t i = 0;
    while (i <= text.size()) {
        size_t j = text.find(' ', i);
        if (j == std::string::npos) j = text.size();
        const std::string word = text.substr(i, j - i);
        const std::string longer = line.empty() ? word : line + " " + word;
        if (!line.empty() && ImGui::CalcTextSize(longer.c_str()).x > width) {
            ImGui::TextColored(col, "%s", line.c_str());
            line = word;
        } else {
            line = longer;
        }
        i = j + 1;
    }
    if (!line.empty()) ImGui::TextColored(col, "%s", line.c_str());
    ImGui::EndGroup();
}

float room_right_of_item() {
    return ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x - ImGui::GetItemRectMax().x;
}

float token_box_w(float combo_w) { return std::max(px(80), combo_w * 0.8f); }

float token_picker_w(const char* label, float combo_w) {
    const ImGuiStyle& st = ImGui::GetStyle();
    return ImGui::CalcTextSize(label).x + combo_w + token_box_w(combo_w) + 3 * st.ItemSpacing.x;
}

bool token_picker(const char* name, int* id, const std::string& default_label, const std::vector<gb::token_prob>& offered,
                  const gb::tokenizer& tok, int vocab, int slot, ui_context& ui, float combo_w) {
    const int before = *id;
    std::string preview = *id >= 0 && *id < vocab ? quoted(tok, *id) : default_label;
    ImGui::PushID(name);
    if (text_combo("##pick", preview, combo_w)) { // token text drawn whole (‘##’ is a token)
        if (text_selectable(default_label, "##default", *id < 0)) *id = -1;
        for (size_t i = 0; i < offered.size(); i++) {
            char line[160];
            snprintf(line, sizeof line, "%s   %.3f", quoted(tok, offered[i].id).c_str(), offered[i].prob);
            if (text_selectable(line, ("##offer" + std::to_string(i)).c_str(), *id == offered[i].id)) *id = offered[i].id;
            remember_item(ui, std::string(name) + " " + std::to_string(i));
            note_text(ui, std::string(name) + " " + std::to_string(i), line);
        }
        ImGui::EndCombo();
    }
    remember_item(ui, name);
    note_text(ui, std::string(name) + " preview", preview);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(token_box_w(combo_w));
    std::string& typed = ui.typed[slot];
    std::string& err = ui.typed_error[slot];
    if (ImGui::InputTextWithHint("##type", "or type a token", &typed, ImGuiInputTextFlags_EnterReturnsTrue)) {
        try {
            int t = -1;
            if (typed.size() > 1 && typed[0] == '#' && typed.find_first_not_of("0123456789", 1) == std::string::npos) {
                t = typed.size() > 10 ? vocab : std::atoi(typed.c_str() + 1); // more than 9 digits: out of range anyway
                if (t >= vocab)
                    throw gb::error("id " + typed.substr(1) + " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
            } else {
                t = gb::single_token_id(tok, typed, name);
            }
            *id = t;
            typed.clear();
            err.clear();
        } catch (const std::exception& e) {
            err = e.what(); // the previous choice stays
        }
    }
    remember_item(ui, std::string(name) + " text");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("exactly one token (mind the leading space: \u2018\u00b7cat\u2019 is \" cat\"), or #id; Enter");
    ImGui::PopID();
    if (*id != before) err.clear();
    return *id != before;
}

// ---------------------------------------------------------------------------------------------
// Names (sessions, scripts, print)
// ---------------------------------------------------------------------------------------------
int query_token(const app_state& s, int n_tokens) {
    if (s.sel_token >= 0) return std::min(s.sel_token, n_tokens - 1);
    const run_result* r = s.result.get();
    if (r && r->pred.output == gb::OUTPUT_FILL_MASK && !r->pred.fills.empty() && r->cap().n_tokens == n_tokens)
        return r->pred.fills[0].position; // BERT: the [MASK], not the [SEP] after it
    return n_tokens - 1;
}

const char* tab_name(analysis_tab t) { return tab_info(t).name; }
gb::feature tab_feature(analysis_tab t) { return tab_info(t).feature; }
bool tab_available(analysis_tab t, const gb::model* m) {
    if (!m) return !tab_info(t).model_only; // no model: the text tabs, empty
    if (t == TAB_LEARN) return true; // every kind gets the picture; the walk's numbers where FEATURE_LEARN is offered
    if (t == TAB_FEATURES) return true; // a kind without SAEs: the tab says why in one line
    if (t == TAB_ATTRIBUTION) // the token saliency where direct logit attribution is not offered
        return gb::offers(m->config, gb::FEATURE_ATTRIBUTION) || gb::offers(m->config, gb::FEATURE_GRADIENTS);
    return gb::offers(m->config, tab_feature(t));
}
const char* colour_name(colour_mode m) {
    static const char* names[COLOUR_COUNT] = {"pattern", "prev_token", "first_token", "induction", "duplicate_token", "entropy"};
    return m >= 0 && m < COLOUR_COUNT ? names[m] : "pattern";
}
const char* colour_label(colour_mode m) {
    static const char* names[COLOUR_COUNT] = {"pattern", "previous-token", "first-token", "induction", "duplicate-token", "entropy"};
    return m >= 0 && m < COLOUR_COUNT ? names[m] : "pattern";
}

bool head_ablated(const gb::ablation& ab, int layer, int head) {
    return std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{layer, head}) != ab.heads.end();
}

void toggle_head(gb::ablation& ab, int layer, int head) {
    auto it = std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{layer, head});
    if (it != ab.heads.end()) ab.heads.erase(it);
    else ab.heads.push_back({layer, head});
}

// The whole of a shortened text, wrapped, in a tooltip while the last item is hovered
static void whole_on_hover(const char* text) {
    if (!ImGui::IsItemHovered()) return;
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
}

void panel_title(const char* title, const char* hint, bool line_open) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.55f, 0.8f, 1.0f, 1.0f));
    ImGui::TextUnformatted(title);
    ImGui::PopStyleColor();
    if (hint) { // beside the title when it fits, else a "(?)" there that shows it when hovered (the line stays one)
        ImGui::SameLine();
        if (ImGui::CalcTextSize(hint).x <= ImGui::GetContentRegionAvail().x) {
            ImGui::TextDisabled("%s", hint);
        } else {
            ImGui::TextDisabled("(?)");
            whole_on_hover(hint);
        }
    }
    if (!line_open) ImGui::Separator();
}

void follow_panel_link(app_state& s, ui_context& ui, const std::string& panel) {
    // the panel names core/analysis/learn.cpp writes, and where each is on screen
    static const struct {
        const char* prefix;
        const char* window;
        int tab; // analysis_tab, -1: a panel outside the tabs
    } links[] = {{"Head", "Analysis", TAB_HEAD},         {"Logit lens", "Analysis", TAB_LENS},
                 {"Attribution", "Analysis", TAB_ATTRIBUTION}, {"Experts", "Analysis", TAB_EXPERTS},
                 {"Prompt", "Prompt", -1},           {"Attention heads", "Overview", -1},
                 {"Residual stream", "Residual", -1}, {"Next token", "Output", -1},
                 {"Cross-attention", "Analysis", TAB_CROSS}};
    for (const auto& l : links)
        if (panel.rfind(l.prefix, 0) == 0) {
            if (l.tab >= 0 && tab_available((analysis_tab)l.tab, s.model.get())) s.tab = (analysis_tab)l.tab;
            ui.flash_window = l.window;
            ui.flash_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
            return;
        }
}

void pop_utf8_char(std::string& text) {
    while (!text.empty()) { // continuation bytes (10xxxxxx) first, then the character's lead byte
        const bool continuation = ((unsigned char)text.back() & 0xC0) == 0x80;
        text.pop_back();
        if (!continuation) return;
    }
}

static bool folded_now = false;
void fold_explanations(bool folded) { folded_now = folded; }
bool explanations_folded() { return folded_now; }

void folded_explanation(const std::string& text) {
    ImGui::SameLine();
    ImGui::TextDisabled("(?)");
    whole_on_hover(text.c_str());
}

// presenting a demo, its caption beside the picture is the explanation: the tabs' hints give it their line
static bool hints_hidden = false;
void hide_tab_hints(bool hidden) { hints_hidden = hidden; }

void tab_hint(const char* hint) {
    if (hints_hidden) return;
    const float w = ImGui::GetContentRegionAvail().x;
    if (!folded_now && (ImGui::GetContentRegionAvail().y >= px(320) || ImGui::CalcTextSize(hint).x <= w)) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", hint);
        ImGui::PopTextWrapPos();
    } else { // a short panel: one line of it, and all of it when hovered (the tab's content keeps the room)
        const std::string more = "\u2026 (?)";
        std::string cut = hint;
        while (!cut.empty() && ImGui::CalcTextSize((cut + more).c_str()).x > w) pop_utf8_char(cut);
        ImGui::TextDisabled("%s", (cut + more).c_str());
        whole_on_hover(hint);
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

// A chosen token as {"id", "text"} (the text lets a session opened with another vocabulary be checked), or null.
static nlohmann::json token_json(const app_state& s, int id) {
    if (id < 0) return nullptr;
    nlohmann::json j = {{"id", id}};
    if (s.model && id < s.model->config.vocab_size) j["text"] = gb::token_text(s.model->tok, id);
    return j;
}

void save_session(const app_state& s, const std::string& path) {
    auto& xin = inputs_of<cross_inputs>(s, TAB_CROSS);
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    auto& smp = inputs_of<sampling_inputs>(s, TAB_SAMPLING);
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : s.ablation.heads) heads.push_back({h.layer, h.head});
    nlohmann::json experts = nlohmann::json::array();
    for (const auto& e : s.ablation.experts) experts.push_back({e.layer, e.head});
    nlohmann::json knockouts = nlohmann::json::array(); // as the CLI spells them: "0.1:3-2"
    for (const auto& k : s.ablation.knockouts) knockouts.push_back(k.describe());
    nlohmann::json j = {{"glassbox_session", 1},
                        {"model", s.model ? s.model->path : ""},
                        {"prompt", s.prompt},
                        {"image", s.image_path},
                        {"bos", s.bos},
                        {"ablation",
                         {{"no_residual", layer_set_json(s.ablation.no_residual)},
                          {"no_layernorm", layer_set_json(s.ablation.no_layernorm)},
                          {"no_attention", layer_set_json(s.ablation.no_attention)},
                          {"heads", heads},
                          {"experts", experts},
                          {"knockouts", knockouts}}},
                        {"selected_head", {s.sel_layer, s.sel_head}},
                        {"selected_token", s.sel_token},
                        {"tab", tab_name(s.tab)},
                        {"colour_by", colour_name(s.colour_by)},
                        {"lens_target", token_json(s, lin.target)},
                        {"attribution", {{"target", token_json(s, ain.target)}, {"contrast", token_json(s, ain.contrast)}}},
                        {"patching",
                         {{"corrupt_prompt", pin.corrupt},
                          {"target", token_json(s, pin.target)},
                          {"contrast", token_json(s, pin.contrast)}}},
                        {"sampling",
                         {{"temperatures", {smp.temps[0], smp.temps[1], smp.temps[2]}},
                          {"top_k", smp.top_k},
                          {"tokens", smp.tokens},
                          {"seed", smp.seed}}},
                        {"translation",
                         {{"target_text", s.target_text},
                          {"sampling",
                           {{"temperature", s.target_sampling.temperature},
                            {"top_k", s.target_sampling.top_k},
                            {"top_p", s.target_sampling.top_p},
                            {"seed", s.target_sampling.seed}}},
                          {"stack", s.stack == 0 ? "encoder" : "decoder"},
                          {"cross_average", xin.average}}},
                        {"features", features_session_json(s)}};
    for (int t = 0; t < TAB_COUNT; t++) // what a tab applies through the ablation (the Steer tab's steering)
        if (const tab_entry& e = tab_info((analysis_tab)t); e.save_applied) e.save_applied(j["ablation"], s);
    gb::write_json(path, j);
}

// A token saved by token_json: its id, and its text when saved (checked against the model by apply_settings).
struct saved_token {
    int id = -1;
    std::string text;
    bool has_text = false;
};
static saved_token token_from(const nlohmann::json& j, const char* key) {
    saved_token t;
    if (!j.contains(key) || j.at(key).is_null()) return t;
    const nlohmann::json& v = j.at(key);
    t.id = v.at("id").get<int>();
    if (t.id < 0) throw gb::error(std::string(key) + ": a token id must be >= 0");
    if (v.contains("text")) t.text = v.at("text").get<std::string>(), t.has_text = true;
    return t;
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
        if (j.contains("image")) out.image = j.at("image").get<std::string>();
        pending_settings& p = out.settings;
        p.source = "session " + path;
        const auto& a = j.at("ablation");
        p.has_ablation = true;
        p.ablation.no_residual = layer_set_from(a.at("no_residual"));
        p.ablation.no_layernorm = layer_set_from(a.at("no_layernorm"));
        p.ablation.no_attention = layer_set_from(a.at("no_attention"));
        for (const auto& h : a.at("heads")) p.ablation.heads.push_back({h.at(0).get<int>(), h.at(1).get<int>()});
        if (a.contains("experts")) // (layer, expert) pairs; absent in sessions saved before MoE models
            for (const auto& e : a.at("experts")) p.ablation.experts.push_back({e.at(0).get<int>(), e.at(1).get<int>()});
        if (a.contains("knockouts")) // absent in sessions saved before attention knockout
            for (const auto& k : a.at("knockouts")) {
                const std::vector<gb::knockout> one = gb::parse_knockouts(k.get<std::string>());
                p.ablation.knockouts.insert(p.ablation.knockouts.end(), one.begin(), one.end());
            }
        for (int t = 0; t < TAB_COUNT; t++) // what a tab applies through the ablation (the Steer tab's steering)
            if (const tab_entry& e = tab_info((analysis_tab)t); e.read_applied) e.read_applied(a, p.ablation);
        p.sel_layer = j.at("selected_head").at(0);
        p.sel_head = j.at("selected_head").at(1);
        p.sel_token = j.value("selected_token", -1);
        if (p.sel_layer < 0 || p.sel_head < 0) throw gb::error("selected_head must be two indices >= 0");
        // analysis inputs: absent in sessions saved before they existed
        if (j.contains("tab")) {
            std::string t = j.at("tab").get<std::string>();
            for (int k = 0; k < TAB_COUNT; k++)
                if (t == tab_name((analysis_tab)k)) out.tab = (analysis_tab)k;
            if (!out.tab) {
                std::string names;
                for (int k = 0; k < TAB_COUNT; k++) names += std::string(k ? (k + 1 == TAB_COUNT ? " or " : ", ") : "") + tab_name((analysis_tab)k);
                throw gb::error("tab: expected " + names + ", got '" + t + "'");
            }
        }
        if (j.contains("colour_by")) {
            std::string c = j.at("colour_by").get<std::string>();
            for (int k = 0; k < COLOUR_COUNT; k++)
                if (c == colour_name((colour_mode)k)) out.colour_by = (colour_mode)k;
            if (!out.colour_by) throw gb::error("colour_by: unknown score '" + c + "'");
        }
        auto take = [&](const saved_token& t, int& id, std::string& text) {
            id = t.id;
            text = t.has_text ? t.text : "";
        };
        take(token_from(j, "lens_target"), p.lens_target, p.lens_target_text);
        if (j.contains("attribution")) {
            const auto& a = j.at("attribution");
            take(token_from(a, "target"), p.attr_target, p.attr_target_text);
            take(token_from(a, "contrast"), p.attr_contrast, p.attr_contrast_text);
        }
        if (j.contains("patching")) {
            const auto& pa = j.at("patching");
            if (pa.contains("corrupt_prompt")) out.corrupt_prompt = pa.at("corrupt_prompt").get<std::string>();
            take(token_from(pa, "target"), p.patch_target, p.patch_target_text);
            take(token_from(pa, "contrast"), p.patch_contrast, p.patch_contrast_text);
        }
        if (j.contains("sampling")) { // the Sampling tab's inputs, in the ranges its widgets allow
            const auto& sa = j.at("sampling");
            session_file::sampling_inputs in;
            const auto& t = sa.at("temperatures");
            if (!t.is_array() || t.size() != 3) throw gb::error("sampling.temperatures: expected 3 numbers");
            for (int k = 0; k < 3; k++) {
                in.temps[k] = t.at(k).get<float>();
                if (!(in.temps[k] >= 0 && in.temps[k] <= 2.5f))
                    throw gb::error("sampling.temperatures: each must be in 0..2.5, got " + t.at(k).dump());
            }
            in.top_k = sa.at("top_k").get<int>();
            in.tokens = sa.at("tokens").get<int>();
            in.seed = sa.at("seed").get<uint64_t>();
            if (in.top_k < 0) throw gb::error("sampling.top_k must be >= 0");
            if (in.tokens < 1 || in.tokens > 100) throw gb::error("sampling.tokens must be in 1..100");
            out.sampling = in;
        }
        if (j.contains("translation")) { // encoder–decoders: absent in sessions saved before them
            const auto& tr = j.at("translation");
            session_file::translation_inputs in;
            in.target_text = tr.at("target_text").get<std::string>();
            const auto& sp = tr.at("sampling");
            in.sampling.temperature = sp.at("temperature").get<float>();
            in.sampling.top_k = sp.at("top_k").get<int>();
            in.sampling.top_p = sp.at("top_p").get<float>();
            in.sampling.seed = sp.at("seed").get<uint64_t>();
            if (!(in.sampling.temperature >= 0 && in.sampling.temperature <= 10))
                throw gb::error("translation.sampling.temperature must be in 0..10, got " + sp.at("temperature").dump());
            if (in.sampling.top_k < 0) throw gb::error("translation.sampling.top_k must be >= 0");
            if (!(in.sampling.top_p > 0 && in.sampling.top_p <= 1))
                throw gb::error("translation.sampling.top_p must be in (0, 1], got " + sp.at("top_p").dump());
            const std::string stack = tr.at("stack").get<std::string>();
            if (stack != "encoder" && stack != "decoder")
                throw gb::error("translation.stack: expected encoder or decoder, got '" + stack + "'");
            in.stack = stack == "encoder" ? 0 : 1;
            in.cross_average = tr.at("cross_average").get<bool>();
            out.translation = in;
        }
        if (j.contains("features")) read_features_session(p, j.at("features")); // absent before the Features tab
        p.has_tokens = true;
        return out; // layer and head indices are checked against the session's model once it has loaded
    } catch (const gb::error& e) {
        throw gb::error(path + ": " + e.what());
    } catch (const std::exception& e) {
        throw gb::error(path + ": malformed session (" + std::string(e.what()) + ")");
    }
}

void apply_session_inputs(app_state& s, const session_file& f) {
    auto& xin = inputs_of<cross_inputs>(s, TAB_CROSS);
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    auto& smp = inputs_of<sampling_inputs>(s, TAB_SAMPLING);
    if (f.corrupt_prompt) pin.corrupt = *f.corrupt_prompt;
    if (f.image) s.image_path = *f.image;
    if (f.tab) s.tab = *f.tab;
    if (f.colour_by) s.colour_by = *f.colour_by;
    if (f.sampling) {
        std::copy(f.sampling->temps, f.sampling->temps + 3, smp.temps);
        smp.top_k = f.sampling->top_k, smp.tokens = f.sampling->tokens, smp.seed = f.sampling->seed;
    }
    if (f.translation) {
        s.target_text = f.translation->target_text;
        s.target_sampling = f.translation->sampling;
        s.stack = f.translation->stack;
        xin.average = f.translation->cross_average;
    }
}

void open_session(app_state& s, worker& w, const std::string& path) {
    session_file f = read_session(path);
    s.prompt = f.prompt;
    s.bos = f.bos;
    apply_session_inputs(s, f);
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
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    if (!s.model) {
        s.pending = p;
        return;
    }
    const gb::model_config& c = s.model->config;
    std::string problems;
    if (p.has_ablation) {
        try {
            gb::check_ablation(p.ablation, *s.model);
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
    if (p.has_features) apply_features_session(s, p);
    if (p.has_tokens) { // chosen tokens: ids of this model's vocabulary, and the same text when it was saved
        const int V = c.vocab_size;
        auto take = [&](int id, const std::string& text, int& into, const char* what) {
            into = -1;
            if (id < 0) return;
            std::string why;
            if (id >= V) why = "id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(V) + " tokens)";
            else if (!text.empty() && gb::token_text(s.model->tok, id) != text)
                why = "id " + std::to_string(id) + " is not \u2018" + visible_token(text) + "\u2019 in this vocabulary";
            if (why.empty()) into = id;
            else problems += std::string(problems.empty() ? "" : "; ") + what + " not chosen: " + why;
        };
        take(p.lens_target, p.lens_target_text, lin.target, "lens target");
        take(p.attr_target, p.attr_target_text, ain.target, "attribution target");
        take(p.attr_contrast, p.attr_contrast_text, ain.contrast, "attribution contrast");
        take(p.patch_target, p.patch_target_text, pin.target, "patching target");
        take(p.patch_contrast, p.patch_contrast_text, pin.contrast, "patching contrast");
    }
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

// No settings came with a newly loaded model: keeps what still means something in it (and lets it pick a first
// head to show).
static void keep_what_fits(app_state& s) {
    s.selection_pinned = false;
    const gb::model_config& c = s.model->config;
    gb::ablation& ab = s.ablation;
    std::string before = ab.describe();
    // (an encoder–decoder's ablation names a layer or head of either stack)
    const int L = gb::ablation_layers(*s.model), H = gb::ablation_heads(*s.model);
    // each list is cut to the model, so all three run (no short-circuit)
    const bool fit_residual = fit_layers(ab.no_residual, L), fit_norm = fit_layers(ab.no_layernorm, L);
    bool fits = fit_layers(ab.no_attention, L) && fit_residual && fit_norm;
    size_t n_heads = ab.heads.size(), n_experts = ab.experts.size();
    ab.heads.erase(std::remove_if(ab.heads.begin(), ab.heads.end(),
                                  [&](const gb::head_ref& h) { return h.layer >= L || h.head >= H; }),
                   ab.heads.end());
    ab.experts.erase(std::remove_if(ab.experts.begin(), ab.experts.end(),
                                    [&](const gb::head_ref& e) { return e.layer >= c.n_layer || e.head >= c.n_expert; }),
                     ab.experts.end());
    if (!fits || ab.heads.size() != n_heads || ab.experts.size() != n_experts)
        s.warning = "ablation \"" + before + "\" does not fit this model (" + std::to_string(L) + " layers x " +
                    std::to_string(H) + " heads" +
                    (n_experts ? ", " + (c.n_expert ? std::to_string(c.n_expert) + " experts" : std::string("no experts")) : "") +
                    "): kept \"" + ab.describe() + "\"";
    if (s.sel_layer >= c.n_layer || s.sel_head >= c.n_head) s.sel_layer = s.sel_head = 0;
}

void adopt_model(app_state& s, std::shared_ptr<const gb::model> m, const std::string& path) {
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    const bool was_vision = s.model && gb::kind_info_of(s.model->config).input == gb::INPUT_IMAGE;
    s.model = std::move(m);
    s.patch.reset(); // made on the previous model: its interventions name that model's nodes
    fin.saes.clear(), fin.edits.clear(), fin.queue_edits.clear(); // bound to the previous model
    fin.sel = -1, s.output[ANALYSIS_FEATURES].reset(), s.output[ANALYSIS_FEATURE_INDEX].reset();
    const gb::weight_types wt = gb::stored_types(*s.model); // walks every layer: once here, not every frame
    char line[256];
    std::snprintf(line, sizeof line, "weights: attention %s, MLP %s, embedding %s, head %s; %.0f MB in memory",
                  wt.attention.c_str(), wt.mlp.c_str(), wt.embedding.c_str(), wt.head.c_str(),
                  gb::weight_bytes(*s.model) / 1e6);
    s.weights_line = line;
    s.kernel = gb::matmul_of(*s.model);
    s.error.clear();
    s.warning.clear();
    s.status = "loaded " + path;
    remember_model(s, path);
    // chosen tokens are ids of the previous vocabulary, the induction test ran on the previous model: defaults
    lin.target = ain.target = ain.contrast = pin.target = pin.contrast = -1;
    state_of<induction_inputs>(s, ANALYSIS_INDUCTION).shown = false;
    if (gb::kind_info_of(s.model->config).input == gb::INPUT_IMAGE) { // the picture is what a vision model is about, [CLS] its reader
        s.tab = TAB_IMAGE;
        s.sel_token = 0;
    } else if (was_vision) {
        s.sel_token = -1; // a text model's default: the last token
    }
    if (s.pending) { // settings that came with this model (command line, session): checked against it
        pending_settings p = *s.pending;
        s.pending.reset();
        apply_settings(s, p);
    } else {
        keep_what_fits(s);
    }
    // the default model's shipped SAE (assets/saes) unless a session brings its own: Features work on a fresh install
    if (fin.queue.empty() && gb::offers(s.model->config, gb::FEATURE_SAE))
        if (const std::string sae = gb::default_sae_path(*s.model); !sae.empty()) open_sae_file(s, sae);
    // a note about the settings (malformed file, no folder, the last model gone) shows once, beside this load's
    // warnings: the first load is the app's start, when the file was read
    if (!s.settings_note.empty()) {
        s.warning += (s.warning.empty() ? "" : "; ") + s.settings_note;
        s.settings_note.clear();
    }
}

void remember_model(app_state& s, const std::string& path) {
    add_recent(s.recent_models, path);
    if (s.config_dir.empty()) return;
    app_settings now;
    std::string err = update_settings(s.config_dir, [&](app_settings& a) {
        a.last_model = path;
        a.recent = existing_paths(a.recent); // models deleted since leave the list
        add_recent(a.recent, path);
    }, &now);
    // the file's list also holds what another window opened since this one started
    s.recent_models = existing_paths(now.recent);
    if (!err.empty()) { // said once; the app goes on without remembering
        std::fprintf(stderr, "glassbox: %s: settings are not remembered\n", err.c_str());
        if (s.settings_note.empty()) s.settings_note = err + ": settings are not remembered";
        s.config_dir.clear();
    }
}

} // namespace gbui
