// Attribution graphs (core/analysis/attribution_graph.h, replacement.h, graph_prune.h, graph_json.h,
// core/io/transcoders.h): on tiny random GPT-2 (LayerNorm), Llama (RMSNorm, grouped-query attention), GPT-NeoX
// (parallel blocks), Gemma 2 (pre- and post-norms) and OLMo 2 (post-norms only) models with random transcoder sets the tests write in circuit-tracer's layout (per-layer ReLU,
// JumpReLU and TopK, with and without a skip; cross-layer ReLU and JumpReLU with a skip), against the double
// reference of tests/support/ref_graph.h: the features, the frozen replacement model reproducing the model's own
// reads, the adjacency column by column as the removal of each source's write, influence, masks, cut-offs and
// scores against a reference that inverts (I - Â); the choice of features by estimated influence; Neuronpedia's
// JSON written and read back; the refusals; the CLI end to end; and the time on the default model (printed).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "analysis/attribution_graph.h"
#include "analysis/graph_intervene.h"
#include "analysis/graph_json.h"
#include "analysis/graph_prune.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "io/transcoders.h"
#include "ref_graph.h"
#include "run/forward.h"
#include "run/record.h"
#include "test_util.h"
#include "tiny_family.h"
#include "tiny_model.h"
#include "util/error.h"
#include "util/npy.h"

namespace {

struct family_case {
    std::string name;
    std::string dir;
    int n_layer, d_model, vocab;
};

const std::vector<family_case>& families() {
    static std::vector<family_case> f;
    if (f.empty()) {
        tiny_spec g;
        g.n_layer = 3, g.n_head = 2, g.d_model = 16;
        const tiny_model tm = write_tiny_gpt2(test_temp_dir("graph-gpt2"), g);
        f.push_back({"gpt2", tm.dir, 3, 16, tm.config.vocab_size});
        // gemma2 and olmo2: post-norms on the sublayers' outputs (OLMo 2 without pre-norms); Gemma 2's attention
        // soft-capped (the patterns are frozen), its logits not (a logit node reads the logit before any cap)
        for (const char* fam : {"llama", "gpt_neox", "gemma2", "olmo2"}) {
            family_spec s;
            s.family = fam;
            s.n_layer = 3, s.d_model = 16, s.n_head = 4, s.n_kv_head = 2, s.d_ff = 24, s.vocab = 300;
            if (s.family == "gemma2") s.attn_softcap = 20;
            const tiny_family tf = write_tiny_family(test_temp_dir(std::string("graph-") + fam), s);
            f.push_back({fam, tf.hf_dir, 3, 16, 300});
        }
    }
    return f;
}

struct tc_case {
    std::string name;
    bool cross, skip;
    gb::sae_arch arch;
    bool gs2 = false; // written in Gemma Scope 2's layout, writing the MLP's output after its post-norm
};
const std::vector<tc_case> tc_cases = {
    {"plt-relu", false, false, gb::SAE_RELU},        {"plt-jumprelu", false, false, gb::SAE_JUMPRELU},
    {"plt-relu-skip", false, true, gb::SAE_RELU},    {"plt-jumprelu-skip", false, true, gb::SAE_JUMPRELU},
    {"plt-topk", false, false, gb::SAE_TOPK},        {"clt-relu", true, false, gb::SAE_RELU},
    {"clt-jumprelu-skip", true, true, gb::SAE_JUMPRELU},
    {"gs2-plt-affine", false, true, gb::SAE_JUMPRELU, true}, {"gs2-clt-affine", true, true, gb::SAE_JUMPRELU, true},
};

// A random set for fc written in circuit-tracer's layout and read back.
gb::transcoder_set written_set(const family_case& fc, const tc_case& tc, uint32_t seed) {
    tc_spec s;
    s.n_layer = fc.n_layer, s.d_model = fc.d_model, s.d_tc = 20;
    s.cross = tc.cross, s.skip = tc.skip, s.arch = tc.arch, s.seed = seed;
    const std::string dir = test_temp_dir("tc-" + fc.name + "-" + tc.name);
    if (!tc.gs2) {
        gb::write_transcoders(dir, random_transcoders(s));
        return gb::read_transcoders(dir);
    }
    gb::transcoder_set t = random_transcoders(s);
    t.output_normed = true;
    gb::write_gemma_scope_2(dir, t, "width_20_l0_small_affine");
    return gb::read_transcoders(tc.cross ? dir : dir + "/layer_1_width_20_l0_small_affine");
}

double max_diff(const std::vector<float>& got, const std::vector<double>& want, double* scale = nullptr) {
    double m = 0, s = 0;
    for (size_t i = 0; i < want.size(); i++) {
        m = std::max(m, std::fabs(got[i] - want[i]));
        s = std::max(s, std::fabs(want[i]));
    }
    if (scale) *scale = s;
    return m;
}

// b, read back from files, holds a's layers exactly (the checks of both layouts' round trips).
void expect_same_layers(const gb::transcoder_set& a, const gb::transcoder_set& b) {
    ASSERT_EQ(b.n_layer, a.n_layer);
    EXPECT_EQ(b.d_tc, a.d_tc);
    EXPECT_EQ(b.cross_layer, a.cross_layer);
    EXPECT_EQ(b.arch, a.arch);
    for (int l = 0; l < a.n_layer; l++) {
        EXPECT_EQ(a.layers[l].W_enc, b.layers[l].W_enc);
        EXPECT_EQ(a.layers[l].W_dec, b.layers[l].W_dec);
        EXPECT_EQ(a.layers[l].skip, b.layers[l].skip);
        EXPECT_EQ(a.layers[l].threshold, b.layers[l].threshold);
        EXPECT_EQ(a.layers[l].b_enc, b.layers[l].b_enc);
        EXPECT_EQ(a.layers[l].b_dec, b.layers[l].b_dec);
    }
}

} // namespace

TEST(AttributionGraph, TranscoderFilesRoundTrip) {
    for (bool cross : {false, true}) {
        tc_spec s;
        s.cross = cross, s.skip = true, s.arch = gb::SAE_JUMPRELU, s.n_layer = 3;
        const gb::transcoder_set a = random_transcoders(s);
        const std::string dir = test_temp_dir(cross ? "tc-rt-clt" : "tc-rt-plt");
        gb::write_transcoders(dir, a);
        const gb::transcoder_set b = gb::read_transcoders(dir);
        EXPECT_EQ(b.cross_layer, cross);
        EXPECT_EQ(b.arch, gb::SAE_JUMPRELU);
        EXPECT_EQ(b.n_layer, 3);
        expect_same_layers(a, b);
    }
    // per-layer files store W_skip as circuit-tracer multiplies by it, x W_skip^T: element [out][in]
    tc_spec s;
    s.skip = true, s.n_layer = 1;
    const gb::transcoder_set a = random_transcoders(s);
    const std::string dir = test_temp_dir("tc-rt-skip");
    gb::write_transcoders(dir, a);
    const gb::safetensors_file f = gb::open_safetensors(dir + "/layer_0.safetensors");
    const std::vector<float> w = gb::tensor_f32(f, f.tensors.at("W_skip"), {s.d_model, s.d_model});
    EXPECT_EQ(w[(size_t)2 * s.d_model + 5], a.layers[0].skip[(size_t)5 * s.d_model + 2]);
}

// Gemma Scope 2's files (the encoder transposed, the affine skip as x A, a cross-layer decoder over every layer)
// read back as the same set circuit-tracer's layout gives; opened from any layer's folder, its params file or the
// folder above; one-line errors for what is not such a set.
TEST(AttributionGraph, GemmaScope2Files) {
    for (bool cross : {false, true}) {
        SCOPED_TRACE(cross ? "clt" : "plt");
        tc_spec s;
        s.cross = cross, s.skip = true, s.arch = gb::SAE_JUMPRELU, s.n_layer = 3;
        gb::transcoder_set a = random_transcoders(s);
        a.output_normed = true;
        a.model_name = "google/gemma-3-270m";
        const std::string dir = test_temp_dir(cross ? "gs2-clt" : "gs2-plt");
        gb::write_gemma_scope_2(dir, a, "width_24_l0_small_affine");
        std::vector<std::string> opens = {dir};
        if (!cross)
            opens = {dir, dir + "/layer_0_width_24_l0_small_affine", dir + "/layer_2_width_24_l0_small_affine/",
                     dir + "/layer_1_width_24_l0_small_affine/params.safetensors"};
        for (const std::string& path : opens) {
            SCOPED_TRACE(path);
            if (!cross && path != dir) {
                EXPECT_EQ(gb::is_transcoder_folder(path), path.find(".safetensors") == std::string::npos);
            }
            const gb::transcoder_set b = gb::read_transcoders(path);
            EXPECT_EQ(b.layout, gb::TC_GEMMA_SCOPE_2);
            EXPECT_EQ(b.cross_layer, cross);
            EXPECT_EQ(b.arch, gb::SAE_JUMPRELU);
            EXPECT_TRUE(b.input_normed);
            EXPECT_TRUE(b.output_normed);
            EXPECT_EQ(b.model_name, "google/gemma-3-270m");
            EXPECT_EQ(b.n_layer, 3);
            EXPECT_EQ(b.d_model, s.d_model);
            expect_same_layers(a, b);
        }
        EXPECT_EQ(gb::is_transcoder_folder(dir), cross); // a per-layer set's parent is entered, not chosen
    }
    // the files as the release writes them: w_enc [d][d_tc] (element [i][f] is feature f's weight on input i), the
    // affine skip multiplied as x A (element [in][out])
    tc_spec s;
    s.skip = true, s.n_layer = 1, s.arch = gb::SAE_JUMPRELU;
    const gb::transcoder_set a = random_transcoders(s);
    const std::string one = test_temp_dir("gs2-one");
    gb::write_gemma_scope_2(one, a, "width_24_l0_big_affine");
    const gb::safetensors_file f = gb::open_safetensors(one + "/layer_0_width_24_l0_big_affine/params.safetensors");
    const std::vector<float> we = gb::tensor_f32(f, f.tensors.at("w_enc"), {s.d_model, s.d_tc});
    EXPECT_EQ(we[(size_t)5 * s.d_tc + 7], a.layers[0].W_enc[(size_t)7 * s.d_model + 5]);
    const std::vector<float> sk = gb::tensor_f32(f, f.tensors.at("affine_skip_connection"), {s.d_model, s.d_model});
    EXPECT_EQ(sk[(size_t)5 * s.d_model + 2], a.layers[0].skip[(size_t)5 * s.d_model + 2]);

    // two sets side by side: the folder above names them and asks for one
    gb::write_gemma_scope_2(one, a, "width_24_l0_small");
    expect_gb_error([&] { gb::read_transcoders(one); }, "2 Gemma Scope 2 sets are here (width_24_l0_big_affine, width_24_l0_small)");
    EXPECT_EQ(gb::read_transcoders(one + "/layer_0_width_24_l0_small").n_layer, 1);
    // config.json: an SAE, another hook, a skip it does not announce
    const std::string cfg = one + "/layer_0_width_24_l0_small/config.json";
    auto with_config = [&](const std::string& text) {
        std::ofstream(cfg) << text;
        return one + "/layer_0_width_24_l0_small";
    };
    expect_gb_error([&] { gb::read_transcoders(with_config(R"({"type": "sae"})")); }, "an SAE (type sae), not a transcoder");
    EXPECT_FALSE(gb::is_transcoder_folder(one + "/layer_0_width_24_l0_small"));
    expect_gb_error([&] { gb::read_transcoders(with_config(R"({"hf_hook_point_in": "model.layers.0.output"})")); },
                    "hf_hook_point_in model.layers.0.output");
    expect_gb_error([&] { gb::read_transcoders(with_config(R"({"hf_hook_point_out": "model.layers.0.output"})")); },
                    "hf_hook_point_out model.layers.0.output");
    expect_gb_error([&] { gb::read_transcoders(with_config(R"({"architecture": "topk"})")); }, "architecture topk");
    expect_gb_error([&] { gb::read_transcoders(with_config(R"({"width": 99})")); }, "config.json says width 99");
    expect_gb_error([&] { gb::read_transcoders(with_config(R"({"affine_connection": false})")); },
                    "config.json says affine_connection false");
    expect_gb_error([&] { gb::read_transcoders(with_config("{not json")); }, "config.json");
    // with no config.json: the release's defaults (JumpReLU, mlp_in -> the output after the post-norm)
    std::filesystem::remove(cfg);
    const gb::transcoder_set d = gb::read_transcoders(one + "/layer_0_width_24_l0_small");
    EXPECT_TRUE(d.output_normed);
    EXPECT_FALSE(d.layers[0].skip.empty());
    // a layer folder whose layer 0 is missing
    const std::string lone = test_temp_dir("gs2-lone") + "/layer_3_width_24_l0_small";
    std::filesystem::create_directories(lone);
    std::filesystem::copy_file(one + "/layer_0_width_24_l0_small/params.safetensors", lone + "/params.safetensors");
    expect_gb_error([&] { gb::read_transcoders(lone); }, "layer_0_width_24_l0_small is not beside it");
}

TEST(AttributionGraph, AdjacencyMatchesReference) {
    uint32_t seed = 10;
    for (const family_case& fc : families()) {
        const gb::model m = gb::load_model(fc.dir);
        for (const tc_case& tc : tc_cases)
            for (bool bos : {false, true}) {
                SCOPED_TRACE(fc.name + " " + tc.name + (bos ? " bos" : ""));
                const gb::transcoder_set t = written_set(fc, tc, seed++);
                const std::vector<int> tokens = random_tokens(6, fc.vocab, seed++);
                gb::graph_options opt;
                opt.bos = bos;
                opt.batch = 5; // several batches per layer
                const gb::attribution_graph g = gb::build_graph(m, t, tokens, opt);
                const ref_graph ref = reference_graph(m, t, tokens, bos, g);
                // the features: every active one, as the reference finds them
                ASSERT_EQ(g.n_active, (int)ref.active.size());
                ASSERT_EQ(g.n_features(), g.n_active);
                ASSERT_GT(g.n_features(), 10);
                for (int i = 0; i < g.n_features(); i++) {
                    EXPECT_EQ(g.features[i].layer, ref.active[i].layer);
                    EXPECT_EQ(g.features[i].pos, ref.active[i].pos);
                    EXPECT_EQ(g.features[i].index, ref.active[i].index);
                    EXPECT_NEAR(g.features[i].act, ref.active[i].act, 1e-5);
                    if (bos) {
                        EXPECT_GT(g.features[i].pos, 0);
                    }
                }
                EXPECT_EQ(g.n_errors(), fc.n_layer * (bos ? 5 : 6));
                EXPECT_GE(g.n_logits(), 1);
                // the frozen replacement model with every write reproduces the model's own reads
                double s = 0;
                for (int i = 0; i < g.n_nodes(); i++) {
                    EXPECT_NEAR(ref.reads_all[i], ref.true_reads[i], 1e-4 * (1 + std::fabs(ref.true_reads[i])));
                    s = std::max(s, std::fabs(ref.true_reads[i]));
                }
                // each column: what removing that source's write changes in every read
                double scale = 0;
                const double err = max_diff(g.adjacency, ref.A, &scale);
                EXPECT_LT(err, 2e-5 * std::max(1.0, scale)) << "scale " << scale;
                EXPECT_GT(scale, 1e-2);
                // no edge into an error or a token node
                for (int r = g.n_features(); r < g.logit_index(0); r++)
                    for (int c = 0; c < g.n_nodes(); c++) EXPECT_EQ(g.edge(r, c), 0.0f);
            }
    }
}

// Cancel is heard inside one batch of reads, at each layer the backward goes down through: with every feature's
// read in a single batch, a request cancelled after its first answer still stops (it used to finish the batch),
// and each layer of the batch asks.
TEST(AttributionGraph, CancelInsideOneBatch) {
    const family_case& fc = families()[1];
    const gb::model m = gb::load_model(fc.dir);
    const gb::transcoder_set t = written_set(fc, tc_cases[0], 21);
    const std::vector<int> tokens = random_tokens(6, fc.vocab, 22);
    gb::graph_options opt;
    opt.batch = 1 << 20;
    int asked = 0;
    opt.cancelled = [&] { return ++asked > 1; };
    EXPECT_THROW(gb::build_graph(m, t, tokens, opt), gb::cancelled);
    EXPECT_EQ(asked, 2);
    // never cancelled: asked before each batch and at every layer below each batch's reads
    asked = 0;
    opt.cancelled = [&] { return ++asked < 0; };
    const gb::attribution_graph g = gb::build_graph(m, t, tokens, opt);
    EXPECT_GT(g.n_features(), 0);
    EXPECT_GE(asked, 2 + fc.n_layer);
}

TEST(AttributionGraph, PruningMatchesReference) {
    auto check = [](const std::vector<float>& A, int nf, int ne, int nt, const std::vector<float>& probs, double nth,
                    double eth) {
        const int nl = (int)probs.size(), N = nf + ne + nt + nl;
        const gb::prune_result p = gb::prune_graph(A.data(), {nf, ne, nt, nl}, probs, nth, eth);
        const ref_prune r = reference_prune(A, nf, ne, nt, nl, probs, nth, eth);
        double top = 0;
        for (double v : r.influence) top = std::max(top, v);
        for (int i = 0; i < N; i++) EXPECT_NEAR(p.node_influence[i], r.influence[i], 1e-9 * top);
        EXPECT_NEAR(p.node_cutoff, r.node_cutoff, 1e-5 * top);
        EXPECT_NEAR(p.edge_cutoff, r.edge_cutoff, 1e-5 * std::max(r.edge_cutoff, 1e-12));
        EXPECT_EQ(p.node_mask, r.node_mask);
        EXPECT_EQ(p.edge_mask, r.edge_mask);
        for (int i = 0; i < N; i++) EXPECT_NEAR(p.cumulative_scores[i], r.cumulative[i], 1e-9);
        EXPECT_NEAR(p.replacement_score, r.replacement, 1e-9);
        EXPECT_NEAR(p.completeness_score, r.completeness, 1e-9);
        int kept = 0;
        for (uint8_t k : p.node_mask) kept += k;
        return kept;
    };
    // graphs of the tiny models
    const family_case& fc = families()[0];
    const gb::model m = gb::load_model(fc.dir);
    for (const tc_case& tc : {tc_cases[0], tc_cases[6]}) {
        SCOPED_TRACE(tc.name);
        const gb::transcoder_set t = written_set(fc, tc, 77);
        gb::graph_options opt;
        const gb::attribution_graph g = gb::build_graph(m, t, random_tokens(7, fc.vocab, 78), opt);
        for (auto th : {std::pair<double, double>{0.8, 0.98}, {0.5, 0.9}, {1.0, 1.0}}) {
            const int kept = check(g.adjacency, g.n_features(), g.n_errors(), g.n_tokens(), g.logit_probs, th.first, th.second);
            EXPECT_GE(kept, g.n_tokens() + g.n_logits());
        }
    }
    // random layered graphs: feature i reads from features before it, errors and tokens; logits from all
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    std::bernoulli_distribution keep(0.4);
    for (int trial = 0; trial < 4; trial++) {
        const int nf = 40, ne = 12, nt = 6, nl = 3, N = nf + ne + nt + nl;
        std::vector<float> A((size_t)N * N, 0.0f);
        for (int r = 0; r < N; r++) {
            if (r >= nf && r < N - nl) continue;
            const int last = r < nf ? r : N - nl;
            for (int c = 0; c < last; c++)
                if (c >= nf || keep(rng)) A[(size_t)r * N + c] = nd(rng);
        }
        check(A, nf, ne, nt, {0.5f, 0.3f, 0.1f}, 0.8, 0.98);
    }
    EXPECT_THROW(gb::prune_graph(std::vector<float>(16, 0.f).data(), {1, 1, 1, 1}, {1.0f}, 1.5, 0.9), gb::error);
}

TEST(AttributionGraph, FeaturesChosenByInfluence) {
    const family_case& fc = families()[1];
    const gb::model m = gb::load_model(fc.dir);
    const gb::transcoder_set t = written_set(fc, tc_cases[5], 91);
    const std::vector<int> tokens = random_tokens(8, fc.vocab, 92);
    gb::graph_options opt;
    const gb::attribution_graph full = gb::build_graph(m, t, tokens, opt);
    opt.max_feature_nodes = full.n_features() / 3;
    opt.batch = 4;
    const gb::attribution_graph part = gb::build_graph(m, t, tokens, opt);
    ASSERT_EQ(part.n_features(), opt.max_feature_nodes);
    EXPECT_EQ(part.n_active, full.n_active);
    // each chosen feature is an active one, in order, and its edges are the full graph's
    std::vector<int> at(part.n_features());
    int j = 0;
    for (int i = 0; i < part.n_features(); i++) {
        while (j < full.n_features() && (full.features[j].layer != part.features[i].layer ||
                                         full.features[j].pos != part.features[i].pos ||
                                         full.features[j].index != part.features[i].index))
            j++;
        ASSERT_LT(j, full.n_features());
        at[i] = j;
    }
    auto full_index = [&](int node) {
        if (node < part.n_features()) return at[node];
        return node - part.n_features() + full.n_features();
    };
    for (int r = 0; r < part.n_nodes(); r++)
        for (int c = 0; c < part.n_nodes(); c++)
            ASSERT_NEAR(part.edge(r, c), full.edge(full_index(r), full_index(c)), 1e-5 * (1 + std::fabs(full.edge(full_index(r), full_index(c)))));
    // the first ones chosen are the logits' strongest direct sources among the features
    int best = -1;
    float best_w = 0;
    for (int c = 0; c < full.n_features(); c++) {
        float w = 0;
        for (int k = 0; k < full.n_logits(); k++) w += full.logit_probs[k] * std::fabs(full.edge(full.logit_index(k), c));
        if (w > best_w) best_w = w, best = c;
    }
    ASSERT_GE(best, 0);
    bool chosen = false;
    for (int i = 0; i < part.n_features(); i++) chosen |= at[i] == best;
    EXPECT_TRUE(chosen);
}

TEST(AttributionGraph, NeuronpediaJsonRoundTrip) {
    const family_case& fc = families()[0];
    const gb::model m = gb::load_model(fc.dir);
    const gb::transcoder_set t = written_set(fc, tc_cases[2], 33);
    const std::vector<int> tokens = random_tokens(6, fc.vocab, 34);
    gb::graph_options opt;
    opt.bos = true;
    const gb::attribution_graph g = gb::build_graph(m, t, tokens, opt);
    const gb::prune_result p = gb::prune_graph(g.adjacency.data(), {g.n_features(), g.n_errors(), g.n_tokens(), g.n_logits()},
                                               g.logit_probs, 0.8, 0.98);
    const nlohmann::json j = gb::neuronpedia_json(g, p, m.tok, "a prompt", "slug-1", "scan-1", 0.8);
    const std::string path = test_temp_dir("np-json") + "/g.json";
    std::ofstream(path) << j.dump(2);
    const gb::np_graph r = gb::read_neuronpedia(path);
    EXPECT_EQ(r.slug, "slug-1");
    EXPECT_EQ(r.scan, "scan-1");
    EXPECT_EQ(r.prompt, "a prompt");
    ASSERT_EQ((int)r.prompt_tokens.size(), g.n_tokens());
    EXPECT_EQ(r.prompt_tokens[1], gb::token_text(m.tok, tokens[1]));
    // every link is a kept edge with its weight, and every kept edge is a link
    std::map<std::string, int> index;
    const int N = g.n_nodes();
    for (int i = 0; i < N; i++) {
        std::string id;
        if (i < g.n_features())
            id = std::to_string(g.features[i].layer) + "_" + std::to_string(g.features[i].index) + "_" + std::to_string(g.features[i].pos);
        else if (i < g.token_index(0)) {
            const int per = g.n_tokens() - 1;
            id = std::to_string((i - g.n_features()) / per) + "_-1_" + std::to_string((i - g.n_features()) % per + 1);
        } else if (i < g.logit_index(0))
            id = "E_" + std::to_string(tokens[i - g.token_index(0)]) + "_" + std::to_string(i - g.token_index(0));
        else
            id = std::to_string(g.n_layer + 1) + "_" + std::to_string(g.logit_tokens[i - g.logit_index(0)]) + "_" +
                 std::to_string(g.n_tokens() - 1);
        index[id] = i;
    }
    long kept_edges = 0;
    for (uint8_t e : p.edge_mask) kept_edges += e;
    EXPECT_EQ((long)r.links.size(), kept_edges);
    ASSERT_GT(r.links.size(), 0u);
    for (const gb::np_link& l : r.links) {
        ASSERT_TRUE(index.count(l.source) && index.count(l.target)) << l.source << " -> " << l.target;
        const int s = index[l.source], tg = index[l.target];
        EXPECT_TRUE(p.edge_mask[(size_t)tg * N + s]);
        EXPECT_NEAR(l.weight, g.edge(tg, s), 1e-6 * (1 + std::fabs(g.edge(tg, s))));
    }
    int tokens_seen = 0, logits_seen = 0;
    for (const gb::np_node& n : r.nodes) {
        ASSERT_TRUE(index.count(n.node_id)) << n.node_id;
        const int i = index[n.node_id];
        EXPECT_TRUE(p.node_mask[i]);
        if (n.feature_type == "embedding") tokens_seen++;
        if (n.feature_type == "logit") {
            logits_seen++;
            EXPECT_NEAR(n.token_prob, g.logit_probs[i - g.logit_index(0)], 1e-6);
            EXPECT_EQ(n.is_target_logit, i == g.logit_index(0));
        } else {
            ASSERT_TRUE(n.has_influence);
            EXPECT_NEAR(n.influence, p.cumulative_scores[i], 1e-9);
        }
        if (i < g.n_features()) {
            EXPECT_NEAR(n.activation, g.features[i].act, 1e-6);
        }
    }
    EXPECT_EQ(tokens_seen, g.n_tokens());
    EXPECT_EQ(logits_seen, g.n_logits());
    // a link to nowhere and a missing key are refused with the file named
    nlohmann::json bad = j;
    bad["links"].push_back({{"source", "nope"}, {"target", "nope"}, {"weight", 1.0}});
    expect_gb_error([&] { gb::parse_neuronpedia(bad, "bad.json"); }, "bad.json");
    nlohmann::json bad2 = j;
    bad2.erase("nodes");
    expect_gb_error([&] { gb::parse_neuronpedia(bad2, "bad2.json"); }, "\"nodes\"");
}

TEST(AttributionGraph, Refusals) {
    const family_case& fc = families()[0];
    const gb::model m = gb::load_model(fc.dir);
    tc_spec s;
    s.n_layer = fc.n_layer + 1, s.d_model = fc.d_model;
    expect_gb_error([&] { gb::build_graph(m, random_transcoders(s), std::vector<int>{1, 2, 3}, gb::graph_options{}); }, "layers");
    s.n_layer = fc.n_layer, s.d_model = fc.d_model + 2;
    expect_gb_error([&] { gb::build_graph(m, random_transcoders(s), std::vector<int>{1, 2, 3}, gb::graph_options{}); }, "d_model");
    const std::string empty = test_temp_dir("tc-empty");
    expect_gb_error([&] { gb::read_transcoders(empty); }, "layer_0.safetensors");
    const std::string dir = test_temp_dir("tc-badcfg");
    s.d_model = fc.d_model;
    gb::write_transcoders(dir, random_transcoders(s));
    std::ofstream(dir + "/config.yaml") << "model_kind: something_else\n";
    expect_gb_error([&] { gb::read_transcoders(dir); }, "model_kind something_else");
    std::ofstream(dir + "/config.yaml") << "feature_input_hook: hook_attn_out\n";
    expect_gb_error([&] { gb::read_transcoders(dir); }, "feature_input_hook");
}

TEST(AttributionGraph, CliGraphAndOpen) {
    const family_case& fc = families()[0];
    const gb::transcoder_set t = written_set(fc, tc_cases[1], 55);
    const std::string tdir = test_temp_dir("tc-cli-" + fc.name);
    gb::write_transcoders(tdir, t);
    const std::string out = test_temp_dir("graph-cli");
    const command_result r = run_cli("graph --model " + fc.dir + " --transcoders " + tdir +
                                     " --prompt 'hello world again' --head-loadings 0,1 --npy-dir " + out + "/npy --json " + out +
                                     "/g.json --neuronpedia " + out + "/np.json --max-logits 4");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("replacement score"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(out + "/g.json"));
    for (const char* k : {"replacement_score", "completeness_score", "n_nodes", "n_features", "n_errors", "n_logits", "seconds"})
        EXPECT_TRUE(j.contains(k)) << k;
    const int N = j["n_nodes"];
    ASSERT_TRUE(j["head_loadings"].is_object()) << j.dump();
    EXPECT_EQ(j["head_loadings"]["target"], 0);
    EXPECT_EQ(j["head_loadings"]["source"], 1);
    EXPECT_LE(j["n_logits"].get<int>(), 4);
    const std::string adj = read_file(out + "/npy/adjacency.npy");
    const gb::npy_array a = gb::parse_npy(reinterpret_cast<const uint8_t*>(adj.data()), adj.size(), "adjacency.npy");
    ASSERT_EQ(a.shape.size(), 2u);
    EXPECT_EQ(a.shape[0], N);
    EXPECT_EQ(a.shape[1], N);
    for (const char* f : {"tokens", "active_features", "activation_values", "logit_tokens", "logit_probabilities",
                          "node_influence", "node_mask", "edge_mask"})
        EXPECT_FALSE(read_file(out + "/npy/" + f + ".npy").empty()) << f;
    const command_result o = run_cli("graph --open " + out + "/np.json --json " + out + "/open.json");
    ASSERT_EQ(o.code, 0) << o.err;
    const nlohmann::json oj = nlohmann::json::parse(read_file(out + "/open.json"));
    const nlohmann::json np = nlohmann::json::parse(read_file(out + "/np.json"));
    EXPECT_EQ(oj["n_nodes"], np["nodes"].size());
    EXPECT_EQ(oj["n_links"], np["links"].size());
    EXPECT_EQ(oj["prompt_tokens"], np["metadata"]["prompt_tokens"]);
    const command_result bad = run_cli("graph --model " + fc.dir + " --transcoders " + out + " --prompt hi");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("transcoders"), std::string::npos) << bad.err;
    // the same set in Gemma Scope 2's layout, opened from one layer's folder: the same graph
    const std::string gs = test_temp_dir("tc-cli-gs2");
    gb::write_gemma_scope_2(gs, t, "width_20_l0_small");
    const command_result g2 = run_cli("graph --model " + fc.dir + " --transcoders " + gs + "/layer_2_width_20_l0_small" +
                                      " --prompt 'hello world again' --max-logits 4 --json " + out + "/g2.json");
    ASSERT_EQ(g2.code, 0) << g2.err << g2.out;
    EXPECT_NE(g2.out.find("Gemma Scope 2, per-layer, jumprelu"), std::string::npos) << g2.out;
    const nlohmann::json j2 = nlohmann::json::parse(read_file(out + "/g2.json"));
    EXPECT_EQ(j2["format"], "gemma-scope-2");
    for (const char* k : {"n_nodes", "n_features", "replacement_score", "completeness_score"}) EXPECT_EQ(j2[k], j[k]) << k;
    // several sets in the folder above: one line naming them
    gb::write_gemma_scope_2(gs, t, "width_20_l0_big");
    const command_result two = run_cli("graph --model " + fc.dir + " --transcoders " + gs + " --prompt hi");
    EXPECT_EQ(two.code, 2);
    EXPECT_NE(two.err.find("2 Gemma Scope 2 sets are here"), std::string::npos) << two.err;
}

// The command reads only the features that fire on the prompt (read_active_transcoders): its graph is the whole
// set's, feature for feature and bit for bit.
TEST(AttributionGraph, ActiveFeaturesAloneGiveTheSameGraph) {
    uint32_t seed = 90;
    for (const family_case& fc : families()) {
        const gb::model m = gb::load_model(fc.dir);
        for (const tc_case& tc : {tc_cases[0], tc_cases[3], tc_cases[4], tc_cases[6]}) {
            SCOPED_TRACE(fc.name + " " + tc.name);
            // wider and sparser than written_set's, so that some features fire nowhere in the prompt
            tc_spec ts;
            ts.n_layer = fc.n_layer, ts.d_model = fc.d_model, ts.d_tc = 48, ts.bias = -1.0f;
            ts.cross = tc.cross, ts.skip = tc.skip, ts.arch = tc.arch, ts.seed = seed++;
            const std::string dir = test_temp_dir("tc-active-" + fc.name + "-" + tc.name);
            gb::write_transcoders(dir, random_transcoders(ts));
            const gb::transcoder_set full = gb::read_transcoders(dir);
            const std::vector<int> tokens = random_tokens(7, fc.vocab, seed++);
            const int L = fc.n_layer, T = (int)tokens.size(), d = fc.d_model;
            gb::record rec;
            gb::forward_options fo;
            fo.keep.resid_stream = true;
            fo.keep.points = gb::hook_bit(gb::HOOK_MLP_IN);
            gb::run_forward(rec, m, tokens, {}, fo);
            std::vector<float> in, mid;
            for (int l = 0; l < L; l++) {
                in.insert(in.end(), rec.get(gb::HOOK_MLP_IN, l), rec.get(gb::HOOK_MLP_IN, l) + (size_t)T * d);
                mid.insert(mid.end(), rec.resid(2 * l + 1), rec.resid(2 * l + 1) + (size_t)T * d);
            }
            std::vector<std::vector<int>> kept;
            int full_d_tc = 0;
            const gb::transcoder_set t = gb::read_active_transcoders(full.path, in, mid, T, L, d, kept, full_d_tc);
            EXPECT_EQ(full_d_tc, full.d_tc);
            EXPECT_LT(t.d_tc, full.d_tc);
            for (bool bos : {false, true}) {
                gb::graph_options opt;
                opt.bos = bos;
                opt.max_feature_nodes = bos ? 10 : 8192; // the choice by influence too
                const gb::attribution_graph a = gb::build_graph(m, full, tokens, opt);
                const gb::attribution_graph b = gb::build_graph(m, t, tokens, opt);
                EXPECT_EQ(a.n_active, b.n_active);
                ASSERT_EQ(a.n_features(), b.n_features());
                for (int i = 0; i < a.n_features(); i++) {
                    const gb::active_feature &x = a.features[i], &y = b.features[i];
                    EXPECT_EQ(x.layer, y.layer);
                    EXPECT_EQ(x.pos, y.pos);
                    EXPECT_EQ(x.index, kept[y.layer][y.index]);
                    EXPECT_EQ(x.act, y.act);
                }
                EXPECT_EQ(a.logit_tokens, b.logit_tokens);
                EXPECT_EQ(a.adjacency, b.adjacency);
            }
        }
    }
    // a set of another shape is refused as read_transcoders' graphs refuse it
    const family_case& fc = families()[0];
    std::vector<std::vector<int>> kept;
    int w = 0;
    const gb::transcoder_set t = written_set(fc, tc_cases[0], 3);
    const std::vector<float> x((size_t)(fc.n_layer + 1) * 2 * fc.d_model, 0.5f);
    expect_gb_error([&] { gb::read_active_transcoders(t.path, x, x, 2, fc.n_layer + 1, fc.d_model, kept, w); }, "layers");
    expect_gb_error([&] { gb::read_active_transcoders(t.path, x, x, 2, fc.n_layer, fc.d_model - 1, kept, w); }, "d_model");
}

// Not asserted: the time of a graph on the default model at 16 tokens with a random transcoder set.
TEST(AttributionGraph, DefaultModelTime) {
    const std::string path = std::string(GLASSBOX_SOURCE_DIR) + "/assets/models/glassbox-tiny-en";
    const gb::model m = gb::load_model(path);
    tc_spec s;
    s.n_layer = m.config.n_layer, s.d_model = m.config.d_model, s.d_tc = 2048, s.bias = -2.0f;
    const gb::transcoder_set t = random_transcoders(s);
    const std::vector<int> tokens = random_tokens(16, m.config.vocab_size, 3);
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    const gb::attribution_graph g = gb::build_graph(m, t, tokens, {});
    const auto t1 = std::chrono::steady_clock::now();
    const std::clock_t c1 = std::clock();
    const gb::prune_result p = gb::prune_graph(g.adjacency.data(), {g.n_features(), g.n_errors(), g.n_tokens(), g.n_logits()},
                                               g.logit_probs);
    const auto t2 = std::chrono::steady_clock::now();
    const std::clock_t c2 = std::clock();
    std::printf("default model, 16 tokens, %d x %d random features: %d active, %d nodes; graph %.3f s (cpu %.3f s), "
                "pruning %.3f s (cpu %.3f s), rows %.0f MB, replacement %.3f\n", s.n_layer, s.d_tc, g.n_active,
                g.n_nodes(), std::chrono::duration<double>(t1 - t0).count(), (double)(c1 - c0) / CLOCKS_PER_SEC,
                std::chrono::duration<double>(t2 - t1).count(), (double)(c2 - c1) / CLOCKS_PER_SEC, g.bytes_rows / 1e6,
                p.replacement_score);
    EXPECT_EQ(g.n_features(), g.n_active);
    // the same through the command (whose OpenMP threads wait as the programs' do), on a prompt of 16 tokens
    const std::string dir = test_temp_dir("tc-default-model");
    gb::write_transcoders(dir, t);
    const std::string prompt = "When Mary and John went to the store, John gave a drink to";
    const command_result c = run_cli("graph --transcoders " + dir + " --prompt '" + prompt + "' --json " + dir + "/g.json");
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/g.json"));
    std::printf("glassbox-cli graph, default model, %zu tokens: %d active features, %s s\n", j["tokens"].size(),
                j["n_active_features"].get<int>(), j["seconds"].dump().c_str());
}

TEST(AttributionGraph, Interventions) {
    for (const family_case& fc : families()) {
        const gb::model m = gb::load_model(fc.dir);
        for (const tc_case& tc : {tc_cases[3], tc_cases[6], tc_cases[8]}) {
            SCOPED_TRACE(fc.name + " " + tc.name);
            const gb::transcoder_set t = written_set(fc, tc, 61);
            const std::vector<int> tokens = random_tokens(6, fc.vocab, 62);
            const gb::replacement r = gb::build_replacement(m, t, tokens, true);
            // without edits the replacement model is the model
            for (bool frozen : {false, true}) {
                const std::vector<float> same = gb::intervene_logits(m, t, r, {}, frozen);
                std::vector<double> want(r.logits.begin(), r.logits.end());
                EXPECT_LT(max_scaled_error(same, want), 1e-4);
            }
            // ablating a last-layer feature at the last position: only the final norm lies after it
            const int L = fc.n_layer, T = (int)tokens.size(), d = fc.d_model;
            const gb::active_feature* f = nullptr;
            for (const gb::active_feature& a : r.active)
                if (a.layer == L - 1 && a.pos == T - 1) f = &a;
            ASSERT_NE(f, nullptr);
            gb::record rec;
            gb::forward_options opt;
            opt.keep.resid_stream = true;
            opt.keep.points = gb::hook_bit(gb::HOOK_MLP_POST);
            gb::run_forward(rec, m, tokens, {}, opt);
            std::vector<double> x(d);
            const float* dec = t.dec(f->layer, f->index, L - 1);
            const bool ln = gb::arch_table(m.config.arch).norm == gb::NORM_LAYERNORM;
            // x [d] -> its norm's (x - mean) s, the scale recomputed
            auto normed = [&](std::vector<double>& v) {
                double mu = 0, var = 0;
                if (ln) {
                    for (double e : v) mu += e;
                    mu /= d;
                }
                for (double e : v) var += (e - mu) * (e - mu);
                const double sc = 1 / std::sqrt(var / d + m.config.norm_eps);
                for (double& e : v) e = (e - mu) * sc;
            };
            if (gb::arch_table(m.config.arch).post_norm && !t.output_normed) {
                // Gemma 2, OLMo 2: the write leaves the MLP's output before its post-norm, recomputed after
                const gb::layer_weights& lw = m.weights.layers[L - 1];
                const std::vector<float> wd = gb::unpack_matrix(lw.w_down);
                const float* h = rec.get(gb::HOOK_MLP_POST, L - 1) + (size_t)(T - 1) * m.config.d_ff;
                std::vector<double> y(d);
                for (int j = 0; j < d; j++) {
                    double v = lw.b_down.empty() ? 0.0 : lw.b_down[j];
                    for (int k = 0; k < m.config.d_ff; k++) v += (double)h[k] * wd[(size_t)k * d + j];
                    y[j] = v - (double)f->act * dec[j];
                }
                normed(y);
                for (int i = 0; i < d; i++) x[i] = rec.resid(2 * L - 1)[(size_t)(T - 1) * d + i] + lw.post_mlp_norm[i] * y[i];
            } else {
                for (int i = 0; i < d; i++) x[i] = rec.resid(2 * L)[(size_t)(T - 1) * d + i] - (double)f->act * dec[i];
            }
            double mu = 0, var = 0;
            if (ln) {
                for (double v : x) mu += v;
                mu /= d;
            }
            for (double v : x) var += (v - mu) * (v - mu);
            const double s = 1 / std::sqrt(var / d + m.config.norm_eps);
            std::vector<double> y(d), want(fc.vocab);
            for (int i = 0; i < d; i++)
                y[i] = m.weights.normf_g[i] * (x[i] - mu) * s + (m.weights.normf_b.empty() ? 0.0 : m.weights.normf_b[i]);
            std::vector<float> row(d);
            for (int v = 0; v < fc.vocab; v++) {
                gb::table_row(row.data(), m.weights.unembedding(), v);
                double z = 0;
                for (int i = 0; i < d; i++) z += row[i] * y[i];
                want[v] = z;
            }
            for (bool frozen : {false, true}) {
                const std::vector<float> got = gb::intervene_logits(m, t, r, {{L - 1, T - 1, f->index, 0.0f}}, frozen);
                EXPECT_LT(max_scaled_error(got, want), 1e-4);
            }
            // an early edit moves the last position through attention: frozen and recomputed patterns differ
            const gb::active_feature& e = r.active.front();
            const std::vector<float> a1 = gb::intervene_logits(m, t, r, {{e.layer, e.pos, e.index, 5.0f}}, false);
            const std::vector<float> a2 = gb::intervene_logits(m, t, r, {{e.layer, e.pos, e.index, 5.0f}}, true);
            double moved = 0, differ = 0;
            for (int v = 0; v < fc.vocab; v++)
                moved = std::max(moved, (double)std::fabs(a1[v] - r.logits[v])), differ = std::max(differ, (double)std::fabs(a1[v] - a2[v]));
            EXPECT_GT(moved, 1e-3);
            EXPECT_GT(differ, 1e-6);
            expect_gb_error([&] { gb::intervene_logits(m, t, r, {{0, 0, 1, 1.0f}}, false); }, "BOS");
        }
    }
    const gb::transcoder_set t = random_transcoders({});
    std::vector<gb::graph_edit> edits;
    gb::parse_graph_edits(edits, "1:*:3=2.5,0:2:7=-1", true, "--set", t, 5);
    ASSERT_EQ(edits.size(), 2u);
    EXPECT_EQ(edits[0].pos, -1);
    EXPECT_EQ(edits[1].value, -1.0f);
    expect_gb_error([&] { gb::parse_graph_edits(edits, "5:0:1=1", true, "--set", t, 5); }, "--set 5:0:1=1: layer 5");
    expect_gb_error([&] { gb::parse_graph_edits(edits, "0:0:1=x", true, "--set", t, 5); }, "value x");
    expect_gb_error([&] { gb::parse_graph_edits(edits, "0:9:1", false, "--ablate", t, 5); }, "position 9");

    const family_case& fc = families()[0];
    const std::string tdir = test_temp_dir("tc-cli-intervene");
    gb::write_transcoders(tdir, written_set(fc, tc_cases[0], 63));
    const std::string out = test_temp_dir("intervene-cli");
    const command_result c = run_cli("intervene --model " + fc.dir + " --transcoders " + tdir +
                                     " --prompt 'hello world' --ablate 0:1:3 --set 1:*:2=3 --freeze-attention --json " +
                                     out + "/i.json");
    ASSERT_EQ(c.code, 0) << c.err << c.out;
    const nlohmann::json j = nlohmann::json::parse(read_file(out + "/i.json"));
    EXPECT_EQ(j["edits"].size(), 2u);
    EXPECT_TRUE(j["freeze_attention"].get<bool>());
    EXPECT_EQ(run_cli("intervene --model " + fc.dir + " --transcoders " + tdir + " --prompt hi").code, 2);
}

TEST(AttributionGraph, HeadLoadingsSumToTheEdge) {
    for (const family_case& fc : families()) {
        const gb::model m = gb::load_model(fc.dir);
        for (const tc_case& tc : {tc_cases[2], tc_cases[6]}) {
            SCOPED_TRACE(fc.name + " " + tc.name);
            const gb::transcoder_set t = written_set(fc, tc, 71);
            const std::vector<int> tokens = random_tokens(6, fc.vocab, 72);
            const gb::replacement r = gb::build_replacement(m, t, tokens, false);
            gb::graph_options opt;
            opt.max_feature_nodes = 40;
            const gb::attribution_graph g = gb::build_graph(m, t, r, opt);
            const int N = g.n_nodes(), H = m.config.n_head, L = fc.n_layer;
            // edges into the top logit and into a late feature, from features, errors and tokens
            std::vector<std::pair<int, int>> edges;
            const int last_feature = g.n_features() - 1;
            for (int target : {g.logit_index(0), last_feature})
                for (int source : {0, g.n_features() / 2, g.error_index(0, 2), g.token_index(1), g.token_index(0)})
                    if (source < N && g.edge(target, source) != 0) edges.push_back({target, source});
            ASSERT_GE(edges.size(), 4u);
            for (auto [target, source] : edges) {
                const std::vector<double> hl = gb::edge_head_loadings(m, t, r, g, target, source);
                ASSERT_EQ(hl.size(), (size_t)L * (H + 1));
                const double e = g.edge(target, source);
                int crossed = 0;
                for (int l = 0; l < L; l++) {
                    double sum = 0, mag = 0;
                    for (int h = 0; h <= H; h++) sum += hl[(size_t)l * (H + 1) + h], mag += std::fabs(hl[(size_t)l * (H + 1) + h]);
                    if (mag == 0) continue;
                    crossed++;
                    EXPECT_NEAR(sum, e, 1e-4 * (1 + std::fabs(e))) << "layer " << l << " edge " << target << " <- " << source;
                }
                // every attention layer below the read has a row: all of them below a logit, those up to its own
                // layer below a feature (a parallel block's feature reads before its layer's attention)
                const int lt = target >= g.logit_index(0) ? L : g.features[target].layer + (m.config.parallel ? 0 : 1);
                EXPECT_EQ(crossed, lt);
            }
            expect_gb_error([&] { gb::edge_head_loadings(m, t, r, g, g.token_index(0), 0); }, "reads nothing");
        }
    }
}
