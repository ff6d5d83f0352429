// Sparse autoencoders and transcoders as files: SAELens's folder (cfg.json + sae_weights.safetensors) and Gemma
// Scope's params.npz (JumpReLU). Reading checks the files themselves (tensors, shapes, finite weights, the cfg
// options we honour); core/analysis/features.h checks an SAE against a model and runs it.
#pragma once
#include <string>
#include <vector>

namespace gb {

enum sae_arch {
    SAE_RELU,     // SAELens "standard": f = ReLU(pre)
    SAE_TOPK,     // the k largest pre-activations, through ReLU; the rest 0
    SAE_JUMPRELU, // f = pre where pre > threshold (and > 0), else 0
};
const char* sae_arch_name(sae_arch a); // "standard", "topk", "jumprelu"

// pre = (x - b_dec if apply_b_dec_to_input) W_enc + b_enc; x̂ = f W_dec + b_dec. A transcoder reads one point
// (hook_in, e.g. mlp_in) and writes another (hook_out, mlp_out); an SAE reads and writes the same one.
struct sae {
    std::string path;        // the folder or .npz it was read from
    std::string format;      // "saelens" or "gemma-scope"
    sae_arch arch = SAE_RELU;
    int k = 0;               // TopK only
    bool transcoder = false;
    std::string hook_name;   // as the file names it: "blocks.8.hook_resid_pre" (Gemma Scope: made from the path)
    std::string hook_in, hook_out; // our point names (core/run/hooks.h): "resid_pre", "mlp_in", ...
    int layer = 0;
    std::string model_name;  // cfg's model_name ("" when it has none)
    bool apply_b_dec_to_input = false;
    int d_in = 0, d_out = 0, d_sae = 0; // d_out = d_in for an SAE
    std::vector<float> W_enc;     // [d_in][d_sae]
    std::vector<float> b_enc;     // [d_sae]
    std::vector<float> W_dec;     // [d_sae][d_out]: row i is feature i's decoder direction
    std::vector<float> b_dec;     // [d_out]
    std::vector<float> threshold; // [d_sae] JumpReLU only
};

// Our point name and layer for a TransformerLens hook name as SAELens writes it: blocks.L.hook_resid_pre,
// hook_resid_mid, hook_resid_post, hook_attn_out, hook_mlp_out, hook_mlp_in (= resid_mid), ln1.hook_normalized
// (attn_in), ln2.hook_normalized (mlp_in), attn.hook_z (z), mlp.hook_post (mlp_post). Throws gb::error naming
// the hook and the ones we read.
void map_hook_name(const std::string& hook, std::string& point, int& layer);

// A folder with cfg.json (SAELens), a folder with params.npz or params.safetensors, or such a file (Gemma Scope,
// JumpReLU, W_enc, W_dec, b_enc, b_dec, threshold: the hook from a
// cfg.json beside it, else from the path: layer_N and -res- / -mlp- / -att- / transcoders). Throws gb::error, one
// line naming the file: a missing file or tensor, a wrong shape, a non-finite weight, an architecture or a cfg
// option we do not implement (normalize_activations other than none, rescale_acts_by_decoder_norm,
// finetuning_scaling_factor, hook_head_index, another activation function).
sae read_sae(const std::string& path);

// SAELens's folder: cfg.json and sae_weights.safetensors (f32). The tests write their random SAEs with it; the
// trainer its result.
void write_sae_saelens(const std::string& dir, const sae& s);
// Gemma Scope's params.npz (W_enc, W_dec, b_enc, b_dec, threshold) into dir, with no cfg.json; with
// safetensors, params.safetensors instead.
void write_sae_npz(const std::string& dir, const sae& s, bool safetensors = false);

} // namespace gb
