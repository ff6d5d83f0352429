// Sparse autoencoders and transcoders (io/sae.h, analysis/features.h, analysis/feature_index.h): random SAEs the
// tests write in SAELens's folder format and Gemma Scope's params.npz, on the tiny GPT-2 and the GQA Llama, each
// architecture (standard, TopK, JumpReLU, transcoder) against a plain double-precision SAE on the double-precision
// reference's activations; feature ablation, clamping and steering against the reference with the edit made
// there; the refusals; and the CLI's features, run --sae and feature end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/feature_index.h"
#include "analysis/features.h"
#include "analysis/sae_train.h"
#include "io/loader.h"
#include "io/npz.h"
#include "io/safetensors.h"
#include "io/sae.h"
#include "model/quant.h"
#include "random_sae.h"
#include "ref_models.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_model.h"
#include "util/npy.h"

namespace {

// The plain double-precision SAE: f [T][d_sae] and x̂ [T][d_out] of x [T][d_in].
void ref_sae(const gb::sae& s, const std::vector<double>& x, int T, std::vector<double>& f, std::vector<double>& xhat) {
    f.assign((size_t)T * s.d_sae, 0.0);
    xhat.assign((size_t)T * s.d_out, 0.0);
    for (int t = 0; t < T; t++) {
        std::vector<double> pre(s.d_sae);
        for (int i = 0; i < s.d_sae; i++) {
            double a = s.b_enc[i];
            for (int j = 0; j < s.d_in; j++)
                a += (x[(size_t)t * s.d_in + j] - (s.apply_b_dec_to_input ? s.b_dec[j] : 0.0)) * s.W_enc[(size_t)j * s.d_sae + i];
            pre[i] = a;
        }
        std::vector<int> order(s.d_sae);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int b) { return pre[a] > pre[b]; });
        for (int r = 0; r < s.d_sae; r++) {
            const int i = order[r];
            double v = 0;
            if (s.arch == gb::SAE_RELU) v = std::max(pre[i], 0.0);
            if (s.arch == gb::SAE_TOPK) v = r < s.k ? std::max(pre[i], 0.0) : 0.0;
            if (s.arch == gb::SAE_JUMPRELU) v = pre[i] > s.threshold[i] && pre[i] > 0 ? pre[i] : 0.0;
            f[(size_t)t * s.d_sae + i] = v;
        }
        for (int j = 0; j < s.d_out; j++) {
            double a = s.b_dec[j];
            for (int i = 0; i < s.d_sae; i++) a += f[(size_t)t * s.d_sae + i] * s.W_dec[(size_t)i * s.d_out + j];
            xhat[(size_t)t * s.d_out + j] = a;
        }
    }
}

double ref_loss(const ref_trace& r, const std::vector<int>& tokens, int V) {
    double sum = 0;
    for (size_t t = 0; t + 1 < tokens.size(); t++) {
        const double* z = r.logits.data() + t * V;
        double mx = *std::max_element(z, z + V), se = 0;
        for (int v = 0; v < V; v++) se += std::exp(z[v] - mx);
        sum += mx + std::log(se) - z[tokens[t + 1]];
    }
    return sum / (tokens.size() - 1);
}

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// The reference run with the SAE's output point replaced by edit(x_in, x_out) (x_out [T][d_out] changed in place).
ref_trace edited_reference(const ref_model& rm, const std::vector<int>& tokens, const gb::bound_sae& b,
                           const std::function<void(const std::vector<double>& x_in, std::vector<double>& x_out)>& edit) {
    ref_options o;
    std::vector<double> x_in;
    o.edit = [&](gb::hook_point p, int l, std::vector<double>& x) {
        if (l != b.layer) return;
        if (p == b.in) x_in = x;
        if (p == b.out) edit(x_in, x);
    };
    return rm.reference(tokens, {}, o);
}

struct sae_case {
    std::string name;
    gb::sae_arch arch;
    std::string in, out;
    bool npz;                 // Gemma Scope's layout: params.npz under a path naming the hook
    bool safetensors = false; // with npz: params.safetensors instead
};

std::vector<sae_case> cases() {
    return {{"standard", gb::SAE_RELU, "resid_post", "resid_post", false},
            {"topk", gb::SAE_TOPK, "resid_pre", "resid_pre", false},
            {"jumprelu", gb::SAE_JUMPRELU, "mlp_out", "mlp_out", false},
            {"jumprelu-npz", gb::SAE_JUMPRELU, "resid_post", "resid_post", true},
            {"transcoder", gb::SAE_RELU, "mlp_in", "mlp_out", false},
            {"transcoder-jumprelu-npz", gb::SAE_JUMPRELU, "mlp_in", "mlp_out", true},
            {"jumprelu-mlp-gemma-safetensors", gb::SAE_JUMPRELU, "mlp_out", "mlp_out", true, true}};
}

// The case written to disk (SAELens folder, or params.npz under a Gemma Scope-like path) and read back.
gb::bound_sae write_and_open(const sae_case& c, const gb::model& m, int layer, const std::string& root, uint32_t seed) {
    const int d = m.config.d_model;
    const gb::sae s = random_sae(c.arch, d, d, 24, c.in, c.out, layer, seed);
    std::string dir;
    if (c.npz) {
        const std::string kind = s.transcoder ? "transcoders" : c.in == "mlp_out" ? "pt-mlp" : "pt-res";
        dir = root + "/gemma-scope-tiny-" + kind + "/layer_" + std::to_string(layer) + "/width_24/average_l0_5";
        gb::write_sae_npz(dir, s, c.safetensors);
    } else {
        dir = root + "/" + c.name;
        gb::write_sae_saelens(dir, s);
    }
    return gb::open_sae(dir, m);
}


} // namespace

TEST(Sae, EachArchitectureMatchesTheDoubleReference) {
    const std::string root = test_temp_dir("sae_arch");
    for (const ref_model* rm : ref_models())
        for (const sae_case& c : cases()) {
            const std::string what = rm->name + " " + c.name;
            const int layer = 1, V = rm->m.config.vocab_size;
            const gb::bound_sae b = write_and_open(c, rm->m, layer, root + "/" + rm->name, 21);
            EXPECT_EQ(b.s->transcoder, c.in != c.out) << what;
            EXPECT_EQ(b.s->arch, c.arch) << what;
            EXPECT_EQ(b.s->format, c.npz ? "gemma-scope" : "saelens") << what;
            EXPECT_EQ(std::string(gb::hook_name(b.in)), c.in) << what;
            EXPECT_EQ(b.layer, layer) << what;
            const std::vector<int> tokens = rm->tokens(9, 3);
            const int T = (int)tokens.size(), d = b.s->d_out;
            const gb::feature_result r = gb::run_features(rm->m, b, tokens);
            const ref_trace plain = rm->reference(tokens, {}, {});
            std::vector<double> f, xhat;
            ref_sae(*b.s, plain.at(b.in, layer), T, f, xhat);
            EXPECT_LE(max_scaled_error(r.acts, f), 1e-4) << what;
            EXPECT_LE(max_scaled_error(r.recon, xhat), 1e-4) << what;
            int active = 0;
            for (double v : f) active += v > 0;
            EXPECT_GT(active, 0) << what;                      // it is not all zeros
            EXPECT_LT(active, (int)f.size() * 3 / 4) << what; // nor dense
            if (c.arch == gb::SAE_TOPK) {
                for (int t = 0; t < T; t++) EXPECT_LE(std::count_if(f.begin() + t * 24, f.begin() + (t + 1) * 24, [](double v) { return v > 0; }), 5);
            }
            // MSE and FVU from the reference's output point
            const std::vector<double>& x = plain.at(b.out, layer);
            std::vector<double> mean(d, 0.0);
            for (int t = 0; t < T; t++)
                for (int j = 0; j < d; j++) mean[j] += x[t * d + j] / T;
            double err_all = 0, var_all = 0;
            for (int t = 0; t < T; t++) {
                double err = 0, var = 0;
                for (int j = 0; j < d; j++)
                    err += std::pow(x[t * d + j] - xhat[t * d + j], 2), var += std::pow(x[t * d + j] - mean[j], 2);
                EXPECT_NEAR(r.mse[t], err / d, 1e-4 * std::max(1.0, err / d)) << what << " t " << t;
                EXPECT_NEAR(r.fvu[t], err / var, 1e-3 * std::max(1.0, err / var)) << what << " t " << t;
                err_all += err, var_all += var;
            }
            EXPECT_NEAR(r.fvu_all, err_all / var_all, 1e-4 * std::max(1.0, err_all / var_all)) << what;
            // the loss with x̂ spliced in (no error term)
            const ref_trace spliced = edited_reference(*rm, tokens, b, [&](const std::vector<double>&, std::vector<double>& xo) { xo = xhat; });
            const double want = ref_loss(spliced, tokens, V) - ref_loss(plain, tokens, V);
            EXPECT_NEAR(r.loss_delta, want, 1e-4) << what;
            EXPECT_GT(std::fabs(r.loss_delta), 1e-6) << what;
        }
}

TEST(Sae, AblatingAnInactiveFeatureChangesNothingAndAnActiveOneDoes) {
    const std::string root = test_temp_dir("sae_ablate");
    const ref_model& rm = tiny_gpt2_ref();
    for (const sae_case& c : cases()) {
        const gb::bound_sae b = write_and_open(c, rm.m, 2, root, 5);
        const std::vector<int> tokens = rm.tokens(8, 9);
        const gb::record rec = gb::sae_record(rm.m, b, tokens);
        const gb::feature_result fr = gb::features_of(b, rec);
        int dead = -1, live = -1;
        for (int i = 0; i < fr.d_sae; i++) {
            float mx = 0;
            for (int t = 0; t < fr.n_tokens; t++) mx = std::max(mx, fr.acts[(size_t)t * fr.d_sae + i]);
            if (mx == 0 && dead < 0) dead = i;
            if (mx > 0 && live < 0) live = i;
        }
        ASSERT_GE(dead, 0) << c.name << ": no feature is inactive on the prompt";
        ASSERT_GE(live, 0) << c.name;
        auto logits_with = [&](const std::vector<gb::feature_edit>& edits) {
            std::vector<float> values;
            gb::forward_options o;
            o.all_logits = true;
            o.interventions.push_back(gb::feature_intervention(b, rec, edits, values));
            gb::record r;
            gb::run_forward(r, rm.m, tokens, {}, o);
            return r.logits;
        };
        const std::vector<float> off = logits_with({{gb::FEATURE_ABLATE, dead, 0}});
        for (size_t i = 0; i < off.size(); i++) ASSERT_EQ(off[i], rec.logits[i]) << c.name << " logit " << i;
        const std::vector<float> on = logits_with({{gb::FEATURE_ABLATE, live, 0}});
        EXPECT_GT(max_scaled_error(on, to_double(rec.logits)), 1e-5) << c.name;
    }
}

TEST(Sae, AblateClampAndSteerEqualTheReference) {
    const std::string root = test_temp_dir("sae_edit");
    for (const ref_model* rm : ref_models())
        for (const sae_case& c : cases()) {
            const std::string what = rm->name + " " + c.name;
            const gb::bound_sae b = write_and_open(c, rm->m, 0, root + "/" + rm->name, 8);
            const gb::sae& s = *b.s;
            const std::vector<int> tokens = rm->tokens(7, 4);
            const gb::record rec = gb::sae_record(rm->m, b, tokens);
            const gb::feature_result fr = gb::features_of(b, rec);
            int live = 0; // the feature most active at the last position
            for (int i = 0; i < s.d_sae; i++)
                if (fr.acts[(size_t)(fr.n_tokens - 1) * s.d_sae + i] > fr.acts[(size_t)(fr.n_tokens - 1) * s.d_sae + live]) live = i;
            const std::vector<gb::feature_edit> edits = {{gb::FEATURE_ABLATE, live, 0}, {gb::FEATURE_CLAMP, 3, 2.5f}, {gb::FEATURE_STEER, 7, -1.5f}};
            std::vector<float> values;
            gb::forward_options o;
            o.all_logits = true;
            o.interventions.push_back(gb::feature_intervention(b, rec, edits, values));
            gb::record got;
            gb::run_forward(got, rm->m, tokens, {}, o);
            const ref_trace want = edited_reference(*rm, tokens, b, [&](const std::vector<double>& x_in, std::vector<double>& xo) {
                std::vector<double> f, xhat;
                ref_sae(s, x_in, (int)tokens.size(), f, xhat);
                for (size_t t = 0; t < tokens.size(); t++) {
                    const double coef[3] = {-f[t * s.d_sae + live], 2.5 - f[t * s.d_sae + 3], -1.5};
                    const int ids[3] = {live, 3, 7};
                    for (int e = 0; e < 3; e++)
                        for (int j = 0; j < s.d_out; j++) xo[t * s.d_out + j] += coef[e] * s.W_dec[(size_t)ids[e] * s.d_out + j];
                }
            });
            EXPECT_LE(max_scaled_error(got.logits, want.logits), 1e-4) << what;
            EXPECT_GT(max_scaled_error(got.logits, rm->reference(tokens, {}, {}).logits), 1e-3) << what;
        }
}

TEST(Sae, LogitEffectIsTheDecoderRowThroughTheGainAndUnembedding) {
    const std::string root = test_temp_dir("sae_logit");
    const ref_model& rm = tiny_gpt2_ref();
    const gb::bound_sae b = write_and_open(cases()[0], rm.m, 1, root, 3);
    std::vector<gb::token_effect> up, down;
    gb::feature_logit_effect(up, down, rm.m, b, 4, 5);
    ASSERT_EQ(up.size(), 5u);
    ASSERT_EQ(down.size(), 5u);
    const int d = rm.m.config.d_model, V = rm.m.config.vocab_size;
    std::vector<double> e(V, 0.0);
    const std::vector<float> U = gb::table_f32(rm.m.weights.unembedding());
    for (int v = 0; v < V; v++)
        for (int j = 0; j < d; j++) e[v] += (double)b.s->W_dec[4 * d + j] * rm.m.weights.normf_g[j] * U[(size_t)v * d + j];
    const double mx = *std::max_element(e.begin(), e.end()), mn = *std::min_element(e.begin(), e.end());
    EXPECT_NEAR(up[0].effect, mx, 1e-4);
    EXPECT_NEAR(down[0].effect, mn, 1e-4);
    EXPECT_NEAR(e[up[0].id], mx, 1e-4);
    for (size_t i = 1; i < up.size(); i++) EXPECT_LE(up[i].effect, up[i - 1].effect);
}

TEST(Sae, RefusalsAreOneLine) {
    const std::string root = test_temp_dir("sae_refuse");
    const ref_model& rm = tiny_gpt2_ref();
    const int d = rm.m.config.d_model;
    auto write = [&](const std::string& name, const gb::sae& s, const std::function<void(nlohmann::json&)>& cfg_edit = {}) {
        const std::string dir = root + "/" + name;
        gb::write_sae_saelens(dir, s);
        if (cfg_edit) {
            nlohmann::json cfg = nlohmann::json::parse(read_file(dir + "/cfg.json"));
            cfg_edit(cfg);
            std::ofstream(dir + "/cfg.json") << cfg.dump();
        }
        return dir;
    };
    auto opens = [&](const std::string& dir) { return [&, dir] { gb::open_sae(dir, rm.m); }; };
    const gb::sae ok = random_sae(gb::SAE_RELU, d, d, 8, "resid_post", "resid_post", 1, 2);
    expect_gb_error(opens(write("wide", random_sae(gb::SAE_RELU, d + 1, d + 1, 8, "resid_post", "resid_post", 1, 2))), "d_in is " + std::to_string(d + 1));
    expect_gb_error(opens(write("hook", ok, [](nlohmann::json& c) { c["hook_name"] = "blocks.1.hook_foo"; })), "no such point");
    expect_gb_error(opens(write("layer", ok, [](nlohmann::json& c) { c["hook_name"] = "blocks.9.hook_resid_post"; })), "layer 9");
    expect_gb_error(opens(write("norm", ok, [](nlohmann::json& c) { c["normalize_activations"] = "expected_average_only_in"; })),
                    "normalize_activations expected_average_only_in");
    expect_gb_error(opens(write("rescale", ok, [](nlohmann::json& c) { c["rescale_acts_by_decoder_norm"] = true; })),
                    "rescale_acts_by_decoder_norm is not supported");
    expect_gb_error(opens(write("gated", ok, [](nlohmann::json& c) { c["architecture"] = "gated"; })), "architecture gated");
    expect_gb_error(opens(write("topk", ok, [](nlohmann::json& c) { c["architecture"] = "topk"; })), "needs k");
    expect_gb_error(opens(write("jump", ok, [](nlohmann::json& c) { c["architecture"] = "jumprelu"; })), "missing tensor threshold");
    gb::sae nan = ok;
    nan.W_dec[5] = std::numeric_limits<float>::quiet_NaN();
    expect_gb_error(opens(write("nan", nan)), "NaN or infinite");
    // a missing tensor and a wrong shape
    const std::string miss = write("missing", ok);
    gb::write_safetensors(miss + "/sae_weights.safetensors", {{"W_enc", {d, 8}, ok.W_enc}, {"b_enc", {8}, ok.b_enc}, {"W_dec", {8, d}, ok.W_dec}});
    expect_gb_error(opens(miss), "missing tensor b_dec");
    const std::string shape = write("shape", ok);
    gb::write_safetensors(shape + "/sae_weights.safetensors", {{"W_enc", {d, 8}, ok.W_enc}, {"b_enc", {8}, ok.b_enc},
                                                               {"W_dec", {8, d}, ok.W_dec}, {"b_dec", {d - 1}, std::vector<float>(d - 1)}});
    expect_gb_error(opens(shape), "b_dec is [" + std::to_string(d - 1) + "], expected [" + std::to_string(d) + "]");
    expect_gb_error([&] { gb::read_sae(root + "/nothing"); }, "no such file");
    expect_gb_error([&] { gb::write_sae_npz(root + "/plain", ok); gb::read_sae(root + "/plain"); }, "cannot tell the SAE's hook point");
    // the hook is read from the release's folders only: a folder of the user's own that says "transcoder" (a
    // checkout at /work/wt/transcoder once made every Gemma Scope residual SAE a transcoder) does not count
    {
        const std::string dir = root + "/my-transcoder-work/gemma-scope-tiny-pt-res/layer_1/width_8/average_l0_3";
        gb::write_sae_npz(dir, ok);
        const gb::sae back = gb::read_sae(dir);
        EXPECT_FALSE(back.transcoder);
        EXPECT_EQ(back.hook_name, "blocks.1.hook_resid_post");
        const std::string cache = root + "/transcoder-x/models--org--my-sae-mlp/snapshots/abc/layer_0";
        gb::write_sae_npz(cache, ok);
        EXPECT_EQ(gb::read_sae(cache).hook_name, "blocks.0.hook_mlp_out");
    }
    // collecting activations at a layer the model lacks (the app once crashed training for a model opened after
    // Train was pressed for a deeper one)
    expect_gb_error([&] { gb::collect_activations(rm.m, gb::HOOK_RESID_POST, rm.m.config.n_layer, "the cat", 16, 100, false); },
                    "layer " + std::to_string(rm.m.config.n_layer) + " is outside the model");
    expect_gb_error([&] { gb::collect_activations(rm.m, gb::HOOK_RESID_POST, -1, "the cat", 16, 100, false); }, "layer -1");
    // a model name that differs is a warning, not an error
    const gb::bound_sae w = gb::open_sae(write("named", ok, [](nlohmann::json& c) { c["model_name"] = "gpt2-small"; }), rm.m);
    ASSERT_EQ(w.warnings.size(), 1u);
    EXPECT_NE(w.warnings[0].find("gpt2-small"), std::string::npos);
}

TEST(Sae, NpzReadsWhatNumpyWrites) {
    // numpy.savez's layout with zip64 extras: written by hand here (a zip64 local header and central entry with
    // 0xFFFFFFFF sizes), read back
    const std::string root = test_temp_dir("sae_npz");
    const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
    std::map<std::string, gb::npy_array> a = {{"W", {{2, 3}, v}}, {"b", {{3}, {1, 2, 3}}}};
    gb::write_npz(root + "/plain.npz", a);
    const auto back = gb::read_npz(root + "/plain.npz");
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back.at("W").shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(back.at("W").data, v);
    const std::string body = gb::npy_bytes({2, 3}, v.data());
    std::string z;
    auto put = [&](uint64_t x, int n) { for (int i = 0; i < n; i++) z += (char)((x >> (8 * i)) & 0xff); };
    const std::string name = "W.npy";
    put(0x04034b50, 4), put(45, 2), put(0, 2), put(0, 2), put(0, 4), put(0, 4), put(0xFFFFFFFF, 4), put(0xFFFFFFFF, 4);
    put(name.size(), 2), put(20, 2);
    z += name;
    put(1, 2), put(16, 2), put(body.size(), 8), put(body.size(), 8);
    z += body;
    const size_t cd = z.size();
    put(0x02014b50, 4), put(45, 2), put(45, 2), put(0, 2), put(0, 2), put(0, 4), put(0, 4), put(0xFFFFFFFF, 4), put(0xFFFFFFFF, 4);
    put(name.size(), 2), put(20, 2), put(0, 2), put(0, 2), put(0, 2), put(0, 4), put(0, 4);
    z += name;
    put(1, 2), put(16, 2), put(body.size(), 8), put(body.size(), 8);
    const size_t cd_size = z.size() - cd;
    put(0x06054b50, 4), put(0, 4), put(1, 2), put(1, 2), put(cd_size, 4), put(cd, 4), put(0, 2);
    std::ofstream(root + "/zip64.npz", std::ios::binary) << z;
    EXPECT_EQ(gb::read_npz(root + "/zip64.npz").at("W").data, v);
    std::string deflated = z;
    deflated[8] = 8; // the local header's method; the central one says it too
    deflated[cd + 10] = 8;
    std::ofstream(root + "/deflate.npz", std::ios::binary) << deflated;
    expect_gb_error([&] { gb::read_npz(root + "/deflate.npz"); }, "numpy.savez_compressed");
}

TEST(Sae, CliFeaturesRunAndFeatureEndToEnd) {
    const std::string dir = test_temp_dir("sae_cli");
    tiny_spec spec;
    spec.n_layer = 2;
    const tiny_model tm = write_tiny_gpt2(dir + "/model", spec);
    const gb::sae s = random_sae(gb::SAE_TOPK, spec.d_model, spec.d_model, 32, "resid_post", "resid_post", 1, 17);
    gb::write_sae_saelens(dir + "/sae", s);
    const std::string model = "--model " + dir + "/model --sae " + dir + "/sae ";
    // features: the JSON and the .npy files agree with the core on the same model
    command_result r = run_cli("features " + model + "--prompt 'hello world, hello' --top 3 --json " + dir + "/f.json --npy-dir " + dir + "/npy");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/f.json"));
    for (const char* k : {"hook", "layer", "d_sae", "top", "mse", "fvu", "fvu_all", "loss_delta"}) EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["hook"], "resid_post");
    EXPECT_EQ(j["layer"], 1);
    EXPECT_EQ(j["d_sae"], 32);
    const int T = (int)j["tokens"].size();
    ASSERT_GT(T, 2);
    ASSERT_EQ((int)j["top"].size(), T);
    EXPECT_EQ(j["top"][0].size(), 3u);
    gb::model m = gb::load_model(dir + "/model");
    const gb::bound_sae b = gb::open_sae(dir + "/sae", m);
    const std::vector<int> tokens = j["tokens"].get<std::vector<int>>();
    const gb::feature_result fr = gb::run_features(m, b, tokens);
    EXPECT_NEAR(j["loss_delta"].get<double>(), fr.loss_delta, 1e-5);
    EXPECT_NEAR(j["fvu_all"].get<double>(), fr.fvu_all, 1e-5);
    const int top_id = j["top"][T - 1][0]["id"];
    EXPECT_FLOAT_EQ(j["top"][T - 1][0]["act"].get<float>(), fr.acts[(size_t)(T - 1) * 32 + top_id]);
    const std::string fnpy = read_file(dir + "/npy/features.npy");
    const gb::npy_array fa = gb::parse_npy((const uint8_t*)fnpy.data(), fnpy.size(), "features.npy");
    EXPECT_EQ(fa.shape, (std::vector<int64_t>{T, 32}));
    EXPECT_EQ(fa.data, fr.acts);
    const std::string rnpy = read_file(dir + "/npy/reconstruction.npy");
    EXPECT_EQ(gb::parse_npy((const uint8_t*)rnpy.data(), rnpy.size(), "reconstruction.npy").shape, (std::vector<int64_t>{T, 16}));
    // run with feature interventions: the JSON echoes them, and the prediction changes
    r = run_cli("run " + model + "--prompt 'hello world, hello' --feature-ablate " + std::to_string(top_id) +
            " --feature-clamp 2=3.5 --feature-steer 9=2.0 --json " + dir + "/run.json");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json rj = nlohmann::json::parse(read_file(dir + "/run.json"));
    EXPECT_EQ(rj["sae"]["feature_ablate"], nlohmann::json::array({top_id}));
    EXPECT_EQ(rj["sae"]["feature_clamp"][0]["id"], 2);
    EXPECT_FLOAT_EQ(rj["sae"]["feature_clamp"][0]["value"].get<float>(), 3.5f);
    EXPECT_EQ(rj["sae"]["feature_steer"][0]["id"], 9);
    EXPECT_EQ(rj["sae"]["hook"], "resid_post");
    const command_result plain = run_cli("run --model " + dir + "/model --prompt 'hello world, hello' --json " + dir + "/plain.json");
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_NE(nlohmann::json::parse(read_file(dir + "/plain.json"))["top_k"], rj["top_k"]);
    // feature: contexts over a corpus (built, then cached), promotes and suppresses
    std::ofstream(dir + "/corpus.txt") << "hello world, hello there. the world says hello back to the world.\n"
                                          "a second line of text, with world and hello again.\n";
    const std::string fcmd = "feature " + model + "--id " + std::to_string(top_id) + " --corpus " + dir + "/corpus.txt --top 4 --json " + dir + "/one.json";
    r = run_cli(fcmd);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(built,"), std::string::npos) << r.out;
    const nlohmann::json fj = nlohmann::json::parse(read_file(dir + "/one.json"));
    ASSERT_GT(fj["contexts"].size(), 0u);
    EXPECT_LE(fj["contexts"].size(), 4u);
    for (const char* k : {"text", "position", "activation"}) EXPECT_TRUE(fj["contexts"][0].contains(k)) << k;
    EXPECT_NE(fj["contexts"][0]["text"].get<std::string>().find("[["), std::string::npos);
    EXPECT_EQ(fj["promotes"].size(), 4u);
    EXPECT_EQ(fj["suppresses"].size(), 4u);
    EXPECT_GE(fj["promotes"][0]["effect"].get<double>(), fj["suppresses"][0]["effect"].get<double>());
    r = run_cli(fcmd);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(cached,"), std::string::npos) << r.out;
    EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/one.json"))["contexts"], fj["contexts"]);
    // an SAE rewritten in the same folder gets a new index, not the old one's contexts
    gb::sae s2 = s;
    for (float& w : s2.b_enc) w -= 0.5f;
    gb::write_sae_saelens(dir + "/sae", s2);
    r = run_cli(fcmd);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(built,"), std::string::npos) << r.out;
    gb::write_sae_saelens(dir + "/sae", s);
    // bench --sae: the forward and the features' time for each length
    r = run_cli("bench " + model + "--tokens 8 --repeat 1 --json " + dir + "/bench.json");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json bj = nlohmann::json::parse(read_file(dir + "/bench.json"));
    ASSERT_EQ(bj["results"].size(), 1u);
    EXPECT_EQ(bj["results"][0]["tokens"], 8);
    EXPECT_GT(bj["results"][0]["ratio"].get<double>(), 1.0);
    // refusals: exit 2, one line
    for (const std::string& bad : {"run --model " + dir + "/model --prompt hi --feature-ablate 3",
                                   "run " + model + "--prompt hi --feature-ablate 99",
                                   "run " + model + "--prompt hi --feature-clamp 3",
                                   "features --model " + dir + "/model --prompt hi --sae " + dir + "/nowhere"}) {
        r = run_cli(bad);
        EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << bad << "\n" << r.err;
    }
}

namespace {

// x = Σ a_i dir_i over a few of n_feat planted unit directions (each on with probability p, a_i in [1, 2]).
std::vector<float> planted_data(int d, int n_feat, int64_t n, float p, uint32_t seed, std::vector<std::vector<float>>& dirs) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g;
    std::uniform_real_distribution<float> u(0, 1);
    dirs.assign(n_feat, std::vector<float>(d));
    for (auto& v : dirs) {
        float nn = 0;
        for (float& e : v) {
            e = g(rng);
            nn += e * e;
        }
        for (float& e : v) e /= std::sqrt(nn);
    }
    std::vector<float> x((size_t)n * d, 0.0f);
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < n_feat; i++)
            if (u(rng) < p) {
                const float a = 1 + u(rng);
                for (int j = 0; j < d; j++) x[(size_t)r * d + j] += a * dirs[i][j];
            }
    return x;
}

// For each planted direction, the best cosine with any decoder row.
std::vector<double> best_cosines(const gb::sae& s, const std::vector<std::vector<float>>& dirs) {
    std::vector<double> out;
    for (const auto& v : dirs) {
        double best = -1;
        for (int i = 0; i < s.d_sae; i++) {
            double dot = 0, nn = 0;
            for (int j = 0; j < s.d_out; j++) dot += v[j] * s.W_dec[(size_t)i * s.d_out + j], nn += std::pow(s.W_dec[(size_t)i * s.d_out + j], 2);
            best = std::max(best, dot / std::sqrt(nn));
        }
        out.push_back(best);
    }
    return out;
}

} // namespace

TEST(SaeTrain, RecoversPlantedSparseFeatures) {
    const int d = 24, n_feat = 32;
    std::vector<std::vector<float>> dirs;
    const std::vector<float> x = planted_data(d, n_feat, 20000, 3.0f / n_feat, 7, dirs);
    for (int k : {0, 4}) {
        gb::sae_train_options o;
        o.d_sae = 64, o.k = k, o.l1 = k ? 0 : 0.5f, o.steps = k ? 1500 : 2000, o.batch = 256, o.lr = 2e-3f, o.seed = 1;
        double explained = 0;
        const gb::sae s = gb::train_sae(x.data(), 20000, d, o, "", [&](const gb::sae_train_progress& p) { explained = p.explained; });
        const std::vector<double> cos = best_cosines(s, dirs);
        const double worst = *std::min_element(cos.begin(), cos.end());
        EXPECT_GE(worst, 0.9) << (k ? "topk" : "relu+l1") << ": the worst-recovered planted feature";
        EXPECT_GT(explained, 0.8) << (k ? "topk" : "relu+l1");
        for (int i = 0; i < s.d_sae; i++) { // unit-norm decoder rows
            double nn = 0;
            for (int j = 0; j < d; j++) nn += std::pow(s.W_dec[(size_t)i * d + j], 2);
            ASSERT_NEAR(nn, 1.0, 1e-4);
        }
    }
}

TEST(SaeTrain, ResumingGivesTheSameWeights) {
    std::vector<std::vector<float>> dirs;
    const std::vector<float> x = planted_data(12, 16, 4000, 0.15f, 3, dirs);
    const std::string dir = test_temp_dir("sae_resume");
    gb::sae_train_options o;
    o.d_sae = 24, o.k = 3, o.steps = 120, o.batch = 64, o.seed = 2, o.dead_after = 40, o.save_every = 60;
    const gb::sae straight = gb::train_sae(x.data(), 4000, 12, o, dir + "/a.state", {});
    o.steps = 60;
    gb::train_sae(x.data(), 4000, 12, o, dir + "/b.state", {});
    o.steps = 120;
    int64_t at = -1;
    const gb::sae resumed = gb::train_sae(x.data(), 4000, 12, o, dir + "/b.state", {}, &at);
    EXPECT_EQ(at, 60);
    EXPECT_EQ(resumed.W_dec, straight.W_dec);
    EXPECT_EQ(resumed.W_enc, straight.W_enc);
    EXPECT_EQ(resumed.b_dec, straight.b_dec);
}

TEST(SaeTrain, CliTrainsResumesAndWritesWhatTheLoaderReads) {
    const std::string dir = test_temp_dir("sae_train_cli");
    tiny_spec spec;
    const tiny_model tm = write_tiny_gpt2(dir + "/model", spec);
    std::ofstream(dir + "/corpus.txt") << "the cat sat on the mat. the dog sat on the log. a cat and a dog met on a mat.\n"
                                          "hello world, hello there, the world says hello.\n";
    const std::string base = "train-sae --model " + dir + "/model --hook resid_post --layer 1 --corpus " + dir +
                             "/corpus.txt --features 32 --k 4 --batch 32 --out " + dir + "/sae --json " + dir + "/t.json";
    command_result r = run_cli(base + " --steps 40");
    ASSERT_EQ(r.code, 0) << r.err;
    r = run_cli(base + " --steps 80");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("resumed at step 40"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/t.json"));
    EXPECT_EQ(j["resumed_at"], 40);
    EXPECT_GT(j["explained"].get<double>(), 0.0);
    const nlohmann::json cfg = nlohmann::json::parse(read_file(dir + "/sae/cfg.json"));
    EXPECT_EQ(cfg["architecture"], "topk");
    EXPECT_EQ(cfg["hook_name"], "blocks.1.hook_resid_post");
    EXPECT_EQ(cfg["k"], 4);
    gb::model m = gb::load_model(dir + "/model");
    const gb::bound_sae b = gb::open_sae(dir + "/sae", m);
    EXPECT_EQ(b.s->d_sae, 32);
    EXPECT_EQ(b.in, gb::HOOK_RESID_POST);
    EXPECT_TRUE(b.warnings.empty()) << b.warnings[0];
    r = run_cli("train-sae --model " + dir + "/model --hook resid_post --layer 1 --corpus " + dir +
            "/corpus.txt --features 32 --k 4 --l1 0.1 --out " + dir + "/bad");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("one of --k K"), std::string::npos) << r.err;
}
