// The analysis threads: logit lens, direct logit attribution, the induction test, Learn's walk and the Sampling
// tab's continuations on one thread; activation patching, causal tracing and Break it (seconds on a GPT-2-small-sized model:
// one forward per ablation and head) on another, so that a long one never delays the quick analyses, and
// neither delays the main forward (worker.h). Per kind only the newest request matters: a new
// one replaces a waiting one and stops a running one with other inputs (the core's progress callbacks return
// false); a stopped run publishes nothing, so the panels keep the previous complete result.
#pragma once
#include <any>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "analysis/sae_train.h"
#include "analysis_outputs.h"
#include "graph_analysis.h"
#include "app_state.h"

namespace gbui {

struct analysis_request {
    analysis_kind kind = ANALYSIS_LENS;
    std::string key;                          // the inputs, as the scheduler names them (published with the output)
    std::shared_ptr<const run_result> from;   // lens, attribution, patching: the run they read
    std::shared_ptr<const lens_output> lens;  // lens: the one on screen; of the same run, only its target is redone
    int target = -1, contrast = -1;           // token ids; -1 = the kind's default (lens: each position's top-1;
                                              // patching: clean top-1 vs the corrupted run's top-1)
    int position = -1;                        // attribution: the query position; learn: the token
    int steps = 0;                            // attribution: its saliency's integrated-gradients steps (0: grad x input)
    int layer = 0, head = 0;                  // learn: the block and head walked through
    std::string corrupt;                      // patching, circuit: the corrupted prompt (encoded like the clean one)
    bool fast = false;                        // patching: attribution patching's estimate first (the fast mode)
    std::string subject;                      // causal tracing: the subject, words of the prompt
    // break it: the prompt (encoded like the main run's, with bos) of `model`; or, when candidates is not empty,
    // the one of them this model gets right most confidently (the demo's first request)
    std::string prompt;
    std::vector<gb::prompt_candidate> candidates;
    // sampling: `from`'s tokens continued at each temperature, with sampling's top-k and seed, gen_tokens each
    std::vector<float> temperatures;
    gb::sampling sampling;
    int gen_tokens = 30;
    // the induction test: n random tokens repeated once, run through model with ab
    std::shared_ptr<const gb::model> model;
    gb::ablation ab;
    int n = 50;
    uint64_t seed = 1;
    bool bos = false;
    // an analysis with files of its own: what its request carries beside the fields above, of the type it names
    // (read with std::any_cast; e.g. steer_analysis.h's steer_request)
    std::any own;
    // features: the prompt's features on `sae` under ab, with feature `target`'s logit effect; the index of `corpus`
    std::shared_ptr<const gb::bound_sae> sae;
    std::string corpus;
    // training an SAE: on `corpus` at point of `layer`, written to out_dir
    gb::sae_train_options train;
    gb::hook_point point = gb::HOOK_RESID_POST;
    std::string out_dir;
    // graph: `from`'s tokens over the transcoder set at `transcoders`, pruned at the thresholds; `graph` the one on
    // screen (of the same run and set, only the pruning and the edits are redone); edits: features held in the
    // replacement model
    std::string transcoders;
    std::vector<gb::graph_edit> edits;
    float node_threshold = 0.8f, edge_threshold = 0.98f;
    std::shared_ptr<const graph_output> graph;
};
using keep_going = std::function<bool(float)>; // progress in [0, 1]; false: stop
class analysis_worker {
public:
    analysis_worker();
    ~analysis_worker();
    // Queues r (replacing a waiting request of its kind); a running one of that kind with another key stops.
    void submit(analysis_request r);
    // Drops the waiting request of kind k and stops the running one (its inputs changed, none to replace them yet).
    void cancel(analysis_kind k);
    // Called once per frame on the UI thread: moves finished work and progress into the state.
    void poll(app_state& s);
    bool idle() const; // nothing waiting, running, or finished but not yet polled
    bool pending(analysis_kind k) const; // the same for one kind
    std::function<void()> wake;          // called when a run finished or failed (the frame loop wakes; set before
                                         // the first submit)

private:
    void loop(int lane); // runs the rows of one lane (analysis_table.h)
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::optional<analysis_request> waiting_[ANALYSIS_COUNT];
    std::string running_key_[ANALYSIS_COUNT];
    bool running_[ANALYSIS_COUNT] = {};
    std::atomic<bool> stop_kind_[ANALYSIS_COUNT];
    std::atomic<float> progress_[ANALYSIS_COUNT];
    int cancelled_[ANALYSIS_COUNT] = {};
    std::shared_ptr<const void> out_[ANALYSIS_COUNT]; // finished, waiting for poll() (the type its row names)
    bool failed_[ANALYSIS_COUNT] = {};
    std::string error_[ANALYSIS_COUNT], error_key_[ANALYSIS_COUNT];
    bool stop_ = false;
    std::thread threads_[3]; // one per lane (analysis_table.h)
};

} // namespace gbui
