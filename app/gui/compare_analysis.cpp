// Model B and the comparison (compare_analysis.h): the two rows' compute, schedule and print hooks, the state they
// share, and the script's commands.
#include "compare_analysis.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "io/loader.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

static analysis_kind compare_row() { return analysis_id("compare"); }

compare_state& compare_of(app_state& s) { return state_of<compare_state>(s, compare_row()); }
const compare_state& compare_of(const app_state& s) { return state_of<compare_state>(s, compare_row()); }

// ---------------------------------------------------------------------------------------------
// Compute (the model-B lane)
// ---------------------------------------------------------------------------------------------
std::shared_ptr<const void> compute_model_b(const analysis_request& q, const analysis_run&) {
    const compare_request& in = request_of<compare_request>(q);
    gb::load_options lo;
    lo.keep_stored = in.keep_stored;
    auto out = std::make_shared<model_b_output>();
    out->key = q.key;
    out->model = std::make_shared<const gb::model>(gb::load_model(in.path, lo));
    return out;
}

std::shared_ptr<const void> compute_compare(const analysis_request& q, const analysis_run& run) {
    const compare_request& in = request_of<compare_request>(q);
    const auto t0 = std::chrono::steady_clock::now();
    auto rb = std::make_shared<gb::record>();
    auto out = std::make_shared<compare_output>();
    gb::compare_options opt;
    opt.cancelled = run.stopped; // a newer comparison was asked for: this one stops between layers
    try {
        gb::compare_models(out->res, *in.a, *in.b, in.tokens, opt, rb.get());
    } catch (const gb::cancelled&) { // replaced: nothing to publish
        return nullptr;
    }
    out->key = q.key, out->a = in.a, out->b = in.b, out->tokens = in.tokens, out->run_b = rb;
    out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

// ---------------------------------------------------------------------------------------------
// Scheduling
// ---------------------------------------------------------------------------------------------
void open_model_b(app_state& s, const std::string& path) {
    compare_state& c = compare_of(s);
    c.loads++;
    c.load_path = path;
}

void close_model_b(app_state& s) {
    compare_state& c = compare_of(s);
    compare_state closed;
    closed.loads = c.loads, closed.load_path = c.load_path, closed.taken[0] = c.taken[0], closed.taken[1] = c.taken[1];
    c = closed;
    s.output[compare_row()].reset();
}

bool model_b_loading(const app_state& s) {
    const compare_state& c = compare_of(s);
    return c.loads > 0 && c.taken[0] != std::to_string(c.loads) + "|" + c.load_path;
}

bool comparing(const app_state& s) { return s.analysis[compare_row()].busy; }

// The inputs of the comparison the shown run needs ("" when there is none to make).
static std::string compare_key(const app_state& s) {
    const compare_state& c = compare_of(s);
    if (!c.model || !s.model || !s.result || !result_is_current(s) || s.result->model != s.model) return "";
    std::string k = std::to_string((uintptr_t)s.model.get()) + "|" + std::to_string((uintptr_t)c.model.get()) + "|";
    for (int id : s.result->cap().tokens) k += std::to_string(id) + ",";
    return k;
}

const compare_output* current_compare(const app_state& s) {
    const std::string key = compare_key(s);
    const compare_output* o = output_of<compare_output>(s, compare_row()).get();
    return !key.empty() && o && o->key == key ? o : nullptr;
}

// B's load once Open model B was pressed (and a model A is there); the model loaded becomes B once checked against
// A, and is then dropped from the row's slot (a closed B frees its memory)
void schedule_model_b(app_state& s, ui_context& ui, const analysis_entry& row) {
    compare_state& c = compare_of(s);
    compare_request r;
    r.path = c.load_path, r.keep_stored = ui.work->keep_stored; // as A's weights are kept
    const std::string key = c.loads > 0 ? std::to_string(c.loads) + "|" + c.load_path : "";
    schedule_analysis(s, ui, row.kind, key, true, true, r);
    const analysis_status& st = s.analysis[row.kind];
    if (!st.error.empty() && st.error_key != c.taken[0]) { // one line, the app goes on
        c.taken[0] = st.error_key;
        s.error = "model B: " + st.error;
    }
    auto o = output_of<model_b_output>(s, row.kind);
    if (!o || !s.model || o->key == c.taken[0]) return;
    c.taken[0] = o->key;
    s.output[row.kind].reset();
    try {
        gb::check_comparable(*s.model, *o->model);
        c.model = o->model;
        s.output[compare_row()].reset();
        if (c.shown == compare_state::VIEW_A) c.shown = compare_state::VIEW_AVB;
        s.status = "model B: " + o->model->path;
    } catch (const gb::error& e) {
        s.error = std::string("model B: ") + e.what();
    }
}

// The comparison of the shown run's tokens while a model B is loaded; its error is the window's, once
void schedule_compare(app_state& s, ui_context& ui, const analysis_entry& row) {
    compare_state& c = compare_of(s);
    const std::string key = compare_key(s);
    compare_request r;
    if (!key.empty()) r.a = s.model, r.b = c.model, r.tokens = s.result->cap().tokens;
    schedule_analysis(s, ui, row.kind, key, true, true, r);
    const analysis_status& st = s.analysis[row.kind];
    if (!st.error.empty() && st.error_key != c.taken[1]) {
        c.taken[1] = st.error_key;
        s.error = st.error.rfind("compare: ", 0) == 0 ? st.error : "compare: " + st.error;
    }
}

// model B and the comparison of the shown run (null when there is none)
void print_compare(nlohmann::json& j, const app_state& s, const analysis_entry&) {
    static const char* views[] = {"a", "b", "avsb"};
    const compare_state& cs = compare_of(s);
    j["model_b"] = cs.model ? nlohmann::json(cs.model->path) : nlohmann::json();
    j["compare_view"] = views[cs.shown];
    const compare_output* c = current_compare(s);
    if (!c) {
        j["compare"] = nullptr;
        return;
    }
    const gb::compare_result& r = c->res;
    float js_max = 0;
    for (float v : r.head_js) js_max = std::max(js_max, v);
    float cos_min = 1;
    for (float v : r.cosine) cos_min = std::min(cos_min, v);
    j["compare"] = {{"tokens", r.n_tokens}, {"mean_kl", r.mean_kl}, {"top_agree", r.top_agree_count}, {"js_max", js_max},
                    {"cos_min", cos_min}, {"first_disagree", r.first_disagree},
                    {"surprisal_mean_a", r.surprisal_a.mean_nats}, {"surprisal_mean_b", r.surprisal_b.mean_nats},
                    {"ms", c->ms}};
}

// ---------------------------------------------------------------------------------------------
// Its parts of other panels, and the script's commands
// ---------------------------------------------------------------------------------------------
bool compare_parts(app_state& s, ui_context& ui, panel_part p) {
    const compare_state& c = compare_of(s);
    if (p == PART_MODEL) {
        model_b_button(s, ui); // a second model to compare with
        return false;
    }
    if (p == PART_GRID) compare_switch(s, ui); // with a model B: A, B or A vs B
    if (!c.model || c.shown == compare_state::VIEW_A) return false;
    if (p == PART_GRID) compare_grid(s, ui);
    if (p == PART_RESIDUAL) compare_residual(s, ui);
    if (p == PART_LENS) compare_lens(s, ui); // the lens of both, where they first disagree
    return true;
}

bool compare_script(app_state& s, ui_context&, const std::string& cmd, const std::string& arg) {
    compare_state& c = compare_of(s);
    if (cmd == "open-b") { // as the Model panel's "Open model B..." with PATH in its box
        c.path_input = arg;
        open_model_b(s, arg);
        return true;
    }
    if (cmd == "compare-view") { // a | b | avsb, as the grid's switch
        if (arg != "a" && arg != "b" && arg != "avsb")
            throw gb::error("script: compare-view takes a, b or avsb, got '" + arg + "'");
        c.shown = arg == "a" ? compare_state::VIEW_A : arg == "b" ? compare_state::VIEW_B : compare_state::VIEW_AVB;
        return true;
    }
    return false;
}

} // namespace gbui
