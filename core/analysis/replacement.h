// The frozen replacement model of one prompt (docs/graphs.md "Replacement model"): every MLP output becomes its
// transcoders' reconstruction plus an error, MLP out = Σ a W_dec + b_dec (+ skip) + error; attention patterns and
// every norm's scale (1/std, 1/rms) are frozen at the model's run, feature activations and errors are constants.
// What is left is linear in the writes of the nodes (features, errors, token embeddings), so the direct effect of
// each source on a target's read is one backward of that read through the frozen model, dotted with each write.
//
// Families: causal decoders: pre-norm (GPT-2, Llama and its kin, GPT-NeoX's parallel blocks, MoE layers, whose MLP
// the transcoders replace) and with post-norms on the sublayers' outputs (Gemma 2; OLMo 2, which has no pre-norms):
// there the transcoders read the MLP's input (after its pre-norm, where there is one) and write the MLP's output
// before its post-norm, whose scale is frozen like the others' (or, for sets that say so, such as Gemma Scope 2's,
// after it: the post-norm is then inside what the transcoders replace). Encoders and encoder–decoders are refused.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "io/transcoders.h"
#include "model/model.h"

namespace gb {

// One active feature: (layer, pos, index) and its activation.
struct active_feature {
    int layer = 0, pos = 0, index = 0;
    float act = 0;
};

struct replacement {
    int n_layer = 0, n_tokens = 0, d_model = 0, n_head = 0, n_kv_head = 0, d_head = 0, d_tc = 0;
    bool parallel = false;     // the MLP reads the layer's input, beside attention (GPT-NeoX)
    bool layernorm = true;     // LayerNorm (centres) or RMSNorm
    bool pre_norm = true;      // a norm before each sublayer (all but OLMo 2)
    bool post_norm = false;    // a norm on each sublayer's output before the residual add (Gemma 2, OLMo 2)
    bool input_normed = true;  // the transcoders read mlp_in (after the norm); false: resid_mid
    bool output_normed = false; // post_norm and the transcoders write the MLP's output after its post-norm (Gemma
                                // Scope 2): the MLP's post-norm is then not in the replacement model
    // whether the MLP's post-norm stands after the transcoders' writes (frozen scale s_post_mlp)
    bool mlp_post_norm() const { return post_norm && !output_normed; }
    int first_pos = 0;         // 1 with a BOS: position 0 carries no feature or error node
    std::vector<int> tokens;   // [T]
    std::vector<float> logits; // [V] the model's logits at the last position
    std::vector<float> s_attn, s_mlp; // [L][T] the frozen scales of attention's and the MLP's norm
    std::vector<float> s_final;       // [T] the final norm's
    std::vector<float> s_post_attn, s_post_mlp; // [L][T] post_norm: the frozen scales of the sublayers' output norms
    std::vector<float> pattern;       // [L][H][T][T] frozen attention patterns
    // the backward's matrices, transposed and packed in fp32 (the same kernel for every product, whatever the
    // model's: a read's row does not depend on which reads went before)
    std::vector<weight_matrix> w_vT;  // [L] [KV*dh][d] the value columns of W_qkv, transposed
    std::vector<weight_matrix> w_oT;  // [L] [d][H*dh] W_o transposed
    std::vector<weight_matrix> skip_t; // [L] [d][d] the transcoders' skip transposed (empty without)
    std::vector<float> mlp_input;     // [L][T][d] what the transcoders read
    std::vector<float> error;         // [L][T][d] true MLP out (before a post-norm; after it when output_normed)
                                      // - reconstruction
    std::vector<float> recon;         // [L][T][d] the reconstruction, b_dec and skip included
    std::vector<float> tok_write;     // [T][d] each token's embedding (scaled as the model scales it)
    std::vector<double> unembed_mean; // [d] the unembedding's mean row
    std::vector<active_feature> active; // sorted by (layer, pos, index); none before first_pos
};

// Runs m on tokens and freezes it with t's features. bos: tokens[0] is a BOS (no nodes at position 0).
// Throws gb::error for a family we do not handle or transcoders that do not fit the model (layers, width).
replacement build_replacement(const model& m, const transcoder_set& t, const std::vector<int>& tokens, bool bos);

// A read: a vector at the transcoder input of `layer` (a feature's encoder row) or, with layer = n_layer, at the
// final norm's output (a logit's demeaned unembedding row), at position pos.
struct graph_read {
    int layer = 0, pos = 0;
    const float* vec = nullptr; // [d]
};

// The sources' writes, grouped by where they enter: what read_rows dots the backward with. Source numbering is
// the caller's (src ids): every active feature, error node and token it lists.
struct source_writes {
    int n_src = 0;
    // per (layer k, pos): the writes into MLP output k at pos, as columns of a packed [d][n] matrix, and their ids
    std::vector<weight_matrix> mlp;        // [L][T]
    std::vector<std::vector<int>> mlp_ids; // [L][T]
    std::vector<weight_matrix> embed;      // [T] the token writes (one column each)
    std::vector<std::vector<int>> embed_ids;
};
// feature_src [n_active], error_src [L][T] (-1: no node), token_src [T]: each source's id.
source_writes gather_writes(const model& m, const replacement& r, const transcoder_set& t,
                            const std::vector<int>& feature_src, const std::vector<int>& error_src,
                            const std::vector<int>& token_src, int n_src);

// rows [n][w.n_src] += the direct effect of every source on each read (reads of one layer, n of them), through
// the frozen linear model: the read's vector sent back to the stream, through attention (values and W_o under
// the frozen pattern and scales) and the transcoders' skips, dotted with each write where it enters.
// max_batch bounds the reads sent back together (memory: max_batch * T * d floats, three times). cancelled (may be
// empty) is asked before each batch and at each layer a batch goes down through: true throws gb::cancelled.
void read_rows(float* rows, const model& m, const replacement& r, const source_writes& w,
               const std::vector<graph_read>& reads, int max_batch = 256,
               const std::function<bool()>& cancelled = {});

// Head loadings of the edge from source src to one read: out [L][H + 1], row l the edge split at attention layer
// l into each head's part (columns 0 .. H-1) and the part that bypasses that layer's attention (column H: the
// residual path, a parallel block's skip, and the writes that enter after that attention, such as a cross-layer
// feature's upper ones). Every attention layer below the read has a row, and its parts sum to the edge; the rows of
// the layers at and above the read are zero.
std::vector<double> head_loadings(const model& m, const replacement& r, const source_writes& w, const graph_read& read,
                                  int src);

} // namespace gb
