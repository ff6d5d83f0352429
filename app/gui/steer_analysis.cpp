// The Steer tab's analyses (steer_analysis.h): on the analysis threads the contrastive vector from the tab's prompt
// boxes, the prompt continued with and without the steering at several scales, and the cost sweep over scale x
// layer; when each is sent, and its part of the script's print.
#include "steer_analysis.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "io/control_vector.h"
#include "tokenizer/tokenizer.h"
#include "ui.h"
#include "util/error.h"
#include "util/timing.h"

namespace gbui {

namespace {

std::vector<std::vector<int>> prompt_lines(const gb::model& m, const std::string& text, bool bos, const char* side) {
    std::vector<std::vector<int>> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(gb::encode_prompt(m.tok, line, bos));
    if (out.empty()) throw gb::error(std::string("no ") + side + " prompts: write one a line");
    return out;
}

// The prompt as the main run encodes it (its last n_ctx tokens), leaving room for the continuation
std::vector<int> prompt_ids(const gb::model& m, const std::string& prompt, bool bos, int room) {
    std::vector<int> ids = gb::encode_prompt(m.tok, prompt, bos);
    if (ids.empty()) throw gb::error("the prompt is empty: nothing to continue");
    const int keep = std::max(1, m.config.n_ctx - room);
    if ((int)ids.size() > keep) ids.erase(ids.begin(), ids.end() - keep);
    return ids;
}

} // namespace

// The output each of the Steer tab's analyses fills: its request's key and model.
static std::shared_ptr<steer_output> steer_output_of(const analysis_request& q) {
    auto out = std::make_shared<steer_output>();
    out->key = q.key;
    out->model = request_of<steer_request>(q).model;
    return out;
}

std::shared_ptr<const void> compute_steer_build(const analysis_request& q, const analysis_run& run) {
    const steer_request& in = request_of<steer_request>(q);
    const auto t0 = std::chrono::steady_clock::now();
    const gb::model& m = *in.model;
    auto out = steer_output_of(q);
    std::vector<int> layers;
    for (int l = 0; l < m.config.n_layer; l++) layers.push_back(l);
    auto v = std::make_shared<gb::steer_vector>(gb::contrastive_vector(
        m, prompt_lines(m, in.positive, in.bos, "positive"), prompt_lines(m, in.negative, in.bos, "negative"), layers,
        in.where == 1 ? gb::STEER_MEAN : gb::STEER_LAST, run.stopped));
    v->name = "contrast#" + q.key.substr(q.key.rfind('|') + 1);
    out->vec = v;
    out->ms = gb::ms_since(t0);
    return out;
}

std::shared_ptr<const void> compute_steer_compare(const analysis_request& q, const analysis_run& run) {
    const steer_request& in = request_of<steer_request>(q);
    const auto t0 = std::chrono::steady_clock::now();
    const gb::model& m = *in.model;
    auto out = steer_output_of(q);
    const std::vector<int> ids = prompt_ids(m, in.prompt, in.bos, in.gen_tokens);
    for (int id : ids) out->prompt_pieces.push_back(gb::token_text(m.tok, id));
    gb::compare_steering(out->side_by_side, m, ids, in.steering, in.scales, in.gen_tokens, in.sampling, run.stopped);
    out->ms = gb::ms_since(t0);
    return out;
}

std::shared_ptr<const void> compute_steer_sweep(const analysis_request& q, const analysis_run& run) {
    const steer_request& in = request_of<steer_request>(q);
    const auto t0 = std::chrono::steady_clock::now();
    const gb::model& m = *in.model;
    auto out = steer_output_of(q);
    const std::vector<int> ref = prompt_ids(m, in.reference, in.bos, 0);
    const std::vector<int> ids = prompt_ids(m, in.prompt, in.bos, 8);
    const int from = std::min(in.steering.from, (int)ref.size() - 1);
    gb::steer_sweep(out->sweep, m, *in.steering.vec, in.scales, in.layers, ref, from, ids, 8, run.stopped);
    out->ms = gb::ms_since(t0);
    return out;
}

std::shared_ptr<const void> compute_steer_open(const analysis_request& q, const analysis_run&) {
    const steer_request& in = request_of<steer_request>(q);
    auto out = steer_output_of(q);
    out->vec = std::make_shared<const gb::steer_vector>(gb::read_steer_vector(in.path, in.npy_layer));
    out->note = "opened " + in.path;
    return out;
}

std::shared_ptr<const void> compute_steer_save(const analysis_request& q, const analysis_run&) {
    const steer_request& in = request_of<steer_request>(q);
    auto out = steer_output_of(q);
    gb::steer_vector v = *in.steering.vec;
    // llama.cpp's format has no direction.0: a vector with one there keeps layers 1.. in a .gguf
    if (v.has(0) && in.path.size() > 5 && in.path.substr(in.path.size() - 5) == ".gguf") v.dirs[0].clear();
    gb::write_steer_vector(in.path, v);
    out->note = "saved " + in.path + (v.has(0) || !in.steering.vec->has(0) ? "" : " (layer 0 left out: llama.cpp has none)");
    return out;
}

// The model and BOS part of the rows' inputs keys
static std::string model_key(const app_state& s) {
    return s.model ? std::to_string((uintptr_t)s.model.get()) + (s.bos ? "|B|" : "|-|") : "";
}

// Of the prompts as they were when Build was pressed; a vector just built becomes the tab's (once: a later Open
// replaces it), before the other rows are asked for (they come after this one in the table)
void schedule_steer_build(app_state& s, ui_context& ui, const analysis_entry& row) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    steer_request r;
    r.positive = in.positive, r.negative = in.negative, r.where = in.where;
    r.model = s.model, r.bos = s.bos;
    const std::string inputs = in.build > 0 && s.model ? model_key(s) + std::to_string(in.where) + "|" + in.positive +
                                                             "\x1f" + in.negative + "|" + std::to_string(in.build)
                                                       : "";
    schedule_analysis(s, ui, row.kind, inputs, s.tab == row.tab, true, r);
    const steer_output* built = output_of<steer_output>(s, row.kind).get();
    if (built && built->model == s.model && built->vec && built->key != in.adopted[0]) {
        in.adopted[0] = built->key;
        in.vec = built->vec;
        in.note = "built from the prompts in " + std::to_string((int)built->ms) + " ms";
    }
}

// The prompt continued with the tab's steering at its three scales, while the tab shows
void schedule_steer_compare(app_state& s, ui_context& ui, const analysis_entry& row) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    steer_request r;
    r.steering = tab_steering(s);
    r.scales.assign(in.scales, in.scales + 3);
    std::string inputs;
    if (r.steering.vec && !r.steering.layers.empty()) {
        char b[160];
        snprintf(b, sizeof b, "%.9g,%.9g,%.9g|%d|%s|", in.scales[0], in.scales[1], in.scales[2], in.tokens,
                 sampling_key(s.gen).c_str());
        inputs = model_key(s) + steering_key(r.steering) + "|" + b + s.prompt;
    }
    r.model = s.model, r.bos = s.bos, r.prompt = s.prompt, r.gen_tokens = in.tokens;
    r.sampling = s.gen; // the Continuation's temperature, top-k and seed: one seed for every column
    schedule_analysis(s, ui, row.kind, inputs, s.tab == row.tab, true, r);
}

// The tab's vector swept over its five scales x every layer with a direction, while the tab shows
void schedule_steer_sweep(app_state& s, ui_context& ui, const analysis_entry& row) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    steer_request r;
    r.steering = tab_steering(s);
    r.reference = in.reference;
    r.scales.assign(in.sweep_scales, in.sweep_scales + 5);
    std::string inputs;
    if (const gb::steer_vector* v = r.steering.vec.get()) {
        // every layer with a direction (a vector of one direction: that one at every layer)
        const std::vector<int> have = v->layers();
        for (int l = 0; l < s.model->config.n_layer; l++)
            if (v->has(l) || have.size() == 1) r.layers.push_back(l);
        char b[128];
        snprintf(b, sizeof b, "%.9g,%.9g,%.9g,%.9g,%.9g|%d|", r.scales[0], r.scales[1], r.scales[2], r.scales[3],
                 r.scales[4], r.steering.from);
        inputs = model_key(s) + std::to_string((uintptr_t)v) + "|" + b + in.reference + "\x1f" + s.prompt;
    }
    r.model = s.model, r.bos = s.bos, r.prompt = s.prompt;
    schedule_analysis(s, ui, row.kind, inputs, s.tab == row.tab, true, r);
}

// The tab's note from a row's newest output or error, once each (slot: the row's place in steer_inputs::adopted);
// returns the output when it is new.
static const steer_output* take(app_state& s, const analysis_entry& row, int slot) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    const analysis_status& st = s.analysis[row.kind];
    if (!st.error.empty() && st.error_key != in.adopted[slot]) {
        in.adopted[slot] = st.error_key;
        in.note = st.error;
        return nullptr;
    }
    const steer_output* o = output_of<steer_output>(s, row.kind).get();
    if (!o || o->key == in.adopted[slot]) return nullptr;
    in.adopted[slot] = o->key;
    in.note = o->note;
    return o;
}

// The file in the path box when Open was pressed (the layer range's first layer for a .npy); the vector read
// becomes the tab's
void schedule_steer_open(app_state& s, ui_context& ui, const analysis_entry& row) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    steer_request r;
    r.path = in.path, r.npy_layer = in.lo;
    r.model = s.model;
    const std::string inputs = in.open > 0 ? std::to_string(in.open) + "|" + std::to_string(in.lo) + "|" + in.path : "";
    schedule_analysis(s, ui, row.kind, inputs, true, true, r);
    if (const steer_output* o = take(s, row, 1)) in.vec = o->vec;
}

// The tab's vector to the path box's file when Save was pressed
void schedule_steer_save(app_state& s, ui_context& ui, const analysis_entry& row) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    steer_request r;
    r.path = in.path, r.steering.vec = in.vec;
    r.model = s.model;
    const std::string inputs = in.save > 0 && in.vec ? std::to_string(in.save) + "|" + in.path : "";
    schedule_analysis(s, ui, row.kind, inputs, true, true, r);
    take(s, row, 2);
}

// `print`'s "steer": what is applied and the tab's vector
void print_steer_build(nlohmann::json& j, const app_state& s, const analysis_entry& row) {
    auto& in = inputs_of<steer_inputs>(s, row.tab);
    j["steer"]["applied"] = s.ablation.steer.describe();
    j["steer"]["vector"] = in.vec ? nlohmann::json{{"name", in.vec->name}, {"d_model", in.vec->d_model},
                                                   {"layers", in.vec->layers()}}
                                  : nlohmann::json();
}

// the continuations side by side
void print_steer_compare(nlohmann::json& j, const app_state& s, const analysis_entry& row) {
    const auto so = output_of<steer_output>(s, row.kind);
    if (!so) return;
    const gb::steer_compare& c = so->side_by_side;
    nlohmann::json runs = nlohmann::json::array();
    for (const gb::steered_continuation& r : c.runs)
        runs.push_back({{"scale", r.scale}, {"text", r.text}, {"parts_at", r.parts_at}, {"p_steered", r.p_steered},
                        {"p_base", r.p_base}});
    j["steer"]["compare"] = {{"current", so->key == s.analysis_want[row.kind]}, {"baseline", c.baseline.text},
                             {"runs", runs}};
}

// the sweep's grids
void print_steer_sweep(nlohmann::json& j, const app_state& s, const analysis_entry& row) {
    const auto so = output_of<steer_output>(s, row.kind);
    if (!so) return;
    const gb::steer_sweep_result& r = so->sweep;
    j["steer"]["sweep"] = {{"current", so->key == s.analysis_want[row.kind]}, {"scales", r.scales}, {"layers", r.layers},
                           {"kl", r.kl}, {"loss", r.loss}, {"base_loss", r.base_loss}, {"grid_ms", r.grid_ms}};
}

void save_steer_applied(nlohmann::json& ablation, const app_state& s) {
    const gb::steering& st = s.ablation.steer;
    nlohmann::json out = nullptr;
    if (st.any()) {
        nlohmann::json dirs = nlohmann::json::object();
        for (int l : st.vec->layers()) dirs[std::to_string(l)] = st.vec->dirs[l];
        out = {{"scale", st.scale}, {"layers", st.layers}, {"from", st.from}, {"name", st.vec->name},
               {"d_model", st.vec->d_model}, {"directions", dirs}};
    }
    ablation["steering"] = out;
}

void read_steer_applied(const nlohmann::json& ablation, gb::ablation& ab) {
    if (!ablation.contains("steering") || ablation.at("steering").is_null()) return;
    const nlohmann::json& st = ablation.at("steering");
    auto v = std::make_shared<gb::steer_vector>();
    v->d_model = st.at("d_model").get<int>();
    v->name = st.value("name", "session");
    for (const auto& [l, d] : st.at("directions").items()) {
        std::vector<float> dir = d.get<std::vector<float>>();
        if ((int)dir.size() != v->d_model) throw gb::error("steering direction " + l + " is not d_model wide");
        v->set(std::stoi(l), std::move(dir));
    }
    ab.steer.vec = v;
    ab.steer.scale = st.at("scale").get<float>();
    ab.steer.layers = st.at("layers").get<std::vector<int>>();
    ab.steer.from = st.value("from", 0);
}

} // namespace gbui
