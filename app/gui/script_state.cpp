// The script's `print`: the app's state (inputs, the shown result, the analyses, widgets on screen) as one JSON
// line, which the GUI tests read.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "analysis/analysis_json.h"
#include "analysis/export.h"
#include "demos.h"
#include "feature_analysis.h"
#include "kernels/gemm.h"
#include "model_picker.h"
#include "patching_inputs.h"
#include "util/process_memory.h"
#include "run/predict.h"
#include "sampling_inputs.h"
#include "script.h"
#include "tab_inputs.h"
#include "text_scale.h"
#include "file_dialog.h"
#include "graph_analysis.h"

namespace gbui {

static nlohmann::json token_or_null(const gb::tokenizer& tok, int id) {
    return id < 0 ? nlohmann::json() : nlohmann::json(gb::token_text(tok, id));
}

// The shown result: its tokens, prediction, ablation and how it was computed; for an image, what the Image tab
// overlays and where [CLS] looked.
static void add_result(nlohmann::json& j, const app_state& s) {
    auto& iin = inputs_of<image_inputs>(s, TAB_IMAGE);
    if (s.result) {
        std::vector<std::string> toks(s.result->cap().pieces.begin(), s.result->cap().pieces.end());
        j["tokens"] = toks;
        j["n_layer"] = s.result->cap().n_layer, j["n_head"] = s.result->cap().n_head; // the grid's shape
        j["top1"] = s.result->pred.top.empty() ? "" : gb::token_text(s.result->model->tok, s.result->pred.top[0].id);
        const gb::kind_output out = run_kind(*s.result).output;
        if (out == gb::OUTPUT_FILL_MASK || out == gb::OUTPUT_CLASSES) { // where top1 is predicted, and every mask's fillers
            j["fill_position"] = s.result->pred.position;
            j["fills"] = gb::fill_mask_json(s.result->pred.fills, s.result->cap(), s.result->model->tok);
        }
        if (run_kind(*s.result).input == gb::INPUT_SOURCE_TARGET) { // an encoder–decoder: the translation shown and how it was made
            j["translation"] = s.result->translation;
            j["translation_sampling"] = sampling_key(s.result->target_sampling);
        }
        j["ablation"] = s.result->ablation.describe();
        nlohmann::json top = nlohmann::json::array(); // the next-token list (id, probability), as the panel shows it
        for (const gb::token_prob& tp : s.result->pred.top) top.push_back({{"id", tp.id}, {"prob", tp.prob}});
        j["top"] = top;
        j["feature_edits"] = describe_feature_edits(s.result->features); // the Features tab's edits it ran with
        j["notice"] = s.result->notice;
        j["kl"] = s.result->pred.kl;
        j["model"] = s.result->model->path;
        j["matmul"] = gb::matmul_name(gb::matmul_of(*s.result->model)); // the kernel its weights were packed for
        const gb::live_report& rep = s.result->report;
        j["report"] = {{"what", rep.what}, {"tokens", rep.tokens}, {"from_token", rep.from_token},
                       {"from_point", rep.from_point}, {"baseline_run", rep.baseline_run}, {"reused", rep.reused},
                       {"memory_note", rep.memory_note}, {"ms", rep.ms}};
        j["scores_ms"] = s.result->scores_ms;
        j["pixels_ms"] = s.result->pixels_ms;
        j["prompt_tokens"] = s.result->n_prompt; // the rest of "tokens" are generated ones
        j["current"] = result_is_current(s);
        // the surprisal strip's numbers (null at token 0: not scored), or why there is none
        nlohmann::json sj = {{"why", s.result->surprisal_why}, {"ms", s.result->surprisal_ms}};
        if (const gb::surprisal_result* sp = s.result->surprisal.get()) {
            nlohmann::json nats = nlohmann::json::array(), top = nlohmann::json::array();
            for (int t = 0; t < sp->n_tokens; t++) {
                nats.push_back(std::isfinite(sp->nats[t]) ? nlohmann::json(sp->nats[t]) : nlohmann::json());
                top.push_back(sp->top_ids[t]);
            }
            sj.update({{"nats", nats}, {"top_ids", top}, {"top_probs", sp->top_probs}, {"mean_nats", sp->mean_nats},
                       {"bits_per_byte", sp->bits_per_byte}, {"scored", sp->scored}});
        }
        j["surprisal"] = sj;
    }
    if (s.result && s.result->view) { // vision: what the Image tab overlays, and where [CLS] looked
        const run_result& r = *s.result;
        std::vector<int> order;
        for (int t = 1; t < r.cap().n_tokens; t++) order.push_back(t);
        std::sort(order.begin(), order.end(), [&](int a, int b) { return r.pred.rollout[a] > r.pred.rollout[b]; });
        order.resize(std::min<size_t>(order.size(), 5));
        nlohmann::json top = nlohmann::json::array();
        for (int t : order) top.push_back(r.cap().pieces[t]);
        nlohmann::json classes = nlohmann::json::array();
        for (const gb::token_prob& tp : r.pred.top) classes.push_back({{"id", tp.id}, {"prob", tp.prob}});
        j["vision"] = {{"view", {r.view->width, r.view->height}}, {"query", s.sel_token}, {"rollout", iin.rollout},
                       {"image", r.image_path}, {"rollout_top", top}, {"classes", classes}};
    }
}

// The app's inputs and what the window shows around the result: generation, selection, prompt, status lines,
// tabs, colouring, demo, the analyses' chosen tokens, and the widgets the tests check are on screen.
static void add_inputs(nlohmann::json& j, const app_state& s, const ui_context& ui) {
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    auto& smp = inputs_of<sampling_inputs>(s, TAB_SAMPLING);
    j["gen_step"] = s.gen_step;
    j["replay_steps"] = replay_steps(s);
    j["generated_tokens"] = s.generated ? s.generated->n_tokens : 0;
    j["generation_done"] = s.generated && s.generated->done;
    j["cancelled_runs"] = ui.work->cancelled();
    j["published_results"] = ui.work->published();
    static const char* scales[] = {"linear", "log", "rowmax"};
    j["heatmap_scale"] = s.pixels ? scales[s.pixels->scale] : ""; // what the textures on screen show
    j["heatmap_side"] = s.pixels ? s.pixels->dim : 0; // the head textures' side (the tokens, at most max_heat_dim)
    j["heatmap_bytes"] = s.pixels ? s.pixels->bytes() : 0;
    const gb::process_memory pm = gb::process_memory_now();
    j["memory"] = {{"resident", pm.resident}, {"peak", pm.peak},
                   {"record", s.result ? s.result->cap().bytes() : 0}, {"budget", s.budget_mb << 20}};
    j["selected_head"] = std::to_string(s.sel_layer) + "." + std::to_string(s.sel_head);
    j["selected_token"] = s.sel_token;
    j["query_token"] = s.result ? query_token(s, s.result->cap().n_tokens) : -1; // the one the panels show
    j["prompt"] = s.prompt;
    j["image"] = s.image_path;
    j["generated"] = s.generated ? s.generated->text : "";
    j["error"] = s.error;
    j["warning"] = s.warning;
    j["status"] = s.status;
    j["recent"] = s.recent_models;
    if (ui.picker) j["picker"] = picker_json(*ui.picker); // the model picker: what it found, listed, downloads
    j["file_dialog"] = file_dialog_json(); // a Browse... button's dialog
    j["config_dir"] = s.config_dir; // "" when the run remembers nothing
    j["window"] = {(int)ImGui::GetIO().DisplaySize.x, (int)ImGui::GetIO().DisplaySize.y};
    j["gl"] = s.gl_status;
    // analyses
    j["tab"] = tab_name(s.tab);
    j["flash"] = ui.flash_window;
    j["tabs"] = nlohmann::json::array(); // the tabs this model shows
    for (int t = 0; t < TAB_COUNT; t++)
        if (tab_available((analysis_tab)t, s.model.get())) j["tabs"].push_back(tab_name((analysis_tab)t));
    j["token_errors"] = nlohmann::json::array(); // the token boxes' one-line errors
    for (const std::string& e : ui.typed_error)
        if (!e.empty()) j["token_errors"].push_back(e);
    j["colour_by"] = colour_name(s.colour_by);
    j["demo"] = {{"name", demo_name(s.demos.kind)}, {"caption", s.demos.caption}, {"waiting", s.demos.waiting},
                 {"break_row", s.demos.break_row}};
    j["ablation_input"] = s.ablation.describe(); // what the panels ask for ("ablation" is the shown result's)
    j["sampling_inputs"] = {{"temperatures", {smp.temps[0], smp.temps[1], smp.temps[2]}},
                            {"top_k", smp.top_k}, {"tokens", smp.tokens}, {"seed", smp.seed}};
    // widgets the tests check are on screen: name -> [x0, y0, x1, y1]
    for (const char* w : {"sampling column 0", "sampling column 1", "sampling column 2", "sampling text 0",
                          "sampling text 1", "sampling text 2", "demo caption", "break next", "break it", "Generate"})
        if (auto it = ui.widgets.find(w); it != ui.widgets.end())
            j["widgets"][w] = {it->second.x, it->second.y, it->second.z, it->second.w};
    // the view: the text scale chosen and drawn at, the font's pixel size, presentation mode, the panel filling the
    // window, the panel files the last export wrote, and where what the tests check fits was drawn (this frame)
    j["ui_scale"] = s.ui_scale;
    j["ui_scale_shown"] = current_ui_scale();
    j["font_px"] = ImGui::GetIO().Fonts->Fonts.empty() ? 0.0f : ImGui::GetIO().Fonts->Fonts[0]->FontSize;
    j["large_font_px"] = ImGui::GetIO().Fonts->Fonts.Size > 1 ? ImGui::GetIO().Fonts->Fonts[1]->FontSize : 0.0f;
    j["presenting"] = s.presenting;
    j["maximised"] = ui.maximised;
    j["focused_panel"] = ui.focused_panel;
    j["exported"] = ui.exported;
    for (const auto& [name, r] : ui.drawn) j["drawn"][name] = {r.x, r.y, r.z, r.w};
    for (const auto& [name, t] : ui.texts) j["texts"][name] = t;
    j["next_rows"] = nlohmann::json::array();
    for (const shown_row& r : ui.next_rows)
        j["next_rows"].push_back({{"token", r.token}, {"prob", r.prob}, {"base_prob", r.base_prob}, {"pinned", r.pinned}});
    j["corrupt_prompt"] = pin.corrupt;
    auto token = [&](int id) -> nlohmann::json {
        if (id < 0 || !s.model || id >= s.model->config.vocab_size) return nullptr;
        return gb::token_text(s.model->tok, id);
    };
    j["lens_target"] = token(lin.target);
    j["attribution_target"] = token(ain.target);
    j["attribution_contrast"] = token(ain.contrast);
    j["patching_target"] = token(pin.target);
    j["patching_contrast"] = token(pin.contrast);
}

// The Learn tab's picture as it was last drawn (this frame or the one before): its boxes with their live shapes,
// the lit one, the head marked, the layer cells and cross-attention arrows, the step's text and any glyph the
// font lacks.
static void add_learn_picture(nlohmann::json& j, const ui_context& ui) {
    const learn_view& v = ui.learn_drawn;
    if (v.frame < ImGui::GetFrameCount() - 1) return;
    nlohmann::json boxes = nlohmann::json::array();
    for (const learn_box_drawn& b : v.boxes)
        boxes.push_back({{"part", b.part}, {"label", b.label}, {"shape", b.shape}, {"lit", b.lit}, {"head", b.head},
                         {"rect", {b.rect.x, b.rect.y, b.rect.z, b.rect.w}}});
    j["learn_picture"] = {{"kind", v.kind}, {"layers", v.layers}, {"encoder_layers", v.encoder_layers},
                          {"cross_arrows", v.cross_arrows}, {"layer", v.layer}, {"head", v.head}, {"token", v.token},
                          {"step", v.step}, {"steps", v.steps}, {"walk", v.walk}, {"lit", v.lit}, {"title", v.title},
                          {"formula", v.formula}, {"boxes", boxes}, {"missing_glyphs", v.missing_glyphs},
                          {"raw_missing_glyphs", v.raw_missing}, {"full", v.full}, {"experts", v.experts}};
}

// The Learn walk, the experts' routing, Break it's rows and the Sampling columns.
static void add_tab_outputs(nlohmann::json& j, const app_state& s) {
    // learn: the walk on screen (its token, layer, head and step titles), and whether it is of the inputs now
    if (const learn_output* lo = output_of<learn_output>(s, ANALYSIS_LEARN).get()) {
        nlohmann::json titles = nlohmann::json::array();
        for (const gb::learn_step& st : lo->walk.steps) titles.push_back(st.title);
        j["learn"] = {{"token", lo->walk.token}, {"layer", lo->walk.layer}, {"head", lo->walk.head},
                      {"steps", titles}, {"current", lo->key == s.analysis_want[ANALYSIS_LEARN]},
                      {"prediction", lo->walk.steps.back().labels.empty() ? "" : lo->walk.steps.back().labels[0]}};
    }
    // experts (MoE models): the ablated ones (the input), and the shown result's routing of the last token
    j["ablated_experts"] = nlohmann::json::array();
    for (const gb::head_ref& e : s.ablation.experts) j["ablated_experts"].push_back(std::to_string(e.layer) + "." + std::to_string(e.head));
    j["knockouts"] = nlohmann::json::array(); // attention knockouts (the input), as the CLI spells them
    for (const gb::knockout& k : s.ablation.knockouts) j["knockouts"].push_back(k.describe());
    if (s.result && !s.result->pred.routing.empty()) {
        const gb::routing_table& rt = s.result->pred.routing;
        nlohmann::json ids = nlohmann::json::array(), w = nlohmann::json::array();
        for (int l = 0; l < rt.n_layer; l++) {
            std::vector<int> li;
            std::vector<float> lw;
            for (int i = 0; i < rt.k && rt.cell_ids(l, rt.n_tokens - 1)[i] >= 0; i++)
                li.push_back(rt.cell_ids(l, rt.n_tokens - 1)[i]), lw.push_back(rt.cell_weights(l, rt.n_tokens - 1)[i]);
            ids.push_back(li);
            w.push_back(lw);
        }
        j["experts"] = {{"n_expert", rt.n_expert}, {"top_k", rt.k}, {"last_token_experts", ids}, {"last_token_weights", w}};
    }
    // break it: the rows (the Learn tab's table), and whether they are of the prompt as it is now
    if (const break_output* bo = output_of<break_output>(s, ANALYSIS_BREAK).get(); bo && !bo->choice) { // as `break-it --json` writes it, with what the app adds
        j["break_it"] = gb::break_it_json(bo->res, bo->model->tok);
        j["break_it"]["prompt"] = bo->prompt;
        j["break_it"]["current"] = break_is_current(bo, s.model, s.prompt, s.bos);
        j["break_it"]["ms"] = bo->ms;
    }
    // sampling: each column's temperature, continuation and first-token distribution (its top 8)
    if (const sampling_output* so = output_of<sampling_output>(s, ANALYSIS_SAMPLING).get()) {
        const sampling_output& o = *so;
        const gb::tokenizer& tok = o.from->model->tok;
        nlohmann::json cols = nlohmann::json::array();
        for (const sampling_column& c : o.columns) {
            nlohmann::json top = nlohmann::json::array();
            for (size_t i = 0; i < c.dist.ids.size() && i < 8; i++)
                top.push_back({{"token", gb::token_text(tok, c.dist.ids[i])}, {"prob", c.dist.probs[i]}});
            cols.push_back({{"temperature", c.temperature}, {"text", c.text}, {"ids", c.ids}, {"kept", c.dist.ids.size()},
                            {"top", top}});
        }
        j["sampling"] = {{"current", o.key == s.analysis_want[ANALYSIS_SAMPLING]}, {"top_k", o.top_k}, {"seed", o.seed},
                         {"tokens", o.n_tokens}, {"prompt", o.from->prompt}, {"columns", cols}};
    }
}

// The Features tab: the SAEs, the selected feature, the edits, the shown SAE's top features of the last token and
// the reconstruction error, the selected feature's logit effect and top contexts
static void add_features(nlohmann::json& j, const app_state& s) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    nlohmann::json saes = nlohmann::json::array();
    for (const auto& b : fin.saes)
        saes.push_back({{"path", b->s->path}, {"hook", gb::hook_name(b->out)}, {"layer", b->layer}, {"d_sae", b->s->d_sae},
                        {"warnings", b->warnings}});
    nlohmann::json edits = nlohmann::json::array();
    for (const app_feature_edit& f : fin.edits) edits.push_back(describe_feature_edit(f));
    nlohmann::json fj = {{"saes", saes}, {"shown", fin.shown}, {"selected", fin.sel}, {"edits", edits},
                         {"value", fin.value}};
    if (const features_output* o = output_of<features_output>(s, ANALYSIS_FEATURES).get()) {
        const gb::feature_result& r = o->res;
        nlohmann::json top = nlohmann::json::array(); // the last token's features by activation, the active ones
        if (r.n_tokens > 0) {
            const float* a = r.acts.data() + (size_t)(r.n_tokens - 1) * r.d_sae;
            std::vector<int> ids;
            for (int i = 0; i < r.d_sae; i++)
                if (a[i] > 0) ids.push_back(i);
            std::sort(ids.begin(), ids.end(), [&](int x, int y) { return a[x] > a[y] || (a[x] == a[y] && x < y); });
            if (ids.size() > 10) ids.resize(10);
            for (int i : ids) top.push_back({{"id", i}, {"act", a[i]}});
        }
        nlohmann::json prom = nlohmann::json::array(), sup = nlohmann::json::array();
        for (const gb::token_effect& e : o->promotes) prom.push_back(gb::token_text(o->model->tok, e.id));
        for (const gb::token_effect& e : o->suppresses) sup.push_back(gb::token_text(o->model->tok, e.id));
        fj["result"] = {{"current", o->key == s.analysis_want[ANALYSIS_FEATURES]}, {"tokens", r.n_tokens},
                        {"top_last", top}, {"fvu", r.fvu}, {"fvu_all", r.fvu_all}, {"loss_delta", r.loss_delta},
                        {"feature", o->feature}, {"promotes", prom}, {"suppresses", sup}};
    }
    if (const features_output* o = output_of<features_output>(s, ANALYSIS_FEATURE_INDEX).get()) {
        nlohmann::json ctx = nlohmann::json::array();
        if (o->index && fin.sel >= 0 && fin.sel < o->index->d_sae)
            for (const gb::feature_context& c : o->index->top[fin.sel]) ctx.push_back({{"act", c.act}, {"text", gb::context_text(*o->model, *o->index, c)}});
        fj["index"] = {{"corpus", o->corpus}, {"note", o->index_note}, {"windows", o->index ? o->index->chunks.size() : 0},
                       {"contexts", ctx}};
    }
    if (const features_output* o = output_of<features_output>(s, ANALYSIS_SAE_TRAIN).get()) fj["trained"] = {{"path", o->trained}, {"note", o->train_note}};
    j["features"] = fj;
    if (const auto go = output_of<graph_output>(s, ANALYSIS_GRAPH); go && go->g) { // the Graph tab's graph
        nlohmann::json logits = nlohmann::json::array();
        for (int i = 0; i < go->g->n_logits(); i++) logits.push_back(go->node_label[go->g->logit_index(i)]);
        j["graph"] = {{"current", go->key == s.analysis_want[ANALYSIS_GRAPH]}, {"transcoders", go->transcoders},
                      {"replacement_score", go->pruned.replacement_score},
                      {"completeness_score", go->pruned.completeness_score}, {"nodes", go->g->n_nodes()},
                      {"kept", std::count(go->pruned.node_mask.begin(), go->pruned.node_mask.end(), 1)},
                      {"edges", go->edges.size()}, {"logits", logits}};
    }
}

// Each analysis's status, the outputs of the lens, the attribution, the induction test and patching, and those of
// the rows that print themselves.
static void add_analyses(nlohmann::json& j, const app_state& s) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    add_features(j, s);
    for (int k = 0; k < ANALYSIS_COUNT; k++) {
        const analysis_status& st = s.analysis[k];
        j["analysis"][analysis_name((analysis_kind)k)] = {{"busy", st.busy}, {"progress", st.progress}, {"error", st.error}, {"cancelled", st.cancelled},
                                   {"wanted", !s.analysis_want[k].empty()}};
    }
    if (const lens_output* lo = output_of<lens_output>(s, ANALYSIS_LENS).get()) { // the model's own top-1 is the last point's at the last position
        const gb::lens_result& l = lo->lens;
        const gb::tokenizer& tok = lo->from->model->tok;
        const size_t last = ((size_t)(l.n_points - 1) * l.n_tokens + l.n_tokens - 1) * l.k;
        // the first point from which the last position's top-1 is the model's own answer at every later point
        int settled = l.n_points - 1;
        for (int p = l.n_points - 2; p >= 0; p--) {
            if (l.top_ids[((size_t)p * l.n_tokens + l.n_tokens - 1) * l.k] != l.top_ids[last]) break;
            settled = p;
        }
        j["lens"] = {{"points", l.n_points}, {"tokens", l.n_tokens}, {"top1_last", gb::token_text(tok, l.top_ids[last])},
                     {"top1_prob_last", l.top_probs[last]}, {"target", token_or_null(tok, lo->target)},
                     {"answer_from_point", settled}, {"current", lo->from == s.result}, {"ms", lo->ms}};
    }
    if (const attribution_output* ao = output_of<attribution_output>(s, ANALYSIS_ATTRIBUTION).get()) {
        const gb::attribution& a = ao->attr;
        const run_result& r = *ao->from;
        const gb::tokenizer& tok = r.model->tok;
        nlohmann::json aj = {{"total", a.total}, {"sum", a.sum()}, {"position", a.position},
                             {"target", gb::token_text(tok, a.target)},
                             {"contrast", token_or_null(tok, a.contrast)},
                             {"current", ao->from == s.result}, {"ms", ao->ms}};
        if (ao->dla && a.position == r.cap().n_tokens - 1) { // the difference as the run's own logits give it
            const float* lg = r.cap().last_logits();
            aj["logit_diff"] = (double)lg[a.target] - (a.contrast >= 0 ? (double)lg[a.contrast] : 0.0);
        }
        if (!ao->saliency.empty()) {
            aj["saliency"] = ao->saliency;
            aj["saliency_method"] = ao->steps > 0 ? "integrated gradients" : "gradient x input";
            aj["saliency_steps"] = ao->steps;
            aj["saliency_metric"] = ao->metric;
            if (ao->steps > 0) aj["completeness_gap"] = ao->gap;
        }
        aj["dla"] = ao->dla;
        j["attribution"] = aj;
    }
    if (const induction_output* io = output_of<induction_output>(s, ANALYSIS_INDUCTION).get()) {
        const gb::head_scores& sc = io->scores;
        float best = 0;
        for (float v : sc.score[gb::SCORE_INDUCTION]) if (std::isfinite(v)) best = std::max(best, v);
        j["induction_test"] = {{"shown", state_of<induction_inputs>(s, ANALYSIS_INDUCTION).shown}, {"n", io->n}, {"seed", io->seed},
                               {"tokens", io->ids.size()}, {"positions", sc.n_induction_positions},
                               {"max_induction", best}, {"ms", io->ms}};
    }
    if (const patch_output* po_ = output_of<patch_output>(s, ANALYSIS_PATCHING).get()) {
        const patch_output& po = *po_;
        const gb::patch_result& p = po.res;
        const gb::tokenizer& tok = po.model->tok;
        const int P = 2 * p.n_layer + 1, T = p.n_tokens;
        auto num = [](float v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
        j["patching"] = {{"complete", p.complete}, {"clean", p.clean}, {"corrupt", p.corrupt}, {"runs", p.runs},
                         {"target", gb::token_text(tok, p.target)},
                         {"contrast", token_or_null(tok, p.contrast)},
                         {"normalized_last", num(p.resid_normalized[(size_t)(P - 1) * T + T - 1])},
                         {"normalized_first", num(p.resid_normalized[0])},
                         {"corrupt_prompt", po.corrupt}, {"corrupt_prompt_tokens", po.corrupt_ids.size()}, {"ms", po.ms},
                         {"note", po.note}, {"exact", po.exact}, {"has_estimate", !po.estimate.resid.empty()}};
    }
    j["patch_mode"] = analysis_name(pin.shown);
    for (int k = 0; k < ANALYSIS_COUNT; k++)
        if (const analysis_entry& e = analysis_info((analysis_kind)k); e.print) e.print(j, s, e);
}

void print_state(const app_state& s, const ui_context& ui) {
    nlohmann::json j; // keys sorted (std::map): the order they are added in does not show
    add_result(j, s);
    add_inputs(j, s, ui);
    add_tab_outputs(j, s);
    add_learn_picture(j, ui);
    add_analyses(j, s);
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str()); // (a path need not be UTF-8)
    std::fflush(stdout);
}

} // namespace gbui
