// The activation record: what one forward pass keeps for the app, the CLI and the analyses. Which hook points
// it keeps is a request; a memory budget may leave layers out, and the record says what it left out.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "run/hooks.h"

namespace gb {

inline uint32_t hook_bit(hook_point p) { return 1u << p; }

// Storage of one kept tensor, not zeroed when allocated: a run writes every row of what it keeps (or copies it
// from the record it continues), and zeroing 100 MB of patterns first was a visible part of a live append.
template <class T> struct uninit_allocator : std::allocator<T> {
    template <class U> struct rebind { using other = uninit_allocator<U>; };
    uninit_allocator() = default;
    template <class U> uninit_allocator(const uninit_allocator<U>&) {}
    template <class U> void construct(U* p) noexcept { ::new ((void*)p) U; }
    template <class U, class... A> void construct(U* p, A&&... a) { ::new ((void*)p) U(std::forward<A>(a)...); }
};
using tensor_buffer = std::vector<float, uninit_allocator<float>>;

struct record_request {
    // bit p (hook_bit): keep point p at every layer in `layers` (a point the model does not have is not kept:
    // the router's mixing weights, L*T*E floats, are kept by default for MoE models and absent in dense ones).
    // The pattern's bit keeps the cross-attention's pattern too (an encoder–decoder's decoder).
    uint32_t points = hook_bit(HOOK_PATTERN) | hook_bit(HOOK_ROUTER);
    bool resid_stream = false;   // the residual stream at all 2L+1 points (record::resid): resid_pre of layer 0,
                                 // resid_mid and resid_post of every layer
    bool resid_norms = true;     // [2L+1][T] L2 norms of the stream (cheap; computed while the stream is formed)
    bool mlp_pre = false;        // a dense MLP's pre-activations at every layer (record::mlp_pre), which the backward
                                 // would otherwise recompute with one or two products per layer
    std::vector<uint8_t> layers; // [L] per-layer points only at these layers; empty = every layer
    size_t budget_bytes = 0;     // 0 = no limit; else layers far from focus_layer are left out, largest points first
    int focus_layer = 0;
    int focus_head = 0;          // when even one layer's pattern is over the budget, the heads kept include this one
};

// The one pattern layer that keeps only some heads, [head0, head0 + count), when its pattern alone is over the
// budget (record_plan, record, the app's pixels); layer -1: none.
struct part_layer_heads {
    int layer = -1, head0 = 0, count = 0;
    bool operator==(const part_layer_heads& o) const { return layer == o.layer && head0 == o.head0 && count == o.count; }
    int heads(int l, int n_head) const { return l == layer ? count : n_head; } // heads in layer l's buffer
    // head h's place in layer l's buffer, -1 when it is not kept
    int slot(int l, int h) const { return l != layer ? h : h >= head0 && h < head0 + count ? h - head0 : -1; }
};

// Which (point, layer) pairs a run keeps once the budget is applied.
struct record_plan {
    std::vector<uint8_t> keep[HOOK_COUNT]; // point p: [L] (final points: [1]) 1 = kept; never a point the model
                                           // does not have (hook_exists), whatever was asked
    std::string note;  // what the budget left out, e.g. "pattern of 4 of 12 layers kept (memory budget 512 MB)"
    size_t bytes = 0;  // of the kept activations
    // When one layer's pattern alone is over the budget (a long prompt: [H][T][T] is 2.1 GB at 4,096 tokens and 32
    // heads), the one layer kept keeps some heads only.
    part_layer_heads part;
    bool mlp_pre = false; // record_request::mlp_pre, for a model with dense MLPs (not counted in bytes)
    bool any(hook_point p) const;
};
// n_out: positions that get logits (1, or T with all logits); n_source: S, the source positions an
// encoder–decoder's decoder reads (its cross-attention's keys).
record_plan plan_record(const record_request& rq, const model_config& c, int n_tokens, int n_out, int n_source = 0);
// Bytes of one layer's activation at p for T tokens (final points: of their n_out rows).
size_t record_layer_bytes(hook_point p, const model_config& c, int n_tokens, int n_out, int n_source = 0);

struct forward_timing {
    double total_ms = 0;
    double matmul_ms = 0;    // projections, MLP, LM head
    double attention_ms = 0; // scores, softmax, weighted values
    double rest_ms = 0;      // norms, activations, embeddings, hooks, bookkeeping
};

struct record {
    int n_layer = 0, n_head = 0, n_kv_head = 0, d_model = 0, d_head = 0, d_ff = 0;
    int n_expert = 0;                 // E: MoE experts per layer (the router's width), 0 for a dense model
    std::vector<int> window;          // [L] keys each layer's queries see, themselves included (0 = all before them):
                                      // the pattern is 0 before a query's window (sliding-window attention)
    int first_key(int layer, int query) const { // the first key query position `query` sees at `layer`
        const int w = layer < (int)window.size() ? window[layer] : 0;
        return w > 0 && query >= w ? query - w + 1 : 0;
    }
    bool causal = true;               // false (encoders): every query sees every key, the pattern has no masked triangle
    int last_key(int query) const { return causal ? query : n_tokens - 1; } // the last key a query sees
    int n_tokens = 0;                 // T
    int vocab = 0;                    // V
    bool all_logits = false;
    std::vector<int> tokens;          // [T]
    std::vector<std::string> pieces;  // [T] display text of each token
    // point p: [kept layers] one layer's tensor at T, as in hooks.h with n = T. A layer's tensor is shared by
    // records that agree on it: an incremental run (live.h) reuses the layers it did not recompute, and a record
    // handed to the app is never written again.
    std::vector<std::shared_ptr<tensor_buffer>> acts[HOOK_COUNT];
    std::vector<int> slot[HOOK_COUNT];   // point p: [L] (final points: [1]) index into acts[p], -1 = not kept
    std::vector<float> resid_norm;    // [2L+1][T] L2 norm: 0 embed, 2l+1 after attn of l, 2l+2 after mlp of l
    // With record_request::mlp_pre: [L][parts][T][ff] a dense MLP's input products before the activation, parts 1
    // (x W_up + b) or 2 for a gated MLP (x W_up, then x W_gate); empty otherwise
    tensor_buffer mlp_pre;
    int mlp_pre_parts = 0;
    const float* mlp_pre_at(int layer, int part) const {
        return mlp_pre.empty() ? nullptr : mlp_pre.data() + ((size_t)layer * mlp_pre_parts + part) * n_tokens * d_ff;
    }
    std::vector<float> logits;        // [T][V] with all_logits, else [1][V] for the last position; [..][ids] with logit_ids
    std::vector<int> logit_ids;       // when not empty, logits holds only these tokens' logits (forward_options::logit_ids)
    // Encoder–decoders' decoder: the cross-attention reads S source positions (run_seq2seq, core/run/seq2seq.h);
    // its pattern is the point cross_pattern, [H][T][S] per layer
    int n_source = 0;                 // S: source positions (0: no cross-attention)
    std::vector<std::string> source_pieces; // [S] display text of each source token
    const float* cross_head(int layer, int h) const { // [T][S] of one head, or nullptr when its layer was not kept
        const float* p = get(HOOK_CROSS_PATTERN, layer);
        return p ? p + (size_t)h * n_tokens * n_source : nullptr;
    }
    int nonfinite_layer = -1;         // first layer whose output held NaN/Inf, -1 if none
    std::string nonfinite_where;      // "L3 attn", "embed", "logits", ...
    std::string budget_note;          // what the memory budget left out; "" when all that was asked for is here
    // The pattern's layer that keeps some heads only, [part.count][T][T] (record_plan): has_layer says no for it,
    // has_head and head answer for its heads.
    part_layer_heads part;
    forward_timing timing;

    size_t layer_floats(hook_point p) const; // floats of one layer's tensor at p (the pattern: of every head)
    size_t tensor_floats(hook_point p, int layer) const; // floats of the tensor kept at (p, layer): a part layer's fewer
    size_t bytes() const; // of every kept tensor, the MLP's pre-activations and the logits
    bool has(hook_point p, int layer) const;
    const float* get(hook_point p, int layer) const; // nullptr when not kept
    float* get_mut(hook_point p, int layer);          // for the forward that fills this record's own tensors
    std::vector<float> flat(hook_point p) const;      // every kept layer of p, one after another
    // the attention pattern of every head of the layer kept
    bool has_layer(int layer) const { return has(HOOK_PATTERN, layer) && layer != part.layer; }
    bool has_head(int layer, int h) const { return head(layer, h) != nullptr; }
    // [T][T] pattern of one head (query rows, key columns), or nullptr when it was not kept.
    const float* head(int layer, int h) const;
    // [T][d] residual stream at point 0 .. 2L (0 embeddings, 2l+1 after attention of l, 2l+2 after the MLP of l),
    // nullptr when not kept.
    const float* resid(int point) const;
    const float* last_logits() const {
        return &logits[logits.size() - (logit_ids.empty() ? (size_t)vocab : logit_ids.size())];
    }
};

// "embed", "L0 attn", "L0 mlp", ... for the 2L+1 residual points. An encoder–decoder's decoder (cross: its
// record has n_source > 0) says "L0 self-attn", "L0 cross+mlp": its point after the attention is after the masked
// self-attention, and the cross-attention is added before the MLP, between two points.
std::vector<std::string> resid_labels(int n_layer, bool cross = false);
// The hook point and layer of residual point p: (resid_pre, 0), (resid_mid, l) or (resid_post, l).
void resid_point_hook(int point, hook_point& p, int& layer);

} // namespace gb
