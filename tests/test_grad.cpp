// Gradients (core/run/backward.h): every residual point's gradient and each head's z gradient against central
// finite differences of the double-precision reference forwards (tests/support), on the tiny GPT-2 and GQA Llama
// with both matmul kernels and on the other decoder families, with ablations in force; and what is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <random>

#include "io/loader.h"
#include "kernels/gemm.h"
#include "run/backward.h"
#include "run/forward.h"
#include "ref_models.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_model.h"

namespace {

using ref_fn = std::function<ref_trace(const std::vector<int>&, const gb::ablation&, const ref_options&)>;

// The metric on a reference run, in double.
double ref_metric(const ref_trace& r, const gb::metric_spec& ms, int pos, int V) {
    const double* lg = &r.logits[(size_t)pos * V];
    if (ms.kind == gb::metric_spec::LOGPROB) {
        double mx = lg[0], s = 0;
        for (int v = 1; v < V; v++) mx = std::max(mx, lg[v]);
        for (int v = 0; v < V; v++) s += std::exp(lg[v] - mx);
        return lg[ms.target] - mx - std::log(s);
    }
    if (ms.kind == gb::metric_spec::LOGIT || ms.contrast < 0) return lg[ms.target];
    return lg[ms.target] - lg[ms.contrast];
}

// d metric / d (point p of layer l) by central differences of the reference: each of the tensor's n values
// moved by +-h where it flows on (after the ablations there). Only every `every`-th value (the rest stay 0).
std::vector<double> finite_differences(const ref_fn& ref, const std::vector<int>& tokens, const gb::ablation& ab,
                                       const gb::metric_spec& ms, int pos, int V, gb::hook_point p, int l, size_t n,
                                       size_t every = 1) {
    const double h = 1e-4;
    std::vector<double> g(n, 0.0);
    for (size_t i = 0; i < n; i += every) {
        double f[2];
        for (int s = 0; s < 2; s++) {
            ref_options o;
            o.edit = [&](gb::hook_point q, int layer, std::vector<double>& x) {
                if (q == p && layer == l) x[i] += s ? -h : h;
            };
            f[s] = ref_metric(ref(tokens, ab, o), ms, pos, V);
        }
        g[i] = (f[0] - f[1]) / (2 * h);
    }
    return g;
}

// Every residual point (every `every`-th value) and, with z, each layer's z of m on tokens under ab.
// opt: interventions beyond ab, and fixed: the same changes as the reference's patches (applied before its edits).
void expect_matches_differences(const gb::model& m, const ref_fn& plain_ref, const std::vector<int>& tokens,
                                const gb::ablation& ab, const gb::metric_spec& ms, bool z, size_t every,
                                const std::string& label, const gb::forward_options& opt = {},
                                const ref_options& fixed = {}) {
    const ref_fn ref = [&](const std::vector<int>& t, const gb::ablation& a, const ref_options& o) {
        ref_options both = fixed;
        both.edit = o.edit;
        return plain_ref(t, a, both);
    };
    gb::gradients g;
    gb::run_gradients(g, m, tokens, ms, ab, opt);
    const int L = m.config.n_layer, T = (int)tokens.size(), d = m.config.d_model, V = m.config.vocab_size;
    const int pos = ms.position < 0 ? T - 1 : ms.position;
    ASSERT_EQ(g.position, pos);
    EXPECT_NEAR(g.metric_value, ref_metric(ref(tokens, ab, {}), ms, pos, V), 1e-3 * (1 + std::abs(g.metric_value)))
        << label;
    double final_scale = 0;
    for (int q = 0; q <= 2 * L; q++) {
        gb::hook_point p;
        int l;
        gb::resid_point_hook(q, p, l);
        const std::vector<double> fd = finite_differences(ref, tokens, ab, ms, pos, V, p, l, (size_t)T * d, every);
        expect_gradient(g.resid_at(q), fd, every, label + " resid point " + std::to_string(q));
        if (q == 2 * L)
            for (double v : fd) final_scale = std::max(final_scale, std::abs(v));
    }
    EXPECT_GT(final_scale, 1e-3) << label << ": the metric moves with the last point";
    if (!z) return;
    const size_t zn = (size_t)T * m.config.n_head * m.config.d_head;
    for (int l = 0; l < L; l++) {
        const std::vector<double> fd = finite_differences(ref, tokens, ab, ms, pos, V, gb::HOOK_Z, l, zn, every);
        expect_gradient(g.z_at(l), fd, every, label + " L" + std::to_string(l) + " z");
    }
}

gb::metric_spec logit_diff(int target, int contrast) {
    gb::metric_spec ms;
    ms.target = target;
    ms.contrast = contrast;
    return ms;
}

// out [n][in] = g [n][out] * W^T in double, W [in][out] as unpack_matrix gives it.
std::vector<double> naive_transposed(const std::vector<float>& g, const std::vector<float>& w, int n, int in, int out) {
    std::vector<double> o((size_t)n * in, 0.0);
    for (int r = 0; r < n; r++)
        for (int k = 0; k < in; k++) {
            double s = 0;
            for (int j = 0; j < out; j++) s += (double)g[(size_t)r * out + j] * w[(size_t)k * out + j];
            o[(size_t)r * in + k] = s;
        }
    return o;
}

// gemm_backward on w against the naive product with w's own values, and accumulating onto what out holds.
void expect_transposed_product(const gb::weight_matrix& w, int n, const std::string& label) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> g((size_t)n * w.out), got((size_t)n * w.in, 0.0f);
    for (float& v : g) v = nd(rng);
    const std::vector<double> want = naive_transposed(g, gb::unpack_matrix(w), n, w.in, w.out);
    gb::gemm_scratch gs;
    gb::gemm_backward(got.data(), g.data(), w, n, gs); // the matrix's first product: transposed on the fly
    double scale = 1;
    for (double v : want) scale = std::max(scale, std::abs(v));
    double worst = 0;
    for (size_t i = 0; i < want.size(); i++) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-5 * scale) << label;
    gb::gemm_backward(got.data(), g.data(), w, n, gs, true); // twice the product; the second makes the kept W^T
    worst = 0;
    for (size_t i = 0; i < want.size(); i++) worst = std::max(worst, std::abs(got[i] - 2 * want[i]));
    EXPECT_LE(worst, 2e-5 * scale) << label << " accumulated";
    // the third multiplies by the kept W^T: as close to the reference as the first (not its bits: another order of
    // adds, and AMX digits of W^T); a copy of the matrix makes its own, with the same bits
    std::vector<float> kept((size_t)n * w.in, -1.0f), copied((size_t)n * w.in, -1.0f);
    gb::gemm_backward(kept.data(), g.data(), w, n, gs);
    worst = 0;
    for (size_t i = 0; i < want.size(); i++) worst = std::max(worst, std::abs(kept[i] - want[i]));
    EXPECT_LE(worst, 1e-5 * scale) << label << " by the kept W^T";
    gb::gemm_backward(kept.data(), g.data(), w, n, gs, true);
    worst = 0;
    for (size_t i = 0; i < want.size(); i++) worst = std::max(worst, std::abs(kept[i] - 2 * want[i]));
    EXPECT_LE(worst, 2e-5 * scale) << label << " accumulated by the kept W^T";
    const gb::weight_matrix copy = w;
    for (int i = 0; i < 3; i++) gb::gemm_backward(copied.data(), g.data(), copy, n, gs);
    gb::gemm_backward(kept.data(), g.data(), w, n, gs);
    EXPECT_EQ(copied, kept) << label << " a copy's own W^T";
}

} // namespace

// The backward's product W^T on every form the forward holds weights in: fp32 panels, AMX digits, each stored
// type (a partial last panel; enough rows to split over threads), and a fused matrix of parts of different types.
TEST(Gradients, TransposedProductOnEveryWeightForm) {
    const int in = 512, out = 100;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    std::vector<float> w((size_t)in * out);
    for (float& v : w) v = nd(rng);
    for_each_matmul([&] {
        for (int n : {1, 13, 40})
            expect_transposed_product(gb::pack_matrix(w, in, out), n,
                                      std::string("f32 ") + gb::matmul_name(gb::matmul_kind_now()) + " n " + std::to_string(n));
    });
    for (uint32_t type : gb::ggml_types()) {
        if (type == gb::GGML_F32) continue;
        std::vector<uint8_t> bytes(gb::ggml_bytes(type, (int64_t)in * out)); // [out][in], blocks along in
        gb::quantize(bytes.data(), w.data(), type, (int64_t)in * out);
        const gb::weight_matrix m = gb::pack_parts({{type, bytes.data(), out, true}}, in);
        ASSERT_EQ(m.type, type) << gb::ggml_type_name(type) << " kept as stored";
        expect_transposed_product(m, 40, gb::ggml_type_name(type));
    }
    std::vector<uint8_t> q4(gb::ggml_bytes(gb::GGML_Q4_K, (int64_t)in * 64)), q6(gb::ggml_bytes(gb::GGML_Q6_K, (int64_t)in * 36));
    gb::quantize(q4.data(), w.data(), gb::GGML_Q4_K, (int64_t)in * 64);
    gb::quantize(q6.data(), w.data() + (size_t)in * 64, gb::GGML_Q6_K, (int64_t)in * 36);
    const gb::weight_matrix mixed = gb::pack_parts({{gb::GGML_Q4_K, q4.data(), 64, true}, {gb::GGML_Q6_K, q6.data(), 36, true}}, in);
    ASSERT_EQ(mixed.parts.size(), 2u);
    expect_transposed_product(mixed, 21, "Q4_K | Q6_K parts");
}

// The W^T the backward keeps: made by a matrix's second product, counted while the matrix lives, freed with it;
// a matrix whose W^T would pass the budget is transposed per call and keeps nothing.
TEST(Gradients, KeptTransposedTilesAreCountedAndFreed) {
    const int in = 256, out = 96, n = 8;
    std::vector<float> w((size_t)in * out, 0.25f), g((size_t)n * out, 1.0f), o((size_t)n * in);
    gb::gemm_scratch gs;
    const size_t before = gb::backward_tiles_bytes();
    {
        const gb::weight_matrix m = gb::pack_matrix(w, in, out);
        gb::gemm_backward(o.data(), g.data(), m, n, gs);
        EXPECT_EQ(gb::backward_tiles_bytes(), before) << "a one-off product keeps nothing";
        gb::gemm_backward(o.data(), g.data(), m, n, gs);
        EXPECT_GE(gb::backward_tiles_bytes(), before + (size_t)in * out * 4) << "the second keeps W^T";
        EXPECT_LE(gb::backward_tiles_bytes(), before + (size_t)in * out * 4 * 2) << "padding only";
        for (float v : o) ASSERT_FLOAT_EQ(v, 0.25f * out);
    }
    EXPECT_EQ(gb::backward_tiles_bytes(), before) << "freed with the matrix";
    // past the budget: transposed per call, nothing kept, the same numbers
    const size_t budget = gb::backward_tiles_budget();
    gb::set_backward_tiles_budget(gb::backward_tiles_bytes() + 1024);
    {
        const gb::weight_matrix m = gb::pack_matrix(w, in, out);
        for (int i = 0; i < 3; i++) gb::gemm_backward(o.data(), g.data(), m, n, gs);
        EXPECT_EQ(gb::backward_tiles_bytes(), before) << "over the budget: nothing kept";
        for (float v : o) ASSERT_FLOAT_EQ(v, 0.25f * out);
    }
    gb::set_backward_tiles_budget(budget);
}

// The forward keeps the MLP's pre-activations for the backward (backward_keep); a record without them (an
// older request) has them recomputed from mlp_in, with the same gradients. A GELU model (its activation inside
// the product's epilogue unless they are kept) and a SwiGLU one (two parts), on both kernels.
TEST(Gradients, KeptPreActivationsGiveTheRecomputedGradients) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const std::vector<int> ids = rm->tokens(6, 9);
            gb::metric_spec ms;
            ms.target = 3, ms.contrast = 5;
            gb::forward_options kept, bare;
            kept.keep = gb::backward_keep(rm->m.config);
            bare.keep = kept.keep;
            bare.keep.mlp_pre = false;
            gb::record rk, rb;
            gb::run_forward(rk, rm->m, ids, {}, kept);
            gb::run_forward(rb, rm->m, ids, {}, bare);
            const std::string at = rm->name + " " + gb::matmul_name(gb::matmul_kind_now());
            ASSERT_FALSE(rk.mlp_pre.empty()) << at;
            ASSERT_TRUE(rb.mlp_pre.empty()) << at;
            EXPECT_EQ(rk.mlp_pre_parts, rm->m.config.arch == gb::ARCH_GPT2 ? 1 : 2) << at;
            gb::gradients gk, gbare;
            gb::backward(gk, rm->m, rk, ms, kept);
            gb::backward(gbare, rm->m, rb, ms, bare);
            double worst = 0, scale = 1e-9;
            for (size_t i = 0; i < gk.resid.size(); i++) {
                worst = std::max(worst, (double)std::fabs(gk.resid[i] - gbare.resid[i]));
                scale = std::max(scale, (double)std::fabs(gbare.resid[i]));
            }
            EXPECT_LE(worst, 1e-5 * scale) << at;
            EXPECT_NEAR(gk.metric_value, gbare.metric_value, 1e-5) << at;
        }
    });
}

// Every value of every residual point and every head's z, logit(X) - logit(Y) at the last position.
TEST(Gradients, EveryResidualPointAndZMatchFiniteDifferences) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const std::vector<int> tokens = rm->tokens(5, 3);
            expect_matches_differences(rm->m, rm->reference, tokens, {}, logit_diff(7, 11), true, 1,
                                       rm->name + " " + gb::matmul_name(gb::matmul_kind_now()));
        }
    });
}

// log p(X) and logit(X), at an earlier position too (later positions then have no gradient).
TEST(Gradients, EachMetricAtAnyPosition) {
    for (const ref_model* rm : ref_models()) {
        const std::vector<int> tokens = rm->tokens(6, 4);
        gb::metric_spec lp;
        lp.kind = gb::metric_spec::LOGPROB;
        lp.target = 9;
        lp.position = 3;
        expect_matches_differences(rm->m, rm->reference, tokens, {}, lp, true, 3, rm->name + " logprob at 3");
        gb::gradients g;
        gb::run_gradients(g, rm->m, tokens, lp);
        const int d = rm->m.config.d_model;
        for (int q = 0; q <= 2 * rm->m.config.n_layer; q++)
            for (int i = 4 * d; i < 6 * d; i++) ASSERT_EQ(g.resid_at(q)[i], 0.0f) << "causal: position after 3";
        gb::metric_spec lg;
        lg.kind = gb::metric_spec::LOGIT;
        lg.target = 5;
        expect_matches_differences(rm->m, rm->reference, tokens, {}, lg, false, 2, rm->name + " logit");
    }
}

// Ablations in force in the forward stay in force in the backward: identity norms, dropped residual adds, zeroed
// heads (their z still has a gradient), a zeroed attention output.
TEST(Gradients, AblationsStayInForce) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            gb::ablation ab;
            ab.heads = {{1, 2}, {2, 0}};
            ab.no_residual = layers_on({1});
            ab.no_layernorm = layers_on({0, 2});
            ab.no_attention = layers_on({2});
            expect_matches_differences(rm->m, rm->reference, rm->tokens(5, 8), ab, logit_diff(4, 6), true, 2,
                                       rm->name + " ablated " + gb::matmul_name(gb::matmul_kind_now()));
            gb::ablation all;
            all.no_layernorm = layers_on({}); // every norm, the final one too
            expect_matches_differences(rm->m, rm->reference, rm->tokens(4, 9), all, logit_diff(4, 6), false, 2,
                                       rm->name + " no norms");
        }
    });
}

// Patches (SET) in force: a residual point at one position and a head's z at every position are constants
// for what comes before them, while their own gradients are still reported.
TEST(Gradients, PatchedActivationsAreConstantsUpstream) {
    for (const ref_model* rm : ref_models()) {
        const std::vector<int> tokens = rm->tokens(5, 6), other = rm->tokens(5, 7);
        const int d = rm->m.config.d_model, dh = rm->m.config.d_head, H = rm->m.config.n_head, T = 5;
        gb::record donor;
        gb::forward_options keep;
        keep.keep.resid_stream = true;
        keep.keep.points = gb::hook_bit(gb::HOOK_Z);
        gb::run_forward(donor, rm->m, other, {}, keep);
        std::vector<float> row(donor.resid(3) + 2 * d, donor.resid(3) + 3 * d), zh((size_t)T * dh);
        for (int t = 0; t < T; t++)
            std::copy_n(donor.get(gb::HOOK_Z, 0) + (size_t)t * H * dh + dh, dh, zh.data() + (size_t)t * dh);
        gb::forward_options o;
        gb::intervention set_resid{gb::INTERVENE_SET, gb::HOOK_RESID_MID, 1};
        set_resid.position = 2;
        set_resid.values = row.data();
        gb::intervention set_z{gb::INTERVENE_SET, gb::HOOK_Z, 0};
        set_z.head = 1;
        set_z.values = zh.data();
        o.interventions = {set_resid, set_z};
        ref_options fixed;
        fixed.resid_patches.push_back({3, 2, std::vector<double>(row.begin(), row.end())});
        fixed.z_patches.push_back({0, 1, std::vector<double>(zh.begin(), zh.end())});
        expect_matches_differences(rm->m, rm->reference, tokens, {}, logit_diff(3, 8), true, 1, rm->name + " patched",
                                   o, fixed);
        gb::gradients g;
        gb::run_gradients(g, rm->m, tokens, logit_diff(3, 8), {}, o);
        double at_patch = 0; // the patched row's own gradient is reported, not zeroed
        for (int i = 0; i < d; i++) at_patch = std::max(at_patch, (double)std::fabs(g.resid_at(3)[2 * d + i]));
        EXPECT_GT(at_patch, 1e-3) << rm->name;
    }
}

// The double reference of a tiny family model as a ref_fn (tf must outlive it).
static ref_fn family_reference(const tiny_family& tf) {
    return [&tf](const std::vector<int>& t, const gb::ablation& ab, const ref_options& o) {
        family_ref_options fo;
        fo.base = o;
        return reference_family(tf, t, ab, fo);
    };
}

// The other decoder families: parallel blocks and partial rotary (GPT-NeoX), GeGLU and the embedding scale
// (Gemma), post norms, soft-caps and sliding windows (Gemma 2), q/k norms (OLMo 2 without pre-norms, Qwen3 per
// head), Phi-3's fused gate/up.
TEST(Gradients, EveryDecoderFamilyMatchesFiniteDifferences) {
    for (const char* fam : {"gpt_neox", "gemma", "gemma2", "olmo2", "qwen3", "phi3", "mistral"}) {
        family_spec s;
        s.family = fam;
        if (s.family == "gemma2") s.attn_softcap = 20, s.final_softcap = 15, s.sliding_window = 3;
        if (s.family == "mistral") s.sliding_window = 3;
        if (s.family == "gpt_neox") s.rotary_pct = 0.5f;
        const tiny_family tf = write_tiny_family(test_temp_dir(std::string("grad_") + fam), s);
        const gb::model m = gb::load_model(tf.hf_dir);
        const ref_fn ref = family_reference(tf);
        const std::vector<int> tokens = random_tokens(5, m.config.vocab_size - 4, 12);
        gb::metric_spec lp;
        lp.kind = gb::metric_spec::LOGPROB;
        lp.target = 17;
        expect_matches_differences(m, ref, tokens, {}, lp, true, 3, fam);
        gb::ablation ab;
        ab.heads = {{0, 1}};
        ab.no_layernorm = layers_on({1});
        ab.no_residual = layers_on({0});
        expect_matches_differences(m, ref, tokens, ab, logit_diff(5, 9), false, 3, std::string(fam) + " ablated");
    }
}

// Mixtures of experts, through the chosen experts, the router's softmax (renormalised over the chosen or not), and
// Qwen2-MoE's shared expert with its gate; an ablated expert's weight is a constant. The experts each token chose
// stay chosen under the differences' small steps.
TEST(Gradients, MixturesOfExpertsMatchFiniteDifferences) {
    for (const char* fam : {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}) {
        family_spec s;
        s.family = fam;
        const tiny_family tf = write_tiny_family(test_temp_dir(std::string("grad_") + fam), s);
        const gb::model m = gb::load_model(tf.hf_dir);
        const ref_fn ref = family_reference(tf);
        const std::vector<int> tokens = random_tokens(5, m.config.vocab_size - 4, 13);
        expect_matches_differences(m, ref, tokens, {}, logit_diff(5, 9), true, 3, fam);
        gb::ablation ab;
        ab.experts = {{0, 1}, {1, 2}};
        ab.heads = {{1, 0}};
        gb::metric_spec lp;
        lp.kind = gb::metric_spec::LOGPROB;
        lp.target = 17;
        expect_matches_differences(m, ref, tokens, ab, lp, false, 3, std::string(fam) + " experts ablated");
    }
}

// Weights kept in a stored type (a GGUF in Q8_0 and in F16): the backward multiplies by the dequantised values,
// as the forward does, so it matches the reference of the model rounded through the type.
TEST(Gradients, StoredWeightTypesMatchTheirRoundedReference) {
    family_spec s;
    s.family = "llama";
    s.d_ff = 64; // whole Q8_0 blocks along W_down's rows too
    const tiny_family tf = write_tiny_family(test_temp_dir("grad_stored"), s);
    for (uint32_t type : {gb::GGML_Q8_0, gb::GGML_F16}) {
        const std::string path = test_temp_dir(std::string("grad_stored_") + gb::ggml_type_name(type)) + "/m.gguf";
        make_family_gguf(tf, type).write(path);
        const gb::model m = gb::load_model(path);
        ASSERT_EQ(m.weights.layers[0].w_down.type, type);
        const tiny_family rounded = quantized_family(tf, type);
        const ref_fn ref = [&rounded](const std::vector<int>& t, const gb::ablation& ab, const ref_options& o) {
            family_ref_options fo;
            fo.base = o;
            return reference_family(rounded, t, ab, fo);
        };
        expect_matches_differences(m, ref, random_tokens(5, 200, 3), {}, logit_diff(8, 3), true, 3,
                                   gb::ggml_type_name(type));
    }
}

// Hooks cannot be differentiated; the metric must fit.
TEST(Gradients, RefusesWhatItCannotDifferentiate) {
    const ref_model& rm = tiny_gpt2_ref();
    const std::vector<int> tokens = rm.tokens(4, 1);
    gb::gradients g;
    gb::forward_options o;
    o.hooks.push_back({gb::HOOK_Z, 0, [](gb::hook_tensor&) { return false; }});
    expect_gb_error([&] { gb::run_gradients(g, rm.m, tokens, logit_diff(1, 2), {}, o); }, "hooks");
    expect_gb_error([&] { gb::run_gradients(g, rm.m, tokens, logit_diff(rm.m.config.vocab_size, 2)); },
                    "outside the vocabulary");
    gb::metric_spec far = logit_diff(1, 2);
    far.position = 4;
    expect_gb_error([&] { gb::run_gradients(g, rm.m, tokens, far); }, "outside the prompt");
    expect_gb_error([] { gb::parse_metric("loss"); }, "logit-diff, logit, logprob");
    EXPECT_TRUE(gb::offers(rm.m.config, gb::FEATURE_GRADIENTS)); // the other kinds: test_grad_kinds.cpp
}
