// What to recompute: each analysis has an inputs key; it is sent to the analysis threads only while its tab
// (or the grid's score mode) is visible and when the key changed. A key that changes while its run is going
// stops that run at once (newest wins); the panels keep the last complete output until the new one arrives.
#include <algorithm>
#include <cstdio>

#include "graph_analysis.h"
#include "io/loader.h"
#include "patching_inputs.h"
#include "sampling_inputs.h"
#include "tab_inputs.h"
#include "ui.h"

namespace gbui {

int replay_steps(const app_state& s) {
    const generation_result* g = s.generated.get();
    return g && g->model == s.model && g->prompt == s.prompt && g->bos == s.bos ? (int)g->ids.size() : 0;
}

bool result_is_current(const app_state& s) {
    const run_result* r = s.result.get();
    const int step = std::min(s.gen_step, replay_steps(s)); // the replayed generation step (0: the prompt alone)
    const bool same_step = step > 0 ? r && r->gen_id == s.generated->request_id && r->cap().n_tokens - r->n_prompt == step
                                    : r && r->gen_id == 0;
    return r && s.model && r->model == s.model && r->prompt == s.prompt && r->bos == s.bos && r->image_path == s.image_path &&
           r->target == s.target_text && sampling_key(r->target_sampling) == sampling_key(s.target_sampling) && r->stack == s.stack &&
           r->ablation.describe() == s.ablation.describe() && r->patch.get() == patch_in_force(s) && same_step &&
           r->features == inputs_of<features_inputs>(s, TAB_FEATURES).edits &&
           !s.next_result;
}

const run_patch* patch_in_force(const app_state& s) {
    const run_patch* c = s.patch.get();
    return c && c->model == s.model && c->prompt == s.prompt && c->bos == s.bos && std::min(s.gen_step, replay_steps(s)) == 0
               ? c : nullptr;
}

run_request current_run_request(const app_state& s) {
    run_request q;
    q.model = s.model;
    q.prompt = s.prompt;
    q.image_path = s.image_path;
    q.target = s.target_text;
    q.target_sampling = s.target_sampling;
    q.stack = s.stack;
    q.bos = s.bos;
    q.ablation = s.ablation;
    if (patch_in_force(s)) q.patch = s.patch;
    q.features = inputs_of<features_inputs>(s, TAB_FEATURES).edits;
    q.top_k = s.top_k;
    q.use_gl = s.use_gl;
    q.focus_layer = s.sel_layer;
    q.focus_head = s.sel_head;
    q.budget_bytes = s.budget_mb << 20;
    q.scale = s.scale;
    const int step = std::min(s.gen_step, replay_steps(s));
    if (step > 0) { // replaying: the prompt as the generation encoded it, and its first `step` tokens
        const generation_result& g = *s.generated;
        q.ids = g.prompt_ids;
        q.ids.insert(q.ids.end(), g.ids.begin(), g.ids.begin() + step);
        q.n_prompt = (int)g.prompt_ids.size();
        q.gen_id = g.request_id;
    }
    return q;
}

std::string current_run_key(const app_state& s) {
    // when the shown capture had to leave layers out, the selected layer is an input too
    return run_key(current_run_request(s), s.result && !s.result->cap().budget_note.empty(),
                   s.result ? s.result->cap().part.count : 0);
}

int token_or_default(int id, const run_result& r) { return id >= 0 && id < r.cap().vocab ? id : -1; }

// The attribution's target and contrast: the chosen ones, else the prediction's top-1 and the best other token.
void attribution_tokens(const app_state& s, int* target, int* contrast) {
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    const run_result& r = *s.result;
    *target = token_or_default(ain.target, r);
    if (*target < 0) *target = r.pred.top.empty() ? 0 : r.pred.top[0].id;
    *contrast = token_or_default(ain.contrast, r);
    if (*contrast < 0)
        for (const gb::token_prob& t : r.pred.top)
            if (t.id != *target) {
                *contrast = t.id;
                break;
            }
}

int attribution_position(const app_state& s) {
    const run_result& r = *s.result;
    if (run_kind(r).output == gb::OUTPUT_CLASSES) return 0;
    if (source_shown(r)) return r.lm_record().n_tokens - 1;
    return query_token(s, r.cap().n_tokens);
}

void schedule_analysis(app_state& s, ui_context& ui, analysis_kind k, const std::string& inputs, bool visible, bool ready,
                       std::any request) {
    if (request.type() != *analysis_info(k).request)
        throw gb::error(std::string("schedule_analysis: ") + analysis_name(k) + "'s request is a " + request.type().name() +
                        ", its row names " + analysis_info(k).request->name());
    visible = visible && analysis_offered(k, s.model.get());
    if (!ui.asked[k].empty() && inputs != ui.asked[k]) {
        ui.analysis->cancel(k); // a no-op when it is not running
        ui.asked[k].clear();
    }
    s.analysis_want[k] = visible ? inputs : "";
    if (visible && ready && !inputs.empty() && inputs != ui.asked[k]) {
        analysis_request q;
        q.kind = k;
        q.key = inputs;
        q.inputs = std::move(request);
        ui.analysis->submit(std::move(q));
        ui.asked[k] = inputs;
    }
}

bool inputs_settled(ui_context& ui, analysis_kind k, const std::string& inputs) {
    const auto now = std::chrono::steady_clock::now();
    if (inputs != ui.settling[k]) ui.settling[k] = inputs, ui.settling_since[k] = now;
    return ui.headless || now - ui.settling_since[k] > std::chrono::milliseconds(150);
}

std::string patching_key(const app_state& s, patch_request& q) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    const run_result* r = s.result.get();
    q.from = s.result;
    q.corrupt = pin.corrupt;
    if (!s.model || pin.corrupt.empty()) return "";
    const int t = r ? token_or_default(pin.target, *r) : pin.target;
    const int c = r ? token_or_default(pin.contrast, *r) : pin.contrast;
    q.target = t, q.contrast = c;
    return std::to_string((uintptr_t)s.model.get()) + (s.bos ? "|B|" : "|-|") + s.ablation.describe() + "|" +
           std::to_string(t) + "|" + std::to_string(c) + "|" + std::to_string(s.gen_step) + "|" + s.prompt + "\x1f" +
           pin.corrupt;
}

// Patching: of the prompt as typed (its run must be the shown one), debounced like the main run
static void schedule_patching(app_state& s, ui_context& ui) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    patch_request q;
    const std::string inputs = patching_key(s, q);
    const bool quiet = inputs_settled(ui, ANALYSIS_PATCHING, inputs);
    // the fast mode (an estimate first) where the kind offers gradients
    q.fast = pin.fast && s.model && gb::offers(s.model->config, gb::FEATURE_GRADIENTS);
    schedule_analysis(s, ui, ANALYSIS_PATCHING, inputs.empty() ? inputs : inputs + (q.fast ? "|fast" : ""),
                      s.tab == TAB_PATCHING && pin.shown == ANALYSIS_PATCHING, quiet && result_is_current(s), q);
}

// The Features tab: the shown SAE's features of the prompt as typed (under the ablation) and the selected feature's
// logit effect while the tab shows; the corpus index once Index was pressed (its file and the SAE as they were)
static void schedule_features(app_state& s, ui_context& ui) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    const gb::bound_sae* b = shown_sae(s);
    const bool shown = s.tab == TAB_FEATURES && analysis_offered(ANALYSIS_FEATURES, s.model.get()) && b;
    const std::string model = s.model ? std::to_string((uintptr_t)s.model.get()) + (s.bos ? "|B|" : "|-|") : "";
    std::shared_ptr<const gb::bound_sae> sae = b ? fin.saes[std::clamp(fin.shown, 0, (int)fin.saes.size() - 1)] : nullptr;
    {
        features_request q;
        q.model = s.model, q.bos = s.bos, q.prompt = s.prompt, q.ab = s.ablation, q.sae = sae, q.feature = fin.sel;
        const std::string inputs = shown ? model + std::to_string((uintptr_t)b) + "|" + std::to_string(fin.sel) + "|" +
                                               s.ablation.describe() + "|" + s.prompt
                                         : "";
        schedule_analysis(s, ui, ANALYSIS_FEATURES, inputs, shown, true, q);
    }
    {
        features_request q;
        q.model = s.model, q.bos = s.bos, q.sae = sae, q.corpus = fin.index_path;
        const std::string inputs = shown && fin.index_build > 0 ? model + std::to_string((uintptr_t)b) + "|" +
                                                                           std::to_string(fin.index_build) + "|" + q.corpus
                                                                     : "";
        schedule_analysis(s, ui, ANALYSIS_FEATURE_INDEX, inputs, shown, true, q);
    }
    { // training, once Train was pressed: whatever tab shows (it runs on until done, a new model or Train again)
        const features_inputs::train_fields& f = fin.train_asked;
        features_request q;
        q.model = s.model, q.bos = s.bos, q.corpus = f.corpus, q.out_dir = f.out, q.layer = f.layer;
        q.point = sae_train_points()[std::clamp(f.point, 0, (int)sae_train_points().size() - 1)];
        q.train.d_sae = f.features, q.train.k = f.k, q.train.steps = f.steps;
        const bool offered = analysis_offered(ANALYSIS_SAE_TRAIN, s.model.get());
        const std::string inputs = offered && fin.train_build > 0 && s.model.get() == fin.train_for
                                       ? model + std::to_string(fin.train_build) + "|" + f.corpus + "\x1f" + f.out + "|" +
                                             std::to_string(f.point) + "|" + std::to_string(f.layer) + "|" +
                                             std::to_string(f.features) + "|" + std::to_string(f.k) + "|" + std::to_string(f.steps)
                                       : "";
        schedule_analysis(s, ui, ANALYSIS_SAE_TRAIN, inputs, true, true, q);
    }
}

// Break it: of the prompt as typed, not of the shown run, whose ablation the Break-it demo changes row by row
// (that must not start it again); while the Learn tab or the demo shows it, debounced like patching. The demo's
// first request only chooses its prompt among candidates. One forward per row and per head: on a large model
// minutes, so a run nobody shows any more stops (and starts again when shown), leaving its thread to patching.
static void schedule_break(app_state& s, ui_context& ui) {
    break_request q;
    q.model = s.model;
    q.bos = s.bos;
    q.prompt = s.prompt;
    q.candidates = s.demos.candidates;
    std::string inputs;
    if (analysis_offered(ANALYSIS_BREAK, s.model.get())) {
        inputs = std::to_string((uintptr_t)s.model.get()) + (s.bos ? "|B|" : "|-|");
        if (q.candidates.empty()) inputs += s.prompt;
        else
            for (const gb::prompt_candidate& c : q.candidates) inputs += "\x1e" + c.text;
    }
    const bool quiet = inputs_settled(ui, ANALYSIS_BREAK, inputs);
    const bool shown = s.tab == TAB_LEARN || s.demos.kind == DEMO_BREAK;
    if (!shown && !ui.asked[ANALYSIS_BREAK].empty() && ui.analysis->pending(ANALYSIS_BREAK)) {
        ui.analysis->cancel(ANALYSIS_BREAK);
        ui.asked[ANALYSIS_BREAK].clear();
    }
    schedule_analysis(s, ui, ANALYSIS_BREAK, inputs, shown, quiet, q);
}

bool schedule_analyses(app_state& s, ui_context& ui) {
    const auto& test = state_of<induction_inputs>(s, ANALYSIS_INDUCTION);
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    auto& smp = inputs_of<sampling_inputs>(s, TAB_SAMPLING);
    const run_result* r = s.result.get();
    const std::string id = r ? std::to_string(r->request_id) : "";
    // logit lens: of the shown run, with the chosen target
    {
        lens_request q;
        q.from = s.result;
        q.lens = output_of<lens_output>(s, ANALYSIS_LENS);
        q.target = r ? token_or_default(lin.target, *r) : -1;
        schedule_analysis(s, ui, ANALYSIS_LENS, r ? id + "|" + std::to_string(q.target) : "", s.tab == TAB_LENS, r != nullptr, q);
    }
    // attribution: of the shown run, at the selected token
    {
        attribution_request q;
        q.from = s.result;
        std::string inputs;
        if (r) {
            attribution_tokens(s, &q.target, &q.contrast);
            q.position = attribution_position(s);
            q.steps = ain.saliency_steps;
            inputs = id + "|" + std::to_string(q.target) + "|" + std::to_string(q.contrast) + "|" +
                     std::to_string(q.position) + "|" + std::to_string(q.steps);
        }
        schedule_analysis(s, ui, ANALYSIS_ATTRIBUTION, inputs, s.tab == TAB_ATTRIBUTION, r != nullptr, q);
    }
    // graph: of the shown run, over the tab's transcoder set, at its prune thresholds, with its edits
    {
        graph_request q;
        const std::string inputs = graph_key(s, q);
        schedule_analysis(s, ui, ANALYSIS_GRAPH, inputs, s.tab == TAB_GRAPH, r != nullptr, q);
    }
    // learn: the walk for the selected token, layer and head of the shown run
    {
        learn_request q;
        q.from = s.result;
        std::string inputs;
        if (r && gb::offers(r->model->config, gb::FEATURE_LEARN)) { // (other kinds: the picture alone)
            // an encoder–decoder walks its decoder: the selected token is a target token only while it shows
            const gb::record& c = r->lm_record();
            q.position = source_shown(*r) ? c.n_tokens - 1 : query_token(s, c.n_tokens);
            q.layer = std::max(0, std::min(s.sel_layer, c.n_layer - 1));
            q.head = std::max(0, std::min(s.sel_head, c.n_head - 1));
            inputs = id + "|" + std::to_string(q.position) + "|" + std::to_string(q.layer) + "|" + std::to_string(q.head);
        }
        schedule_analysis(s, ui, ANALYSIS_LEARN, inputs, s.tab == TAB_LEARN, r != nullptr, q);
    }
    // induction test: while the grid shows the test's scores
    {
        induction_request q;
        q.model = s.model;
        q.ab = s.ablation;
        q.n = test.n;
        q.seed = test.seed;
        q.bos = s.bos;
        std::string inputs = s.model ? std::to_string((uintptr_t)s.model.get()) + "|" + std::to_string(test.n) + "|" +
                                           std::to_string(test.seed) + (s.bos ? "|B|" : "|-|") + s.ablation.describe()
                                     : "";
        const bool offered = analysis_offered(ANALYSIS_INDUCTION, s.model.get());
        schedule_analysis(s, ui, ANALYSIS_INDUCTION, inputs, test.shown && offered && s.colour_by != COLOUR_PATTERN, true, q);
    }
    schedule_patching(s, ui);
    schedule_break(s, ui);
    // sampling: the shown run continued at the three temperatures
    {
        sampling_request q;
        q.from = s.result;
        q.temperatures.assign(smp.temps, smp.temps + 3);
        q.sampling.top_k = smp.top_k;
        q.sampling.seed = smp.seed;
        q.gen_tokens = smp.tokens;
        std::string inputs;
        if (r) {
            char b[128];
            snprintf(b, sizeof b, "|%.9g|%.9g|%.9g|%d|%d|%llu", smp.temps[0], smp.temps[1], smp.temps[2],
                     smp.top_k, smp.tokens, (unsigned long long)smp.seed);
            inputs = id + b;
        }
        schedule_analysis(s, ui, ANALYSIS_SAMPLING, inputs, s.tab == TAB_SAMPLING, r != nullptr, q);
    }
    schedule_features(s, ui);
    for (int k = 0; k < ANALYSIS_COUNT; k++) // the rows that say themselves when they are sent
        if (const analysis_entry& e = analysis_info((analysis_kind)k); e.schedule) e.schedule(s, ui, e);
    for (int k = 0; k < ANALYSIS_COUNT; k++)
        if (!s.analysis_want[k].empty() && (ui.asked[k] != s.analysis_want[k] || ui.analysis->pending((analysis_kind)k))) {
            ui.analysis_waiting = k;
            return false;
        }
    ui.analysis_waiting = -1;
    return true;
}

} // namespace gbui
