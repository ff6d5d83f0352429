// Comparing the shown model (A) with a second one (B) in the app: B's slot, the thread that loads B and runs the
// comparison (core/analysis/compare.h) of the shown run's tokens, and what the grid, residual and lens panels
// draw when they show B or "A vs B".
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "analysis/compare.h"
#include "model/model.h"

namespace gbui {

struct app_state;
struct ui_context;

// One comparison: both models on the shown run's tokens; immutable once published.
struct compare_output {
    std::string key;                           // compare_key of the inputs it answers
    std::shared_ptr<const gb::model> a, b;
    std::vector<int> tokens;                   // [T]
    gb::compare_result res;
    std::shared_ptr<const gb::record> run_b;   // B's record (patterns, residual stream): the grid and residual's B
    double ms = 0;
};

// B's slot and the comparison: the views and what the worker published (app_state holds one).
struct compare_slot {
    enum view { VIEW_A, VIEW_B, VIEW_AVB };
    std::shared_ptr<const gb::model> model;    // model B (null: nothing to compare)
    std::string path_input;                    // the Model panel's "model B" box
    view shown = VIEW_A;                       // what the grid, residual and lens panels show
    bool rel = false;                          // A vs B's residual heatmap: |a - b| / |a| (else 1 - cosine)
    std::shared_ptr<const compare_output> out; // newest comparison (may be of older inputs)
    bool loading = false, busy = false;
    std::string asked;                         // the key last sent to the worker
    std::string failed;                        // the key whose comparison failed (its error is shown; it is done)
};

// Loads model B and runs comparisons on one thread; a newer request replaces a waiting one.
class compare_worker {
public:
    compare_worker();
    ~compare_worker();
    void load(const std::string& path, bool keep_stored);
    void compare(const std::string& key, std::shared_ptr<const gb::model> a, std::shared_ptr<const gb::model> b,
                 std::vector<int> tokens);
    void poll(app_state& s); // on the UI thread, once a frame: what finished goes into s
    bool idle() const;
    std::function<void()> wake; // called when something finished (the frame loop wakes)

private:
    struct job {
        bool load = false;
        std::string path, key;
        bool keep_stored = true;
        std::shared_ptr<const gb::model> a, b;
        std::vector<int> tokens;
    };
    void loop();
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::optional<job> load_, compare_;
    bool running_ = false;
    std::atomic<bool> stop_{false};
    std::atomic<bool> newer_{false}; // a comparison was asked for while one runs: that one stops between layers
    // finished, waiting for poll()
    std::shared_ptr<const gb::model> loaded_;
    std::shared_ptr<const compare_output> done_;
    std::string error_, error_key_; // error_key_: the comparison's key ("" for a load)
    bool has_error_ = false;
    std::thread thread_;
};

// The inputs of the comparison the shown run needs ("" when there is none to make).
std::string compare_key(const app_state& s);
// Sends that comparison when it is not the one asked last; true when the shown comparison is of it (or none is
// wanted): a script's `wait` waits for it.
bool schedule_compare(app_state& s, ui_context& ui);
// The comparison of the shown run, when it has arrived (null otherwise).
const compare_output* current_compare(const app_state& s);

// The "A | B | A vs B" switch (only while a model B is loaded), and the Model panel's "B..." button, whose popup
// "Open model B..." takes B's path (and closes B).
void compare_switch(app_state& s, ui_context& ui);
void model_b_button(app_state& s, ui_context& ui);
// The panels' B and "A vs B" views: the head grid (B's patterns, or each head's JS divergence), the residual
// heatmap (B's norms, or cosine / relative difference) with the prompt's surprisal difference, the lens of both.
void compare_grid(app_state& s, ui_context& ui);
void compare_residual(app_state& s, ui_context& ui);
void compare_lens(app_state& s, ui_context& ui);

} // namespace gbui
