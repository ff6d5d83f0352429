// The desktop app's state: what the user asked for (inputs) and the newest complete result (outputs).
// Panels read it and write only the inputs; the worker thread produces results.
#pragma once
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/attribution.h"
#include "compare_view.h"
#include "analysis/break_it.h"
#include "analysis/circuit.h"
#include "analysis/feature_index.h"
#include "analysis/features.h"
#include "analysis/head_scores.h"
#include "analysis/learn.h"
#include "analysis/lens.h"
#include "analysis/patching.h"
#include "analysis/sae_train.h"
#include "analysis/surprisal.h"
#include "analysis/trace.h"
#include "analysis/steer.h"
#include "kernels/gemm.h"
#include "kernels/moe.h"
#include "kernels/softmax.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/live.h"
#include "run/predict.h"

namespace gbui {

struct circuit_patch; // below: "keep only this circuit"

// One feature edit of the Features tab (ablate, clamp, steer) on one of the opened SAEs: applied to the live run
// as the SET intervention core/analysis/features.h makes (recomputed from each run, so it follows the prompt).
struct app_feature_edit {
    std::shared_ptr<const gb::bound_sae> sae;
    gb::feature_edit e;
    bool operator==(const app_feature_edit& o) const {
        return sae == o.sae && e.kind == o.e.kind && e.id == o.e.id && e.value == o.e.value;
    }
};
// "ablate 12 at L2 resid_post", "clamp 7=3.5 at ..."; of a list: joined with ", " ("" when empty)
std::string describe_feature_edit(const app_feature_edit& f);
std::string describe_feature_edits(const std::vector<app_feature_edit>& edits);
// The SET interventions of edits on m's run of ids under ab and the interventions already in iv, one per SAE with
// edits (in the edits' order, each made from a forward that has the earlier ones), appended to iv; their values
// are kept in values, which must outlive iv's use.
void add_feature_interventions(std::vector<gb::intervention>& iv, std::vector<std::vector<float>>& values,
                               const gb::model& m, const std::vector<int>& ids, const gb::ablation& ab,
                               const std::vector<app_feature_edit>& edits);

// One finished run (plus its baseline) for one set of inputs; immutable once published. The records come from
// the worker's live state (core/run/live.h) and are shared with it: a later run reuses their unchanged layers.
struct run_result {
    uint64_t request_id = 0;
    std::string key;                        // run_key() of the request it answers (main compares it with its own)
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    gb::ablation ablation;
    std::shared_ptr<const circuit_patch> circuit; // the kept circuit it ran with (null: none)
    std::vector<app_feature_edit> features; // the Features tab's edits it ran with
    std::shared_ptr<const gb::record> run;  // with ablation: attention [L][H][T][T], z, mlp_out, the residual
                                            // stream [2L+1][T][d] (what lens and attribution read), norms, last logits
    std::shared_ptr<const gb::record> base; // without any ablation (the same record when nothing is ablated)
    const gb::record& cap() const { return *run; }
    // the record the LM head reads: an encoder–decoder's decoder whichever stack is shown, else the run
    const gb::record& lm_record() const { return decoder ? *decoder : *run; }
    int n_prompt = 0;                       // tokens of the prompt; positions n_prompt.. are generated ones
    uint64_t gen_id = 0;                    // the generation they come from (0: none)
    gb::prediction pred;                    // what the model predicts (the session's, core/run/predict.h): the
                                            // distribution with and without the ablation, fill mask, classes and
                                            // rollout, an encoder–decoder's alignment, an MoE model's routing
    std::string image_path;                 // vision models: the image it ran on
    std::string target;                     // encoder–decoders: the target text asked for ("": the translation)
    gb::sampling target_sampling;           // encoder–decoders: how that translation was made (greedy: temperature 0)
    int stack = 1;                          // encoder–decoders: the stack run (the grid) shows: 0 encoder, 1 decoder
    std::shared_ptr<const gb::record> encoder, decoder; // encoder–decoders: both stacks under the ablation; the
                                            // decoder's record holds the cross-attention [L][H][T][S]
    std::string translation;                // encoder–decoders: the target's text after the start token
    std::shared_ptr<const gb::image> view;  // vision models: that image as the model sees it (resized, cropped)
    gb::head_scores scores;                 // [L][H] per score, from the patterns
    gb::live_report report;                 // what the live engine computed for it (the status line)
    double scores_ms = 0, pixels_ms = 0;    // the worker's cost of the scores and the heatmaps' pixels
    size_t budget_bytes = 0;                // the capture budget it ran under (0: none), which the heatmaps' pixels
                                            // and their GL copy keep within too (make_heat_pixels)
    // The surprisal strip under the chips: each token's loss under the ablation, from the record the LM head reads
    // (gb::surprisal_from_stream, made on the worker); null when not offered or not computable, and then
    // surprisal_why says why in one line ("" while there is nothing to say, e.g. one token).
    std::shared_ptr<const gb::surprisal_result> surprisal;
    std::string surprisal_why;
    double surprisal_ms = 0;
    std::string notice;                     // e.g. truncation
};

enum scale_mode { SCALE_LINEAR, SCALE_LOG, SCALE_ROW_MAX };

// Texels of a w x h picture with its mipmaps: level 0, then each level half the size of the one before (at
// least 1), down to 1 x 1. The heatmaps' mipmaps are box-filtered on the worker with their colours, because
// glGenerateMipmap costs ~1-3 ms a head texture and ~45 ms the residual one in Mesa's software renderer (144
// heads: half a second per result), and because rows an edit did not reach can then be reused.
inline int mip_dim(int n, int level) { return std::max(1, n >> level); }
inline int mip_count(int w, int h) {
    int n = 1;
    while ((w >> n) > 0 || (h >> n) > 0) n++;
    return n;
}
// The largest side of a head texture: the Head view is drawn at most a screen wide, and the T x T RGBA of every
// head of a kept layer (with its GL copy) grows with T^2. Within it, the side is also halved until the kept layers'
// pixels and their GL copy fit the capture budget, down to min_heat_dim (make_heat_pixels).
constexpr int max_heat_dim = 2048;
constexpr int min_heat_dim = 256;
inline size_t mip_offset(int w, int h, int level) { // texels before `level`
    size_t o = 0;
    for (int k = 0; k < level; k++) o += (size_t)mip_dim(w, k) * mip_dim(h, k);
    return o;
}

// Colour-mapped pixels of one result's heatmaps, made on the worker thread so that the UI thread only
// uploads them (colouring L*H*T*T cells on the UI thread would cost a visible frame hitch).
struct heat_pixels {
    uint64_t request_id = 0;          // the run_result they were made from
    scale_mode scale = SCALE_LINEAR;
    int n_layer = 0, n_head = 0, n_tokens = 0;
    // The head textures' side: n_tokens, halved until it is at most max_heat_dim and the kept layers' pixels with
    // their GL copy fit the capture budget, or it is min_heat_dim (a longer prompt's levels above it are not kept: at
    // 4,096 tokens a layer of 32 heads is 2.8 GB of RGBA with mipmaps at full size, 0.7 GB at 2048, 0.18 at 1024)
    int dim = 0;
    // [L] one layer's heads [H][head_texels()][4] RGBA: dim x dim and its mipmaps, masked (future) cells grey; null
    // when the layer was not kept. A layer whose pattern did not change is shared with the previous result's pixels.
    std::vector<std::shared_ptr<const uint8_t[]>> layers;
    std::vector<uint8_t> resid;       // [2L+1][T][4] RGBA of the log residual norm, then its mipmaps
    float resid_min = 0, resid_max = 0;
    size_t head_texels() const { return mip_offset(dim, dim, mip_count(dim, dim)); }
    // level 0 ([dim][dim][4]) of one head, its mipmaps after it; nullptr when its layer was not kept
    const uint8_t* head(int layer, int h, int level = 0) const {
        if (layer < 0 || layer >= n_layer || !layers[layer]) return nullptr;
        return layers[layer].get() + ((size_t)h * head_texels() + mip_offset(dim, dim, level)) * 4;
    }
    size_t bytes() const {
        size_t n = resid.size();
        for (const auto& l : layers) n += l ? (size_t)n_head * head_texels() * 4 : 0;
        return n;
    }
};

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

// ---- analyses (lens, attribution, induction test, patching, learn, break it, sampling): on the analysis threads ----

enum analysis_kind { ANALYSIS_LENS, ANALYSIS_ATTRIBUTION, ANALYSIS_INDUCTION, ANALYSIS_PATCHING, ANALYSIS_LEARN,
                     ANALYSIS_BREAK, ANALYSIS_SAMPLING, ANALYSIS_CIRCUIT, ANALYSIS_TRACE, ANALYSIS_STEER_BUILD,
                     ANALYSIS_STEER_COMPARE, ANALYSIS_STEER_SWEEP, ANALYSIS_FEATURES, ANALYSIS_FEATURE_INDEX, ANALYSIS_SAE_TRAIN, ANALYSIS_COUNT };
// The tabs under the attention grid (Experts only for MoE models).
enum analysis_tab { TAB_HEAD, TAB_LENS, TAB_ATTRIBUTION, TAB_PATCHING, TAB_LEARN, TAB_SAMPLING, TAB_EXPERTS, TAB_IMAGE,
                    TAB_CROSS, TAB_CIRCUIT, TAB_STEER, TAB_FEATURES, TAB_COUNT };
const char* tab_name(analysis_tab t);        // "head", "lens", "attribution", "patching", "learn", "sampling", "experts",
                                             // "image", "cross", "circuit" (sessions, scripts)
// The feature a tab shows; the tab bar shows it when the model's kind offers it (core/model/kind.h).
gb::feature tab_feature(analysis_tab t);
bool tab_available(analysis_tab t, const gb::model* m);
// What the attention grid's cells show: the pattern, or one head score (COLOUR_SCORE + gb::head_score_kind).
enum colour_mode { COLOUR_PATTERN, COLOUR_PREV_TOKEN, COLOUR_FIRST_TOKEN, COLOUR_INDUCTION, COLOUR_DUPLICATE_TOKEN,
                   COLOUR_ENTROPY, COLOUR_COUNT };
inline gb::head_score_kind colour_score(colour_mode m) { return (gb::head_score_kind)(m - 1); } // m != PATTERN
const char* colour_name(colour_mode m);      // "pattern", "prev_token", ... (sessions, scripts)
const char* colour_label(colour_mode m);     // "previous-token", ... (the combo)
// One-click demonstrations (demos.h): a prompt, a view and a selection chosen by the loaded model's own scores.
enum demo_kind { DEMO_NONE, DEMO_INDUCTION, DEMO_PREV_TOKEN, DEMO_LENS, DEMO_IOI, DEMO_BREAK, DEMO_TEMPERATURE, DEMO_COUNT };

// Each output keeps the inputs it was computed from (`key`, and the run it read), so a panel can keep showing
// it while a newer one is computed.
struct lens_output {
    std::string key;
    std::shared_ptr<const run_result> from; // the run whose residual stream it read (tokens, model)
    gb::lens_result lens;                   // [2L+1][T][5] top tokens; target_prob [2L+1][T]
    int target = -1;                        // the chosen target token, -1: each position's final top-1
    double ms = 0;
};
struct learn_output {                       // Learn mode: the walk through the model for a token, layer and head
    std::string key;
    std::shared_ptr<const run_result> from;
    gb::learn_walk walk;
    std::vector<gb::param_line> params;
    double ms = 0;
};
struct break_output {                       // "Break it": the prompt run with each ablation in turn
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::string prompt;                     // the text it ran, or the one the demo's first request chose
    bool bos = false;
    bool choice = false;                    // the demo's first request: only the prompt was chosen (no rows)
    gb::break_result res;                   // rows: whole-model ablations, each layer's attention, the top heads
    double ms = 0;
};
// Whether b holds the rows of the prompt as it is now (model, text, BOS): they may be shown and applied.
inline bool break_is_current(const break_output* b, const std::shared_ptr<const gb::model>& m, const std::string& prompt,
                             bool bos) {
    return b && !b->choice && m && b->model == m && b->prompt == prompt && b->bos == bos;
}
using sampling_column = gb::temperature_run; // one temperature of the Sampling tab
struct sampling_output {                    // one prompt continued at several temperatures, one seed and top-k
    std::string key;
    std::shared_ptr<const run_result> from; // the run whose tokens (and ablation) it continued, and whose last
                                            // logits the distributions are of
    int top_k = 0, n_tokens = 0;
    uint64_t seed = 0;
    std::vector<sampling_column> columns;   // [3] in the order of the inputs' temperatures
    double ms = 0;
};
struct attribution_output {
    std::string key;
    std::shared_ptr<const run_result> from;
    gb::attribution attr;                   // heads [L][H], attn_bias [L], mlp [L], embed, bias, total
    bool dla = true;                        // attr holds direct logit attribution (false: the kind offers none; attr
                                            // holds only its target, contrast and position)
    // token saliency: [T] gradient x input (steps 0) or integrated gradients (steps midpoint steps) at the
    // embeddings' residual point of the same difference at the same position (core/analysis/gradients.h), which
    // shades the prompt's chips (an encoder–decoder: the shown stack's, source or target; an image classifier:
    // its positions, shown over the patches); empty where the kind offers no gradients
    std::vector<float> saliency;
    int steps = 0;
    double metric = 0;                      // the difference the saliency is of (the backward's metric)
    double change = 0, gap = 0;             // steps > 0: metric(x) - metric(0), and the completeness gap
    double ms = 0;
};
struct induction_output {                   // the repeated-random-tokens test
    std::string key;
    std::shared_ptr<const gb::model> model;
    int n = 0;                              // random tokens, repeated once: 2n tokens (+ BOS)
    uint64_t seed = 0;
    std::vector<int> ids;                   // [2n (+1)]
    gb::head_scores scores;                 // [L][H] per score, on the test prompt
    double ms = 0;
};
struct patch_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::string corrupt;                           // the corrupted prompt's text
    std::vector<int> clean_ids, corrupt_ids;       // [T] each
    std::vector<gb::token_prob> corrupt_top;       // top-k next tokens of the corrupted prompt
    gb::patch_result res;                          // resid [2L+1][T], heads [L][H], normalized twins
    std::string note;                              // how the default target/contrast were chosen
    double ms = 0;
    // the fast mode: attribution patching's estimate (core/analysis/gradients.h) of the same maps, published first
    // (exact false, res holds the estimate), then kept beside the exact maps (exact true); empty where the kind
    // offers no gradients
    bool exact = true;
    gb::patch_result estimate;
    double estimate_ms = 0;
};
// The Circuit tab: the graph of the Patching tab's prompts, target and contrast (core/analysis/circuit.h), and
// the faithfulness of the circuit of every size the slider offers.
struct circuit_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::vector<int> clean_ids, corrupt_ids;       // [T] each
    gb::ablation ab;                               // in force in its runs
    std::shared_ptr<const gb::circuit_result> res; // nodes, every edge by |score|, the corrupted outputs
    int max_edges = 0;                             // the slider's range: 1 .. max_edges
    std::vector<float> faithfulness;               // [max_edges + 1] of the top-N circuit (NaN when clean == corrupt)
    double ms = 0;
};
// "Keep only this circuit": every node outside the circuit set to its corrupted output in the app's runs (SET
// interventions recomputed live like the ablations), while the prompt and model are the ones it was found on.
struct circuit_patch {
    std::shared_ptr<const gb::circuit_result> res;
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    int n_edges = 0, n_nodes = 0;
    std::vector<gb::intervention> interventions;   // point into res
    std::string describe() const { return "circuit of " + std::to_string(n_edges) + " edges (" + std::to_string(n_nodes) + " nodes)"; }
};
// Causal tracing of the shown run's tokens (the Patching tab's "causal tracing" mode): the subject noised, each
// residual point, attention and MLP output restored in turn.
struct trace_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::string subject;                           // as typed
    std::vector<int> ids;                          // [T] the prompt's tokens
    gb::trace_result res;                          // resid [2L+1][T], attn and mlp [L][T], probabilities
    double ms = 0;
};
// The Steer tab's three analyses: the contrastive vector built from its prompt boxes, the continuations with and
// without it side by side, and the cost sweep over scale x layer on its reference text.
struct steer_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::shared_ptr<const gb::steer_vector> vec; // build: the vector made
    gb::steer_compare compare;                   // compare: baseline and one continuation per scale
    std::vector<std::string> prompt_pieces;      // compare: the prompt's tokens
    gb::steer_sweep_result sweep;                // sweep: KL and loss [scales][layers], a continuation per cell
    double ms = 0;
};
// The Features tab's two analyses: the shown SAE's features of the prompt (under the ablation, before the feature
// edits) with the selected feature's logit effect; and the selected SAE's index of a corpus file (top contexts).
struct features_output {
    std::string key;
    std::shared_ptr<const gb::model> model;
    std::shared_ptr<const gb::bound_sae> sae;
    std::vector<int> ids;                         // [T] the prompt's tokens
    gb::feature_result res;                       // acts [T][d_sae], fvu [T], mse [T], loss_delta
    int feature = -1;                             // the selected feature its logit effect is of (-1: none)
    std::vector<gb::token_effect> promotes, suppresses;
    std::vector<std::vector<gb::token_effect>> chip_tokens; // [feature of a chip] its top 3 promoted tokens
    std::vector<int> chip_ids;                    // the features those are of (every one some position shows)
    std::shared_ptr<const gb::feature_index> index; // the index: of corpus
    std::string corpus, index_note;               // the index: its corpus file, built/read from where
    std::string trained, train_note;              // training: the folder written, and how it went (one line)
    double ms = 0;
};
// The newest request of one kind: running, failed, or done.
struct analysis_status {
    bool busy = false;       // requested or running, not yet published
    float progress = 0;      // of the running one, 0..1
    std::string error;       // one line, when the newest request failed ("" otherwise)
    std::string error_key;   // the inputs that failed
    int cancelled = 0;       // runs cancelled because their inputs changed (since start)
};

// Settings that name a model's layers and heads (from the command line or a session): held until the
// model they are meant for has loaded, then checked against it (apply_settings).
struct pending_settings {
    std::string source;          // "the command line", "session FILE": named in the message when they do not fit
    bool has_ablation = false;
    gb::ablation ablation;
    int sel_layer = -1, sel_head = -1; // -1: not given
    int sel_token = -1;                // -1: not given
    // the Features tab (sessions): the SAEs to open, and the edits on them (by the SAE's path)
    std::vector<std::string> sae_paths;
    struct saved_edit { std::string path; gb::feature_edit e; };
    std::vector<saved_edit> feature_edits;
    int feature_sel = -1;
    bool has_features = false;   // a session said them (replacing the SAEs open)
    // token ids (-1: not given / default): checked against the model's vocabulary
    bool has_tokens = false;
    int lens_target = -1, attr_target = -1, attr_contrast = -1, patch_target = -1, patch_contrast = -1;
    std::string lens_target_text, attr_target_text, attr_contrast_text, patch_target_text, patch_contrast_text; // "" = not saved
};

struct app_state {
    // ---- inputs (owned by the UI thread) ----
    std::string prompt = "The cat sat on the mat. The cat";
    std::string image_path;          // vision models: the PNG or JPEG they classify (the prompt is unused)
    std::string target_text;         // encoder–decoders: the target the decoder reads (the prompt is the source);
                                     // empty: the model's own translation, made as target_sampling says
    gb::sampling target_sampling;    // encoder–decoders: greedy (Translate), or the Continuation panel's temperature,
                                     // top-k and seed (its "Translate, sampled")
    int stack = 1;                   // encoder–decoders: the stack the grid and the head view show (0 encoder, 1 decoder)
    bool cross_average = false;      // the Cross-attention tab: every head and layer averaged (the alignment)
    bool image_rollout = false;      // the Image tab overlays the attention rollout instead of one head
    int saliency_steps = 0;          // the Attribution tab's token saliency: 0 gradient x input; N > 0 integrated
                                     // gradients with N midpoint steps
    int saliency_ig_steps = 32;      // the steps integrated gradients takes when chosen
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
    std::string export_dir = "glassbox-export";
    std::string session_path = "glassbox-session.json";
    bool use_gl = false;             // attention on the GPU (OpenGL compute shaders) when available
    size_t budget_mb = 512;          // capture budget: patterns, z, MLP outputs, residual stream (beyond it,
                                     // layers around the selected one)
    // analyses (token ids; -1 = the default the panel names)
    analysis_tab tab = TAB_HEAD;     // open tab under the attention grid
    colour_mode colour_by = COLOUR_PATTERN;
    int lens_target = -1;            // -1: each position's final top-1
    int attr_target = -1, attr_contrast = -1; // -1: the prediction's top-1 / top-2
    std::string corrupt_prompt;      // patching's second prompt
    bool patch_trace = false;        // the Patching tab shows causal tracing instead of activation patching
    std::string trace_subject;       // causal tracing's subject: words of the prompt
    int patch_target = -1, patch_contrast = -1; // -1: clean top-1 / the corrupted run's top-1
    bool patch_fast = true;          // Patching's fast mode: the attribution-patching estimate first
    bool patch_diff = false;         // beside the exact maps, estimate - exact (normalized)
    int circuit_edges = 20;          // the Circuit tab's N: the top N edges
    std::shared_ptr<const circuit_patch> circuit_kept; // "keep only this circuit" (null: none)
    bool induction_test = false;     // the grid's scores come from the repeated-random-tokens test
    int induction_n = 50;            // random tokens (each repeated once)
    uint64_t induction_seed = 1;
    // the demonstration shown (demos.h): its prompt, and the caption saying what to look at
    demo_kind demo = DEMO_NONE;
    bool demo_waiting = false;       // its run has not arrived yet: the head and caption come with it
    std::string demo_prompt;         // the prompt it set (editing the prompt ends the demo)
    const gb::model* demo_model = nullptr; // the model it was started on (another model ends the demo)
    std::string demo_caption;
    std::string demo_caption_key;    // Temperature: the key of the Sampling output its caption was written from
    // Break it (demo and Learn tab): the row whose ablation is applied, -1 for none (the model restored); the
    // ablation the demo applied (changing it by hand ends the demo); the prompts the demo chooses among while
    // its first result is computed (empty once chosen)
    int break_row = -1;
    int learn_step = 0;              // the Learn tab's step: the walk's (or, without a walk, the picture's parts')
    std::string demo_ablation;
    std::vector<gb::prompt_candidate> demo_candidates;
    // the Sampling tab: the prompt continued at three temperatures from one seed and top-k
    float sample_temps[3] = {0.3f, 0.8f, 1.5f};
    int sample_top_k = 40;           // 0 = every token
    int sample_tokens = 30;
    uint64_t sample_seed = 1;
    // the view: the text scale chosen (1 = 100 %; text_scale.h) and presentation mode (F5: a larger scale, the
    // file and model controls hidden, the demo caption large)
    float ui_scale = 1.0f;
    bool presenting = false;
    // the Steer tab: the contrast prompts (one a line), where each prompt's stream is read, the vector (built or
    // opened), and how it is applied (the ablation's steer holds what is applied: the live run recomputes with it)
    std::string steer_positive = "I love this, it is wonderful.\nWhat a happy day, everyone is smiling.\nThe food was "
                                 "great and we had fun.\nShe laughed with joy.";
    std::string steer_negative = "I hate this, it is terrible.\nWhat a sad day, everyone is crying.\nThe food was bad "
                                 "and we were angry.\nShe cried with pain.";
    int steer_where = 0;             // gb::steer_position: 0 the last token, 1 the mean over positions
    int steer_build = 0;             // bumped by Build: the build request's inputs
    std::shared_ptr<const gb::steer_vector> steer_vec; // the vector the tab shows and applies (null: none yet)
    float steer_scale = 4.0f;        // alpha
    int steer_lo = 1, steer_hi = 1;  // the layers it is added after (those with a direction)
    int steer_from = 0;              // the first position steered
    float steer_scales[3] = {2.0f, 4.0f, 8.0f}; // the side-by-side continuations' alphas
    int steer_tokens = 16;
    float steer_sweep_scales[5] = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f};
    std::string steer_reference = "The cat sat on the mat. The dog ran in the park and the children played with a "
                                  "ball. Once upon a time there was a little girl who lived in a small house near the "
                                  "woods. Every day she walked to school with her friend.";
    std::string steer_path = "steer.gguf"; // Open and Save
    std::string steer_note;          // the last Open/Save/Build outcome, one line
    // the Features tab: the opened SAEs (one per hook point; opened off the UI thread from sae_queue), the one
    // shown, the selected feature, the edits applied to the live run, the corpus its top contexts come from
    std::vector<std::shared_ptr<const gb::bound_sae>> saes;
    std::vector<std::string> sae_queue;                      // paths waiting to be opened (open_sae_file)
    std::vector<pending_settings::saved_edit> sae_queue_edits; // a session's edits, applied when their SAE opens
    int sae_shown = 0;
    std::string sae_path_input = "sae";
    int feature_sel = -1;            // -1: none selected
    float feature_value = 5.0f;      // clamp's value and steer's alpha
    std::vector<app_feature_edit> feature_edits;
    std::string feature_corpus = "README.md";
    int feature_index_build = 0;     // bumped by Index: builds (or reads) the index of feature_corpus
    std::string feature_index_path;  // the corpus Index was pressed for
    // the Features tab's "Train an SAE": the fields, and Train's count (each press trains once with the fields then)
    struct sae_train_fields {
        std::string corpus = "README.md", out = "sae-trained";
        int point = 0; // index into sae_train_points()
        int layer = 0, features = 512, k = 16, steps = 2000;
    } sae_train, sae_train_asked;
    int sae_train_build = 0;
    const gb::model* sae_train_for = nullptr; // the model Train was pressed for (another one does not train)

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
    compare_slot cmp;                              // model B and the comparison with it (compare_view.h)
};

// The result is of the inputs as they are now (model, prompt, BOS, ablation, replayed step): analyses may read it.
bool result_is_current(const app_state& s);
// The kept circuit when it applies to the inputs as they are now (its model, prompt and BOS), else null.
const circuit_patch* circuit_in_force(const app_state& s);
// The SAE the Features tab shows (null: none opened)
const gb::bound_sae* shown_sae(const app_state& s);
// Opens the SAE at path (a SAELens folder, a Gemma Scope params.npz/.safetensors or its folder) for s.model off the
// UI thread (ui's per-frame poll_saes): it joins s.saes (replacing one at the same hook point) and is shown; a file
// that does not fit sets s.error in one line and leaves the SAEs as they were.
void open_sae_file(app_state& s, const std::string& path);
// The points the Features tab trains SAEs on (s.sae_train.point indexes it).
const std::vector<gb::hook_point>& sae_train_points();
// Train: checks s.sae_train against the model (one error line in s.error, false) and starts training with it.
bool start_sae_training(app_state& s);
// Sessions: the SAEs' paths and the edits on them; read into p; applied (the SAEs opened again, the edits once
// their SAE has opened) to s
nlohmann::json features_session_json(const app_state& s);
void read_features_session(pending_settings& p, const nlohmann::json& j);
void apply_features_session(app_state& s, const pending_settings& p);
// Whether path is an SAE folder (cfg.json with sae_weights.safetensors, or params.npz / params.safetensors)
bool is_sae_folder(const std::string& path);
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
