// Worker thread: loads models, runs forward passes (current + baseline) and generation; newest request wins.
#include "worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "error.h"
#if __has_include("gl_attention.h")
#include "gl_attention.h"
#define GLASSBOX_HAVE_GL 1
#else
#define GLASSBOX_HAVE_GL 0
#endif

namespace gbui {

std::string visible_token(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == ' ') out += "\u00b7";
        else if (c == '\n') out += "\u21b5";
        else if (c == '\t') out += "\u2192";
        else if (c == '\r') out += "\u240d";
        else out += c;
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

bool worker::idle() const {
    std::lock_guard<std::mutex> l(mu_);
    return !active_ && !load_ && !run_ && !gen_;
}

void worker::poll(app_state& s) {
    std::lock_guard<std::mutex> l(mu_);
    s.busy = active_ == 2 || active_ == 3 || run_.has_value() || gen_.has_value();
    s.loading = active_ == 1 || load_.has_value();
    s.load_progress = progress_;
    s.load_label = progress_label_;
    if (out_.loaded) {
        s.model = out_.loaded;
        s.error.clear();
        s.status = "loaded " + out_.loaded_path;
        auto& r = s.recent_models;
        r.erase(std::remove(r.begin(), r.end(), out_.loaded_path), r.end());
        r.insert(r.begin(), out_.loaded_path);
        if (r.size() > 8) r.resize(8);
        s.ablation = {}; // layer/head indices of the old model mean nothing here
        s.sel_layer = s.sel_head = 0;
        s.sel_token = -1;
        out_.loaded.reset();
    }
    if (out_.result) {
        s.result = out_.result;
        s.result_version++;
        if (!out_.has_error) s.error.clear();
        out_.result.reset();
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

// Mean over query rows of each head's entropy, previous-token and first-token attention: [L][H]
static void head_metrics(run_result& r) {
    const gb::capture& c = r.cap;
    const int L = c.n_layer, H = c.n_head, T = c.n_tokens;
    r.head_entropy.assign((size_t)L * H, 0.0f);
    r.head_prev.assign((size_t)L * H, 0.0f);
    r.head_first.assign((size_t)L * H, 0.0f);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float* p = c.head(l, h);
            if (!p) continue;
            double ent = 0, prev = 0, first = 0;
            for (int i = 0; i < T; i++) {
                for (int j = 0; j <= i; j++)
                    if (p[i * T + j] > 0) ent -= p[i * T + j] * std::log(p[i * T + j]);
                if (i > 0) prev += p[i * T + i - 1];
                first += p[i * T];
            }
            r.head_entropy[l * H + h] = (float)(ent / T);
            r.head_prev[l * H + h] = T > 1 ? (float)(prev / (T - 1)) : 0.0f;
            r.head_first[l * H + h] = (float)(first / T);
        }
}

static std::shared_ptr<run_result> compute(const run_request& q, const gb::attention_fn& attention) {
    auto r = std::make_shared<run_result>();
    r->model = q.model;
    r->prompt = q.prompt;
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
    fo.attention_layers = gb::attention_layers_for_budget(m.config, (int)ids.size(), q.budget_bytes, q.focus_layer);
    if (!fo.attention_layers.empty()) {
        int kept = 0;
        for (uint8_t k : fo.attention_layers) kept += k;
        r->notice += std::string(r->notice.empty() ? "" : "; ") + "attention of " + std::to_string(kept) + " of " +
                     std::to_string(m.config.n_layer) + " layers kept (memory budget " + std::to_string(q.budget_bytes >> 20) +
                     " MB): select a head to see its layer";
    }
    gb::run_forward(r->cap, m, ids, q.ablation, fo);
    const int V = m.config.vocab_size;
    gb::softmax_probs(r->probs, r->cap.last_logits(), V);
    if (q.ablation.any()) {
        gb::capture base;
        gb::forward_options opt;
        opt.capture_attention = false;
        gb::run_forward(base, m, ids, {}, opt);
        gb::softmax_probs(r->base_probs, base.last_logits(), V);
    } else {
        r->base_probs = r->probs;
    }
    double kl = 0;
    for (int v = 0; v < V; v++)
        if (r->base_probs[v] > 0) kl += r->base_probs[v] * (std::log(r->base_probs[v]) - std::log(std::max(r->probs[v], 1e-30f)));
    r->kl = std::max(0.0, kl);
    r->top = gb::top_k_probs(r->cap.last_logits(), V, q.top_k);
    std::vector<float> base_logits(V);
    for (int v = 0; v < V; v++) base_logits[v] = std::log(std::max(r->base_probs[v], 1e-30f));
    r->base_top = gb::top_k_probs(base_logits.data(), V, q.top_k);
    head_metrics(*r);
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
        out_.gl_status = info.ok ? "GPU: " + info.renderer : "no OpenGL 4.3 (" + info.error + "): fallback to the CPU";
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
        {
            std::unique_lock<std::mutex> l(mu_);
            active_ = 0;
            cv_.wait(l, [&] { return stop_ || load_ || run_ || gen_; });
            if (stop_) {
#if GLASSBOX_HAVE_GL
                l.unlock();
                gb::gl_shutdown(); // this thread's context
#endif
                return;
            }
            if (load_) load.swap(load_), active_ = 1;
            else if (run_) run.swap(run_), active_ = 2;
            else gen.swap(gen_), active_ = 3;
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
                std::lock_guard<std::mutex> l(mu_);
                r->request_id = next_id_++;
                out_.result = r;
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
        }
    }
}

} // namespace gbui
