// Capture export in the CLI's formats (.npy files and JSON), shared by glassbox-cli and the desktop app.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/forward.h"
#include "run/predict.h"
#include "util/npy.h"

namespace gb {

// tokens.npy int32 [T]; logits.npy float32 [T,V] or [1,V] (none for an encoder stack); attention.npy float32
// [L,H,T,T] (layers left out by the capture budget are zero; written layer by layer, never as one L*H*T*T
// buffer); residual_norms.npy float32 [2L+1,T]; an encoder–decoder decoder's cross_attention.npy [L,H,T,S].
// Each name after prefix (but cross_attention.npy: only a decoder has one). Creates dir if needed.
void write_capture_npy(const std::string& dir, const record& cap, const std::string& prefix = "");

// Every hook point the record kept (but the patterns: attention.npy, cross_attention.npy) as <prefix><point>.npy,
// layers first:
// q, z [L,T,H,dh]; k, v [L,T,KV,dh]; head_out [L,T,H,d]; mlp_post [L,T,ff]; router [L,T,E] (MoE);
// an encoder–decoder decoder's cross_z [L,T,H,dh]; the other per-layer points [L,T,d]
// (layers the budget left out are zeros, as in attention.npy); final_norm [n_out,d]; and resid_stream.npy
// [2L+1,T,d] when the whole residual stream was kept. Returns the file names written.
std::vector<std::string> write_record_npy(const std::string& dir, const record& rec, const std::string& prefix = "");

// {"model": {...}, "ablation", "tokens": [{"id","text"}], "top_k": [{"id","text","prob"}] (at the position the
// kind predicts at: prediction_position),
//  "residual_norms": {"labels", "values" [2L+1][T]}, "timing_ms": {...}, "attention_layers_kept": [l, ...],
//  "attention_heads_kept": {"layer", "heads"} (when one layer's pattern alone was over the budget)}
// model_json also says "nonfinite_tensor": the first weight holding NaN/Inf, or null, and for an MoE model
// "experts": {"n_expert", "n_expert_used", "d_ff_expert", "d_ff_shared", "norm_topk"}. capture_json of an MoE
// model adds "routing" (routing_json).
nlohmann::json model_json(const model& m);
// MoE routing as the record kept it: {"n_expert", "experts_per_token": k, "experts": [L][T][..], "weights":
// [L][T][..]}: per layer and token the experts that ran (non-zero weight), largest weight first, and their
// weights (an ablated expert has weight 0: it is left out); a layer the capture budget left out is null.
// null for a dense model.
nlohmann::json routing_json(const record& rec, int k);
nlohmann::json capture_json(const model& m, const record& cap, const ablation& ab, int top_k);
void write_json(const std::string& path, const nlohmann::json& j);
// [{"position", "token" (the piece there), "top": [{"id", "text", "prob"}]}]
nlohmann::json fill_mask_json(const std::vector<fill_slot>& slots, const record& r, const tokenizer& tok);

} // namespace gb
