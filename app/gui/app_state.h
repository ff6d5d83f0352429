// The desktop app's state: what the user asked for (inputs) and the newest complete result (outputs).
// Panels read it and write only the inputs; the worker thread produces results.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare.h"
#include "analysis/head_scores.h"
#include "forward.h"
#include "generate.h"
#include "model.h"

namespace gbui {

// One finished forward (plus its baseline) for one set of inputs; immutable once published.
struct run_result {
    uint64_t request_id = 0;
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    gb::ablation ablation;
    gb::record cap;                         // with ablation: attention [L][H][T][T], norms, last logits
    std::vector<float> probs;               // [V] softmax of cap's last logits
    std::vector<float> base_probs;          // [V] without any ablation (== probs when nothing is ablated)
    double kl = 0;                          // KL(baseline || current) in nats
    std::vector<gb::token_prob> top;        // top-k of probs
    std::vector<gb::token_prob> base_top;   // top-k of base_probs
    gb::head_scores scores;                 // [L][H] per score, from the patterns
    std::vector<float> base_resid_norm;     // [2L+1][T] residual norms without ablation (empty when none)
    std::string notice;                     // e.g. truncation
};

enum scale_mode { SCALE_LINEAR, SCALE_LOG, SCALE_ROW_MAX };

// Colour-mapped pixels of one result's heatmaps, made on the worker thread so that the UI thread only
// uploads them (colouring L*H*T*T cells on the UI thread would cost a visible frame hitch).
struct heat_pixels {
    uint64_t request_id = 0;          // the run_result they were made from
    scale_mode scale = SCALE_LINEAR;
    int n_layer = 0, n_head = 0, n_tokens = 0;
    std::vector<int> layer_slot;      // [L] index into heads' first axis, -1 when the layer was not kept
    std::vector<uint8_t> heads;       // [L_kept][H][T][T][4] RGBA, masked (future) cells grey
    std::vector<uint8_t> resid;       // [2L+1][T][4] RGBA of the log residual norm
    float resid_min = 0, resid_max = 0;
    const uint8_t* head(int layer, int h) const {
        if (layer < 0 || layer >= n_layer || layer_slot[layer] < 0) return nullptr;
        return &heads[((size_t)layer_slot[layer] * n_head + h) * n_tokens * n_tokens * 4];
    }
};

struct generation_result {
    uint64_t request_id = 0;
    std::string prompt;
    std::string text; // continuation only
    int n_tokens = 0;
    double ms = 0;
    bool hit_eos = false;
};

// Settings that name a model's layers and heads (from the command line or a session): held until the
// model they are meant for has loaded, then checked against it (apply_settings).
struct pending_settings {
    std::string source;          // "the command line", "session FILE": named in the message when they do not fit
    bool has_ablation = false;
    gb::ablation ablation;
    int sel_layer = -1, sel_head = -1; // -1: not given
    int sel_token = -1;                // -1: not given
};

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

    std::optional<pending_settings> pending; // applied when the next model has loaded
    bool selection_pinned = false;           // the selected head was asked for: do not pick a default one
    std::string config_dir;                  // where recent.txt lives; empty = do not persist (tests, headless)

    // ---- outputs (published by the worker, read by panels) ----
    std::shared_ptr<const gb::model> model;        // current model (previous stays on failed loads)
    std::shared_ptr<const run_result> result;      // newest result whose textures are on screen
    std::shared_ptr<const heat_pixels> pixels;     // the pixels the textures show (result's, at some scale)
    std::shared_ptr<const run_result> next_result; // arrived, waiting for its textures to be uploaded
    std::shared_ptr<const heat_pixels> next_pixels;
    std::shared_ptr<const generation_result> generated;
    std::string error;                             // one line, shown in the window; cleared on success
    std::string warning;                           // settings that did not fit the model; until the next load
    std::string status;                            // transient info (saved files, ...)
    bool busy = false;                             // a forward is running
    bool loading = false;
    float load_progress = 0;
    std::string load_label;
    uint64_t result_version = 0;                   // bumps when result changes (textures re-upload)
    bool want_focus_model_path = false;
    std::string gl_status;                         // renderer string, or why GL fell back to the CPU
};

// Text of a token with whitespace made visible: · for space, ↵ for newline, → for tab; characters the font
// atlas cannot hold (above U+FFFF, e.g. emoji) as "<U+1F642>".
std::string visible_token(const std::string& s);
// s with characters above U+FFFF written as "<U+1F642>" (ImGui 1.86's 16-bit glyph atlas cannot hold them).
std::string display_text(const std::string& s);

// Applies settings meant for s.model: the ablation is checked with gb::check_ablation and the selected head
// against L and H; what does not fit is left at its default and explained in s.warning.
void apply_settings(app_state& s, const pending_settings& p);
// A model has just loaded: applies s.pending (if any), else keeps only the ablations and selection that fit.
void adopt_model(app_state& s, std::shared_ptr<const gb::model> m, const std::string& path);

// Recent models, one path a line, in config_dir/recent.txt (nothing is read or written when config_dir is empty).
std::vector<std::string> read_recent(const std::string& config_dir);
void write_recent(const std::string& config_dir, const std::vector<std::string>& paths);

} // namespace gbui
