// The analysis threads, one per lane of the analysis table (analysis_table.h): logit lens, direct logit attribution,
// the induction test, Learn's walk and the Sampling tab's continuations on one; activation patching, causal tracing
// and Break it (seconds on a GPT-2-small-sized model: one forward per ablation and head) on another, so that a long
// one never delays the quick analyses; model B's load and the comparison with it on a third. None delays the main
// forward (worker.h). Per kind only the newest request matters: a new
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

#include "app_state.h"

namespace gbui {

// A request: its row, its inputs key, and what the row's analysis reads, as the one struct of the type its row names
// (analysis_entry::request: lens_request, steer_request, ...; each declared with its analysis), read with request_of
// (analysis_table.h).
//
// Not a std::variant of those structs: a variant's declaration lists every alternative, so this header would include
// every analysis's header and name each analysis once more (tools/analysis_names.py counts the files that do). The
// row's type is checked instead, at run time: when the request is scheduled (schedule_analysis) and when it is read.
struct analysis_request {
    analysis_kind kind = ANALYSIS_LENS;
    std::string key;  // the inputs, as the scheduler names them (published with the output)
    std::any inputs;  // of the type the row names
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
