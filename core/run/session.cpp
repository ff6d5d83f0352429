// The session: a request through the live engine for any kind of model, then the kind's prediction.
//
// Sections: the input of one stack | encoder–decoders | session_run
#include "run/session.h"

#include <algorithm>

#include "run/seq2seq.h"
#include "run/vision.h"
#include "util/error.h"

namespace gb {

// The live request of one stack: its tokens and interventions, the rest of rq (what to keep under `budget`).
static live_request stack_request(const session_request& rq, std::vector<int> tokens, std::vector<intervention> iv,
                                  size_t budget) {
    live_request lr;
    lr.tokens = std::move(tokens);
    lr.interventions = std::move(iv);
    lr.keep = rq.keep;
    lr.keep.budget_bytes = budget;
    lr.attention = rq.attention;
    lr.cancelled = rq.cancelled;
    lr.baseline = rq.baseline;
    lr.all_logits = rq.all_logits;
    return lr;
}

// ---------------------------------------------------------------------------------------------
// A model of one stack: decoders (dense or MoE), encoders, image classifiers
// ---------------------------------------------------------------------------------------------
static void run_one_stack(session_result& out, session& s, const model& m, const session_request& rq) {
    const bool image = kind_info_of(m.config).input == INPUT_IMAGE;
    if (image && rq.pixels.empty()) throw error(m.path + " is an image classifier: give it an image");
    if (!image && !rq.pixels.empty()) throw error(m.path + " reads text: images are for image classifiers (ViT, DeiT)");
    std::vector<intervention> iv = ablation_interventions(rq.ab, m.config);
    iv.insert(iv.end(), rq.interventions.begin(), rq.interventions.end());
    std::vector<std::vector<float>> steer_values; // live_run copies them
    if (rq.steer.any()) {
        require(m, FEATURE_STEERING);
        const std::vector<intervention> sv = steering_interventions(rq.steer, m.config, steer_values);
        iv.insert(iv.end(), sv.begin(), sv.end());
    }
    live_request lr = stack_request(rq, image ? vision_tokens(m.config) : rq.tokens, std::move(iv), rq.keep.budget_bytes);
    lr.pixels = rq.pixels;
    live_result lo;
    live_run(lo, s.main, m, lr);
    out.run = lo.run;
    out.base = lo.base;
    out.report = lo.report;
}

// ---------------------------------------------------------------------------------------------
// Encoder–decoders: two live stacks, the decoder reading the encoder's output
// ---------------------------------------------------------------------------------------------
// The decoder's input when the request gives none: the model's own translation of the source under the
// ablation (its EOS left for the last row to predict), made again only when what it depends on changed.
static std::vector<int> made_target(session& s, const model& m, const session_request& rq) {
    const int max_new = rq.max_target > 0 ? rq.max_target : std::min(40, m.config.n_ctx - 1);
    const sampling& sp = rq.target_sampling;
    std::string key = rq.ab.describe() + "|" + std::to_string(max_new) + "|" + std::to_string(sp.temperature) + "," +
                      std::to_string(sp.top_k) + "," + std::to_string(sp.top_p) + "," + std::to_string(sp.seed) + "|";
    for (int id : rq.tokens) key += std::to_string(id) + ",";
    if (key == s.made_key) return s.made_target;
    bool stopped = false;
    generation g = translate(m, rq.tokens, max_new, sp, rq.ab, [&](int) {
        stopped = rq.cancelled && rq.cancelled();
        return !stopped;
    });
    if (stopped) throw cancelled();
    if (g.hit_eos) g.ids.pop_back();
    std::vector<int> target = {m.config.decoder_start_id};
    target.insert(target.end(), g.ids.begin(), g.ids.end());
    s.made_key = key, s.made_target = target;
    return target;
}

// "what" of both stacks' reports in one: the source's, then the target's.
static live_report joined(const live_report& enc, const live_report& dec) {
    live_report r = dec;
    r.what = "source: " + enc.what + "; target: " + dec.what;
    r.baseline_run = enc.baseline_run || dec.baseline_run;
    r.reused = enc.reused || dec.reused;
    r.ms = enc.ms + dec.ms;
    if (!enc.memory_note.empty()) r.memory_note = "encoder: " + enc.memory_note + (dec.memory_note.empty() ? "" : "; decoder: " + dec.memory_note);
    return r;
}

static void run_encoder_decoder(session_result& out, session& s, const model& m, const session_request& rq) {
    const model& enc = *m.encoder;
    const std::vector<int>& source = rq.tokens;
    if (source.empty()) throw error("empty source: nothing to translate");
    if ((int)source.size() > enc.config.n_ctx)
        throw error("source too long: " + std::to_string(source.size()) + " tokens, the model's context is " +
                    std::to_string(enc.config.n_ctx));
    if (!rq.pixels.empty()) throw error(m.path + " is an encoder–decoder: it reads a source text, not an image");
    if (rq.steer.any()) require(m, FEATURE_STEERING);
    check_ablation(rq.ab, m); // a layer either stack has
    out.target = rq.target.empty() ? made_target(s, m, rq) : rq.target;
    if (out.target.empty()) throw error("empty target: the decoder needs at least its start token");
    // the memory budget, shared by the stacks in proportion to their positions
    const size_t S = source.size(), T = out.target.size(), budget = rq.keep.budget_bytes;
    const size_t enc_budget = budget ? std::max<size_t>(1, budget / (S + T) * S) : 0;

    live_request le = stack_request(rq, source, ablation_interventions(stack_ablation(rq.ab, enc.config.n_layer, enc.config.n_head), enc.config), enc_budget);
    le.keep.points |= hook_bit(HOOK_FINAL_NORM); // the stack's output: what the decoder's cross-attention reads
    live_result eo;
    live_run(eo, s.encoder, enc, le);
    const float* src = eo.run->get(HOOK_FINAL_NORM, enc.config.n_layer);
    const float* base_src = eo.base->get(HOOK_FINAL_NORM, enc.config.n_layer);
    const size_t floats = S * enc.config.d_model;
    s.source.assign(src, src + floats);
    s.base_source.assign(base_src, base_src + floats);

    std::vector<intervention> iv = ablation_interventions(stack_ablation(rq.ab, m.config.n_layer, m.config.n_head), m.config);
    iv.insert(iv.end(), rq.interventions.begin(), rq.interventions.end());
    live_request ld = stack_request(rq, out.target, std::move(iv), budget ? std::max<size_t>(1, budget - enc_budget) : 0);
    ld.source = &s.source;
    ld.base_source = &s.base_source;
    ld.source_pieces = eo.run->pieces;
    live_result lo;
    live_run(lo, s.main, m, ld);
    out.run = lo.run, out.base = lo.base;
    out.encoder = eo.run, out.encoder_base = eo.base;
    out.report = joined(eo.report, lo.report);
    out.translation = utf8_sanitize(decode(m.tok, std::vector<int>(out.target.begin() + 1, out.target.end())));
}

// ---------------------------------------------------------------------------------------------
// session_run
// ---------------------------------------------------------------------------------------------
void session_run(session_result& out, session& s, const model& m, const session_request& rq) {
    if (s.m != &m) s = session(), s.m = &m; // nothing kept applies to another model
    session_result r;
    if (kind_info_of(m.config).input == INPUT_SOURCE_TARGET) run_encoder_decoder(r, s, m, rq);
    else run_one_stack(r, s, m, rq);
    predict(r.pred, m, *r.run, *r.base, rq.top_k);
    out = std::move(r);
}

} // namespace gb
