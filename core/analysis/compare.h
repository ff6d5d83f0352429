// Comparing two models on the same prompt: the same token ids through model A and model B (base vs fine-tuned,
// F16 vs Q4_K of one file, two checkpoints), then where their computations part: the residual streams point by
// point, the next-token distributions, each head's attention pattern, the logit lens of both and each token's
// surprisal.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/surprisal.h"
#include "model/model.h"
#include "run/record.h"

namespace gb {

// Throws the one-line refusal when A and B cannot be compared: a kind that does not read a prompt and predict
// the next token, tokenizers whose vocabularies differ (naming the first id whose token differs), or shapes that
// differ (layers, width, heads, key/value heads, head width). The same shape in another family is allowed.
void check_comparable(const model& a, const model& b);
// Throws naming the first position where A's and B's tokenizers encode the prompt differently ("position 3:
// A reads "ab" (id 17), B reads "a" (id 5)"); same ids: nothing.
void check_same_ids(const model& a, const model& b, const std::vector<int>& ids_a, const std::vector<int>& ids_b);

struct compare_options {
    int lens_position = -1;                  // the position whose logit lens both get (-1: the last)
    std::function<bool()> cancelled;         // asked by the forwards before each layer (throws gb::cancelled)
    bool side_by_side = true;                // run A and B at once, one thread each (false: one after the other)
};

struct compare_result {
    int n_layer = 0, n_head = 0, n_tokens = 0, vocab = 0;
    int n_points = 0;                        // P = 2L+1, numbered as in the lens: 0 embeddings, 2l+1 after the
                                             // attention of l, 2l+2 after the MLP of l
    std::vector<std::string> points;         // [P] "embed", "L0 attn", ...
    std::vector<std::string> pieces;         // [T] the tokens' text
    // residual stream, a = A's and b = B's stream at one point and position
    std::vector<float> cosine;               // [P][T] a.b / (|a| |b|) (1 when both are zero, 0 when one is)
    std::vector<float> rel_diff;             // [P][T] |a - b| / |a| (0 when both are zero; inf when only a is)
    // next-token distributions at every position (position t predicts token t + 1)
    std::vector<double> kl;                  // [T] KL(A || B) in nats
    std::vector<int> top_a, top_b;           // [T] each model's top-1
    std::vector<uint8_t> top_agree;          // [T] 1 when the top-1s agree
    // attention: per head, the Jensen–Shannon divergence (nats, in [0, ln 2]) between A's and B's pattern rows,
    // averaged over the T query rows (a row's keys: those its query sees)
    std::vector<float> head_js;              // [L][H]
    // the logit lens of both at lens_position: each point's top-1 and its probability
    int lens_position = 0;
    std::vector<int> lens_top_a, lens_top_b;      // [P]
    std::vector<float> lens_prob_a, lens_prob_b;  // [P]
    int first_disagree = -1;                 // the first point whose lens top-1s differ; -1: they agree everywhere
    // each token's surprisal in both, and the difference
    surprisal_result surprisal_a, surprisal_b;
    std::vector<double> surprisal_diff;      // [T] B's nats minus A's (NaN at t = 0)
    // summaries
    std::vector<float> point_mean_cos, point_mean_rel; // [P] over positions
    double mean_kl = 0;                      // over positions
    int top_agree_count = 0;                 // positions whose top-1s agree
    double forward_ms_a = 0, forward_ms_b = 0, analysis_ms = 0; // compare_models: each run with its logits and lens
    bool side_by_side = false;               // compare_models ran A and B at once, one thread each
};

// What each record must keep for compare_records: the residual stream at every point, the patterns, every
// position's logits (the caller runs with all_logits).
record_request compare_request();

// The comparison from two records of the same token ids (ra of A, rb of B; each with compare_request's points
// and all logits). Throws naming what a record lacks.
void compare_records(compare_result& out, const record& ra, const model& a, const record& rb, const model& b,
                     const compare_options& opt = {});

// Runs the token ids through both models (after check_comparable) and compares the records; B's record is left in
// *run_b when given (the app shows it). The logits and the lens rows share one LM-head product per model.
void compare_models(compare_result& out, const model& a, const model& b, const std::vector<int>& tokens,
                    const compare_options& opt = {}, record* run_b = nullptr);

// The Jensen–Shannon divergence in nats of two distributions over n outcomes (double).
// Whether compare_models runs A and B at once, one thread each (two threads to give, and the runs alike in cost or
// small), or one after the other on every thread
bool compare_side_by_side(const model& a, const model& b, int n_tokens);
double js_divergence(const float* p, const float* q, int n);

} // namespace gb
