// "Break it": one prompt run with each ablation in turn (no attention, no layer norm, no residual, each layer's
// attention, the heads that matter most), and what changed in this model's own numbers: the prediction, the
// probability the baseline's answer keeps, KL(baseline || ablated) and the size of the last token's vector at
// the end of the stack, with a sentence saying it. The app's Break-it demo and Learn tab and
// `glassbox-cli break-it` show it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "run/ablation.h"

namespace gb {

enum break_kind { BREAK_NO_ATTENTION, BREAK_NO_LAYERNORM, BREAK_NO_RESIDUAL, BREAK_LAYER_ATTENTION, BREAK_HEAD };
const char* break_kind_name(break_kind k); // "no_attention", "no_layernorm", "no_residual", "layer_attention", "head"

struct break_row {
    break_kind kind = BREAK_NO_ATTENTION;
    int layer = -1, head = -1;     // BREAK_LAYER_ATTENTION: its layer; BREAK_HEAD: the head; -1 otherwise
    ablation ab;                   // what this row removes (run_forward's ablation)
    std::string label;             // "no residual (all layers)", "no attention in layer 2", "head 1.3"
    int top_id = 0;                // the ablated run's most probable next token
    float top_prob = 0;            // its probability
    float base_top_prob = 0;       // the probability the baseline's top-1 keeps under the ablation
    double kl = 0;                 // KL(baseline || ablated) of the next-token distributions, nats
    float resid_norm = 0;          // ‖x‖ of the last token at the end of the stack (resid_norm[2L][T-1]), ablated
    std::string explanation;       // one sentence built from the numbers above
};

struct break_result {
    std::vector<int> tokens;       // [T] the prompt
    int base_top_id = 0;           // the baseline's (nothing ablated) most probable next token
    float base_top_prob = 0;
    float base_resid_norm = 0;     // ‖x‖ of the last token at the end of the stack, baseline
    // whole-model ablations (attention, layer norm, residual), then each layer's attention (layer 0 first), then
    // the heads whose removal alone moves the distribution most (largest KL first)
    std::vector<break_row> rows;
    int n_layer = 0, n_head = 0;
    std::vector<float> head_kl;    // [L][H] KL(baseline || that head removed alone); NaN for heads not scanned
    int heads_scanned = 0;
    std::string note;              // "" when every head was scanned; else which ones were, and why
};

struct break_options {
    int n_heads = 3;               // head rows: the heads with the largest KL
    int max_head_scan = 256;       // at most this many single-head runs; beyond it, the heads of the layers
                                   // whose attention row has the largest KL are scanned, and the note says so
    std::function<void(float)> progress; // fraction of the runs done (may be empty)
    std::function<bool()> cancelled;     // asked before every run and layer: true stops (throws gb::cancelled)
};

// Runs ids as they are, then once per ablation (3 + L + scanned heads + n_heads forward passes). Throws gb::error
// for an empty prompt, one longer than the context or an id outside the vocabulary (one line, saying which).
break_result break_it(const model& m, const std::vector<int>& ids, const break_options& opt = {});

// A prompt for a demonstration, and the answer one expects from a model that has learnt it (" much" after
// "Thank you very").
struct prompt_candidate {
    std::string text, answer;
};
// The candidate this model gets right most confidently (its answer, one token, is the model's top-1; the highest
// such probability wins); when it gets none right, the one whose top-1 is most probable. Ties: the first listed.
// Prompts that cannot run (empty, or longer than the context) are passed over; gb::error when none is left.
int most_confident_prompt(const model& m, const std::vector<prompt_candidate>& candidates, bool bos,
                          const std::function<bool()>& cancelled = {});

} // namespace gb
