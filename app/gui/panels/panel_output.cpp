// Output: the next-token distribution, baseline (nothing ablated) and current side by side with the
// change in probability and KL(baseline || current); and a continuation generated from the prompt, with a
// step slider that replays it token by token in every panel.
#include <algorithm>
#include <imgui.h>
#include <imgui_stdlib.h>

#include "number_format.h"
#include "patching_inputs.h"
#include "tab_inputs.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

static void bar(float p, ImU32 col, float w) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 a = ImGui::GetCursorScreenPos();
    float h = ImGui::GetTextLineHeight();
    dl->AddRectFilled(a, ImVec2(a.x + w, a.y + h), IM_COL32(45, 48, 56, 255));
    dl->AddRectFilled(a, ImVec2(a.x + w * std::min(1.0f, p), a.y + h), col);
    char b[16];
    snprintf(b, sizeof b, "%.3f", p);
    dl->AddText(ImVec2(a.x + px(3), a.y), IM_COL32(240, 240, 240, 255), b);
    ImGui::Dummy(ImVec2(w, h));
}

// An encoder's head predicts at every position: which one the table shows, and the best filler of every other mask
static void fill_mask_lines(const run_result& r, const gb::model& m) {
    const gb::record& c = r.cap();
    const std::string mask = m.tok.mask_id >= 0 ? gb::token_text(m.tok, m.tok.mask_id) : "a mask token";
    ImGui::PushTextWrapPos(0);
    if (r.pred.fills.empty())
        ImGui::TextDisabled("no %s in the prompt: what the masked-LM head puts at position %d ‘%s’ "
                            "(type %s where a word should be guessed)", mask.c_str(), r.pred.position,
                            visible_token(c.pieces[r.pred.position]).c_str(), mask.c_str());
    else
        ImGui::TextDisabled("at position %d, the first of %d %s%s", r.pred.position, (int)r.pred.fills.size(), mask.c_str(),
                            r.pred.fills.size() > 1 ? "; the others:" : "");
    for (size_t i = 1; i < r.pred.fills.size(); i++) {
        const gb::fill_slot& f = r.pred.fills[i];
        ImGui::BulletText("position %d: ‘%s’ %.3f", f.position, visible_token(gb::token_text(m.tok, f.top[0].id)).c_str(),
                          f.top[0].prob);
    }
    ImGui::PopTextWrapPos();
}

// The rows: the union of the current and the baseline top-k, with bars (and the change when ablated). A click on
// a row sets *pick (when not null) to its token, which pick_what says. Under an ablation the baseline's top-1, and
// the picked target, are pinned: shown (last, tagged) even when the ablated model ranks them below the rows shown,
// so the answer the ablation took away stays in the table with its new probability and Δp.
static void top_rows(app_state& s, ui_context& ui, int* pick, const char* pick_what) {
    const run_result& r = *s.result;
    const gb::model& m = *r.model;
    bool ablated = r.ablation.any() || r.patch || !r.features.empty(); // the Features tab's edits too
    // rows: the union of both top-k lists, ordered by current probability
    std::vector<int> ids;
    for (const auto& t : r.pred.top) ids.push_back(t.id);
    for (const auto& t : r.pred.base_top)
        if (std::find(ids.begin(), ids.end(), t.id) == ids.end()) ids.push_back(t.id);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return r.pred.probs[a] > r.pred.probs[b]; });
    if (ids.size() > (size_t)s.top_k + 4) ids.resize(s.top_k + 4);
    // as many rows as leave the continuation's controls in view (at least 3: Generate must stay reachable in a short
    // panel, at 1280 x 720 or at 150 % text; the rest of the list is a hover away in the Logit lens)
    const float row_h = ImGui::GetTextLineHeight() + 2 * ImGui::GetStyle().CellPadding.y;
    const float below = (s.generated ? 10 : 5) * ImGui::GetFrameHeightWithSpacing() + px(8); // + the continuation's text
    int fit = (int)((ImGui::GetContentRegionAvail().y - below) / row_h) - 1;
    size_t rows = (size_t)std::max(3, fit);
    // the pinned tokens (with their tags), in place of the last rows when they are not among them
    std::vector<std::pair<int, const char*>> pins;
    if (ablated && !r.pred.base_top.empty()) pins.push_back({r.pred.base_top[0].id, "baseline top-1"});
    if (pick && *pick >= 0 && *pick < (int)r.pred.probs.size() && (pins.empty() || pins[0].first != *pick))
        pins.push_back({*pick, "target"});
    for (const auto& pin : pins) // a pinned row brings its line under the table: two rows fewer
        if (std::find(ids.begin(), ids.begin() + std::min(ids.size(), rows), pin.first) == ids.begin() + std::min(ids.size(), rows)) {
            rows = (size_t)std::max(3, fit - 2);
            break;
        }
    if (ids.size() > rows) ids.resize(rows);
    std::vector<const char*> tag(ids.size(), nullptr);
    for (const auto& [id, what] : pins) {
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
        size_t at = ids.size() < rows ? ids.size() : ids.size() - 1;
        while (at > 0 && at < ids.size() && tag[at]) at--; // never over another pinned row
        if (at == ids.size()) ids.push_back(id), tag.push_back(what);
        else ids[at] = id, tag[at] = what;
    }
    float avail = ImGui::GetContentRegionAvail().x;
    // the token column as wide as its widest token (within 80 .. 200 px at 100 %), the bars share the rest
    float tok_w = px(80);
    for (size_t i = 0; i < ids.size(); i++)
        tok_w = std::max(tok_w, ImGui::CalcTextSize(quoted(m.tok, ids[i]).c_str()).x + px(8) +
                                    (tag[i] ? ImGui::CalcTextSize(" *").x : 0));
    tok_w = std::min(tok_w, px(200));
    const float dp_w = ImGui::CalcTextSize("+0.000").x + px(8);
    float bw = std::max(px(60), (avail - tok_w - (ablated ? dp_w : 0) - px(40)) / (ablated ? 2.0f : 1.0f));
    int cols = ablated ? 4 : 2;
    ui.next_rows.clear();
    if (ImGui::BeginTable("##top", cols, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
        ImGui::TableSetupColumn("token", ImGuiTableColumnFlags_WidthFixed, tok_w);
        if (ablated) ImGui::TableSetupColumn("baseline", ImGuiTableColumnFlags_WidthFixed, bw);
        ImGui::TableSetupColumn(ablated ? "current" : "probability", ImGuiTableColumnFlags_WidthFixed, bw);
        if (ablated) ImGui::TableSetupColumn("\u0394p", ImGuiTableColumnFlags_WidthFixed, dp_w);
        ImGui::TableHeadersRow();
        for (size_t i = 0; i < ids.size(); i++) {
            const int id = ids[i];
            ImGui::TableNextRow();
            if (tag[i]) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(70, 60, 30, 255)); // pinned: amber
            ImGui::TableNextColumn();
            const std::string label = quoted(m.tok, id); // drawn whole: WordPiece pieces (‘##i’) hold "##"
            if (pick) {
                if (text_selectable(label, ("##row" + std::to_string(i)).c_str(), *pick == id, ImGuiSelectableFlags_SpanAllColumns))
                    *pick = id;
            } else {
                ImGui::TextUnformatted(label.c_str(), label.c_str() + label.size());
            }
            note_text(ui, "next label " + std::to_string(i), label);
            const bool hovered = ImGui::IsItemHovered();
            remember_item(ui, "next " + std::to_string(i));
            if (tag[i]) { // an amber star; the line under the table says what it means
                ImGui::SameLine(0, px(3));
                ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "*");
            }
            if (hovered)
                ImGui::SetTooltip("id %d%s%s%s%s", id, tag[i] ? "\npinned: the " : "", tag[i] ? tag[i] : "",
                                  tag[i] ? ", which the changed run ranks below these rows" : "",
                                  pick ? (std::string("\nclick: ") + pick_what).c_str() : "");
            ui.next_rows.push_back({gb::token_text(m.tok, id), r.pred.probs[id], r.pred.base_probs[id], tag[i] ? tag[i] : ""});
            if (ablated) {
                ImGui::TableNextColumn();
                bar(r.pred.base_probs[id], IM_COL32(90, 120, 170, 255), bw);
            }
            ImGui::TableNextColumn();
            bar(r.pred.probs[id], IM_COL32(60, 160, 120, 255), bw);
            if (ablated) {
                ImGui::TableNextColumn();
                // coloured by the sign it shows: a change that rounds to 0.000 is neither gain nor loss
                const float d = r.pred.probs[id] - r.pred.base_probs[id];
                const int sign = shown_sign(d);
                const std::string dt = format_delta(d);
                ImGui::TextColored(sign > 0 ? ImVec4(0.5f, 0.9f, 0.5f, 1) : sign < 0 ? ImVec4(1, 0.5f, 0.5f, 1)
                                                                          : ImVec4(0.7f, 0.7f, 0.72f, 1), "%s", dt.c_str());
                note_text(ui, "next dp " + std::to_string(i), dt);
            }
        }
        ImGui::EndTable();
    }
    std::string pinned_note;
    for (size_t i = 0; i < ids.size(); i++)
        if (tag[i]) pinned_note += (pinned_note.empty() ? "* pinned: the " : " and the ") + std::string(tag[i]) + " " + quoted(m.tok, ids[i]);
    if (!pinned_note.empty()) {
        pinned_note += ablated ? ", which the changed run ranks lower" : ", ranked below these rows";
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.75f, 0.3f, 1), "%s", pinned_note.c_str());
        ImGui::PopTextWrapPos();
        note_text(ui, "next pinned", pinned_note);
    }
}

// Generate (an encoder–decoder's Translate, sampled) and, once there is a continuation, Append to prompt.
static void generate_button(app_state& s, ui_context& ui) {
    // an encoder–decoder's target is a translation of the source, not a continuation: the button makes the target
    // the translation sampled with these settings (the prompt panel's Translate is the greedy one)
    const bool s2s = s.model && gb::kind_info_of(s.model->config).input == gb::INPUT_SOURCE_TARGET;
    const char* gen_label = s2s ? "Translate, sampled" : s.generating ? "Generating..." : "Generate";
    const bool gen_clicked = ImGui::Button(gen_label);
    if (s2s) remember_item(ui, "Translate, sampled");
    if (s2s && ImGui::IsItemHovered())
        ImGui::SetTooltip("the target becomes a translation of the source sampled at this temperature, top-k and seed\n"
                          "(under the ablation); Translate beside the target box makes the greedy one");
    if (gen_clicked && s2s) {
        s.target_text.clear(), ui.target_input.clear();
        s.target_sampling = s.gen;
    } else if (gen_clicked && s.model) {
        // the generation appends each token through the worker's live state and publishes the panels' result
        // as it goes; its first result is the prompt's own, so no separate run of the prompt is needed
        s.gen_step = 0;
        s.gen_follow = true;
        ui.run_requested = current_run_key(s);
        ui.work->generate(gen_request{current_run_request(s), s.gen_tokens, s.gen});
    }
    remember_item(ui, "Generate");
    if (s.generated) {
        ImGui::SameLine();
        if (ImGui::Button("Append to prompt")) {
            s.prompt += s.generated->text; // to the prompt as it is now: edits made since generating stay
            s.generated.reset();
            s.gen_step = 0, s.gen_follow = false;
        }
        remember_item(ui, "Append to prompt");
    }
}

// The continuation's settings (tokens, temperature, top-k, seed) and its Generate (an encoder–decoder's Translate,
// sampled) and Append to prompt buttons.
static void generation_controls(app_state& s, ui_context& ui) {
    // four labelled fields: one row when the panel is wide enough, else two (labels are never clipped)
    const ImGuiStyle& st = ImGui::GetStyle();
    auto field_w = [&](const char* label, float w) { return w + st.ItemInnerSpacing.x + ImGui::CalcTextSize(label).x + st.ItemSpacing.x; };
    // the sliders' values are written beside them (on the track the handle covers them)
    char tokens[32], temp[48];
    snprintf(tokens, sizeof tokens, "%d tokens", s.gen_tokens);
    if (s.gen.temperature == 0) snprintf(temp, sizeof temp, "greedy (T 0)");
    else snprintf(temp, sizeof temp, "temperature %.2f", s.gen.temperature);
    const bool one_row = field_w("200 tokens", px(70)) + field_w("temperature 0.00", px(70)) + field_w("top-k", px(60)) +
                             field_w("seed", px(70)) <= ImGui::GetContentRegionAvail().x;
    slider_int_beside(ui, "tokens", &s.gen_tokens, 1, 200, tokens, px(70));
    // presenting (a narrow side tab), Generate follows the length: in view above the sampling settings
    ImGui::SameLine();
    if (s.presenting) generate_button(s, ui); // (the settings go on on the next line)
    slider_float_beside(ui, "temperature", &s.gen.temperature, 0.0f, 2.0f, temp, px(70));
    if (one_row) ImGui::SameLine();
    ImGui::SetNextItemWidth(px(60));
    ImGui::InputInt("top-k", &s.gen.top_k, 0);
    s.gen.top_k = std::max(0, s.gen.top_k);
    ImGui::SameLine();
    int seed = (int)s.gen.seed;
    ImGui::SetNextItemWidth(px(70));
    if (ImGui::InputInt("seed", &seed, 0)) s.gen.seed = (uint64_t)std::max(0, seed);
    // beside the fields when it has room (a short panel keeps the button in view); presenting, it came first
    if (!s.presenting) {
        const bool s2s = s.model && gb::kind_info_of(s.model->config).input == gb::INPUT_SOURCE_TARGET;
        const char* gen_label = s2s ? "Translate, sampled" : s.generating ? "Generating..." : "Generate";
        if (ImGui::CalcTextSize(gen_label).x + 2 * st.FramePadding.x + st.ItemSpacing.x < room_right_of_item()) ImGui::SameLine();
        generate_button(s, ui);
    }
}

// Text in pieces laid out as wrapped prose (at spaces and newlines, to the panel's width), each piece in its
// colour, a marked piece on an amber background; returns the marked piece's rectangle (zero when none).
struct text_piece {
    std::string text;
    ImU32 col;
    bool marked = false;
};
static ImVec4 flow_text(const std::vector<text_piece>& pieces) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const float right = o.x + ImGui::GetContentRegionAvail().x, lh = ImGui::GetTextLineHeightWithSpacing();
    ImVec2 at = o;
    ImVec4 mark(0, 0, 0, 0);
    for (const text_piece& p : pieces) {
        size_t i = 0;
        while (i < p.text.size()) {
            if (p.text[i] == '\n') { at = ImVec2(o.x, at.y + lh), i++; continue; }
            // a word and the spaces after it
            size_t e = i;
            while (e < p.text.size() && p.text[e] != ' ' && p.text[e] != '\n') e++;
            while (e < p.text.size() && p.text[e] == ' ') e++;
            const char *a = p.text.c_str() + i, *z = p.text.c_str() + e;
            const float w = ImGui::CalcTextSize(a, z).x;
            if (at.x + w > right && at.x > o.x) at = ImVec2(o.x, at.y + lh);
            if (p.marked) {
                const ImVec2 lo(at.x - 1, at.y), hi(at.x + std::max(w, px(4)) + 1, at.y + ImGui::GetTextLineHeight());
                dl->AddRectFilled(lo, hi, IM_COL32(255, 190, 60, 255), px(2));
                if (mark.z == 0) mark = ImVec4(lo.x, lo.y, hi.x, hi.y);
                mark = ImVec4(std::min(mark.x, lo.x), std::min(mark.y, lo.y), std::max(mark.z, hi.x), std::max(mark.w, hi.y));
            }
            dl->AddText(at, p.marked ? IM_COL32(20, 20, 20, 255) : p.col, a, z);
            at.x += w;
            i = e;
        }
    }
    ImGui::Dummy(ImVec2(std::max(1.0f, right - o.x), at.y + lh - o.y));
    return mark;
}

// The replay slider and the generated text after the prompt's last words.
static void generated_text(app_state& s, ui_context& ui) {
    // replay: the panels show the prompt and the first k generated tokens (each move is a prefix of the kept
    // run, so the live engine recomputes at most the tokens after the shorter of the two steps)
    if (const int n = replay_steps(s); n > 0) {
        int k = std::min(s.gen_step, n);
        char text[48];
        snprintf(text, sizeof text, "replay: step %d of %d", k, n);
        const float w = std::min(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("replay: step 000 of 000").x - px(16), px(240));
        if (slider_int_beside(ui, "replay", &k, 0, n, text, std::max(px(60), w))) s.gen_step = k, s.gen_follow = false;
        remember_item(ui, "step slider");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("replay the generation: every panel shows the prompt and the first k generated tokens\n"
                              "(gold in the token strip); step 0 is the prompt alone; editing the prompt ends the replay");
    }
    if (s.generated) {
        // the prompt's last words (one line, dimmed) lead into the continuation (wrapped, highlighted)
        std::string tail = display_text(s.generated->prompt);
        const float room = ImGui::GetContentRegionAvail().x;
        if (ImGui::CalcTextSize(tail.c_str()).x > room) {
            size_t cut = tail.size();
            while (cut > 0 && ImGui::CalcTextSize(tail.c_str() + cut).x < room * 0.9f) {
                do cut--; while (cut > 0 && ((unsigned char)tail[cut] & 0xC0) == 0x80); // UTF-8 boundary
            }
            tail = "\u2026" + tail.substr(cut);
        }
        ImGui::TextDisabled("%s", tail.c_str());
        // the continuation, with the token the replay stands at marked (the one the panels show last) and the
        // tokens after it dimmed; without a replay step, all of it
        const generation_result& g = *s.generated;
        const int step = std::min(s.gen_step, (int)g.ids.size());
        const ImU32 gold = IM_COL32(255, 217, 102, 255), later = IM_COL32(150, 132, 90, 255);
        std::vector<text_piece> pieces;
        if (step <= 0) {
            pieces.push_back({display_text(g.text), gold});
        } else {
            std::string before, after;
            for (int i = 0; i + 1 < step; i++) before += gb::token_text(g.model->tok, g.ids[i]);
            for (size_t i = (size_t)step; i < g.ids.size(); i++) after += gb::token_text(g.model->tok, g.ids[i]);
            const std::string marked = display_text(gb::token_text(g.model->tok, g.ids[step - 1]));
            pieces = {{display_text(before), gold}, {marked, gold, true}, {display_text(after), later}};
            note_text(ui, "replay mark", marked);
        }
        const ImVec4 mark = flow_text(pieces);
        if (step > 0) note_drawn(ui, "replay mark", ImVec2(mark.x, mark.y), ImVec2(mark.z, mark.w));
        ImGui::TextDisabled("%d tokens in %.0f ms%s", s.generated->n_tokens, s.generated->ms,
                            s.generated->hit_eos        ? ", stopped at end-of-text"
                            : s.generated->done         ? ""
                            : s.generating              ? ", generating..."
                                                        : ", stopped (the inputs changed)");
    }
}

void panel_output(app_state& s, ui_context& ui) {
    // a click on a row picks the target of the open analysis tab (the hint says which)
    int* pick = tab_info(s.tab).picks ? tab_info(s.tab).picks(s) : nullptr;
    const std::string hint = pick ? std::string("click a row: ") + tab_info(s.tab).pick : "baseline = no ablation, steering or edit";
    const bool vision = s.result && run_kind(*s.result).output == gb::OUTPUT_CLASSES;
    const bool encoder = s.result && (run_kind(*s.result).output == gb::OUTPUT_FILL_MASK || vision); // reads one position
    // presenting, the side tab's name is the title, and the continuation's controls have the line it would take
    if (!s.presenting) panel_title(vision ? "Image classes" : encoder ? "Fill mask" : "Next token", hint.c_str());
    if (!s.result) return;
    const run_result& r = *s.result;
    const gb::model& m = *r.model;
    bool ablated = r.ablation.any() || r.patch || !r.features.empty();
    if (encoder && !vision) fill_mask_lines(r, m);
    ImGui::Text(vision ? "class: " : encoder ? "filler: " : "prediction: ");
    ImGui::SameLine();
    std::string top1 = r.pred.top.empty() ? "" : visible_token(gb::token_text(m.tok, r.pred.top[0].id));
    ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "\u2018%s\u2019", top1.c_str());
    ui.widgets["top1 " + top1] = ImVec4(0, 0, 0, 0);
    if (ablated) {
        std::string b1 = r.pred.base_top.empty() ? "" : visible_token(gb::token_text(m.tok, r.pred.base_top[0].id));
        char line[256];
        snprintf(line, sizeof line, "(baseline \u2018%s\u2019)", b1.c_str());
        ImGui::SameLine();
        if (ImGui::CalcTextSize(line).x > ImGui::GetContentRegionAvail().x) ImGui::NewLine();
        ImGui::TextDisabled("%s", line);
        const std::string kl = format_number(r.pred.kl);
        ImGui::TextDisabled("KL(baseline \u2016 current) = %s nats", kl.c_str());
        note_text(ui, "next kl", kl);
    }
    top_rows(s, ui, pick, tab_info(s.tab).pick);

    if (vision) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("the classifier reads [CLS] after the last layer%s; %d classes",
                            m.config.n_prefix > 1 && !m.weights.dist_head.empty() ? " (averaged with the distillation head at [DIST])" : "",
                            m.config.vocab_size);
        ImGui::PopTextWrapPos();
        return;
    }
    ImGui::Spacing();
    if (s.presenting) ImGui::Separator();
    else panel_title("Continuation", "generated with the current ablations");
    if (encoder) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextDisabled("%s is an encoder: every token sees the whole prompt, and its head fills masked tokens; "
                            "it does not continue text.", gb::arch_table(m.config.arch).name);
        ImGui::PopTextWrapPos();
        return;
    }
    generation_controls(s, ui);
    generated_text(s, ui);
}

} // namespace gbui
