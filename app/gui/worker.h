// The worker thread: model loading, forward passes and generation off the UI thread.
// Only the newest request of each kind matters; older pending ones are dropped (coalesced), and a run or
// generation in progress stops between layers when a newer run, generation or load arrives.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "analysis_outputs.h"
#include "app_state.h"
#include "heat_pixels.h"
#include "derived.h"
#include "run/session.h"

namespace gbui {

// A continuation generated through the live engine: each token is appended to the kept run, so the panels can
// show (and the step slider replay) the generated tokens. Published after every few tokens while it runs.
struct generation_result {
    uint64_t request_id = 0;
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    std::vector<int> prompt_ids; // [n] the prompt as encoded for the generation
    std::vector<int> ids;        // generated ids so far
    std::string text;            // continuation only
    int n_tokens = 0;
    double ms = 0;
    bool hit_eos = false;
    bool done = false;           // false while it runs (or when a newer request stopped it)
};

struct run_request {
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    std::string image_path;               // vision models: the image (instead of the prompt)
    std::string target;                   // encoder–decoders: the target text the decoder reads (the prompt is the
                                          // source); empty: the model's own greedy translation
    gb::sampling target_sampling;         // encoder–decoders with an empty target: greedy, or sampled as it says
    int stack = 1;                        // encoder–decoders: the stack the grid shows, 0 encoder, 1 decoder
    bool bos = false;
    gb::ablation ablation;
    int top_k = 10;
    bool use_gl = false;
    int focus_layer = 0;                  // kept first when the capture budget cannot hold every layer
    int focus_head = 0;                   // and its heads near this one when it cannot hold one layer's pattern
    size_t budget_bytes = 512u << 20;     // capture budget (patterns, z, MLP outputs, residual stream)
    scale_mode scale = SCALE_LINEAR;      // colour scale of the heatmaps' pixels
    // Replaying a generation: these ids (the prompt's and the first generated ones) instead of the encoded prompt.
    std::vector<int> ids;                 // empty: encode prompt
    int n_prompt = 0;                     // with ids: how many of them are the prompt's
    uint64_t gen_id = 0;                  // with ids: the generation they come from
    std::shared_ptr<const run_patch> patch; // a tab's component patch in force: its interventions after the ablation's
    std::vector<app_feature_edit> features; // the Features tab's edits: SET interventions after the patch's
};

// "greedy", or the temperature, top-k, top-p and seed a sampled translation is drawn with (part of run keys).
std::string sampling_key(const gb::sampling& sp);

// Names a request's inputs: equal keys ask for equal results. The focus layer counts only when the capture
// leaves layers out (partial), and the focus head's block of head_block heads when one layer's pattern keeps only
// that many (record::part.count; 0: none); the colour scale not at all (a scale change only re-colours).
std::string run_key(const run_request& q, bool partial, int head_block = 0);

// Re-colour a result's heatmaps for another scale (no forward pass).
struct colour_request {
    std::shared_ptr<const run_result> result;
    scale_mode scale = SCALE_LINEAR;
};

// Each generated token is appended through the same live state as a run, with the same ablation; `run` gives
// the prompt and how each step's published result is made.
struct gen_request {
    run_request run;
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
    bool keep_stored = true; // --weights: F16/BF16/quantised weights as stored, or dequantised (set before a load)
    void run(run_request r);
    void generate(gen_request r);
    void colour(colour_request r);
    // Called once per frame on the UI thread: moves finished work into the state.
    void poll(app_state& s);
    bool idle() const;
    bool running() const; // a run or generation is being computed now (scripts: to send a request during one)
    // Called on the worker thread after it hands something to poll() (a result, a model, an error): the UI loop
    // may be asleep waiting for events (glfwPostEmptyEvent wakes it). Set before the first request.
    std::function<void()> wake;
    // Counters for scripts and tests: requests stopped by a newer one, results published.
    uint64_t cancelled() const;
    uint64_t published() const;

private:
    void loop();
    gb::attention_fn gl_attention_on_this_thread();
    // worker thread only
    void run_session(gb::session_result& out, const run_request& q, const std::vector<int>& ids,
                     const gb::attention_fn& attention);
    std::shared_ptr<run_result> finish(const run_request& q, const gb::session_result& out, const std::string& notice,
                                       int n_prompt, std::shared_ptr<const heat_pixels>& pixels);
    void surprisal_strip(run_result& r, const std::string& inputs);
    void publish(std::shared_ptr<const run_result> r, std::shared_ptr<const heat_pixels> px,
                 std::shared_ptr<const generation_result> g = nullptr);
    void generate_now(const gen_request& g, const gb::attention_fn& attention);
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
    std::atomic<bool> newer_{false}; // a run, generation or load arrived since the running request was taken
    uint64_t cancelled_ = 0;         // runs and generations stopped by a newer request (for scripts and tests)
    uint64_t published_ = 0;         // results published
    std::atomic<float> progress_{0};
    std::string progress_label_;
    int gl_state_ = 0; // 0 not tried, 1 ready on the worker thread, -1 unavailable
    // the session's kept runs (worker thread only): of session_model_ with session_gl_'s attention
    gb::session session_;
    std::shared_ptr<const gb::model> session_model_; // held, so that a new model can never reuse its address
    bool session_gl_ = false;
    derived_cache derived_; // the last published result's scores and pixels, for the next one to reuse
    // vision models: the last image read, so that an ablation change does not read and resize it again
    std::string image_key_;                     // model and path it was made for
    std::vector<float> image_pixels_;           // [3][S][S]
    std::shared_ptr<const gb::image> image_view_;
    void read_image(const run_request& q);
    std::thread thread_;
};

} // namespace gbui
