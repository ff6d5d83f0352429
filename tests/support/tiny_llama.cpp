// Writes tiny llama2.c checkpoints + tokenizers, and the naive Llama reference forward.
#include "tiny_llama.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>

#include "reference.h"
#include "test_util.h"

tiny_llama write_tiny_llama2c(const std::string& dir, const tiny_llama_spec& s) {
    std::filesystem::create_directories(dir);
    tiny_llama m;
    m.spec = s;
    m.model_path = dir + "/model.bin";
    m.tokenizer_path = dir + "/tokenizer.bin";
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int d = s.dim, ff = s.hidden, L = s.n_layer, V = s.vocab, kv = s.n_kv_head * (s.dim / s.n_head);
    auto gen = [&](const std::string& name, size_t n, float mean, float std) {
        std::vector<float> v(n);
        for (float& x : v) x = mean + std * nd(rng);
        m.w[name] = v;
        return v;
    };
    std::ofstream f(m.model_path, std::ios::binary);
    int32_t header[7] = {d, ff, L, s.n_head, s.n_kv_head, s.shared_classifier ? V : -V, s.seq_len};
    f.write((const char*)header, sizeof header);
    auto put = [&](const std::vector<float>& v) { f.write((const char*)v.data(), (std::streamsize)(v.size() * 4)); };
    put(gen("emb", (size_t)V * d, 0, 0.5f));
    // llama2.c stores each kind for all layers together
    std::vector<std::string> kinds = {"rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3"};
    for (const std::string& k : kinds)
        for (int l = 0; l < L; l++) {
            std::string n = k + "." + std::to_string(l);
            size_t sz = k == "rms_att" || k == "rms_ffn" ? d
                        : k == "wq" || k == "wo"        ? (size_t)d * d
                        : k == "wk" || k == "wv"        ? (size_t)kv * d
                                                        : (size_t)ff * d;
            bool norm = k.rfind("rms", 0) == 0;
            put(gen(n, sz, norm ? 1.0f : 0.0f, norm ? 0.1f : s.std));
        }
    put(gen("rms_final", d, 1.0f, 0.1f));
    put(std::vector<float>((size_t)s.seq_len * (d / s.n_head), 0.5f)); // unused RoPE tables
    if (!s.shared_classifier) put(gen("wcls", (size_t)V * d, 0, 0.3f));
    if (s.qkv_bias) // not in the .bin (llama2.c has no biases); drawn last so the other weights stay the same
        for (int l = 0; l < L; l++) {
            gen("bq." + std::to_string(l), (size_t)d, 0, 0.5f);
            gen("bk." + std::to_string(l), (size_t)kv, 0, 0.5f);
            gen("bv." + std::to_string(l), (size_t)kv, 0, 0.5f);
        }

    // tokenizer: <unk> <s> </s>, <0x00>..<0xFF>, then single letters and a few merges (higher score merges first)
    std::vector<std::string> vocab = {"<unk>", "\n<s>\n", "\n</s>\n"};
    std::vector<float> scores = {0, 0, 0};
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        vocab.push_back(name);
        scores.push_back(0);
    }
    for (const char* p : {" ", "a", "c", "e", "h", "n", "o", "s", "t", "i", "m", "d"}) vocab.push_back(p), scores.push_back(-100);
    const char* merges[] = {" t", "he", " the", "at", " c", " cat", " s", " sat", "on", " on", "in", " m", " mat", "an", " an", "d"};
    float sc = -1;
    for (const char* p : merges) {
        if (std::find(vocab.begin(), vocab.end(), p) != vocab.end()) continue;
        vocab.push_back(p), scores.push_back(sc), sc -= 1;
    }
    while ((int)vocab.size() < V) vocab.push_back("<x" + std::to_string(vocab.size()) + ">"), scores.push_back(-1000);
    vocab.resize(V);
    scores.resize(V);
    write_llama2c_tokenizer(m.tokenizer_path, vocab, scores);
    return m;
}

void write_llama2c_tokenizer(const std::string& path, const std::vector<std::string>& vocab,
                             const std::vector<float>& scores) {
    std::ofstream t(path, std::ios::binary);
    int32_t max_len = 0;
    for (const auto& v : vocab) max_len = std::max(max_len, (int32_t)v.size());
    t.write((const char*)&max_len, 4);
    for (size_t i = 0; i < vocab.size(); i++) {
        int32_t len = (int32_t)vocab[i].size();
        t.write((const char*)&scores.at(i), 4);
        t.write((const char*)&len, 4);
        t.write(vocab[i].data(), len);
    }
}

// Written from the rule's description, not from core/: the unscaled frequency theta^(-2i/d); "linear" slows
// every pair by factor; "llama3" looks at how many wavelengths fit in the original context (r = orig / wavelen):
// many (r > high): unchanged; few (r < low): slowed by factor; in between: linear blend on r.
double reference_rope_freq(const tiny_llama_spec& s, int pair) {
    const int dh = s.dim / s.n_head;
    const double base = 1.0 / std::pow(s.rope_theta, 2.0 * pair / dh);
    if (s.rope_scaling == "linear") return base / s.rope_factor;
    if (s.rope_scaling == "llama3") {
        const double r = s.rope_orig_ctx * base / (2 * M_PI);
        if (r > s.rope_high_freq_factor) return base;
        if (r < s.rope_low_freq_factor) return base / s.rope_factor;
        const double w = (r - s.rope_low_freq_factor) / (s.rope_high_freq_factor - s.rope_low_freq_factor);
        return base * (w + (1 - w) / s.rope_factor);
    }
    return base;
}

namespace {

using vec = std::vector<double>;

// The causal softmax pattern [H][T][T] of q [T][H*dh] against k [T][KV*dh], scaled by 1/sqrt(dh); grouped-query
// attention: query head hd reads kv head hd / (H / KV)
vec causal_pattern(const vec& q, const vec& k, int n, int H, int KV, int dh) {
    const int qd = H * dh, kvd = KV * dh;
    vec pattern((size_t)H * n * n, 0.0);
    for (int hd = 0; hd < H; hd++) {
        int g = hd / (H / KV);
        for (int t = 0; t < n; t++) {
            vec sc(t + 1);
            double mx = -1e300, sum = 0;
            for (int j = 0; j <= t; j++) {
                double dot = 0;
                for (int e = 0; e < dh; e++) dot += q[(size_t)t * qd + hd * dh + e] * k[(size_t)j * kvd + g * dh + e];
                sc[j] = dot / std::sqrt((double)dh);
                mx = std::max(mx, sc[j]);
            }
            for (int j = 0; j <= t; j++) sum += (sc[j] = std::exp(sc[j] - mx));
            for (int j = 0; j <= t; j++) pattern[((size_t)hd * n + t) * n + j] = sc[j] / sum;
        }
    }
    return pattern;
}

// z [T][H*dh]: each head's pattern [H][T][T] over v [T][KV*dh]; a head ab ablates in layer l stays 0
vec heads_z(const vec& pattern, const vec& v, int n, int H, int KV, int dh, int l, const gb::ablation& ab) {
    const int qd = H * dh, kvd = KV * dh;
    vec z((size_t)n * qd, 0.0);
    for (int hd = 0; hd < H; hd++) {
        int g = hd / (H / KV);
        if (std::find(ab.heads.begin(), ab.heads.end(), gb::head_ref{l, hd}) != ab.heads.end()) continue; // z stays 0
        for (int t = 0; t < n; t++)
            for (int j = 0; j < n; j++) // all keys: the pattern (maybe edited) says which count
                for (int e = 0; e < dh; e++)
                    z[(size_t)t * qd + hd * dh + e] += pattern[((size_t)hd * n + t) * n + j] * v[(size_t)j * kvd + g * dh + e];
    }
    return z;
}

} // namespace

llama_ref reference_llama(const tiny_llama& m, const std::vector<int>& tokens, const gb::ablation& ab,
                          const ref_options& opt) {
    const tiny_llama_spec& s = m.spec;
    const int n = (int)tokens.size(), d = s.dim, H = s.n_head, KV = s.n_kv_head, dh = d / H, L = s.n_layer, V = s.vocab;
    const int ff = s.hidden, kvd = KV * dh;
    auto W = [&](const std::string& k, int l) -> const std::vector<float>& { return m.w.at(k + "." + std::to_string(l)); };
    llama_ref r;
    ref_points at(r, opt, L, n, d, dh);
    // every tensor below is [T][width] row-major, as the hook points lay them out
    vec x((size_t)n * d);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++) x[(size_t)t * d + i] = m.w.at("emb")[(size_t)tokens[t] * d + i];
    auto rms = [&](const vec& v, const std::vector<float>& g, bool off) { // per row of [T][d]
        if (off) return v;
        vec o(v.size());
        for (int t = 0; t < n; t++) {
            double ss = 0;
            for (int i = 0; i < d; i++) ss += v[(size_t)t * d + i] * v[(size_t)t * d + i];
            double inv = 1.0 / std::sqrt(ss / d + 1e-5);
            for (int i = 0; i < d; i++) o[(size_t)t * d + i] = v[(size_t)t * d + i] * inv * g[i];
        }
        return o;
    };
    auto matmul = [&](const std::vector<float>& w, const vec& v, int out, int in) { // w [out][in], v [T][in] -> [T][out]
        vec o((size_t)n * out, 0);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < out; i++)
                for (int j = 0; j < in; j++) o[(size_t)t * out + i] += (double)w[(size_t)i * in + j] * v[(size_t)t * in + j];
        return o;
    };
    auto rope = [&](vec& v, int heads) { // pair p: (2p, 2p+1) as llama2.c, or (p, p + dh/2); row t at position t
        for (int t = 0; t < n; t++)
            for (int h = 0; h < heads; h++)
                for (int p = 0; p < dh / 2; p++) {
                    double a = t * reference_rope_freq(s, p);
                    int i0 = s.rope_half ? p : 2 * p, i1 = s.rope_half ? p + dh / 2 : 2 * p + 1;
                    double* row = &v[((size_t)t * heads + h) * dh];
                    double x0 = row[i0], x1 = row[i1];
                    row[i0] = x0 * std::cos(a) - x1 * std::sin(a);
                    row[i1] = x0 * std::sin(a) + x1 * std::cos(a);
                }
    };
    auto add_bias = [&](vec& v, const char* name, int l) {
        if (!s.qkv_bias) return;
        const std::vector<float>& b = W(name, l);
        for (size_t i = 0; i < v.size(); i++) v[i] += b[i % b.size()];
    };
    at.at(gb::HOOK_RESID_PRE, 0, x);
    for (int l = 0; l < L; l++) {
        bool no_norm = in_set(ab.no_layernorm, l), no_res = in_set(ab.no_residual, l), no_attn = in_set(ab.no_attention, l);
        if (l > 0) at.at(gb::HOOK_RESID_PRE, l, x);
        vec h = rms(x, W("rms_att", l), no_norm);
        at.at(gb::HOOK_ATTN_IN, l, h);
        vec q = matmul(W("wq", l), h, d, d), k = matmul(W("wk", l), h, kvd, d), v = matmul(W("wv", l), h, kvd, d);
        add_bias(q, "bq", l), add_bias(k, "bk", l), add_bias(v, "bv", l);
        rope(q, H);
        rope(k, KV);
        at.at(gb::HOOK_Q, l, q);
        at.at(gb::HOOK_K, l, k);
        at.at(gb::HOOK_V, l, v);
        vec pattern = causal_pattern(q, k, n, H, KV, dh); // [H][T][T]
        at.at(gb::HOOK_PATTERN, l, pattern);
        vec z = heads_z(pattern, v, n, H, KV, dh, l, ab); // [T][H*dh]
        at.at(gb::HOOK_Z, l, z);
        // head_out [T][H*d]: head hd's z times its columns hd*dh .. of wo [d][d] ([out][in]), no bias
        const std::vector<float>& wo = W("wo", l);
        vec head_out = ref_head_outputs(wo, z, n, H, dh, d);
        at.at(gb::HOOK_HEAD_OUT, l, head_out);
        vec a((size_t)n * d, 0.0);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < d; i++) {
                double acc = 0;
                for (int hd = 0; hd < H; hd++) acc += head_out[((size_t)t * H + hd) * d + i];
                a[(size_t)t * d + i] = no_attn ? 0.0 : acc;
            }
        at.at(gb::HOOK_ATTN_OUT, l, a);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? a[i] : x[i] + a[i];
        at.at(gb::HOOK_RESID_MID, l, x);
        h = rms(x, W("rms_ffn", l), no_norm);
        at.at(gb::HOOK_MLP_IN, l, h);
        vec gate = matmul(W("w1", l), h, ff, d), up = matmul(W("w3", l), h, ff, d);
        for (size_t i = 0; i < gate.size(); i++) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
        at.at(gb::HOOK_MLP_POST, l, gate);
        vec o = matmul(W("w2", l), gate, d, ff);
        at.at(gb::HOOK_MLP_OUT, l, o);
        for (size_t i = 0; i < x.size(); i++) x[i] = no_res ? o[i] : x[i] + o[i];
        at.at(gb::HOOK_RESID_POST, l, x);
    }
    bool all_off = ab.no_layernorm.on;
    for (int l = 0; l < L; l++) all_off = all_off && in_set(ab.no_layernorm, l);
    vec xf = rms(x, m.w.at("rms_final"), all_off);
    at.at(gb::HOOK_FINAL_NORM, L, xf);
    const auto& cls = s.shared_classifier ? m.w.at("emb") : m.w.at("wcls");
    vec logits((size_t)n * V, 0);
    for (int t = 0; t < n; t++)
        for (int v = 0; v < V; v++) { // cls [V][d]
            double acc = 0;
            for (int i = 0; i < d; i++) acc += (double)cls[(size_t)v * d + i] * xf[(size_t)t * d + i];
            logits[(size_t)t * V + v] = acc;
        }
    at.at(gb::HOOK_LOGITS, L, logits);
    at.finish(H);
    return r;
}

ref_readout reference_readout(const tiny_llama& m) {
    const tiny_llama_spec& s = m.spec;
    ref_readout r;
    r.layernorm = false;
    r.eps = 1e-5;
    r.d = s.dim;
    r.V = s.vocab;
    const auto& g = m.w.at("rms_final");
    r.g.assign(g.begin(), g.end());
    const auto& cls = s.shared_classifier ? m.w.at("emb") : m.w.at("wcls");
    r.unembed.assign(cls.begin(), cls.end());
    r.b_o.assign(s.n_layer, {});
    return r;
}

std::vector<std::pair<std::string, gb::ablation>> llama_ablation_cases() {
    const auto on = layers_on;
    std::vector<std::pair<std::string, gb::ablation>> cases(8);
    cases[0].first = "none";
    cases[1].first = "no-attention", cases[1].second.no_attention = on({});
    cases[2].first = "no-residual[1]", cases[2].second.no_residual = on({1});
    cases[3].first = "no-layernorm (RMSNorm)", cases[3].second.no_layernorm = on({});
    cases[4].first = "no-layernorm[0]", cases[4].second.no_layernorm = on({0});
    cases[5].first = "heads 0.1 1.3", cases[5].second.heads = {{0, 1}, {1, 3}};
    cases[6].first = "all", cases[6].second.no_attention = cases[6].second.no_residual = cases[6].second.no_layernorm = on({0});
    cases[7].first = "no-residual", cases[7].second.no_residual = on({});
    return cases;
}

void expect_record_matches(const gb::record& got, const ref_trace& want, const std::string& label, double tol) {
    EXPECT_LT(max_scaled_error(got.logits, want.logits), tol) << label << ": logits";
    EXPECT_LT(max_scaled_error(got.flat(gb::HOOK_PATTERN), want.attention), tol) << label << ": attention";
    EXPECT_LT(max_scaled_error(got.resid_norm, want.resid_norm), tol) << label << ": residual norms";
    for (int p = 0; p < gb::HOOK_COUNT; p++) { // the pattern and the logits are above
        const gb::hook_point hp = (gb::hook_point)p;
        if (hp == gb::HOOK_PATTERN || hp == gb::HOOK_LOGITS) continue;
        for (int l = 0; l < (int)got.slot[p].size(); l++) {
            if (!got.has(hp, l)) continue;
            const std::string where = label + ": " + gb::hook_label(hp, gb::hook_is_final(hp) ? got.n_layer : l);
            const size_t idx = gb::hook_is_final(hp) ? 0 : (size_t)l;
            if (want.act[p].size() <= idx || want.act[p][idx].empty()) {
                ADD_FAILURE() << where << ": kept by the run, not produced by the reference";
                continue;
            }
            const float* g = got.get(hp, l);
            const std::vector<float> gv(g, g + got.layer_floats(hp));
            const std::vector<double>& w = want.act[p][idx];
            std::vector<double> last; // a final point kept for the last position only: the reference's last row
            if (gb::hook_is_final(hp) && gv.size() < w.size()) last.assign(w.end() - (ptrdiff_t)gv.size(), w.end());
            EXPECT_LT(max_scaled_error(gv, last.empty() ? w : last), tol) << where;
        }
    }
}

void expect_matches_reference(const gb::model& m, const tiny_llama& tm, const std::vector<int>& tokens,
                              const std::string& label) {
    for (const auto& [name, ab] : llama_ablation_cases()) {
        gb::record cap;
        gb::forward_options opt;
        opt.all_logits = true;
        opt.keep.points |= gb::hook_bit(gb::HOOK_ATTN_OUT) | gb::hook_bit(gb::HOOK_MLP_OUT);
        gb::run_forward(cap, m, tokens, ab, opt);
        expect_record_matches(cap, reference_llama(tm, tokens, ab), label + ", " + name);
    }
}
