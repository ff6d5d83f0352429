// Causal tracing (trace_analysis.h): compute on the long lane, when it is sent, and its part of the script's print.
#include "trace_analysis.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "patching_inputs.h"
#include "ui.h"

namespace gbui {

// Causal tracing of the shown run's tokens under its ablation, with the CLI's defaults (noise 3, 10 samples, seed 0)
std::shared_ptr<const void> compute_trace(const analysis_request& rq, const analysis_run& run) {
    const trace_request& q = request_of<trace_request>(rq);
    const keep_going& go = run.go;
    const auto t0 = std::chrono::steady_clock::now();
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    auto out = std::make_shared<trace_output>();
    out->key = rq.key;
    out->model = r.model;
    out->subject = q.subject;
    out->ids = r.cap().tokens;
    int first = 0, end = 0;
    gb::subject_span(first, end, m.tok, out->ids, q.subject);
    gb::trace_options o;
    o.ab = r.ablation;
    out->res = gb::causal_trace(m, out->ids, first, end, o, go);
    out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out->res.complete ? out : nullptr;
}

// Of the shown run (its tokens and ablation) and the subject, while the Patching tab shows it
void schedule_trace(app_state& s, ui_context& ui, const analysis_entry& row) {
    auto& pin = inputs_of<patching_inputs>(s, row.tab);
    const run_result* r = s.result.get();
    trace_request q;
    q.from = s.result;
    q.subject = pin.subject;
    std::string inputs;
    if (r && !pin.subject.empty() && analysis_offered(row.kind, r->model.get()))
        inputs = std::to_string(r->request_id) + "\x1f" + pin.subject;
    const bool quiet = inputs_settled(ui, row.kind, inputs);
    schedule_analysis(s, ui, row.kind, inputs, s.tab == row.tab && pin.shown == row.kind, quiet && result_is_current(s), q);
}

void print_trace(nlohmann::json& j, const app_state& s, const analysis_entry& row) {
    const auto o = output_of<trace_output>(s, row.kind);
    if (!o) return;
    const gb::trace_result& t = o->res;
    j["trace"] = {{"subject", o->subject}, {"first", t.subject_first}, {"end", t.subject_end},
                  {"target", gb::token_text(o->model->tok, t.target)}, {"clean_prob", t.clean_prob},
                  {"corrupt_prob", t.corrupt_prob}, {"resid", t.resid}, {"attn", t.attn}, {"mlp", t.mlp},
                  {"ids", o->ids}, {"runs", t.runs}, {"ms", o->ms}, {"current", o->key == s.analysis_want[row.kind]}};
}

} // namespace gbui
