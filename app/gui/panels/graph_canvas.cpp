// The Graph tab's picture (graph_panel.h): layers as rows over the tokens, the logits on top; each kept feature a
// circle sized by its influence, each error node a grey square, each kept edge a line, orange where it raises its
// target and blue where it lowers it, as opaque as it is strong. Pinned nodes are ringed and the paths through them
// lit; supernodes are named boxes around their members. Hover a feature for its top contexts and logit effects, an
// edge for its head loadings (both computed on the tab's job thread, graph_tasks.h); click a node to pin it;
// right-click a feature to ablate or clamp it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph_panel.h"
#include "graph_tasks.h"
#include "text_scale.h"

namespace gbui {

namespace {

// The links on pinned paths: two walks over the links (6,500 on the Eiffel prompt: microseconds), so redone each
// frame rather than cached against a view that a new output may replace at the same address
std::vector<uint8_t> lit_by_pins(const graph_view& v, const std::vector<std::string>& pinned) {
    return pinned.empty() ? std::vector<uint8_t>(v.links.size(), 0) : pinned_paths(v, pinned);
}

float segment_distance(ImVec2 p, ImVec2 a, ImVec2 b) {
    const float dx = b.x - a.x, dy = b.y - a.y, len2 = dx * dx + dy * dy;
    const float t = len2 > 0 ? std::clamp(((p.x - a.x) * dx + (p.y - a.y) * dy) / len2, 0.0f, 1.0f) : 0.0f;
    const float ex = a.x + t * dx - p.x, ey = a.y + t * dy - p.y;
    return std::sqrt(ex * ex + ey * ey);
}

struct canvas {
    ImDrawList* dl = nullptr;
    ImVec2 o;          // the picture's corner (right of the row labels)
    ImVec2 size;
    graph_place pl;
    ImVec2 at(int i) const { return ImVec2(o.x + pl.x[i], o.y + pl.y[i]); }
};

void draw_rows(const canvas& c, const graph_view& v, float label_w) {
    const float th = ImGui::GetTextLineHeight();
    for (int l = 0; l < v.n_layer; l++) { // row labels and faint row lines
        const float y = c.o.y + (v.n_layer - l + 0.5f) * c.pl.row_h;
        c.dl->AddText(ImVec2(c.o.x - label_w, y - th / 2), ImGui::GetColorU32(ImGuiCol_TextDisabled), ("L" + std::to_string(l)).c_str());
        c.dl->AddLine(ImVec2(c.o.x, y), ImVec2(c.o.x + c.size.x, y), IM_COL32(255, 255, 255, 18));
    }
    c.dl->AddText(ImVec2(c.o.x - label_w, c.o.y + 0.5f * c.pl.row_h - th / 2), ImGui::GetColorU32(ImGuiCol_TextDisabled), "out");
}

// Each supernode a named box around its members (drawn under the links and nodes)
void draw_supernodes(const canvas& c, const graph_view& v, const std::vector<graph_supernode>& groups) {
    for (const graph_supernode& g : groups) {
        ImVec2 lo(1e9f, 1e9f), hi(-1e9f, -1e9f);
        for (const std::string& id : g.members)
            if (const int i = v.find(id); i >= 0) {
                const ImVec2 p = c.at(i);
                const float r = c.pl.r[i] + px(4);
                lo = ImVec2(std::min(lo.x, p.x - r), std::min(lo.y, p.y - r)), hi = ImVec2(std::max(hi.x, p.x + r), std::max(hi.y, p.y + r));
            }
        if (lo.x > hi.x) continue;
        c.dl->AddRectFilled(lo, hi, IM_COL32(190, 140, 255, 40), px(4));
        c.dl->AddRect(lo, hi, IM_COL32(190, 140, 255, 220), px(4), 0, px(1.5f));
        c.dl->AddText(ImVec2(lo.x, lo.y - ImGui::GetTextLineHeight()), IM_COL32(215, 185, 255, 255), g.name.c_str());
    }
}

void draw_links(const canvas& c, const graph_view& v, const graph_inputs& gin) {
    const std::vector<uint8_t> pinned = lit_by_pins(v, gin.pinned);
    const bool any_pin = std::find(pinned.begin(), pinned.end(), 1) != pinned.end();
    for (size_t k = 0; k < v.links.size(); k++) {
        const graph_link& l = v.links[k];
        const float a = v.max_weight > 0 ? std::sqrt(std::fabs(l.weight) / v.max_weight) : 0;
        const bool lit = gin.hovered >= 0 ? l.target == gin.hovered || l.source == gin.hovered
                         : gin.hovered_link >= 0 ? (int)k == gin.hovered_link
                         : any_pin ? pinned[k] != 0
                                   : true;
        const int alpha = std::min(255, (int)(lit ? 12 + 220 * a * a + (any_pin && gin.hovered < 0 ? 40 : 0) : 6 + 24 * a * a));
        const ImU32 col = l.weight > 0 ? IM_COL32(255, 150, 40, alpha) : IM_COL32(80, 150, 255, alpha);
        const float wid = std::max(1.0f, px(2.5f) * a) * ((int)k == gin.hovered_link ? 2.0f : 1.0f);
        c.dl->AddLine(c.at(l.source), c.at(l.target), col, wid);
    }
}

// A feature's fill shows its activation in the edited run: faded by the share it kept, ringed orange when it grew,
// an empty circle crossed when it is off
void draw_nodes(const canvas& c, const graph_view& v, const graph_inputs& gin) {
    for (size_t i = 0; i < v.nodes.size(); i++) {
        const graph_node& n = v.nodes[i];
        const ImVec2 p = c.at((int)i);
        const float r = c.pl.r[i];
        if (n.kind == GNODE_ERROR) {
            c.dl->AddRectFilled(ImVec2(p.x - r, p.y - r), ImVec2(p.x + r, p.y + r), IM_COL32(150, 150, 150, 255));
        } else if (n.kind == GNODE_FEATURE) {
            const float share = n.activation > 0 ? n.act_after / n.activation : 1.0f;
            if (n.act_after == 0 && n.activation != 0) {
                c.dl->AddCircle(p, r, IM_COL32(245, 225, 120, 200), 0, px(1.2f));
                c.dl->AddLine(ImVec2(p.x - r * 0.7f, p.y - r * 0.7f), ImVec2(p.x + r * 0.7f, p.y + r * 0.7f), IM_COL32(255, 90, 90, 255), px(1.5f));
            } else {
                c.dl->AddCircleFilled(p, r, IM_COL32(245, 225, 120, (int)(255 * std::clamp(0.2f + 0.8f * share, 0.2f, 1.0f))));
                if (share > 1.05f) c.dl->AddCircle(p, r + px(2), IM_COL32(255, 150, 40, 255), 0, px(1.5f));
            }
        } else {
            c.dl->AddCircleFilled(p, r, n.kind == GNODE_TOKEN ? IM_COL32(120, 220, 140, 255) : IM_COL32(120, 220, 140, 255));
        }
        if (std::find(gin.pinned.begin(), gin.pinned.end(), n.id) != gin.pinned.end())
            c.dl->AddCircle(p, r + px(3.5f), IM_COL32(255, 255, 255, 255), 0, px(2));
    }
}

void draw_words(const canvas& c, const graph_view& v) {
    const int T = (int)v.tokens.size();
    for (int t = 0; t < T; t++) { // tokens under their columns
        const float w = ImGui::CalcTextSize(v.tokens[t].c_str()).x;
        if (w < c.pl.col_w * 1.6f || T < 12)
            c.dl->AddText(ImVec2(c.o.x + (t + 0.5f) * c.pl.col_w - w / 2, c.o.y + c.size.y + 2), ImGui::GetColorU32(ImGuiCol_Text), v.tokens[t].c_str());
    }
    for (size_t i = 0; i < v.nodes.size(); i++) { // each logit's word right of its node, with its probability
        const graph_node& n = v.nodes[i];
        if (n.kind != GNODE_LOGIT) continue;
        char prob[48]; // in the edited run (the table beside the picture has both)
        std::snprintf(prob, sizeof prob, " %.2f", n.prob_after);
        const std::string lab = (n.label.rfind("logit ", 0) == 0 ? n.label.substr(6) : n.label) + prob;
        const ImVec2 p = c.at((int)i);
        c.dl->AddText(ImVec2(p.x + c.pl.r[i] + px(3), p.y - ImGui::GetTextLineHeight() / 2), ImGui::GetColorU32(ImGuiCol_Text), lab.c_str());
    }
}

// The node, else the link, under the mouse (-1 each when none)
void find_hover(const canvas& c, const graph_view& v, ImVec2 mouse, int& node, int& link) {
    node = link = -1;
    float best = 1e9f;
    for (size_t i = 0; i < v.nodes.size(); i++) {
        const ImVec2 p = c.at((int)i);
        const float dx = mouse.x - p.x, dy = mouse.y - p.y, d2 = dx * dx + dy * dy, r = c.pl.r[i] + px(3);
        if (d2 <= r * r && d2 < best) best = d2, node = (int)i;
    }
    if (node >= 0) return;
    for (size_t k = 0; k < v.links.size(); k++) // of the lines under the mouse the strongest (drawn last, on top)
        if (segment_distance(mouse, c.at(v.links[k].source), c.at(v.links[k].target)) <= px(3.5f)) link = (int)k;
}

// Widgets the scripts can hover and click: every node, and the midpoints of the 300 strongest links
void remember_spots(ui_context& ui, const canvas& c, const graph_view& v) {
    const int frame = ImGui::GetFrameCount();
    auto note = [&](const std::string& name, ImVec2 p, float r) {
        ui.widgets[name] = ImVec4(p.x - r, p.y - r, p.x + r, p.y + r);
        ui.widget_frame[name] = frame;
    };
    for (size_t i = 0; i < v.nodes.size(); i++) note("graph node " + v.nodes[i].id, c.at((int)i), 1);
    for (size_t k = v.links.size() > 300 ? v.links.size() - 300 : 0; k < v.links.size(); k++) {
        const ImVec2 a = c.at(v.links[k].source), b = c.at(v.links[k].target);
        note("graph link " + v.nodes[v.links[k].target].id + " " + v.nodes[v.links[k].source].id, ImVec2((a.x + b.x) / 2, (a.y + b.y) / 2), 0.5f);
    }
}

} // namespace

// tooltips and the right-click menu: panels/graph_tooltips.cpp
void graph_node_tooltip(const app_state& s, const graph_view& v, int node, const graph_output* go);
void graph_link_tooltip(const graph_view& v, int link, const std::shared_ptr<const graph_output>& go);
void graph_node_menu(app_state& s, ui_context& ui, const graph_view& v);

void draw_graph_canvas(app_state& s, ui_context& ui, const graph_view& v, const std::shared_ptr<const graph_output>& go) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = px(34), token_h = ImGui::GetTextLineHeightWithSpacing();
    const bool edited = go && !go->edits.empty() && !gin.opened;
    const float side_w = edited ? px(300) : 0; // the before/after table beside the picture
    canvas c;
    c.dl = ImGui::GetWindowDrawList();
    c.size = ImVec2(std::max(px(100), avail.x - label_w - side_w), std::max(px(80), avail.y - token_h));
    c.o = ImVec2(o.x + label_w, o.y);
    ImGui::InvisibleButton("##graph canvas", ImVec2(label_w + c.size.x, c.size.y + token_h));
    remember_item(ui, "graph canvas");
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
    const bool rclicked = hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right);
    c.pl = place_view(v, c.size.x, c.size.y, px(1));
    int node = -1, link = -1;
    if (hovered) find_hover(c, v, ImGui::GetIO().MousePos, node, link);
    gin.hovered = node, gin.hovered_link = link;
    draw_rows(c, v, label_w);
    draw_supernodes(c, v, gin.supernodes);
    draw_links(c, v, gin);
    draw_nodes(c, v, gin);
    draw_words(c, v);
    remember_spots(ui, c, v);
    if (clicked && node >= 0) toggle_graph_pin(gin, v.nodes[node].id);
    if (rclicked && node >= 0) {
        if (v.nodes[node].kind != GNODE_FEATURE) {
            gin.error = "right-click a feature to ablate or clamp it; " + v.nodes[node].label + " is no feature";
        } else if (!go || gin.opened) {
            gin.error = "ablating and clamping act on the shown run's graph, not on a graph opened from a file";
        } else {
            gin.menu_node = node, gin.clamp_value = 2 * v.nodes[node].activation;
            ImGui::OpenPopup("graph node menu");
        }
    }
    graph_node_menu(s, ui, v);
    if (node >= 0 && !ImGui::IsPopupOpen("graph node menu")) graph_node_tooltip(s, v, node, gin.opened ? nullptr : go.get());
    if (link >= 0 && !ImGui::IsPopupOpen("graph node menu")) graph_link_tooltip(v, link, gin.opened ? nullptr : go);
    if (edited) {
        ImGui::SameLine();
        ImGui::BeginGroup();
        ImGui::TextUnformatted("top tokens: before | after");
        if (ImGui::BeginTable("##graph before after", 3, ImGuiTableFlags_SizingFixedFit)) {
            for (size_t i = 0; i < go->top_before.size() && i < go->top_after.size(); i++) {
                const graph_logit_change& b = go->top_before[i], &a = go->top_after[i];
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::Text("%s %.3f", quoted(go->from->model->tok, b.id).c_str(), b.before);
                ImGui::TableNextColumn();
                ImGui::TextDisabled("|");
                ImGui::TableNextColumn();
                ImGui::Text("%s %.3f", quoted(go->from->model->tok, a.id).c_str(), a.after);
            }
            ImGui::EndTable();
        }
        ImGui::EndGroup();
    }
}

} // namespace gbui
