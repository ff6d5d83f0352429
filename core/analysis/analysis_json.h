// The analyses' results as JSON (the CLI's --json files, the app's export) and as NumPy arrays.
// Keys are a contract (docs/cli.md "Output files"); NaN (an undefined score) is written as null.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/attribution.h"
#include "analysis/break_it.h"
#include "analysis/gradients.h"
#include "analysis/head_scores.h"
#include "analysis/lens.h"
#include "analysis/patching.h"
#include "analysis/trace.h"
#include "model/model.h"
#include "run/generate.h"
#include "run/record.h"

namespace gb {

// {"points", "top_ids" [P][T][K], "top_probs" [P][T][K], "target_prob" [P][T], "target_ids" [T], "tokens"}
nlohmann::json lens_json(const lens_result& l, const record& r, const tokenizer& tok);
// {"heads" [L][H], "attn_bias" [L], "mlp" [L], "embed", "bias", "total", "sum", "residual", "position", "target", "contrast"}
nlohmann::json attribution_json(const attribution& a, const tokenizer& tok);
// {"prev_token", "first_token", "induction", "duplicate_token", "entropy": [L][H] each (null where undefined), "tokens"}
nlohmann::json head_scores_json(const head_scores& s, const record& r);
// {"clean", "corrupt", "resid" [2L+1][T], "heads" [L][H], "normalized": {"resid", "heads"}, "points", "target", "contrast", ...}
nlohmann::json patch_json(const patch_result& p, const tokenizer& tok, const std::vector<int>& clean, const std::vector<int>& corrupt);
// {"tokens", "baseline": {"top", "top_prob", "resid_norm"}, "rows": [{"kind", "label", "ablation", "layer", "head",
//  "top", "top_prob", "baseline_top_prob", "kl", "resid_norm", "explanation"}], "head_kl" [L][H], "heads_scanned", "note"}
nlohmann::json break_it_json(const break_result& b, const tokenizer& tok);
// {"prompt", "prompt_ids", "runs": [{"temperature", "generated_ids", "generated_text", "stopped_at_eos",
//  "distribution": [{"id", "text", "prob"}] (the first 50)}], "sampling": {"top_k", "top_p", "seed"}}
nlohmann::json temperatures_json(const std::string& prompt, const std::vector<int>& prompt_ids,
                                 const std::vector<temperature_run>& runs, const sampling& sp, const tokenizer& tok);
// {"metric" (its value), "metric_kind", "target", "contrast", "position", "tokens", "points", "resid_grad" [2L+1][T][d],
//  "grad_x_input" [T], "steps"; with steps > 0 "integrated" [T], "baseline", "completeness_gap"; an encoder–decoder
//  (tokens: the decoder's input) also "source_points", "source_resid_grad" [2Le+1][S][d], "source_grad_x_input"
//  [S] and with steps "source_integrated" [S]}
nlohmann::json saliency_json(const saliency_result& s, const tokenizer& tok, const std::vector<int>& tokens);
// Attribution patching: patch_json's keys and "method": "attribution patching"; with exact (not null) also
// "exact": {"clean", "corrupt", "resid", "heads", "normalized": {"resid", "heads"}} and "error": {"resid",
// "heads"}: {"max", "rms", "correlation"} of the normalized estimate against the normalized exact values.
nlohmann::json atp_json(const patch_result& estimate, const patch_result* exact, const tokenizer& tok,
                        const std::vector<int>& clean, const std::vector<int>& corrupt);

// .npy files in dir (created if needed): lens_top_ids int32 [P,T,K], lens_top_probs, lens_target_prob [P,T];
// attribution_heads float64 [L,H]; head_scores float32 [5,L,H] (order of head_score_kind, NaN where undefined);
// patch_resid [P,T], patch_heads [L,H] and their *_normalized twins.
void write_lens_npy(const std::string& dir, const lens_result& l);
void write_attribution_npy(const std::string& dir, const attribution& a);
void write_head_scores_npy(const std::string& dir, const head_scores& s);
void write_patch_npy(const std::string& dir, const patch_result& p);
// resid_grad float32 [P,T,d], grad_x_input [T], integrated [T] (steps > 0); an encoder–decoder also
// source_resid_grad [Pe,S,d], source_grad_x_input [S], source_integrated [S]
void write_saliency_npy(const std::string& dir, const saliency_result& s);
// atp_resid [P,T], atp_heads [L,H] and their *_normalized twins; with exact, its patch_* files too
void write_atp_npy(const std::string& dir, const patch_result& estimate, const patch_result* exact);

// Causal tracing: clean_prob, corrupt_prob, target, subject (its tokens and span), noise, sigma, embed_std, samples,
// seed, points, tokens, resid [2L+1][T], attn and mlp [L][T] (NaN as null), runs, ms, complete.
nlohmann::json trace_json(const trace_result& r, const tokenizer& tok, const std::vector<int>& tokens, double noise);
// trace_resid.npy [P, T], trace_attn.npy and trace_mlp.npy [L, T] into dir.
void write_trace_npy(const std::string& dir, const trace_result& r);

} // namespace gb
