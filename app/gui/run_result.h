// One finished run of the app's main inputs (run_result), the edits and the component patch it ran with: what the
// worker publishes and every panel reads (app_state::result).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "analysis/features.h"
#include "analysis/head_scores.h"
#include "analysis/surprisal.h"
#include "model/kind.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/live.h"
#include "run/predict.h"

namespace gbui {

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

// A component patch one tab installs on the app's main run (the Circuit tab's "keep only this circuit": every node
// outside the circuit set to its corrupted output): SET interventions after the ablation's, recomputed live like
// the ablations, in force while the model, prompt and BOS are the ones it was made for (patch_in_force).
struct run_patch {
    std::shared_ptr<const void> owner;     // what the interventions point into, kept alive with them
    std::vector<gb::intervention> interventions;
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    std::string by;                        // the tab that made it ("circuit"): it names the remove button for scripts
    std::string what;                      // one line: "circuit of 20 edges (12 nodes)" (the Ablations panel, print)
    std::string effect;                    // what it does to the runs, one line (the Ablations panel)
};

// One finished run (plus its baseline) for one set of inputs; immutable once published. The records come from
// the worker's live state (core/run/live.h) and are shared with it: a later run reuses their unchanged layers.
struct run_result {
    uint64_t request_id = 0;
    std::string key;                        // run_key() of the request it answers (main compares it with its own)
    std::shared_ptr<const gb::model> model;
    std::string prompt;
    bool bos = false;
    gb::ablation ablation;
    std::shared_ptr<const run_patch> patch; // the component patch it ran with (null: none)
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
    std::vector<float> cross_mean;          // encoder–decoders: [T][S] the decoder's cross-attention averaged over
                                            // every kept head and layer (gb::cross_average; empty: none kept)
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

// What r's model reads and predicts, from the kind table (core/model/kind.h): the front end asks it, not which
// records r happens to hold.
inline const gb::kind_info& run_kind(const run_result& r) { return gb::kind_info_of(r.model->config); }
// An encoder–decoder's run that shows its encoder: the chips are the source's while the LM head reads the target.
inline bool source_shown(const run_result& r) { return run_kind(r).input == gb::INPUT_SOURCE_TARGET && r.stack == 0; }

} // namespace gbui
