// Tiny encoders in HF layout and their double-precision reference (see tiny_encoder.h). The names are written
// from HF's modeling_bert / modeling_roberta / modeling_distilbert classes, independently of core/model/arch.cpp.
#include "tiny_encoder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "io/safetensors.h"

namespace {

// Logical key -> the family's HF name. Keys: emb.word emb.pos emb.type emb.ln.{w,b}; L.{q,k,v,o,up,down}.{w,b},
// L.ln1.{w,b} L.ln2.{w,b} (with the layer after "L"); head.dense.{w,b} head.ln.{w,b} head.decoder head.bias.
std::string hf_name(const encoder_spec& s, const std::string& key, int l = -1) {
    const bool distil = s.family == "distilbert";
    const std::string prefix = !s.prefixed ? "" : distil ? "distilbert." : s.family + ".";
    const std::string wb = key.back() == 'w' ? "weight" : "bias";
    const std::string part = key.substr(0, key.rfind('.'));
    if (key == "emb.word") return prefix + "embeddings.word_embeddings.weight";
    if (key == "emb.pos") return prefix + "embeddings.position_embeddings.weight";
    if (key == "emb.type") return prefix + "embeddings.token_type_embeddings.weight";
    if (part == "emb.ln") return prefix + "embeddings.LayerNorm." + wb;
    if (l >= 0) {
        const std::string L = std::to_string(l);
        if (distil) {
            static const std::map<std::string, std::string> n = {
                {"q", "attention.q_lin"}, {"k", "attention.k_lin"}, {"v", "attention.v_lin"}, {"o", "attention.out_lin"},
                {"ln1", "sa_layer_norm"}, {"up", "ffn.lin1"},       {"down", "ffn.lin2"},   {"ln2", "output_layer_norm"}};
            return prefix + "transformer.layer." + L + "." + n.at(part) + "." + wb;
        }
        static const std::map<std::string, std::string> n = {
            {"q", "attention.self.query"}, {"k", "attention.self.key"}, {"v", "attention.self.value"},
            {"o", "attention.output.dense"}, {"ln1", "attention.output.LayerNorm"}, {"up", "intermediate.dense"},
            {"down", "output.dense"}, {"ln2", "output.LayerNorm"}};
        return prefix + "encoder.layer." + L + "." + n.at(part) + "." + wb;
    }
    if (distil) {
        if (part == "head.dense") return "vocab_transform." + wb;
        if (part == "head.ln") return "vocab_layer_norm." + wb;
        if (key == "head.decoder") return "vocab_projector.weight";
        if (key == "head.bias") return "vocab_projector.bias";
    } else if (s.family == "roberta") {
        if (part == "head.dense") return "lm_head.dense." + wb;
        if (part == "head.ln") return "lm_head.layer_norm." + wb;
        if (key == "head.decoder") return "lm_head.decoder.weight";
        if (key == "head.bias") return "lm_head.bias";
    } else {
        if (part == "head.dense") return "cls.predictions.transform.dense." + wb;
        if (part == "head.ln") return "cls.predictions.transform.LayerNorm." + wb;
        if (key == "head.decoder") return "cls.predictions.decoder.weight";
        if (key == "head.bias") return "cls.predictions.bias";
    }
    throw std::runtime_error("tiny_encoder: no HF name for " + key);
}

std::string layer_key(const std::string& k, int l) { return "L" + std::to_string(l) + "." + k; }

// GPT-2's byte -> printable character map (RoBERTa's byte-level vocabulary), as UTF-8
std::vector<std::string> byte_chars() {
    std::vector<int> cps(256, -1);
    int next = 256;
    for (int b = 0; b < 256; b++) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cps[b] = printable ? b : next++;
    }
    std::vector<std::string> out;
    for (int cp : cps) {
        std::string u;
        if (cp < 0x80) u += (char)cp;
        else u += (char)(0xC0 | (cp >> 6)), u += (char)(0x80 | (cp & 0x3F));
        out.push_back(u);
    }
    return out;
}

void write_tokenizer(const std::string& dir, const encoder_spec& s) {
    if (s.family == "roberta") { // byte-level BPE without merges: <s> <pad> </s> <unk>, the 256 bytes, <mask> last
        nlohmann::json vocab = nlohmann::json::object();
        std::vector<std::string> toks = {"<s>", "<pad>", "</s>", "<unk>"};
        for (const std::string& c : byte_chars()) toks.push_back(c);
        toks.push_back("<mask>");
        if ((int)toks.size() > s.vocab) throw std::runtime_error("tiny_encoder: roberta needs vocab >= 261");
        for (size_t i = 0; i < toks.size(); i++) vocab[toks[i]] = (int)i;
        std::ofstream(dir + "/vocab.json") << vocab.dump();
        std::ofstream(dir + "/merges.txt") << "#version: 0.2\n";
        return;
    }
    std::vector<std::string> toks = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?"};
    for (const char* w : {"the", "cat", "sat", "on", "mat", "paris", "is", "capital", "of", "france", "dog", "a"})
        toks.push_back(w);
    for (char c = 'a'; c <= 'z'; c++) toks.push_back(std::string(1, c)), toks.push_back("##" + std::string(1, c));
    for (int i = 0; (int)toks.size() < s.vocab; i++) toks.push_back("w" + std::to_string(i));
    toks.resize(std::min((int)toks.size(), s.vocab));
    std::ofstream f(dir + "/vocab.txt");
    for (const std::string& t : toks) f << t << "\n";
}

} // namespace

const std::vector<float>& tiny_encoder::at(const std::string& name) const {
    auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("tiny_encoder: no tensor " + name);
    return it->second;
}

tiny_encoder write_tiny_encoder(const std::string& dir, const encoder_spec& s) {
    tiny_encoder m;
    m.dir = dir;
    m.spec = s;
    const bool distil = s.family == "distilbert";
    m.pos_offset = s.family == "roberta" ? 2 : 0;
    const int d = s.d_model, ff = s.d_ff, V = s.vocab, P = s.n_pos + m.pos_offset;
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float sd, float mean = 0) {
        std::vector<float> v(n);
        for (float& x : v) x = mean + sd * nd(rng);
        return v;
    };
    std::vector<gb::st_out> out;
    auto add = [&](const std::string& key, std::vector<int64_t> shape, std::vector<float> v, int l = -1) {
        out.push_back({hf_name(s, key, l), shape, v, gb::ST_F32});
        m.w[l >= 0 ? layer_key(key, l) : key] = std::move(v);
    };
    add("emb.word", {V, d}, rnd((size_t)V * d, s.std));
    add("emb.pos", {P, d}, rnd((size_t)P * d, s.std));
    if (!distil) add("emb.type", {s.n_type, d}, rnd((size_t)s.n_type * d, s.std));
    add("emb.ln.w", {d}, rnd(d, 0.1f, 1.0f));
    add("emb.ln.b", {d}, rnd(d, 0.1f));
    for (int l = 0; l < s.n_layer; l++) {
        for (const char* k : {"q", "k", "v", "o"}) {
            add(std::string(k) + ".w", {d, d}, rnd((size_t)d * d, s.std), l);
            add(std::string(k) + ".b", {d}, rnd(d, 0.1f), l);
        }
        add("ln1.w", {d}, rnd(d, 0.1f, 1.0f), l);
        add("ln1.b", {d}, rnd(d, 0.1f), l);
        add("up.w", {ff, d}, rnd((size_t)ff * d, s.std), l);
        add("up.b", {ff}, rnd(ff, 0.1f), l);
        add("down.w", {d, ff}, rnd((size_t)d * ff, s.std), l);
        add("down.b", {d}, rnd(d, 0.1f), l);
        add("ln2.w", {d}, rnd(d, 0.1f, 1.0f), l);
        add("ln2.b", {d}, rnd(d, 0.1f), l);
    }
    add("head.dense.w", {d, d}, rnd((size_t)d * d, s.std));
    add("head.dense.b", {d}, rnd(d, 0.1f));
    add("head.ln.w", {d}, rnd(d, 0.1f, 1.0f));
    add("head.ln.b", {d}, rnd(d, 0.1f));
    if (!s.tied) add("head.decoder", {V, d}, rnd((size_t)V * d, s.std));
    add("head.bias", {V}, rnd(V, 0.5f));

    std::filesystem::create_directories(dir);
    gb::write_safetensors(dir + "/model.safetensors", out);
    nlohmann::json c;
    c["model_type"] = s.family;
    c["vocab_size"] = V;
    c["max_position_embeddings"] = P;
    if (distil) {
        c["n_layers"] = s.n_layer, c["n_heads"] = s.n_head, c["dim"] = d, c["hidden_dim"] = ff;
        c["activation"] = "gelu";
        c["tie_weights_"] = s.tied;
    } else {
        c["num_hidden_layers"] = s.n_layer, c["num_attention_heads"] = s.n_head, c["hidden_size"] = d;
        c["intermediate_size"] = ff, c["hidden_act"] = "gelu", c["type_vocab_size"] = s.n_type;
        c["layer_norm_eps"] = 1e-12;
        c["tie_word_embeddings"] = s.tied;
        c["position_embedding_type"] = "absolute";
        if (s.family == "roberta") c["pad_token_id"] = 1;
    }
    std::ofstream(dir + "/config.json") << c.dump(1);
    write_tokenizer(dir, s);
    return m;
}

ref_trace reference_encoder(const tiny_encoder& m, const std::vector<int>& tokens, const gb::ablation& ab,
                            const ref_options& opt) {
    const encoder_spec& s = m.spec;
    const int n = (int)tokens.size(), d = s.d_model, H = s.n_head, dh = d / H, L = s.n_layer, V = s.vocab, ff = s.d_ff;
    const double eps = 1e-12;
    using vec = std::vector<double>;
    auto W = [&](const std::string& k, int l) -> const std::vector<float>& { return m.at(layer_key(k, l)); };
    ref_trace r;
    ref_points at(r, opt, L, n, d, dh);
    auto layernorm = [&](const vec& v, const std::vector<float>& g, const std::vector<float>& b, bool off) {
        return ref_layernorm(v, g, b, n, d, eps, off);
    };
    auto linear = [&](const std::vector<float>& w, const std::vector<float>& b, const vec& v, int out, int in) {
        return ref_linear(w, b, v, n, out, in);
    };
    auto gelu = [](vec& v) {
        for (double& x : v) x = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    };

    vec x((size_t)n * d);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++)
            x[(size_t)t * d + i] = m.at("emb.word")[(size_t)tokens[t] * d + i] +
                                   m.at("emb.pos")[(size_t)(t + m.pos_offset) * d + i] +
                                   (s.family == "distilbert" ? 0.0 : m.at("emb.type")[i]); // token type 0
    x = layernorm(x, m.at("emb.ln.w"), m.at("emb.ln.b"), false);
    at.at(gb::HOOK_RESID_PRE, 0, x);
    for (int l = 0; l < L; l++) {
        const bool no_norm = ab.no_layernorm.covers(l), no_res = ab.no_residual.covers(l), no_attn = ab.no_attention.covers(l);
        if (l > 0) at.at(gb::HOOK_RESID_PRE, l, x);
        vec h = x;
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec q = linear(W("q.w", l), W("q.b", l), h, d, d), k = linear(W("k.w", l), W("k.b", l), h, d, d),
            v = linear(W("v.w", l), W("v.b", l), h, d, d);
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, k);
        at.at(gb::HOOK_V, l, v);
        vec pattern = ref_full_pattern(q, k, n, H, dh); // every query sees every key
        at.at(gb::HOOK_PATTERN, l, pattern);
        vec z = ref_pattern_values(pattern, v, n, H, dh, l, ab);
        at.at(gb::HOOK_Z, l, z);
        const std::vector<float>& wo = W("o.w", l);
        vec head_out = ref_head_outputs(wo, z, n, H, dh, d);
        at.at(gb::HOOK_HEAD_OUT, l, head_out);
        vec a = linear(wo, W("o.b", l), z, d, d);
        if (no_attn) std::fill(a.begin(), a.end(), 0.0);
        at.at(gb::HOOK_ATTN_OUT, l, a);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        x = layernorm(x, W("ln1.w", l), W("ln1.b", l), no_norm);
        at.at(gb::HOOK_RESID_MID, l, x);
        h = x;
        at.at(gb::HOOK_MLP_IN, l, h);
        vec u = linear(W("up.w", l), W("up.b", l), h, ff, d);
        gelu(u);
        at.at(gb::HOOK_MLP_POST, l, u);
        vec o = linear(W("down.w", l), W("down.b", l), u, d, ff);
        at.at(gb::HOOK_MLP_OUT, l, o);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? o[i] : x[i] + o[i];
        x = layernorm(x, W("ln2.w", l), W("ln2.b", l), no_norm);
        at.at(gb::HOOK_RESID_POST, l, x);
    }
    vec t = linear(m.at("head.dense.w"), m.at("head.dense.b"), x, d, d);
    gelu(t);
    t = layernorm(t, m.at("head.ln.w"), m.at("head.ln.b"), ab.no_layernorm.covers_all(L));
    at.at(gb::HOOK_FINAL_NORM, L, t);
    const std::vector<float>& dec = s.tied ? m.at("emb.word") : m.at("head.decoder");
    vec logits = linear(dec, m.at("head.bias"), t, V, d);
    at.at(gb::HOOK_LOGITS, L, logits);
    at.finish(H);
    return r;
}

gb::forward_options keep_every_point() {
    gb::forward_options opt;
    for (gb::hook_point p : {gb::HOOK_RESID_PRE, gb::HOOK_ATTN_IN, gb::HOOK_Q, gb::HOOK_K, gb::HOOK_V, gb::HOOK_Z,
                             gb::HOOK_HEAD_OUT, gb::HOOK_ATTN_OUT, gb::HOOK_RESID_MID, gb::HOOK_MLP_IN,
                             gb::HOOK_MLP_POST, gb::HOOK_MLP_OUT, gb::HOOK_RESID_POST, gb::HOOK_FINAL_NORM,
                             gb::HOOK_CROSS_IN, gb::HOOK_CROSS_Z, gb::HOOK_CROSS_OUT}) // (kept by models that have them)
        opt.keep.points |= gb::hook_bit(p);
    opt.keep.resid_stream = true;
    return opt;
}

std::vector<std::pair<std::string, gb::ablation>> encoder_ablation_cases() {
    const auto on = layers_on;
    std::vector<std::pair<std::string, gb::ablation>> cases(8);
    cases[0].first = "none";
    cases[1].first = "no-attention", cases[1].second.no_attention = on({});
    cases[2].first = "no-residual", cases[2].second.no_residual = on({});
    cases[3].first = "no-residual[1]", cases[3].second.no_residual = on({1});
    cases[4].first = "no-layernorm", cases[4].second.no_layernorm = on({});
    cases[5].first = "no-layernorm[0]", cases[5].second.no_layernorm = on({0});
    cases[6].first = "heads 0.1 1.3", cases[6].second.heads = {{0, 1}, {1, 3}};
    cases[7].first = "all at layer 0", cases[7].second.no_attention = cases[7].second.no_residual =
        cases[7].second.no_layernorm = on({0});
    return cases;
}
