// Learn mode's walk and parameter derivation (learn.h): formulas from the architecture table, shapes from the
// config, numbers from the run.
#include "analysis/learn.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/ops.h"
#include "kernels/softmax.h"
#include "util/error.h"

namespace gb {

namespace {

std::string dims(std::initializer_list<std::pair<const char*, int64_t>> d) {
    std::string names = "[", values = "[";
    bool first = true;
    for (auto [n, v] : d) {
        names += (first ? "" : ", ") + std::string(n);
        values += (first ? "" : ", ") + std::to_string(v);
        first = false;
    }
    return names + "] = " + values + "]";
}

// A step showing one vector of the token: its first 8 values and its norm
learn_step vector_step(const char* title, std::string formula, std::string shape, const float* x, int width,
                       const char* panel) {
    learn_step s;
    s.title = title, s.formula = std::move(formula), s.shape = std::move(shape), s.panel = panel;
    s.width = width;
    s.values.assign(x, x + std::min(width, 8));
    double sq = 0;
    for (int i = 0; i < width; i++) sq += (double)x[i] * x[i];
    s.norm = std::sqrt(sq);
    return s;
}

const float* need(const record& r, hook_point p, int layer, int row) {
    const float* x = r.get(p, layer);
    if (!x) throw error("the walk needs " + hook_label(p, layer) + ", which this run did not keep");
    return x + (size_t)row * r.layer_floats(p) / r.n_tokens;
}

// The merge that made a byte-level BPE token: the pair (left, right) of vocabulary entries whose
// concatenation it is, lowest rank first; "" for single bytes and other tokenizers.
std::string last_merge(const tokenizer& tok, int id) {
    if (tok.kind != TOK_BYTE_BPE || id < 0 || id >= (int)tok.vocab.size()) return "";
    const std::string& s = tok.vocab[id];
    int best = -1;
    size_t cut = 0;
    for (size_t k = 1; k < s.size(); k++) {
        if (((unsigned char)s[k] & 0xC0) == 0x80) continue; // inside a character
        auto it = tok.merge_rank.find(s.substr(0, k) + " " + s.substr(k));
        if (it != tok.merge_rank.end() && (best < 0 || it->second < best)) best = it->second, cut = k;
    }
    if (best < 0) return "";
    auto part = [&](const std::string& v) {
        auto it = tok.ids.find(v);
        return "\u2018" + (it == tok.ids.end() ? v : token_text(tok, it->second)) + "\u2019";
    };
    return part(s.substr(0, cut)) + " + " + part(s.substr(cut)) + " (merge " + std::to_string(best) + ")";
}

} // namespace

record_request learn_keep(int n_layer, int layer) {
    record_request rq;
    rq.points = 0;
    for (hook_point p : {HOOK_ATTN_IN, HOOK_Q, HOOK_K, HOOK_V, HOOK_PATTERN, HOOK_Z, HOOK_ATTN_OUT, HOOK_MLP_IN,
                         HOOK_MLP_POST, HOOK_ROUTER, HOOK_MLP_OUT})
        rq.points |= hook_bit(p);
    rq.resid_stream = true;
    rq.layers.assign(n_layer, 0);
    if (layer >= 0 && layer < n_layer) rq.layers[layer] = 1;
    return rq;
}

namespace {

// What every stage of the walk reads: the model, the run, and the chosen token, layer and head
struct walk_ctx {
    const model& m;
    const model_config& c;
    const arch_info& arch;
    const record& r;
    int token, layer, head;
    bool cross; // an encoder–decoder's decoder: the source reaches it by cross-attention
};

// The formula of every norm step (before a sublayer, the final one)
std::string norm_formula(const arch_info& arch) {
    return arch.norm == NORM_RMSNORM ? "RMSNorm(x) = x / sqrt(mean(x²) + ε) ⊙ g"
                                     : "LayerNorm(x) = (x − mean) / sqrt(var + ε) ⊙ g + b";
}

// A residual add's title; Post-LN (BERT, BART, Marian): the norm comes after each residual add, on the stream itself
std::string add_title(const arch_info& arch, const char* what) {
    return std::string("Residual add") + (arch.post_ln ? ", then " + std::string(norm_name(arch)) + " (Post-LN)" : "") +
           (what[0] ? std::string(" after ") + what : "");
}

// A residual add's formula, the sublayer's output `out` added (and normed after, in Post-LN)
std::string add_formula(const arch_info& arch, const char* out) {
    return arch.post_ln ? std::string("x ← ") + norm_name(arch) + "(x + " + out + ")" : std::string("x ← x + ") + out;
}

// The text's tokens, then the token's embedding: the stream's first vector, [d]
void walk_tokens(learn_walk& w, const walk_ctx& x) {
    const model& m = x.m;
    const model_config& c = x.c;
    const arch_info& arch = x.arch;
    const record& r = x.r;
    const int T = r.n_tokens, d = c.d_model, token = x.token;
    learn_step tok;
    tok.title = "Text → tokens";
    tok.formula = m.tok.kind == TOK_BYTE_BPE ? "bytes, split by a regex, then merged pair by pair in rank order (BPE)"
                  : m.tok.kind == TOK_UNIGRAM
                      ? "SentencePiece Unigram: of every split into vocabulary pieces, the most probable (Viterbi)"
                      : "SentencePiece-style BPE: pieces merged by score";
    tok.shape = x.cross ? dims({{"S", r.n_source}, {"T", T}}) : dims({{"T", T}});
    tok.note = "token " + std::to_string(token) + " is id " + std::to_string(r.tokens[token]) +
               (w.merges[token].empty() ? "" : ", made by the merge " + w.merges[token]);
    if (x.cross)
        tok.note += "; the decoder reads the start token then the target's tokens, while the source's " +
                    std::to_string(r.n_source) + " tokens went through the encoder (" +
                    std::to_string(m.encoder ? m.encoder->config.n_layer : 0) +
                    " layers, every token seeing every other), whose output every cross-attention reads";
    tok.panel = "Prompt";
    w.steps.push_back(tok);
    const float* x0 = r.resid(0);
    if (!x0) throw error("the walk needs the residual stream, which this run did not keep");
    const bool scaled = arch.embed_scale || c.scale_embedding;
    std::string emb_f = scaled ? "x = √d · E[id]" : "x = E[id]";
    if (arch.pos == POS_LEARNED) emb_f += c.pos_offset ? " + P[position + " + std::to_string(c.pos_offset) + "]" : " + P[position]";
    if (arch.pos == POS_SINUSOID) emb_f += " + PE[position]";
    if (!m.weights.emb_norm_g.empty()) emb_f = std::string(norm_name(arch)) + "(" + emb_f.substr(4) + ")", emb_f = "x = " + emb_f;
    learn_step emb = vector_step("Embedding lookup", emb_f, dims({{"T", T}, {"d", d}}), x0 + (size_t)token * d, d, "Residual stream");
    emb.note = arch.pos == POS_LEARNED ? "a learned table adds the position"
               : arch.pos == POS_SINUSOID
                   ? "a fixed table adds the position, nothing learned: PE[p, i] = sin(p / 10000^(2i/d)) in the first "
                     "half of the vector, cos in the second; each pair of dimensions turns at its own speed, so nearby "
                     "positions get similar vectors"
                   : "no position is added here: RoPE rotates q and k by the position inside attention";
    if (scaled) {
        char k[64];
        std::snprintf(k, sizeof k, "; E[id] is first scaled by √d = %.3g", std::sqrt((double)d));
        emb.note += k;
    }
    w.steps.push_back(emb);
}

// The chosen block's norm before attention (pre-norm models), then the head's query, [d_head]
void walk_query(learn_walk& w, const walk_ctx& x) {
    const model_config& c = x.c;
    const record& r = x.r;
    const int T = r.n_tokens, H = c.n_head, KV = c.n_kv_head, d = c.d_model, dh = c.d_head;
    const int token = x.token, layer = x.layer, head = x.head;
    if (x.arch.pre_norm)
        w.steps.push_back(vector_step(("L" + std::to_string(layer) + " norm before attention").c_str(), norm_formula(x.arch),
                                      dims({{"T", T}, {"d", d}}), need(r, HOOK_ATTN_IN, layer, token), d, "Residual stream"));
    const float* q = need(r, HOOK_Q, layer, token) + (size_t)head * dh;
    learn_step qs = vector_step("Query of the head", "q = x W_Q" + std::string(c.qkv_bias ? " + b_Q" : ""),
                                dims({{"T", T}, {"H", H}, {"d_head", dh}}), q, dh, "Attention heads");
    qs.title = "Q, K, V: the query of head " + std::to_string(head);
    qs.note = std::string(x.arch.pos == POS_ROPE ? "after RoPE rotated it by the position; " : "") + "K and V are " +
              dims({{"T", T}, {"KV", KV}, {"d_head", dh}}) +
              (KV < H ? ": " + std::to_string(H / KV) + " query heads share each key/value head (grouped-query)" : "");
    w.steps.push_back(qs);
}

// The head's pattern for the token: its scores against the keys it may see, the causal mask, the softmax
// (at most the 16 nearest keys listed)
void walk_pattern(learn_walk& w, const walk_ctx& x) {
    const model_config& c = x.c;
    const record& r = x.r;
    const int T = r.n_tokens, H = c.n_head, KV = c.n_kv_head, dh = c.d_head, token = x.token, layer = x.layer;
    const int g = x.head / (H / KV); // the key/value head this query head reads
    const float* q = need(r, HOOK_Q, layer, token) + (size_t)x.head * dh;
    // scores of the token's query against every key it may see, in double, as the attention computes them
    const float* k = r.get(HOOK_K, layer);
    if (!k) throw error("the walk needs " + hook_label(HOOK_K, layer) + ", which this run did not keep");
    const int kv_w = KV * dh;
    const double scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt((double)dh);
    const int first = r.first_key(layer, token);
    const int j0 = std::max(first, token - 15); // at most the 16 nearest keys are listed
    learn_step sc;
    sc.title = "Scores";
    sc.formula = "s_j = q · k_j " + std::string(c.attn_scale > 0 ? "× scale" : "/ √d_head") +
                 (c.attn_softcap > 0 ? ", then cap · tanh(s / cap)" : "");
    sc.shape = dims({{"H", H}, {"T", T}, {"T", T}});
    sc.panel = "Head";
    sc.width = token - first + 1;
    for (int j = j0; j <= token; j++) {
        double s = 0;
        for (int i = 0; i < dh; i++) s += (double)q[i] * k[(size_t)j * kv_w + (size_t)g * dh + i];
        s *= scale;
        if (c.attn_softcap > 0) s = c.attn_softcap * std::tanh(s / c.attn_softcap);
        sc.values.push_back((float)s);
        sc.labels.push_back(r.pieces[j]);
    }
    w.steps.push_back(sc);
    learn_step mask;
    mask.title = "Causal mask";
    mask.formula = "s_j = −∞ for keys j after the token" + std::string(first > 0 ? " and before its window" : "");
    mask.shape = dims({{"T", T}, {"T", T}});
    mask.note = "token " + std::to_string(token) + " sees keys " + std::to_string(first) + ".." + std::to_string(token) +
                (c.window_at(layer) > 0 ? " (a sliding window of " + std::to_string(c.window_at(layer)) + ")" : "");
    mask.panel = "Head (grey cells)";
    w.steps.push_back(mask);
    const float* p = r.head(layer, x.head);
    if (!p) throw error("the walk needs the pattern of L" + std::to_string(layer) + ", which this run did not keep");
    learn_step sm;
    sm.title = "Softmax";
    sm.formula = "p_j = exp(s_j) / Σ exp(s_i)";
    sm.shape = dims({{"H", H}, {"T", T}, {"T", T}});
    sm.panel = "Head";
    sm.width = token - first + 1;
    for (int j = j0; j <= token; j++) {
        sm.values.push_back(p[(size_t)token * T + j]);
        sm.labels.push_back(r.pieces[j]);
    }
    w.steps.push_back(sm);
}

// The head's weighted values [d_head], the attention's output [d] and the stream after its residual add
void walk_attn_out(learn_walk& w, const walk_ctx& x) {
    const model_config& c = x.c;
    const arch_info& arch = x.arch;
    const record& r = x.r;
    const int T = r.n_tokens, H = c.n_head, d = c.d_model, dh = c.d_head, token = x.token, layer = x.layer;
    w.steps.push_back(vector_step("Weighted values", "z = Σ_j p_j v_j", dims({{"T", T}, {"H", H}, {"d_head", dh}}),
                                  need(r, HOOK_Z, layer, token) + (size_t)x.head * dh, dh, "Head"));
    learn_step o = vector_step("Output projection", "attn_out = concat_h(z_h) W_O" + std::string(c.qkv_bias && c.mlp_bias ? " + b_O" : ""),
                               dims({{"T", T}, {"d", d}}), need(r, HOOK_ATTN_OUT, layer, token), d, "Attribution");
    if (arch.post_norm) o.note = "then normed (" + std::string(arch.name) + " norms each sublayer's output)";
    w.steps.push_back(o);
    learn_step ra = vector_step(add_title(arch, x.cross ? "self-attention" : "").c_str(),
                                c.parallel ? "x + attn_out (the MLP reads x itself: a parallel block)" : add_formula(arch, "attn_out"),
                                dims({{"T", T}, {"d", d}}), r.resid(2 * layer + 1) + (size_t)token * d, d, "Residual stream");
    if (arch.post_ln) ra.note = "Post-LN: the stream itself is normed after each add (the original Transformer's order); "
                                "Pre-LN models norm a copy before each sublayer and leave the stream to grow";
    w.steps.push_back(ra);
}

// Cross-attention: this target token's query against the encoder's output at every source token ([S] weights,
// the first 16 listed), then its residual add
void walk_cross(learn_walk& w, const walk_ctx& x) {
    const arch_info& arch = x.arch;
    const record& r = x.r;
    const int T = r.n_tokens, H = x.c.n_head, d = x.c.d_model, S = r.n_source;
    const float* xp = r.cross_head(x.layer, x.head) + (size_t)x.token * S;
    learn_step xa;
    xa.title = "Cross-attention of head " + std::to_string(x.head) + ": what it reads from the source";
    xa.formula = "p_j = softmax_j(q · k_j / √d_head), q = x W_Q (this target token), k_j = e_j W_K, v_j = e_j W_V "
                 "(e_j: the encoder's output at source token j)";
    xa.shape = dims({{"H", H}, {"T", T}, {"S", S}});
    xa.panel = "Cross-attention";
    xa.width = S;
    int best = 0;
    for (int j = 0; j < S; j++) {
        if (xp[j] > xp[best]) best = j;
        if (j < 16) xa.values.push_back(xp[j]), xa.labels.push_back(j < (int)r.source_pieces.size() ? r.source_pieces[j] : "?");
    }
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.0f %%", 100.0 * xp[best]);
    xa.note = "no mask: every source token is seen; this head puts most weight (" + std::string(pct) + ") on ‘" +
              (best < (int)r.source_pieces.size() ? r.source_pieces[best] : "?") + "’" +
              (S > 16 ? " (the first 16 source tokens are listed)" : "") +
              "; out = concat_h(Σ_j p_j v_j) W_O, then added to the stream";
    w.steps.push_back(xa);
    if (arch.post_ln) { // the stream after it is what the MLP reads (no norm before the MLP in Post-LN)
        w.steps.push_back(vector_step(add_title(arch, "cross-attention").c_str(), add_formula(arch, "cross_out"),
                                      dims({{"T", T}, {"d", d}}), need(r, HOOK_MLP_IN, x.layer, x.token), d, "Residual stream"));
    } else {
        learn_step xr;
        xr.title = add_title(arch, "cross-attention");
        xr.formula = add_formula(arch, "cross_out");
        xr.shape = dims({{"T", T}, {"d", d}});
        xr.panel = "Residual stream";
        w.steps.push_back(xr);
    }
}

// The MLP: its norm (pre-norm models), the router's weights [E] or the hidden vector [d_ff], its output [d] and
// the stream after its residual add
void walk_mlp(learn_walk& w, const walk_ctx& x) {
    const model_config& c = x.c;
    const arch_info& arch = x.arch;
    const record& r = x.r;
    const int T = r.n_tokens, d = c.d_model, token = x.token, layer = x.layer;
    if (arch.pre_norm)
        w.steps.push_back(vector_step(("L" + std::to_string(layer) + " norm before the MLP").c_str(), norm_formula(arch),
                                      dims({{"T", T}, {"d", d}}), need(r, HOOK_MLP_IN, layer, token), d, "Residual stream"));
    if (kind_of(c) == KIND_MOE) {
        learn_step rt = vector_step("Router", "weights = top-" + std::to_string(c.n_expert_used) + " of softmax(x W_router)",
                                    dims({{"T", T}, {"E", c.n_expert}}), need(r, HOOK_ROUTER, layer, token), c.n_expert, "Experts");
        rt.norm = -1;
        rt.values.assign(need(r, HOOK_ROUTER, layer, token), need(r, HOOK_ROUTER, layer, token) + c.n_expert);
        w.steps.push_back(rt);
    } else {
        const char* act = arch.mlp == MLP_SWIGLU ? "h = silu(x W_gate) ⊙ (x W_up)"
                          : arch.mlp == MLP_GEGLU ? "h = gelu(x W_gate) ⊙ (x W_up)"
                          : arch.mlp == MLP_GELU_ERF ? "h = GELU(x W_up + b) (exact erf form)"
                          : arch.mlp == MLP_SILU ? "h = silu(z) = z · σ(z), z = x W_up + b (swish)"
                                                     : "h = GELU(x W_up + b) (tanh form)";
        learn_step mh = vector_step("MLP hidden", act, dims({{"T", T}, {"d_ff", c.d_ff}}), need(r, HOOK_MLP_POST, layer, token),
                                    c.d_ff, "Residual stream");
        mh.norm = -1; // not the stream
        mh.note = "d → d_ff = " + std::to_string(d) + " → " + std::to_string(c.d_ff);
        w.steps.push_back(mh);
    }
    w.steps.push_back(vector_step("MLP output", "mlp_out = h W_down" + std::string(c.mlp_bias ? " + b" : ""), dims({{"T", T}, {"d", d}}),
                                  need(r, HOOK_MLP_OUT, layer, token), d, "Attribution"));
    w.steps.push_back(vector_step(add_title(arch, x.cross ? "the MLP" : "").c_str(), add_formula(arch, "mlp_out"),
                                  dims({{"T", T}, {"d", d}}), r.resid(2 * layer + 2) + (size_t)token * d, d, "Residual stream"));
}

// After the last block: final norm (Post-LN stacks have none: their stream is normed already), unembedding
// and softmax, recomputed from the token's last stream [d] to its [V] logits; the top 5 listed
void walk_head(learn_walk& w, const walk_ctx& x) {
    const model& m = x.m;
    const model_config& c = x.c;
    const int T = x.r.n_tokens, L = c.n_layer, d = c.d_model, V = c.vocab_size;
    const float* xl = x.r.resid(2 * L) + (size_t)x.token * d;
    std::vector<float> xn(d), logits(V);
    gemm_scratch gs;
    final_norm_forward(xn.data(), xl, 1, m, false, gs);
    if (!m.weights.normf_g.empty()) {
        learn_step fn = vector_step("Final norm", norm_formula(x.arch), dims({{"T", T}, {"d", d}}), xn.data(), d, "Logit lens");
        fn.note = "after all " + std::to_string(L) + " blocks";
        w.steps.push_back(fn);
    }
    lm_head_forward(logits.data(), xn.data(), 1, m, gs);
    if (c.final_softcap > 0) softcap_forward(logits.data(), logits.size(), c.final_softcap);
    const int n_top = std::min(5, V);
    std::vector<int> order(n_top);
    top_k_ids(order.data(), logits.data(), V, n_top);
    const softmax_row sm_row = softmax_stats(logits.data(), V);
    learn_step un;
    un.title = "Unembedding";
    un.formula = std::string(c.tied_lm_head ? "logits = x Eᵀ (the embedding, tied)" : "logits = x W_U") +
                 (m.weights.lm_head_b.empty() ? "" : " + b (final_logits_bias)");
    if (m.weights.normf_g.empty() && x.arch.post_ln) un.note = "straight from the last block's stream: Post-LN normed it already";
    un.shape = dims({{"T", T}, {"V", V}});
    un.panel = "Next token";
    un.width = V;
    learn_step pr;
    pr.title = "Softmax → next token";
    pr.formula = "P(next = v) = exp(logit_v) / Σ exp(logit_u)";
    pr.shape = dims({{"T", T}, {"V", V}});
    pr.panel = "Next token";
    pr.width = V;
    for (int i = 0; i < n_top; i++) {
        un.values.push_back(logits[order[i]]);
        un.labels.push_back(token_text(m.tok, order[i]));
        pr.values.push_back(softmax_prob(sm_row, logits.data(), V, order[i]));
        pr.labels.push_back(token_text(m.tok, order[i]));
    }
    if (c.final_softcap > 0) un.note = "then cap · tanh(logit / cap), cap " + std::to_string((int)c.final_softcap);
    w.steps.push_back(un);
    w.steps.push_back(pr);
}

} // namespace

learn_walk walk_through(const model& m, const record& r, int token, int layer, int head) {
    const model_config& c = m.config;
    const int T = r.n_tokens, L = c.n_layer, H = c.n_head;
    if (token < 0 || token >= T) throw error("token " + std::to_string(token) + " is outside the prompt (0.." + std::to_string(T - 1) + ")");
    if (layer < 0 || layer >= L) throw error("layer " + std::to_string(layer) + " is outside the model (0.." + std::to_string(L - 1) + ")");
    if (head < 0 || head >= H) throw error("head " + std::to_string(head) + " is outside the model (0.." + std::to_string(H - 1) + ")");
    require(m, FEATURE_LEARN);
    // an encoder–decoder's decoder (its record from run_seq2seq): the source reaches it by cross-attention
    const bool seq2seq = kind_of(c) == KIND_SEQ2SEQ;
    const bool cross = seq2seq && r.n_source > 0 && r.has(HOOK_CROSS_PATTERN, layer);
    if (seq2seq && !cross) throw error("the walk needs the decoder's record of an encoder–decoder run (with its source)");
    const walk_ctx x{m, c, arch_table(c.arch), r, token, layer, head, cross};
    learn_walk w;
    w.token = token, w.layer = layer, w.head = head;
    w.pieces = r.pieces;
    for (int id : r.tokens) w.merges.push_back(last_merge(m.tok, id));
    walk_tokens(w, x);
    walk_query(w, x);
    walk_pattern(w, x);
    walk_attn_out(w, x);
    if (cross) walk_cross(w, x);
    walk_mlp(w, x);
    walk_head(w, x);
    if (cross) // an encoder–decoder's app shows no attribution (Post-LN sums do not decompose): that link goes nowhere
        for (learn_step& st : w.steps)
            if (st.panel == "Attribution") st.panel.clear();
    return w;
}

int64_t textbook_params(const model& m) {
    const int64_t V = m.config.vocab_size, d = m.config.d_model, L = m.config.n_layer;
    return m.encoder ? V * d + 12 * (int64_t)m.encoder->config.n_layer * d * d + 16 * L * d * d : V * d + 12 * L * d * d;
}

std::vector<param_line> param_derivation(const model& m) {
    const model_config& c = m.config;
    const arch_info& arch = arch_table(c.arch);
    const param_counts p = count_params(m);
    const int64_t L = c.n_layer, H = c.n_head, KV = c.n_kv_head;
    std::vector<param_line> out;
    if (m.encoder) { // both stacks: count_params adds the encoder's layers; the token table is shared
        const int64_t Le = m.encoder->config.n_layer;
        out.push_back({"textbook estimate",
                       "V·d + 12·L_enc·d² + 16·L_dec·d²  (a decoder layer adds 4d² of cross-attention; L_enc " +
                           std::to_string(Le) + ", L_dec " + std::to_string(L) + ")",
                       textbook_params(m)});
        out.push_back({"embeddings", std::string("V·d (one table for both stacks)") +
                                         (arch.pos == POS_SINUSOID ? " + each stack's n_ctx·d sinusoid table (fixed, not trained; HF counts it too)"
                                                                   : " + each stack's learned positions") +
                                         (c.tied_lm_head ? "" : " + V·d (untied output head)") +
                                         (m.weights.lm_head_b.empty() ? "" : " + V (final_logits_bias)"),
                       p.embeddings});
        out.push_back({"attention", "(L_enc + 2·L_dec)·4·d·H·d_head + biases  (each decoder layer: self- and cross-attention)",
                       p.attention});
        out.push_back({"MLP", "(L_enc + L_dec)·2·d·d_ff + biases", p.mlp});
        out.push_back({"norms", "gain and bias per LayerNorm: 2 per encoder layer, 3 per decoder layer, the embeddings' "
                                "and final ones where the model has them",
                       p.norms});
        out.push_back({"total", "the sum", p.total()});
        return out;
    }
    out.push_back({"textbook estimate", "V·d + 12·L·d²  (embeddings; per layer 4d² attention + 8d² MLP with d_ff = 4d)",
                   textbook_params(m)});
    out.push_back({"embeddings", std::string("V·d") + (arch.pos == POS_LEARNED ? " + n_ctx·d (positions)" : "") +
                                     (c.tied_lm_head ? "" : " + V·d (untied output head)"),
                   p.embeddings});
    std::string att = "L·(d·(H + 2·KV)·d_head + H·d_head·d)";
    if (KV < H) att += "  (grouped-query: K and V have " + std::to_string(KV) + " heads, not " + std::to_string(H) + ")";
    if (c.qkv_bias) att += " + biases";
    out.push_back({"attention", att, p.attention});
    std::string mlp = kind_of(c) == KIND_MOE ? "L·(d·E + E·3·d·d_ff_expert" + std::string(c.d_ff_shared > 0 ? " + 3·d·d_ff_shared + d" : "") + ")"
                      : arch.mlp == MLP_SWIGLU || arch.mlp == MLP_GEGLU ? "L·3·d·d_ff  (gated: W_gate, W_up, W_down)"
                                                                       : "L·2·d·d_ff + biases";
    out.push_back({"MLP", mlp, p.mlp});
    out.push_back({"norms", arch.norm == NORM_RMSNORM ? "gains only (RMSNorm)" : "gain and bias per LayerNorm", p.norms});
    out.push_back({"total", "the sum", p.total()});
    return out;
}

} // namespace gb
