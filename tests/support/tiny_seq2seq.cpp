// Tiny encoder-decoder models in HF layout and their double-precision reference (see tiny_seq2seq.h). The names
// and the forward are written from HF's modeling_bart / modeling_mbart / modeling_marian, independently of core/.
#include "tiny_seq2seq.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "io/safetensors.h"

namespace {

std::string layer_prefix(const std::string& stack, int l) { return "model." + stack + ".layers." + std::to_string(l) + "."; }

// A SentencePiece Unigram tokenizer.json for each family: its specials where its config puts them, "▁", letters
// with and without "▁", a few words, "▁w<i>" fillers; the source template as the real models wrap a text:
// mBART "$A </s> en_XX" (the language code closes its vocabulary), BART "<s> $A </s>", Marian "$A </s>" (its
// </s> is id 0 and <pad> the last id). Real BART and Marian folders carry a byte-level BPE and SentencePiece's
// own files; a Unigram tokenizer.json is what Glassbox reads for Marian (converted) and lets tiny ones have text.
void write_unigram_tokenizer(const std::string& dir, int V, const std::string& family) {
    const std::string U = "\xE2\x96\x81"; // "▁"
    const bool marian = family == "marian", mbart = family == "mbart";
    std::vector<std::pair<std::string, double>> pieces;
    if (marian) pieces = {{"</s>", 0}, {"<unk>", 0}, {U, -2}};
    else pieces = {{"<s>", 0}, {"<pad>", 0}, {"</s>", 0}, {"<unk>", 0}, {U, -2}};
    for (char c = 'a'; c <= 'z'; c++) pieces.push_back({std::string(1, c), -4}), pieces.push_back({U + c, -5});
    for (const char* w : {"the", "cat", "sat", "on", "mat", "dog", "a", "is", "hello", "world"}) pieces.push_back({U + w, -3});
    for (int i = 0; (int)pieces.size() < V - 1; i++) pieces.push_back({U + "w" + std::to_string(i), -10});
    pieces.resize(V - 1);
    const std::string last = marian ? "<pad>" : mbart ? "en_XX" : "<w_last>";
    pieces.push_back({last, marian || mbart ? 0 : -10});
    const int eos = marian ? 0 : 2, unk = marian ? 1 : 3;
    nlohmann::json vocab = nlohmann::json::array(), added = nlohmann::json::array();
    for (const auto& p : pieces) vocab.push_back({p.first, p.second});
    std::vector<int> special_ids = marian ? std::vector<int>{0, 1, V - 1} : std::vector<int>{0, 1, 2, 3};
    if (mbart) special_ids.push_back(V - 1);
    for (int id : special_ids)
        added.push_back({{"id", id}, {"content", pieces[id].first}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"special", true}});
    nlohmann::json metaspace = {{"type", "Metaspace"}, {"replacement", U}, {"add_prefix_space", true},
                                {"prepend_scheme", "always"}, {"split", true}};
    auto special = [](const std::string& t) { return nlohmann::json{{"SpecialToken", {{"id", t}, {"type_id", 0}}}}; };
    const nlohmann::json seq = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
    nlohmann::json single = nlohmann::json::array();
    if (family == "bart") single.push_back(special("<s>"));
    single.push_back(seq);
    single.push_back(special("</s>"));
    if (mbart) single.push_back(special("en_XX"));
    nlohmann::json specials = {{"</s>", {{"id", "</s>"}, {"ids", {eos}}, {"tokens", {"</s>"}}}}};
    if (mbart) specials["en_XX"] = {{"id", "en_XX"}, {"ids", {V - 1}}, {"tokens", {"en_XX"}}};
    if (family == "bart") specials["<s>"] = {{"id", "<s>"}, {"ids", {0}}, {"tokens", {"<s>"}}};
    nlohmann::json post = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
    nlohmann::json tj = {{"version", "1.0"},        {"truncation", nullptr}, {"padding", nullptr},
                         {"added_tokens", added},   {"normalizer", nullptr}, {"pre_tokenizer", metaspace},
                         {"post_processor", post},  {"decoder", metaspace},
                         {"model", {{"type", "Unigram"}, {"unk_id", unk}, {"vocab", vocab}, {"byte_fallback", false}}}};
    std::ofstream(dir + "/tokenizer.json") << tj.dump();
    nlohmann::json tc = {{"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"}};
    if (mbart) tc["tokenizer_class"] = "MBartTokenizer", tc["src_lang"] = "en_XX";
    if (!marian) tc["bos_token"] = "<s>";
    std::ofstream(dir + "/tokenizer_config.json") << tc.dump(1);
}

} // namespace

const std::vector<float>& tiny_seq2seq::at(const std::string& name) const {
    auto it = w.find(name);
    if (it == w.end()) throw std::runtime_error("tiny_seq2seq: no tensor " + name);
    return it->second;
}

std::vector<double> marian_positions(int n_pos, int d) {
    // HF: angle(t, j) = t / 10000^(2 (j / 2) / d); the even j give the sin half, the odd j the cos half
    const int half = (d + 1) / 2;
    std::vector<double> p((size_t)n_pos * d);
    for (int t = 0; t < n_pos; t++)
        for (int i = 0; i < d; i++) {
            const int k = i < half ? i : i - half; // frequency index: column i and column half + i share one
            const double angle = t / std::pow(10000.0, 2.0 * k / d);
            p[(size_t)t * d + i] = i < half ? std::sin(angle) : std::cos(angle);
        }
    return p;
}

tiny_seq2seq write_tiny_seq2seq(const std::string& dir, const seq2seq_spec& s) {
    if (s.family != "bart" && s.family != "mbart" && s.family != "marian")
        throw std::runtime_error("tiny_seq2seq: family must be bart, mbart or marian, not " + s.family);
    if (s.d_model % s.n_head) throw std::runtime_error("tiny_seq2seq: d_model must be a multiple of n_head");
    if (s.embed_stored_as != "shared" && s.embed_stored_as != "decoder" && s.embed_stored_as != "all")
        throw std::runtime_error("tiny_seq2seq: embed_stored_as must be shared, decoder or all");
    tiny_seq2seq m;
    m.dir = dir;
    m.spec = s;
    const bool marian = s.family == "marian";
    m.pre_ln = s.family == "mbart";
    m.scale_embedding = s.scale_embedding < 0 ? s.family != "bart" : s.scale_embedding != 0;
    const int d = s.d_model, ff = s.d_ff, V = s.vocab;
    if (marian) m.eos_id = 0, m.pad_id = V - 1, m.decoder_start_id = V - 1;
    else m.pad_id = 1, m.eos_id = 2, m.decoder_start_id = s.family == "bart" ? 2 : V - 1;

    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto rnd = [&](size_t n, float sd, float mean = 0) {
        std::vector<float> v(n);
        for (float& x : v) x = mean + sd * nd(rng);
        return v;
    };
    std::vector<gb::st_out> out;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> v) {
        out.push_back({name, shape, v, gb::ST_F32});
        m.w[name] = std::move(v);
    };
    auto linear = [&](const std::string& name, int o, int i) {
        add(name + ".weight", {o, i}, rnd((size_t)o * i, s.std));
        add(name + ".bias", {o}, rnd(o, 0.1f));
    };
    auto norm = [&](const std::string& name) {
        add(name + ".weight", {d}, rnd(d, 0.1f, 1.0f));
        add(name + ".bias", {d}, rnd(d, 0.1f));
    };

    // the token embedding: one tensor, stored under the name(s) the spec asks for
    m.w["model.shared.weight"] = rnd((size_t)V * d, s.std);
    {
        std::vector<std::string> names;
        if (s.embed_stored_as != "decoder") names.push_back("model.shared.weight");
        if (s.embed_stored_as == "all")
            names.insert(names.end(), {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"});
        if (s.embed_stored_as == "all" && s.tied) names.push_back("lm_head.weight");
        if (s.embed_stored_as == "decoder") names.push_back("model.decoder.embed_tokens.weight");
        for (const std::string& n : names) out.push_back({n, {V, d}, m.w["model.shared.weight"], gb::ST_F32});
    }
    for (const char* stack_name : {"encoder", "decoder"}) {
        const std::string stack = stack_name;
        const std::string p = "model." + stack + ".";
        if (marian) {
            if (s.marian_positions_stored) {
                const std::vector<double> table = marian_positions(s.n_pos, d);
                out.push_back({p + "embed_positions.weight", {s.n_pos, d}, std::vector<float>(table.begin(), table.end()),
                               gb::ST_F32});
            }
        } else {
            add(p + "embed_positions.weight", {s.n_pos + 2, d}, rnd((size_t)(s.n_pos + 2) * d, s.std));
            norm(p + "layernorm_embedding");
        }
        const int L = stack == "encoder" ? s.enc_layers : s.dec_layers;
        for (int l = 0; l < L; l++) {
            const std::string lp = layer_prefix(stack, l);
            for (const char* k : {"q_proj", "k_proj", "v_proj", "out_proj"}) linear(lp + "self_attn." + k, d, d);
            norm(lp + "self_attn_layer_norm");
            if (stack == "decoder") {
                for (const char* k : {"q_proj", "k_proj", "v_proj", "out_proj"}) linear(lp + "encoder_attn." + k, d, d);
                norm(lp + "encoder_attn_layer_norm");
            }
            linear(lp + "fc1", ff, d);
            linear(lp + "fc2", d, ff);
            norm(lp + "final_layer_norm");
        }
        if (m.pre_ln) norm(p + "layer_norm");
    }
    if (!s.tied) add("lm_head.weight", {V, d}, rnd((size_t)V * d, s.std));
    std::vector<float> bias = rnd(V, 0.5f);
    out.push_back({"final_logits_bias", {1, V}, bias, gb::ST_F32});
    m.w["final_logits_bias"] = std::move(bias);

    std::filesystem::create_directories(dir);
    gb::write_safetensors(dir + "/model.safetensors", out);
    nlohmann::json c;
    c["model_type"] = s.family;
    c["architectures"] = {s.family == "bart"    ? "BartForConditionalGeneration"
                          : s.family == "mbart" ? "MBartForConditionalGeneration"
                                                : "MarianMTModel"};
    c["is_encoder_decoder"] = true;
    c["d_model"] = d;
    c["encoder_layers"] = s.enc_layers, c["decoder_layers"] = s.dec_layers;
    c["encoder_attention_heads"] = s.n_head, c["decoder_attention_heads"] = s.n_head;
    c["encoder_ffn_dim"] = ff, c["decoder_ffn_dim"] = ff;
    c["vocab_size"] = V;
    c["max_position_embeddings"] = s.n_pos;
    c["activation_function"] = marian ? "swish" : "gelu";
    c["scale_embedding"] = m.scale_embedding;
    // legacy fairseq keys real configs carry; HF's modeling code decides the layout by the class alone
    c["normalize_before"] = m.pre_ln;
    c["add_final_layer_norm"] = m.pre_ln;
    c["normalize_embedding"] = !marian;
    if (marian) c["static_position_embeddings"] = true;
    c["pad_token_id"] = m.pad_id, c["eos_token_id"] = m.eos_id, c["decoder_start_token_id"] = m.decoder_start_id;
    c["bos_token_id"] = 0; // <s>; Marian has no BOS, and its configs say 0 (its </s>) too
    c["forced_eos_token_id"] = m.eos_id;
    if (s.family == "bart") c["forced_bos_token_id"] = 0; // bart-large's: generate puts <s> first
    c["tie_word_embeddings"] = s.tied;
    if (marian) c["share_encoder_decoder_embeddings"] = true, c["decoder_vocab_size"] = V;
    c["dropout"] = 0.0, c["attention_dropout"] = 0.0, c["activation_dropout"] = 0.0;
    c["init_std"] = 0.02;
    std::ofstream(dir + "/config.json") << c.dump(1);
    if (V >= 8) write_unigram_tokenizer(dir, V, s.family);
    return m;
}

namespace {

// softmax(q k^T / sqrt dh) of q [nq][H*dh] over k [nk][H*dh]: [H][nq][nk]; causal: key j > query t gets 0
std::vector<double> attention_pattern(const std::vector<double>& q, const std::vector<double>& k, int nq, int nk,
                                      int H, int dh, bool causal) {
    const int w = H * dh;
    std::vector<double> pattern((size_t)H * nq * nk, 0.0);
    for (int h = 0; h < H; h++)
        for (int t = 0; t < nq; t++) {
            const int last = causal ? t : nk - 1;
            std::vector<double> sc(last + 1);
            double mx = -1e300, sum = 0;
            for (int j = 0; j <= last; j++) {
                double dot = 0;
                for (int e = 0; e < dh; e++) dot += q[(size_t)t * w + h * dh + e] * k[(size_t)j * w + h * dh + e];
                sc[j] = dot / std::sqrt((double)dh);
                mx = std::max(mx, sc[j]);
            }
            for (int j = 0; j <= last; j++) sum += (sc[j] = std::exp(sc[j] - mx));
            for (int j = 0; j <= last; j++) pattern[((size_t)h * nq + t) * nk + j] = sc[j] / sum;
        }
    return pattern;
}

// z [nq][H*dh] = pattern [H][nq][nk] times v [nk][H*dh], every head (the cross-attention: no head ablation)
std::vector<double> pattern_values(const std::vector<double>& pattern, const std::vector<double>& v, int nq, int nk,
                                   int H, int dh) {
    const int w = H * dh;
    std::vector<double> z((size_t)nq * w, 0.0);
    for (int h = 0; h < H; h++)
        for (int t = 0; t < nq; t++)
            for (int j = 0; j < nk; j++)
                for (int e = 0; e < dh; e++)
                    z[(size_t)t * w + h * dh + e] += pattern[((size_t)h * nq + t) * nk + j] * v[(size_t)j * w + h * dh + e];
    return z;
}

// Both sequences hold 1 .. n_pos ids of the vocabulary (std::runtime_error otherwise)
void check_ids(const seq2seq_spec& s, const std::vector<int>& source_ids, const std::vector<int>& target_ids) {
    for (const std::vector<int>* ids : {&source_ids, &target_ids}) {
        if (ids->empty() || (int)ids->size() > s.n_pos)
            throw std::runtime_error("reference_seq2seq: a sequence needs 1 .. n_pos ids");
        for (int id : *ids)
            if (id < 0 || id >= s.vocab)
                throw std::runtime_error("reference_seq2seq: id " + std::to_string(id) + " outside the vocabulary");
    }
}

// The embeddings of ids [n] on `stack` ("encoder", "decoder"): [n][d], the token's row (scaled when the model scales
// embeddings) plus the position's: learned at row t + 2 (HF's offset) then LayerNorm, or Marian's sinusoid at row t
std::vector<double> embed_ids(const tiny_seq2seq& m, const std::vector<int>& ids, const std::string& stack, double eps) {
    const int n = (int)ids.size(), d = m.spec.d_model;
    const bool marian = m.spec.family == "marian";
    const std::vector<double> sinusoid = marian ? marian_positions(m.spec.n_pos, d) : std::vector<double>();
    const double scale = m.scale_embedding ? std::sqrt((double)d) : 1.0;
    const std::vector<float>& E = m.at("model.shared.weight");
    const std::vector<float>* learned = marian ? nullptr : &m.at("model." + stack + ".embed_positions.weight");
    std::vector<double> x((size_t)n * d);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++)
            x[(size_t)t * d + i] = E[(size_t)ids[t] * d + i] * scale +
                                   (marian ? sinusoid[(size_t)t * d + i] : (*learned)[(size_t)(t + 2) * d + i]);
    const std::string ln = "model." + stack + ".layernorm_embedding";
    return marian ? x : ref_layernorm(x, m.at(ln + ".weight"), m.at(ln + ".bias"), n, d, eps, false);
}

// The decoder stream y [T][d] after layer l's cross-attention, and each row's norm, into c.resid and c.resid_norm
void keep_cross_resid(ref_cross_trace& c, const std::vector<double>& y, int l, int T, int d) {
    for (int t = 0; t < T; t++) {
        double ss = 0;
        for (int i = 0; i < d; i++) {
            const double v = y[(size_t)t * d + i];
            c.resid[((size_t)l * T + t) * d + i] = v;
            ss += v * v;
        }
        c.resid_norm[(size_t)l * T + t] = std::sqrt(ss);
    }
}

} // namespace

ref_seq2seq reference_seq2seq(const tiny_seq2seq& m, const std::vector<int>& source_ids,
                              const std::vector<int>& target_ids, const gb::ablation& ab,
                              const seq2seq_ref_options& opt) {
    const seq2seq_spec& s = m.spec;
    const int S = (int)source_ids.size(), T = (int)target_ids.size(), d = s.d_model, H = s.n_head, dh = d / H;
    const int V = s.vocab, ff = s.d_ff, Le = s.enc_layers, Ld = s.dec_layers;
    const bool marian = s.family == "marian", pre_ln = m.pre_ln;
    const double eps = 1e-5; // nn.LayerNorm's default: none of the three configs names another
    check_ids(s, source_ids, target_ids);
    using vec = std::vector<double>;
    auto W = [&](const std::string& name) -> const std::vector<float>& { return m.at(name); };
    auto layernorm = [&](const vec& v, const std::string& name, int n, bool off) {
        return ref_layernorm(v, W(name + ".weight"), W(name + ".bias"), n, d, eps, off);
    };
    auto linear = [&](const std::string& name, const vec& v, int n, int out, int in) {
        return ref_linear(W(name + ".weight"), W(name + ".bias"), v, n, out, in);
    };
    auto activation = [&](vec& v) {
        for (double& x : v) x = marian ? x / (1 + std::exp(-x)) : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    };
    // x <- x + a (a alone without the residual), then Post-LN's norm of the sum
    auto add_sublayer = [&](vec& x, const vec& a, const std::string& ln, int n, bool no_res, bool no_norm) {
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        if (!pre_ln) x = layernorm(x, ln, n, no_norm);
    };
    // the self-attention sublayer of layer l (prefix p) on x [n][d], its points kept by at
    auto self_attention = [&](ref_points& at, const std::string& p, int l, vec& x, int n, bool causal) {
        const bool no_norm = ab.no_layernorm.covers(l), no_res = ab.no_residual.covers(l), no_attn = ab.no_attention.covers(l);
        vec h = pre_ln ? layernorm(x, p + "self_attn_layer_norm", n, no_norm) : x;
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec q = linear(p + "self_attn.q_proj", h, n, d, d), k = linear(p + "self_attn.k_proj", h, n, d, d),
            v = linear(p + "self_attn.v_proj", h, n, d, d);
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, k);
        at.at(gb::HOOK_V, l, v);
        vec pattern = causal ? attention_pattern(q, k, n, n, H, dh, true) : ref_full_pattern(q, k, n, H, dh);
        at.at(gb::HOOK_PATTERN, l, pattern);
        vec z = ref_pattern_values(pattern, v, n, H, dh, l, ab); // zeros above the diagonal add nothing
        at.at(gb::HOOK_Z, l, z);
        vec head_out = ref_head_outputs(W(p + "self_attn.out_proj.weight"), z, n, H, dh, d);
        at.at(gb::HOOK_HEAD_OUT, l, head_out);
        vec a = linear(p + "self_attn.out_proj", z, n, d, d);
        if (no_attn) std::fill(a.begin(), a.end(), 0.0);
        at.at(gb::HOOK_ATTN_OUT, l, a);
        add_sublayer(x, a, p + "self_attn_layer_norm", n, no_res, no_norm);
        at.at(gb::HOOK_RESID_MID, l, x);
    };
    auto mlp = [&](ref_points& at, const std::string& p, int l, vec& x, int n) {
        const bool no_norm = ab.no_layernorm.covers(l), no_res = ab.no_residual.covers(l);
        vec h = pre_ln ? layernorm(x, p + "final_layer_norm", n, no_norm) : x;
        at.at(gb::HOOK_MLP_IN, l, h);
        vec u = linear(p + "fc1", h, n, ff, d);
        activation(u);
        at.at(gb::HOOK_MLP_POST, l, u);
        vec o = linear(p + "fc2", u, n, d, ff);
        at.at(gb::HOOK_MLP_OUT, l, o);
        add_sublayer(x, o, p + "final_layer_norm", n, no_res, no_norm);
        at.at(gb::HOOK_RESID_POST, l, x);
    };

    ref_seq2seq r;
    // encoder
    ref_points eat(r.encoder, opt.encoder, Le, S, d, dh);
    vec x = embed_ids(m, source_ids, "encoder", eps);
    eat.at(gb::HOOK_RESID_PRE, 0, x);
    for (int l = 0; l < Le; l++) {
        if (l > 0) eat.at(gb::HOOK_RESID_PRE, l, x);
        self_attention(eat, layer_prefix("encoder", l), l, x, S, false);
        mlp(eat, layer_prefix("encoder", l), l, x, S);
    }
    vec enc = pre_ln ? layernorm(x, "model.encoder.layer_norm", S, ab.no_layernorm.covers_all(Le)) : x;
    eat.at(gb::HOOK_FINAL_NORM, Le, enc); // what it leaves there is what the cross-attention reads
    eat.finish(H);

    // decoder
    ref_points dat(r.decoder, opt.decoder, Ld, T, d, dh);
    ref_cross_trace& c = r.cross;
    c.attention.assign((size_t)Ld * H * T * S, 0.0);
    c.attn_in.resize(Ld), c.q.resize(Ld), c.k.resize(Ld), c.v.resize(Ld), c.z.resize(Ld), c.attn_out.resize(Ld);
    c.resid.assign((size_t)Ld * T * d, 0.0);
    c.resid_norm.assign((size_t)Ld * T, 0.0);
    vec y = embed_ids(m, target_ids, "decoder", eps);
    dat.at(gb::HOOK_RESID_PRE, 0, y);
    for (int l = 0; l < Ld; l++) {
        const std::string p = layer_prefix("decoder", l);
        const bool no_norm = ab.no_layernorm.covers(l), no_res = ab.no_residual.covers(l), no_attn = ab.no_attention.covers(l);
        if (l > 0) dat.at(gb::HOOK_RESID_PRE, l, y);
        self_attention(dat, p, l, y, T, true);
        // cross-attention: queries from the decoder stream, keys and values from the encoder's output
        c.attn_in[l] = pre_ln ? layernorm(y, p + "encoder_attn_layer_norm", T, no_norm) : y;
        dat.at(gb::HOOK_CROSS_IN, l, c.attn_in[l]);
        c.q[l] = linear(p + "encoder_attn.q_proj", c.attn_in[l], T, d, d);
        c.k[l] = linear(p + "encoder_attn.k_proj", enc, S, d, d);
        c.v[l] = linear(p + "encoder_attn.v_proj", enc, S, d, d);
        const vec pattern = attention_pattern(c.q[l], c.k[l], T, S, H, dh, false);
        std::copy(pattern.begin(), pattern.end(), c.attention.begin() + (size_t)l * H * T * S);
        r.decoder.act[gb::HOOK_CROSS_PATTERN].resize(Ld);
        r.decoder.act[gb::HOOK_CROSS_PATTERN][l] = pattern; // [H][T][S] (no edits: the cross-attention takes none)
        c.z[l] = pattern_values(pattern, c.v[l], T, S, H, dh);
        dat.at(gb::HOOK_CROSS_Z, l, c.z[l]);
        c.attn_out[l] = linear(p + "encoder_attn.out_proj", c.z[l], T, d, d);
        if (no_attn) std::fill(c.attn_out[l].begin(), c.attn_out[l].end(), 0.0);
        dat.at(gb::HOOK_CROSS_OUT, l, c.attn_out[l]);
        add_sublayer(y, c.attn_out[l], p + "encoder_attn_layer_norm", T, no_res, no_norm);
        keep_cross_resid(c, y, l, T, d);
        mlp(dat, p, l, y, T);
    }
    vec f = pre_ln ? layernorm(y, "model.decoder.layer_norm", T, ab.no_layernorm.covers_all(Ld)) : y;
    dat.at(gb::HOOK_FINAL_NORM, Ld, f);
    vec logits = ref_linear(s.tied ? W("model.shared.weight") : W("lm_head.weight"), W("final_logits_bias"), f, T, V, d);
    dat.at(gb::HOOK_LOGITS, Ld, logits);
    dat.finish(H);
    r.logits = r.decoder.logits;
    return r;
}
