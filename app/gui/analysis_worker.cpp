// The analysis threads (analysis_worker.h): the newest-request-wins queue, dispatch through the analysis table
// (analysis_table.h), and poll.
//
// Sections: the queue and its threads | poll
#include "analysis_worker.h"

#include "analysis_table.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// The queue and its threads
// ---------------------------------------------------------------------------------------------
analysis_worker::analysis_worker() {
    for (int k = 0; k < ANALYSIS_COUNT; k++) stop_kind_[k] = false, progress_[k] = 0;
    for (int lane = 0; lane < 3; lane++) threads_[lane] = std::thread([this, lane] { loop(lane); });
}

analysis_worker::~analysis_worker() {
    {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
        for (auto& s : stop_kind_) s = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void analysis_worker::submit(analysis_request r) {
    std::lock_guard<std::mutex> l(mu_);
    const analysis_kind k = r.kind;
    if (running_[k] && running_key_[k] != r.key && !stop_kind_[k]) stop_kind_[k] = true, cancelled_[k]++;
    waiting_[k] = std::move(r);
    cv_.notify_all();
}

void analysis_worker::cancel(analysis_kind k) {
    std::lock_guard<std::mutex> l(mu_);
    waiting_[k].reset();
    if (running_[k] && !stop_kind_[k]) stop_kind_[k] = true, cancelled_[k]++;
}

bool analysis_worker::idle() const {
    std::lock_guard<std::mutex> l(mu_);
    for (int k = 0; k < ANALYSIS_COUNT; k++)
        if (waiting_[k] || running_[k] || failed_[k]) return false;
    for (const auto& out : out_)
        if (out) return false;
    return true;
}

bool analysis_worker::pending(analysis_kind k) const {
    std::lock_guard<std::mutex> l(mu_);
    return waiting_[k] || running_[k] || failed_[k] || out_[k];
}

void analysis_worker::loop(int lane) {
    for (;;) {
        analysis_request q;
        {
            std::unique_lock<std::mutex> l(mu_);
            auto next = [&] {
                for (int k = 0; k < ANALYSIS_COUNT; k++)
                    if (waiting_[k] && analysis_info((analysis_kind)k).lane == lane) return k;
                return -1;
            };
            cv_.wait(l, [&] { return stop_ || next() >= 0; });
            if (stop_) return;
            const int k = next();
            q = std::move(*waiting_[k]);
            waiting_[k].reset();
            running_[k] = true;
            running_key_[k] = q.key;
            stop_kind_[k] = false;
            progress_[k] = 0;
        }
        const analysis_kind k = q.kind;
        analysis_run run;
        run.go = [this, k](float f) {
            progress_[k] = f;
            return !stop_kind_[k];
        };
        run.stopped = [this, k] { return (bool)stop_kind_[k]; }; // between a run's layers too
        run.early = [this, k](std::shared_ptr<const void> out) { // e.g. the fast mode's estimate, shown at once
            std::lock_guard<std::mutex> l(mu_);
            if (!stop_kind_[k]) out_[k] = std::move(out);
        };
        std::shared_ptr<const void> out;
        std::string error;
        try {
            out = analysis_info(k).compute(q, run);
        } catch (const std::exception& e) {
            error = e.what();
        }
        {
            std::lock_guard<std::mutex> l(mu_);
            running_[k] = false;
            if (stop_kind_[k]) continue; // stopped, or replaced: publish nothing
            failed_[k] = !error.empty();
            if (failed_[k]) error_[k] = error, error_key_[k] = q.key;
            else if (out) out_[k] = std::move(out);
        }
        if (wake) wake();
    }
}

// ---------------------------------------------------------------------------------------------
// poll: finished work into the state (UI thread)
// ---------------------------------------------------------------------------------------------
void analysis_worker::poll(app_state& s) {
    std::lock_guard<std::mutex> l(mu_);
    for (int k = 0; k < ANALYSIS_COUNT; k++) {
        analysis_status& st = s.analysis[k];
        st.busy = waiting_[k].has_value() || running_[k];
        st.progress = running_[k] ? (float)progress_[k] : 0.0f;
        st.cancelled = cancelled_[k];
        if (failed_[k]) {
            st.error = error_[k];
            st.error_key = error_key_[k];
            failed_[k] = false;
        }
    }
    for (int k = 0; k < ANALYSIS_COUNT; k++) {
        if (!out_[k]) continue;
        s.output[k] = std::move(out_[k]);
        s.analysis[k].error.clear();
        s.analysis[k].error_key.clear();
        out_[k].reset();
    }
}

} // namespace gbui
