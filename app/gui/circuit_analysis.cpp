// The Circuit tab's analysis (circuit_analysis.h): compute on the long lane, when it is sent, and its part of the
// script's print.
#include "circuit_analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "tab_inputs.h"
#include "ui.h"

namespace gbui {

// The circuit of the patching inputs, and the faithfulness of every circuit size the slider offers (one forward
// per distinct set of nodes).
std::shared_ptr<const void> compute_circuit(const analysis_request& rq, const analysis_run& run) {
    const patch_request& q = request_of<patch_request>(rq);
    const keep_going& go = run.go;
    const auto t0 = std::chrono::steady_clock::now();
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    patch_output in;
    int target = 0, contrast = -1;
    patch_inputs(&in, rq.key, q, target, contrast);
    auto out = std::make_shared<circuit_output>();
    out->key = rq.key;
    out->model = r.model;
    out->clean_ids = in.clean_ids;
    out->corrupt_ids = in.corrupt_ids;
    out->ab = r.ablation;
    auto res = std::make_shared<gb::circuit_result>(
        gb::circuit_scores(m, in.clean_ids, in.corrupt_ids, target, contrast, r.ablation));
    out->max_edges = std::min((int)res->edges.size(), 300);
    out->faithfulness.assign(out->max_edges + 1, 0.0f);
    std::vector<unsigned char> last;
    float value = 0;
    for (int n = 0; n <= out->max_edges; n++) {
        const std::vector<unsigned char> members = gb::circuit_members(*res, n);
        if (members != last) {
            if (!go((float)n / (out->max_edges + 1))) return nullptr;
            value = (float)gb::circuit_faithfulness(*res, gb::circuit_metric(m, *res, in.clean_ids, members, r.ablation));
            last = members;
        }
        out->faithfulness[n] = value;
    }
    out->res = res;
    out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

// Of patching's inputs as typed, while the tab shows and the shown run is of them (the circuit reads it)
void schedule_circuit(app_state& s, ui_context& ui, const analysis_entry& row) {
    patch_request q;
    const std::string inputs = analysis_offered(row.kind, s.model.get()) ? patching_key(s, q) : "";
    const bool settled = inputs_settled(ui, row.kind, inputs);
    schedule_analysis(s, ui, row.kind, inputs, s.tab == row.tab, settled && result_is_current(s), q);
}

// The graph's size, the circuit of the slider's N and its faithfulness; the patch it keeps on the main run
void print_circuit(nlohmann::json& j, const app_state& s, const analysis_entry& row) {
    if (const auto co = output_of<circuit_output>(s, row.kind); co && co->res) {
        const gb::circuit_result& c = *co->res;
        const int n = std::min(inputs_of<circuit_inputs>(s, row.tab).edges, co->max_edges);
        const std::vector<unsigned char> in = gb::circuit_members(c, n);
        auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
        j["circuit"] = {{"nodes", c.nodes.size()}, {"edges_total", c.edges.size()}, {"edges", n},
                        {"circuit_nodes", std::count(in.begin(), in.end(), 1)}, {"clean", c.clean}, {"corrupt", c.corrupt},
                        {"faithfulness", num(co->faithfulness[n])}, {"max_edges", co->max_edges},
                        {"top_edge", c.edges.empty() ? "" : c.nodes[c.edges[0].from].id + " -> " + c.nodes[c.edges[0].to].id},
                        {"current", co->key == s.analysis_want[row.kind]}, {"ms", co->ms}};
    }
    const bool kept = s.patch && s.patch->by == row.name;
    j["circuit_kept"] = kept ? nlohmann::json(s.patch->what) : nlohmann::json();
    j["circuit_in_force"] = kept && patch_in_force(s) != nullptr;
    if (s.result) j["run_circuit"] = s.result->patch && s.result->patch->by == row.name;
}

} // namespace gbui
