// The Graph tab's jobs off the UI thread (graph_tasks.h): one thread, newest job first, answers kept by key.
#include "graph_tasks.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "analysis/feature_index.h"
#include "app_state.h"
#include "util/error.h"

namespace gbui {

namespace {

struct job_slot {
    std::function<std::shared_ptr<const void>()> fn;
    graph_job state;
};

// The jobs and their thread, made on first use and stopped (after the job in hand) when the program ends
struct job_runner {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, job_slot> jobs;
    std::deque<std::string> queue; // newest at the front
    int running = 0;
    bool stop = false;
    std::thread th;
    job_runner() { th = std::thread([this] { loop(); }); }
    ~job_runner() {
        {
            std::lock_guard<std::mutex> lock(mu);
            stop = true;
        }
        cv.notify_all();
        th.join();
    }
    void loop() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            cv.wait(lock, [this] { return stop || !queue.empty(); });
            if (stop) return;
            const std::string key = queue.front();
            queue.pop_front();
            auto fn = jobs[key].fn;
            running++;
            lock.unlock();
            graph_job done;
            done.done = true;
            try {
                done.result = fn();
            } catch (const std::exception& e) {
                done.error = e.what();
            }
            lock.lock();
            running--;
            jobs[key].state = std::move(done);
            jobs[key].fn = nullptr; // (what it held: the model, the graph)
        }
    }
};

job_runner& runner() {
    static job_runner r;
    return r;
}

} // namespace

graph_job graph_job_at(const std::string& key, std::function<std::shared_ptr<const void>()> fn) {
    job_runner& r = runner();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.jobs.find(key);
    if (it != r.jobs.end()) return it->second.state;
    if (r.jobs.size() > 2000) // hovers over many edges: forget their finished ones (not a file job's, still to be read)
        for (auto j = r.jobs.begin(); j != r.jobs.end();) {
            const bool hover = j->first.rfind("dash|", 0) == 0 || j->first.rfind("load|", 0) == 0;
            j = hover && j->second.state.done ? r.jobs.erase(j) : std::next(j);
        }
    r.jobs[key].fn = std::move(fn);
    r.queue.push_front(key);
    r.cv.notify_one();
    return {};
}

void graph_job_forget(const std::string& key) {
    job_runner& r = runner();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.jobs.find(key);
    if (it != r.jobs.end() && it->second.state.done) r.jobs.erase(it);
}

bool graph_jobs_idle() {
    job_runner& r = runner();
    std::lock_guard<std::mutex> lock(r.mu);
    return r.queue.empty() && r.running == 0;
}

// ---- dashboards ----

// One layer of a transcoder set as the Features tab's SAE type (a transcoder from mlp_in, or resid_mid, to
// mlp_out), so that its corpus index and logit effect are the Features tab's own code. A cross-layer feature's
// decoder rows are summed: together they are its direct write into the stream.
static gb::bound_sae layer_as_sae(const gb::transcoder_set& t, int layer, const gb::model& m) {
    auto s = std::make_shared<gb::sae>();
    const int d = t.d_model, n = t.d_tc;
    const gb::transcoder_layer& tl = t.layers[layer];
    s->path = t.path + "/layer " + std::to_string(layer), s->format = "transcoders";
    s->arch = t.arch, s->k = t.k, s->transcoder = true, s->layer = layer;
    s->hook_in = t.input_normed ? "mlp_in" : "resid_mid", s->hook_out = "mlp_out";
    s->hook_name = "blocks." + std::to_string(layer) + ".mlp";
    s->d_in = s->d_out = d, s->d_sae = n;
    s->W_enc.resize((size_t)d * n);
    for (int f = 0; f < n; f++)
        for (int i = 0; i < d; i++) s->W_enc[(size_t)i * n + f] = tl.W_enc[(size_t)f * d + i]; // [d_tc][d] -> [d][d_tc]
    s->b_enc = tl.b_enc, s->threshold = tl.threshold, s->b_dec = tl.b_dec;
    s->W_dec.assign((size_t)n * d, 0.0f);
    for (int f = 0; f < n; f++)
        for (int o = layer; o < layer + t.n_out(layer); o++) {
            const float* row = t.dec(layer, f, o);
            for (int j = 0; j < d; j++) s->W_dec[(size_t)f * d + j] += row[j];
        }
    return gb::bind_sae(s, m);
}

struct layer_index {
    gb::bound_sae b;
    std::shared_ptr<const gb::feature_index> ix; // null without a corpus
};

// The layer's SAE and its corpus index, made once per set, layer, model and corpus (on the job thread only)
static std::shared_ptr<const layer_index> index_of(const graph_output& go, int layer, const std::string& corpus) {
    // (the job thread is the only user; never destroyed, as the job in hand may still run while statics are
    // destroyed at exit: ASan saw a use after free when a timed-out script ended the app mid-hover)
    static auto& made = *new std::map<std::string, std::shared_ptr<const layer_index>>;
    const gb::model& m = *go.from->model;
    const std::string key = std::to_string((uintptr_t)&m) + "|" + std::to_string((uintptr_t)go.set.get()) + "|" +
                            std::to_string(layer) + "|" + corpus;
    if (auto it = made.find(key); it != made.end()) return it->second;
    auto li = std::make_shared<layer_index>();
    li->b = layer_as_sae(*go.set, layer, m);
    if (!corpus.empty()) {
        std::ifstream f(corpus, std::ios::binary);
        if (!f) throw gb::error("top contexts: cannot read the corpus " + corpus);
        std::stringstream ss;
        ss << f.rdbuf();
        li->ix = std::make_shared<const gb::feature_index>(
            gb::build_feature_index(m, li->b, ss.str(), go.from->bos, std::min(64, m.config.n_ctx), 8, nullptr));
    }
    if (made.size() > 64) made.clear();
    made[key] = li;
    return li;
}

graph_job dashboard_job(const graph_output& go, int layer, int index, const std::string& corpus) {
    const std::string key = "dash|" + std::to_string((uintptr_t)go.from->model.get()) + "|" +
                            std::to_string((uintptr_t)go.set.get()) + "|" + std::to_string(layer) + "|" +
                            std::to_string(index) + "|" + corpus;
    auto from = go.from;
    auto set = go.set;
    return graph_job_at(key, [from, set, layer, index, corpus] {
        graph_output g; // only what index_of reads
        g.from = from, g.set = set;
        const std::shared_ptr<const layer_index> li = index_of(g, layer, corpus);
        auto d = std::make_shared<graph_dashboard>();
        d->corpus = corpus;
        if (li->ix)
            for (const gb::feature_context& c : li->ix->top[index]) {
                std::string text = gb::context_text(*from->model, *li->ix, c, 10, 3);
                std::replace(text.begin(), text.end(), '\n', ' '); // one line each in the tooltip
                d->contexts.push_back({c.act, text});
            }
        gb::feature_logit_effect(d->promotes, d->suppresses, *from->model, li->b, index, 5);
        return std::static_pointer_cast<const void>(d);
    });
}

graph_job loadings_job(const std::shared_ptr<const graph_output>& go, int target, int source) {
    const std::string key = "load|" + std::to_string((uintptr_t)go->g.get()) + "|" + std::to_string(target) + "|" + std::to_string(source);
    return graph_job_at(key, [go, target, source] {
        auto h = std::make_shared<std::vector<double>>(
            gb::edge_head_loadings(*go->from->model, *go->set, *go->rep, *go->g, target, source));
        return std::static_pointer_cast<const void>(h);
    });
}

} // namespace gbui
