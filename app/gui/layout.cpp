// The window's layout: panel windows placed by the window's size, the left column's and the analyses' tab
// bars, and the status bar.
#include "layout.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "model_picker.h"
#include "text_scale.h"
#include "view.h"

namespace gbui {

static void panel_window(const char* id, ImVec2 pos, ImVec2 size, void (*draw)(app_state&, ui_context&), app_state& s,
                         ui_context& ui, ImGuiWindowFlags extra = 0) {
    ImGui::SetNextWindowPos(pos);
    ImGui::SetNextWindowSize(size);
    ImGuiWindowFlags f = extra | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove |
                         ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoBringToFrontOnFocus |
                         ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing;
    // (a panel that appears as the layout changes, e.g. the left column unfolding while a splitter is dragged,
    // must not take the focus: ImGui would end the drag)
    if (ImGui::Begin(id, nullptr, f)) {
        float y0 = ImGui::GetCursorPosY();
        draw(s, ui);
        ui.content_h[id] = ImGui::GetCursorPosY() - y0; // what the panel would need (layout, next frame)
        panel_title_line(s, ui, id); // double-click: fill the window; right-click: its menu
    }
    if (ui.flash_window == id) { // a Learn link points here: a pulsing outline, gone after 1.5 s
        const double left = std::chrono::duration<double>(ui.flash_until - std::chrono::steady_clock::now()).count();
        if (left > 0) {
            const float a = 0.55f + 0.45f * (float)std::cos(left * 9.0);
            ImGui::GetForegroundDrawList()->AddRect(pos, ImVec2(pos.x + size.x, pos.y + size.y),
                                                    IM_COL32(250, 200, 90, (int)(255 * a)), 4, 0, 3);
        } else {
            ui.flash_window.clear();
        }
    }
    ImGui::End();
}

// The left column when Ablations and Model do not both fit (short windows): one panel with two tabs.
static void left_tabs(app_state& s, ui_context& ui) {
    if (ImGui::BeginTabBar("##left")) {
        using draw_fn = void (*)(app_state&, ui_context&);
        const std::pair<const char*, draw_fn> tabs[] = {{"Ablations", panel_ablations}, {"Model", panel_model}};
        for (auto [name, draw] : tabs) {
            const bool model = std::string(name) == "Model";
            const bool opened = ImGui::BeginTabItem(name, nullptr, model && ui.select_model_tab ? ImGuiTabItemFlags_SetSelected : 0);
            if (model) ui.select_model_tab = false;
            if (opened) {
                float y0 = ImGui::GetCursorPosY();
                draw(s, ui);
                ui.content_h[name] = ImGui::GetCursorPosY() - y0;
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

// Presentation mode's right column, under the attention grid: the prediction, the residual stream and the
// ablations as tabs, one at a time at a size the class can read (the teacher switches; a knock-out stays at hand).
// With a demo's caption above them, the attention grid is one of the tabs.
static void side_tabs(app_state& s, ui_context& ui) {
    if (ImGui::BeginTabBar("##side", ImGuiTabBarFlags_FittingPolicyScroll)) {
        using draw_fn = void (*)(app_state&, ui_context&);
        const std::pair<const char*, draw_fn> tabs[] = {
            {"Next token", panel_output}, {"Heads", panel_overview}, {"Residual", panel_residual}, {"Ablations", panel_ablations}};
        for (auto [name, draw] : tabs) {
            if (draw == panel_overview && s.demos.kind == DEMO_NONE) continue; // (the grid has its own panel above)
            const bool open = ImGui::BeginTabItem(name);
            remember_item(ui, std::string("side tab ") + name);
            if (open) {
                draw(s, ui);
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

// Under the attention grid: the head detail and the three analyses, as tabs. A tab chosen elsewhere (a click
// on an attribution head, a script, a session) is selected through ImGui; until ImGui shows it, the bar's
// current tab does not overwrite s.tab.
static void analysis_tabs(app_state& s, ui_context& ui) {
    // (a tab this model lacks has fallen back to Head in update_state)
    // presenting, the tabs keep their whole names and scroll (shrunk to "He\u2026 Lo\u2026" no one can read them)
    if (ImGui::BeginTabBar("##analysis", s.presenting ? ImGuiTabBarFlags_FittingPolicyScroll : 0)) {
        const bool forced = s.tab != ui.tab_shown;
        for (int t = 0; t < TAB_COUNT; t++) {
            if (!tab_available((analysis_tab)t, s.model.get())) continue;
            ImGuiTabItemFlags f = forced && t == s.tab ? ImGuiTabItemFlags_SetSelected : 0;
            const tab_entry& e = tab_info((analysis_tab)t);
            bool open = ImGui::BeginTabItem(e.label, nullptr, f);
            remember_item(ui, std::string("tab ") + e.label);
            if (open) {
                ui.tab_shown = (analysis_tab)t;
                if (!forced) s.tab = (analysis_tab)t;
                e.draw(s, ui);
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

// The panel windows by id, and what draws each.
static void (*panel_draw(const std::string& id))(app_state&, ui_context&) {
    static const std::pair<const char*, void (*)(app_state&, ui_context&)> table[] = {
        {"Prompt", panel_prompt},     {"Ablations", panel_ablations}, {"Model", panel_model},   {"Left", left_tabs},
        {"Overview", panel_overview}, {"Analysis", analysis_tabs},    {"Output", panel_output}, {"Residual", panel_residual},
        {"Side", side_tabs},          {"Demo", panel_demo}};
    for (const auto& [name, draw] : table)
        if (id == name) return draw;
    return nullptr;
}

// The status bar: the one-line error (previous result stays on screen), else the last status; the frame rate and
// the File and View menus at the right.
static void status_bar(app_state& s, ui_context& ui, ImVec2 pos, ImVec2 size) {
    ImGui::SetNextWindowPos(pos);
    ImGui::SetNextWindowSize(size);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(px(10), px(3)));
    ImGui::Begin("Status", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoMove);
    ImGui::PopStyleVar();
    char view[48];
    snprintf(view, sizeof view, "View: text %.0f %%%s", shown_ui_scale(s) * 100, s.presenting ? ", presenting" : "");
    const float file_w = ImGui::CalcTextSize("File").x + 2 * ImGui::GetStyle().FramePadding.x + ImGui::GetStyle().ItemSpacing.x;
    const float menu_w = ImGui::CalcTextSize(view).x + 2 * ImGui::GetStyle().FramePadding.x + file_w;
    const float fps_w = ImGui::CalcTextSize("000 fps").x + px(16);
    ImGui::PushClipRect(ImGui::GetWindowPos(), ImVec2(pos.x + size.x - menu_w - fps_w - px(16), pos.y + size.y), true);
    if (!s.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "error: %s", s.error.c_str());
    else if (!s.warning.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.warning.c_str());
    else if (s.loading) ImGui::Text("loading model... %.0f%%", s.load_progress * 100);
    else if (s.busy) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "running...");
    else if (s.result && !s.result->notice.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.result->notice.c_str());
    else if (s.presenting && s.status.empty()) ImGui::TextDisabled("presentation mode: F5 or Esc leaves it");
    else ImGui::TextDisabled("%s", s.status.empty() ? "ready" : s.status.c_str());
    ImGui::PopClipRect();
    ImGui::SameLine(ImGui::GetWindowWidth() - menu_w - fps_w - px(10));
    ImGui::TextDisabled("%.0f fps", ImGui::GetIO().Framerate);
    ImGui::SameLine(ImGui::GetWindowWidth() - menu_w - px(10));
    file_menu(s, ui); // "Open a model..." and the recent models
    ImGui::SameLine();
    view_menu(s, ui);
    ImGui::End();
}

void draw_panel_alone(app_state& s, ui_context& ui, const std::string& id, ImVec2 size) {
    if (auto draw = panel_draw(id)) panel_window(id.c_str(), ImVec2(0, 0), size, draw, s, ui);
}

static float wanted_grid_height(const app_state& s, const ui_context& ui, float w, float lo, float hi);

// The Overview's height: its grid's square thumbnails as large as the middle column's width allows, within 30 %
// and 42 % of the body (50 % on tall windows, where the analyses below have room to spare).
static float overview_height(const app_state& s, const ui_context& ui, float mid_w, float body_h) {
    // (tall: in pixels as the text scale counts them, or a window 1000 px high whatever its text scale: at 1920x1080
    // with 150 % text the 6 x 8 grid's thumbnails are then 40 px and more)
    // (a demo's picture is in the tabs below: the grid takes its least, 30 to 36 %)
    const bool tall = body_h > px(760) || ImGui::GetIO().DisplaySize.y >= 1000;
    const float lo = body_h * 0.3f, hi = body_h * (s.demos.kind != DEMO_NONE ? 0.36f : tall ? 0.5f : 0.42f);
    return wanted_grid_height(s, ui, mid_w, lo, hi);
}

// The height the Overview needs for square thumbnails as wide as w allows, within [lo, hi] (hi without a result).
static float wanted_grid_height(const app_state& s, const ui_context& ui, float w, float lo, float hi) {
    if (!s.result) return hi;
    const int L = s.result->cap().n_layer, H = s.result->cap().n_head;
    const auto it = ui.content_h.find("Overview fixed");
    const float fixed = it != ui.content_h.end() ? it->second : px(70);
    const float gap = px(3), label_w = px(34), pad = 2 * ImGui::GetStyle().WindowPadding.x;
    const float cell = (w - pad - label_w) / H - gap;
    const float want = fixed + px(18) + L * (cell + gap) + ImGui::GetStyle().WindowPadding.y; // fixed: from the top
    return std::max(lo, std::min(hi, want));
}

// Presentation mode: the pictures get the room. The prompt strip (one row: the box, BOS and the demos; then the
// tokens, two rows at most) takes at most a fifth of the height; the analysis tab the demo opened (or the one
// chosen) fills the left 68 % of the rest from top to bottom; on the right, the attention grid over Next token,
// Residual and Ablations as tabs, or with a demo its caption beside its picture over those tabs and the grid's.
static void presentation_layout(app_state& s, ui_context& ui, float W, float H, float g, float status_h) {
    float prompt_h = std::min(H * 0.2f, std::max(px(60), ui.prompt_wanted_h));
    const float least = ui.content_h["Prompt least"], row = ui.content_h["Prompt row"];
    if (prompt_h < ui.prompt_wanted_h && row > 0 && least <= prompt_h) // whole rows of tokens, no empty band below them
        prompt_h = least + std::floor((prompt_h - least) / row) * row;
    prompt_h = std::round(prompt_h);
    panel_window("Prompt", ImVec2(g, g), ImVec2(W - 2 * g, prompt_h - g), panel_prompt, s, ui);
    const float body_y = prompt_h + g, body_h = H - body_y - status_h - g;
    const float right_w = std::round(W * 0.32f), main_w = W - right_w - 3 * g, right_x = 2 * g + main_w;
    panel_window("Analysis", ImVec2(g, body_y), ImVec2(main_w, body_h), analysis_tabs, s, ui);
    if (s.demos.kind != DEMO_NONE) { // the caption as tall as its text, up to 62 % (then it scrolls); the grid becomes a tab
        const float pad = 2 * ImGui::GetStyle().WindowPadding.y + px(4);
        const float cap_h = std::round(std::clamp(ui.content_h["Demo"] + pad, px(60), body_h * 0.62f));
        panel_window("Demo", ImVec2(right_x, body_y), ImVec2(right_w, cap_h - g), panel_demo, s, ui);
        panel_window("Side", ImVec2(right_x, body_y + cap_h), ImVec2(right_w, body_h - cap_h), side_tabs, s, ui);
    } else {
        // (at most half: Next token's rows and Generate below it stay in view at 1280 x 720)
        const float over_h = std::round(wanted_grid_height(s, ui, right_w, body_h * 0.36f, body_h * 0.5f));
        panel_window("Overview", ImVec2(right_x, body_y), ImVec2(right_w, over_h - g), panel_overview, s, ui);
        panel_window("Side", ImVec2(right_x, body_y + over_h), ImVec2(right_w, body_h - over_h), side_tabs, s, ui);
    }
    status_bar(s, ui, ImVec2(g, H - status_h), ImVec2(W - 2 * g, status_h - g));
}

// One splitter: an invisible window over the gap a..z between two panels (on top of them: they never come to the
// front). Dragging sets ui.split[k] to fraction(mouse), kept in [lo, hi]; a double-click returns to the automatic
// size (0). Either is written to settings.json when the mouse lets go.
static void splitter(app_state& s, ui_context& ui, split_kind k, ImVec2 a, ImVec2 z, float lo, float hi,
                     const std::function<float(ImVec2)>& fraction) {
    static const char* names[SPLIT_COUNT] = {"splitter left", "splitter right", "splitter grid", "splitter residual"};
    const bool vertical = z.y - a.y > z.x - a.x; // a vertical bar moves left and right
    ImGui::SetNextWindowPos(a);
    ImGui::SetNextWindowSize(ImVec2(z.x - a.x, z.y - a.y));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowMinSize, ImVec2(1, 1));
    ImGui::Begin(names[k], nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoBackground | ImGuiWindowFlags_NoMove |
                                        ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav);
    ImGui::PopStyleVar(2);
    ImGui::InvisibleButton("##split", ImVec2(z.x - a.x, z.y - a.y));
    remember_item(ui, names[k]);
    const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
    if (hovered || active) {
        ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
        const ImVec2 c((a.x + z.x) / 2, (a.y + z.y) / 2); // a line along the gap while it can be dragged
        ImGui::GetForegroundDrawList()->AddLine(vertical ? ImVec2(c.x, a.y) : ImVec2(a.x, c.y), vertical ? ImVec2(c.x, z.y) : ImVec2(z.x, c.y),
                                                active ? IM_COL32(250, 200, 90, 255) : IM_COL32(140, 170, 220, 200), px(2));
    }
    bool changed = false;
    if (hovered && ImGui::IsMouseDoubleClicked(0)) ui.split[k] = 0, changed = true;
    else if (active && ImGui::IsMouseDragging(0, 0.0f)) ui.split[k] = std::clamp(fraction(ImGui::GetIO().MousePos), lo, hi);
    if (ImGui::IsItemDeactivated()) changed = true;
    ImGui::End();
    if (changed && !s.config_dir.empty()) {
        const float now[SPLIT_COUNT] = {ui.split[0], ui.split[1], ui.split[2], ui.split[3]};
        std::string err = update_settings(s.config_dir, [&](app_settings& st) { std::copy(now, now + SPLIT_COUNT, st.split); });
        if (!err.empty()) std::fprintf(stderr, "glassbox: %s: the layout is not remembered\n", err.c_str());
    }
}

void draw_layout(app_state& s, ui_context& ui, float W, float H) {
    fold_explanations(s.presenting || !ui.explain_full);
    hide_tab_hints(s.presenting && s.demos.kind != DEMO_NONE);
    ui.drawn.clear();
    ui.texts.clear();
    ui.next_rows.clear();
    const float g = px(4), status_h = ImGui::GetTextLineHeight() + px(6) + g;
    if (!ui.maximised.empty() && !panel_draw(ui.maximised)) ui.maximised.clear();
    if (!ui.maximised.empty()) { // one panel fills the window (Esc, F11 or a double-click on its title returns)
        panel_window(ui.maximised.c_str(), ImVec2(g, g), ImVec2(W - 2 * g, H - status_h - 2 * g), panel_draw(ui.maximised), s, ui);
        status_bar(s, ui, ImVec2(g, H - status_h), ImVec2(W - 2 * g, status_h - g));
        return;
    }
    if (s.presenting) return presentation_layout(s, ui, W, H, g, status_h);
    // the prompt panel grows with its text and token chips (up to 26% of the window, or what leaves its first row of
    // chips in view below a demo's caption; then they scroll)
    const float prompt_min = std::max(px(100), ui.content_h["Prompt least"]);
    const float prompt_cap = std::min(H * 0.45f, std::max(H * 0.26f, prompt_min));
    float prompt_h = std::max(prompt_min, std::min(ui.prompt_wanted_h > 0 ? ui.prompt_wanted_h : px(150), prompt_cap));
    float body_y = prompt_h + g, body_h = H - body_y - status_h - g;
    // the columns: as the splitters were left, else 22 % and 29 %; the middle, which holds the analyses, the rest
    // (never under a quarter of the width)
    float left_w = W * (ui.split[SPLIT_LEFT] > 0 ? ui.split[SPLIT_LEFT] : 0.22f);
    float right_w = W * (ui.split[SPLIT_RIGHT] > 0 ? ui.split[SPLIT_RIGHT] : 0.29f);
    const float sides = left_w + right_w, room = W * 0.75f - 4 * g;
    if (sides > room) left_w *= room / sides, right_w *= room / sides;
    float mid_w = W - left_w - right_w - 4 * g;
    float mid_x = left_w + 2 * g, right_x = mid_x + mid_w + g;
    panel_window("Prompt", ImVec2(g, g), ImVec2(W - 2 * g, prompt_h - g), panel_prompt, s, ui);
    // left column: Ablations over Model, each as tall as its content, when both fit; else tabs (with some
    // hysteresis so that a scrollbar's width cannot make it flip every frame)
    const float pad = 2 * ImGui::GetStyle().WindowPadding.y + px(4);
    float abl_h = ui.content_h["Ablations"] + pad, model_h = ui.content_h["Model"] + pad;
    // as tabs, the panel not shown is not measured: with another model, width or scale, measure both again (one
    // frame as two panels), else a column folded at a narrower width would stay folded
    const std::string measured = std::to_string((uintptr_t)s.model.get()) + " " + std::to_string((int)left_w) + " " +
                                 std::to_string(ImGui::GetFontSize());
    if (measured != ui.left_measured) ui.left_tabs = false, ui.left_measured = measured;
    else if (abl_h + model_h + g > body_h) ui.left_tabs = true;
    else if (abl_h + model_h + g < body_h - px(40)) ui.left_tabs = false;
    if (ui.left_tabs) {
        panel_window("Left", ImVec2(g, body_y), ImVec2(left_w, body_h), left_tabs, s, ui);
    } else {
        ui.select_model_tab = false; // (only the frame after "How it differs" opened, should the column become tabs)
        // Model is as tall as its content, or capped (then it scrolls). Uncapped it never shows a scrollbar: one
        // appearing would narrow the text, wrap it onto more lines, grow the panel, drop the scrollbar, and so on,
        // a panel that jumps every frame
        const float full_h = model_h > pad ? model_h : body_h * 0.44f;
        model_h = std::min(full_h, body_h * 0.6f);
        panel_window("Ablations", ImVec2(g, body_y), ImVec2(left_w, body_h - model_h - g), panel_ablations, s, ui);
        panel_window("Model", ImVec2(g, body_y + body_h - model_h), ImVec2(left_w, model_h), panel_model, s, ui,
                     full_h <= model_h ? ImGuiWindowFlags_NoScrollbar : 0);
    }
    const float over_h = ui.split[SPLIT_GRID] > 0 ? std::round(body_h * ui.split[SPLIT_GRID]) : overview_height(s, ui, mid_w, body_h);
    panel_window("Overview", ImVec2(mid_x, body_y), ImVec2(mid_w, over_h - g), panel_overview, s, ui);
    panel_window("Analysis", ImVec2(mid_x, body_y + over_h), ImVec2(mid_w, body_h - over_h), analysis_tabs, s, ui);
    // right column: the residual panel as tall as its chart, its heatmap's labelled rows and captions need (at least
    // 48 %, at most 56 %); the next-token panel above it takes the rest (it scrolls when short)
    const float resid_want = ui.content_h["Residual wanted"] + 2 * ImGui::GetStyle().WindowPadding.y;
    const float resid_h = ui.split[SPLIT_RESIDUAL] > 0 ? std::round(body_h * ui.split[SPLIT_RESIDUAL])
                                                        : std::max(body_h * 0.48f, std::min(body_h * 0.56f, resid_want));
    panel_window("Output", ImVec2(right_x, body_y), ImVec2(right_w, body_h - resid_h - g), panel_output, s, ui);
    panel_window("Residual", ImVec2(right_x, body_y + body_h - resid_h), ImVec2(right_w, resid_h), panel_residual, s, ui);
    // the splitters, over the gaps (a pixel into each panel on either side, so that a 4-pixel gap is easy to catch)
    const float e = px(1), body_z = body_y + body_h;
    splitter(s, ui, SPLIT_LEFT, ImVec2(g + left_w - e, body_y), ImVec2(mid_x + e, body_z), 0.1f, 0.4f,
             [&](ImVec2 m) { return (m.x - 1.5f * g) / W; });
    splitter(s, ui, SPLIT_RIGHT, ImVec2(right_x - g - e, body_y), ImVec2(right_x + e, body_z), 0.15f, 0.45f,
             [&](ImVec2 m) { return (W - m.x - 1.5f * g) / W; });
    splitter(s, ui, SPLIT_GRID, ImVec2(mid_x, body_y + over_h - g - e), ImVec2(mid_x + mid_w, body_y + over_h + e), 0.15f, 0.85f,
             [&](ImVec2 m) { return (m.y - body_y + g / 2) / body_h; });
    splitter(s, ui, SPLIT_RESIDUAL, ImVec2(right_x, body_z - resid_h - g - e), ImVec2(right_x + right_w, body_z - resid_h + e),
             0.15f, 0.85f, [&](ImVec2 m) { return (body_z - m.y - g / 2) / body_h; });
    status_bar(s, ui, ImVec2(g, H - status_h), ImVec2(W - 2 * g, status_h - g));
}

void set_style() {
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 4;
    st.FrameRounding = 3;
    st.WindowPadding = ImVec2(10, 8);
    keep_pristine_style(); // every text scale is made from this one (text_scale.h)
}

} // namespace gbui
