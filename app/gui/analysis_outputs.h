// The outputs of the analysis table's rows (analysis_table.h): what each analysis publishes, with the inputs it was
// computed from. The worker keeps one per row; panels read them with output_of.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "analysis/attribution.h"
#include "analysis/break_it.h"
#include "analysis/feature_index.h"
#include "analysis/features.h"
#include "analysis/head_scores.h"
#include "analysis/learn.h"
#include "analysis/lens.h"
#include "analysis/patching.h"
#include "app_state.h"
#include "run/generate.h"

namespace gbui {

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
    gb::patch_result difference;                   // exact with an estimate: res with estimate - exact in its
                                                   // normalized maps (the "estimate - exact" view; made once)
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
// The Model panel's Export: where it wrote, and what ("" when none yet).
struct export_output {
    std::string key;
    std::string dir;
    std::string wrote;                            // ".npy, capture.json, head_scores, lens, ..."
};
} // namespace gbui
