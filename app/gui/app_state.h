// The desktop app's state: what the user asked for (inputs) and the newest complete result (outputs).
// Panels read it and write only the inputs; the worker thread produces results.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/break_it.h"
#include "analysis/features.h"
#include "analysis/head_scores.h"
#include "analysis/surprisal.h"
#include "kernels/gemm.h"
#include "kernels/moe.h"
#include "kernels/softmax.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/live.h"
#include "run/predict.h"
#include "demo_state.h"
#include "run_result.h"
#include "settings.h"

namespace gbui {

struct heat_pixels;   // heat_pixels.h
struct generation_result; // worker.h

enum scale_mode { SCALE_LINEAR, SCALE_LOG, SCALE_ROW_MAX };

// ---- analyses (lens, attribution, induction test, patching, learn, break it, sampling): on the analysis threads ----

// A row of the analysis table (analysis_table.h), by its place. Shared code names the rows it reads by these; a
// row whose analysis lives in files of its own (circuit_analysis.cpp, trace_analysis.cpp, steer_analysis.cpp) has
// no name here, only its place (the gaps keep the table's order, which is the lanes' order of precedence): its
// files find it by name (analysis_id).
enum analysis_kind : int { ANALYSIS_LENS, ANALYSIS_ATTRIBUTION, ANALYSIS_INDUCTION, ANALYSIS_PATCHING, ANALYSIS_LEARN,
                           ANALYSIS_BREAK, ANALYSIS_SAMPLING,
                           // 7-11: the circuit, causal tracing, the Steer tab's three
                           ANALYSIS_FEATURES = ANALYSIS_SAMPLING + 6, ANALYSIS_FEATURE_INDEX, ANALYSIS_SAE_TRAIN,
                           ANALYSIS_GRAPH, ANALYSIS_EXPORT,
                           // 17, 18: the Steer tab's Open and Save; 19, 20: model B's load and the comparison
                           ANALYSIS_COUNT = ANALYSIS_EXPORT + 5 };
// The tabs under the attention grid, in the tab bar's order (Experts only for MoE models); as analysis_kind, a tab
// whose analysis has files of its own is found by name (tab_id).
enum analysis_tab : int { TAB_HEAD, TAB_LENS, TAB_ATTRIBUTION, TAB_PATCHING, TAB_LEARN, TAB_SAMPLING, TAB_EXPERTS,
                          TAB_IMAGE, TAB_CROSS,
                          TAB_FEATURES = TAB_CROSS + 3, // 9, 10: the circuit's, the Steer tab
                          TAB_GRAPH, TAB_COUNT };
const char* tab_name(analysis_tab t);        // "head", "lens", "attribution", "patching", "learn", "sampling", "experts",
                                             // "image", "cross", ... (sessions, scripts)
// The feature a tab shows; the tab bar shows it when the model's kind offers it (core/model/kind.h).
gb::feature tab_feature(analysis_tab t);
bool tab_available(analysis_tab t, const gb::model* m);
// What the attention grid's cells show: the pattern, or one head score (COLOUR_SCORE + gb::head_score_kind).
enum colour_mode { COLOUR_PATTERN, COLOUR_PREV_TOKEN, COLOUR_FIRST_TOKEN, COLOUR_INDUCTION, COLOUR_DUPLICATE_TOKEN,
                   COLOUR_ENTROPY, COLOUR_COUNT };
inline gb::head_score_kind colour_score(colour_mode m) { return (gb::head_score_kind)(m - 1); } // m != PATTERN
const char* colour_name(colour_mode m);      // "pattern", "prev_token", ... (sessions, scripts)
const char* colour_label(colour_mode m);     // "previous-token", ... (the combo)

// The newest request of one kind: running, failed, or done.
struct analysis_status {
    bool busy = false;       // requested or running, not yet published
    float progress = 0;      // of the running one, 0..1
    std::string error;       // one line, when the newest request failed ("" otherwise)
    std::string error_key;   // the inputs that failed
    int cancelled = 0;       // runs cancelled because their inputs changed (since start)
};

struct app_state {
    app_state(); // makes each tab's own inputs and each analysis's own state (analysis_table.cpp)
    // ---- inputs (owned by the UI thread) ----
    std::shared_ptr<void> inputs[TAB_COUNT]; // each tab's own inputs, of the type its row names (inputs_of,
                                             // analysis_table.h); null: the tab keeps none of its own
    std::string prompt = "The cat sat on the mat. The cat";
    std::string image_path;          // vision models: the PNG or JPEG they classify (the prompt is unused)
    std::string target_text;         // encoder–decoders: the target the decoder reads (the prompt is the source);
                                     // empty: the model's own translation, made as target_sampling says
    gb::sampling target_sampling;    // encoder–decoders: greedy (Translate), or the Continuation panel's temperature,
                                     // top-k and seed (its "Translate, sampled")
    int stack = 1;                   // encoder–decoders: the stack the grid and the head view show (0 encoder, 1 decoder)
    bool bos = false;
    gb::ablation ablation;
    int sel_layer = 0, sel_head = 0; // head shown in detail
    int sel_token = -1;              // query row highlighted (-1 = last)
    scale_mode scale = SCALE_LINEAR;
    bool resid_log = false;
    int top_k = 10;
    int gen_tokens = 30;
    gb::sampling gen;
    int gen_step = 0;                // replaying the generation: the run shows the prompt and its first gen_step
                                     // generated tokens (0: the prompt alone); editing the prompt resets it
    bool gen_follow = false;         // gen_step follows a running generation (until the slider is moved)
    std::string model_path_input;
    std::vector<std::string> recent_models;   // "Open recent": most recent first, those that existed at start
    std::string session_path = "glassbox-session.json";
    bool use_gl = false;             // attention on the GPU (OpenGL compute shaders) when available
    size_t budget_mb = 512;          // capture budget: patterns, z, MLP outputs, residual stream (beyond it,
                                     // layers around the selected one)
    analysis_tab tab = TAB_HEAD;     // open tab under the attention grid
    colour_mode colour_by = COLOUR_PATTERN;
    std::shared_ptr<const run_patch> patch; // a tab's component patch on the main run (null: none)
    demo_state demos;                // the demonstration shown and what it keeps (demo_state.h)
    // the view: the text scale chosen (1 = 100 %; text_scale.h) and presentation mode (F5: a larger scale, the
    // file and model controls hidden, the demo caption large)
    float ui_scale = 1.0f;
    bool presenting = false;

    std::optional<pending_settings> pending; // applied when the next model has loaded
    bool selection_pinned = false;           // the selected head was asked for: do not pick a default one
    std::string config_dir;                  // where settings.json lives (settings.h); empty = do not persist
                                             // (screenshot and script runs without --remember, or no usable folder)
    std::string settings_note;               // one line about the settings (malformed file, no folder, the last
                                             // model gone): added once to the status of the next model load

    // ---- outputs (published by the worker, read by panels) ----
    std::shared_ptr<const gb::model> model;        // current model (previous stays on failed loads)
    std::string weights_line;                      // the model panel's "weights: ..." line, made once per model
    gb::matmul_kind kernel = gb::MATMUL_FP32;      // the kernel the model's weights were packed for (matmul_of)
    std::shared_ptr<const run_result> result;      // newest result whose textures are on screen
    std::shared_ptr<const heat_pixels> pixels;     // the pixels the textures show (result's, at some scale)
    std::shared_ptr<const run_result> next_result; // arrived, waiting for its textures to be uploaded
    std::shared_ptr<const heat_pixels> next_pixels;
    std::shared_ptr<const generation_result> generated;
    std::string error;                             // one line, shown in the window; cleared on success
    std::string error_not_of_runs;                 // the last error an SAE's load set: a run's result leaves it shown
    std::string warning;                           // settings that did not fit the model; until the next load
    std::string status;                            // transient info (saved files, ...)
    bool busy = false;                             // a forward is running
    bool generating = false;                       // a generation is queued or running
    bool loading = false;
    float load_progress = 0;
    std::string load_label;
    uint64_t result_version = 0;                   // bumps when result changes (textures re-upload)
    std::string gl_status;                         // renderer string, or why GL fell back to the CPU
    std::shared_ptr<const void> output[ANALYSIS_COUNT]; // the newest complete output of each analysis (may be of
                                                   // older inputs), of the type its row names (output_of,
                                                   // analysis_table.h); null: none yet
    analysis_status analysis[ANALYSIS_COUNT];
    std::string analysis_want[ANALYSIS_COUNT];     // inputs the visible analyses need now ("" = none wanted)
    std::shared_ptr<void> own[ANALYSIS_COUNT];     // what an analysis keeps of its own beyond a tab's inputs (model
                                                   // B), of the type its row names (state_of, analysis_table.h)
};

// The result is of the inputs as they are now (model, prompt, BOS, ablation, replayed step): analyses may read it.
bool result_is_current(const app_state& s);
// s.patch when it applies to the inputs as they are now (its model, prompt and BOS, no replayed step), else null.
const run_patch* patch_in_force(const app_state& s);
// Generated tokens the step slider can replay: those of s.generated when it continues the prompt as it is now
// (same model, text and BOS), else 0.
int replay_steps(const app_state& s);

// Text of a token with whitespace made visible: · for space, ↵ for newline, → for tab; characters the font
// atlas cannot hold (above U+FFFF, e.g. emoji) as "<U+1F642>".
std::string visible_token(const std::string& s);
// s with characters above U+FFFF written as "<U+1F642>" (ImGui 1.86's 16-bit glyph atlas cannot hold them).
std::string display_text(const std::string& s);

// The query token the panels show of a record with n_tokens tokens: the selected one (s.sel_token, within range),
// else an encoder's first mask when the shown result fills one (what the prediction is of), else the last token.
int query_token(const app_state& s, int n_tokens);

// Applies settings meant for s.model: the ablation is checked with gb::check_ablation and the selected head
// against L and H; what does not fit is left at its default and explained in s.warning.
void apply_settings(app_state& s, const pending_settings& p);
// A model has just loaded: applies s.pending (if any), else keeps only the ablations and selection that fit.
void adopt_model(app_state& s, std::shared_ptr<const gb::model> m, const std::string& path);

// A model has loaded: it becomes the last model and the first of the recent ones, in s.recent_models and (when
// s.config_dir is set) in settings.json; a failed write is said once in s.settings_note and ends persisting.
void remember_model(app_state& s, const std::string& path);

} // namespace gbui
