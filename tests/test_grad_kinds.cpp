// Gradients of the kinds beyond decoder-only models (core/run/backward.h): an encoder's masked-LM metric (BERT,
// RoBERTa, DistilBERT: Post-LN, bidirectional, the masked-LM head), an image classifier's class logit (ViT, DeiT
// with its two heads), an encoder–decoder's target logit back through the cross-attention into the encoder (BART,
// mBART, Marian). Every residual point against central finite differences of the double-precision reference
// forwards (tests/support), both matmul kernels, with ablations in force; saliency and integrated gradients.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/gradients.h"
#include "io/loader.h"
#include "kernels/gemm.h"
#include "run/backward.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_model.h"
#include "tiny_seq2seq.h"
#include "tiny_vision.h"
#include "util/image.h"

#include <stb_image_write.h>

namespace {

// The metric of a reference run with an edit in force at one stack's points, in double.
using ref_metric_fn = std::function<double(const ref_edit&)>;

double metric_of_row(const double* lg, const gb::metric_spec& ms, int V) {
    if (ms.kind == gb::metric_spec::LOGPROB) {
        double mx = lg[0], s = 0;
        for (int v = 1; v < V; v++) mx = std::max(mx, lg[v]);
        for (int v = 0; v < V; v++) s += std::exp(lg[v] - mx);
        return lg[ms.target] - mx - std::log(s);
    }
    if (ms.kind == gb::metric_spec::LOGIT || ms.contrast < 0) return lg[ms.target];
    return lg[ms.target] - lg[ms.contrast];
}

// d metric / d (point p of layer l) [n] by central differences, every `every`-th value (the rest 0).
std::vector<double> differences(const ref_metric_fn& f, gb::hook_point p, int l, size_t n, size_t every) {
    const double h = 1e-4;
    std::vector<double> g(n, 0.0);
    for (size_t i = 0; i < n; i += every) {
        double v[2];
        for (int s = 0; s < 2; s++)
            v[s] = f([&](gb::hook_point q, int layer, std::vector<double>& x) {
                if (q == p && layer == l) x[i] += s ? -h : h;
            });
        g[i] = (v[0] - v[1]) / (2 * h);
    }
    return g;
}

// Every residual point of a stack of L layers over T positions: g(q) the backward's point q, f the reference's
// metric with an edit at that stack. Returns the largest |gradient| at point 0 (the embeddings').
double expect_points(const std::function<const float*(int)>& g, const ref_metric_fn& f, int L, int T, int d,
                     size_t every, const std::string& label) {
    double at0 = 0, worst = 0;
    for (int q = 0; q <= 2 * L; q++) {
        gb::hook_point p;
        int l;
        gb::resid_point_hook(q, p, l);
        const std::vector<double> fd = differences(f, p, l, (size_t)T * d, every);
        worst = std::max(worst, expect_gradient(g(q), fd, every, label + " point " + std::to_string(q)));
        if (q == 0)
            for (double v : fd) at0 = std::max(at0, std::abs(v));
    }
    std::printf("[ %s ] worst error relative to the largest gradient: %.2e\n", label.c_str(), worst);
    return at0;
}

gb::metric_spec logit_diff_of(int target, int contrast) {
    gb::metric_spec ms;
    ms.target = target;
    ms.contrast = contrast;
    return ms;
}

gb::metric_spec logprob(int target) {
    gb::metric_spec ms;
    ms.kind = gb::metric_spec::LOGPROB;
    ms.target = target;
    return ms;
}

std::string kernel() { return gb::matmul_name(gb::matmul_kind_now()); }

nlohmann::json read_json_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return nlohmann::json::parse(ss.str());
}

// The JSON's grad_x_input (key) against the core's, within 1e-5 of the largest.
void expect_same_saliency(const nlohmann::json& got, const std::vector<float>& want, const std::string& label) {
    ASSERT_EQ(got.size(), want.size()) << label;
    double scale = 1e-3;
    for (float v : want) scale = std::max(scale, (double)std::fabs(v));
    for (size_t t = 0; t < want.size(); t++) EXPECT_NEAR(got[t].get<double>(), want[t], 1e-5 * scale) << label << " " << t;
}

} // namespace

// An encoder's masked-LM metric at the [MASK] (the default position) through the head's transform, GELU and
// LayerNorm, the Post-LN sums and the bidirectional attention, to point 0 (after the embeddings' LayerNorm).
TEST(GradientKinds, EncodersMatchFiniteDifferences) {
    for (const char* fam : {"bert", "roberta", "distilbert"}) {
        encoder_spec s;
        s.family = fam;
        if (s.family == "roberta") s.vocab = 300; // its byte-level tokenizer's letters
        const tiny_encoder te = write_tiny_encoder(test_temp_dir(std::string("gradk_") + fam), s);
        gb::ablation ablated;
        ablated.heads = {{1, 2}};
        ablated.no_residual = layers_on({1});
        ablated.no_layernorm = layers_on({0});
        for_each_matmul([&] {
            const gb::model m = gb::load_model(te.dir); // its weights packed for the kernel
            ASSERT_TRUE(gb::offers(m.config, gb::FEATURE_GRADIENTS));
            ASSERT_GE(m.tok.mask_id, 0);
            const std::vector<int> tokens = {m.tok.prefix_ids.empty() ? 2 : m.tok.prefix_ids[0], 20, 31, m.tok.mask_id, 40, 27};
            const int T = (int)tokens.size(), d = m.config.d_model, V = m.config.vocab_size, L = m.config.n_layer;
            for (const auto& row : {std::tuple{"logit-diff", gb::ablation{}, logit_diff_of(30, 41)},
                                               std::tuple{"logprob ablated", ablated, logprob(33)}}) {
                const char* name = std::get<0>(row); // (not a structured binding: clang 14 cannot capture those)
                const gb::ablation& ab = std::get<1>(row);
                const gb::metric_spec& ms = std::get<2>(row);
                const std::string label = std::string(fam) + " " + name + " " + kernel();
                gb::gradients g;
                gb::run_gradients(g, m, tokens, ms, ab);
                ASSERT_EQ(g.position, 3) << label << ": the default position is the mask";
                const ref_metric_fn f = [&](const ref_edit& e) {
                    ref_options o;
                    o.edit = e;
                    return metric_of_row(&reference_encoder(te, tokens, ab, o).logits[(size_t)3 * V], ms, V);
                };
                EXPECT_NEAR(g.metric_value, f({}), 1e-3 * (1 + std::abs(g.metric_value))) << label;
                const double at0 = expect_points([&](int q) { return g.resid_at(q); }, f, L, T, d, 2, label);
                EXPECT_GT(at0, 1e-3) << label << ": every token reaches the mask";
            }
        });
    }
}

// A ViT's class logit at [CLS], and DeiT's average of its class and distillation heads, back to the patch
// embeddings (point 0: each patch's product plus its position row).
TEST(GradientKinds, ImageClassifiersMatchFiniteDifferences) {
    for (const char* fam : {"vit", "deit"}) {
        vision_spec s;
        s.family = fam;
        const tiny_vision tv = write_tiny_vision(test_temp_dir(std::string("gradk_") + fam), s);
        const std::vector<float> px = random_pixels(s, 21);
        gb::ablation ablated;
        ablated.heads = {{0, 1}};
        ablated.no_layernorm = layers_on({1});
        for_each_matmul([&] {
            const gb::model m = gb::load_model(tv.dir);
            const std::vector<int> tokens = gb::vision_tokens(m.config);
            const int T = (int)tokens.size(), d = m.config.d_model, V = m.config.vocab_size, L = m.config.n_layer;
            for (const auto& row : {std::tuple{"logit-diff", gb::ablation{}, logit_diff_of(2, 5)},
                                               std::tuple{"logprob ablated", ablated, logprob(4)}}) {
                const char* name = std::get<0>(row); // (not a structured binding: clang 14 cannot capture those)
                const gb::ablation& ab = std::get<1>(row);
                const gb::metric_spec& ms = std::get<2>(row);
                const std::string label = std::string(fam) + " " + name + " " + kernel();
                gb::forward_options o;
                o.pixels = px.data();
                gb::gradients g;
                gb::run_gradients(g, m, tokens, ms, ab, o);
                ASSERT_EQ(g.position, 0) << label;
                const ref_metric_fn f = [&](const ref_edit& e) {
                    ref_options ro;
                    ro.edit = e;
                    return metric_of_row(reference_vision(tv, px, ab, ro).logits.data(), ms, V);
                };
                EXPECT_NEAR(g.metric_value, f({}), 1e-3 * (1 + std::abs(g.metric_value))) << label;
                const double at0 = expect_points([&](int q) { return g.resid_at(q); }, f, L, T, d, 3, label);
                EXPECT_GT(at0, 1e-3) << label << ": the patches reach [CLS]";
            }
        });
        const gb::model m = gb::load_model(tv.dir);
        const std::vector<int> tokens = gb::vision_tokens(m.config);
        gb::metric_spec elsewhere = logit_diff_of(2, 5);
        elsewhere.position = 3;
        gb::forward_options o;
        o.pixels = px.data();
        gb::gradients g;
        expect_gb_error([&] { gb::run_gradients(g, m, tokens, elsewhere, {}, o); }, "read at [CLS]");
    }
}

// An encoder–decoder's target logit: the decoder's points, and through every cross-attention the encoder's
// points down to the source embeddings (Post-LN BART and Marian, Pre-LN mBART with its stacks' final norms).
TEST(GradientKinds, EncoderDecodersMatchFiniteDifferences) {
    for (const char* fam : {"bart", "mbart", "marian"}) {
        seq2seq_spec s;
        s.family = fam;
        const tiny_seq2seq ts = write_tiny_seq2seq(test_temp_dir(std::string("gradk_") + fam), s);
        const std::vector<int> src = {10, 21, 33, 44, ts.eos_id}, tgt = {ts.decoder_start_id, 15, 26, 37};
        gb::ablation ablated;
        ablated.heads = {{1, 0}};
        ablated.no_residual = layers_on({0});
        ablated.no_layernorm = layers_on({1});
        for_each_matmul([&] {
            const gb::model m = gb::load_model(ts.dir);
            ASSERT_TRUE(gb::is_seq2seq(m));
            ASSERT_TRUE(gb::offers(m.config, gb::FEATURE_GRADIENTS));
            const int S = (int)src.size(), T = (int)tgt.size(), d = m.config.d_model, V = m.config.vocab_size;
            for (const auto& row : {std::tuple{"logit-diff", gb::ablation{}, logit_diff_of(50, 61)},
                                               std::tuple{"logprob ablated", ablated, logprob(52)}}) {
                const char* name = std::get<0>(row); // (not a structured binding: clang 14 cannot capture those)
                const gb::ablation& ab = std::get<1>(row);
                const gb::metric_spec& ms = std::get<2>(row);
                const std::string label = std::string(fam) + " " + name + " " + kernel();
                gb::metric_spec at = ms;
                at.position = std::string(name) == "logit-diff" ? -1 : 2; // the default (the last), and an earlier one
                gb::gradients g;
                gb::run_seq2seq_gradients(g, m, src, tgt, at, ab);
                const int pos = at.position < 0 ? T - 1 : at.position;
                ASSERT_EQ(g.position, pos);
                ASSERT_EQ(g.n_source, S);
                auto f_of = [&](bool encoder) -> ref_metric_fn {
                    return [&, encoder](const ref_edit& e) {
                        seq2seq_ref_options o;
                        (encoder ? o.encoder : o.decoder).edit = e;
                        return metric_of_row(&reference_seq2seq(ts, src, tgt, ab, o).logits[(size_t)pos * V], at, V);
                    };
                };
                EXPECT_NEAR(g.metric_value, f_of(false)({}), 1e-3 * (1 + std::abs(g.metric_value))) << label;
                expect_points([&](int q) { return g.resid_at(q); }, f_of(false), m.config.n_layer, T, d, 2,
                              label + " decoder");
                const double at0 = expect_points([&](int q) { return g.source_resid_at(q); }, f_of(true),
                                                 g.source_layers, S, d, 2, label + " encoder");
                EXPECT_GT(at0, 1e-3) << label << ": the source embeddings reach the target logit";
            }
        });
    }
}

// Saliency on the new kinds: gradient x input at point 0 sums the gradient times the stream there; integrated
// gradients close on metric(x) - metric(0), the gap shrinking as the steps grow (LayerNorm everywhere: slowly).
TEST(GradientKinds, SaliencyAndIntegratedGradientsOnEachKind) {
    const tiny_encoder te = write_tiny_encoder(test_temp_dir("gradk_sal_bert"), encoder_spec{});
    const gb::model bert = gb::load_model(te.dir);
    const std::vector<int> tokens = {2, 20, 31, bert.tok.mask_id, 40, 3};
    const gb::metric_spec ms = logit_diff_of(30, 41);
    double gap[3];
    int i = 0;
    for (int steps : {4, 32, 256}) {
        const gb::saliency_result r = gb::saliency(bert, tokens, ms, steps);
        ASSERT_EQ(r.metric.position, 3);
        gap[i++] = std::fabs(r.completeness_gap());
        EXPECT_GT(std::fabs(r.value - r.baseline), 0.1);
    }
    std::printf("[ bert integrated gradients ] |completeness gap| at 4, 32, 256 steps: %.4g %.4g %.4g\n", gap[0], gap[1],
                gap[2]);
    EXPECT_LT(gap[2], gap[0]) << gap[0] << " " << gap[1] << " " << gap[2];
    EXPECT_LT(gap[2], gap[1]) << gap[0] << " " << gap[1] << " " << gap[2];

    vision_spec vs;
    const tiny_vision tv = write_tiny_vision(test_temp_dir("gradk_sal_vit"), vs);
    const gb::model vit = gb::load_model(tv.dir);
    const std::vector<float> px = random_pixels(vs, 5);
    gb::forward_options o;
    o.pixels = px.data();
    const gb::saliency_result v = gb::saliency(vit, gb::vision_tokens(vit.config), logit_diff_of(1, 3), 8, {}, o);
    ASSERT_EQ(v.grad_x_input.size(), (size_t)vit.config.n_ctx);
    double patches = 0;
    for (int t = vit.config.n_prefix; t < vit.config.n_ctx; t++) patches += std::fabs(v.grad_x_input[t]);
    EXPECT_GT(patches, 1e-4);

    seq2seq_spec ss;
    ss.family = "marian";
    const tiny_seq2seq ts = write_tiny_seq2seq(test_temp_dir("gradk_sal_marian"), ss);
    const gb::model mt = gb::load_model(ts.dir);
    const std::vector<int> src = {10, 21, 33, ts.eos_id}, tgt = {ts.decoder_start_id, 15, 26};
    const gb::saliency_result a = gb::saliency_seq2seq(mt, src, tgt, logit_diff_of(50, 61), 0);
    const gb::saliency_result b = gb::saliency_seq2seq(mt, src, tgt, logit_diff_of(50, 61), 512);
    ASSERT_EQ(a.source_grad_x_input.size(), src.size());
    ASSERT_EQ(b.source_integrated.size(), src.size());
    gb::gradients g;
    gb::seq2seq_record rec;
    gb::run_seq2seq_gradients(g, mt, src, tgt, logit_diff_of(50, 61), {}, {}, {}, &rec);
    const int d = mt.config.d_model;
    for (size_t s = 0; s < src.size(); s++) {
        double want = 0;
        for (int k = 0; k < d; k++) want += (double)g.source_resid_at(0)[s * d + k] * rec.encoder.resid(0)[s * d + k];
        EXPECT_NEAR(a.source_grad_x_input[s], want, 1e-4 * (1 + std::fabs(want))) << "source " << s;
    }
    // every source and target embedding scaled together: the two sums close the gap between them
    double sum = 0;
    for (float x : b.integrated) sum += x;
    for (float x : b.source_integrated) sum += x;
    EXPECT_NEAR(b.completeness_gap(), b.value - b.baseline - sum, 1e-6);
    EXPECT_LT(std::fabs(b.completeness_gap()), 0.2 * std::fabs(b.value - b.baseline) + 1e-3);
}

// What stays refused: attribution patching needs two prompts of a decoder-only model; an encoder–decoder's
// gradients need its source.
TEST(GradientKinds, RefusesWhatItDoesNotCover) {
    const tiny_encoder te = write_tiny_encoder(test_temp_dir("gradk_refuse"), encoder_spec{});
    const gb::model bert = gb::load_model(te.dir);
    expect_gb_error([&] { gb::attribution_patching(bert, {2, 20, 3}, {2, 21, 3}, 5, 6); }, "activation patching");
    seq2seq_spec ss;
    const tiny_seq2seq ts = write_tiny_seq2seq(test_temp_dir("gradk_refuse_bart"), ss);
    const gb::model bart = gb::load_model(ts.dir);
    gb::gradients g;
    expect_gb_error([&] { gb::run_gradients(g, bart, {2, 15}, logit_diff_of(5, 6)); }, "encoder's output");
}

// grad from the command line for each new kind: an encoder's metric at its [MASK] by default, an image
// classifier's class by its label with the patches' positions named, an encoder–decoder's --source and
// --target-text with the source keys; atp refused for them with the kind table's one line.
TEST(GradientKinds, CliGradForEachKind) {
    const std::string out = test_temp_dir("gradk_cli");
    const tiny_encoder te = write_tiny_encoder(out + "/bert", encoder_spec{});
    command_result r = run_cli("grad --model '" + te.dir + "' --prompt 'a b [MASK] c' --target-id 30 --contrast-id 41 "
                           "--steps 4 --json '" + out + "/bert.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("at position 3 (\"[MASK]\")"), std::string::npos) << r.out;
    nlohmann::json j = read_json_file(out + "/bert.json");
    EXPECT_EQ(j["kind"], "encoder");
    EXPECT_EQ(j["position"], 3);
    {
        const gb::model m = gb::load_model(te.dir);
        const std::vector<int> ids = gb::encode_prompt(m.tok, "a b [MASK] c", false);
        expect_same_saliency(j["grad_x_input"], gb::saliency(m, ids, logit_diff_of(30, 41), 0).grad_x_input, "bert");
    }
    r = run_cli("atp --model '" + te.dir + "' --prompt 'a b' --corrupt 'a c' --target-id 5 --contrast-id 6");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("activation patching"), std::string::npos) << r.err;

    vision_spec vs;
    const tiny_vision tv = write_tiny_vision(out + "/vit", vs);
    gb::image img;
    img.width = img.height = 20;
    for (int i = 0; i < 20 * 20 * 3; i++) img.rgb.push_back((uint8_t)((i * 13) % 256));
    ASSERT_TRUE(stbi_write_png((out + "/in.png").c_str(), 20, 20, 3, img.rgb.data(), 20 * 3));
    r = run_cli("grad --model '" + tv.dir + "' --image '" + out + "/in.png' --target label2 --contrast-id 5 --steps 0 "
            "--json '" + out + "/vit.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    j = read_json_file(out + "/vit.json");
    EXPECT_EQ(j["kind"], "vision");
    EXPECT_EQ(j["position"], 0);
    EXPECT_EQ(j["target"]["id"], 2);
    EXPECT_EQ(j["tokens"][1]["text"], "r0c0");
    {
        const gb::model m = gb::load_model(tv.dir);
        const std::vector<float> px = gb::vision_pixels(m, gb::load_image(out + "/in.png"));
        gb::forward_options o;
        o.pixels = px.data();
        expect_same_saliency(j["grad_x_input"], gb::saliency(m, gb::vision_tokens(m.config), logit_diff_of(2, 5), 0, {}, o).grad_x_input,
                             "vit");
    }
    r = run_cli("grad --model '" + tv.dir + "' --image '" + out + "/in.png' --target nope --metric logit");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("class labels"), std::string::npos) << r.err;

    seq2seq_spec ss;
    ss.family = "marian";
    const tiny_seq2seq ts = write_tiny_seq2seq(out + "/marian", ss);
    r = run_cli("grad --model '" + ts.dir + "' --source 'hello world' --target-text 'a b' --target-id 30 --metric logprob "
            "--steps 2 --json '" + out + "/mt.json' --npy-dir '" + out + "/mt'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("source (the encoder's embeddings):"), std::string::npos) << r.out;
    j = read_json_file(out + "/mt.json");
    EXPECT_EQ(j["kind"], "encoder-decoder");
    const gb::model m = gb::load_model(ts.dir);
    const std::vector<int> src = gb::source_ids(m, "hello world"), tgt = gb::target_ids(m, "a b");
    EXPECT_EQ(j["position"], (int)tgt.size() - 1);
    ASSERT_EQ(j["source_tokens"].size(), src.size());
    ASSERT_EQ(j["source_integrated"].size(), src.size());
    EXPECT_EQ(j["source_resid_grad"].size(), (size_t)2 * m.encoder->config.n_layer + 1);
    const gb::saliency_result want = gb::saliency_seq2seq(m, src, tgt, logprob(30), 0);
    expect_same_saliency(j["source_grad_x_input"], want.source_grad_x_input, "marian source");
    expect_same_saliency(j["grad_x_input"], want.grad_x_input, "marian target");
    EXPECT_TRUE(std::filesystem::exists(out + "/mt/source_grad_x_input.npy"));
}
