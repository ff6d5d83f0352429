// What the requests of the older analyses carry (those computed in analysis_compute.cpp and sent by scheduler.cpp),
// one struct each, as analysis_outputs.h holds their outputs; an analysis with files of its own declares its
// request there (steer_request, compare_request, ...). The row names the type (analysis_entry::request); its
// compute function reads it with request_of (analysis_table.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analysis/break_it.h"
#include "analysis_outputs.h"
#include "app_state.h"
#include "run/generate.h"

namespace gbui {

// The logit lens of `from`, following `target` (-1: each position's top-1); `lens` the one on screen: of the same
// run, only its target is redone.
struct lens_request {
    std::shared_ptr<const run_result> from;
    std::shared_ptr<const lens_output> lens;
    int target = -1;
};

// Direct logit attribution of `from`'s target against contrast (token ids) at the query `position`, and the
// saliency with `steps` integrated-gradients steps (0: grad x input).
struct attribution_request {
    std::shared_ptr<const run_result> from;
    int target = -1, contrast = -1;
    int position = -1;
    int steps = 0;
};

// Learn's walk through `from` for the token at `position`, block `layer`, head `head`.
struct learn_request {
    std::shared_ptr<const run_result> from;
    int position = -1;
    int layer = 0, head = 0;
};

// `from`'s tokens continued at each temperature, with sampling's top-k and seed, gen_tokens each.
struct sampling_request {
    std::shared_ptr<const run_result> from;
    std::vector<float> temperatures;
    gb::sampling sampling;
    int gen_tokens = 30;
};

// The induction test: n random tokens (seeded) repeated once, run through model with ab (and bos).
struct induction_request {
    std::shared_ptr<const gb::model> model;
    gb::ablation ab;
    int n = 50;
    uint64_t seed = 1;
    bool bos = false;
};

// Break it: the prompt (encoded like the main run's, with bos) of model; or, when candidates is not empty, the one
// of them this model gets right most confidently (the demo's first request).
struct break_request {
    std::shared_ptr<const gb::model> model;
    bool bos = false;
    std::string prompt;
    std::vector<gb::prompt_candidate> candidates;
};

// Activation patching (and the circuit, of the same prompts): from's prompt against `corrupt` (encoded like it),
// target and contrast token ids (-1: clean top-1 vs the corrupted run's top-1); fast: attribution patching's
// estimate first.
struct patch_request {
    std::shared_ptr<const run_result> from;
    std::string corrupt;
    int target = -1, contrast = -1;
    bool fast = false;
};

// What the rows without a tab of their own keep (their row's state: state_of), the induction test's and Export's:
// whether the grid shows the test's scores, its random tokens (each repeated once) and seed; the folder Export
// writes into, and its presses (each bumps `asked`: the export row writes the shown run once).
struct induction_inputs {
    bool shown = false;
    int n = 50;
    uint64_t seed = 1;
};
struct export_inputs {
    std::string dir = "glassbox-export";
    int asked = 0;
};

// Export: a snapshot of the state (the shown run, top_k and the outputs, shared and immutable, as they were when
// Export was pressed) and the folder.
struct export_request {
    std::shared_ptr<const app_state> state;
    std::string dir;
};

} // namespace gbui
