// The worker thread: model loading, forward passes and generation off the UI thread.
// Only the newest request of each kind matters; older pending ones are dropped (coalesced).
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "app_state.h"

namespace gbui {

struct run_request {
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    gb::ablation ablation;
    int top_k = 10;
    bool use_gl = false;
    int focus_layer = 0;                  // kept first when the capture budget cannot hold every layer
    size_t budget_bytes = 512u << 20;     // capture budget (patterns, z, MLP outputs, residual stream)
    scale_mode scale = SCALE_LINEAR;      // colour scale of the heatmaps' pixels
};

// Re-colour a result's heatmaps for another scale (no forward pass).
struct colour_request {
    std::shared_ptr<const run_result> result;
    scale_mode scale = SCALE_LINEAR;
};

struct gen_request {
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    gb::ablation ablation;
    int n_tokens = 30;
    gb::sampling sampling;
};

// What the worker hands back; the UI thread applies it to app_state in poll().
struct worker_outbox {
    std::shared_ptr<const gb::model> loaded;        // a newly loaded model
    std::string loaded_path;
    std::shared_ptr<const run_result> result;
    std::shared_ptr<const heat_pixels> result_pixels; // result's heatmaps, published with it
    std::shared_ptr<const heat_pixels> pixels;        // a re-colouring for a scale change
    std::shared_ptr<const generation_result> generated;
    std::string error;                               // newest error, if any
    bool load_failed = false;                        // the error came from loading a model
    bool has_error = false;
    std::string gl_status;
};

class worker {
public:
    worker();
    ~worker();
    void load(const std::string& path);
    void run(run_request r);
    void generate(gen_request r);
    void colour(colour_request r);
    // Called once per frame on the UI thread: moves finished work into the state.
    void poll(app_state& s);
    bool idle() const;

private:
    void loop();
    gb::attention_fn gl_attention_on_this_thread();
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::optional<std::string> load_;
    std::optional<run_request> run_;
    std::optional<gen_request> gen_;
    std::optional<colour_request> colour_;
    worker_outbox out_;
    uint64_t next_id_ = 1;
    bool stop_ = false;
    int active_ = 0; // 1 load, 2 run, 3 generate, 4 colour
    std::atomic<float> progress_{0};
    std::string progress_label_;
    int gl_state_ = 0; // 0 not tried, 1 ready on the worker thread, -1 unavailable
    std::thread thread_;
};

} // namespace gbui
