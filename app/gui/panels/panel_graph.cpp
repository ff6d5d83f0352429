// The Graph tab: the shown run's attribution graph over transcoder features (graph_analysis.h, docs/graphs.md),
// or one opened from a Neuronpedia JSON file. Above the picture (graph_canvas.cpp): the transcoder set and the two
// prune sliders (the graph is built once per run and set; a threshold re-prunes it), the file box with Open and
// Save, the pins with the supernode name box and Group, the edits in force; then the scores.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "analysis/graph_json.h"
#include "feature_analysis.h"
#include "file_dialog.h"
#include "graph_panel.h" // (imgui.h, before imgui_stdlib.h)
#include <imgui_stdlib.h>
#include "graph_tasks.h"
#include "text_scale.h"
#include "util/error.h"

namespace gbui {

const std::string& graph_corpus() {
    static const std::string corpus = shipped_text();
    return corpus;
}

const graph_view* shown_graph_view(const app_state& s) {
    const auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    if (gin.opened) return gin.opened.get();
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    return go && go->g ? &go->view : nullptr;
}

void toggle_graph_pin(graph_inputs& gin, const std::string& id) {
    auto it = std::find(gin.pinned.begin(), gin.pinned.end(), id);
    if (it == gin.pinned.end()) gin.pinned.push_back(id);
    else gin.pinned.erase(it);
    gin.error.clear();
}

bool group_graph_pins(graph_inputs& gin) {
    if (gin.group_name.empty()) {
        gin.error = "a supernode needs a name: type one in the box beside Group";
        return false;
    }
    if (gin.pinned.size() < 2) {
        gin.error = "a supernode groups pinned nodes: click at least two nodes to pin them first";
        return false;
    }
    gin.supernodes.push_back({gin.group_name, gin.pinned});
    gin.pinned.clear(), gin.group_name.clear(), gin.error.clear();
    return true;
}

void set_graph_edit(graph_inputs& gin, const graph_node& n, float value, bool every_position) {
    if (n.kind != GNODE_FEATURE) {
        gin.error = "right-click a feature to ablate or clamp it; " + n.label + " is no feature";
        return;
    }
    const int pos = every_position ? -1 : n.pos;
    auto same = [&](const gb::graph_edit& e) { return e.layer == n.layer && e.pos == pos && e.index == (int)n.feature; };
    gin.edits.erase(std::remove_if(gin.edits.begin(), gin.edits.end(), same), gin.edits.end());
    gb::graph_edit e;
    e.layer = n.layer, e.pos = pos, e.index = (int)n.feature, e.value = value;
    gin.edits.push_back(e);
    gin.error.clear();
}

namespace {

// ---- files: read and written on the tab's job thread ----

// Starts the job of the press (open or save), named so that its answer is picked up by poll_file_job
void start_file_job(app_state& s, bool save) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const std::string path = gin.file;
    if (path.empty()) {
        gin.error = std::string("type or Browse... a JSON file to ") + (save ? "save the graph to" : "open");
        return;
    }
    gin.file_job = (save ? "save|" : "open|") + std::to_string(++gin.file_jobs) + "|" + path;
    if (!save) {
        std::shared_ptr<const gb::model> m = s.model;
        graph_job_at(gin.file_job, [m, path] {
            if (!m) throw gb::error("open a model before a graph");
            std::ifstream f(path);
            if (!f) throw gb::error("cannot open " + path);
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(f);
            } catch (const nlohmann::json::exception& e) {
                throw gb::error(path + ": not JSON (" + std::string(e.what()) + ")");
            }
            return std::static_pointer_cast<const void>(std::make_shared<const graph_view>(view_of_file(j, path, *m)));
        });
        return;
    }
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    if (!go || !go->g || gin.opened) {
        gin.error = gin.opened ? "Save writes the shown run's graph: go back to it first" : "no graph to save yet";
        gin.file_job.clear();
        return;
    }
    const std::vector<std::string> pins = gin.pinned;
    const std::vector<graph_supernode> groups = gin.supernodes;
    graph_job_at(gin.file_job, [go, path, pins, groups] {
        std::string slug = path.substr(path.find_last_of('/') + 1);
        slug = slug.substr(0, slug.rfind('.'));
        const std::string scan = go->set->model_name.empty() ? "glassbox" : go->set->model_name;
        nlohmann::json j = gb::neuronpedia_json(*go->g, go->pruned, go->from->model->tok, go->from->prompt, slug, scan, go->node_threshold);
        add_qparams(j, pins, groups);
        std::ofstream f(path);
        if (!f || !(f << j.dump(1) << "\n")) throw gb::error("cannot write " + path);
        return std::static_pointer_cast<const void>(std::make_shared<const std::string>(
            "saved " + path + ": " + std::to_string(j["nodes"].size()) + " nodes, " + std::to_string(j["links"].size()) + " links"));
    });
}

// Export SVG: the shown view with its pins and supernodes, written beside the JSON box's name
void start_svg_job(app_state& s) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const graph_view* v = shown_graph_view(s);
    if (!v) {
        gin.error = "no graph to export yet";
        return;
    }
    std::string path = gin.file.empty() ? "glassbox-graph.json" : gin.file;
    const size_t dot = path.rfind('.');
    path = (dot != std::string::npos && dot > path.find_last_of('/') + 1 ? path.substr(0, dot) : path) + ".svg";
    gin.file_job = "svg|" + std::to_string(++gin.file_jobs) + "|" + path;
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    const std::shared_ptr<const graph_view> opened = gin.opened; // (the view lives as long as they do)
    const std::vector<std::string> pins = gin.pinned;
    const std::vector<graph_supernode> groups = gin.supernodes;
    graph_job_at(gin.file_job, [go, opened, v, path, pins, groups] {
        const std::string svg = view_svg(*v, pins, groups, 1200, 640);
        std::ofstream f(path);
        if (!f || !(f << svg)) throw gb::error("cannot write " + path);
        return std::static_pointer_cast<const void>(std::make_shared<const std::string>(
            "wrote " + path + ": " + std::to_string(v->nodes.size()) + " nodes, " + std::to_string(v->links.size()) + " links"));
    });
}

// A file job's answer, once it comes: an opened graph is shown (its pins and supernodes with it), a saved one
// noted; an error is the tab's line and the tab stays as it was
void poll_file_job(app_state& s) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    if (gin.file_job.empty()) return;
    const graph_job j = graph_job_at(gin.file_job, [] { return std::shared_ptr<const void>(); });
    if (!j.done) return;
    const bool open = gin.file_job.rfind("open|", 0) == 0;
    graph_job_forget(gin.file_job);
    gin.file_job.clear();
    if (!j.error.empty() || !j.result) {
        gin.error = j.error.empty() ? "the file job gave no answer" : j.error, gin.note.clear();
        return;
    }
    gin.error.clear();
    if (open) {
        gin.opened = std::static_pointer_cast<const graph_view>(j.result);
        gin.pinned = gin.opened->pinned, gin.supernodes = gin.opened->supernodes;
        gin.note = "opened " + gin.opened->file + ": " + std::to_string(gin.opened->nodes.size()) + " nodes, " +
                   std::to_string(gin.opened->links.size()) + " links";
    } else {
        gin.note = *std::static_pointer_cast<const std::string>(j.result); // saved, or the picture written
    }
}

void file_row(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    path_box(ui, "graph file", gin.file, BROWSE_SESSION, "a graph's JSON file (Neuronpedia's)", std::max(px(200), ImGui::GetContentRegionAvail().x * 0.3f));
    ImGui::SameLine();
    ImGui::BeginDisabled(!gin.file_job.empty());
    if (ImGui::Button("Open")) start_file_job(s, false);
    remember_item(ui, "graph open");
    ImGui::SameLine();
    if (!gin.opened) {
        if (ImGui::Button("Save")) start_file_job(s, true);
        remember_item(ui, "graph save");
    } else {
        if (ImGui::Button("Back to the run's graph")) gin.opened.reset(), gin.note.clear();
        remember_item(ui, "graph back");
    }
    ImGui::SameLine();
    if (ImGui::Button("Export SVG")) start_svg_job(s);
    remember_item(ui, "graph svg");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the picture as it shows (pins and supernodes too) into the JSON box's name with .svg, "
                          "or glassbox-graph.svg; the View menu's export writes the whole panel as SVG and PNG");
    ImGui::EndDisabled();
}

// The pins and supernodes, once a node is pinned (before that the tab's hint says how)
void pins_row(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    if (gin.pinned.empty() && gin.supernodes.empty()) return;
    ImGui::AlignTextToFramePadding();
    if (gin.pinned.empty()) ImGui::TextDisabled("pin nodes to group them:");
    else ImGui::Text("%zu pinned", gin.pinned.size());
    ImGui::SameLine();
    ImGui::SetNextItemWidth(px(140));
    ImGui::InputTextWithHint("##graph group name", "supernode name", &gin.group_name);
    remember_item(ui, "graph group name");
    ImGui::SameLine();
    if (ImGui::Button("Group")) group_graph_pins(gin);
    remember_item(ui, "graph group");
    if (!gin.pinned.empty()) {
        ImGui::SameLine();
        if (ImGui::Button("Unpin all")) gin.pinned.clear();
        remember_item(ui, "graph unpin");
    }
    for (size_t i = 0; i < gin.supernodes.size(); i++) {
        ImGui::SameLine();
        ImGui::PushID((int)i);
        const std::string lab = gin.supernodes[i].name + " (" + std::to_string(gin.supernodes[i].members.size()) + ") x";
        if (ImGui::SmallButton(lab.c_str())) {
            gin.supernodes.erase(gin.supernodes.begin() + i);
            ImGui::PopID();
            break;
        }
        remember_item(ui, "graph ungroup " + gin.supernodes[i].name);
        ImGui::PopID();
    }
}

void edits_row(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const std::vector<int>& tokens = s.result->cap().tokens;
    if (!gin.edits.empty() && gin.edits_tokens != tokens) gin.edits.clear(); // made on another prompt
    gin.edits_tokens = tokens;
    if (gin.edits.empty()) return;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("edits:");
    for (size_t i = 0; i < gin.edits.size(); i++) {
        const gb::graph_edit& e = gin.edits[i];
        char b[80];
        const std::string at = e.pos < 0 ? "*" : std::to_string(e.pos); // *: every position
        std::snprintf(b, sizeof b, "L%d #%d @%s = %.3g x##edit%zu", e.layer, e.index, at.c_str(), e.value, i);
        ImGui::SameLine();
        if (ImGui::SmallButton(b)) {
            gin.edits.erase(gin.edits.begin() + i);
            break;
        }
    }
    ImGui::SameLine();
    if (ImGui::SmallButton("Clear the edits")) gin.edits.clear();
    remember_item(ui, "graph clear edits");
}

} // namespace

void panel_graph(app_state& s, ui_context& ui) {
    auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    tab_hint("Which transcoder features, through which paths, make the prediction (the model without its ablations). "
             "Circles: features (size: influence); grey squares: what the transcoders miss; lines: direct effects, "
             "orange up, blue down. Hover for more; click nodes to pin them (and group them into a supernode); "
             "right-click a feature to ablate or clamp it.");
    poll_file_job(s);
    path_box(ui, "graph transcoders", gin.transcoders, BROWSE_TRANSCODERS, "the default model's own set (or Browse...)",
             std::max(px(200), ImGui::GetContentRegionAvail().x * 0.3f));
    if (room_right_of_item() > px(470)) ImGui::SameLine(); // the sliders beside the box where they fit
    slider_float_beside(ui, "graph nodes", &gin.node_threshold, 0.1f, 1.0f, "nodes " + std::to_string((int)std::lround(gin.node_threshold * 100)) + "%", px(110));
    ImGui::SameLine();
    slider_float_beside(ui, "graph edges", &gin.edge_threshold, 0.1f, 1.0f, "edges " + std::to_string((int)std::lround(gin.edge_threshold * 100)) + "%", px(110));
    file_row(s, ui);
    pins_row(s, ui);
    if (s.result) edits_row(s, ui);
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    const analysis_status& st = s.analysis[ANALYSIS_GRAPH];
    ImGui::PushTextWrapPos(0);
    if (!gin.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", gin.error.c_str());
    else if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_GRAPH]) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", st.error.c_str());
    else if (!gin.file_job.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s...", gin.file_job.rfind("open|", 0) == 0 ? "reading the file" : "writing the file");
    else if (!gin.opened && (st.busy || (go && go->key != s.analysis_want[ANALYSIS_GRAPH])))
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s... %.0f%%", go && go->g && go->from == s.result ? "updating the graph" : "building the graph", st.progress * 100);
    else if (!gin.note.empty()) ImGui::TextDisabled("%s", gin.note.c_str());
    ImGui::PopTextWrapPos();
    if (gin.opened) {
        const graph_view& v = *gin.opened;
        ImGui::TextDisabled("from %s%s%s: %zu nodes, %zu links", v.file.c_str(), v.scan.empty() ? "" : ", scan ", v.scan.c_str(), v.nodes.size(), v.links.size());
        draw_graph_canvas(s, ui, v, nullptr);
        return;
    }
    if (!go || !go->g) return;
    const int kept = (int)std::count(go->pruned.node_mask.begin(), go->pruned.node_mask.end(), 1);
    ImGui::TextDisabled("replacement %.2f, completeness %.2f; %d of %d nodes, %zu edges kept; %.0f ms", go->pruned.replacement_score,
                        go->pruned.completeness_score, kept, go->g->n_nodes(), go->edges.size(), go->ms);
    draw_graph_canvas(s, ui, go->view, go);
}

} // namespace gbui
