// Worker thread: loads models, runs forward passes (current + baseline) and generation; newest request wins.
#include "worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "error.h"
#include "heatmaps.h"
#if __has_include("gl_attention.h")
#include "gl_attention.h"
#define GLASSBOX_HAVE_GL 1
#else
#define GLASSBOX_HAVE_GL 0
#endif

namespace gbui {

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
    }
    cv_.notify_all();
    thread_.join();
}

void worker::load(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    load_ = path;
    cv_.notify_all();
}

void worker::run(run_request r) {
    std::lock_guard<std::mutex> l(mu_);
    run_ = std::move(r);
    cv_.notify_all();
}

void worker::generate(gen_request r) {
    std::lock_guard<std::mutex> l(mu_);
    gen_ = std::move(r);
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

void worker::poll(app_state& s) {
    std::lock_guard<std::mutex> l(mu_);
    s.busy = active_ >= 2 || run_.has_value() || gen_.has_value() || colour_.has_value();
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
        if (!out_.has_error) s.error.clear();
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
        out_.generated.reset();
    }
    if (out_.has_error) {
        s.error = out_.error;
        out_.has_error = false;
    }
    if (!out_.gl_status.empty()) s.gl_status = out_.gl_status, out_.gl_status.clear();
}

static std::shared_ptr<run_result> compute(const run_request& q, const gb::attention_fn& attention) {
    auto r = std::make_shared<run_result>();
    r->model = q.model;
    r->prompt = q.prompt;
    r->bos = q.bos;
    r->ablation = q.ablation;
    const gb::model& m = *q.model;
    std::vector<int> ids = gb::encode_prompt(m.tok, q.prompt, q.bos);
    if (ids.empty()) throw gb::error("empty prompt: type some text (or tick \"prepend BOS\")");
    if ((int)ids.size() > m.config.n_ctx) { // keep the end: the next-token prediction depends on it
        r->notice = "prompt truncated to its last " + std::to_string(m.config.n_ctx) + " of " + std::to_string(ids.size()) +
                    " tokens (the model's context)";
        ids.erase(ids.begin(), ids.end() - m.config.n_ctx);
    }
    gb::forward_options fo;
    fo.attention = attention;
    // patterns for the grid and the head view; z, MLP outputs and the whole residual stream for the logit lens
    // and the attribution (all within the capture budget, which leaves the largest far layers out first)
    fo.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    fo.keep.resid_stream = true;
    fo.keep.budget_bytes = q.budget_bytes;
    fo.keep.focus_layer = q.focus_layer;
    gb::run_forward(r->cap, m, ids, q.ablation, fo);
    if (!r->cap.budget_note.empty())
        r->notice += std::string(r->notice.empty() ? "" : "; ") + r->cap.budget_note + ": select a head to see its layer";
    const int V = m.config.vocab_size;
    gb::softmax_probs(r->probs, r->cap.last_logits(), V);
    std::vector<float> base_logits(r->cap.last_logits(), r->cap.last_logits() + V);
    if (q.ablation.any()) {
        gb::record base;
        gb::forward_options opt;
        opt.keep.points = 0;
        gb::run_forward(base, m, ids, {}, opt);
        gb::softmax_probs(r->base_probs, base.last_logits(), V);
        base_logits.assign(base.last_logits(), base.last_logits() + V);
        r->base_resid_norm = base.resid_norm; // the Residual panel's ghost line
    } else {
        r->base_probs = r->probs;
    }
    r->kl = gb::kl_divergence(base_logits.data(), r->cap.last_logits(), V);
    r->top = gb::top_k_probs(r->cap.last_logits(), V, q.top_k);
    r->base_top = gb::top_k_probs(base_logits.data(), V, q.top_k);
    r->scores = gb::score_heads(r->cap);
    return r;
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
        }
        try {
            if (load) {
                progress_ = 0;
                gb::load_options opt;
                opt.progress = [this](float f, const std::string& label) {
                    progress_ = f;
                    std::lock_guard<std::mutex> l(mu_);
                    progress_label_ = label;
                };
                auto m = std::make_shared<const gb::model>(gb::load_model(*load, opt));
                std::lock_guard<std::mutex> l(mu_);
                out_.loaded = m;
                out_.loaded_path = *load;
            } else if (run) {
                gb::attention_fn attention;
                if (run->use_gl) attention = gl_attention_on_this_thread();
                auto r = compute(*run, attention);
                {
                    std::lock_guard<std::mutex> l(mu_);
                    r->request_id = next_id_++;
                }
                auto px = make_heat_pixels(*r, run->scale);
                std::lock_guard<std::mutex> l(mu_);
                out_.result = r;
                out_.result_pixels = px;
            } else if (colour) {
                auto px = make_heat_pixels(*colour->result, colour->scale);
                std::lock_guard<std::mutex> l(mu_);
                out_.pixels = px;
            } else if (gen) {
                const gb::model& m = *gen->model;
                std::vector<int> ids = gb::encode_prompt(m.tok, gen->prompt, gen->bos);
                if (ids.empty()) throw gb::error("empty prompt: nothing to continue");
                int room = m.config.n_ctx - (int)ids.size();
                if (room <= 0) throw gb::error("prompt fills the model's context: no room to generate");
                gb::generation g = gb::generate(m, ids, std::min(gen->n_tokens, room), gen->sampling, gen->ablation);
                auto r = std::make_shared<generation_result>();
                r->prompt = gen->prompt;
                r->text = gb::utf8_sanitize(gb::decode(m.tok, g.ids));
                r->n_tokens = (int)g.ids.size();
                r->ms = g.ms;
                r->hit_eos = g.hit_eos;
                std::lock_guard<std::mutex> l(mu_);
                out_.generated = r;
            }
        } catch (const std::exception& e) {
            std::lock_guard<std::mutex> l(mu_);
            out_.error = (load ? "cannot load model: " : "") + std::string(e.what());
            out_.has_error = true;
            if (load) out_.load_failed = true;
        }
    }
}

} // namespace gbui
