// Attention overview: an L x H grid of every head, coloured by its pattern or by one head score (previous-token,
// first-token, induction, duplicate-token, entropy), on the prompt or on the repeated-random-tokens test prompt.
// Click: open in the detail view; right-click or ctrl+click: knock the head out (ablate) or bring it back.
//
// Sections: score mode controls | grid
#include <algorithm>
#include <cmath>

#include "text_scale.h"
#include "ui.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// Score mode controls: the colour-by combo, the legend, and the induction test
// ---------------------------------------------------------------------------------------------

// The scores the grid shows: the test prompt's while the test is on (null while it runs), else the prompt's.
static const gb::head_scores* shown_scores(const app_state& s) {
    if (!state_of<induction_inputs>(s, ANALYSIS_INDUCTION).shown) return &s.result->scores;
    const induction_output* o = output_of<induction_output>(s, ANALYSIS_INDUCTION).get();
    return o && o->model == s.result->model ? &o->scores : nullptr;
}

// The colour range of a score: [0, 1] for the fractions of attention, [0, largest] nats for entropy.
static float score_max(const gb::head_scores* sc, colour_mode m) {
    if (m != COLOUR_ENTROPY) return 1.0f;
    float mx = 0;
    if (sc)
        for (float v : sc->score[gb::SCORE_ENTROPY]) if (std::isfinite(v)) mx = std::max(mx, v);
    return mx > 0 ? mx : 1.0f;
}

static void score_controls(app_state& s, ui_context& ui) {
    auto& test = state_of<induction_inputs>(s, ANALYSIS_INDUCTION);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("colour by");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(px(150));
    if (ImGui::BeginCombo("##colour_by", colour_label(s.colour_by))) {
        for (int m = 0; m < COLOUR_COUNT; m++)
            if (ImGui::Selectable(colour_label((colour_mode)m), s.colour_by == m)) {
                s.colour_by = (colour_mode)m;
                if (m == COLOUR_PATTERN) test.shown = false; // patterns are always the prompt's
            }
        ImGui::EndCombo();
    }
    remember_item(ui, "colour by");
    if (s.colour_by == COLOUR_PATTERN) {
        ImGui::SameLine();
        ImGui::TextDisabled("hover a head for its scores");
        return;
    }
    // legend: the colour bar with the score's range
    const gb::head_scores* sc = shown_scores(s);
    const float mx = score_max(sc, s.colour_by);
    char hi[32];
    snprintf(hi, sizeof hi, s.colour_by == COLOUR_ENTROPY ? "%.2f nats" : "%.0f", mx);
    // an inline legend on the combo's line: "0 [colour bar] 1"
    ImGui::SameLine(0, px(14));
    ImGui::TextUnformatted("0");
    ImGui::SameLine(0, px(4));
    ImVec2 at = ImGui::GetCursorScreenPos();
    const float bar_w = px(140), bar_h = px(12), y0 = at.y + (ImGui::GetFrameHeight() - bar_h) / 2;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int i = 0; i < 48; i++)
        dl->AddRectFilled(ImVec2(at.x + bar_w * i / 48, y0), ImVec2(at.x + bar_w * (i + 1) / 48 + 1, y0 + bar_h),
                          viridis_u32((i + 0.5f) / 48));
    ImGui::Dummy(ImVec2(bar_w, ImGui::GetFrameHeight()));
    ImGui::SameLine(0, px(4));
    ImGui::TextUnformatted(hi);
    ImGui::SameLine(0, px(14));
    static const char* meaning[COLOUR_COUNT] = {"", "attention to the token just before", "attention to the first token",
                                                "attention to the token after the last occurrence of the current one",
                                                "attention to the last occurrence of the current token",
                                                "spread of attention (low = focused)"};
    if (ImGui::CalcTextSize(meaning[s.colour_by]).x <= ImGui::GetContentRegionAvail().x) { // else "(?)": the grid keeps the room
        ImGui::TextDisabled("%s", meaning[s.colour_by]);
    } else {
        ImGui::TextDisabled("(?)");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", meaning[s.colour_by]);
    }
    // the induction test: N random tokens repeated once, a fixed seed
    const int n_max = std::max(2, std::min(200, (s.model ? s.model->config.n_ctx - 1 : 64) / 2));
    if (s.model && !gb::offers(s.model->config, gb::FEATURE_INDUCTION_TEST)) { // e.g. a decoder that needs a source
        test.shown = false; // (asked for on the model before)
        ImGui::TextDisabled("the scores are the shown stack's on your text; the induction test (random tokens, "
                            "no source) is for decoder-only models and encoders");
        if (sc && s.result->scores.n_induction_positions == 0 &&
            (s.colour_by == COLOUR_INDUCTION || s.colour_by == COLOUR_DUPLICATE_TOKEN))
            ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "no token repeats in this text: this score is undefined (n/a)");
    } else if (!test.shown) {
        if (ImGui::SmallButton("Run the induction test")) test.shown = true;
        remember_item(ui, "induction test");
        ImGui::SameLine();
        ImGui::SetNextItemWidth(px(90));
        ImGui::SliderInt("random tokens, repeated twice", &test.n, 2, n_max);
        test.n = std::max(2, std::min(test.n, n_max));
        ImGui::SameLine();
        ImGui::TextDisabled("seed %llu", (unsigned long long)test.seed);
        if (sc && s.result->scores.n_induction_positions == 0 &&
            (s.colour_by == COLOUR_INDUCTION || s.colour_by == COLOUR_DUPLICATE_TOKEN))
            ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1),
                               "no token repeats in your prompt: this score is undefined (n/a); run the test");
    } else {
        const induction_output* o = output_of<induction_output>(s, ANALYSIS_INDUCTION).get();
        const bool ready = sc && o->key == s.analysis_want[ANALYSIS_INDUCTION];
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.72f, 0.3f, 1));
        if (ready)
            ImGui::Text("TEST PROMPT: %d random tokens repeated twice (seed %llu), not your prompt", o->n,
                        (unsigned long long)o->seed);
        else if (!s.analysis[ANALYSIS_INDUCTION].error.empty())
            ImGui::Text("induction test: %s", s.analysis[ANALYSIS_INDUCTION].error.c_str());
        else
            ImGui::Text("running the induction test on %d random tokens repeated twice...", test.n);
        ImGui::PopStyleColor();
        ImGui::SameLine();
        if (ImGui::SmallButton("back to my prompt")) test.shown = false;
        remember_item(ui, "back to my prompt");
    }
}

// ---------------------------------------------------------------------------------------------
// Grid
// ---------------------------------------------------------------------------------------------
void panel_overview(app_state& s, ui_context& ui) {
    auto& test = state_of<induction_inputs>(s, ANALYSIS_INDUCTION);
    panel_title("Attention heads", "rows = layers, columns = heads; right-click a head to ablate it");
    if (!s.result) {
        ImGui::TextDisabled("no result yet");
        return;
    }
    if (draw_parts(s, ui, PART_GRID)) return; // e.g. model B's patterns in place of A's
    score_controls(s, ui);
    const gb::record& c = s.result->cap();
    const int L = c.n_layer, H = c.n_head;
    const bool by_score = s.colour_by != COLOUR_PATTERN;
    const gb::head_scores* sc = by_score ? shown_scores(s) : nullptr;
    const float smax = by_score ? score_max(sc, s.colour_by) : 1.0f;
    ImVec2 avail = ImGui::GetContentRegionAvail();
    ui.content_h["Overview fixed"] = ImGui::GetCursorPosY(); // what is above the grid (the layout sizes the panel)
    const float label_w = px(34), head_h = px(18), gap = px(3);
    float cell = std::min((avail.x - label_w) / H, (avail.y - head_h) / L) - gap;
    cell = std::max(8.0f, std::min(cell, px(160)));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 o = ImGui::GetCursorScreenPos();
    // column titles: "H10" when it fits, else the number alone, else every k-th number
    const ImU32 lc = IM_COL32(170, 170, 180, 255);
    char b[16];
    snprintf(b, sizeof b, "H%d", H - 1);
    const bool with_h = ImGui::CalcTextSize(b).x + 2 <= cell + gap;
    snprintf(b, sizeof b, "%d", H - 1);
    const int hk = with_h ? 1 : label_step(H, cell + gap, ImGui::CalcTextSize(b).x + px(4));
    for (int h = 0; h < H; h += hk) {
        snprintf(b, sizeof b, with_h ? "H%d" : "%d", h);
        ImVec2 ts = ImGui::CalcTextSize(b);
        dl->AddText(ImVec2(o.x + label_w + h * (cell + gap) + (cell - ts.x) / 2, o.y), lc, b);
    }
    const int lk = label_step(L, cell + gap, ImGui::GetTextLineHeight());
    for (int l = 0; l < L; l++) {
        // "No attention" on this layer: every head's output is removed, so its cells are crossed out as an ablated
        // head's are (the patterns are still computed: they are what the heads would have read), its label red
        const bool layer_off = s.ablation.no_attention.covers(l);
        if (l % lk == 0) {
            snprintf(b, sizeof b, "L%d", l);
            dl->AddText(ImVec2(o.x, o.y + head_h + l * (cell + gap) + cell / 2 - ImGui::GetTextLineHeight() / 2),
                        layer_off ? IM_COL32(255, 110, 110, 255) : lc, b);
        }
        // the test keeps every layer; a long prompt's one part layer keeps some of its heads (record::part)
        const bool kept = c.has(gb::HOOK_PATTERN, l) || (by_score && test.shown);
        if (!kept) { // left out by the capture budget: one grey band, its words centred where they fit
            ImVec2 a(o.x + label_w, o.y + head_h + l * (cell + gap));
            ImVec2 z(a.x + H * (cell + gap) - gap, a.y + cell);
            dl->AddRectFilled(a, z, IM_COL32(50, 50, 50, 255));
            const char* msg = "not kept (memory budget): select a head here to capture this layer";
            if (ImGui::CalcTextSize(msg).x > z.x - a.x - px(6)) msg = "not kept";
            ImVec2 ts = ImGui::CalcTextSize(msg);
            if (ts.y <= cell && ts.x <= z.x - a.x)
                dl->AddText(ImVec2((a.x + z.x - ts.x) / 2, (a.y + z.y - ts.y) / 2), IM_COL32(160, 160, 160, 255), msg);
        }
        for (int h = 0; h < H; h++) {
            ImVec2 a(o.x + label_w + h * (cell + gap), o.y + head_h + l * (cell + gap));
            ImVec2 z(a.x + cell, a.y + cell);
            const bool head_kept = kept && (c.has_head(l, h) || (by_score && test.shown));
            if (!head_kept) {
                if (kept) dl->AddRectFilled(a, z, IM_COL32(50, 50, 50, 255)); // a part layer's other heads: grey
            } else if (by_score) { // the score's colour, and its value where the cell has room
                float v = sc ? sc->at(colour_score(s.colour_by), l, h) : NAN;
                ImU32 col = std::isfinite(v) ? viridis_u32(v / smax) : IM_COL32(60, 60, 68, 255);
                dl->AddRectFilled(a, z, col);
                char num[16] = "...";
                if (std::isfinite(v)) snprintf(num, sizeof num, "%.2f", v);
                else if (sc) snprintf(num, sizeof num, "n/a");
                ImVec2 ts = ImGui::CalcTextSize(num);
                if (ts.x + px(4) <= cell && ts.y <= cell)
                    dl->AddText(ImVec2(a.x + (cell - ts.x) / 2, a.y + (cell - ts.y) / 2),
                                std::isfinite(v) ? text_on(col) : IM_COL32(160, 160, 170, 255), num);
            } else if (GLuint tex = ui.hm.head(l, h); tex) {
                dl->AddImage((ImTextureID)(intptr_t)tex, a, z);
            }
            const bool head_off = head_ablated(s.ablation, l, h), ablated = head_off || layer_off;
            bool selected = l == s.sel_layer && h == s.sel_head;
            if (ablated) {
                note_text(ui, "grid ablated " + std::to_string(l) + "." + std::to_string(h), layer_off ? "no attention" : "head");
                dl->AddRectFilled(a, z, IM_COL32(0, 0, 0, 140));
                dl->AddLine(a, z, IM_COL32(255, 70, 70, 255), 2.0f);
                dl->AddLine(ImVec2(a.x, z.y), ImVec2(z.x, a.y), IM_COL32(255, 70, 70, 255), 2.0f);
                dl->AddRect(a, z, IM_COL32(255, 70, 70, 255), 0, 0, 2.0f);
            }
            if (selected) dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), IM_COL32(255, 190, 60, 255), 0, 0, 2.5f);
            ui.widgets["head " + std::to_string(l) + "." + std::to_string(h)] = ImVec4(a.x, a.y, z.x, z.y);
            if (l == 0 && h == 0) note_drawn(ui, "head cell 0.0", a, z);
            if (ImGui::IsMouseHoveringRect(a, z) && ImGui::IsWindowHovered()) {
                size_t k = (size_t)l * H + h;
                ImGui::BeginTooltip();
                ImGui::Text("L%d H%d%s", l, h, layer_off ? "  (ablated: No attention on this layer)" : head_off ? "  (ablated)" : "");
                ImGui::Separator();
                const gb::head_scores* hs = by_score ? sc : &s.result->scores;
                if (head_kept && hs) {
                    if (by_score && test.shown) ImGui::TextColored(ImVec4(1, 0.72f, 0.3f, 1), "on the test prompt");
                    ImGui::Text("entropy          %.2f nats", hs->score[gb::SCORE_ENTROPY][k]);
                    ImGui::Text("previous token   %.2f", hs->score[gb::SCORE_PREV_TOKEN][k]);
                    ImGui::Text("first token      %.2f", hs->score[gb::SCORE_FIRST_TOKEN][k]);
                    if (hs->n_induction_positions > 0) {
                        ImGui::Text("induction        %.2f", hs->score[gb::SCORE_INDUCTION][k]);
                        ImGui::Text("duplicate token  %.2f", hs->score[gb::SCORE_DUPLICATE_TOKEN][k]);
                    } else {
                        ImGui::TextDisabled("induction, duplicate token: n/a (no token repeats)");
                    }
                } else if (head_kept) {
                    ImGui::TextDisabled("running the induction test...");
                } else {
                    ImGui::TextDisabled("attention not kept (memory budget): no pattern, no metrics; click to capture it");
                }
                ImGui::TextDisabled("click: open   right-click / ctrl+click: %s", head_off ? "restore" : "ablate");
                ImGui::EndTooltip();
                bool toggle = ImGui::IsMouseClicked(1) || (ImGui::IsMouseClicked(0) && ImGui::GetIO().KeyCtrl);
                if (toggle) toggle_head(s.ablation, l, h);
                else if (ImGui::IsMouseClicked(0)) s.sel_layer = l, s.sel_head = h;
            }
        }
    }
    ImGui::Dummy(ImVec2(label_w + H * (cell + gap), head_h + L * (cell + gap)));
}

} // namespace gbui
