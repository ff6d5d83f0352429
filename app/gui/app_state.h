// The desktop app's state: what the user asked for (inputs) and the newest complete result (outputs).
// Panels read it and write only the inputs; the worker thread produces results.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "forward.h"
#include "model.h"

namespace gbui {

// One finished forward (plus its baseline) for one set of inputs; immutable once published.
struct run_result {
    uint64_t request_id = 0;
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    gb::ablation ablation;
    gb::capture cap;                        // with ablation: attention [L][H][T][T], norms, last logits
    std::vector<float> probs;               // [V] softmax of cap's last logits
    std::vector<float> base_probs;          // [V] without any ablation (== probs when nothing is ablated)
    double kl = 0;                          // KL(baseline || current) in nats
    std::vector<gb::token_prob> top;        // top-k of probs
    std::vector<gb::token_prob> base_top;   // top-k of base_probs
    std::vector<float> head_entropy;        // [L][H] mean row entropy in nats
    std::vector<float> head_prev;           // [L][H] mean attention to the previous token
    std::vector<float> head_first;          // [L][H] mean attention to the first token
    std::string notice;                     // e.g. truncation
};

struct generation_result {
    uint64_t request_id = 0;
    std::string prompt;
    std::string text; // continuation only
    int n_tokens = 0;
    double ms = 0;
    bool hit_eos = false;
};

enum scale_mode { SCALE_LINEAR, SCALE_LOG, SCALE_ROW_MAX };

struct app_state {
    // ---- inputs (owned by the UI thread) ----
    std::string prompt = "The cat sat on the mat. The cat";
    bool bos = false;
    gb::ablation ablation;
    int sel_layer = 0, sel_head = 0; // head shown in detail
    int sel_token = -1;              // query row highlighted (-1 = last)
    scale_mode scale = SCALE_LINEAR;
    bool resid_log = false;
    int top_k = 10;
    int gen_tokens = 30;
    gb::sampling gen;
    std::string model_path_input;
    std::vector<std::string> recent_models;
    std::string export_dir = "glassbox-export";
    std::string session_path = "glassbox-session.json";
    bool use_gl = false;             // attention on the GPU (OpenGL compute shaders) when available
    size_t budget_mb = 512;          // attention capture budget (beyond it, layers around the selected one)

    // ---- outputs (published by the worker, read by panels) ----
    std::shared_ptr<const gb::model> model;        // current model (previous stays on failed loads)
    std::shared_ptr<const run_result> result;      // newest complete result
    std::shared_ptr<const generation_result> generated;
    std::string error;                             // one line, shown in the window; cleared on success
    std::string status;                            // transient info (saved files, ...)
    bool busy = false;                             // a forward is running
    bool loading = false;
    float load_progress = 0;
    std::string load_label;
    uint64_t result_version = 0;                   // bumps when result changes (textures re-upload)
    bool want_focus_model_path = false;
    std::string gl_status;                         // renderer string, or why GL fell back to the CPU
};

// Text of a token with whitespace made visible: · for space, ↵ for newline, → for tab.
std::string visible_token(const std::string& s);

} // namespace gbui
