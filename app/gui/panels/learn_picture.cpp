// The Learn tab's picture of the loaded model (learn_view.h): a strip of the whole forward (tokens, embedding,
// one cell per layer, the head), and under it the walked layer opened up: the residual stream running down its
// left side, each sublayer branching off to the right (norm, Q K V, scores, mask, softmax, weighted values, W_O;
// norm, MLP) and added back. An encoder–decoder has a second strip for its encoder, with an arrow from the
// encoder's output into every decoder layer. The current step's box is lit, the steps before it are tinted, and
// the selected head's slice is marked in every tensor of attention that has one. Shapes are the live ones.
#include <algorithm>
#include <cmath>

#include <imgui_internal.h> // ImTextCharFromUtf8

#include "learn_view.h"
#include "ui.h"

namespace gbui {

namespace {

// ---------------------------------------------------------------------------------------------
// Colours and primitives
// ---------------------------------------------------------------------------------------------

const ImU32 col_text = IM_COL32(230, 232, 238, 255), col_dim = IM_COL32(150, 154, 165, 255),
            col_line = IM_COL32(120, 126, 140, 255), col_stream = IM_COL32(170, 175, 190, 255),
            col_lit = IM_COL32(250, 200, 90, 255), col_lit_text = IM_COL32(25, 22, 15, 255),
            col_head = IM_COL32(255, 130, 110, 255), col_fill = IM_COL32(38, 42, 54, 255),
            col_visited = IM_COL32(70, 62, 42, 255);

// The box's family colour (its border): attention blue, MLP green, norms grey, the ends violet.
ImU32 family_colour(gb::diagram_part p) {
    if (p == gb::PART_NORM_ATTN || p == gb::PART_NORM_MLP || p == gb::PART_FINAL_NORM) return IM_COL32(150, 152, 165, 255);
    if (gb::part_sublayer(p) == 1) return IM_COL32(100, 155, 235, 255);
    if (gb::part_sublayer(p) == 2) return IM_COL32(110, 195, 130, 255);
    return IM_COL32(175, 140, 230, 255);
}

void arrow(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 c, float thick = 1.5f) {
    dl->AddLine(a, b, c, thick);
    const float dx = b.x - a.x, dy = b.y - a.y, n = std::sqrt(dx * dx + dy * dy);
    if (n < 1) return;
    const float ux = dx / n, uy = dy / n, s = 5 + thick;
    dl->AddTriangleFilled(b, ImVec2(b.x - ux * s - uy * s * 0.55f, b.y - uy * s + ux * s * 0.55f),
                          ImVec2(b.x - ux * s + uy * s * 0.55f, b.y - uy * s - ux * s * 0.55f), c);
}

// "5 × 8 × 32"
std::string dims_numbers(const gb::diagram_box& b) {
    std::string s;
    for (size_t i = 0; i < b.dims.size(); i++) s += (i ? " × " : "") + std::to_string(b.dims[i].second);
    return s;
}

// Drawing state shared by the picture's parts.
struct pic {
    ImDrawList* dl = nullptr;
    ui_context* ui = nullptr;
    learn_view* view = nullptr;
    const learn_picture_in* in = nullptr;
    learn_picture_out* out = nullptr;
    float fs = 15, sf = 12; // label and small font sizes
    float x0 = 0;           // the picture's left edge
    gb::diagram_part lit = gb::PART_COUNT;
    bool in_layer_lit = false; // the lit step is inside the walked layer
    std::vector<bool> visited; // [PART_COUNT] lit by a step before the current one
    float text_w(const char* s, float size) const { return ImGui::GetFont()->CalcTextSizeA(size, FLT_MAX, 0, s).x; }
};

float box_w(const pic& p, const gb::diagram_box& b) { return std::max(p.fs * 3.2f, p.text_w(b.label.c_str(), p.fs) + p.fs); }

// Whether the box carries one slice per head (the selected one marked): the tensors of attention with an H axis.
bool has_heads(const gb::diagram_box& b) {
    for (const auto& d : b.dims)
        if (d.first == "H") return true;
    return false;
}

// One tensor's box at r: its label, its live shape under it (numbers; the names in the tooltip), a band of one
// cell per head where it has a head axis, lit / visited / plain; a click goes to its step.
void draw_box(pic& p, const gb::diagram_box& b, ImRect r, const char* prefix = "") {
    const bool lit = b.part == p.lit && !*prefix, seen = !*prefix && p.visited[b.part];
    const bool heads = has_heads(b) && !*prefix;
    const int E = b.part == gb::PART_MLP_HIDDEN && !*prefix ? p.in->g->n_expert : 0;
    p.dl->AddRectFilled(r.Min, r.Max, lit ? col_lit : seen ? col_visited : col_fill, 4);
    p.dl->AddRect(r.Min, r.Max, lit ? col_lit : family_colour(b.part), 4, 0, lit ? 2.5f : 1.2f);
    const float tw = p.text_w(b.label.c_str(), p.fs), band = heads || E > 0 ? p.fs * 0.35f : 0;
    p.dl->AddText(ImGui::GetFont(), p.fs, ImVec2((r.Min.x + r.Max.x - tw) / 2, (r.Min.y + r.Max.y - band - p.fs) / 2),
                  lit ? col_lit_text : col_text, b.label.c_str());
    if (heads) { // the head axis: one cell per head (at most 32 drawn), the selected head's in its colour
        const int H = p.in->g->n_head, n = std::min(H, 32), h = p.in->head * n / std::max(1, H);
        const float x0 = r.Min.x + 4, x1 = r.Max.x - 4, cw = (x1 - x0) / n, y1 = r.Max.y - 3, y0 = y1 - band;
        for (int i = 0; i < n; i++)
            p.dl->AddRectFilled(ImVec2(x0 + i * cw + 0.5f, y0), ImVec2(x0 + (i + 1) * cw - 0.5f, y1),
                                i == h ? col_head : lit ? IM_COL32(120, 95, 40, 255) : IM_COL32(70, 76, 92, 255));
    }
    if (E > 0) { // the experts: one cell each (at most 64 drawn), the router's choice for this token in its colour
        const int n = std::min(E, 64);
        const float x0 = r.Min.x + 4, x1 = r.Max.x - 4, cw = (x1 - x0) / n, y1 = r.Max.y - 3, y0 = y1 - band;
        for (int i = 0; i < n; i++) {
            const bool chosen = std::find(p.in->experts.begin(), p.in->experts.end(), i) != p.in->experts.end();
            p.dl->AddRectFilled(ImVec2(x0 + i * cw + 0.5f, y0), ImVec2(x0 + (i + 1) * cw - 0.5f, y1),
                                chosen ? expert_colour(i) : IM_COL32(70, 76, 92, 255));
        }
        p.view->experts = p.in->experts;
    }
    const std::string nums = dims_numbers(b);
    const float nw = p.text_w(nums.c_str(), p.sf);
    p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2((r.Min.x + r.Max.x - nw) / 2, r.Max.y + 1), col_dim, nums.c_str());
    // the box as an item: hover for its shape and formula, click for its step
    ImGui::SetCursorScreenPos(r.Min);
    ImGui::PushID(prefix);
    ImGui::PushID((int)b.part);
    const bool clicked = ImGui::InvisibleButton("##box", ImVec2(std::max(1.0f, r.GetWidth()), std::max(1.0f, r.GetHeight())));
    ImGui::PopID();
    ImGui::PopID();
    remember_item(*p.ui, std::string("learn box ") + prefix + gb::part_name(b.part));
    if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::Text("%s%s  %s", prefix, font_safe(b.title).c_str(), b.shape().c_str());
        ImGui::TextUnformatted(font_safe(b.formula).c_str());
        if (!b.note.empty()) ImGui::TextDisabled("%s", font_safe(b.note).c_str());
        ImGui::EndTooltip();
    }
    if (clicked && !*prefix)
        for (size_t i = 0; i < p.in->parts.size(); i++)
            if (p.in->parts[i] == b.part) {
                p.out->goto_step = (int)i;
                break;
            }
    p.view->boxes.push_back({std::string(prefix) + gb::part_name(b.part), b.label, b.shape(), lit, heads ? p.in->head : -1,
                             ImVec4(r.Min.x, r.Min.y, r.Max.x, r.Max.y)});
}

// ---------------------------------------------------------------------------------------------
// The strip: the whole forward in one row (tokens, embedding, a cell per layer, the head)
// ---------------------------------------------------------------------------------------------

// The layer cells from x0 to x1 at y: the walked layer outlined (filled when the lit step is in it); a click
// selects a layer. Returns the walked cell's rectangle.
ImRect layer_cells(pic& p, int L, int walked, float x0, float x1, float y, float h, bool clickable, const char* name) {
    const float gap = (x1 - x0) / L > 6 ? 2 : 0, cw = (x1 - x0 - gap * (L - 1)) / L;
    ImRect walked_r;
    for (int l = 0; l < L; l++) {
        const ImRect c(ImVec2(x0 + l * (cw + gap), y), ImVec2(x0 + l * (cw + gap) + cw, y + h));
        const bool on = l == walked;
        const ImU32 fill = on && p.in_layer_lit ? col_lit : on ? IM_COL32(90, 78, 45, 255) : IM_COL32(52, 58, 74, 255);
        p.dl->AddRectFilled(c.Min, c.Max, fill, 2);
        if (on) walked_r = c;
        char num[16];
        snprintf(num, sizeof num, "%d", l);
        if (p.text_w(num, p.sf) + 2 < cw)
            p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2(c.Min.x + (cw - p.text_w(num, p.sf)) / 2, c.Min.y + (h - p.sf) / 2),
                          on && p.in_layer_lit ? col_lit_text : col_dim, num);
        if (!clickable) continue;
        ImGui::SetCursorScreenPos(c.Min);
        ImGui::PushID(name);
        ImGui::PushID(l);
        if (ImGui::InvisibleButton("##layer", ImVec2(std::max(1.0f, cw), h))) p.out->goto_layer = l;
        ImGui::PopID();
        ImGui::PopID();
        remember_item(*p.ui, std::string("learn ") + name + " " + std::to_string(l));
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("layer %d: click to walk through it", l);
    }
    char b[64];
    snprintf(b, sizeof b, "× %d layers", L);
    p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2((x0 + x1 - p.text_w(b, p.sf)) / 2, y + h + 1), col_dim, b);
    return walked_r;
}

// A strip of boxes before the layers, the layer cells, and boxes after them, left to right, joined by arrows.
// Returns the walked cell; *after_x: where each box after the cells starts (for the encoder's output).
struct strip_layout {
    ImRect walked;
    std::vector<ImRect> after; // the boxes after the cells
};
strip_layout strip(pic& p, const std::vector<const gb::diagram_box*>& before, int L, int walked,
                   const std::vector<const gb::diagram_box*>& after, float x0, float w, float y, const char* prefix,
                   float min_cells_w) {
    const float bh = p.fs + 10, gap = p.fs * 0.9f;
    float fixed = 0;
    for (auto* b : before) fixed += box_w(p, *b) + gap;
    for (auto* b : after) fixed += box_w(p, *b) + gap;
    const float cells_w = std::max(min_cells_w, std::min(w - fixed, L * p.fs * 2.2f));
    float x = x0 + std::max(0.0f, (w - fixed - cells_w) / 2);
    strip_layout out;
    auto join = [&](float to) { arrow(p.dl, ImVec2(x - gap + 1, y + bh / 2), ImVec2(to - 1, y + bh / 2), col_line); };
    bool first = true;
    for (auto* b : before) {
        if (!first) join(x);
        first = false;
        const float bw = box_w(p, *b);
        draw_box(p, *b, ImRect(ImVec2(x, y), ImVec2(x + bw, y + bh)), prefix);
        x += bw + gap;
    }
    if (!first) join(x);
    out.walked = layer_cells(p, L, walked, x, x + cells_w, y, bh, !*prefix, *prefix ? "encoder layer" : "layer");
    x += cells_w + gap;
    for (auto* b : after) {
        join(x);
        const float bw = box_w(p, *b);
        const ImRect r(ImVec2(x, y), ImVec2(x + bw, y + bh));
        draw_box(p, *b, r, prefix);
        out.after.push_back(r);
        x += bw + gap;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// The walked layer, opened up
// ---------------------------------------------------------------------------------------------

// One sublayer's row: its boxes from the stream (at stream_x, or from `from_x` for a parallel block's MLP) to
// the right, and back into the add node on the stream under it. Returns the height used.
float sublayer_row(pic& p, const std::vector<const gb::diagram_box*>& row, const gb::diagram_box* add, float stream_x,
                   float from_x, float x1, float y, bool head_path) {
    const float bh = p.fs + 10 + p.fs * 0.35f, gap = p.fs * 1.0f, cy = y + bh / 2;
    float need = 0;
    for (auto* b : row) need += box_w(p, *b) + gap;
    const float stretch = std::max(1.0f, std::min(1.35f, (x1 - stream_x - gap * 1.5f) / std::max(1.0f, need)));
    float x = stream_x + gap * 1.6f;
    p.view->need_w = std::max(p.view->need_w, x + need + gap - p.x0);
    arrow(p.dl, ImVec2(from_x, cy), ImVec2(x - 1, cy), col_line);
    float last = x;
    for (size_t i = 0; i < row.size(); i++) {
        const float bw = box_w(p, *row[i]) * stretch;
        if (i > 0) {
            const bool hp = head_path && has_heads(*row[i - 1]) && has_heads(*row[i]);
            arrow(p.dl, ImVec2(last + 1, cy), ImVec2(x - 1, cy), hp ? col_head : col_line, hp ? 2.2f : 1.5f);
        }
        draw_box(p, *row[i], ImRect(ImVec2(x, y), ImVec2(x + bw, y + bh)));
        last = x + bw;
        x += bw + gap * stretch;
    }
    // back to the stream: right, down under the shapes, left into the add node
    const float ry = y + bh + p.sf + 4, r = p.fs * 0.5f;
    p.dl->AddLine(ImVec2(last, cy), ImVec2(last + gap * 0.5f, cy), col_line, 1.5f);
    p.dl->AddLine(ImVec2(last + gap * 0.5f, cy), ImVec2(last + gap * 0.5f, ry), col_line, 1.5f);
    arrow(p.dl, ImVec2(last + gap * 0.5f, ry), ImVec2(stream_x + r + 1, ry), col_line);
    if (add) { // the add node: a circled plus on the stream (Post-LN: the norm under it); lit with its step
        const bool lit = add->part == p.lit, seen = p.visited[add->part];
        p.dl->AddCircleFilled(ImVec2(stream_x, ry), r, lit ? col_lit : seen ? col_visited : col_fill);
        p.dl->AddCircle(ImVec2(stream_x, ry), r, lit ? col_lit : col_stream, 0, lit ? 2.5f : 1.5f);
        p.dl->AddLine(ImVec2(stream_x - r * 0.55f, ry), ImVec2(stream_x + r * 0.55f, ry), lit ? col_lit_text : col_text, 1.5f);
        p.dl->AddLine(ImVec2(stream_x, ry - r * 0.55f), ImVec2(stream_x, ry + r * 0.55f), lit ? col_lit_text : col_text, 1.5f);
        ImGui::SetCursorScreenPos(ImVec2(stream_x - r, ry - r));
        ImGui::PushID((int)add->part);
        if (ImGui::InvisibleButton("##add", ImVec2(2 * r, 2 * r)))
            for (size_t i = 0; i < p.in->parts.size(); i++)
                if (p.in->parts[i] == add->part) {
                    p.out->goto_step = (int)i;
                    break;
                }
        ImGui::PopID();
        remember_item(*p.ui, std::string("learn box ") + gb::part_name(add->part));
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s  %s\n%s", add->title.c_str(), add->shape().c_str(), font_safe(add->formula).c_str());
        p.view->boxes.push_back({gb::part_name(add->part), add->label, add->shape(), lit, -1,
                                 ImVec4(stream_x - r, ry - r, stream_x + r, ry + r)});
        if (add->label.size() > 3) { // Post-LN ("+, LN"): the norm on the stream itself, right after the add
            const std::string norm = add->label.substr(3);
            const float nw = p.text_w(norm.c_str(), p.sf) + 8, ny = ry + r + 3;
            p.dl->AddRectFilled(ImVec2(stream_x - nw / 2, ny), ImVec2(stream_x + nw / 2, ny + p.sf + 4), lit ? col_lit : col_fill, 3);
            p.dl->AddRect(ImVec2(stream_x - nw / 2, ny), ImVec2(stream_x + nw / 2, ny + p.sf + 4), lit ? col_lit : family_colour(gb::PART_NORM_MLP), 3);
            p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2(stream_x - nw / 2 + 4, ny + 2), lit ? col_lit_text : col_text, norm.c_str());
            return ny + p.sf + 7 - y;
        }
    }
    return ry + r + 3 - y;
}

// The layer's rows: attention, cross-attention (encoder–decoders), MLP, off the residual stream running down the
// left side. Returns the height used.
float layer_block(pic& p, ImRect frame, int layer) {
    const gb::learn_diagram& g = *p.in->g;
    char title[96];
    snprintf(title, sizeof title, " layer %d of %d, opened: every layer repeats it with its own weights ", layer, g.n_layer);
    const float tw = p.text_w(title, p.sf), tx = frame.Max.x - tw - p.fs;
    p.dl->AddRectFilled(ImVec2(tx, frame.Min.y - p.sf / 2), ImVec2(tx + tw, frame.Min.y + p.sf / 2), IM_COL32(21, 22, 27, 255));
    p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2(tx, frame.Min.y - p.sf / 2), p.in_layer_lit ? col_lit : col_dim, title);
    const float stream_x = frame.Min.x + p.fs * 1.9f, top = frame.Min.y + 3;
    std::vector<const gb::diagram_box*> rows[3];
    const gb::diagram_box* adds[3] = {g.find(gb::PART_ADD_ATTN), g.find(gb::PART_ADD_CROSS), g.find(gb::PART_ADD_MLP)};
    for (const gb::diagram_box& b : g.boxes) {
        if (!gb::part_in_layer(b.part) || b.part == gb::PART_ADD_ATTN || b.part == gb::PART_ADD_CROSS || b.part == gb::PART_ADD_MLP) continue;
        rows[b.part == gb::PART_CROSS ? 1 : gb::part_sublayer(b.part) == 2 ? 2 : 0].push_back(&b);
    }
    float y = top + p.fs * 0.35f;
    const float bh = p.fs + 10 + p.fs * 0.35f;
    p.dl->ChannelsSplit(2); // the stream (drawn last, once its length is known) under the add nodes and norms
    p.dl->ChannelsSetCurrent(1);
    for (int k = 0; k < 3; k++) {
        if (rows[k].empty()) continue;
        // a parallel block's MLP reads the layer's input: a rail from the top of the stream, beside it
        const bool rail = k == 2 && g.parallel;
        const float from = rail ? stream_x + p.fs * 0.6f : stream_x;
        if (rail) {
            p.dl->AddLine(ImVec2(stream_x, top + 2), ImVec2(from, top + 2), col_stream, 1.5f);
            p.dl->AddLine(ImVec2(from, top + 2), ImVec2(from, y + bh / 2), col_stream, 1.5f);
        }
        if (k == 1) { // the encoder's output comes in from above the cross-attention box
            const float bx = stream_x + p.fs * 1.6f + box_w(p, *rows[1][0]) * 0.5f;
            y += p.sf + 2;
            arrow(p.dl, ImVec2(bx + p.fs * 3, y - p.sf - 1), ImVec2(bx + 4, y - 1), col_head);
            p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2(bx + p.fs * 3 + 4, y - p.sf - 3), col_head,
                          "the encoder's output: every source token");
        }
        y += sublayer_row(p, rows[k], adds[k], stream_x, from, frame.Max.x - 6, y, k == 0);
    }
    // the stream, on into the next layer
    p.dl->ChannelsSetCurrent(0);
    p.dl->AddLine(ImVec2(stream_x, top - 3), ImVec2(stream_x, y), col_stream, 2.0f);
    arrow(p.dl, ImVec2(stream_x, y - 2), ImVec2(stream_x, y + p.sf + 2), col_stream, 2.0f);
    p.dl->AddText(ImGui::GetFont(), p.sf, ImVec2(stream_x + 8, y), col_dim, "the residual stream x [T, d], on to the next layer");
    p.dl->ChannelsMerge();
    return y + p.sf + 6 - frame.Min.y;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Glyphs
// ---------------------------------------------------------------------------------------------

std::string font_safe(const std::string& s) {
    static const std::pair<const char*, const char*> swaps[] = {{"\u1D40", "\u22A4"}}; // ᵀ -> ⊤
    std::string out = s;
    for (auto [from, to] : swaps)
        for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + 1)) out.replace(at, std::string(from).size(), to);
    return out;
}

void missing_glyphs(const std::string& s, std::vector<std::string>& out) {
    ImFont* f = ImGui::GetFont();
    for (const char* c = s.c_str(); *c;) {
        unsigned int cp = 0;
        const int n = ImTextCharFromUtf8(&cp, c, nullptr);
        if (n <= 0) break;
        c += n;
        if (cp < 0x20 || (cp <= 0xFFFF && f->FindGlyphNoFallback((ImWchar)cp))) continue;
        char b[16];
        snprintf(b, sizeof b, "U+%04X", cp);
        if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
    }
}

// ---------------------------------------------------------------------------------------------
// The picture
// ---------------------------------------------------------------------------------------------

float learn_picture(ui_context& ui, learn_view& view, const learn_picture_in& in, float w, float h, learn_picture_out& out) {
    (void)h;
    const gb::learn_diagram& g = *in.g;
    pic p;
    p.dl = ImGui::GetWindowDrawList(), p.ui = &ui, p.view = &view, p.in = &in, p.out = &out;
    p.fs = ImGui::GetFontSize(), p.sf = std::round(p.fs * 0.82f);
    p.visited.assign(gb::PART_COUNT + 1, false);
    if (in.step >= 0 && in.step < (int)in.parts.size()) p.lit = in.parts[in.step];
    for (int i = 0; i < in.step && i < (int)in.parts.size(); i++) p.visited[in.parts[i]] = true;
    p.in_layer_lit = gb::part_in_layer(p.lit);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    p.x0 = o.x;
    float y = o.y + 2;
    const float strip_h = p.fs + 10 + p.sf + 6;
    // an encoder–decoder's encoder: its own strip, its output arrowing into every decoder layer below
    std::vector<ImRect> enc_out;
    if (!g.encoder.empty()) {
        std::vector<const gb::diagram_box*> before, after;
        for (const gb::diagram_box& b : g.encoder) {
            if (b.part == gb::PART_INPUT || b.part == gb::PART_EMBED) before.push_back(&b);
            if (b.part == gb::PART_FINAL_NORM) after.push_back(&b);
        }
        enc_out = strip(p, before, g.encoder_layers, -1, after, o.x, w * 0.62f, y, "encoder ", p.fs * 6).after;
        view.encoder_layers = g.encoder_layers;
        y += strip_h + p.fs * 0.8f;
    }
    std::vector<const gb::diagram_box*> before, after;
    for (const gb::diagram_box& b : g.boxes) {
        if (b.part == gb::PART_INPUT || b.part == gb::PART_EMBED) before.push_back(&b);
        if (b.part >= gb::PART_FINAL_NORM) after.push_back(&b);
    }
    const strip_layout s = strip(p, before, g.n_layer, in.layer, after, o.x, w, y, "", p.fs * 6);
    view.layers = g.n_layer;
    if (!enc_out.empty()) { // the cross-attention's input: the encoder's output into each decoder layer
        const ImVec2 from((enc_out[0].Min.x + enc_out[0].Max.x) / 2, enc_out[0].Max.y + p.sf + 2);
        const float cw = s.walked.GetWidth() + 2, x_walked = s.walked.Min.x;
        for (int l = 0; l < g.n_layer; l++) {
            const float cx = x_walked + (l - in.layer) * cw + cw / 2 - 1;
            arrow(p.dl, from, ImVec2(cx, y - 1), l == in.layer ? col_head : IM_COL32(200, 110, 95, 150), l == in.layer ? 2.0f : 1.0f);
            view.cross_arrows++;
        }
    }
    y += strip_h + p.fs * 0.9f;
    // the walked layer, opened: a funnel from its cell
    const ImRect frame(ImVec2(o.x, y), ImVec2(o.x + w, y + 1));
    if (s.walked.GetWidth() > 0) { // the funnel first: the block's frame and legend draw over its edge
        const ImU32 fc = IM_COL32(250, 200, 90, p.in_layer_lit ? 60 : 30);
        p.dl->AddQuadFilled(ImVec2(s.walked.Min.x, s.walked.Max.y), ImVec2(s.walked.Max.x, s.walked.Max.y),
                            ImVec2(frame.Max.x - 1, frame.Min.y), ImVec2(frame.Min.x + 1, frame.Min.y), fc);
    }
    const float used = layer_block(p, frame, in.layer);
    const ImRect box(frame.Min, ImVec2(frame.Max.x, frame.Min.y + used));
    p.dl->AddRect(box.Min, box.Max, p.in_layer_lit ? IM_COL32(250, 200, 90, 160) : IM_COL32(90, 96, 110, 255), 6, 0, 1.2f);
    const float total = box.Max.y - o.y + 4;
    ImGui::SetCursorScreenPos(o);
    ImGui::Dummy(ImVec2(w, total));
    return total;
}

} // namespace gbui
