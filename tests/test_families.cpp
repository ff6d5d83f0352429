// The architecture families beyond GPT-2 and Llama (GPT-NeoX, Gemma, Gemma 2, Phi-3, OLMo 2, Qwen3, Mistral and
// Qwen2 sliding windows, and the mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE): tiny random models
// written as HF folders and GGUF files, loaded, and run under every ablation against the double-precision
// reference of tests/support/tiny_family.h. First the reference's own checks (against the Llama reference, and
// invariants), then one parameterised case per family file (Families/FamilyFile.MatchesTheReference/<Family>),
// the sliding window on a prompt longer than it, expert ablation and the router, and malformed files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>

#include <nlohmann/json.hpp>

#include "analysis/attribution.h"
#include "analysis/export.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "model/quant.h"
#include "run/forward.h"
#include "run/hooks.h"
#include "run/live.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_llama.h"
#include "tiny_model.h"
#include "util/error.h"

namespace {


tiny_family write_family(const std::string& name, const family_spec& s) { return write_tiny_family(test_temp_dir(name), s); }

// Loads the folder or file and runs every ablation case against the reference. label names the file.
void check_loaded(const std::string& path, const tiny_family& tm, const std::vector<int>& tokens, const std::string& label) {
    gb::model m;
    try {
        m = gb::load_model(path);
    } catch (const gb::error& e) {
        ADD_FAILURE() << label << ": " << e.what();
        return;
    }
    EXPECT_EQ(m.config.n_layer, tm.spec.n_layer) << label;
    EXPECT_EQ(m.config.n_head, tm.spec.n_head) << label;
    EXPECT_EQ(m.config.n_kv_head, tm.spec.n_kv_head) << label;
    EXPECT_EQ(m.config.d_head, tm.spec.head_dim) << label;
    EXPECT_EQ(m.config.vocab_size, tm.spec.vocab) << label;
    EXPECT_EQ(m.config.tied_lm_head, *tm.spec.tied) << label;
    expect_family_matches_reference(m, tm, tokens, label);
}

void check_hf(const tiny_family& tm, const std::vector<int>& tokens, const std::string& label) {
    check_loaded(tm.hf_dir, tm, tokens, "HF " + label);
}
void check_gguf(const tiny_family& tm, const std::vector<int>& tokens, const std::string& label) {
    check_loaded(tm.gguf_path, tm, tokens, "GGUF " + label);
}

// The same model with one setting changed, for the reference only (gap checks).
tiny_family with(const tiny_family& tm, const std::function<void(family_spec&)>& change) {
    tiny_family o = tm;
    change(o.spec);
    return o;
}

// A single line naming `needle`: how every loader error should read.
void expect_one_line_error(const std::function<void()>& fn, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "expected an error naming '" << needle << "'";
    } catch (const gb::error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(needle), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line expected: " << msg;
    }
}

// The reference's Llama-family weights as the llama2.c reference holds them (rotate-half spec, HF layouts).
tiny_llama as_tiny_llama(const tiny_family& f) {
    const family_spec& s = f.spec;
    tiny_llama t;
    t.spec.dim = s.d_model, t.spec.hidden = s.d_ff, t.spec.n_layer = s.n_layer, t.spec.n_head = s.n_head;
    t.spec.n_kv_head = s.n_kv_head, t.spec.vocab = s.vocab, t.spec.seq_len = s.n_ctx;
    t.spec.shared_classifier = *s.tied, t.spec.rope_theta = s.rope_theta, t.spec.rope_half = true;
    t.spec.qkv_bias = *s.qkv_bias;
    t.w["emb"] = f.at("model.embed_tokens.weight");
    t.w["rms_final"] = f.at("model.norm.weight");
    if (!*s.tied) t.w["wcls"] = f.at("lm_head.weight");
    for (int l = 0; l < s.n_layer; l++) {
        const std::string p = "model.layers." + std::to_string(l) + ".", k = "." + std::to_string(l);
        t.w["rms_att" + k] = f.at(p + "input_layernorm.weight");
        t.w["rms_ffn" + k] = f.at(p + "post_attention_layernorm.weight");
        t.w["wq" + k] = f.at(p + "self_attn.q_proj.weight");
        t.w["wk" + k] = f.at(p + "self_attn.k_proj.weight");
        t.w["wv" + k] = f.at(p + "self_attn.v_proj.weight");
        t.w["wo" + k] = f.at(p + "self_attn.o_proj.weight");
        t.w["w1" + k] = f.at(p + "mlp.gate_proj.weight");
        t.w["w3" + k] = f.at(p + "mlp.up_proj.weight");
        t.w["w2" + k] = f.at(p + "mlp.down_proj.weight");
        if (*s.qkv_bias) {
            t.w["bq" + k] = f.at(p + "self_attn.q_proj.bias");
            t.w["bk" + k] = f.at(p + "self_attn.k_proj.bias");
            t.w["bv" + k] = f.at(p + "self_attn.v_proj.bias");
        }
    }
    return t;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); i++) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The reference itself
// ---------------------------------------------------------------------------------------------

// On Llama-family weights (llama, and qwen2 with q/k/v biases, both with the Llama reference's epsilon 1e-5) the
// family reference and the existing Llama reference compute the same thing, at every point and every ablation.
TEST(FamilyReference, AgreesWithTheLlamaReferenceOnLlamaWeights) {
    for (const char* fam : {"llama", "qwen2"})
        for (bool tied : {false, true}) {
            family_spec s;
            s.family = fam, s.tied = tied, s.norm_eps = 1e-5, s.seed = tied ? 41 : 42, s.rope_theta = fam[0] == 'q' ? 1e6 : 10000;
            tiny_family f = write_family("fam_vs_llama", s);
            tiny_llama t = as_tiny_llama(f);
            const std::vector<int> tokens = random_tokens(13, s.vocab, 3);
            for (const auto& [name, ab] : llama_ablation_cases()) {
                const ref_trace a = reference_family(f, tokens, ab), b = reference_llama(t, tokens, ab);
                const std::string label = std::string(fam) + (tied ? " tied, " : ", ") + name;
                EXPECT_LT(max_abs_diff(a.logits, b.logits), 1e-9) << label;
                EXPECT_LT(max_abs_diff(a.attention, b.attention), 1e-12) << label;
                EXPECT_LT(max_abs_diff(a.resid_norm, b.resid_norm), 1e-9) << label;
                for (int p : {gb::HOOK_Q, gb::HOOK_K, gb::HOOK_Z, gb::HOOK_HEAD_OUT, gb::HOOK_MLP_POST, gb::HOOK_MLP_OUT})
                    for (int l = 0; l < s.n_layer; l++)
                        EXPECT_LT(max_abs_diff(a.at((gb::hook_point)p, l), b.at((gb::hook_point)p, l)), 1e-9)
                            << label << " " << gb::hook_label((gb::hook_point)p, l);
            }
        }
}

// Invariants of every family's reference: attention rows sum to 1, nothing above the diagonal or outside the
// window; the router picks n_expert_used experts per token (weights summing to 1 when renormalised); an ablated
// head's z is 0; an ablated expert's weight is 0 and the others keep theirs.
TEST(FamilyReference, InvariantsHoldForEveryFamily) {
    for (const char* fam : {"gpt_neox", "gemma", "gemma2", "phi3", "olmo2", "qwen3", "mistral", "qwen2", "mixtral",
                            "qwen2_moe", "qwen3_moe", "olmoe"}) {
        family_spec s;
        s.family = fam, s.sliding_window = 5, s.attn_softcap = 2, s.final_softcap = 5, s.rotary_pct = 0.5f, s.seed = 7;
        tiny_family f = write_family(std::string("fam_inv_") + fam, s);
        const int T = 12, H = f.spec.n_head, L = f.spec.n_layer;
        const std::vector<int> tokens = random_tokens(T, s.vocab, 4);
        gb::ablation ab;
        ab.heads = {{1, 2}};
        const ref_trace r = reference_family(f, tokens, ab);
        for (int l = 0; l < L; l++) {
            const bool windowed = f.spec.sliding_window > 0 && (std::string(fam) != "gemma2" || l % 2 == 0);
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++) {
                    double sum = 0;
                    for (int j = 0; j < T; j++) {
                        const double p = r.attention[(((size_t)l * H + h) * T + i) * T + j];
                        sum += p;
                        if (j > i || (windowed && i - j >= f.spec.sliding_window)) {
                            EXPECT_EQ(p, 0.0) << fam << " L" << l << " h" << h;
                        }
                    }
                    EXPECT_NEAR(sum, 1.0, 1e-12) << fam;
                }
            const std::vector<double>& z = r.at(gb::HOOK_Z, l);
            for (int t = 0; t < T && l == 1; t++)
                for (int e = 0; e < f.spec.head_dim; e++) EXPECT_EQ(z[((size_t)t * H + 2) * f.spec.head_dim + e], 0.0) << fam;
        }
        if (f.spec.n_expert == 0) continue;
        family_ref_options fo;
        fo.experts = {{0, 1}};
        family_ref_extra plain, ablated;
        reference_family(f, tokens, {}, {}, &plain);
        reference_family(f, tokens, {}, fo, &ablated);
        const int E = f.spec.n_expert, K = f.spec.n_expert_used;
        for (int l = 0; l < L; l++)
            for (int t = 0; t < T; t++) {
                int chosen = 0;
                double sum = 0;
                for (int e = 0; e < E; e++) {
                    const double w = plain.router[l][(size_t)t * E + e];
                    chosen += w > 0;
                    sum += w;
                    if (l == 0) { // later layers see another input once layer 0's expert is gone
                        EXPECT_EQ(ablated.router[0][(size_t)t * E + e], e == 1 ? 0.0 : w) << fam << ": only expert 0.1 zeroed";
                    }
                }
                EXPECT_EQ(chosen, K) << fam;
                if (*f.spec.norm_topk) {
                    EXPECT_NEAR(sum, 1.0, 1e-12) << fam;
                } else {
                    EXPECT_LT(sum, 1.0) << fam;
                }
            }
    }
}

// The GGUF writer's boolean keys (spliced in after the others) leave a file the loader reads: the Llama GGUF
// path works today, so a GGUF with an extra boolean key must load and match the reference.
TEST(FamilyReference, GgufWithBooleanKeyStillReads) {
    family_spec s;
    s.family = "llama", s.seed = 43;
    tiny_family f = write_family("fam_gguf_bool", s);
    family_gguf g = make_family_gguf(f);
    g.bools.push_back({"llama.some_flag", true});
    g.bools.push_back({"general.another_flag", false});
    g.write(f.gguf_path);
    check_gguf(f, random_tokens(11, s.vocab, 5), "llama with boolean keys");
}

// ---------------------------------------------------------------------------------------------
// One case per family file: HF folder (and GGUF file) against the reference, every ablation, and the settings
// the reference must notice. The Llama-family cases go through the loader paths Glassbox's Llama support
// already tested (the writers' HF names, GGUF names and q/k permutation, and the reference, agree with it).
// ---------------------------------------------------------------------------------------------
namespace {

// A setting whose change moves the reference's logits by more than 1e-2 (so the case really exercises it).
struct family_gap {
    std::string what;
    std::function<void(family_spec&)> change;
};

struct fam_case {
    std::string name;  // the test's name (letters and digits)
    std::string label; // in failure messages
    family_spec spec;
    int n_tokens = 17;
    uint32_t token_seed = 0;
    bool gguf = true; // also written and checked as a GGUF file
    std::vector<family_gap> gaps;
};
void PrintTo(const fam_case& c, std::ostream* os) { *os << c.label; }

// Gemma 2's weights: std 0.12. Without its norms (no-layernorm on every layer) Gemma 2's stream is squared by
// each GeGLU; at the usual 0.25 the logits reach 1e6 before the cap of 5, and fp32 rounding alone (the stream
// matches the reference to 4e-6 of its size at every point) moves the capped logits by 2e-3.
constexpr float gemma2_std = 0.12f;

// Gemma 2: Gemma plus norms after attention and the MLP, attention and final logit soft-capping, a sliding
// window on even layers (window 6 on a 20-token prompt), and query_pre_attn_scalar. GGUF has no
// query_pre_attn_scalar (llama.cpp scales by head_dim^-1/2 but for the 27B), so the GGUF model uses head_dim.
family_spec gemma2_spec() {
    family_spec s;
    s.family = "gemma2", s.head_dim = 12, s.sliding_window = 6, s.attn_softcap = 2.0f, s.final_softcap = 5.0f, s.seed = 54;
    s.std = gemma2_std;
    return s;
}

std::vector<fam_case> family_cases() {
    std::vector<fam_case> cs;
    auto add = [&](const std::string& name, const std::string& label, const family_spec& s, int n_tokens,
                   uint32_t token_seed, bool gguf = true, std::vector<family_gap> gaps = {}) {
        cs.push_back({name, label, s, n_tokens, token_seed, gguf, std::move(gaps)});
    };
    // Llama, Mistral and Qwen2 (q/k/v biases) without windows, untied and tied
    for (const char* fam : {"llama", "mistral", "qwen2"})
        for (bool tied : {false, true}) {
            family_spec s;
            s.family = fam, s.tied = tied, s.seed = tied ? 44 : 45, s.rope_theta = fam[0] == 'q' ? 1e6 : 10000;
            std::string name = fam;
            name[0] = (char)std::toupper(name[0]);
            add(name + (tied ? "Tied" : ""), std::string(fam) + (tied ? " tied" : ""), s, 17, 6);
        }
    // Pythia: fused qkv per head, partial rotary (half of each head here), parallel residual (and the sequential
    // form use_parallel_residual false), LayerNorm with biases, exact GELU, untied embed_out.
    for (bool parallel : {true, false}) {
        family_spec s;
        s.family = "gpt_neox", s.rotary_pct = 0.5f, s.parallel = parallel, s.seed = parallel ? 51 : 52;
        add(parallel ? "GptNeoXParallel" : "GptNeoXSequential", parallel ? "gpt_neox parallel" : "gpt_neox sequential",
            s, 17, 7, true,
            {{"rotary_pct 1", [](family_spec& x) { x.rotary_pct = 1; }},
             {"the other residual form", [](family_spec& x) { x.parallel = !x.parallel; }}});
    }
    { // Gemma: (1 + w) RMSNorm gains (GGUF stores w + 1), embeddings times sqrt(d_model), GeGLU, head_dim 12
      // while d_model / n_head is 8, tied.
        family_spec s;
        s.family = "gemma", s.head_dim = 12, s.seed = 53;
        add("Gemma", "gemma", s, 17, 8);
    }
    // Gemma 2 (gemma2_spec), and with query_pre_attn_scalar 20 (HF only: GGUF has no such key)
    add("Gemma2", "gemma2", gemma2_spec(), 20, 9, true,
        {{"no attention softcap", [](family_spec& x) { x.attn_softcap = 0; }},
         {"no final softcap", [](family_spec& x) { x.final_softcap = 0; }},
         {"no sliding window", [](family_spec& x) { x.sliding_window = 0; }}});
    {
        family_spec s = gemma2_spec();
        s.query_pre_attn_scalar = 20, s.seed = 55;
        add("Gemma2QueryPreAttnScalar", "gemma2, query_pre_attn_scalar 20", s, 20, 9, false,
            {{"query_pre_attn_scalar 12", [](family_spec& x) { x.query_pre_attn_scalar = 12; }}});
    }
    { // Phi-3: fused qkv_proj and gate_up_proj, sliding window on every layer (8, on 20 tokens).
        family_spec s;
        s.family = "phi3", s.sliding_window = 8, s.seed = 56;
        add("Phi3", "phi3", s, 20, 10, true, {{"no sliding window", [](family_spec& x) { x.sliding_window = 0; }}});
    }
    { // OLMo 2: no norms before the sublayers, RMSNorm after each; q/k norms over the whole projection.
        family_spec s;
        s.family = "olmo2", s.seed = 57, s.rope_theta = 500000;
        add("Olmo2", "olmo2", s, 17, 11);
    }
    { // Qwen3: per-head q/k norms, head_dim 12 (d_model / n_head is 8), tied, theta 1e6.
        family_spec s;
        s.family = "qwen3", s.head_dim = 12, s.seed = 58, s.rope_theta = 1e6;
        add("Qwen3", "qwen3", s, 17, 12);
    }
    // Mistral and Qwen2 with their sliding windows in HF files (llama.cpp's GGUFs carry no window for them: the
    // GGUF side is covered without one by the cases above).
    for (const char* fam : {"mistral", "qwen2"}) {
        family_spec s;
        s.family = fam, s.sliding_window = 8, s.seed = 59, s.rope_theta = fam[0] == 'q' ? 1e6 : 10000;
        add(fam[0] == 'q' ? "Qwen2Window8" : "MistralWindow8", std::string(fam) + " window 8", s, 20, 13, false);
    }
    { // Mixtral: softmax over the experts, top 2 of 4 renormalised; GGUF arch "llama" with stacked experts and
      // q/k rows permuted.
        family_spec s;
        s.family = "mixtral", s.seed = 60;
        add("Mixtral", "mixtral", s, 17, 14, true, {{"no renormalised top-k", [](family_spec& x) { x.norm_topk = false; }}});
    }
    // Qwen2-MoE: q/k/v biases, top-k not renormalised (norm_topk_prob false), a shared expert gated by a sigmoid;
    // and with norm_topk_prob true (HF only: llama.cpp's qwen2moe never renormalises).
    for (bool norm : {false, true}) {
        family_spec s;
        s.family = "qwen2_moe", s.norm_topk = norm, s.seed = norm ? 61 : 62, s.rope_theta = 1e6;
        add(norm ? "Qwen2MoeNormTopk" : "Qwen2Moe", norm ? "qwen2_moe norm_topk_prob" : "qwen2_moe", s, 17, 15, !norm,
            {{"norm_topk_prob flipped", [](family_spec& x) { x.norm_topk = !*x.norm_topk; }}});
    }
    { // Qwen3-MoE: per-head q/k norms, top-k renormalised, no shared expert.
        family_spec s;
        s.family = "qwen3_moe", s.head_dim = 12, s.seed = 63, s.rope_theta = 1e6;
        add("Qwen3Moe", "qwen3_moe", s, 17, 16);
    }
    { // OLMoE: q/k norms over the whole projection, pre-norms, top-k not renormalised.
        family_spec s;
        s.family = "olmoe", s.seed = 64;
        add("Olmoe", "olmoe", s, 17, 17);
    }
    return cs;
}

class FamilyFile : public ::testing::TestWithParam<fam_case> {};

} // namespace

TEST_P(FamilyFile, MatchesTheReference) {
    const fam_case& c = GetParam();
    tiny_family f = write_family("fam_" + c.name, c.spec);
    const std::vector<int> tokens = random_tokens(c.n_tokens, c.spec.vocab, c.token_seed);
    check_hf(f, tokens, c.label);
    if (c.gguf) check_gguf(f, tokens, c.label);
    for (const family_gap& g : c.gaps)
        EXPECT_GT(family_reference_gap(f, with(f, g.change), tokens), 1e-2) << c.label << ": " << g.what;
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyFile, ::testing::ValuesIn(family_cases()),
                         [](const ::testing::TestParamInfo<fam_case>& i) { return i.param.name; });

// Gemma 2 beyond the reference: info (model_json) names the family and what differs, from either file, and the
// record says each layer's window (the app masks the keys before it): even layers slide.
TEST(Families, Gemma2InfoAndRecordShowTheWindows) {
    const family_spec s = gemma2_spec();
    tiny_family f = write_family("fam_gemma2_info", s);
    const std::vector<int> tokens = random_tokens(20, s.vocab, 9);
    for (const std::string& path : {f.hf_dir, f.gguf_path}) {
        const nlohmann::json j = gb::model_json(gb::load_model(path));
        EXPECT_EQ(j["family"], "gemma2") << path;
        EXPECT_EQ(j["d_head"], 12) << path;
        EXPECT_EQ(j["sliding_window"]["tokens"], 6) << path;
        EXPECT_EQ(j["sliding_window"]["every"], 2) << path;
        EXPECT_FLOAT_EQ(j["attn_softcap"].get<float>(), 2.0f) << path;
        EXPECT_FLOAT_EQ(j["final_softcap"].get<float>(), 5.0f) << path;
        EXPECT_FALSE(j.contains("parallel")) << path;
    }
    gb::record rec;
    gb::run_forward(rec, gb::load_model(f.hf_dir), tokens);
    EXPECT_EQ(rec.window, (std::vector<int>{6, 0}));
    EXPECT_EQ(rec.first_key(0, 19), 14);
    EXPECT_EQ(rec.first_key(1, 19), 0);
    const float* p = rec.head(0, 0);
    for (int j = 0; j < 14; j++) EXPECT_EQ(p[19 * 20 + j], 0.0f) << j;
    EXPECT_GT(p[19 * 20 + 14], 0.0f);
}

// Direct logit attribution on the post-norm families (Gemma 2 with its final softcap, OLMo 2): each head's share
// against the reference's own numbers, with the two frozen scales read off the reference as ratios (what the
// attention's post norm made of the heads' sum, what the final norm made of the stream), so no gain convention of
// the families is assumed; the parts sum to the logit difference before the cap.
TEST(Families, PostNormAttributionMatchesTheReference) {
    family_spec olmo;
    olmo.family = "olmo2", olmo.seed = 61;
    for (const family_spec& s : {gemma2_spec(), olmo}) {
        const tiny_family f = write_family("fam_dla_" + s.family, s);
        const gb::model m = gb::load_model(f.hf_dir);
        const int T = 12, L = s.n_layer, H = s.n_head, d = s.d_model;
        const std::vector<int> tokens = random_tokens(T, s.vocab, 4);
        const std::vector<float>& un = f.at(*f.spec.tied ? "model.embed_tokens.weight" : "lm_head.weight"); // [V][d]
        std::vector<std::pair<std::string, gb::ablation>> cases(3);
        cases[0].first = "none";
        cases[1].first = "head 1.2", cases[1].second.heads = {{1, 2}};
        cases[2].first = "no-layernorm[0]", cases[2].second.no_layernorm = layers_on({0});
        for (const auto& [name, ab] : cases)
            for (int pos : {T - 1, 3})
                for (int contrast : {7, -1}) {
                    const std::string what = s.family + ", " + name + ", position " + std::to_string(pos) +
                                             ", contrast " + std::to_string(contrast);
                    gb::forward_options opt;
                    opt.keep.points = gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
                    opt.keep.resid_stream = true;
                    opt.all_logits = true;
                    gb::record rec;
                    gb::run_forward(rec, m, tokens, ab, opt);
                    const ref_trace ref = reference_family(f, tokens, ab);
                    const int target = 25;
                    std::vector<double> ku(d); // final norm's frozen scale times u = W_U[target] - W_U[contrast]
                    const double* xl = ref.resid_at(2 * L, pos);
                    const double* xf = &ref.at(gb::HOOK_FINAL_NORM, L)[(size_t)pos * d];
                    double total = 0;
                    for (int i = 0; i < d; i++) {
                        const double u = un[(size_t)target * d + i] - (contrast >= 0 ? un[(size_t)contrast * d + i] : 0.0);
                        ku[i] = xf[i] / xl[i] * u;
                        total += xf[i] * u;
                    }
                    auto share = [&](const double* c, const double* scale) {
                        double v = 0;
                        for (int i = 0; i < d; i++) v += c[i] * (scale ? scale[i] : 1.0) * ku[i];
                        return v;
                    };
                    const gb::attribution got = gb::attribute(rec, m, ab, target, contrast, pos);
                    const double tol = 1e-4 * std::max(1.0, std::abs(total));
                    EXPECT_NEAR(got.total, total, tol) << what << ": the logit difference before the cap";
                    EXPECT_NEAR(got.sum(), total, tol) << what << ": the parts add up";
                    EXPECT_NEAR(got.embed, share(ref.resid_at(0, pos), nullptr), tol) << what;
                    for (int l = 0; l < L; l++) {
                        EXPECT_NEAR(got.mlp[l], share(&ref.at(gb::HOOK_MLP_OUT, l)[(size_t)pos * d], nullptr), tol) << what;
                        const double* hout = &ref.at(gb::HOOK_HEAD_OUT, l)[(size_t)pos * H * d]; // [H][d]
                        const double* aout = &ref.at(gb::HOOK_ATTN_OUT, l)[(size_t)pos * d];
                        std::vector<double> post(d); // the post norm's frozen scale: its output over its input
                        for (int i = 0; i < d; i++) {
                            double sum = 0;
                            for (int h = 0; h < H; h++) sum += hout[(size_t)h * d + i];
                            post[i] = aout[i] / sum;
                        }
                        for (int h = 0; h < H; h++)
                            EXPECT_NEAR(got.heads[(size_t)l * H + h], share(hout + (size_t)h * d, post.data()), tol)
                                << what << ": head " << l << "." << h;
                    }
                }
    }
}

// A quantized GGUF of each kind of layout: Mixtral (arch "llama": permuted q/k, stacked experts in Q8_0, routers
// F32, down matrices F32 as their rows are not whole blocks) and Gemma 2 (w + 1 norms beside Q8_0 matrices).
// The reference runs on the weights rounded through Q8_0, which is what the file holds.
TEST(Families, QuantizedGgufMatchesTheRoundedReference) {
    for (const char* fam : {"mixtral", "gemma2"}) {
        family_spec s;
        s.family = fam, s.seed = 67, s.sliding_window = 6, s.attn_softcap = 2.0f, s.final_softcap = 5.0f;
        if (s.family == "gemma2") s.std = gemma2_std; // see gemma2_std above
        tiny_family f = write_family(std::string("fam_q8_") + fam, s);
        make_family_gguf(f, gb::GGML_Q8_0).write(f.gguf_path);
        tiny_family q = quantized_family(f, gb::GGML_Q8_0);
        const std::vector<int> tokens = random_tokens(17, s.vocab, 20);
        EXPECT_GT(family_reference_gap(f, q, tokens), 1e-5) << fam << ": rounding must show";
        check_gguf(q, tokens, std::string(fam) + " Q8_0");
    }
}

// ---------------------------------------------------------------------------------------------
// Sliding window on a prompt longer than the window
// ---------------------------------------------------------------------------------------------
// Mistral with window 8 on 24 tokens: the reference with the window is far from full attention, and the run
// matches the windowed one (every ablation), so capping the context or ignoring the window both fail.
TEST(SlidingWindow, LongerPromptDiffersFromFullAttentionAndMatchesTheReference) {
    family_spec s;
    s.family = "mistral", s.sliding_window = 8, s.seed = 65;
    tiny_family f = write_family("fam_long_window", s);
    const std::vector<int> tokens = random_tokens(24, s.vocab, 18);
    EXPECT_GT(family_reference_gap(f, with(f, [](family_spec& x) { x.sliding_window = 0; }), tokens), 1e-2);
    gb::model m = gb::load_model(f.hf_dir);
    EXPECT_EQ(m.config.sliding_window, 8);
    EXPECT_GE(m.config.n_ctx, s.n_ctx) << "a window is no reason to shorten the context";
    expect_family_matches_reference(m, f, tokens, "mistral, window 8, 24 tokens");
}

// ---------------------------------------------------------------------------------------------
// Mixture of experts: expert ablation and the router point
// ---------------------------------------------------------------------------------------------
TEST(Moe, ExpertAblationAndRouterMatchTheReference) {
    gb::ablation probe;
    if (!set_ablated_expert(probe, 0, 0)) GTEST_SKIP() << "gb::ablation has no experts yet";
    for (const char* fam : {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}) {
        family_spec s;
        s.family = fam, s.seed = 66;
        tiny_family f = write_family(std::string("fam_experts_") + fam, s);
        const std::vector<int> tokens = random_tokens(15, s.vocab, 19);
        gb::model m = gb::load_model(f.hf_dir);
        gb::ablation ab;
        set_ablated_expert(ab, 0, 1);
        set_ablated_expert(ab, 1, 3);
        gb::record cap;
        gb::forward_options opt;
        opt.all_logits = true;
        const gb::hook_point router = gb::parse_hook_point("router");
        opt.keep.points |= gb::hook_bit(router);
        gb::run_forward(cap, m, tokens, ab, opt);
        family_ref_extra extra;
        const ref_trace ref = reference_family(f, tokens, ab, {}, &extra);
        expect_record_matches(cap, ref, std::string(fam) + ", experts 0.1 1.3");
        std::vector<double> want;
        for (const auto& l : extra.router) want.insert(want.end(), l.begin(), l.end());
        EXPECT_LT(max_scaled_error(cap.flat(router), want), 1e-5) << fam << ": router";
        // ablating matters: far from the run without it
        const ref_trace plain = reference_family(f, tokens, {});
        EXPECT_GT(max_scaled_error(std::vector<float>(ref.logits.begin(), ref.logits.end()), plain.logits), 1e-3) << fam;
    }
}

// ---------------------------------------------------------------------------------------------
// Malformed files: one line naming what is wrong
// ---------------------------------------------------------------------------------------------
TEST(FamilyErrors, MissingOrMisshapenTensorsAreNamed) {
    {
        family_spec s;
        s.family = "gemma2", s.seed = 70;
        tiny_family f = write_family("fam_err_gemma2", s);
        family_gguf g = make_family_gguf(f);
        ASSERT_TRUE(g.remove_tensor("blk.0.post_attention_norm.weight"));
        g.write(f.gguf_path);
        expect_one_line_error([&] { gb::load_model(f.gguf_path); }, "blk.0.post_attention_norm.weight");
        std::vector<gb::st_out> t = family_hf_tensors(f);
        t.erase(std::remove_if(t.begin(), t.end(), [](const gb::st_out& x) { return x.name == "model.layers.1.post_feedforward_layernorm.weight"; }),
                t.end());
        gb::write_safetensors(f.hf_dir + "/model.safetensors", t);
        expect_one_line_error([&] { gb::load_model(f.hf_dir); }, "model.layers.1.post_feedforward_layernorm.weight");
    }
    {
        family_spec s;
        s.family = "phi3", s.seed = 71;
        tiny_family f = write_family("fam_err_phi3", s);
        std::vector<gb::st_out> t = family_hf_tensors(f);
        for (gb::st_out& x : t)
            if (x.name == "model.layers.0.mlp.gate_up_proj.weight") { // the up half missing
                x.shape[0] /= 2;
                x.data.resize(x.data.size() / 2);
            }
        gb::write_safetensors(f.hf_dir + "/model.safetensors", t);
        expect_one_line_error([&] { gb::load_model(f.hf_dir); }, "model.layers.0.mlp.gate_up_proj.weight");
    }
    {
        family_spec s;
        s.family = "mixtral", s.seed = 72;
        tiny_family f = write_family("fam_err_mixtral", s);
        std::vector<gb::st_out> t = family_hf_tensors(f);
        t.erase(std::remove_if(t.begin(), t.end(), [](const gb::st_out& x) { return x.name == "model.layers.1.block_sparse_moe.experts.3.w2.weight"; }),
                t.end());
        gb::write_safetensors(f.hf_dir + "/model.safetensors", t);
        expect_one_line_error([&] { gb::load_model(f.hf_dir); }, "model.layers.1.block_sparse_moe.experts.3.w2.weight");
        family_gguf g = make_family_gguf(f);
        ASSERT_TRUE(g.remove_tensor("blk.1.ffn_down_exps.weight"));
        g.write(f.gguf_path);
        expect_one_line_error([&] { gb::load_model(f.gguf_path); }, "blk.1.ffn_down_exps.weight");
    }
    {
        family_spec s;
        s.family = "qwen2_moe", s.seed = 73;
        tiny_family f = write_family("fam_err_qwen2moe", s);
        family_gguf g = make_family_gguf(f);
        ASSERT_TRUE(g.remove_tensor("blk.0.ffn_gate_inp_shexp.weight"));
        g.write(f.gguf_path);
        expect_one_line_error([&] { gb::load_model(f.gguf_path); }, "blk.0.ffn_gate_inp_shexp.weight");
    }
}

TEST(FamilyErrors, InconsistentConfigsAreNamed) {
    family_spec s;
    s.family = "qwen3_moe", s.seed = 74;
    tiny_family f = write_family("fam_err_config", s);
    auto rewrite = [&](const std::function<void(nlohmann::json&)>& change) {
        nlohmann::json c = nlohmann::json::parse(family_hf_config(f));
        change(c);
        std::ofstream(f.hf_dir + "/config.json") << c.dump();
    };
    rewrite([](nlohmann::json& c) { c["num_experts_per_tok"] = 9; }); // more than the 4 experts
    expect_one_line_error([&] { gb::load_model(f.hf_dir); }, "num_experts_per_tok");
    rewrite([](nlohmann::json& c) { c["head_dim"] = 16; }); // the files hold head_dim 12
    expect_gb_error([&] { gb::load_model(f.hf_dir); }, "model.layers.0.self_attn.");
}

// Live recompute (core/run/live.h) on the families whose blocks differ: GPT-NeoX's parallel block (an attention change
// restarts from the layer's input, which its MLP reads), Gemma 2's windows and output norms, and Mixtral's router.
// Each live run, typed token by token or changed by an ablation, equals a full run of the same request.
TEST(FamilyLive, IncrementalRunsEqualFullRuns) {
    struct live_case {
        const char* family;
        uint32_t seed;
    };
    for (const live_case lc : {live_case{"gpt_neox", 81}, live_case{"gemma2", 82}, live_case{"mixtral", 83}}) {
        family_spec s;
        s.family = lc.family, s.seed = lc.seed, s.sliding_window = std::string(lc.family) == "gemma2" ? 5 : 0;
        if (std::string(lc.family) == "gemma2") s.std = gemma2_std;
        const tiny_family f = write_family(std::string("fam_live_") + lc.family, s);
        const gb::model m = gb::load_model(f.hf_dir);
        gb::record_request keep;
        keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
        keep.resid_stream = true;
        gb::live_state st;
        auto check_iv = [&](const std::vector<int>& tokens, const std::vector<gb::intervention>& iv, const std::string& what) {
            gb::live_request rq;
            rq.tokens = tokens;
            rq.interventions = iv;
            rq.keep = keep;
            gb::live_result out;
            gb::live_run(out, st, m, rq);
            gb::forward_options o;
            o.keep = keep;
            o.interventions = rq.interventions;
            gb::record want;
            gb::run_forward(want, m, tokens, {}, o);
            const std::string label = std::string(lc.family) + ", " + what + " [" + out.report.what + "]";
            EXPECT_LT(max_scaled_error(out.run->logits, std::vector<double>(want.logits.begin(), want.logits.end())), 1e-5) << label;
            const std::vector<float> pw = want.flat(gb::HOOK_PATTERN);
            EXPECT_LT(max_scaled_error(out.run->flat(gb::HOOK_PATTERN), std::vector<double>(pw.begin(), pw.end())), 1e-5) << label;
            EXPECT_LT(max_scaled_error(out.run->resid_norm, std::vector<double>(want.resid_norm.begin(), want.resid_norm.end())), 1e-5)
                << label;
            return out.report;
        };
        auto check = [&](const std::vector<int>& tokens, const gb::ablation& ab, const std::string& what) {
            return check_iv(tokens, gb::ablation_interventions(ab, m.config), what);
        };
        const std::vector<int> all = random_tokens(16, s.vocab, 3);
        for (int n = 10; n <= 16; n += 3) check(std::vector<int>(all.begin(), all.begin() + n), {}, "typed to " + std::to_string(n));
        gb::ablation ab;
        ab.heads.push_back({1, 2});
        gb::live_report r = check(all, ab, "head 1.2");
        EXPECT_TRUE(r.reused) << lc.family;
        ab.no_attention.on = true, ab.no_attention.layers = {1};
        check(all, ab, "no attention on layer 1");
        ab.no_residual.on = true, ab.no_residual.layers = {1};
        check(all, ab, "and no residual on layer 1");
        if (m.config.n_expert > 0) {
            gb::ablation ex;
            ex.experts.push_back({1, 0});
            check(all, ex, "expert 1.0");
        }
        // a change on the MLP side restarts after the attention, except in a parallel block, whose MLP reads the
        // layer's input: it restarts there
        r = check_iv(all, {gb::intervention{gb::INTERVENE_ZERO, gb::HOOK_MLP_OUT, 1}}, "mlp_out of layer 1 zeroed");
        EXPECT_EQ(r.from_point, m.config.parallel ? 2 : 3) << lc.family;
        check(all, {}, "clean again");
    }
}

// Gemma 2's GGUF holds no query_pre_attn_scalar: the head size is the scalar, except for the 46-layer 27B model,
// whose scalar is d_model / heads (as llama.cpp reads it).
TEST(FamilyFiles, Gemma2GgufScoreScaleByDepth) {
    for (int layers : {2, 46}) {
        family_spec s;
        s.family = "gemma2", s.head_dim = 12, s.n_layer = layers, s.seed = 90 + layers, s.std = gemma2_std;
        const tiny_family f = write_family("fam_gemma2_depth" + std::to_string(layers), s);
        const gb::model m = gb::load_model(f.gguf_path);
        const float want = layers == 46 ? 1.0f / std::sqrt(32.0f / 4) : 0.0f; // 0: 1/sqrt(head size)
        EXPECT_FLOAT_EQ(m.config.attn_scale, want) << layers << " layers";
    }
}
