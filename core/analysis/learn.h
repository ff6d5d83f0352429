// Learn mode's material: a walk along the pipeline (text -> tokens -> embeddings -> a block's norm, Q K V,
// scores, mask, softmax, weighted values, W_o, residual, norm, MLP, residual -> final norm -> unembedding ->
// softmax -> next token), each step with its formula, the loaded model's live shapes and the actual numbers
// of one token at one layer and head; and the parameter count derived by component. The app's Learn panel and
// `glassbox-cli learn` both show it.
#pragma once
#include <string>
#include <vector>

#include "model/model.h"
#include "run/record.h"

namespace gb {

struct learn_step {
    std::string title;         // "Scores"
    std::string formula;       // "s_j = q · k_j / sqrt(d_head)"
    std::string shape;         // "[T, H, d_head] = [7, 8, 32]"
    std::string note;          // what this model does here ("RoPE has rotated q and k", "SwiGLU", ...)
    std::string panel;         // where the app shows it ("Attention heads", "Residual stream", ...)
    std::vector<float> values; // the selected token's vector (its first values; for scores and probabilities
                               // one per key 0..t; for the prediction the top 5)
    std::vector<std::string> labels; // a label per value where they are not dimensions (keys, top tokens)
    int width = 0;             // the vector's full length
    double norm = -1;          // its L2 norm (-1 where it is not a vector of the stream)
};

struct learn_walk {
    int token = 0, layer = 0, head = 0;
    std::vector<std::string> pieces; // [T] each token's text
    std::vector<std::string> merges; // [T] how byte-level BPE built it ("·c + at"), "" for a single byte or
                                     // other tokenizers
    std::vector<learn_step> steps;
};

// What the walk reads from a run: every point of `layer` and the residual stream.
record_request learn_keep(int n_layer, int layer);
// The walk for position `token`, layer and head (of the same model and a run kept with learn_keep()). Throws
// gb::error naming what is out of range or not kept.
learn_walk walk_through(const model& m, const record& r, int token, int layer, int head);

// The parameter count derived: the textbook V·d + 12·L·d², then each component of this model with its formula
// and exact count, and what differs (gated MLP, grouped-query attention, biases, untied head, experts).
struct param_line {
    std::string what, formula;
    int64_t count = 0;
};
std::vector<param_line> param_derivation(const model& m);
// The textbook estimate alone: V·d + 12·L·d², or for an encoder–decoder V·d + 12·L_enc·d² + 16·L_dec·d² (a
// decoder layer's cross-attention adds 4d²).
int64_t textbook_params(const model& m);

} // namespace gb
