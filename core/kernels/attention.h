// Attention of one layer: scores, softmax (causal for decoders, over every key for encoders), weighted values.
// The CPU path is the reference every backend (the GL compute shader in shaders/) is tested against.
#pragma once
#include <functional>

namespace gb {

struct attention_args {
    const float* q;      // [n_q][q_stride], head h at column h*d_head
    const float* k;      // [n_past + n_q][kv_stride], kv head g at column g*d_head
    const float* v;      // [n_past + n_q][kv_stride]
    int q_stride, kv_stride;
    int n_q, n_past;     // queries are positions n_past .. n_past+n_q-1; keys 0 .. n_past+n_q-1
    int n_head, n_kv_head, d_head;
    float* probs;        // [H][n_q][n_past+n_q] or nullptr (not kept); 0 for keys a query does not see
    float* out;          // [n_q][out_stride], head h at column h*d_head
    int out_stride;
    float scale = 0;     // scores = scale * q.k; 0 = 1/sqrt(d_head)
    float softcap = 0;   // scores become softcap * tanh(scores / softcap) before the softmax (Gemma 2); 0 = none
    int window = 0;      // query i sees keys j with i - j < window (sliding-window attention); 0 = all before it
    bool causal = true;   // false: every query sees every key 0 .. n_past+n_q-1 (encoders); window must be 0
    int n_keys = 0;       // not causal: the keys when they are not the queries' own positions (cross-attention
                          // reads the S source positions: probs [H][n_q][n_keys], k and v [n_keys] rows); 0 = n_past+n_q
    int probs_head0 = 0, probs_heads = -1; // probs holds heads [probs_head0, probs_head0 + probs_heads) only, the
                          // others are not kept (-1: every head). The CPU path only: a backend is given every head
};
// Cross-attention (an encoder–decoder's decoder): n queries q [n][H*dh] over the S source positions' keys and
// values kv [S][k | v] (each H*dh wide), every source position seen, as many key heads as query heads.
inline attention_args cross_attention_args(const float* q, const float* kv, int n, int S, int H, int dh, float* probs,
                                           float* out) {
    attention_args a;
    a.q = q, a.q_stride = H * dh;
    a.k = kv, a.v = kv + H * dh, a.kv_stride = 2 * H * dh;
    a.n_q = n, a.n_past = 0, a.n_keys = S;
    a.n_head = a.n_kv_head = H, a.d_head = dh;
    a.causal = false;
    a.probs = probs;
    a.out = out, a.out_stride = H * dh;
    return a;
}
// Keys every row's probabilities span: n_keys when given (not causal), else n_past + n_q.
inline int key_count(const attention_args& a) { return !a.causal && a.n_keys > 0 ? a.n_keys : a.n_past + a.n_q; }
// The first key query position i sees.
inline int first_key(const attention_args& a, int i) { return a.window > 0 && i >= a.window ? i - a.window + 1 : 0; }
// One past the last key query position i sees: itself when causal, else every key.
inline int end_key(const attention_args& a, int i) { return a.causal ? i + 1 : key_count(a); }
// Query head h reads key/value head h / (n_head / n_kv_head) (grouped-query attention).
using attention_fn = std::function<void(const attention_args&)>;
// Plain CPU path (the reference every backend is tested against). Throws gb::error for !causal with a window.
void attention_cpu(const attention_args& a);
// out = probs . V only, from the probabilities a.probs already holds (a hook changed them): the same
// weighted-value loops as attention_cpu, q and k unused.
void attention_values_cpu(const attention_args& a);

} // namespace gb
