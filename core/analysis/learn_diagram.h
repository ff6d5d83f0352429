// Learn mode's picture: the parts of the loaded model's forward pass in the order it meets them (one layer's
// parts once: every layer repeats them), each with its live shape from the config and the run's token count and
// a short formula for this architecture; and which part each of the walk's steps (learn.h) lights. The app's
// Learn tab draws it; what is drawn where is the app's, what the model does is here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/learn.h"
#include "model/model.h"

namespace gb {

// The parts, in the order of a decoder's forward (an encoder has no mask, a decoder-only model no cross-attention,
// a dense model no router).
enum diagram_part {
    PART_INPUT,       // text -> tokens [T] (vision: the image cut into patches [N, C·P·P])
    PART_EMBED,       // each token's vector, with its position where the model adds one [T, d]
    PART_NORM_ATTN,   // the norm before attention (Pre-LN) [T, d]
    PART_QKV,         // the projections q, k, v [T, H, d_head] (k, v: [T, KV, d_head])
    PART_SCORES,      // q · k / √d_head [H, T, T]
    PART_MASK,        // the causal mask [T, T] (decoders only)
    PART_SOFTMAX,     // the attention pattern [H, T, T]
    PART_MIX,         // each head's weighted sum of values z [T, H, d_head]
    PART_ATTN_OUT,    // the heads concatenated, through W_O [T, d]
    PART_ADD_ATTN,    // the residual add (Post-LN: then the norm) [T, d]
    PART_CROSS,       // encoder–decoders: cross-attention to the encoder's output [H, T, S]
    PART_ADD_CROSS,   // its residual add [T, d]
    PART_NORM_MLP,    // the norm before the MLP (Pre-LN) [T, d]
    PART_ROUTER,      // mixtures of experts: the router's choice [T, E]
    PART_MLP_HIDDEN,  // the MLP's hidden layer [T, d_ff]
    PART_MLP_OUT,     // back to the stream's width [T, d]
    PART_ADD_MLP,     // the residual add (Post-LN: then the norm) [T, d]
    PART_FINAL_NORM,  // the norm after the last layer (a masked-LM head: its transform and norm) [T, d]
    PART_UNEMBED,     // logits [T, V] (vision: the classifier at [CLS] [V])
    PART_PREDICT,     // the softmax over them: the next token, the mask's filler, the class
    PART_COUNT
};
const char* part_name(diagram_part p); // "input", "embed", "norm_attn", ... (scripts, tests)
// Which of the layer's two sublayers a part belongs to: 1 attention (self and cross), 2 MLP, 0 neither.
int part_sublayer(diagram_part p);
inline bool part_in_layer(diagram_part p) { return p >= PART_NORM_ATTN && p <= PART_ADD_MLP; }

struct diagram_box {
    diagram_part part = PART_COUNT;
    std::string label;   // what the box says: "LayerNorm", "Q K V", "softmax", "+"
    std::string title;   // the part in words, for a heading: "norm before attention" (the app names the layer)
    std::vector<std::pair<std::string, int64_t>> dims; // its tensor's shape, outer first: {{"T", 5}, {"d", 768}}
    std::string formula; // the operation, short: "x = E[id] + P[position]"
    std::string note;    // what the architecture does here ("RoPE rotates q and k by the position", ...)
    std::string shape() const; // "[T, d] = [5, 768]"
};

// One stack's forward as boxes. An encoder–decoder's picture has two: the encoder's (left) and the decoder's
// (which the walk follows); its decoder layers' cross-attention reads the encoder's last output.
struct learn_diagram {
    model_kind kind = KIND_DECODER;
    std::string arch;        // "gpt2", "llama", "marian", ...
    int n_layer = 0;         // the layers of the stack the boxes describe (an encoder–decoder: the decoder's)
    int n_tokens = 0;        // T (a vision model: [CLS] and the patches)
    int n_head = 0, n_kv_head = 0;
    int n_expert = 0, n_expert_used = 0; // mixtures of experts
    bool pre_ln = true;      // a norm before each sublayer
    bool post_ln = false;    // the norm after each residual add, on the stream itself (BERT, BART, Marian)
    bool sublayer_norm = false; // a norm on each sublayer's output before its add (Gemma 2, OLMo 2)
    bool parallel = false;   // attention and MLP both read the layer's input; one add (GPT-NeoX, Phi)
    bool causal = true;      // a query sees only keys up to itself
    bool rope = false;       // q and k rotated by the position inside attention
    bool predicts_next = true; // the walk (learn.h) follows this model: its steps light the boxes
    std::vector<diagram_box> boxes; // in the forward's order, the layer's parts once
    // encoder–decoders: the encoder stack, as one column (its input, embedding, one layer's parts, its output)
    int encoder_layers = 0;
    int n_source = 0;        // S, the source's tokens
    std::vector<diagram_box> encoder;
    const diagram_box* find(diagram_part p) const; // nullptr when the model has no such part
};

// The picture of m for a run of n_tokens tokens (n_source: an encoder–decoder's source tokens).
learn_diagram diagram_of(const model& m, int n_tokens, int n_source = 0);
// The part each of the walk's steps lights, in order ([steps]); PART_COUNT for a step it does not know.
std::vector<diagram_part> step_parts(const learn_walk& w);

} // namespace gb
