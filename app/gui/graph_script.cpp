// The Graph tab's script commands (graph_panel.h): graph-wait and graph-print, what the GUI tests read of the tab
// (tests/test_gui_graph.cpp). The tab itself is driven as a user drives it: hover, click and rclick on the nodes
// ("graph node ID") and links ("graph link TARGET SOURCE") it names for scripts, type into its boxes.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "graph_panel.h"
#include "graph_tasks.h"
#include "script.h"
#include "util/error.h"

namespace gbui {

namespace {

nlohmann::json changes_json(const std::vector<graph_logit_change>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const graph_logit_change& c : v) a.push_back({{"id", c.id}, {"text", c.text}, {"before", c.before}, {"after", c.after}});
    return a;
}

// What the hovered node's or link's tooltip shows, once its job is done
void add_hover(nlohmann::json& j, const app_state& s, const graph_view& v) {
    const auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    const std::shared_ptr<const graph_output> go = gin.opened ? nullptr : output_of<graph_output>(s, ANALYSIS_GRAPH);
    if (gin.hovered >= 0 && gin.hovered < (int)v.nodes.size()) {
        const graph_node& n = v.nodes[gin.hovered];
        nlohmann::json h = {{"id", n.id}, {"label", n.label}, {"activation", n.activation}, {"act_after", n.act_after}};
        if (go && n.kind == GNODE_FEATURE) {
            const graph_job d = dashboard_job(*go, n.layer, (int)n.feature, graph_corpus());
            if (d.done && d.result) {
                const auto& db = *std::static_pointer_cast<const graph_dashboard>(d.result);
                nlohmann::json ctx = nlohmann::json::array(), up = nlohmann::json::array();
                for (const auto& c : db.contexts) ctx.push_back({{"act", c.first}, {"text", c.second}});
                for (const gb::token_effect& e : db.promotes) up.push_back({{"id", e.id}, {"effect", e.effect}});
                h["contexts"] = ctx, h["promotes"] = up, h["corpus"] = db.corpus;
            }
            if (d.done) h["error"] = d.error;
        }
        j["hovered"] = h;
    }
    if (gin.hovered_link >= 0 && gin.hovered_link < (int)v.links.size()) {
        const graph_link& l = v.links[gin.hovered_link];
        nlohmann::json h = {{"target", v.nodes[l.target].id}, {"source", v.nodes[l.source].id}, {"weight", l.weight}};
        if (go && v.nodes[l.target].index >= 0 && v.nodes[l.source].index >= 0) {
            const graph_job d = loadings_job(go, v.nodes[l.target].index, v.nodes[l.source].index);
            if (d.done && d.result) h["loadings"] = *std::static_pointer_cast<const std::vector<double>>(d.result);
            if (d.done) h["error"] = d.error;
        }
        j["hovered_link"] = h;
    }
}

void print_graph_tab(const app_state& s) {
    const auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
    nlohmann::json j = {{"error", gin.error}, {"note", gin.note}, {"pinned", gin.pinned}};
    nlohmann::json sn = nlohmann::json::array(), ed = nlohmann::json::array();
    for (const graph_supernode& g : gin.supernodes) sn.push_back({{"name", g.name}, {"members", g.members}});
    for (const gb::graph_edit& e : gin.edits) ed.push_back({{"layer", e.layer}, {"pos", e.pos}, {"feature", e.index}, {"value", e.value}});
    j["supernodes"] = sn, j["edits"] = ed;
    const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
    if (go && go->g) {
        nlohmann::json top = nlohmann::json::array(); // the kept features by influence, strongest first
        std::vector<int> f;
        for (size_t i = 0; i < go->view.nodes.size(); i++)
            if (go->view.nodes[i].kind == GNODE_FEATURE) f.push_back((int)i);
        std::sort(f.begin(), f.end(), [&](int a, int b) { return go->view.nodes[a].size > go->view.nodes[b].size; });
        for (size_t i = 0; i < f.size() && i < 10; i++) top.push_back(go->view.nodes[f[i]].id);
        j["run"] = {{"current", go->key == s.analysis_want[ANALYSIS_GRAPH]}, {"nodes", go->view.nodes.size()},
                    {"links", go->view.links.size()}, {"top_features", top},
                    {"edits", go->edits.size()}, {"top_before", changes_json(go->top_before)}, {"top_after", changes_json(go->top_after)}};
    }
    if (gin.opened) j["opened"] = {{"file", gin.opened->file}, {"nodes", gin.opened->nodes.size()}, {"links", gin.opened->links.size()},
                                   {"tokens", gin.opened->tokens}};
    if (const graph_view* v = shown_graph_view(s)) add_hover(j, s, *v);
    std::printf("%s\n", nlohmann::json({{"graph_tab", j}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
}

} // namespace

std::optional<bool> graph_command(script_runner& sc, const app_state& s, const std::string& cmd) {
    if (cmd == "graph-wait") { // at least 3 frames (a hover's job starts when its tooltip is drawn), then until done
        const auto& gin = inputs_of<graph_inputs>(s, TAB_GRAPH);
        const analysis_status& st = s.analysis[ANALYSIS_GRAPH];
        const std::shared_ptr<const graph_output> go = output_of<graph_output>(s, ANALYSIS_GRAPH);
        const std::string& want = s.analysis_want[ANALYSIS_GRAPH]; // (empty: the tab is not shown)
        const bool current = !want.empty() && !st.busy && ((go && go->key == want) || (!st.error.empty() && st.error_key == want));
        if (++sc.phase < 3 || !current || !gin.file_job.empty() || !graph_jobs_idle()) {
            if (sc.phase > 60 * 600) throw gb::error("script: graph-wait waited 10 minutes");
            return false;
        }
        sc.phase = 0;
        return true;
    }
    if (cmd == "graph-print") {
        print_graph_tab(s);
        return true;
    }
    return std::nullopt;
}

} // namespace gbui
