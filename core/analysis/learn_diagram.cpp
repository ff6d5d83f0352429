// Learn mode's picture (learn_diagram.h): the boxes of a model's forward with live shapes and formulas from the
// architecture table and the config; and the walk's steps mapped onto them. The formulas use only characters the
// app's font has (DejaVu Sans in the ranges it loads: no superscript letters, so E⊤ rather than a raised T).
#include "analysis/learn_diagram.h"


namespace gb {

namespace {

using dim_list = std::vector<std::pair<std::string, int64_t>>;

diagram_box box(diagram_part p, std::string label, std::string title, dim_list dims, std::string formula,
                std::string note = "") {
    diagram_box b;
    b.part = p, b.label = std::move(label), b.title = std::move(title), b.dims = std::move(dims);
    b.formula = std::move(formula), b.note = std::move(note);
    return b;
}

std::string box_norm_formula(const arch_info& a) {
    const char* g = a.gain_plus_one ? "(1 + g)" : "g";
    return a.norm == NORM_RMSNORM ? std::string("x / √(mean(x²) + ε) ⊙ ") + g
                                  : std::string("(x − mean(x)) / √(var(x) + ε) ⊙ ") + g + " + b";
}
const char* norm_short(const arch_info& a) { return a.norm == NORM_RMSNORM ? "RMS" : "LN"; }

std::string tokenizer_formula(const tokenizer& tok) {
    switch (tok.kind) {
    case TOK_BYTE_BPE: return "text → bytes → merged pair by pair (BPE) → ids";
    case TOK_SPM_BPE: return "text → SentencePiece pieces (BPE) → ids";
    case TOK_WORDPIECE: return "text → words → longest WordPiece pieces → ids";
    case TOK_UNIGRAM: return "text → the most probable SentencePiece pieces (Unigram) → ids";
    default: return "text → token ids";
    }
}

// The input and the embedding of a stack: tokens (or patches) to the stream's vectors.
void input_boxes(std::vector<diagram_box>& out, const model& m, int T, const char* what) {
    const model_config& c = m.config;
    const arch_info& a = arch_table(c.arch);
    const int d = c.d_model;
    if (kind_of(c) == KIND_VISION) {
        const int P = c.patch_size, N = c.grid() * c.grid();
        out.push_back(box(PART_INPUT, "patches", "the image cut into patches", {{"N", N}, {"C·P·P", (int64_t)c.n_channels * P * P}},
                          "image (" + std::to_string(c.image_size) + " px square) → " + std::to_string(c.grid()) + " × " +
                              std::to_string(c.grid()) + " patches of " + std::to_string(P) + " × " + std::to_string(P) + " px"));
        out.push_back(box(PART_EMBED, "embedding", "patch embedding", {{"T", T}, {"d", d}},
                          "x = [CLS" + std::string(c.n_prefix > 1 ? ", DIST" : "") + ", patch W_p + b] + P[position]",
                          "each patch's pixels projected to d; [CLS] is learned, and its output is what is classified"));
        return;
    }
    const bool s2s = kind_of(c) == KIND_SEQ2SEQ;
    out.push_back(box(PART_INPUT, !s2s ? "tokens" : c.arch == encoder_arch(c.arch) ? "source" : "target", what, {{"T", T}},
                      tokenizer_formula(m.tok)));
    const bool scaled = a.embed_scale || c.scale_embedding;
    std::string f = scaled ? "√d · E[id]" : "E[id]", note;
    if (a.pos == POS_LEARNED) f += " + P[position]", note = "a learned table adds the position";
    if (a.pos == POS_SINUSOID) f += " + PE[position]", note = "a fixed table of sines and cosines adds the position";
    if (a.pos == POS_ROPE) note = "no position here: RoPE rotates q and k by it inside attention";
    if (c.n_token_type > 0) f += " + S[0]";
    if (!m.weights.emb_norm_g.empty()) f = std::string(norm_short(a)) + "(" + f + ")";
    out.push_back(box(PART_EMBED, "embedding", "embedding lookup", {{"T", T}, {"d", d}}, "x = " + f, note));
}

// One layer's attention: norm, q k v, scores, mask, softmax, weighted values, W_O, the add.
void attention_boxes(std::vector<diagram_box>& out, const model_config& c, int T, bool causal) {
    const arch_info& a = arch_table(c.arch);
    const int d = c.d_model, H = c.n_head, KV = c.n_kv_head, dh = c.d_head;
    if (a.pre_norm) out.push_back(box(PART_NORM_ATTN, norm_name(a), "norm before attention", {{"T", T}, {"d", d}}, box_norm_formula(a)));
    std::string qn;
    if (a.pos == POS_ROPE) qn = "RoPE rotates q and k by the position";
    if (a.qk_norm != QK_NORM_NONE) qn += std::string(qn.empty() ? "" : "; ") + "q and k are RMS-normed";
    if (KV < H)
        qn += std::string(qn.empty() ? "" : "; ") + "k and v have " + std::to_string(KV) + " heads: " + std::to_string(H / KV) +
              " query heads share each (grouped-query)";
    out.push_back(box(PART_QKV, "Q K V", "queries, keys and values", {{"T", T}, {"H", H}, {"d_head", dh}},
                      std::string("q = x W_Q, k = x W_K, v = x W_V") + (c.qkv_bias ? " (+ biases)" : ""), qn));
    std::string s = std::string("s_ij = q_i · k_j ") + (c.attn_scale > 0 ? "× scale" : "/ √d_head");
    if (c.attn_softcap > 0) s += ", then cap · tanh(s / cap)";
    out.push_back(box(PART_SCORES, "scores", "scores", {{"H", H}, {"T", T}, {"T", T}}, s, "every query against every key, per head"));
    if (causal)
        out.push_back(box(PART_MASK, "mask", "causal mask", {{"T", T}, {"T", T}},
                          std::string("s_ij = −∞ for keys j after i") + (c.sliding_window > 0 ? " or outside the window" : ""),
                          "a token sees itself and the tokens before it, never the ones after"));
    out.push_back(box(PART_SOFTMAX, "softmax", "attention pattern", {{"H", H}, {"T", T}, {"T", T}}, "p_ij = exp(s_ij) / Σ_j exp(s_ij)",
                      causal ? "each row sums to 1 over the keys the token sees" : "no mask: every token sees every token"));
    out.push_back(box(PART_MIX, "Σ p v", "weighted values", {{"T", T}, {"H", H}, {"d_head", dh}}, "z_i = Σ_j p_ij v_j"));
    out.push_back(box(PART_ATTN_OUT, "W_O", "output projection", {{"T", T}, {"d", d}},
                      std::string("attn = concat(z_1 … z_H) W_O") + (c.qkv_bias && c.mlp_bias ? " + b" : ""),
                      a.post_norm ? "then normed: this model norms each sublayer's output" : ""));
    if (c.parallel)
        out.push_back(box(PART_ADD_ATTN, "+", "residual add", {{"T", T}, {"d", d}}, "x + attn",
                          "a parallel block: the MLP reads the layer's input x, not this sum"));
    else if (a.post_ln)
        out.push_back(box(PART_ADD_ATTN, std::string("+, ") + norm_short(a), "residual add, then the norm", {{"T", T}, {"d", d}},
                          std::string("x ← ") + norm_short(a) + "(x + attn)", "Post-LN: the stream itself is normed after each add"));
    else
        out.push_back(box(PART_ADD_ATTN, "+", "residual add", {{"T", T}, {"d", d}}, "x ← x + attn",
                          "the sublayer adds to the stream; the stream itself is never replaced"));
}

// An encoder–decoder's cross-attention: the decoder's queries against the encoder's output.
void cross_boxes(std::vector<diagram_box>& out, const model_config& c, int T, int S) {
    const arch_info& a = arch_table(c.arch);
    out.push_back(box(PART_CROSS, "cross-attn", "cross-attention", {{"H", c.n_head}, {"T", T}, {"S", S}},
                      "softmax(q · k_e / √d_head) v_e: q from the decoder, k_e and v_e from the encoder's output",
                      "no mask: each target token reads every source token"));
    out.push_back(box(PART_ADD_CROSS, a.post_ln ? std::string("+, ") + norm_short(a) : "+", "residual add after cross-attention",
                      {{"T", T}, {"d", c.d_model}}, a.post_ln ? std::string("x ← ") + norm_short(a) + "(x + cross)" : "x ← x + cross"));
}

void mlp_boxes(std::vector<diagram_box>& out, const model_config& c, int T) {
    const arch_info& a = arch_table(c.arch);
    const int d = c.d_model;
    if (a.pre_norm)
        out.push_back(box(PART_NORM_MLP, norm_name(a), "norm before the MLP", {{"T", T}, {"d", d}}, box_norm_formula(a),
                          c.parallel ? "a parallel block: it norms the layer's input x" : ""));
    const bool moe = kind_of(c) == KIND_MOE;
    if (moe)
        out.push_back(box(PART_ROUTER, "router", "router", {{"T", T}, {"E", c.n_expert}},
                          "w = top-" + std::to_string(c.n_expert_used) + " of softmax(x W_r)",
                          "each token goes to " + std::to_string(c.n_expert_used) + " of " + std::to_string(c.n_expert) +
                              " experts, weighted by w" + (c.d_ff_shared > 0 ? "; a shared expert reads every token" : "")));
    const char* f = a.mlp == MLP_SWIGLU  ? "h = silu(x W_gate) ⊙ (x W_up)"
                    : a.mlp == MLP_GEGLU ? "h = gelu(x W_gate) ⊙ (x W_up)"
                    : a.mlp == MLP_SILU  ? "h = silu(x W_up + b)"
                                         : "h = GELU(x W_up + b)";
    const int ff = moe ? c.d_ff_expert : c.d_ff;
    const bool gated = a.mlp == MLP_SWIGLU || a.mlp == MLP_GEGLU;
    out.push_back(box(PART_MLP_HIDDEN, moe ? "experts" : gated ? "gate ⊙ up" : "MLP up", moe ? "the chosen experts' hidden layers" : "MLP hidden layer",
                      {{"T", T}, {moe ? "d_ff_e" : "d_ff", ff}}, std::string(f) + (moe ? ", in each chosen expert" : ""),
                      gated ? "gated: one projection of x gates the other, element by element" : ""));
    out.push_back(box(PART_MLP_OUT, moe ? "Σ w·expert" : "MLP down", "MLP output", {{"T", T}, {"d", d}},
                      moe ? "mlp = Σ_e w_e · (h_e W_down,e)" : std::string("mlp = h W_down") + (c.mlp_bias ? " + b" : ""),
                      a.post_norm ? "then normed: this model norms each sublayer's output" : ""));
    if (c.parallel)
        out.push_back(box(PART_ADD_MLP, "+", "residual add", {{"T", T}, {"d", d}}, "x ← x + attn + mlp",
                          "both sublayers read the layer's input; their outputs are added together"));
    else if (a.post_ln)
        out.push_back(box(PART_ADD_MLP, std::string("+, ") + norm_short(a), "residual add, then the norm", {{"T", T}, {"d", d}},
                          std::string("x ← ") + norm_short(a) + "(x + mlp)"));
    else
        out.push_back(box(PART_ADD_MLP, "+", "residual add", {{"T", T}, {"d", d}}, "x ← x + mlp"));
}

// After the last layer: the final norm (or a masked-LM head's transform), the logits, the softmax.
void head_boxes(std::vector<diagram_box>& out, const model& m, int T) {
    const model_config& c = m.config;
    const arch_info& a = arch_table(c.arch);
    const int d = c.d_model, V = c.vocab_size;
    const model_kind k = kind_of(c);
    const std::string b = m.weights.lm_head_b.empty() ? "" : " + b";
    if (k == KIND_ENCODER) {
        out.push_back(box(PART_FINAL_NORM, "MLM head", "the masked-LM head's transform", {{"T", T}, {"d", d}}, "h = LN(GELU(x W_t + b_t))"));
        out.push_back(box(PART_UNEMBED, "x E⊤", "unembedding", {{"T", T}, {"V", V}}, "logits = h E⊤ + b (E: the token embedding)"));
        out.push_back(box(PART_PREDICT, "softmax", "the mask's filler", {{"T", T}, {"V", V}}, "P(token at [MASK] = v) = softmax(logits)_v",
                          "read at each [MASK]: every token saw the whole text, both sides"));
        return;
    }
    if (k == KIND_VISION) {
        out.push_back(box(PART_FINAL_NORM, norm_name(a), "final norm", {{"T", T}, {"d", d}}, box_norm_formula(a)));
        out.push_back(box(PART_UNEMBED, "classifier", "the classifier at [CLS]", {{"classes", V}}, "logits = x[CLS] W_c + b",
                          "only [CLS]'s vector is read: attention gathered the patches into it"));
        out.push_back(box(PART_PREDICT, "softmax", "the class", {{"classes", V}}, "P(class = v) = softmax(logits)_v"));
        return;
    }
    if (!m.weights.normf_g.empty())
        out.push_back(box(PART_FINAL_NORM, norm_name(a), "final norm", {{"T", T}, {"d", d}}, box_norm_formula(a),
                          "after all " + std::to_string(c.n_layer) + " layers"));
    std::string f = c.tied_lm_head ? "logits = x E⊤" + b + " (E: the token embedding, tied)" : "logits = x W_U" + b;
    if (c.final_softcap > 0) f += ", then cap · tanh(logits / cap)";
    out.push_back(box(PART_UNEMBED, c.tied_lm_head ? "x E⊤" : "x W_U", "unembedding", {{"T", T}, {"V", V}}, f));
    out.push_back(box(PART_PREDICT, "softmax", k == KIND_SEQ2SEQ ? "the next target token" : "the next token", {{"T", T}, {"V", V}},
                      "P(next = v) = exp(logit_v) / Σ_u exp(logit_u)", "read at the token: what comes after it"));
}

// An encoder–decoder's encoder as a column: its input, embedding, one layer (self-attention without a mask,
// the add, the MLP, the add) and its output, which every decoder layer's cross-attention reads.
void encoder_column(learn_diagram& g, const model& enc, int S) {
    const model_config& c = enc.config;
    const arch_info& a = arch_table(c.arch);
    const int d = c.d_model;
    std::vector<diagram_box>& out = g.encoder;
    input_boxes(out, enc, S, "the source's tokens");
    out.push_back(box(PART_SOFTMAX, "self-attn", "the encoder's self-attention", {{"H", c.n_head}, {"S", S}, {"S", S}},
                      "softmax(q · k / √d_head) v over every source token", "no mask: every source token sees every other"));
    out.push_back(box(PART_ADD_ATTN, a.post_ln ? std::string("+, ") + norm_short(a) : "+", "residual add", {{"S", S}, {"d", d}},
                      a.post_ln ? std::string("x ← ") + norm_short(a) + "(x + attn)" : "x ← x + attn"));
    out.push_back(box(PART_MLP_HIDDEN, "MLP", "the encoder's MLP", {{"S", S}, {"d_ff", c.d_ff}}, "mlp = act(x W_up + b) W_down + b"));
    out.push_back(box(PART_ADD_MLP, a.post_ln ? std::string("+, ") + norm_short(a) : "+", "residual add", {{"S", S}, {"d", d}},
                      a.post_ln ? std::string("x ← ") + norm_short(a) + "(x + mlp)" : "x ← x + mlp"));
    out.push_back(box(PART_FINAL_NORM, "encoder out", "the encoder's output", {{"S", S}, {"d", d}},
                      enc.weights.normf_g.empty() ? "e = the last layer's stream" : "e = " + std::string(norm_short(a)) + "(x)",
                      "every decoder layer's cross-attention reads it"));
}

} // namespace

const char* part_name(diagram_part p) {
    static const char* names[PART_COUNT] = {"input", "embed", "norm_attn", "qkv", "scores", "mask", "softmax",
                                            "mix", "attn_out", "add_attn", "cross", "add_cross", "norm_mlp",
                                            "router", "mlp_hidden", "mlp_out", "add_mlp", "final_norm", "unembed",
                                            "predict"};
    return p >= 0 && p < PART_COUNT ? names[p] : "?";
}

int part_sublayer(diagram_part p) {
    if (p >= PART_NORM_ATTN && p <= PART_ADD_CROSS) return 1;
    if (p >= PART_NORM_MLP && p <= PART_ADD_MLP) return 2;
    return 0;
}

std::string diagram_box::shape() const {
    std::string names = "[", values = "[";
    for (size_t i = 0; i < dims.size(); i++) {
        names += (i ? ", " : "") + dims[i].first;
        values += (i ? ", " : "") + std::to_string(dims[i].second);
    }
    return names + "] = " + values + "]";
}

const diagram_box* learn_diagram::find(diagram_part p) const {
    for (const diagram_box& b : boxes)
        if (b.part == p) return &b;
    return nullptr;
}

learn_diagram diagram_of(const model& m, int n_tokens, int n_source) {
    const model_config& c = m.config;
    const arch_info& a = arch_table(c.arch);
    learn_diagram g;
    g.kind = kind_of(c);
    g.arch = a.name;
    g.n_layer = c.n_layer, g.n_tokens = n_tokens, g.n_head = c.n_head, g.n_kv_head = c.n_kv_head;
    g.pre_ln = a.pre_norm, g.post_ln = a.post_ln, g.sublayer_norm = a.post_norm, g.parallel = c.parallel;
    g.rope = a.pos == POS_ROPE;
    g.causal = g.kind == KIND_DECODER || g.kind == KIND_MOE || g.kind == KIND_SEQ2SEQ;
    g.predicts_next = offers(c, FEATURE_LEARN);
    if (g.kind == KIND_MOE) g.n_expert = c.n_expert, g.n_expert_used = c.n_expert_used;
    input_boxes(g.boxes, m, n_tokens, g.kind == KIND_SEQ2SEQ ? "the target's tokens, after the start token" : "text → tokens");
    attention_boxes(g.boxes, c, n_tokens, g.causal);
    if (g.kind == KIND_SEQ2SEQ) cross_boxes(g.boxes, c, n_tokens, n_source);
    mlp_boxes(g.boxes, c, n_tokens);
    head_boxes(g.boxes, m, n_tokens);
    if (g.kind == KIND_SEQ2SEQ && m.encoder) {
        g.encoder_layers = m.encoder->config.n_layer;
        g.n_source = n_source;
        encoder_column(g, *m.encoder, n_source);
    }
    return g;
}

std::vector<diagram_part> step_parts(const learn_walk& w) {
    std::vector<diagram_part> out;
    bool in_mlp = false; // a residual add after the MLP's steps is the MLP's
    for (const learn_step& st : w.steps) {
        const std::string& t = st.title;
        auto starts = [&](const char* p) { return t.rfind(p, 0) == 0; };
        auto has = [&](const char* p) { return t.find(p) != std::string::npos; };
        diagram_part p = PART_COUNT;
        if (starts("Text")) p = PART_INPUT;
        else if (starts("Embedding")) p = PART_EMBED;
        else if (has("norm before attention")) p = PART_NORM_ATTN;
        else if (starts("Q, K, V")) p = PART_QKV;
        else if (t == "Scores") p = PART_SCORES;
        else if (t == "Causal mask") p = PART_MASK;
        else if (t == "Softmax") p = PART_SOFTMAX;
        else if (t == "Weighted values") p = PART_MIX;
        else if (t == "Output projection") p = PART_ATTN_OUT;
        else if (starts("Cross-attention")) p = PART_CROSS;
        else if (starts("Residual add")) p = has("cross-attention") ? PART_ADD_CROSS : in_mlp || has("MLP") ? PART_ADD_MLP : PART_ADD_ATTN;
        else if (has("norm before the MLP")) p = PART_NORM_MLP;
        else if (t == "Router") p = PART_ROUTER;
        else if (t == "MLP hidden") p = PART_MLP_HIDDEN;
        else if (t == "MLP output") p = PART_MLP_OUT;
        else if (t == "Final norm") p = PART_FINAL_NORM;
        else if (t == "Unembedding") p = PART_UNEMBED;
        else if (starts("Softmax →")) p = PART_PREDICT;
        if (part_sublayer(p) == 2) in_mlp = true;
        out.push_back(p);
    }
    return out;
}

} // namespace gb
