// Worker thread: loads models, runs the live engine (current + baseline, only what changed) and generation
// through it; newest request wins, and a newer one stops a running one between layers.
#include "worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "heatmaps.h"
#include "io/loader.h"
#include "run/predict.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "util/error.h"
#if __has_include("gl_attention.h")
#include "gl_attention.h"
#include "util/timing.h"
#define GLASSBOX_HAVE_GL 1
#else
#define GLASSBOX_HAVE_GL 0
#endif

namespace gbui {

using clock_type = std::chrono::steady_clock;
std::string display_text(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        unsigned char c = s[i];
        // a 4-byte UTF-8 sequence (F0..F4 + 3 continuation bytes) encodes U+10000..U+10FFFF
        if (c >= 0xF0 && c <= 0xF4 && i + 3 < s.size() && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            (s[i + 3] & 0xC0) == 0x80) {
            unsigned cp = (c & 0x07u) << 18 | (s[i + 1] & 0x3Fu) << 12 | (s[i + 2] & 0x3Fu) << 6 | (s[i + 3] & 0x3Fu);
            char b[16];
            std::snprintf(b, sizeof b, "<U+%X>", cp);
            out += b;
            i += 4;
        } else {
            out += s[i++];
        }
    }
    return out;
}

std::string visible_token(const std::string& text) {
    std::string s = display_text(text), out;
    for (char c : s) {
        if (c == ' ') out += "\u00b7";
        else if (c == '\n') out += "\u21b5";
        else if (c == '\t') out += "\u2192";
        else if (c == '\r') out += "\u240d";
        else if ((unsigned char)c < 0x20 || c == 0x7f) { // other control bytes: no glyph, show the byte
            char hex[8];
            std::snprintf(hex, sizeof hex, "<%02X>", (unsigned char)c);
            out += hex;
        } else out += c;
    }
    return out;
}

worker::worker() : thread_([this] { loop(); }) {}

worker::~worker() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
        newer_ = true; // a run in progress stops at its next layer
    }
    cv_.notify_all();
    thread_.join();
}

std::string sampling_key(const gb::sampling& sp) {
    if (sp.temperature <= 0) return "greedy";
    return "T" + std::to_string(sp.temperature) + ",k" + std::to_string(sp.top_k) + ",p" + std::to_string(sp.top_p) +
           ",s" + std::to_string(sp.seed);
}

std::string run_key(const run_request& q, bool partial, int head_block) {
    // a part layer's heads come in blocks of head_block: selecting a head of another block asks for another run
    std::string k = std::to_string((uintptr_t)q.model.get()) + (q.bos ? "|B|" : "|-|") + (q.use_gl ? "G|" : "C|") +
                    (partial ? std::to_string(q.focus_layer) + "|" : "") +
                    (partial && head_block > 0 ? "h" + std::to_string(q.focus_head / head_block) + "|" : "") +
                    q.ablation.describe() + "|" +
                    std::to_string(q.top_k) + "|";
    if (q.patch) k += "patch" + std::to_string((uintptr_t)q.patch.get()) + "|";
    if (!q.features.empty()) {
        k += "features " + describe_feature_edits(q.features) + "|";
        for (const app_feature_edit& f : q.features) k += std::to_string((uintptr_t)f.sae.get()) + ",";
    }
    if (!q.ids.empty()) k += "gen" + std::to_string(q.gen_id) + ":" + std::to_string(q.ids.size() - q.n_prompt) + "|";
    const gb::kind_input in = q.model ? gb::kind_info_of(q.model->config).input : gb::INPUT_TEXT;
    if (in == gb::INPUT_IMAGE) return k + "image:" + q.image_path;
    if (in == gb::INPUT_SOURCE_TARGET)
        k += "stack" + std::to_string(q.stack) + "|" + sampling_key(q.target_sampling) + "|target" +
             std::to_string(q.target.size()) + ":" + q.target + "|";
    return k + q.prompt;
}

void worker::load(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    load_ = path;
    newer_ = true;
    cv_.notify_all();
}

void worker::run(run_request r) {
    std::lock_guard<std::mutex> l(mu_);
    run_ = std::move(r);
    gen_.reset(); // the inputs changed after Generate was clicked: like a running generation, it stops
    newer_ = true;
    cv_.notify_all();
}

void worker::generate(gen_request r) {
    std::lock_guard<std::mutex> l(mu_);
    gen_ = std::move(r);
    newer_ = true;
    cv_.notify_all();
}

void worker::colour(colour_request r) {
    std::lock_guard<std::mutex> l(mu_);
    colour_ = std::move(r);
    cv_.notify_all();
}

bool worker::idle() const {
    std::lock_guard<std::mutex> l(mu_);
    // nothing running, queued, or finished but not yet taken by poll()
    return !active_ && !load_ && !run_ && !gen_ && !colour_ && !out_.loaded && !out_.result && !out_.pixels &&
           !out_.generated && !out_.has_error && !out_.load_failed;
}

bool worker::running() const {
    std::lock_guard<std::mutex> l(mu_);
    return active_ == 2 || active_ == 3;
}

uint64_t worker::cancelled() const {
    std::lock_guard<std::mutex> l(mu_);
    return cancelled_;
}

uint64_t worker::published() const {
    std::lock_guard<std::mutex> l(mu_);
    return published_;
}

void worker::poll(app_state& s) {
    std::lock_guard<std::mutex> l(mu_);
    s.busy = active_ >= 2 || run_.has_value() || gen_.has_value() || colour_.has_value();
    s.generating = active_ == 3 || gen_.has_value();
    s.loading = active_ == 1 || load_.has_value();
    s.load_progress = progress_;
    s.load_label = progress_label_;
    if (out_.loaded) {
        adopt_model(s, out_.loaded, out_.loaded_path);
        out_.loaded.reset();
    }
    if (out_.load_failed) { // the previous model and result stay; settings meant for the new one are dropped
        if (s.pending) s.warning = s.pending->source + ": not applied (its model did not load)";
        s.pending.reset();
        out_.load_failed = false;
    }
    // a new result waits in next_* until its textures are uploaded (main), then replaces s.result
    if (out_.result) {
        s.next_result = out_.result;
        s.next_pixels = out_.result_pixels;
        // (not an SAE's error: its load ends on its own thread, and a result that came after it would wipe it)
        if (!out_.has_error && s.error != s.error_not_of_runs) s.error.clear();
        out_.result.reset();
        out_.result_pixels.reset();
    }
    if (out_.pixels) { // re-coloured for a scale change: only if they belong to the result they would show
        const run_result* target = s.next_result ? s.next_result.get() : s.result.get();
        if (target && target->request_id == out_.pixels->request_id) s.next_pixels = out_.pixels;
        out_.pixels.reset();
    }
    if (out_.generated) {
        s.generated = out_.generated;
        // the step slider follows a running generation (published with the result of that step) until it is moved
        if (s.gen_follow) s.gen_step = (int)s.generated->ids.size();
        out_.generated.reset();
    }
    if (out_.has_error) {
        s.error = out_.error;
        out_.has_error = false;
    }
    if (!out_.gl_status.empty()) s.gl_status = out_.gl_status, out_.gl_status.clear();
}

// The tokens a request runs: the replayed ids, else the prompt encoded (a prompt longer than the context keeps
// its end: the next-token prediction depends on it, and says so in notice).
static std::vector<int> request_tokens(const run_request& q, std::string& notice, int& n_prompt) {
    if (!q.ids.empty()) {
        n_prompt = q.n_prompt;
        return q.ids;
    }
    const gb::model& m = *q.model;
    const gb::kind_input in = gb::kind_info_of(m.config).input;
    if (in == gb::INPUT_IMAGE) {
        n_prompt = m.config.n_ctx;
        return gb::vision_tokens(m.config);
    }
    if (in == gb::INPUT_SOURCE_TARGET) { // the source, as the encoder reads it (a longer one is an error: its end is its EOS)
        std::vector<int> src = gb::source_ids(m, q.prompt);
        if (src.size() <= m.tok.prefix_ids.size() + m.tok.suffix_ids.size() + 1 && q.prompt.empty())
            throw gb::error("empty source: type the text to translate");
        n_prompt = (int)src.size();
        return src;
    }
    std::vector<int> ids = gb::encode_prompt(m.tok, q.prompt, q.bos);
    if (ids.empty()) throw gb::error("empty prompt: type some text (or tick \"prepend BOS\")");
    if ((int)ids.size() > m.config.n_ctx) {
        notice = "prompt truncated to its last " + std::to_string(m.config.n_ctx) + " of " + std::to_string(ids.size()) +
                 " tokens (the model's context)";
        ids.erase(ids.begin(), ids.end() - m.config.n_ctx);
    }
    n_prompt = (int)ids.size();
    return ids;
}

// The image of a vision request as pixels and as the model's view, read again only when the path or model changed.
void worker::read_image(const run_request& q) {
    const std::string key = std::to_string((uintptr_t)q.model.get()) + "|" + q.image_path;
    if (key == image_key_) return;
    if (q.image_path.empty()) throw gb::error("no image: type the path of a PNG or JPEG in the Image box (or drop one on the window)");
    auto view = std::make_shared<const gb::image>(gb::vision_view(*q.model, gb::load_image(q.image_path)));
    image_pixels_ = gb::view_pixels(*q.model, *view); // throws before anything is replaced
    image_view_ = std::move(view);
    image_key_ = key;
}

// Brings the session up to q with these tokens (an encoder–decoder's: its source): only what changed since the
// kept runs is computed, and a newer request stops it between layers (gb::cancelled).
void worker::run_session(gb::session_result& out, const run_request& q, const std::vector<int>& ids,
                         const gb::attention_fn& attention) {
    if (q.model != session_model_ || q.use_gl != session_gl_) { // nothing kept applies to another model or backend
        session_ = gb::session();
        derived_ = derived_cache();
        session_model_ = q.model;
        session_gl_ = q.use_gl;
    }
    const gb::model& m = *q.model;
    gb::session_request rq;
    rq.tokens = ids;
    switch (gb::kind_info_of(m.config).input) {
    case gb::INPUT_IMAGE:
        read_image(q);
        rq.pixels = image_pixels_;
        break;
    case gb::INPUT_SOURCE_TARGET: // the target as typed, or (empty) the model's translation as the request says
        if (!q.target.empty()) rq.target = gb::target_ids(m, q.target);
        rq.target_sampling = q.target_sampling;
        break;
    case gb::INPUT_TEXT: break;
    }
    rq.ab = q.ablation;
    if (q.patch) rq.interventions = q.patch->interventions;
    std::vector<std::vector<float>> feature_values; // the feature edits' SET values (the session copies them)
    if (!q.features.empty() && gb::offers(m.config, gb::FEATURE_SAE))
        add_feature_interventions(rq.interventions, feature_values, m, ids, q.ablation, q.features);
    rq.top_k = q.top_k;
    // patterns for the grid and the head view; z, MLP outputs and the whole residual stream for the logit lens
    // and the attribution (all within the capture budget, which leaves the largest far layers out first)
    // (MoE models: the router's mixing weights too, L*T*E floats, for the Experts view)
    rq.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT) |
                     gb::hook_bit(gb::HOOK_ROUTER);
    rq.keep.resid_stream = true;
    rq.keep.budget_bytes = q.budget_bytes;
    rq.keep.focus_layer = q.focus_layer;
    rq.keep.focus_head = q.focus_head;
    rq.attention = attention;
    rq.cancelled = [this] { return newer_.load(std::memory_order_relaxed); };
    gb::session_run(out, session_, m, rq);
}

// The surprisal strip's numbers for r (run_result::surprisal): what the kind table says, then the loss of each token
// of the record the LM head reads, under the ablation. Tokens an edit did not reach keep the previous result's
// entries (a causal model's rows before the first changed token are equal under equal inputs), so typing at the
// end costs one row of the LM head, not T.
void worker::surprisal_strip(run_result& r, const std::string& inputs) {
    const gb::model& m = *r.model;
    std::shared_ptr<const gb::record> prev_rec = std::move(derived_.scored); // kept only when this one is computed
    std::shared_ptr<const gb::surprisal_result> prev = std::move(derived_.surprisal);
    derived_.scored = nullptr, derived_.surprisal = nullptr;
    r.surprisal_why = gb::kind_info_of(m.config).why_not[gb::FEATURE_SURPRISAL] ? gb::refusal(m, gb::FEATURE_SURPRISAL) : "";
    if (!r.surprisal_why.empty()) return;
    if (source_shown(r)) { // the chips are the source's: the decoder scores the target
        r.surprisal_why = "the strip scores the decoder's target tokens: show the decoder";
        return;
    }
    const std::shared_ptr<const gb::record>& rec = r.decoder ? r.decoder : r.run;
    if (rec->n_tokens < 2) return; // nothing before the only token predicts it
    const reuse_plan reuse = plan_reuse(*rec, prev_rec.get(), derived_.inputs == inputs);
    try {
        auto s = std::make_shared<gb::surprisal_result>(gb::surprisal_from_stream(*rec, m, r.ablation, prev.get(), reuse.same_rows));
        r.surprisal = s;
        derived_.scored = rec, derived_.surprisal = s;
    } catch (const gb::error& e) { // the memory budget left the last point out
        r.surprisal_why = e.what();
    }
}

// The published result of a session run: its records (an encoder–decoder's: the stack the grid shows, and both
// stacks), the session's prediction, the head scores and the heatmaps' pixels, the last two reusing the previous
// published result's where layers or rows are unchanged.
std::shared_ptr<run_result> worker::finish(const run_request& q, const gb::session_result& out, const std::string& notice,
                                           int n_prompt, std::shared_ptr<const heat_pixels>& pixels) {
    if (newer_) throw gb::cancelled(); // a newer request is waiting: its result replaces this one before it shows
    auto r = std::make_shared<run_result>();
    {
        std::lock_guard<std::mutex> l(mu_);
        r->request_id = next_id_++;
    }
    r->model = q.model;
    r->prompt = q.prompt;
    r->target = q.target;
    r->target_sampling = q.target_sampling;
    r->stack = q.stack;
    r->image_path = q.image_path;
    r->bos = q.bos;
    r->ablation = q.ablation;
    r->patch = q.patch;
    r->features = q.features;
    r->budget_bytes = q.budget_bytes;
    const bool shows_encoder = out.encoder && q.stack == 0;
    r->run = shows_encoder ? out.encoder : out.run;
    r->base = shows_encoder ? out.encoder_base : out.base;
    r->report = out.report;
    r->n_prompt = n_prompt;
    r->gen_id = q.ids.empty() ? 0 : q.gen_id;
    r->key = run_key(q, !r->run->budget_note.empty(), r->run->part.count);
    r->notice = notice;
    if (!out.report.memory_note.empty())
        r->notice += (r->notice.empty() ? "" : "; ") + out.report.memory_note +
                     (r->run->budget_note.empty() ? "" : ": select a head to see its layer");
    if (out.encoder) { // an encoder–decoder: both stacks; a target is typed or translated, not a continuation
        r->encoder = out.encoder;
        r->decoder = out.run;
        r->translation = out.translation;
        r->cross_mean = gb::cross_average(*r->decoder); // the Cross-attention tab's alignment, made once here
        r->n_prompt = r->run->n_tokens;
    }
    r->pred = out.pred;
    if (gb::kind_info_of(q.model->config).input == gb::INPUT_IMAGE) r->view = image_view_;
    // what the previous published result shares with this one (rows equal only under equal inputs)
    // (a vision model's tokens are its positions whatever the image: the image is an input)
    const std::string inputs = std::to_string((uintptr_t)q.model.get()) + "|" + q.ablation.describe() + (q.use_gl ? "|G" : "|C") +
                               "|" + q.image_path + "|" + std::to_string(q.stack) + "|" + q.target;
    try {
        const reuse_plan reuse = plan_reuse(*r->run, derived_.rec.get(), derived_.inputs == inputs);
        auto t0 = clock_type::now();
        r->scores = gb::score_heads_resume(derived_.sums, *r->run, reuse.same_layer, reuse.same_rows);
        r->scores_ms = gb::ms_since(t0);
        t0 = clock_type::now();
        pixels = make_heat_pixels(*r, q.scale, derived_.pixels.get(), &reuse);
        r->pixels_ms = gb::ms_since(t0);
        t0 = clock_type::now();
        surprisal_strip(*r, inputs);
        r->surprisal_ms = gb::ms_since(t0);
    } catch (...) {
        derived_ = derived_cache(); // the sums may be half updated
        throw;
    }
    derived_.rec = r->run;
    derived_.inputs = inputs;
    derived_.pixels = pixels;
    return r;
}

void worker::publish(std::shared_ptr<const run_result> r, std::shared_ptr<const heat_pixels> px,
                     std::shared_ptr<const generation_result> g) {
    {
        std::lock_guard<std::mutex> l(mu_);
        if (r) out_.result = std::move(r), out_.result_pixels = std::move(px), published_++;
        if (g) out_.generated = std::move(g);
    }
    if (wake) wake();
}

// Generation through the live state: each sampled token is appended to the kept run (one token's work per step),
// so the panels show the generated tokens as they appear. Sampling and the end-of-text stop as gb::generate.
void worker::generate_now(const gen_request& g, const gb::attention_fn& attention) {
    const auto t_start = clock_type::now();
    const run_request& q = g.run;
    const gb::model& m = *q.model;
    // the prompt's own result first, as a run request would give it (the app asks for no separate run)
    std::string notice;
    int n_prompt = 0;
    std::vector<int> ids = request_tokens(q, notice, n_prompt);
    gb::session_result out;
    run_session(out, q, ids, attention); // usually kept already: "nothing changed"
    std::shared_ptr<const heat_pixels> px;
    std::shared_ptr<const run_result> r = finish(q, out, notice, n_prompt, px); // before publish(..., px, ...) reads px
    const int room = m.config.n_ctx - (int)ids.size();
    if (room <= 0 || !notice.empty()) {
        publish(r, px);
        throw gb::error("prompt fills the model's context: no room to generate");
    }
    const int max_new = std::min(g.n_tokens, room);
    auto gen = std::make_shared<generation_result>();
    {
        std::lock_guard<std::mutex> l(mu_);
        gen->request_id = next_id_++;
    }
    gen->model = q.model;
    gen->prompt = q.prompt;
    gen->bos = q.bos;
    gen->prompt_ids = ids;
    auto snapshot = [&] { // the generation so far, as an immutable copy for the UI
        gen->text = gb::utf8_sanitize(gb::decode(m.tok, gen->ids));
        gen->n_tokens = (int)gen->ids.size();
        gen->ms = gb::ms_since(t_start);
        return std::make_shared<const generation_result>(*gen);
    };
    publish(r, px, snapshot());
    auto published_at = clock_type::now();
    run_request step = q; // each step's published result: the prompt's ids and those generated so far
    step.n_prompt = n_prompt;
    step.gen_id = gen->request_id;
    std::mt19937_64 rng(g.sampling.seed);
    bool unpublished = false; // the last step's result is not on its way to the screen yet
    for (int i = 0; i < max_new; i++) {
        const int next = gb::sample_token(out.run->last_logits(), m.config.vocab_size, g.sampling, rng);
        if (next == m.tok.eos_id) {
            gen->hit_eos = true;
            break;
        }
        gen->ids.push_back(next);
        ids.push_back(next);
        run_session(out, q, ids, attention); // one more token: the kept run grows by one position
        step.ids = ids;
        unpublished = true;
        // at most one result per 50 ms (each costs its pixels and a texture upload), and always the last
        if (i + 1 < max_new && clock_type::now() - published_at < std::chrono::milliseconds(50)) continue;
        gen->done = i + 1 == max_new;
        r = finish(step, out, "", n_prompt, px);
        publish(r, px, snapshot());
        published_at = clock_type::now();
        unpublished = false;
    }
    if (gen->done) return;
    gen->done = true; // stopped at end-of-text (or nothing to generate)
    if (unpublished) {
        r = finish(step, out, "", n_prompt, px);
        publish(r, px, snapshot());
    } else {
        publish(nullptr, nullptr, snapshot());
    }
}

// The worker makes its own headless GL context the first time GL is asked for; if none can be had it says
// so once (a notice containing "fallback") and runs on the CPU.
gb::attention_fn worker::gl_attention_on_this_thread() {
#if GLASSBOX_HAVE_GL
    if (gl_state_ == 0) {
        gb::gl_info info = gb::gl_init_headless();
        gl_state_ = info.ok ? 1 : -1;
        std::lock_guard<std::mutex> l(mu_);
        out_.gl_status = info.ok        ? "GPU: " + info.renderer
                         : info.context ? "GL shaders failed on " + info.renderer + " (" + info.error + "): fallback to the CPU"
                                        : "no OpenGL 4.3 (" + info.error + "): fallback to the CPU";
    }
    if (gl_state_ == 1) return gb::attention_gl;
#else
    if (gl_state_ == 0) {
        gl_state_ = -1;
        std::lock_guard<std::mutex> l(mu_);
        out_.gl_status = "built without OpenGL: fallback to the CPU";
    }
#endif
    return {};
}

void worker::loop() {
    for (;;) {
        std::optional<std::string> load;
        std::optional<run_request> run;
        std::optional<gen_request> gen;
        std::optional<colour_request> colour;
        {
            std::unique_lock<std::mutex> l(mu_);
            active_ = 0;
            cv_.wait(l, [&] { return stop_ || load_ || run_ || gen_ || colour_; });
            if (stop_) {
#if GLASSBOX_HAVE_GL
                l.unlock();
                gb::gl_shutdown(); // this thread's context
#endif
                return;
            }
            if (load_) load.swap(load_), active_ = 1;
            else if (run_) run.swap(run_), active_ = 2;
            else if (gen_) gen.swap(gen_), active_ = 3;
            else colour.swap(colour_), active_ = 4;
            newer_ = false; // only a request arriving from now on stops this one (those still queued run after it)
        }
        try {
            if (load) {
                progress_ = 0;
                gb::load_options opt;
                opt.keep_stored = keep_stored;
                opt.progress = [this](float f, const std::string& label) {
                    progress_ = f;
                    std::lock_guard<std::mutex> l(mu_);
                    progress_label_ = label;
                };
                auto m = std::make_shared<const gb::model>(gb::load_model(*load, opt));
                {
                    std::lock_guard<std::mutex> l(mu_);
                    out_.loaded = m;
                    out_.loaded_path = *load;
                }
                if (wake) wake();
            } else if (run) {
                gb::attention_fn attention;
                if (run->use_gl) attention = gl_attention_on_this_thread();
                std::string notice;
                int n_prompt = 0;
                std::vector<int> ids = request_tokens(*run, notice, n_prompt);
                gb::session_result out;
                run_session(out, *run, ids, attention);
                std::shared_ptr<const heat_pixels> px;
                auto r = finish(*run, out, notice, n_prompt, px);
                publish(r, px);
            } else if (colour) {
                auto px = make_heat_pixels(*colour->result, colour->scale);
                if (colour->result->run == derived_.rec) derived_.pixels = px; // the next run reuses this scale's
                {
                    std::lock_guard<std::mutex> l(mu_);
                    out_.pixels = px;
                }
                if (wake) wake();
            } else if (gen) {
                gb::attention_fn attention;
                if (gen->run.use_gl) attention = gl_attention_on_this_thread();
                generate_now(*gen, attention);
            }
        } catch (const gb::cancelled&) {
            // a newer request replaced this one: publish nothing (the previous complete result stays on screen;
            // the live state recomputes next time what the stopped run may have half written)
            std::lock_guard<std::mutex> l(mu_);
            cancelled_++;
        } catch (const std::exception& e) {
            {
                std::lock_guard<std::mutex> l(mu_);
                out_.error = (load ? "cannot load model: " : "") + std::string(e.what());
                out_.has_error = true;
                if (load) out_.load_failed = true;
            }
            if (wake) wake();
        }
    }
}

} // namespace gbui
