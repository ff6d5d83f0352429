// What each analysis of the table (analysis_table.h) computes, on an analysis thread: the logit lens, direct logit
// attribution with the token saliency, Learn's walk, Break it, the Sampling tab's continuations, the induction
// test and activation patching. `run.go` returns false once the request is stopped.
#include <algorithm>
#include <chrono>

#include "analysis/gradients.h"
#include "analysis_table.h"
#include "analysis_worker.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "util/error.h"
#include "util/timing.h"

namespace gbui {

using clock_type = std::chrono::steady_clock;
std::shared_ptr<const void> compute_lens(const analysis_request& rq, const analysis_run& run) {
    const lens_request& q = request_of<lens_request>(rq);
    const keep_going& go = run.go;
    auto t0 = clock_type::now();
    const run_result& r = *q.from;
    auto out = std::make_shared<lens_output>();
    out->key = rq.key;
    out->from = q.from;
    out->target = q.target;
    if (q.lens && q.lens->from == q.from && q.lens->lens.complete) { // another target on the same run: instant
        out->lens = q.lens->lens;
        gb::lens_retarget(out->lens, r.lm_record(), *r.model, r.ablation, q.target);
    } else {
        out->lens = gb::logit_lens(r.lm_record(), *r.model, r.ablation, 5, q.target, go);
    }
    out->ms = gb::ms_since(t0);
    return out->lens.complete ? out : nullptr;
}

// The saliency of the attribution's difference, by the run's kind: its prompt, its image's positions (the pixels
// again from the view), or both stacks of an encoder–decoder (the shown stack's side kept).
static void compute_saliency(attribution_output& out, const run_result& r, const gb::metric_spec& ms, int steps) {
    const gb::model& m = *r.model;
    gb::saliency_result sr;
    if (run_kind(r).input == gb::INPUT_SOURCE_TARGET) {
        sr = gb::saliency_seq2seq(m, r.encoder->tokens, r.decoder->tokens, ms, steps, r.ablation);
    } else {
        gb::forward_options base;
        std::vector<float> px;
        if (r.view) px = gb::view_pixels(m, *r.view), base.pixels = px.data();
        sr = gb::saliency(m, r.cap().tokens, ms, steps, r.ablation, base);
    }
    const bool source = source_shown(r);
    out.saliency = steps > 0 ? (source ? sr.source_integrated : sr.integrated)
                             : (source ? sr.source_grad_x_input : sr.grad_x_input);
    out.steps = steps;
    out.metric = sr.value;
    out.change = sr.value - sr.baseline;
    out.gap = steps > 0 ? sr.completeness_gap() : 0;
}

std::shared_ptr<const void> compute_attribution(const analysis_request& rq, const analysis_run&) {
    const attribution_request& q = request_of<attribution_request>(rq);
    auto t0 = clock_type::now();
    const run_result& r = *q.from;
    auto out = std::make_shared<attribution_output>();
    out->key = rq.key;
    out->from = q.from;
    out->dla = gb::offers(r.model->config, gb::FEATURE_ATTRIBUTION);
    if (out->dla) {
        out->attr = gb::attribute(r.cap(), *r.model, r.ablation, q.target, q.contrast, q.position);
    } else { // the other kinds: the saliency alone
        out->attr.target = q.target, out->attr.contrast = q.contrast, out->attr.position = q.position;
    }
    if (gb::offers(r.model->config, gb::FEATURE_GRADIENTS)) { // one more forward and the backward (N + 1 more: IG)
        gb::metric_spec ms;
        ms.kind = out->attr.contrast >= 0 ? gb::metric_spec::LOGIT_DIFF : gb::metric_spec::LOGIT;
        ms.target = out->attr.target;
        ms.contrast = out->attr.contrast;
        ms.position = out->attr.position;
        compute_saliency(*out, r, ms, q.steps);
    }
    out->ms = gb::ms_since(t0);
    return out;
}

// The walk reruns the shown run's tokens (and ablation) keeping every point of one layer: the app's live record
// keeps only what its panels read.
std::shared_ptr<const void> compute_learn(const analysis_request& rq, const analysis_run&) {
    const learn_request& q = request_of<learn_request>(rq);
    auto t0 = clock_type::now();
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    auto out = std::make_shared<learn_output>();
    out->key = rq.key;
    out->from = q.from;
    gb::forward_options o;
    o.keep = gb::learn_keep(m.config.n_layer, q.layer);
    if (run_kind(r).input == gb::INPUT_SOURCE_TARGET) { // its decoder, reading the same source
        gb::seq2seq_record rec;
        gb::run_seq2seq(rec, m, r.encoder->tokens, r.decoder->tokens, r.ablation, o);
        out->walk = gb::walk_through(m, rec.decoder, q.position, q.layer, q.head);
    } else {
        gb::record rec;
        gb::run_forward(rec, m, r.cap().tokens, r.ablation, o);
        out->walk = gb::walk_through(m, rec, q.position, q.layer, q.head);
    }
    out->params = gb::param_derivation(m);
    out->ms = gb::ms_since(t0);
    return out;
}

// The prompt run with each ablation in turn; or, for the demo's first request, only the choice of its prompt
// (the demo then sets it, and the rows of that prompt are asked for as any other's).
std::shared_ptr<const void> compute_break(const analysis_request& rq, const analysis_run& run) {
    const break_request& q = request_of<break_request>(rq);
    const keep_going& go = run.go;
    const std::function<bool()>& stopped = run.stopped;
    auto t0 = clock_type::now();
    const gb::model& m = *q.model;
    auto out = std::make_shared<break_output>();
    out->key = rq.key;
    out->model = q.model;
    out->bos = q.bos;
    if (!q.candidates.empty()) {
        out->choice = true;
        out->prompt = q.candidates[gb::most_confident_prompt(m, q.candidates, q.bos, stopped)].text;
        out->ms = gb::ms_since(t0);
        return out;
    }
    out->prompt = q.prompt;
    std::vector<int> ids = gb::encode_prompt(m.tok, out->prompt, q.bos);
    if ((int)ids.size() > m.config.n_ctx) // as the main run: its last n_ctx tokens
        ids.erase(ids.begin(), ids.end() - m.config.n_ctx);
    gb::break_options o;
    o.progress = [&](float f) { go(f); };
    o.cancelled = stopped;
    out->res = gb::break_it(m, ids, o);
    out->ms = gb::ms_since(t0);
    return out;
}

// The shown run's tokens continued at each temperature (one seed, one top-k), through the KV cache as the CLI's
// generate does, with the run's ablation; the distributions are of the run's last logits.
std::shared_ptr<const void> compute_sampling(const analysis_request& rq, const analysis_run& run) {
    const sampling_request& q = request_of<sampling_request>(rq);
    const keep_going& go = run.go;
    auto t0 = clock_type::now();
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    const gb::record& c = r.cap();
    if (!c.logit_ids.empty()) throw gb::error("sampling: the run kept only some logits");
    auto out = std::make_shared<sampling_output>();
    out->key = rq.key;
    out->from = q.from;
    out->top_k = q.sampling.top_k;
    out->n_tokens = q.gen_tokens;
    out->seed = q.sampling.seed;
    const int n = (int)q.temperatures.size();
    for (int i = 0; i < n; i++) {
        bool stopped = false;
        int made = 0;
        sampling_column col = gb::run_at_temperature(m, c.tokens, c.last_logits(), c.vocab, q.sampling, q.temperatures[i],
                                                     q.gen_tokens, r.ablation, [&](int) {
            stopped = !go((i + (float)++made / std::max(1, q.gen_tokens)) / n);
            return !stopped;
        });
        if (stopped) return nullptr;
        out->columns.push_back(std::move(col));
    }
    out->ms = gb::ms_since(t0);
    return out;
}

std::shared_ptr<const void> compute_induction(const analysis_request& rq, const analysis_run&) {
    const induction_request& q = request_of<induction_request>(rq);
    auto t0 = clock_type::now();
    const gb::model& m = *q.model;
    auto out = std::make_shared<induction_output>();
    out->key = rq.key;
    out->model = q.model;
    out->n = q.n;
    out->seed = q.seed;
    out->ids = gb::repeated_random_tokens(m.tok, m.config.vocab_size, q.n, q.seed, q.bos);
    if ((int)out->ids.size() > m.config.n_ctx)
        throw gb::error("induction test: " + std::to_string(out->ids.size()) + " tokens do not fit the model's context of " +
                        std::to_string(m.config.n_ctx) + ": choose a smaller N");
    gb::record rec;
    gb::forward_options fo; // patterns of every layer: the scores need them all
    gb::run_forward(rec, m, out->ids, q.ab, fo);
    out->scores = gb::score_heads(rec);
    out->ms = gb::ms_since(t0);
    return out;
}

void patch_inputs(patch_output* out, const std::string& key, const patch_request& q, int& target, int& contrast) {
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    const int V = m.config.vocab_size;
    out->key = key;
    out->model = r.model;
    out->corrupt = q.corrupt;
    out->clean_ids = r.cap().tokens;
    out->corrupt_ids = gb::encode_prompt(m.tok, q.corrupt, r.bos);
    if (out->corrupt_ids.size() == (r.bos ? 1u : 0u)) throw gb::error("the corrupted prompt is empty");
    if ((int)out->corrupt_ids.size() > m.config.n_ctx) // kept like the clean prompt: its last n_ctx tokens
        out->corrupt_ids.erase(out->corrupt_ids.begin(), out->corrupt_ids.end() - m.config.n_ctx);
    if (r.pred.top.empty()) throw gb::error("no prediction to patch");
    target = q.target >= 0 ? q.target : r.pred.top[0].id, contrast = q.contrast;
    gb::check_patch_prompts(out->clean_ids, out->corrupt_ids, m.config);
    // the corrupted run's own prediction: the default contrast, and what the panel offers to pick from
    gb::record cr;
    gb::forward_options fo;
    fo.keep.points = 0;
    fo.keep.resid_norms = false;
    gb::run_forward(cr, m, out->corrupt_ids, r.ablation, fo);
    out->corrupt_top = gb::top_k_probs(cr.last_logits(), V, 10);
    if (contrast < 0) contrast = gb::default_contrast(r.pred.top, out->corrupt_top, target, &out->note);
}

// Exact patching; in the fast mode attribution patching's estimate first, published at once (exact false), then
// kept beside the exact maps.
std::shared_ptr<const void> compute_patching(const analysis_request& rq, const analysis_run& run) {
    const patch_request& q = request_of<patch_request>(rq);
    const keep_going& go = run.go;
    auto t0 = clock_type::now();
    const run_result& r = *q.from;
    const gb::model& m = *r.model;
    auto out = std::make_shared<patch_output>();
    int target = 0, contrast = -1;
    patch_inputs(out.get(), rq.key, q, target, contrast);
    gb::patch_options po;
    po.ab = r.ablation;
    if (q.fast) {
        out->estimate = gb::attribution_patching(m, out->clean_ids, out->corrupt_ids, target, contrast, r.ablation);
        out->estimate_ms = gb::ms_since(t0);
        auto first = std::make_shared<patch_output>(*out);
        first->exact = false;
        first->res = out->estimate;
        first->ms = out->estimate_ms;
        run.early(first);
    }
    out->res = gb::activation_patching(m, out->clean_ids, out->corrupt_ids, target, contrast, po, go);
    out->ms = gb::ms_since(t0);
    if (out->res.complete && !out->estimate.resid.empty()) { // the panel's "estimate - exact", made here once
        gb::patch_result& d = out->difference;
        d = out->res;
        for (size_t i = 0; i < d.resid_normalized.size(); i++)
            d.resid_normalized[i] = out->estimate.resid_normalized[i] - out->res.resid_normalized[i];
        for (size_t i = 0; i < d.heads_normalized.size(); i++)
            d.heads_normalized[i] = out->estimate.heads_normalized[i] - out->res.heads_normalized[i];
    }
    return out->res.complete ? out : nullptr;
}
} // namespace gbui
