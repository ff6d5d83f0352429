// Prompt panel: the text (wrapped; an editor when clicked; re-runs as you type), what the last run computed
// (the live engine's status line), and the token strip (click a chip to select a query; generated tokens of a
// replayed continuation in gold).
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "demos.h"
#include "file_dialog.h"
#include "tab_inputs.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

// Puts the editor's cursor at the end of the text on its first active frame (it would start at 0).
static int cursor_to_end(ImGuiInputTextCallbackData* d) {
    bool* pending = (bool*)d->UserData;
    if (*pending && d->EventFlag == ImGuiInputTextFlags_CallbackAlways) {
        d->CursorPos = d->SelectionStart = d->SelectionEnd = d->BufTextLen;
        *pending = false;
    }
    return 0;
}

// text's first line, cut with an ellipsis to fit w (at a UTF-8 boundary)
static std::string cut_to_width(const std::string& text, float w) {
    std::string line = text.substr(0, std::min(text.find('\n'), (size_t)512)); // (no screen shows more in a line)
    if (line.size() == text.size() && ImGui::CalcTextSize(line.c_str()).x <= w) return line;
    // the longest prefix that fits with the ellipsis, by bisection (drawn every frame while presenting: a few
    // measurements, not one per character)
    size_t lo = 0, hi = line.size();
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        while (mid > lo && ((unsigned char)line[mid] & 0xC0) == 0x80) mid--; // a character's first byte
        if (mid == lo) break;
        if (ImGui::CalcTextSize((line.substr(0, mid) + "\u2026").c_str()).x <= w) lo = mid;
        else hi = mid - 1;
    }
    return line.substr(0, lo) + "\u2026";
}

// The prompt box: the text wrapped to the box's width (ImGui 1.86's multi-line editor cannot wrap), and the
// editor in its place once clicked, until it loses focus. Returns the box's height.
static float prompt_box(app_state& s, ui_context& ui, float box_w) {
    const ImGuiStyle& st = ImGui::GetStyle();
    const float lh = ImGui::GetTextLineHeight();
    std::string shown = display_text(s.prompt);
    float text_h = ImGui::CalcTextSize(shown.c_str(), nullptr, false, box_w - 2 * st.FramePadding.x - px(14)).y;
    // presenting, two lines at most (one above a demo's caption): the caption and the tokens are what the class reads
    const float most = !s.presenting ? 5.0f : s.demos.kind != DEMO_NONE ? 1.0f : 2.0f; // (a demo's caption follows)
    float box_h = std::max(s.presenting ? 1.0f * lh : 2.2f * lh, std::min(text_h, most * lh)) + 2 * st.FramePadding.y + 2;
    if (ui.prompt_editing) {
        if (ui.prompt_edit_frames == 0) ImGui::SetKeyboardFocusHere(), ui.prompt_cursor_to_end = true;
        if (ImGui::InputTextMultiline("##prompt", &s.prompt, ImVec2(box_w, box_h), ImGuiInputTextFlags_CallbackAlways,
                                      cursor_to_end, &ui.prompt_cursor_to_end))
            inputs_of<lens_inputs>(s, TAB_LENS).target = -1; // new text: the lens follows its own prediction again
        remember_item(ui, "prompt");
        // focus arrives a frame or two after the request; after that, leaving the editor shows the text again
        if (ImGui::IsItemActive()) ui.prompt_edit_frames = std::max(ui.prompt_edit_frames, 3);
        else if (++ui.prompt_edit_frames > 3) ui.prompt_editing = false;
        return box_h;
    }
    ImGui::PushStyleColor(ImGuiCol_ChildBg, st.Colors[ImGuiCol_FrameBg]);
    ImGui::PushStyleVar(ImGuiStyleVar_ChildRounding, st.FrameRounding);
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, st.FramePadding);
    ImGui::BeginChild("##prompt_view", ImVec2(box_w, box_h), false, ImGuiWindowFlags_AlwaysUseWindowPadding);
    if (s.prompt.empty()) ImGui::TextDisabled("type a prompt here");
    else if (most > 1) ImGui::TextWrapped("%s", shown.c_str());
    else ImGui::TextUnformatted(cut_to_width(shown, box_w - 2 * st.FramePadding.x).c_str()); // one line: its start
    bool hovered = ImGui::IsWindowHovered();
    ImGui::EndChild();
    ImGui::PopStyleVar(2);
    ImGui::PopStyleColor();
    remember_item(ui, "prompt");
    if (hovered) ImGui::SetMouseCursor(ImGuiMouseCursor_TextInput);
    if (hovered && ImGui::IsMouseClicked(0)) ui.prompt_editing = true, ui.prompt_edit_frames = 0;
    return box_h;
}

// What the live engine computed for the shown result, in a few words ("1 of 256 tokens", "layers 11.. of 12",
// "nothing changed"): typing at the end costs one token, an ablation in the last layer one layer.
static std::string computed_text(const run_result& r) {
    const gb::live_report& rep = r.report;
    std::string what = rep.what.substr(0, rep.what.find(" (")); // the position or point it resumed at: tooltip
    if (!rep.reused) what = "all " + std::to_string(rep.tokens) + " tokens (full run)";
    char ms[32];
    snprintf(ms, sizeof ms, ", %.1f ms", rep.ms);
    std::string line = "computed: " + what + ms;
    if (r.ablation.any()) line += rep.baseline_run ? "; baseline re-run" : "; baseline kept";
    return line;
}

// The status line, with the whole report in its tooltip: right-aligned on the row at y (the title's), or
// where the cursor is when y < 0.
static void computed_line(const app_state& s, ui_context& ui, float y) {
    if (!s.result) return;
    const run_result& r = *s.result;
    const std::string line = computed_text(r);
    if (y >= 0) ImGui::SetCursorPos(ImVec2(ImGui::GetWindowContentRegionMax().x - ImGui::CalcTextSize(line.c_str()).x, y));
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(r.report.reused ? ImVec4(0.55f, 0.85f, 0.6f, 1) : ImVec4(0.75f, 0.75f, 0.78f, 1), "%s", line.c_str());
    ImGui::PopTextWrapPos();
    remember_item(ui, "computed");
    if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::Text("live recompute: %s", r.report.what.c_str());
        ImGui::TextDisabled("only what the change reaches is run again: typing at the end, one token; a change in");
        ImGui::TextDisabled("layer l, layers l.. (the earlier ones and the keys and values of earlier tokens are kept)");
        if (r.ablation.any())
            ImGui::Text("baseline (nothing ablated): %s", r.report.baseline_run ? "run again (its tokens changed)" : "kept");
        ImGui::Text("run %.1f ms, head scores %.1f ms, heatmap colours %.1f ms", r.report.ms, r.scores_ms, r.pixels_ms);
        if (!r.report.memory_note.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", r.report.memory_note.c_str());
        ImGui::EndTooltip();
    }
}

// The Demos combo: one click sets a prompt, the view and the selection for a classic finding.
static void demo_combo(app_state& s, ui_context& ui, float w) {
    // the demos follow a decoder's next-token prediction: a kind without them (the kind table says which) does not
    // show the combo, and it lists only the demos whose feature the kind offers
    if (s.model && !gb::offers(s.model->config, gb::FEATURE_DEMOS)) return;
    ImGui::SetNextItemWidth(w);
    if (!s.model) ImGui::BeginDisabled();
    const bool open = ImGui::BeginCombo("##demos", s.demos.kind == DEMO_NONE ? "Demos..." : demo_label(s.demos.kind));
    remember_item(ui, "demos");
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled) && !open)
        ImGui::SetTooltip("One-click demonstrations: a prompt, a view and a head chosen by this model's own scores");
    std::string listed;
    for (int d = DEMO_NONE + 1; d < DEMO_COUNT && s.model; d++)
        if (demo_offered(*s.model, (demo_kind)d)) listed += std::string(listed.empty() ? "" : ",") + demo_name((demo_kind)d);
    note_text(ui, "demos", listed);
    if (open) {
        for (int d = DEMO_NONE + 1; d < DEMO_COUNT; d++) {
            if (!demo_offered(*s.model, (demo_kind)d)) continue;
            if (ImGui::Selectable(demo_label((demo_kind)d), s.demos.kind == d)) {
                start_demo(s, (demo_kind)d);
                ui.prompt_editing = false;
            }
            remember_item(ui, std::string("demo ") + demo_name((demo_kind)d));
        }
        ImGui::EndCombo();
    }
    if (!s.model) ImGui::EndDisabled();
}

// "prepend BOS" as the prompt is fed: a tokenizer that always starts with its BOS (llama2.c's, Llama's add_bos_token)
// shows it ticked and fixed, since encode_prompt adds it whatever the box says.
static void bos_checkbox(app_state& s, ui_context& ui) {
    const gb::tokenizer* tok = s.model ? &s.model->tok : nullptr;
    const bool forced = tok && tok->add_bos && tok->bos_id >= 0;
    bool shown = s.bos || forced;
    if (forced) ImGui::BeginDisabled();
    if (ImGui::Checkbox("prepend BOS", &shown) && !forced) s.bos = shown;
    if (forced) ImGui::EndDisabled();
    remember_item(ui, "prepend BOS");
    note_text(ui, "prepend BOS", forced ? "ticked (the tokenizer adds it)" : shown ? "ticked" : "unticked");
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
        if (forced)
            ImGui::SetTooltip("This model's tokenizer always starts the prompt with \u2018%s\u2019, as the model was trained:\n"
                              "it is fed whether or not the box is ticked", visible_token(gb::token_text(*tok, tok->bos_id)).c_str());
        else
            ImGui::SetTooltip("Start with the model's beginning-of-text token (<|endoftext|> for GPT-2)");
    }
}

// A vision model reads an image: its path (applied on Enter or when the box loses focus), and what the model
// makes of it (its size, the patch grid, the positions).
static void image_prompt(app_state& s, ui_context& ui) {
    const ImGuiStyle& st = ImGui::GetStyle();
    const float top = ImGui::GetCursorPosY();
    panel_title("Image", "a PNG or JPEG: type its path and press Enter, or drop the file on the window");
    computed_line(s, ui, top);
    ImGui::SetCursorPosY(top + ImGui::GetFrameHeightWithSpacing());
    if (!ui.image_editing) ui.image_input = s.image_path; // a drop, a script or a session may have changed it
    path_box_use use;
    const bool enter = path_box(ui, "image path", ui.image_input, BROWSE_IMAGE, "/path/to/picture.png",
                                std::min(ImGui::GetContentRegionAvail().x - px(80), px(720)), &use);
    ui.image_editing = use.active;
    if (enter || use.left_after_edit) s.image_path = ui.image_input;
    ImGui::SameLine();
    if (ImGui::Button("Apply")) s.image_path = ui.image_input;
    remember_item(ui, "apply image");
    const gb::model_config& c = s.model->config;
    if (s.result && s.result->view)
        ImGui::TextDisabled("seen as %dx%d pixels: %dx%d patches of %d px, %d positions ([CLS]%s + patches)",
                            s.result->view->width, s.result->view->height, c.grid(), c.grid(), c.patch_size, c.n_ctx,
                            c.n_prefix > 1 ? ", [DIST]" : "");
    else
        ImGui::TextDisabled("%s reads %dx%d images as %dx%d patches of %d px", gb::arch_table(c.arch).name, c.image_size,
                            c.image_size, c.grid(), c.grid(), c.patch_size);
    surprisal_header(s, ui);
    ui.prompt_wanted_h = ImGui::GetCursorPosY() - top + 2 * st.WindowPadding.y;
}

// The Attribution tab's token saliency (gradient x input of its difference) while that tab shows a result of the
// run on screen; null otherwise (the chips keep their plain colour).
static const std::vector<float>* shown_saliency(const app_state& s) {
    const attribution_output* ao = output_of<attribution_output>(s, ANALYSIS_ATTRIBUTION).get();
    if (s.tab != TAB_ATTRIBUTION || !ao || ao->from != s.result || ao->saliency.empty()) return nullptr;
    if ((int)ao->saliency.size() != s.result->cap().n_tokens) return nullptr;
    return &ao->saliency;
}

// A chip's colour for saliency v in [-1, 1]: the plain chip's blue-grey towards red (raises the difference) or
// blue (lowers it), so that the light text stays readable at every value.
static ImU32 saliency_u32(float v) {
    const float a = std::min(1.0f, std::fabs(v));
    const float to[3] = {v >= 0 ? 200.0f : 40.0f, v >= 0 ? 60.0f : 110.0f, v >= 0 ? 50.0f : 200.0f};
    const float from[3] = {55, 65, 85};
    return IM_COL32((int)(from[0] + a * (to[0] - from[0])), (int)(from[1] + a * (to[1] - from[1])),
                    (int)(from[2] + a * (to[2] - from[2])), 255);
}

// Encoder–decoders: the prompt is the source; the target the decoder reads (empty: the model's own greedy
// translation, shown as the box's hint), and which stack the grid, the head view and the chips show.
static void target_row(app_state& s, ui_context& ui) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Target");
    ImGui::SameLine();
    if (!ui.target_editing) ui.target_input = s.target_text;
    const std::string hint = !(s.result && run_kind(*s.result).input == gb::INPUT_SOURCE_TARGET) ? "empty: the model translates the source"
                             : s.result->translation + (s.result->target_sampling.temperature > 0
                                                            ? "   (a sampled translation: type to set your own)"
                                                            : "   (the model's translation: type to set your own)");
    ImGui::SetNextItemWidth(std::min(ImGui::GetContentRegionAvail().x - px(330), px(640)));
    const bool enter = ImGui::InputTextWithHint("##target", hint.c_str(), &ui.target_input, ImGuiInputTextFlags_EnterReturnsTrue);
    remember_item(ui, "target text");
    ui.target_editing = ImGui::IsItemActive();
    if (enter || ImGui::IsItemDeactivatedAfterEdit()) s.target_text = ui.target_input;
    ImGui::SameLine();
    if (ImGui::Button("Translate")) s.target_text.clear(), ui.target_input.clear(), s.target_sampling = {};
    remember_item(ui, "translate");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("the target becomes the model's greedy translation of the source (under the ablation)");
    ImGui::SameLine();
    ImGui::TextUnformatted("Show");
    ImGui::SameLine();
    ImGui::RadioButton("encoder", &s.stack, 0);
    remember_item(ui, "stack encoder");
    ImGui::SameLine();
    ImGui::RadioButton("decoder", &s.stack, 1);
    remember_item(ui, "stack decoder");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the grid, the head view and the token chips show this stack: the encoder's self-attention\n"
                          "over the source (every token sees every token), or the decoder's masked self-attention\n"
                          "over the target; the Cross-attention tab shows the decoder reading the source");
}

// Beside the prompt box, side_w wide: the BOS choice (or the source's or an encoder's frame), the token count and
// the demo list, as one group as tall as the box.
static void prompt_side(app_state& s, ui_context& ui, float side_w, bool s2s) {
    const ImGuiStyle& st = ImGui::GetStyle();
    ImGui::BeginGroup();
    if (s2s) {
        // the source is wrapped as the tokenizer's template says (Marian "text </s>"): no BOS to choose
        if (s.result && s.result->encoder) ImGui::TextDisabled("%d source tokens", s.result->encoder->n_tokens);
        else ImGui::TextDisabled("the source");
    } else if (!s.model || gb::offers(s.model->config, gb::FEATURE_BOS)) {
        bos_checkbox(s, ui);
    } else if (s.model && !s.model->tok.prefix_ids.empty()) { // an encoder: its template's tokens, not a choice
        const gb::tokenizer& tok = s.model->tok;
        std::string frame = visible_token(gb::token_text(tok, tok.prefix_ids[0])) + " \u2026";
        if (!tok.suffix_ids.empty()) frame += " " + visible_token(gb::token_text(tok, tok.suffix_ids.back()));
        ImGui::TextDisabled("%s", frame.c_str());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", gb::kind_info_of(s.model->config).why_not[gb::FEATURE_BOS]);
    }
    if (s.presenting) { // one row: the demos beside the checkbox (the chips below show the tokens)
        ImGui::SameLine();
        demo_combo(s, ui, std::max(px(120), side_w - ImGui::GetItemRectSize().x - 2 * st.ItemSpacing.x));
        ImGui::EndGroup();
        return;
    }
    // how many tokens: beside the checkbox when it fits there (the group stays two lines, as tall as the box)
    char count[64] = "";
    if (s.busy) snprintf(count, sizeof count, "%s", s.generating ? "generating..." : "running...");
    else if (s.result && s.result->cap().n_tokens > s.result->n_prompt)
        snprintf(count, sizeof count, "%d tokens (%d generated)", s.result->cap().n_tokens, s.result->cap().n_tokens - s.result->n_prompt);
    else if (s.result && s2s && run_kind(*s.result).input == gb::INPUT_SOURCE_TARGET)
        snprintf(count, sizeof count, "%d target tokens", s.result->lm_record().n_tokens);
    else if (s.result) snprintf(count, sizeof count, "%d tokens", s.result->cap().n_tokens);
    if (*count) {
        if (ImGui::CalcTextSize(count).x + px(8) < side_w - ImGui::GetItemRectSize().x - st.ItemSpacing.x) ImGui::SameLine();
        if (s.busy) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", count);
        else ImGui::TextDisabled("%s", count);
    }
    demo_combo(s, ui, side_w - st.ItemSpacing.x);
    ImGui::EndGroup();
}

void panel_prompt(app_state& s, ui_context& ui) {
    if (s.model && gb::kind_info_of(s.model->config).input == gb::INPUT_IMAGE) return image_prompt(s, ui);
    const ImGuiStyle& st = ImGui::GetStyle();
    const float top = ImGui::GetCursorPosY();
    const char* hint = "the model re-runs as you type; click the text to edit it";
    if (!s.presenting) panel_title("Prompt", hint); // presenting: the box speaks for itself, the room goes to the pictures
    const ImVec2 below_title = ImGui::GetCursorPos();
    const float title_w = ImGui::CalcTextSize("Prompt").x + st.ItemSpacing.x + ImGui::CalcTextSize(hint).x;
    // the status line beside the title and its hint when it fits there, else on a line of its own below
    const bool status_on_title = s.result && !s.presenting && ImGui::GetWindowContentRegionMax().x -
                                                     ImGui::CalcTextSize(computed_text(*s.result).c_str()).x >
                                                 below_title.x + title_w + 20;
    if (status_on_title) {
        computed_line(s, ui, top);
        ImGui::SetCursorPos(below_title);
    }
    // presenting, the box, the checkbox and the demos share one row
    const float side_w = px(250) + (s.presenting ? ImGui::CalcTextSize("prepend BOS").x + ImGui::GetFrameHeight() + px(16) : 0.0f);
    const float w = ImGui::GetContentRegionAvail().x;
    float box_h = prompt_box(s, ui, w - side_w);
    ImGui::SameLine();
    const bool s2s = s.model && gb::kind_info_of(s.model->config).input == gb::INPUT_SOURCE_TARGET;
    prompt_side(s, ui, side_w, s2s);
    if (!status_on_title && !s.presenting) computed_line(s, ui, -1);
    if (!s.presenting) demo_caption(s, ui, false);
    // (under the title's row; presenting, right under the box: there is no title)
    ImGui::SetCursorPosY(std::max(ImGui::GetCursorPosY(), top + (s.presenting ? st.ItemSpacing.y : ImGui::GetFrameHeightWithSpacing()) + box_h));
    if (s2s) target_row(s, ui);
    float fixed_h = ImGui::GetCursorPosY() - top;
    if (!s.result) {
        ui.prompt_wanted_h = fixed_h + 2 * st.WindowPadding.y;
        return;
    }
    const gb::record& c = s.result->cap();
    if (!s.result->notice.empty()) { // e.g. the prompt was cut to the model's context
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.result->notice.c_str());
        ImGui::PopTextWrapPos();
        fixed_h = ImGui::GetCursorPosY() - top;
    }
    if (!s.presenting) surprisal_header(s, ui);
    fixed_h = ImGui::GetCursorPosY() - top;

    // token chips, wrapped; whitespace visible; the selected query token highlighted. They scroll when the
    // panel (sized to them, up to a limit) cannot show every row.
    // (with the surprisal strip each row has its bars under the chips)
    const float bar_h = surprisal_shown(s) && !s.presenting ? px(5) : 0.0f; // (presenting: no legend above them)
    const float line_h = ImGui::GetTextLineHeight() + px(8), row_h = line_h + px(3) + (bar_h > 0 ? bar_h + px(1) : 0);
    float right = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ScrollbarSize; // room for the scrollbar
    std::vector<std::string> labels(c.n_tokens);
    std::vector<ImVec2> at(c.n_tokens); // chip offsets inside the strip
    ImVec2 pos(0, 2);
    for (int t = 0; t < c.n_tokens; t++) {
        labels[t] = visible_token(c.pieces[t]);
        float cw = ImGui::CalcTextSize(labels[t].c_str()).x + px(10);
        if (pos.x + cw > right && pos.x > 0) pos = ImVec2(0, pos.y + row_h);
        at[t] = pos;
        pos.x += cw + px(4);
    }
    const float strip_h = pos.y + row_h + px(2);
    ui.prompt_wanted_h = fixed_h + strip_h + 2 * st.WindowPadding.y + st.ItemSpacing.y;
    // the least the panel may have: its first row of chips in view whatever is above it (a demo's caption)
    ui.content_h["Prompt least"] = fixed_h + row_h + px(4) + 2 * st.WindowPadding.y + st.ItemSpacing.y;
    ui.content_h["Prompt row"] = row_h; // (presenting, the strip is cut to whole rows)
    // whole rows in view, never half a chip at the bottom (the rest scroll)
    const float room = ImGui::GetContentRegionAvail().y;
    ImGui::BeginChild("##chips", ImVec2(0, room >= strip_h ? 0.0f : std::max(row_h, std::floor(room / row_h) * row_h)), false);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 o = ImGui::GetCursorScreenPos();
    int selected = query_token(s, c.n_tokens);
    const std::vector<float>* sal = shown_saliency(s);
    float sal_max = 0;
    if (sal)
        for (float v : *sal) sal_max = std::max(sal_max, std::fabs(v));
    for (int t = 0; t < c.n_tokens; t++) {
        ImVec2 a(o.x + at[t].x, o.y + at[t].y);
        ImVec2 b(a.x + ImGui::CalcTextSize(labels[t].c_str()).x + px(10), a.y + line_h);
        bool hover = ImGui::IsMouseHoveringRect(a, b) && ImGui::IsWindowHovered();
        const bool generated = t >= s.result->n_prompt; // a replayed continuation's token: gold, like its text
        ImU32 bg = t == selected ? IM_COL32(255, 190, 60, 255)
                 : hover         ? IM_COL32(90, 110, 150, 255)
                 : generated     ? IM_COL32(92, 76, 36, 255)
                 : sal           ? saliency_u32(sal_max > 0 ? (*sal)[t] / sal_max : 0.0f)
                                 : IM_COL32(55, 65, 85, 255);
        dl->AddRectFilled(a, b, bg, px(4));
        dl->AddText(ImVec2(a.x + px(5), a.y + px(4)),
                    t == selected ? IM_COL32(20, 20, 20, 255) : generated ? IM_COL32(255, 222, 120, 255) : IM_COL32(235, 235, 235, 255),
                    labels[t].c_str());
        if (hover && sal) {
            ImGui::SetTooltip("token %d%s: id %d \"%s\"\n%s %+.4f (the Attribution tab's difference)\n"
                              "click: show this token's attention row", t, generated ? " (generated)" : "", c.tokens[t],
                              labels[t].c_str(), output_of<attribution_output>(s, ANALYSIS_ATTRIBUTION)->steps > 0 ? "integrated gradients" : "gradient x input",
                              (*sal)[t]);
            if (ImGui::IsMouseClicked(0)) s.sel_token = t;
        } else if (hover) {
            ImGui::SetTooltip("token %d%s: id %d \"%s\"\nclick: show this token's attention row", t,
                              generated ? " (generated)" : "", c.tokens[t], labels[t].c_str());
            if (ImGui::IsMouseClicked(0)) s.sel_token = t;
        }
        if (bar_h > 0)
            surprisal_bar(s, ui, t, ImVec2(a.x, b.y + px(1)), ImVec2(b.x, b.y + px(1) + bar_h), ImGui::IsWindowHovered());
        ui.widgets["token " + std::to_string(t)] = ImVec4(a.x, a.y, b.x, b.y);
        note_drawn(ui, "token " + std::to_string(t), a, b);
    }
    ImGui::Dummy(ImVec2(1, strip_h));
    ImGui::EndChild();
}

} // namespace gbui
