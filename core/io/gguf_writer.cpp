// Seeded random decoder models as GGUF files llama.cpp loads: each family's config, its tensors by the
// architecture table's GGUF names, its hyperparameter keys as llama.cpp's loader reads them, the byte-level
// tokenizer, and the weights streamed a row at a time; and a loaded model's own weights and tokenizer written
// the same way in another stored type (glassbox-cli quantize).
//
// Sections: families and configs | tensors | metadata | writing
#include "io/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>

#include "io/random_source.h"
#include "kernels/gemm.h"
#include "model/arch.h"
#include "util/error.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// Families and configs
// ---------------------------------------------------------------------------------------------
const std::vector<std::string>& random_gguf_families() {
    static const std::vector<std::string> f = {"gpt2",     "llama",   "mistral",   "qwen2",     "qwen3",
                                               "gemma",    "gemma2",  "phi3",      "olmo2",     "gpt_neox",
                                               "mixtral",  "qwen2_moe", "qwen3_moe", "olmoe"};
    return f;
}

static bool is_family(const std::string& f) {
    const std::vector<std::string>& all = random_gguf_families();
    return std::find(all.begin(), all.end(), f) != all.end();
}

static std::string family_list() {
    std::string s;
    for (const std::string& f : random_gguf_families()) s += (s.empty() ? "" : ", ") + f;
    return s;
}

model_config random_gguf_config(const std::string& family, const model_config& shape) {
    const std::string who = "random " + family + " GGUF: ";
    if (!is_family(family)) throw error("random GGUF: unknown family '" + family + "' (families: " + family_list() + ")");
    model_config c = shape;
    c.model_type = family;
    c.arch = arch_from_hf(family, "make-random");
    const arch_info& a = arch_table(c.arch);
    const bool fixed_heads = family == "gpt2" || family == "gpt_neox"; // one K/V head per head, head = d / heads
    if (c.n_layer < 1 || c.n_head < 1 || c.d_model < 1 || c.n_ctx < 1 || c.n_kv_head < 0 || c.d_head < 0 || c.d_ff < 0)
        throw error(who + "n_layer, n_head, d_model and n_ctx must be positive");
    if (c.vocab_size < 257) throw error(who + "vocab_size must be at least 257 (256 bytes + end-of-text)");
    if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
    if (c.n_kv_head > c.n_head || c.n_head % c.n_kv_head)
        throw error(who + "n_head " + std::to_string(c.n_head) + " is not a multiple of n_kv_head " + std::to_string(c.n_kv_head));
    if (fixed_heads && c.n_kv_head != c.n_head) throw error(who + "has one K/V head per head");
    if (c.d_head == 0) {
        if (c.d_model % c.n_head)
            throw error(who + "d_model " + std::to_string(c.d_model) + " is not a multiple of n_head " + std::to_string(c.n_head));
        c.d_head = c.d_model / c.n_head;
    }
    if (fixed_heads && c.d_head * c.n_head != c.d_model) throw error(who + "head size must be d_model / n_head");
    // llama.cpp's OLMoE sizes its k norm d_model wide: as many K/V heads as heads (OLMoE's own shape)
    if (family == "olmoe" && (c.n_kv_head != c.n_head || c.d_head * c.n_head != c.d_model))
        throw error(who + "llama.cpp's OLMoE needs as many K/V heads as heads, each d_model / n_head wide");
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (!(c.norm_eps > 0) || !(c.rope_theta > 0)) throw error(who + "norm_eps and rope_theta must be positive");
    if (a.pos == POS_ROPE) {
        if (c.rope_dims == 0) c.rope_dims = c.d_head;
        if (c.d_head % 2 || c.rope_dims % 2 || c.rope_dims > c.d_head)
            throw error(who + "RoPE rotates pairs: the head size " + std::to_string(c.d_head) + " and rotated dimensions " +
                        std::to_string(c.rope_dims) + " must be even, the latter at most the former");
        c.rope = family == "llama" || family == "mistral" || family == "mixtral" ? ROPE_ADJACENT : ROPE_HALF;
    }
    c.qkv_bias = family == "gpt2" || family == "gpt_neox" || family == "qwen2" || family == "qwen2_moe";
    c.mlp_bias = family == "gpt2" || family == "gpt_neox";
    c.parallel = family == "gpt_neox";
    // llama.cpp's Gemma reads the embedding as the head (an output.weight would be a tensor too many); its Phi-3,
    // GPT-NeoX, OLMo 2, Qwen2-MoE and OLMoE require output.weight
    if (family == "gemma" || family == "gemma2") c.tied_lm_head = true;
    if (family == "phi3" || family == "gpt_neox" || family == "olmo2" || family == "qwen2_moe" || family == "olmoe")
        c.tied_lm_head = false;
    if (c.sliding_window < 0 || (c.sliding_window > 0 && family != "gemma2" && family != "phi3"))
        throw error(who + "no sliding window: llama.cpp reads one for Gemma 2 and Phi-3 only");
    c.window_every = 1;
    if (family == "gemma2") {
        if (c.attn_softcap == 0) c.attn_softcap = 50;
        if (c.final_softcap == 0) c.final_softcap = 30;
        if (c.sliding_window == 0) c.sliding_window = 4096;
        c.window_every = 2;
    } else {
        c.attn_softcap = c.final_softcap = 0;
    }
    if (a.kind == KIND_MOE) {
        if (c.n_expert == 0) c.n_expert = 4;
        if (c.n_expert_used == 0) c.n_expert_used = std::min(2, c.n_expert);
        if (c.d_ff_expert == 0) c.d_ff_expert = c.d_ff;
        c.d_ff_shared = family == "qwen2_moe" ? (c.d_ff_shared ? c.d_ff_shared : c.d_ff) : 0;
        if (c.n_expert < 1 || c.n_expert_used < 1 || c.n_expert_used > c.n_expert || c.d_ff_expert < 1 || c.d_ff_shared < 0)
            throw error(who + "needs 1 <= n_expert_used <= n_expert and a positive expert width");
        c.norm_topk = family == "mixtral" || family == "qwen3_moe"; // as llama.cpp computes them
        c.d_ff = std::max(c.d_ff_expert, c.d_ff_shared);      // as the GGUF loader sets it
    } else {
        c.n_expert = c.n_expert_used = c.d_ff_expert = c.d_ff_shared = 0;
    }
    return c;
}

// ---------------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------------
namespace {

enum fill_kind {
    MATRIX, // N(0, std), stored in the file's type
    DENSE,  // N(0, std), always F32 (routers, learned positions)
    GAIN,   // 1 + N(0, aux_std), F32
    BIAS,   // N(0, aux_std), F32
};

struct tensor_spec {
    std::string name;
    std::vector<int64_t> ne; // GGUF order: ne[0] the row
    fill_kind fill;
    tensor_id id;            // what it is, and of which layer (-1: none), for copying a loaded model's weights
    int layer;
    int64_t row() const { return ne[0]; }
    int64_t rows() const {
        int64_t r = 1;
        for (size_t i = 1; i < ne.size(); i++) r *= ne[i];
        return r;
    }
};

// The family's tensors in file order, as load_weights reads them from a GGUF (the one place that knows which a
// family has; this list follows it)
std::vector<tensor_spec> tensor_list(const model_config& c) {
    const arch_info& a = arch_table(c.arch);
    const int64_t d = c.d_model, V = c.vocab_size, ff = c.d_ff, dh = c.d_head, q = (int64_t)c.n_head * dh,
                  kv = (int64_t)c.n_kv_head * dh;
    const bool layernorm = a.norm == NORM_LAYERNORM, gated = a.mlp == MLP_SWIGLU || a.mlp == MLP_GEGLU;
    std::vector<tensor_spec> t;
    auto named = [&](tensor_id id) { return !tensor_name(a, true, id, 0, 0).empty(); };
    auto add = [&](tensor_id id, int l, std::vector<int64_t> ne, fill_kind f) {
        std::string n = tensor_name(a, true, id, l);
        if (n.empty()) throw error(std::string("internal: the ") + a.name + " table names no GGUF " + tensor_id_name(id));
        t.push_back({n, std::move(ne), f, id, l});
    };
    auto norm = [&](tensor_id g, tensor_id b, int l) {
        add(g, l, {d}, GAIN);
        if (layernorm) add(b, l, {d}, BIAS);
    };
    add(T_TOK_EMB, -1, {d, V}, MATRIX);
    if (a.pos == POS_LEARNED) add(T_POS_EMB, -1, {d, c.n_ctx}, DENSE);
    for (int l = 0; l < c.n_layer; l++) {
        if (a.pre_norm) norm(T_ATTN_NORM, T_ATTN_NORM_B, l);
        if (named(T_QKV)) {
            add(T_QKV, l, {d, q + 2 * kv}, MATRIX);
            if (c.qkv_bias) add(T_QKV_B, l, {q + 2 * kv}, BIAS);
        } else {
            add(T_Q, l, {d, q}, MATRIX), add(T_K, l, {d, kv}, MATRIX), add(T_V, l, {d, kv}, MATRIX);
            if (c.qkv_bias) add(T_Q_B, l, {q}, BIAS), add(T_K_B, l, {kv}, BIAS), add(T_V_B, l, {kv}, BIAS);
        }
        add(T_O, l, {q, d}, MATRIX);
        if (named(T_O_B)) add(T_O_B, l, {d}, BIAS);
        if (a.qk_norm != QK_NORM_NONE) {
            const bool full = a.qk_norm == QK_NORM_FULL;
            add(T_Q_NORM, l, {full ? q : dh}, GAIN), add(T_K_NORM, l, {full ? kv : dh}, GAIN);
        }
        if (a.post_norm) add(T_ATTN_POST_NORM, l, {d}, GAIN);
        if (a.pre_norm) norm(T_FFN_NORM, T_FFN_NORM_B, l);
        if (a.post_norm) add(T_FFN_POST_NORM, l, {d}, GAIN);
        if (a.kind == KIND_MOE) {
            const int64_t E = c.n_expert, fe = c.d_ff_expert, fs = c.d_ff_shared;
            add(T_ROUTER, l, {d, E}, DENSE);
            add(T_EXP_GATE, l, {d, fe, E}, MATRIX), add(T_EXP_UP, l, {d, fe, E}, MATRIX);
            add(T_EXP_DOWN, l, {fe, d, E}, MATRIX);
            if (fs > 0) {
                add(T_SH_ROUTER, l, {d}, DENSE);
                add(T_SH_GATE, l, {d, fs}, MATRIX), add(T_SH_UP, l, {d, fs}, MATRIX), add(T_SH_DOWN, l, {fs, d}, MATRIX);
            }
        } else if (gated && named(T_GATE_UP)) { // Phi-3: gate rows, then up rows
            add(T_GATE_UP, l, {d, 2 * ff}, MATRIX), add(T_DOWN, l, {ff, d}, MATRIX);
        } else {
            if (gated) add(T_GATE, l, {d, ff}, MATRIX);
            add(T_UP, l, {d, ff}, MATRIX);
            if (c.mlp_bias) add(T_UP_B, l, {ff}, BIAS);
            add(T_DOWN, l, {ff, d}, MATRIX);
            if (c.mlp_bias) add(T_DOWN_B, l, {d}, BIAS);
        }
    }
    norm(T_NORM_F, T_NORM_F_B, -1);
    if (!c.tied_lm_head) add(T_LM_HEAD, -1, {d, V}, MATRIX);
    return t;
}

// ---------------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------------
// GGUF v3 key/value pairs, little-endian, counted as they are added
// (keys in omit are left out)
struct gguf_meta {
    std::string b;
    uint64_t count = 0;
    const std::vector<std::string>& omit;
    explicit gguf_meta(const std::vector<std::string>& o) : omit(o) {}
    template <class T> void put(T v) { b.append((const char*)&v, sizeof v); }
    void str(const std::string& s) { put<uint64_t>(s.size()), b += s; }
    bool key(const std::string& k, uint32_t type) {
        if (std::find(omit.begin(), omit.end(), k) != omit.end()) return false;
        str(k), put<uint32_t>(type), count++;
        return true;
    }
    void u32(const std::string& k, int64_t v) {
        if (key(k, 4)) put<uint32_t>((uint32_t)v);
    }
    void f32(const std::string& k, float v) {
        if (key(k, 6)) put<float>(v);
    }
    void boolean(const std::string& k, bool v) {
        if (key(k, 7)) put<uint8_t>(v ? 1 : 0);
    }
    void text(const std::string& k, const std::string& v) {
        if (key(k, 8)) str(v);
    }
    void texts(const std::string& k, const std::vector<std::string>& v) {
        if (!key(k, 9)) return;
        put<uint32_t>(8), put<uint64_t>(v.size());
        for (const std::string& e : v) str(e);
    }
    void i32s(const std::string& k, const std::vector<int32_t>& v) {
        if (!key(k, 9)) return;
        put<uint32_t>(5), put<uint64_t>(v.size());
        for (int32_t e : v) put<int32_t>(e);
    }
};

// general.architecture: the table's, but Qwen2 (Llama's table in our loader) is its own architecture in llama.cpp
std::string gguf_arch_of(const model_config& c) {
    return c.model_type == "qwen2" ? "qwen2" : arch_table(c.arch).names->gguf_arch;
}

// The hyperparameters under the keys llama.cpp's loader reads for the family (and ours reads back)
void family_keys(gguf_meta& m, const model_config& c) {
    const arch_info& a = arch_table(c.arch);
    const std::string A = gguf_arch_of(c), f = c.model_type;
    m.text("general.architecture", A);
    // not the family's name: llama.cpp's vocabulary loader keys token attributes on general.name ("phi3" there
    // wants "<s>", "</s>" and "<unk>" tokens)
    m.text("general.name", "glassbox random model");
    m.u32(A + ".context_length", c.n_ctx);
    m.u32(A + ".embedding_length", c.d_model);
    m.u32(A + ".block_count", c.n_layer);
    // Mixtral's and OLMoE's llama.cpp read their experts' width here; the Qwen MoE families' from the expert key
    m.u32(A + ".feed_forward_length", a.kind == KIND_MOE ? c.d_ff_expert : c.d_ff);
    m.u32(A + ".attention.head_count", c.n_head);
    m.u32(A + ".attention.head_count_kv", c.n_kv_head);
    if (a.norm == NORM_LAYERNORM) m.f32(A + ".attention.layer_norm_epsilon", c.norm_eps);
    else m.f32(A + ".attention.layer_norm_rms_epsilon", c.norm_eps);
    if (a.pos == POS_ROPE) {
        m.f32(A + ".rope.freq_base", c.rope_theta);
        m.u32(A + ".rope.dimension_count", c.rope_dims);
        m.u32(A + ".attention.key_length", c.d_head);
        m.u32(A + ".attention.value_length", c.d_head);
    }
    if (f == "gpt_neox") m.boolean(A + ".use_parallel_residual", c.parallel);
    if (f == "gemma2" || f == "phi3") m.u32(A + ".attention.sliding_window", c.sliding_window);
    if (f == "gemma2") {
        m.f32(A + ".attn_logit_softcapping", c.attn_softcap);
        m.f32(A + ".final_logit_softcapping", c.final_softcap);
    }
    if (a.kind == KIND_MOE) {
        m.u32(A + ".expert_count", c.n_expert);
        m.u32(A + ".expert_used_count", c.n_expert_used);
        m.u32(A + ".expert_feed_forward_length", c.d_ff_expert);
        if (c.d_ff_shared > 0) m.u32(A + ".expert_shared_feed_forward_length", c.d_ff_shared);
    }
}

// The byte-level vocabulary as llama.cpp's BPE ("gpt2") vocabulary: tokens, their types (1 normal, 3 control),
// merges (none: every byte is its own token), BOS = EOS = <|endoftext|>
void tokenizer_keys(gguf_meta& m, const tokenizer& tok) {
    std::vector<int32_t> types(tok.vocab.size(), 1);
    for (const std::string& sp : tok.specials) {
        auto it = tok.ids.find(sp);
        if (it != tok.ids.end()) types[it->second] = 3;
    }
    if (tok.eos_id >= 0) types[tok.eos_id] = 3;
    std::vector<std::string> merges(tok.merge_rank.size()); // in rank order, "left right" as GGUF spells them
    for (const auto& mr : tok.merge_rank)
        if (mr.second >= 0 && mr.second < (int)merges.size()) merges[mr.second] = mr.first;
    m.text("tokenizer.ggml.model", "gpt2");
    m.text("tokenizer.ggml.pre", "gpt-2");
    m.texts("tokenizer.ggml.tokens", tok.vocab);
    m.i32s("tokenizer.ggml.token_type", types);
    m.texts("tokenizer.ggml.merges", merges);
    if (tok.bos_id >= 0) m.u32("tokenizer.ggml.bos_token_id", tok.bos_id);
    if (tok.eos_id >= 0) m.u32("tokenizer.ggml.eos_token_id", tok.eos_id);
}

// The header: magic, version, counts, metadata, tensor infos (each tensor at a multiple of 32 bytes, the default
// general.alignment), padded; the stream is left at the start of the data section
const uint64_t gguf_align = 32;
std::ofstream begin_gguf(const std::string& path, const std::vector<tensor_spec>& specs, const gguf_meta& meta,
                         const std::function<uint32_t(const tensor_spec&)>& stored) {
    std::string h = "GGUF";
    auto put = [&](auto v) { h.append((const char*)&v, sizeof v); };
    put((uint32_t)3), put((uint64_t)specs.size()), put(meta.count);
    h += meta.b;
    uint64_t offset = 0;
    for (const tensor_spec& s : specs) {
        put((uint64_t)s.name.size()), h += s.name;
        put((uint32_t)s.ne.size());
        for (int64_t e : s.ne) put((uint64_t)e);
        put(stored(s)), put(offset);
        const uint64_t bytes = (uint64_t)ggml_bytes(stored(s), s.row()) * s.rows();
        offset += (bytes + gguf_align - 1) / gguf_align * gguf_align;
    }
    h.append((gguf_align - h.size() % gguf_align) % gguf_align, '\0');
    std::ofstream o(path, std::ios::binary);
    if (!o) throw error("cannot write " + path);
    o.write(h.data(), (std::streamsize)h.size());
    return o;
}

// zeros after a tensor of `bytes` up to the next tensor's alignment
void pad_tensor(std::ofstream& o, uint64_t bytes) {
    static const char zeros[32] = {};
    o.write(zeros, (std::streamsize)((gguf_align - bytes % gguf_align) % gguf_align));
}

// A loaded model's tensor in GGUF order, f32: rows of s.row() values (a matrix's rows are its output columns)
std::vector<float> model_tensor(const model& m, const tensor_spec& s) {
    const model_weights& w = m.weights;
    auto transposed = [](const weight_matrix& x) { // [in][out] -> [out][in]
        const std::vector<float> v = unpack_matrix(x);
        std::vector<float> t(v.size());
        for (int64_t i = 0; i < x.in; i++)
            for (int64_t j = 0; j < x.out; j++) t[(size_t)j * x.in + i] = v[(size_t)i * x.out + j];
        return t;
    };
    auto table = [](const row_table& t) {
        std::vector<float> v((size_t)t.rows * t.cols);
        for (int64_t r = 0; r < t.rows; r++) table_row(&v[(size_t)r * t.cols], t, r);
        return v;
    };
    const layer_weights* L = s.layer >= 0 ? &w.layers[s.layer] : nullptr;
    switch (s.id) {
    case T_TOK_EMB: return table(w.tok_emb);
    case T_LM_HEAD: return table(w.lm_head);
    case T_POS_EMB: return std::vector<float>(w.pos_emb.begin(), w.pos_emb.begin() + (size_t)s.row() * s.rows());
    case T_NORM_F: return w.normf_g;
    case T_NORM_F_B: return w.normf_b;
    case T_ATTN_NORM: return L->norm1_g;
    case T_ATTN_NORM_B: return L->norm1_b;
    case T_FFN_NORM: return L->norm2_g;
    case T_FFN_NORM_B: return L->norm2_b;
    case T_QKV: return transposed(L->w_qkv);
    case T_QKV_B: return L->b_qkv;
    case T_O: return transposed(L->w_o);
    case T_O_B: return L->b_o;
    case T_UP: return transposed(L->w_up);
    case T_UP_B: return L->b_up;
    case T_DOWN: return transposed(L->w_down);
    case T_DOWN_B: return L->b_down;
    default: throw error(std::string("internal: no copy of ") + tensor_id_name(s.id));
    }
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------
int64_t write_random_gguf(const std::string& path, const model_config& cfg, const random_gguf_options& opt) {
    const std::string who = path + ": ";
    if (!is_family(cfg.model_type))
        throw error(who + "model_type '" + cfg.model_type + "' is none of the random GGUF families (" + family_list() + ")");
    // checked as random_gguf_config checks a shape; what it fills in must be there already (settings changed after
    // it, such as GPT-NeoX's parallel blocks or Gemma 2's caps, are written as they are)
    const model_config full = random_gguf_config(cfg.model_type, cfg), &c = cfg;
    if (full.n_kv_head != c.n_kv_head || full.d_head != c.d_head || full.d_ff != c.d_ff || full.rope_dims != c.rope_dims ||
        full.n_expert != c.n_expert || full.n_expert_used != c.n_expert_used || full.d_ff_expert != c.d_ff_expert ||
        full.d_ff_shared != c.d_ff_shared || full.qkv_bias != c.qkv_bias || full.mlp_bias != c.mlp_bias)
        throw error("internal: write_random_gguf needs the complete config random_gguf_config gives");
    int64_t bv, bb;
    if (!ggml_block(opt.type, bv, bb)) throw error(who + "unknown type " + std::to_string(opt.type));
    const std::vector<tensor_spec> specs = tensor_list(c);
    const uint32_t matrix_type = opt.dequantised ? (uint32_t)GGML_F32 : opt.type;
    auto stored = [&](const tensor_spec& s) { return s.fill == MATRIX ? matrix_type : (uint32_t)GGML_F32; };
    for (const tensor_spec& s : specs)
        if (s.fill == MATRIX && s.row() % bv)
            throw error(who + std::string(ggml_type_name(opt.type)) + " blocks of " + std::to_string(bv) + " values do not divide " +
                        s.name + "'s rows of " + std::to_string(s.row()));

    gguf_meta meta(opt.omit);
    family_keys(meta, c);
    tokenizer_keys(meta, random_byte_tokenizer((size_t)c.vocab_size));
    std::ofstream o = begin_gguf(path, specs, meta, stored);

    // drawn row by row in file order (a seed names one model), rounded through the type, written: memory stays a row
    normal_source ns(opt.seed);
    std::vector<float> row, back;
    std::vector<uint8_t> packed, exact;
    int64_t n_params = 0;
    for (const tensor_spec& s : specs) {
        const int64_t n = s.row();
        row.resize((size_t)n), back.resize((size_t)n);
        packed.resize(ggml_bytes(stored(s), n)), exact.resize(ggml_bytes(opt.type, n));
        const double sd = s.fill == MATRIX || s.fill == DENSE ? opt.std : opt.aux_std;
        for (int64_t r = 0; r < s.rows(); r++) {
            for (float& x : row) x = (float)((s.fill == GAIN ? 1.0 : 0.0) + (sd > 0 ? ns.next() * sd : 0.0));
            if (s.fill == MATRIX && opt.dequantised) { // what the type keeps of the row, as F32
                quantize(exact.data(), row.data(), opt.type, n);
                dequantize(back.data(), exact.data(), opt.type, n);
                quantize(packed.data(), back.data(), GGML_F32, n);
            } else {
                quantize(packed.data(), row.data(), stored(s), n);
            }
            o.write((const char*)packed.data(), (std::streamsize)packed.size());
        }
        n_params += n * s.rows();
        pad_tensor(o, (uint64_t)ggml_bytes(stored(s), n) * s.rows());
    }
    if (!o) throw error("cannot write " + path + " (disk full?)");
    return n_params;
}

int64_t write_model_gguf(const std::string& path, const model& m, uint32_t type) {
    const model_config& c = m.config;
    if (c.model_type != "gpt2")
        throw error(m.path + ": quantize writes GPT-2-family models so far; this is " +
                    (c.model_type.empty() ? std::string("another family") : c.model_type));
    int64_t bv, bb;
    if (!ggml_block(type, bv, bb)) throw error("quantize: unknown type " + std::to_string(type));
    const std::vector<tensor_spec> specs = tensor_list(c);
    for (const tensor_spec& s : specs)
        if (s.fill == MATRIX && s.row() % bv)
            throw error(std::string(ggml_type_name(type)) + " holds rows of whole " + std::to_string(bv) + "-value blocks, and " +
                        s.name + "'s rows have " + std::to_string(s.row()) + " values");
    auto stored = [&](const tensor_spec& s) { return s.fill == MATRIX ? type : (uint32_t)GGML_F32; };
    const std::vector<std::string> omit;
    gguf_meta meta(omit);
    family_keys(meta, c);
    tokenizer_keys(meta, m.tok);
    std::ofstream o = begin_gguf(path, specs, meta, stored);
    std::vector<uint8_t> packed;
    int64_t n_params = 0;
    for (const tensor_spec& s : specs) {
        const std::vector<float> v = model_tensor(m, s);
        if ((int64_t)v.size() != s.row() * s.rows())
            throw error("internal: " + s.name + " has " + std::to_string(v.size()) + " values in the loaded model");
        const size_t row_bytes = ggml_bytes(stored(s), s.row());
        packed.resize(row_bytes * (size_t)s.rows());
        for (int64_t r = 0; r < s.rows(); r++)
            quantize(&packed[(size_t)r * row_bytes], &v[(size_t)r * s.row()], stored(s), s.row());
        o.write((const char*)packed.data(), (std::streamsize)packed.size());
        pad_tensor(o, packed.size());
        n_params += (int64_t)v.size();
    }
    if (!o) throw error("cannot write " + path + " (disk full?)");
    return n_params;
}

} // namespace gb
