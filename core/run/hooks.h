// Named hook points: every intermediate of the forward pass has a name and a layer. One mechanism serves
// reading (hooks, the activation record), overwriting (hooks) and changing (interventions: ablations and
// activation patching) any of them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"

namespace gb {

// In the order the forward reaches them inside a layer. Shapes are for one call of n positions (rows);
// d = d_model, H = heads, KV = key/value heads, dh = head size, ff = MLP width, E = experts (MoE), n_keys =
// positions seen so far. Points are named by these strings in files and sessions, never by their number.
enum hook_point {
    HOOK_RESID_PRE,  // [n][d]       the stream entering the layer (layer 0: the embeddings)
    HOOK_ATTN_IN,    // [n][d]       normed input of attention
    HOOK_Q,          // [n][H*dh]    queries, after RoPE
    HOOK_K,          // [n][KV*dh]   keys, after RoPE
    HOOK_V,          // [n][KV*dh]   values
    HOOK_PATTERN,    // [H][n][n_keys] attention probabilities, 0 above the diagonal
    HOOK_Z,          // [n][H*dh]    per-head attention-weighted values, before W_o
    HOOK_HEAD_OUT,   // [n][H*d]     per-head output: head h's z times its rows of W_o, without W_o's bias
    HOOK_ATTN_OUT,   // [n][d]       attention sublayer output (W_o and its bias applied)
    HOOK_RESID_MID,  // [n][d]       the stream after the attention sublayer
    // encoder–decoders' decoder layers only: the cross-attention sublayer, queries from the stream, keys and values
    // from the encoder's output (S source positions), its output added to the stream before the MLP
    HOOK_CROSS_IN,      // [n][d]     normed input of the cross-attention (what its queries are made from)
    HOOK_CROSS_PATTERN, // [H][n][S]  cross-attention probabilities over the source positions
    HOOK_CROSS_Z,       // [n][H*dh]  per-head weighted source values, before W_o
    HOOK_CROSS_OUT,     // [n][d]     cross-attention sublayer output (W_o and its bias applied)
    HOOK_MLP_IN,     // [n][d]       normed input of the MLP
    HOOK_ROUTER,     // [n][E]       MoE only: each expert's mixing weight (0 for the experts not chosen); "head" = expert
    HOOK_MLP_POST,   // [n][ff]      MLP activation: GELU(x W_up + b), or silu(x W_gate) * (x W_up); dense MLPs only
    HOOK_MLP_OUT,    // [n][d]       MLP sublayer output
    HOOK_RESID_POST, // [n][d]       the stream after the MLP sublayer
    HOOK_FINAL_NORM, // [n_out][d]   final norm's output, for the positions that get logits (layer = n_layer)
    HOOK_LOGITS,     // [n_out][V]   (layer = n_layer)
    HOOK_COUNT
};

// "resid_pre", "attn_in", ... (the names above in lower case, as the CLI and the .npy files spell them).
const char* hook_name(hook_point p);
// The point named name; throws gb::error listing the valid names.
hook_point parse_hook_point(const std::string& name);
// Points that exist once, after the last layer (their layer is n_layer).
inline bool hook_is_final(hook_point p) { return p == HOOK_FINAL_NORM || p == HOOK_LOGITS; }
// Attention probabilities, laid out [H][n][keys] (a block of n rows per head): the self-attention's pattern
// (keys: positions seen so far) and the cross-attention's (keys: the S source positions).
inline bool hook_is_pattern(hook_point p) { return p == HOOK_PATTERN || p == HOOK_CROSS_PATTERN; }
// Points made of one slice per head (q, k, v: KV heads for k and v; pattern, z, head_out and the cross-attention's
// pattern and z: query heads; router: one "head" per expert, one float wide).
inline bool hook_has_heads(hook_point p) {
    return p == HOOK_Q || p == HOOK_K || p == HOOK_V || hook_is_pattern(p) || p == HOOK_Z || p == HOOK_HEAD_OUT ||
           p == HOOK_ROUTER || p == HOOK_CROSS_Z;
}
// Whether the forward of a model with config c passes p: router only in an MoE model, mlp_post only without
// (an MoE layer has no single MLP activation), the cross-attention's points only in an encoder–decoder's decoder. The record never keeps, and no intervention may
// name, a point the model does not have.
bool hook_exists(hook_point p, const model_config& c);
// Floats per row at p (a pattern: n_keys per query row of one head; the cross-attention's keys are the S source
// positions).
int hook_width(hook_point p, const model_config& c, int n_keys);
// Heads at p (KV for k and v, H for the other per-head points, E at the router, 1 elsewhere) and floats of one
// head's slice of a row.
int hook_heads(hook_point p, const model_config& c);
int hook_head_width(hook_point p, const model_config& c, int n_keys);

// One tensor at a hook point during a forward call. Rows are positions pos0 .. pos0 + n - 1.
struct hook_tensor {
    hook_point point;
    int layer;    // 0 .. L-1; n_layer for the final points
    float* data;  // row r at data + r * stride; pattern: head h, query row r at data + (h * n + r) * stride
    int n;        // rows (positions) in this call (pattern: per head)
    int pos0;     // position of row 0 (> 0 when a call continues a cached sequence)
    int width;    // floats per row
    int stride;   // floats between rows
    float* row(int r) const { return data + (size_t)r * stride; }
};

// A callback at one point: it may read the tensor and may overwrite it in place. It returns true when it
// wrote: the forward then redoes what it derived from the tensor inside the same sublayer (a changed pattern
// re-weights the values into z; changed head outputs are summed into attn_out, which otherwise stays W_o's one
// product, so that observing a point never changes the run's numbers). Other points are read by the next op
// as they are.
using hook_fn = std::function<bool(hook_tensor&)>;
struct hook {
    hook_point point;
    int layer = -1; // -1 = every layer
    hook_fn fn;
};

// Declarative changes at a point, applied before any hook there sees the tensor (ablations, patching).
enum intervention_kind {
    INTERVENE_ZERO,          // the covered part of the tensor becomes 0
    INTERVENE_SET,           // the covered part becomes the given values (activation patching)
    INTERVENE_IDENTITY_NORM, // attn_in, mlp_in, final_norm: the norm is the identity (no gain, no bias); at attn_in
                             // and mlp_in every norm of that sublayer is (q/k norms, the output norm of Gemma 2 / OLMo 2)
    INTERVENE_NO_RESIDUAL,   // resid_mid, resid_post: the stream is replaced by the sublayer's output, not added to
    INTERVENE_KNOCKOUT,      // pattern only: query `position` (-1 every query) of `head` (-1 every head) may not read
                             // key `key` (-1 every key): its probability becomes 0 and the row is renormalised over
                             // the keys left, as if the score were -inf before the softmax (attention knockout)
    INTERVENE_ADD,           // resid_pre, resid_mid, resid_post: the given row [d] is added to the covered rows (from
                             // position `from` on, or `position` alone): activation addition (steering, core/run/steer.h)
};
struct intervention {
    intervention_kind kind;
    hook_point point;
    int layer = -1;    // -1 = every layer (final points: ignored)
    int head = -1;     // per-head points: one head's slice of each row; -1 = whole rows
    int position = -1; // one position's row; -1 = every row
    // SET only (ADD: see below), not owned (it must outlive the run): the covered values of one position's row when position >= 0
    // ([slice]), else of every position from 0 ([T][slice]); slice = one head's width with head >= 0, else the
    // row's width. Not allowed at the pattern (use a hook).
    const float* values = nullptr;
    int key = -1;      // KNOCKOUT only: the key position the query may not read; -1 = every key
    // ADD only: values is one row [d] (not owned, as SET's), times scale, added to every covered row; with position
    // -1 the rows at positions >= from (0: every row)
    int from = 0;
    float scale = 1.0f;
};

// Throws gb::error naming the first intervention that does not fit the model (layer, head, kind at that point).
void check_interventions(const std::vector<intervention>& iv, const model_config& c);

// "L3 z", "final_norm": a point and layer for messages and labels.
std::string hook_label(hook_point p, int layer);

} // namespace gb
