// Export (the Model panel's Export, as the export row on the quick analysis lane; the script's export, at once): the
// shown run's capture, then each analysis of the table whose output is of that run, in the CLI's formats. Each
// analysis's writer is named by its row (analysis_table.h).
#include <nlohmann/json.hpp>

#include "analysis/analysis_json.h"
#include "analysis/export.h"
#include "demos.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

std::string export_lens(const app_state& s, const void* out, const std::string& dir) {
    const lens_output& o = *(const lens_output*)out;
    if (o.from != s.result) return "";
    gb::write_lens_npy(dir, o.lens);
    gb::write_json(dir + "/lens.json", gb::lens_json(o.lens, s.result->lm_record(), s.result->model->tok));
    return "lens";
}

std::string export_attribution(const app_state& s, const void* out, const std::string& dir) {
    const attribution_output& o = *(const attribution_output*)out;
    if (o.from != s.result) return "";
    gb::write_attribution_npy(dir, o.attr);
    gb::write_json(dir + "/attribution.json", gb::attribution_json(o.attr, s.result->model->tok));
    return "attribution";
}

std::string export_patching(const app_state& s, const void* out, const std::string& dir) {
    const patch_output& p = *(const patch_output*)out;
    const run_result& r = *s.result;
    if (p.model != r.model || p.clean_ids != r.cap().tokens) return "";
    gb::write_patch_npy(dir, p.res);
    gb::write_json(dir + "/patching.json", gb::patch_json(p.res, r.model->tok, p.clean_ids, p.corrupt_ids));
    return "patching";
}

std::string export_break(const app_state& s, const void* out, const std::string& dir) {
    const break_output* b = (const break_output*)out;
    const run_result& r = *s.result;
    if (!break_is_current(b, r.model, r.prompt, r.bos)) return "";
    gb::write_json(dir + "/break_it.json", gb::break_it_json(b->res, r.model->tok));
    return "break_it";
}

std::string export_sampling(const app_state& s, const void* out, const std::string& dir) {
    const sampling_output& o = *(const sampling_output*)out;
    const run_result& r = *s.result;
    if (o.from != s.result) return "";
    gb::sampling sp;
    sp.top_k = o.top_k, sp.seed = o.seed;
    gb::write_json(dir + "/sampling.json", gb::temperatures_json(r.prompt, r.cap().tokens, o.columns, sp, r.model->tok));
    return "sampling";
}

// the test prompt's scores, in a folder of their own
std::string export_induction(const app_state& s, const void* out, const std::string& dir) {
    const induction_output& o = *(const induction_output*)out;
    if (o.model != s.result->model) return "";
    const gb::tokenizer& tok = o.model->tok;
    gb::write_head_scores_npy(dir + "/induction_test", o.scores);
    nlohmann::json j = {{"n", o.n}, {"seed", o.seed}, {"ids", o.ids}};
    gb::record ids_only; // head_scores_json names the prompt's tokens
    ids_only.tokens = o.ids;
    for (int id : o.ids) ids_only.pieces.push_back(gb::token_text(tok, id));
    j["scores"] = gb::head_scores_json(o.scores, ids_only);
    gb::write_json(dir + "/induction_test/head_scores.json", j);
    return "induction_test/";
}

std::string export_capture(const app_state& s, const std::string& dir) {
    if (!s.result) throw gb::error("nothing to export yet");
    const run_result& r = *s.result;
    gb::write_capture_npy(dir, r.cap());
    gb::write_json(dir + "/capture.json", gb::capture_json(*r.model, r.cap(), r.ablation, s.top_k));
    // the analyses computed for this result (the CLI's formats): one JSON and its .npy arrays each
    std::string wrote = ".npy, capture.json";
    gb::write_head_scores_npy(dir, r.scores);
    gb::write_json(dir + "/head_scores.json", gb::head_scores_json(r.scores, r.cap()));
    wrote += ", head_scores";
    for (int k = 0; k < ANALYSIS_COUNT; k++) {
        const analysis_entry& e = analysis_info((analysis_kind)k);
        if (!e.write || !s.output[k]) continue;
        const std::string what = e.write(s, s.output[k].get(), dir);
        if (!what.empty()) wrote += ", " + what;
    }
    return wrote;
}

std::shared_ptr<const void> compute_export(const analysis_request& q, const analysis_run&) {
    const export_request& in = request_of<export_request>(q);
    auto out = std::make_shared<export_output>();
    out->key = q.key;
    out->dir = in.dir;
    out->wrote = export_capture(*in.state, in.dir);
    return out;
}

// Once per press of Export: a snapshot of what it writes goes to the quick lane; the export written, the status line
// says so and the window's PNG joins it (the folder exists by then); a failure becomes the window's error line
void schedule_export(app_state& s, ui_context& ui, const analysis_entry& row) {
    const auto& in = state_of<export_inputs>(s, ANALYSIS_EXPORT);
    const std::string inputs = in.asked > 0 ? std::to_string(in.asked) + "|" + in.dir : "";
    export_request q;
    if (!inputs.empty() && inputs != ui.asked[row.kind]) { // about to be sent: the snapshot
        auto snap = std::make_shared<app_state>();
        snap->result = s.result;
        snap->top_k = s.top_k;
        for (int k = 0; k < ANALYSIS_COUNT; k++) snap->output[k] = s.output[k];
        q = export_request{snap, in.dir};
    }
    schedule_analysis(s, ui, row.kind, inputs, true, true, q);
    const analysis_status& st = s.analysis[row.kind];
    if (!st.error.empty() && st.error_key != ui.export_shown) {
        ui.export_shown = st.error_key;
        s.error = st.error;
        s.status.clear();
    }
    const auto o = output_of<export_output>(s, row.kind);
    if (o && o->key != ui.export_shown) {
        ui.export_shown = o->key;
        ui.screenshot_path = o->dir + "/window.png";
        ui.request_screenshot = true;
        s.status = "exported " + o->wrote + " and window.png to " + o->dir;
    }
}

} // namespace gbui
