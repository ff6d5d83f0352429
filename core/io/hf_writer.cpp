// Writing GPT-2 models as Hugging Face folders, and seeded random GPT-2, Llama and Marian models for benchmarks
// (random models as GGUF: gguf_writer.cpp).
//
// Sections: GPT-2 writer | the byte-level tokenizer | random GPT-2 | random Llama | random Marian
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/random_source.h"
#include "io/safetensors.h"
#include "io/writers.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "model/quant.h"
#include "util/error.h"

namespace gb {

static void write_text(const std::string& path, const std::string& text) {
    std::ofstream o(path, std::ios::binary);
    o << text;
    if (!o) throw error("cannot write " + path);
}

// A byte-level BPE tokenizer as GPT-2 folders hold it: vocab.json (token -> id) and merges.txt. The loader reads
// this pair for any model_type when the folder has no tokenizer.json (load_folder_tokenizer).
static void write_bpe_tokenizer(const std::string& dir, const tokenizer& tok) {
    nlohmann::json vocab = nlohmann::json::object();
    for (size_t i = 0; i < tok.vocab.size(); i++) vocab[tok.vocab[i]] = (int)i;
    write_text(dir + "/vocab.json", vocab.dump() + "\n");
    // merges.txt lists "left right" pairs in rank order (rank = line number after the version line)
    std::vector<std::pair<int, std::string>> merges;
    for (const auto& kv : tok.merge_rank) merges.push_back({kv.second, kv.first});
    std::sort(merges.begin(), merges.end());
    std::string mtxt = "#version: 0.2\n";
    for (const auto& mg : merges) mtxt += mg.second + "\n";
    write_text(dir + "/merges.txt", mtxt);
}

static void create_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw error("cannot create " + dir + ": " + ec.message());
}

// ---------------------------------------------------------------------------------------------
// GPT-2 writer
// ---------------------------------------------------------------------------------------------
void save_hf_gpt2(const std::string& dir, const model& m, const std::string& dtype) {
    const model_config& c = m.config;
    if (c.arch != ARCH_GPT2) throw error("save_hf_gpt2: model is not GPT-2");
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
        throw error("save_hf_gpt2: dtype " + dtype + " is not supported (expected F32, F16 or BF16)");
    if ((int)m.weights.layers.size() != c.n_layer)
        throw error("save_hf_gpt2: config says " + std::to_string(c.n_layer) + " layers, weights hold " +
                    std::to_string(m.weights.layers.size()));
    st_dtype dt = dtype == "F16" ? ST_F16 : dtype == "BF16" ? ST_BF16 : ST_F32;
    for (const layer_weights& L : m.weights.layers)
        for (const weight_matrix* w : {&L.w_qkv, &L.w_o, &L.w_up, &L.w_down})
            if (w->amx()) // its digits give the weights back only to within 2^-30 of a row's largest
                throw error("save_hf_gpt2: the weights are packed for the AMX kernel and cannot be written exactly "
                            "(pack them with pack_matrix(..., exact = true))");
    create_dir(dir);

    nlohmann::json cfg = {{"model_type", "gpt2"},
                          {"architectures", {"GPT2LMHeadModel"}},
                          {"n_layer", c.n_layer},
                          {"n_head", c.n_head},
                          {"n_embd", c.d_model},
                          {"n_inner", c.d_ff},
                          {"vocab_size", c.vocab_size},
                          {"n_positions", c.n_ctx},
                          {"n_ctx", c.n_ctx},
                          {"layer_norm_epsilon", c.norm_eps},
                          {"activation_function", "gelu_new"},
                          {"bos_token_id", m.tok.bos_id},
                          {"eos_token_id", m.tok.eos_id}};
    write_text(dir + "/config.json", cfg.dump(2) + "\n");

    const int64_t d = c.d_model, V = c.vocab_size, ff = c.d_ff;
    const model_weights& w = m.weights;
    std::vector<st_out> t;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data) {
        t.push_back({name, std::move(shape), data, dt});
    };
    add("wte.weight", {V, d}, table_f32(w.tok_emb));
    add("wpe.weight", {c.n_ctx, d}, w.pos_emb);
    for (int l = 0; l < c.n_layer; l++) {
        const layer_weights& L = w.layers[l];
        std::string p = "h." + std::to_string(l) + ".";
        add(p + "ln_1.weight", {d}, L.norm1_g);
        add(p + "ln_1.bias", {d}, L.norm1_b);
        add(p + "attn.c_attn.weight", {d, 3 * d}, unpack_matrix(L.w_qkv));
        add(p + "attn.c_attn.bias", {3 * d}, L.b_qkv);
        add(p + "attn.c_proj.weight", {d, d}, unpack_matrix(L.w_o));
        add(p + "attn.c_proj.bias", {d}, L.b_o);
        add(p + "ln_2.weight", {d}, L.norm2_g);
        add(p + "ln_2.bias", {d}, L.norm2_b);
        add(p + "mlp.c_fc.weight", {d, ff}, unpack_matrix(L.w_up));
        add(p + "mlp.c_fc.bias", {ff}, L.b_up);
        add(p + "mlp.c_proj.weight", {ff, d}, unpack_matrix(L.w_down));
        add(p + "mlp.c_proj.bias", {d}, L.b_down);
    }
    add("ln_f.weight", {d}, w.normf_g);
    add("ln_f.bias", {d}, w.normf_b);
    if (!w.lm_head.empty()) add("lm_head.weight", {V, d}, table_f32(w.lm_head));
    write_safetensors(dir + "/model.safetensors", t);

    write_bpe_tokenizer(dir, m.tok);
}

// ---------------------------------------------------------------------------------------------
// The byte-level tokenizer
// ---------------------------------------------------------------------------------------------
tokenizer random_byte_tokenizer(size_t V) {
    tokenizer t;
    t.kind = TOK_BYTE_BPE;
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; b++) bs.push_back(b);
    for (int b = 0xa1; b <= 0xac; b++) bs.push_back(b);
    for (int b = 0xae; b <= 0xff; b++) bs.push_back(b);
    std::vector<uint32_t> cps(bs.begin(), bs.end());
    int extra = 0;
    for (int b = 0; b < 256; b++)
        if (std::find(bs.begin(), bs.end(), b) == bs.end()) bs.push_back(b), cps.push_back(256 + extra++);
    t.vocab.assign(V, "");
    auto utf8 = [](uint32_t cp) {
        std::string o;
        if (cp < 0x80) o += (char)cp;
        else o += (char)(0xc0 | (cp >> 6)), o += (char)(0x80 | (cp & 0x3f));
        return o;
    };
    // ids 0..255 in byte order, as GPT-2's own vocabulary starts
    for (int i = 0; i < 256; i++) t.vocab[bs[i]] = utf8(cps[i]);
    for (size_t i = 256; i + 1 < V; i++) t.vocab[i] = "<|filler_" + std::to_string(i) + "|>";
    t.vocab[V - 1] = "<|endoftext|>";
    for (size_t i = 0; i < V; i++) t.ids[t.vocab[i]] = (int)i;
    t.specials = {"<|endoftext|>"};
    t.eos_id = t.bos_id = (int)V - 1;
    return t;
}

// ---------------------------------------------------------------------------------------------
// Random GPT-2
// ---------------------------------------------------------------------------------------------
model random_gpt2(const model_config& cfg, uint64_t seed) {
    model m;
    m.config = cfg;
    model_config& c = m.config;
    c.arch = ARCH_GPT2;
    c.model_type = "gpt2";
    if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
    if (c.d_head == 0 && c.n_head > 0) c.d_head = c.d_model / c.n_head;
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (c.vocab_size < 257) throw error("random_gpt2: vocab_size must be at least 257 (256 bytes + end-of-text)");
    if (c.n_layer < 1 || c.n_head < 1 || c.d_model < 1 || c.n_ctx < 1 || c.d_ff < 1)
        throw error("random_gpt2: n_layer, n_head, d_model, d_ff and n_ctx must be positive");
    if (c.d_model % c.n_head != 0 || c.d_head * c.n_head != c.d_model || c.n_kv_head != c.n_head)
        throw error("random_gpt2: d_model " + std::to_string(c.d_model) + " must be n_head (" +
                    std::to_string(c.n_head) + ") x d_head, with as many kv heads as heads");
    const size_t d = c.d_model, V = c.vocab_size, ff = c.d_ff;
    normal_source ns(seed);
    model_weights& w = m.weights;
    w.tok_emb = table_from_f32(ns.fill(V * d, 0.02), V, d);
    w.pos_emb = ns.fill((size_t)c.n_ctx * d, 0.02);
    w.layers.resize(c.n_layer);
    for (layer_weights& L : w.layers) {
        L.norm1_g.assign(d, 1.0f);
        L.norm1_b.assign(d, 0.0f);
        L.w_qkv = pack_matrix(ns.fill(d * 3 * d, 0.02), d, 3 * d, true);
        L.b_qkv.assign(3 * d, 0.0f);
        L.w_o = pack_matrix(ns.fill(d * d, 0.02), d, d, true);
        L.b_o.assign(d, 0.0f);
        L.norm2_g.assign(d, 1.0f);
        L.norm2_b.assign(d, 0.0f);
        L.w_up = pack_matrix(ns.fill(d * ff, 0.02), d, ff, true);
        L.b_up.assign(ff, 0.0f);
        L.w_down = pack_matrix(ns.fill(ff * d, 0.02), ff, d, true);
        L.b_down.assign(d, 0.0f);
    }
    w.normf_g.assign(d, 1.0f);
    w.normf_b.assign(d, 0.0f);

    m.tok = random_byte_tokenizer(V);
    return m;
}

// ---------------------------------------------------------------------------------------------
// Random Llama, streamed to disk
// ---------------------------------------------------------------------------------------------
// The shortest decimal that reads back as f (1e-05, not 9.999999747378752e-06), as config.json files spell it.
static double tidy(float f) {
    char b[32];
    for (int digits = 6; digits <= 9; digits++) {
        std::snprintf(b, sizeof b, "%.*g", digits, (double)f);
        if ((float)std::strtod(b, nullptr) == f) break;
    }
    return std::strtod(b, nullptr);
}

// Fills the defaults (n_kv_head, d_ff, d_head) and refuses shapes the loader would refuse
static void check_random_llama(model_config& c, const std::string& who) {
    if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (c.vocab_size < 257) throw error(who + "vocab_size must be at least 257 (256 bytes + end-of-text)");
    if (c.n_layer < 1 || c.n_head < 1 || c.n_kv_head < 1 || c.d_model < 1 || c.n_ctx < 1 || c.d_ff < 1)
        throw error(who + "n_layer, n_head, n_kv_head, d_model, d_ff and n_ctx must be positive");
    if (c.d_model % c.n_head != 0)
        throw error(who + "d_model " + std::to_string(c.d_model) + " is not a multiple of n_head " + std::to_string(c.n_head));
    c.d_head = c.d_model / c.n_head;
    if (c.d_head % 2) throw error(who + "head size " + std::to_string(c.d_head) + " is odd (RoPE rotates pairs)");
    if (c.n_kv_head > c.n_head || c.n_head % c.n_kv_head != 0)
        throw error(who + "n_head " + std::to_string(c.n_head) + " is not a multiple of n_kv_head " + std::to_string(c.n_kv_head));
    if (!(c.rope_theta > 0) || !(c.norm_eps > 0)) throw error(who + "rope_theta and norm_eps must be positive");
}

int64_t write_random_llama_hf(const std::string& dir, const model_config& cfg, uint64_t seed, const std::string& dtype) {
    model_config c = cfg;
    const std::string who = "write_random_llama_hf: ";
    if (dtype != "F32" && dtype != "F16" && dtype != "BF16")
        throw error(who + "dtype " + dtype + " is not supported (expected F32, F16 or BF16)");
    check_random_llama(c, who);
    create_dir(dir);

    tokenizer tok = random_byte_tokenizer((size_t)c.vocab_size);
    const char* torch_dtype = dtype == "F16" ? "float16" : dtype == "BF16" ? "bfloat16" : "float32";
    // what the loader reads (parse_hf_config), plus what transformers' LlamaConfig would need to open it too;
    // no rope_scaling: plain RoPE at rope_theta
    nlohmann::json config = {{"model_type", "llama"},
                             {"architectures", {"LlamaForCausalLM"}},
                             {"hidden_size", c.d_model},
                             {"intermediate_size", c.d_ff},
                             {"num_hidden_layers", c.n_layer},
                             {"num_attention_heads", c.n_head},
                             {"num_key_value_heads", c.n_kv_head},
                             {"head_dim", c.d_head},
                             {"vocab_size", c.vocab_size},
                             {"max_position_embeddings", c.n_ctx},
                             {"rms_norm_eps", tidy(c.norm_eps)},
                             {"rope_theta", tidy(c.rope_theta)},
                             {"rope_scaling", nullptr},
                             {"tie_word_embeddings", c.tied_lm_head},
                             {"hidden_act", "silu"},
                             {"attention_bias", false},
                             {"mlp_bias", false},
                             {"bos_token_id", tok.bos_id},
                             {"eos_token_id", tok.eos_id},
                             {"torch_dtype", torch_dtype}};
    write_text(dir + "/config.json", config.dump(2) + "\n");

    // HF's names and nn.Linear shapes [out][in], in the order a checkpoint lists them. Norm gains are 1, every
    // matrix N(0, 0.02) (GPT-2's initialisation): RMSNorm before each block keeps the blocks' inputs at unit scale,
    // and each block adds O(1) to the residual, so 16 layers at d 2048 stay far from overflow, in F16 too.
    const st_dtype dt = dtype == "F16" ? ST_F16 : dtype == "BF16" ? ST_BF16 : ST_F32;
    const int64_t d = c.d_model, V = c.vocab_size, ff = c.d_ff, q = (int64_t)c.n_head * c.d_head,
                  kv = (int64_t)c.n_kv_head * c.d_head;
    std::vector<st_spec> specs;
    std::vector<bool> gain; // [tensor] a norm gain (all 1), else a random matrix
    auto add = [&](const std::string& name, std::vector<int64_t> shape, bool is_gain = false) {
        specs.push_back({name, std::move(shape), dt});
        gain.push_back(is_gain);
    };
    add("model.embed_tokens.weight", {V, d});
    for (int l = 0; l < c.n_layer; l++) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        add(p + "input_layernorm.weight", {d}, true);
        add(p + "self_attn.q_proj.weight", {q, d});
        add(p + "self_attn.k_proj.weight", {kv, d});
        add(p + "self_attn.v_proj.weight", {kv, d});
        add(p + "self_attn.o_proj.weight", {d, q});
        add(p + "post_attention_layernorm.weight", {d}, true);
        add(p + "mlp.gate_proj.weight", {ff, d});
        add(p + "mlp.up_proj.weight", {ff, d});
        add(p + "mlp.down_proj.weight", {d, ff});
    }
    add("model.norm.weight", {d}, true);
    if (!c.tied_lm_head) add("lm_head.weight", {V, d});

    // drawn chunk by chunk as the file is written: memory stays one chunk, not the 4-byte-per-parameter
    // model (5 GB at Llama-3.2-1B's shape); the draws follow file order, so a seed names one model
    normal_source ns(seed);
    int64_t n_params = 0;
    for (const st_spec& s : specs) {
        int64_t n = 1;
        for (int64_t e : s.shape) n *= e;
        n_params += n;
    }
    write_safetensors_streaming(dir + "/model.safetensors", specs, [&](size_t i, float* out, size_t n) {
        if (gain[i]) std::fill(out, out + n, 1.0f);
        else
            for (size_t e = 0; e < n; e++) out[e] = (float)(ns.next() * 0.02);
    });
    write_bpe_tokenizer(dir, tok);
    return n_params;
}

// ---------------------------------------------------------------------------------------------
// Random Marian, streamed to disk
// ---------------------------------------------------------------------------------------------
int64_t write_random_marian_hf(const std::string& dir, const model_config& cfg, int encoder_layers, uint64_t seed) {
    model_config c = cfg;
    const std::string who = "write_random_marian_hf: ";
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (c.vocab_size < 258) throw error(who + "vocab_size must be at least 258 (256 bytes, the start token and end-of-text)");
    if (c.n_layer < 1 || encoder_layers < 1 || c.n_head < 1 || c.d_model < 2 || c.n_ctx < 1 || c.d_ff < 1)
        throw error(who + "layers, n_head, d_model (at least 2), d_ff and n_ctx must be positive");
    if (c.d_model % c.n_head != 0)
        throw error(who + "d_model " + std::to_string(c.d_model) + " is not a multiple of n_head " + std::to_string(c.n_head));
    create_dir(dir);
    // the byte-level vocabulary: <|endoftext|> (V - 1) ends a source and a translation, as Marian's </s>; the filler
    // before it is the decoder's start, as Marian's <pad> (the loader reads the ids from config.json)
    tokenizer tok = random_byte_tokenizer((size_t)c.vocab_size);
    const int eos = c.vocab_size - 1, start = c.vocab_size - 2;
    nlohmann::json config = {{"model_type", "marian"},
                             {"architectures", {"MarianMTModel"}},
                             {"is_encoder_decoder", true},
                             {"d_model", c.d_model},
                             {"encoder_layers", encoder_layers},
                             {"decoder_layers", c.n_layer},
                             {"encoder_attention_heads", c.n_head},
                             {"decoder_attention_heads", c.n_head},
                             {"encoder_ffn_dim", c.d_ff},
                             {"decoder_ffn_dim", c.d_ff},
                             {"vocab_size", c.vocab_size},
                             {"decoder_vocab_size", c.vocab_size},
                             {"share_encoder_decoder_embeddings", true},
                             {"max_position_embeddings", c.n_ctx},
                             {"activation_function", "swish"},
                             {"scale_embedding", true},
                             {"static_position_embeddings", true},
                             {"normalize_before", false},
                             {"tie_word_embeddings", true},
                             {"pad_token_id", start},
                             {"decoder_start_token_id", start},
                             {"eos_token_id", eos},
                             {"forced_eos_token_id", eos},
                             {"torch_dtype", "float32"}};
    write_text(dir + "/config.json", config.dump(2) + "\n");

    // HF's names in checkpoint order; matrices N(0, 0.02), biases 0, norms (1, 0); Marian's sinusoids are not stored
    // (the loader computes them), final_logits_bias is zeros as in a converted checkpoint
    enum fill_kind { RANDOM, ZEROS, ONES };
    const int64_t d = c.d_model, V = c.vocab_size, ff = c.d_ff;
    std::vector<st_spec> specs;
    std::vector<fill_kind> kind;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, fill_kind k) {
        specs.push_back({name, std::move(shape), ST_F32});
        kind.push_back(k);
    };
    auto linear = [&](const std::string& name, int64_t out, int64_t in) {
        add(name + ".weight", {out, in}, RANDOM);
        add(name + ".bias", {out}, ZEROS);
    };
    auto norm = [&](const std::string& name) {
        add(name + ".weight", {d}, ONES);
        add(name + ".bias", {d}, ZEROS);
    };
    add("model.shared.weight", {V, d}, RANDOM);
    for (const char* stack : {"encoder", "decoder"}) {
        const bool dec = std::string(stack) == "decoder";
        for (int l = 0; l < (dec ? c.n_layer : encoder_layers); l++) {
            const std::string p = "model." + std::string(stack) + ".layers." + std::to_string(l) + ".";
            for (const char* k : {"q_proj", "k_proj", "v_proj", "out_proj"}) linear(p + "self_attn." + k, d, d);
            norm(p + "self_attn_layer_norm");
            if (dec) {
                for (const char* k : {"q_proj", "k_proj", "v_proj", "out_proj"}) linear(p + "encoder_attn." + k, d, d);
                norm(p + "encoder_attn_layer_norm");
            }
            linear(p + "fc1", ff, d);
            linear(p + "fc2", d, ff);
            norm(p + "final_layer_norm");
        }
    }
    add("final_logits_bias", {1, V}, ZEROS);
    normal_source ns(seed);
    int64_t n_params = 0;
    for (size_t i = 0; i < specs.size(); i++)
        if (specs[i].name != "final_logits_bias") n_params += specs[i].shape.size() == 1 ? specs[i].shape[0]
                                                                                          : specs[i].shape[0] * specs[i].shape[1];
    write_safetensors_streaming(dir + "/model.safetensors", specs, [&](size_t i, float* out, size_t n) {
        if (kind[i] == RANDOM)
            for (size_t e = 0; e < n; e++) out[e] = (float)(ns.next() * 0.02);
        else std::fill(out, out + n, kind[i] == ONES ? 1.0f : 0.0f);
    });
    write_bpe_tokenizer(dir, tok);
    return n_params;
}

} // namespace gb
