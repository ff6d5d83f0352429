// Features: a sparse autoencoder or transcoder (core/io/sae.h) on a model's hook point. Its feature activations
// at every position, its reconstruction and how good it is (MSE, fraction of variance unexplained, the change in
// next-token loss with the reconstruction spliced in), interventions on single features as SET interventions
// at the SAE's output point (so sessions, live recompute and export take them like any other), and a feature's
// direct effect on the logits.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/sae.h"
#include "model/model.h"
#include "run/ablation.h"
#include "run/hooks.h"
#include "run/record.h"

namespace gb {

// An SAE checked against a model: its points, and what its file said that does not fit (a warning, not an error).
struct bound_sae {
    std::shared_ptr<const sae> s;
    hook_point in = HOOK_RESID_POST, out = HOOK_RESID_POST; // where it reads and writes (the same for an SAE)
    int layer = 0;
    std::shared_ptr<const weight_matrix> enc; // W_enc packed for the process's matmul kernel (AMX or fp32)
    std::vector<std::string> warnings; // e.g. "the SAE was trained on gpt2-small, the model is tiny"
};
// Throws gb::error (one line) when s does not fit m: a point the model does not have, a layer outside it, d_in
// or d_out other than the point's width; a model name that differs is a warning.
bound_sae bind_sae(std::shared_ptr<const sae> s, const model& m);
// read_sae then bind_sae.
bound_sae open_sae(const std::string& path, const model& m);

// f [n][d_sae] from x [n][d_in], as the architecture says (core/io/sae.h); the product on enc (W_enc packed, a
// bound SAE's) with the model's kernel when given, else in plain f32 (training, whose weights change every step).
void sae_encode(std::vector<float>& f, const sae& s, const float* x, int n, const weight_matrix* enc = nullptr);
// x̂ [n][d_out] = f W_dec + b_dec, over f's non-zero entries (f is sparse).
void sae_decode(std::vector<float>& xhat, const sae& s, const float* f, int n);

struct feature_result {
    int n_tokens = 0, d_sae = 0, d_out = 0;
    std::vector<float> acts;  // [T][d_sae] feature activations
    std::vector<float> recon; // [T][d_out] the reconstruction x̂
    std::vector<float> mse;   // [T] mean over d of (x - x̂)², x the output point's activation
    std::vector<float> fvu;   // [T] Σ_d (x - x̂)² / Σ_d (x - x̄)², x̄ the mean of x over the positions
    double fvu_all = 0;       // the same with both sums over every position too
    double loss = 0, loss_spliced = 0; // mean next-token loss over the T - 1 predicted tokens, without and with x̂
    double loss_delta = 0;    // loss_spliced - loss (0 with one token)
};
// A record of tokens under ab that keeps the SAE's points at its layer, with every position's logits.
record sae_record(const model& m, const bound_sae& b, const std::vector<int>& tokens, const ablation& ab = {});
// Everything above for tokens under ab (two forwards: the run, and the run with x̂ set at the output point).
feature_result run_features(const model& m, const bound_sae& b, const std::vector<int>& tokens, const ablation& ab = {});
// The same from a record sae_record made (no loss: loss fields 0).
feature_result features_of(const bound_sae& b, const record& rec);

// One change to one feature, with the reconstruction error kept (x' = x + Σ (f'_i - f_i) W_dec[i]): ablate
// (f'_i = 0), clamp (f'_i = value), steer (x' = x + value · W_dec[i], the decoder row as stored).
enum feature_edit_kind { FEATURE_ABLATE, FEATURE_CLAMP, FEATURE_STEER };
struct feature_edit {
    feature_edit_kind kind = FEATURE_ABLATE;
    int id = 0;
    float value = 0;
};
// "12,40" (ablate), "7=3.5" (clamp, steer) into edits; throws gb::error naming `what` and the bad item.
void parse_feature_edits(std::vector<feature_edit>& edits, feature_edit_kind kind, const std::string& list,
                         const std::string& what, int d_sae);
// The SET intervention at b.out that makes the edits, from rec, a run sae_record made under the same ablation and
// interventions before b.out: [T][d_out] = x_out + the edits' change. Its values point into `values`, which the
// caller keeps while the intervention is used (sessions copy them).
intervention feature_intervention(const bound_sae& b, const record& rec, const std::vector<feature_edit>& edits,
                                  std::vector<float>& values);

// A feature's direct effect on the logits: W_dec[i] times the final norm's gain times W_U, largest and smallest.
struct token_effect {
    int id;
    float effect;
};
void feature_logit_effect(std::vector<token_effect>& promotes, std::vector<token_effect>& suppresses, const model& m,
                          const bound_sae& b, int id, int top);

} // namespace gb
