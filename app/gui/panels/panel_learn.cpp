// Learn: a picture of the loaded model (learn_picture.cpp, core/analysis/learn_diagram.h) lit one step at a time
// by the walk along the pipeline for the selected token, layer and head (core/analysis/learn.h); beside or under
// it the step's formula for this architecture, its live shape and the token's own numbers. Back / next (and the
// arrow keys) step; a click on a box goes to its step; a token chip, a head in the grid or a layer cell changes
// what is walked (computed on the analysis thread: the walk reruns the prompt keeping every point of one layer).
// Models the walk does not follow (encoders, image classifiers) get the picture with live shapes and each
// part's formula, without numbers. Then the parameter count derived and Break it (core/analysis/break_it.h):
// the prompt with each part removed in turn, a row per ablation; a click on a row applies it to the whole app.
#include <imgui_internal.h> // FindWindowByName (Present covers the panels under the prompt)

#include <algorithm>
#include <cmath>

#include "demos.h"
#include "learn_view.h"
#include "number_format.h"
#include "tab_inputs.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

namespace {

// The step's numbers as chips: labelled ones (keys, top tokens) shaded by value, plain ones (a vector's first
// values) in a row, then the vector's norm
void step_values(const gb::learn_step& st) {
    if (st.values.empty()) return;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x, lh = ImGui::GetTextLineHeight() + 4;
    ImVec2 pos = ImGui::GetCursorScreenPos();
    const float x0 = pos.x;
    float vmin = 0, vmax = 0;
    for (float v : st.values) vmin = std::min(vmin, v), vmax = std::max(vmax, v);
    char b[96];
    for (size_t i = 0; i < st.values.size(); i++) {
        if (st.labels.empty()) snprintf(b, sizeof b, "%s", format_number(st.values[i]).c_str());
        else snprintf(b, sizeof b, "%s %s", visible_token(st.labels[i]).c_str(), format_number(st.values[i]).c_str());
        const ImVec2 ts = ImGui::CalcTextSize(b);
        if (pos.x + ts.x + 8 > right && pos.x > x0) pos = ImVec2(x0, pos.y + lh + 2);
        const ImVec2 z(pos.x + ts.x + 8, pos.y + lh);
        // shade: the value's place between the smallest and largest shown (viridis), plain grey for a vector's values
        const float t = vmax > vmin ? (st.values[i] - vmin) / (vmax - vmin) : 0.5f;
        const ImU32 bg = st.labels.empty() ? IM_COL32(45, 48, 58, 255) : viridis_u32(t);
        dl->AddRectFilled(pos, z, bg, 3);
        dl->AddText(ImVec2(pos.x + 4, pos.y + 2), !st.labels.empty() && t > 0.6f ? IM_COL32(10, 10, 10, 255) : IM_COL32(235, 235, 240, 255), b);
        pos.x = z.x + 4;
    }
    if (st.labels.empty() && st.width > (int)st.values.size()) {
        snprintf(b, sizeof b, "... (%d values)", st.width);
        if (pos.x + ImGui::CalcTextSize(b).x + 8 > right) pos = ImVec2(x0, pos.y + lh + 2);
        dl->AddText(ImVec2(pos.x + 2, pos.y + 2), IM_COL32(140, 140, 150, 255), b);
        pos.x += ImGui::CalcTextSize(b).x + 8;
    }
    if (st.norm >= 0) {
        snprintf(b, sizeof b, "\u2016x\u2016 = %.4g", st.norm);
        if (pos.x + ImGui::CalcTextSize(b).x + 8 > right) pos = ImVec2(x0, pos.y + lh + 2);
        dl->AddText(ImVec2(pos.x + 6, pos.y + 2), IM_COL32(250, 200, 90, 255), b);
    }
    ImGui::SetCursorScreenPos(ImVec2(x0, pos.y + lh + 4));
    ImGui::Dummy(ImVec2(1, 1));
}

// A step's "see: PANEL" link: underlined, the hand cursor on hover; a click opens the tab or outlines the panel.
void see_link(app_state& s, ui_context& ui, const std::string& panel) {
    ImGui::TextDisabled("see:");
    ImGui::SameLine();
    const ImVec2 at = ImGui::GetCursorScreenPos(), ts = ImGui::CalcTextSize(panel.c_str());
    const bool clicked = ImGui::InvisibleButton("##see", ts);
    const bool hot = ImGui::IsItemHovered();
    remember_item(ui, "learn see " + panel);
    const ImU32 col = hot ? IM_COL32(250, 200, 90, 255) : IM_COL32(120, 180, 250, 255);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddText(at, col, panel.c_str());
    dl->AddLine(ImVec2(at.x, at.y + ts.y), ImVec2(at.x + ts.x, at.y + ts.y), col);
    if (hot) {
        ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
        ImGui::SetTooltip("show it: %s", panel.c_str());
    }
    if (clicked) follow_panel_link(s, ui, panel);
}

// What the Learn tab shows now: the diagram of the loaded model for the shown run, the walk when it is of this
// model (a decoder's; an encoder or a vision model has none), and the step the picture lights.
struct learn_now {
    gb::learn_diagram g;
    const gb::learn_walk* walk = nullptr;
    learn_picture_in in;
    const gb::diagram_box* box = nullptr; // the lit box
    const gb::learn_step* step = nullptr; // the walk's step (nullptr without a walk)
};

learn_now learn_state(const app_state& s, const learn_output* lo) {
    auto& learn_in = inputs_of<learn_inputs>(s, TAB_LEARN);
    learn_now n;
    const run_result* r = s.result && s.result->model == s.model ? s.result.get() : nullptr;
    const gb::model& m = *s.model;
    // T: the run's tokens; before a run (an image classifier without an image) its positions, [CLS] and patches
    const int T = r ? r->lm_record().n_tokens : gb::kind_info_of(m.config).input == gb::INPUT_IMAGE ? m.config.n_ctx : 1;
    const int S = r && r->encoder ? r->encoder->n_tokens : 0;
    n.g = gb::diagram_of(m, T, S);
    if (lo && lo->from && lo->from->model == s.model && n.g.predicts_next) n.walk = &lo->walk;
    n.in.g = &n.g;
    n.in.walk = n.walk;
    if (n.walk) {
        n.in.parts = gb::step_parts(*n.walk);
        n.in.layer = n.walk->layer, n.in.head = n.walk->head, n.in.token = n.walk->token;
        n.in.token_text = visible_token(n.walk->pieces[n.walk->token]);
        for (const gb::learn_step& st : n.walk->steps) // mixtures of experts: the router's top-k for the token
            if (st.title == "Router" && (int)st.values.size() == m.config.n_expert) {
                std::vector<int> order(st.values.size());
                for (size_t e = 0; e < order.size(); e++) order[e] = (int)e;
                const int k = std::min<int>(m.config.n_expert_used, (int)order.size());
                std::partial_sort(order.begin(), order.begin() + k, order.end(),
                                  [&](int a, int b) { return st.values[a] > st.values[b]; });
                n.in.experts.assign(order.begin(), order.begin() + k);
            }
    } else {
        for (const gb::diagram_box& b : n.g.boxes) n.in.parts.push_back(b.part);
        n.in.layer = std::max(0, std::min(s.sel_layer, m.config.n_layer - 1));
        n.in.head = std::max(0, std::min(s.sel_head, m.config.n_head - 1));
        n.in.token = query_token(s, T);
        if (r && n.in.token < (int)r->lm_record().pieces.size()) n.in.token_text = visible_token(r->lm_record().pieces[n.in.token]);
    }
    n.in.step = std::max(0, std::min(learn_in.step, (int)n.in.parts.size() - 1));
    if (!n.in.parts.empty()) n.box = n.g.find(n.in.parts[n.in.step]);
    if (n.walk && n.in.step < (int)n.walk->steps.size()) n.step = &n.walk->steps[n.in.step];
    return n;
}

// The step's heading in words: "layer 1's norm before attention", with the head where the box has one.
std::string step_title(const learn_now& n) {
    if (!n.box) return n.step ? n.step->title : "";
    std::string t = n.box->title;
    if (gb::part_in_layer(n.box->part)) t = "layer " + std::to_string(n.in.layer) + "'s " + t;
    for (const auto& d : n.box->dims)
        if (d.first == "H") return t + ", head " + std::to_string(n.in.head);
    return t;
}

// Every text the tab may show for this model and walk, checked against the font (the script's print reports it).
void check_glyphs(const learn_now& n, learn_view& v) {
    v.missing_glyphs.clear(), v.raw_missing.clear();
    auto check = [&](const std::string& t) {
        missing_glyphs(font_safe(t), v.missing_glyphs);
        missing_glyphs(t, v.raw_missing);
    };
    for (const std::vector<gb::diagram_box>* list : {&n.g.boxes, &n.g.encoder})
        for (const gb::diagram_box& b : *list)
            for (const std::string* t : {&b.label, &b.title, &b.formula, &b.note}) check(*t);
    if (n.walk)
        for (const gb::learn_step& st : n.walk->steps)
            for (const std::string* t : {&st.title, &st.formula, &st.note, &st.shape}) check(*t);
    check(step_title(n));
}

// What a model the walk does not follow gets: the picture, without numbers.
void kind_note(gb::model_kind k) {
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("%s", gb::kind_table(k).input == gb::INPUT_IMAGE
                                  ? "The parts of this image classifier with their live shapes and formulas. No numbers "
                                    "here: the walk follows a language model's next-token prediction."
                                  : "The parts of this encoder with their live shapes and formulas. No numbers here: the "
                                    "walk follows a decoder's next-token prediction (see fill mask and the logit lens).");
    ImGui::PopTextWrapPos();
}

// The step under the picture (or beside it): its formula, shape and link, this token's numbers and the note.
void step_detail(app_state& s, ui_context& ui, const learn_now& n) {
    const std::string formula = font_safe(n.step ? n.step->formula : n.box ? n.box->formula : "");
    const std::string shape = n.step && !n.step->shape.empty() ? n.step->shape : n.box ? n.box->shape() : "";
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(formula.c_str());
    ImGui::PopTextWrapPos();
    ImGui::TextDisabled("shape %s", shape.c_str());
    if (n.step && !n.step->panel.empty()) {
        ImGui::SameLine(0, 16);
        see_link(s, ui, n.step->panel);
    }
    if (n.step) step_values(*n.step);
    const std::string note = font_safe(n.step && !n.step->note.empty() ? n.step->note : n.box ? n.box->note : "");
    if (!note.empty()) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(ImVec4(0.85f, 0.82f, 0.55f, 1), "%s", note.c_str());
        ImGui::PopTextWrapPos();
    }
    ui.learn_drawn.formula = formula;
}

// Back and next (and the arrow keys), the step and its heading; on the right the token walked and the button
// that shows the picture over the window (or brings it back into the tab).
void step_controls(app_state& s, ui_context& ui, const learn_now& n, bool stale) {
    auto& learn_in = inputs_of<learn_inputs>(s, TAB_LEARN);
    const int N = (int)n.in.parts.size();
    if (ImGui::ArrowButton("##learn_prev", ImGuiDir_Left)) learn_in.step = std::max(0, n.in.step - 1);
    remember_item(ui, "learn prev");
    ImGui::SameLine();
    if (ImGui::ArrowButton("##learn_next", ImGuiDir_Right)) learn_in.step = std::min(N - 1, n.in.step + 1);
    remember_item(ui, "learn next");
    if (!ImGui::GetIO().WantTextInput) {
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) learn_in.step = std::max(0, n.in.step - 1);
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) learn_in.step = std::min(N - 1, n.in.step + 1);
        if (ui.learn_drawn.full && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) ui.learn_full = false;
    }
    const std::string title = step_title(n);
    ui.learn_drawn.title = title;
    ImGui::SameLine();
    ImGui::AlignTextToFramePadding();
    ImGui::TextDisabled("%d/%d", n.in.step + 1, N);
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.98f, 0.78f, 0.35f, 1), "%s", title.c_str());
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("\u2190 \u2192 or the arrows step; a click on a part goes to it; a token chip, a head in the grid "
                          "or a layer cell changes what is walked");
    char who[160];
    if (n.walk)
        snprintf(who, sizeof who, "token %d \u2018%s\u2019%s", n.in.token, short_label(n.in.token_text, 12).c_str(),
                 stale ? " (updating...)" : "");
    else snprintf(who, sizeof who, "no numbers for this kind");
    const char* button = ui.learn_drawn.full ? "Back to the tab" : "Present";
    const float bw = ImGui::CalcTextSize(button).x + 2 * ImGui::GetStyle().FramePadding.x;
    const float right = ImGui::GetContentRegionMax().x, ww = ImGui::CalcTextSize(who).x;
    const float title_end = ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x;
    if (title_end + 20 + ww + bw + 12 < right) {
        ImGui::SameLine(right - bw - ww - 12);
        ImGui::TextDisabled("%s", who);
    }
    ImGui::SameLine(right - bw);
    if (ImGui::Button(button)) ui.learn_full = !ui.learn_drawn.full;
    remember_item(ui, "learn present");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(ui.learn_drawn.full ? "back into the Learn tab (Esc)" : "the picture over the window, larger: for a class");
}

// The picture with the step beside it (a wide area) or under it; then what the view drew, for the script.
void learn_picture_and_step(app_state& s, ui_context& ui, const learn_output* lo, bool full, bool beside) {
    auto& learn_in = inputs_of<learn_inputs>(s, TAB_LEARN);
    const learn_now n = learn_state(s, lo);
    const analysis_status& st = s.analysis[ANALYSIS_LEARN];
    learn_view& v = ui.learn_drawn;
    v = learn_view();
    v.frame = ImGui::GetFrameCount();
    v.full = full;
    v.kind = gb::kind_table(n.g.kind).name;
    v.layer = n.in.layer, v.head = n.in.head, v.token = n.in.token;
    v.step = n.in.step, v.steps = (int)n.in.parts.size(), v.walk = n.walk != nullptr;
    v.lit = n.in.parts.empty() ? "" : gb::part_name(n.in.parts[n.in.step]);
    step_controls(s, ui, n, lo && lo->key != s.analysis_want[ANALYSIS_LEARN]);
    if (!n.walk && n.g.predicts_next) {
        if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_LEARN]) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        else ImGui::TextDisabled(st.busy ? "walking through the model..." : "no walk yet");
    }
    const float avail = ImGui::GetContentRegionAvail().x;
    const float pic_w = beside ? avail * 0.62f : avail;
    const ImVec2 o = ImGui::GetCursorScreenPos();
    learn_picture_out out;
    const float used = learn_picture(ui, v, n.in, pic_w, ImGui::GetContentRegionAvail().y, out);
    v.pic_h = used;
    if (out.goto_step >= 0) learn_in.step = out.goto_step;
    if (out.goto_layer >= 0) s.sel_layer = out.goto_layer;
    if (beside) {
        ImGui::SetCursorScreenPos(ImVec2(o.x + pic_w + 20, o.y));
        ImGui::BeginGroup();
        step_detail(s, ui, n);
        if (!n.walk && !n.g.predicts_next) kind_note(n.g.kind);
        ImGui::EndGroup();
        v.step_h = ImGui::GetItemRectSize().y;
        const float bottom = std::max(o.y + used, ImGui::GetItemRectMax().y);
        ImGui::SetCursorScreenPos(ImVec2(o.x, bottom + 4));
        ImGui::Dummy(ImVec2(1, 1));
    } else {
        const float y0 = ImGui::GetCursorScreenPos().y;
        step_detail(s, ui, n);
        if (!n.walk && !n.g.predicts_next) kind_note(n.g.kind);
        v.step_h = ImGui::GetCursorScreenPos().y - y0;
    }
    check_glyphs(n, v);
}

// Present: the tab's picture and step over the whole window under the prompt (whose token chips still choose
// the token), larger, for a class; Esc or its button brings it back into the tab.
void present(app_state& s, ui_context& ui, const learn_output* lo) {
    const ImGuiWindow* prompt = ImGui::FindWindowByName("Prompt");
    const ImVec2 D = ImGui::GetIO().DisplaySize;
    const float top = prompt ? prompt->Pos.y + prompt->Size.y + 4 : 4, h = D.y - top - 30;
    ImGui::SetNextWindowPos(ImVec2(4, top));
    ImGui::SetNextWindowSize(ImVec2(D.x - 8, h));
    ImGui::PushStyleColor(ImGuiCol_WindowBg, IM_COL32(21, 22, 27, 255)); // opaque: the panels under it do not show
    ImGui::Begin("##learn_present", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings |
                                                 ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize);
    ImGui::PopStyleColor();
    // larger text and boxes, as far as the area allows (the font is scaled, not rebuilt): the scale follows the
    // height the content took in the frame before, changed only when it is off by more than a few percent (so
    // that it settles); the step beside the picture or under it, whichever lets the picture be larger
    const bool beside = ui.learn_beside;
    const float k = std::max(1.0f, std::min(2.2f, ui.learn_scale));
    ImGui::SetWindowFontScale(k);
    learn_picture_and_step(s, ui, lo, true, beside);
    const learn_view& v = ui.learn_drawn;
    const float used = ImGui::GetCursorPosY() + ImGui::GetStyle().WindowPadding.y, W = D.x - 8;
    const float fit = std::min(h / std::max(1.0f, used), W * (beside ? 0.62f : 1.0f) / std::max(1.0f, v.need_w + 16));
    if (fit < 0.99f || fit > 1.08f) ui.learn_scale = std::max(1.0f, std::min(2.2f, k * (fit < 1 ? fit * 0.98f : std::min(fit * 0.97f, 1.1f))));
    // the other arrangement's scale, from this frame's sizes at scale 1: the picture (pw x ph), the step's text
    // (its height goes as 1 / its width: 38 % of the window beside, all of it under), the rest above them
    const float pw = (v.need_w + 16) / k, ph = v.pic_h / k, sh = v.step_h / k;
    const float rest = std::max(0.0f, used / k - (beside ? std::max(ph, sh) : ph + sh));
    const float sh_beside = beside ? sh : sh / 0.38f, sh_under = beside ? sh * 0.38f : sh;
    const float k_beside = std::min(W * 0.62f / pw, h / (rest + std::max(ph, sh_beside)));
    const float k_under = std::min(W / pw, h / (rest + ph + sh_under));
    if (v.need_w > 0 && (beside ? k_under > 1.1f * k_beside : k_beside > 1.1f * k_under)) ui.learn_beside = !beside;
    ImGui::End();
}

// The parameter derivation: the textbook estimate, each component with its formula and count.
void parameters(const std::vector<gb::param_line>& lines) {
    ImGui::Separator();
    ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "Parameters");
    if (ImGui::BeginTable("##learn_params", 3, ImGuiTableFlags_SizingFixedFit)) {
        for (const gb::param_line& p : lines) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(p.what.c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%12lld", (long long)p.count);
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", p.formula.c_str());
        }
        ImGui::EndTable();
    }
}


// "34 %", "3.2 %", "0.052 %"
std::string percent(double p) {
    char b[32];
    const double x = 100 * p;
    snprintf(b, sizeof b, x >= 9.95 ? "%.0f %%" : x >= 0.995 ? "%.1f %%" : x >= 0.001 || x == 0 ? "%.2g %%" : "< 0.001 %%", x);
    return b;
}

// The table of Break it: a row per ablation with its numbers; the row the demo applies is highlighted; when it
// changes the section scrolls to the top of the view (or the row to its middle, when the table is taller than
// the view); a click applies a row; its sentence is the tooltip.
// Break it's table: the model as it is, then a row per part removed (a click applies it to the whole app; big:
// presenting the demo, stretched over the tab and noted as its picture).
static void break_table(app_state& s, ui_context& ui, const break_output& bo, bool stepping, bool big, bool moved_row,
                        float title_y) {
    const break_output* b = &bo;
    const gb::break_result& res = b->res;
    const gb::tokenizer& tok = b->model->tok;
    const bool current = break_is_current(b, s.model, s.prompt, s.bos);
    const std::string base = quoted(tok, res.base_top_id);
    double max_kl = 0;
    for (const gb::break_row& r : res.rows)
        if (std::isfinite(r.kl)) max_kl = std::max(max_kl, r.kl);
    const std::string keeps = "p(" + base + ")";
    // presenting: rows as tall as share the height (up to twice a line), columns stretched over the width
    const float line = ImGui::GetTextLineHeight(), rows_h = ImGui::GetContentRegionAvail().y - px(8);
    const float pad_y = big ? std::clamp((rows_h / (res.rows.size() + 2) - line) / 2, ImGui::GetStyle().CellPadding.y, line / 2)
                            : ImGui::GetStyle().CellPadding.y;
    ImGui::PushStyleVar(ImGuiStyleVar_CellPadding, ImVec2(ImGui::GetStyle().CellPadding.x, pad_y));
    const ImVec2 table_at = ImGui::GetCursorScreenPos();
    const bool table = ImGui::BeginTable("##break_it", big ? 5 : 6, (big ? ImGuiTableFlags_SizingStretchProp : ImGuiTableFlags_SizingFixedFit) |
                                                                       ImGuiTableFlags_RowBg);
    ImGui::PopStyleVar();
    if (table) {
        // the headers drawn whole: p(‘##’) names a token (a TableSetupColumn name would be cut at "##")
        // (presenting, the top-1's probability shares its column: the table fits the width at the larger text)
        std::vector<std::string> heads = {"removed", "top-1", "p", keeps, "KL (nats)", "\u2016x\u2016 last"};
        if (big) heads.erase(heads.begin() + 2);
        for (const std::string& h : heads)
            ImGui::TableSetupColumn(("##" + h).c_str(), h == "KL (nats)" ? ImGuiTableColumnFlags_WidthFixed : 0,
                                    h == "KL (nats)" ? px(100) : 0.0f);
        text_headers(heads);
        note_text(ui, "break keeps", keeps);
        // the model as it is, for comparison (a click restores it)
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (ImGui::Selectable("nothing removed##break_none", stepping && s.demos.break_row < 0, ImGuiSelectableFlags_SpanAllColumns) &&
            current)
            break_step(s, -1);
        remember_item(ui, "break row none");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("click: the model as it is, nothing ablated");
        ImGui::TableNextColumn();
        if (big) {
            ImGui::Text("%s %s", base.c_str(), percent(res.base_top_prob).c_str());
        } else {
            ImGui::TextUnformatted(base.c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(percent(res.base_top_prob).c_str());
        }
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(percent(res.base_top_prob).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(" 0");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(format_number(res.base_resid_norm).c_str());
        for (size_t i = 0; i < res.rows.size(); i++) {
            const gb::break_row& r = res.rows[i];
            const bool on = stepping && s.demos.break_row == (int)i;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (on && moved_row && ImGui::GetCursorPosY() - title_y > ImGui::GetWindowHeight() - 2 * ImGui::GetTextLineHeightWithSpacing())
                ImGui::SetScrollHereY(0.5f);
            const std::string label = r.label + "##break" + std::to_string(i);
            if (ImGui::Selectable(label.c_str(), on, ImGuiSelectableFlags_SpanAllColumns) && current) break_step(s, (int)i);
            remember_item(ui, "break row " + std::to_string(i));
            if (ImGui::IsItemHovered()) {
                ImGui::BeginTooltip();
                ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32);
                ImGui::TextUnformatted(visible_quotes(r.explanation).c_str());
                ImGui::TextDisabled("click: apply %s to the whole app", r.ab.describe().c_str());
                ImGui::PopTextWrapPos();
                ImGui::EndTooltip();
            }
            ImGui::TableNextColumn();
            const bool moved = r.top_id != res.base_top_id;
            ImGui::TextColored(moved ? ImVec4(1, 0.55f, 0.45f, 1) : ImVec4(0.85f, 0.85f, 0.88f, 1), "%s", quoted(tok, r.top_id).c_str());
            if (big) ImGui::SameLine();
            else ImGui::TableNextColumn();
            ImGui::TextUnformatted(percent(r.top_prob).c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(percent(r.base_top_prob).c_str());
            ImGui::TableNextColumn();
            // a bar by KL on a square-root scale (small changes stay visible next to a broken model's thousands)
            const ImVec2 a = ImGui::GetCursorScreenPos();
            const float w = px(96), h = ImGui::GetTextLineHeight();
            const float f = max_kl > 0 && std::isfinite(r.kl) ? (float)std::sqrt(r.kl / max_kl) : 1.0f;
            ImGui::GetWindowDrawList()->AddRectFilled(a, ImVec2(a.x + w * f, a.y + h), IM_COL32(150, 70, 60, 200));
            const std::string kl = format_number(r.kl), norm = format_number(r.resid_norm);
            ImGui::Text(" %s", kl.c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(norm.c_str());
            note_text(ui, "break kl " + std::to_string(i), kl);
            note_text(ui, "break norm " + std::to_string(i), norm);
        }
        ImGui::EndTable();
        if (big) note_drawn(ui, "picture", table_at, ImGui::GetItemRectMax());
    }
}

void break_section(app_state& s, ui_context& ui) {
    ImGui::Separator();
    const bool stepping = s.demos.kind == DEMO_BREAK, moved_row = stepping && ui.break_row_shown != s.demos.break_row;
    const float title_y = ImGui::GetCursorPosY();
    ImGui::TextColored(ImVec4(0.55f, 0.78f, 1.0f, 1), "Break it, with this model's numbers");
    if (moved_row) ImGui::SetScrollY(title_y); // the title at the top of the view
    remember_item(ui, "break it");
    const analysis_status& st = s.analysis[ANALYSIS_BREAK];
    const break_output* b = output_of<break_output>(s, ANALYSIS_BREAK).get();
    if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_BREAK]) {
        ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
        return;
    }
    if (!b || b->choice) {
        if (st.busy) ImGui::TextDisabled("removing each part of the model in turn... %.0f %%", 100 * st.progress);
        else ImGui::TextDisabled("no result yet");
        return;
    }
    const gb::break_result& res = b->res;
    const gb::tokenizer& tok = b->model->tok;
    const bool current = break_is_current(b, s.model, s.prompt, s.bos);
    const std::string base = quoted(tok, res.base_top_id);
    const bool big = s.presenting && stepping; // the demo's picture: the table fills the tab
    if (!big) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("Each row removes one part of the model and runs \u201c%s\u201d again: the prediction, what %s "
                            "keeps, KL(baseline \u2016 ablated), and the last token's \u2016x\u2016 after the last layer. Click a "
                            "row to apply it to the whole app; hover it for what changed.%s",
                            display_text(b->prompt).c_str(), base.c_str(),
                            current ? "" : st.busy ? "  (updating...)" : "  (of an earlier prompt)");
        ImGui::PopTextWrapPos();
    }
    break_table(s, ui, *b, stepping, big, moved_row, title_y);
    if (!res.note.empty()) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", res.note.c_str());
        ImGui::PopTextWrapPos();
    }
    // while the demo steps, room below the table so that its title can scroll to the top of the view (the walk's end
    // above it is not what the class should be reading)
    const float section_h = ImGui::GetCursorPosY() - title_y, view_h = ImGui::GetWindowHeight(); // (a child without padding)
    if (stepping && !big && section_h < view_h) ImGui::Dummy(ImVec2(1, view_h - section_h));
    ui.break_row_shown = stepping ? s.demos.break_row : -2;
}

// For a Pre-LN decoder: what the original Transformer did differently, and which model to open to walk it.
void other_designs(const gb::model& m) {
    const gb::arch_info& a = gb::arch_table(m.config.arch);
    if (a.post_ln || gb::kind_info_of(m.config).input == gb::INPUT_SOURCE_TARGET) return;
    if (!ImGui::CollapsingHeader("Post-LN and sinusoidal positions: the original Transformer")) return;
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled(
        "%s norms a copy of the stream before each sublayer (Pre-LN) and %s. The 2017 Transformer did both differently: "
        "the norm came after each residual add, on the stream itself (Post-LN: x ← LayerNorm(x + sublayer(x))), and "
        "the position was a fixed table of sines and cosines added to the embedding (PE[p, i] = sin(p / 10000^(2i/d)), "
        "with cos beside it), nothing learned. It was an encoder–decoder: the decoder's cross-attention reads the "
        "encoder's output. Marian translation models (Helsinki-NLP/opus-mt-*) are built this way: open one's folder "
        "and this walk follows its decoder, the cross-attention to the source included.",
        a.name,
        a.pos == gb::POS_ROPE ? "rotates q and k by the position (RoPE)" : "adds a learned table for the position");
    ImGui::PopTextWrapPos();
}

} // namespace

// The parameter derivation of the loaded model (the walk's when it has one; else made once per model).
static const std::vector<gb::param_line>& model_params(const app_state& s, const learn_output* lo) {
    if (lo && lo->from && lo->from->model == s.model) return lo->params;
    static std::weak_ptr<const gb::model> made_for;
    static std::vector<gb::param_line> lines;
    if (made_for.lock() != s.model) made_for = s.model, lines = gb::param_derivation(*s.model);
    return lines;
}

void panel_learn(app_state& s, ui_context& ui) {
    const learn_output* lo = output_of<learn_output>(s, ANALYSIS_LEARN).get();
    const run_result* r = s.result.get();
    ImGui::BeginChild("##learn_steps", ImVec2(0, 0), false);
    if (!s.model) {
        ImGui::TextDisabled(s.loading ? "loading the model..." : "no model yet");
    } else if (s.presenting && s.demos.kind == DEMO_BREAK) {
        // Break it in front of a class: its table alone, at the top (the Demo panel beside it says what to look at)
    } else if (ui.learn_full) {
        ImGui::TextDisabled("The picture is shown over the window (Present): Esc or its button brings it back here.");
        if (ImGui::Button("Back to the tab")) ui.learn_full = false;
        present(s, ui, lo);
    } else {
        learn_picture_and_step(s, ui, lo, false, ImGui::GetContentRegionAvail().x >= 1000);
        if (r && source_shown(*r))
            ImGui::TextDisabled("The grid shows the encoder now: Show decoder picks the target's tokens; until then the "
                                "walk follows the last one.");
        other_designs(*s.model);
        parameters(model_params(s, lo));
    }
    if (s.model && !ui.learn_full && gb::offers(s.model->config, gb::FEATURE_BREAK_IT)) break_section(s, ui);
    ImGui::EndChild();
}

} // namespace gbui
