// Causal tracing (analysis/trace.h) on the tiny GPT-2 and the GQA Llama: restoring what the noise changed gives the
// clean probability back (and noise 0 changes nothing); restored cells against a plain double-precision reference
// run with the same noise; the seed makes it deterministic; the subject's span and the refusals; the CLI end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/trace.h"
#include "io/loader.h"
#include "model/kind.h"
#include "ref_models.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_model.h"
#include "tiny_vision.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<double> softmax_d(const std::vector<double>& x) {
    const double mx = *std::max_element(x.begin(), x.end());
    std::vector<double> p(x.size());
    double sum = 0;
    for (size_t i = 0; i < x.size(); i++) sum += p[i] = std::exp(x[i] - mx);
    for (double& v : p) v /= sum;
    return p;
}

// p(target) at the last position of a reference run
double ref_prob(const ref_trace& r, int V, int target) {
    const int T = r.n_tokens;
    return softmax_d(std::vector<double>(r.logits.begin() + (size_t)(T - 1) * V, r.logits.end()))[target];
}

gb::trace_options options(double noise, int samples, uint64_t seed) {
    gb::trace_options o;
    o.noise = noise;
    o.samples = samples;
    o.seed = seed;
    return o;
}

} // namespace

// Restoring the only noised row, or the last position's stream after the last layer, is the clean run again;
// positions before the subject see no noise; with noise 0 every cell is the clean probability.
TEST(Trace, RestoringWhatTheNoiseChangedGivesTheCleanProbability) {
    for (const ref_model* rm : ref_models()) {
        const int T = 6, L = rm->m.config.n_layer, P = 2 * L + 1;
        const std::vector<int> tokens = rm->tokens(T, 31);
        const gb::trace_result r = gb::causal_trace(rm->m, tokens, 2, 3, options(3, 3, 5));
        EXPECT_GT(std::fabs(r.clean_prob - r.corrupt_prob), 1e-4) << rm->name << ": the noise moves the answer";
        EXPECT_NEAR(r.resid[(size_t)(P - 1) * T + T - 1], r.clean_prob, 1e-6) << rm->name << ": the last point";
        EXPECT_NEAR(r.resid[2], r.clean_prob, 1e-5) << rm->name << ": the subject's embedding restored";
        for (int p = 0; p < P; p++)
            for (int t = 0; t < 2; t++)
                EXPECT_NEAR(r.resid[(size_t)p * T + t], r.corrupt_prob, 1e-7) << rm->name << " before the subject " << p << "," << t;
        EXPECT_NEAR(r.mlp[(size_t)(L - 1) * T + 1], r.corrupt_prob, 1e-7) << rm->name << ": an MLP before the subject";
        const gb::trace_result z = gb::causal_trace(rm->m, tokens, 1, 4, options(0, 2, 5));
        EXPECT_NEAR(z.corrupt_prob, z.clean_prob, 1e-6) << rm->name;
        for (const std::vector<float>* v : {&z.resid, &z.attn, &z.mlp})
            for (float x : *v) EXPECT_NEAR(x, z.clean_prob, 1e-6) << rm->name << ": noise 0";
        EXPECT_EQ(z.runs, 0) << rm->name << ": with nothing noised nothing is rerun";
    }
}

// Cells against the reference: the same noise (trace_noise) added to the reference's embeddings of the subject, and
// the restored row (the stream at a point, or a sublayer's output) set to the clean reference run's, in double.
TEST(Trace, RestoredCellsMatchTheDoubleReference) {
    for (const ref_model* rm : ref_models()) {
        const gb::model_config& c = rm->m.config;
        const int T = 5, L = c.n_layer, d = c.d_model, V = c.vocab_size, first = 1, end = 3, S = 2;
        const std::vector<int> tokens = rm->tokens(T, 41);
        const gb::trace_result r = gb::causal_trace(rm->m, tokens, first, end, options(2, S, 9));
        const ref_trace clean = rm->reference(tokens, {}, {});
        EXPECT_NEAR(ref_prob(clean, V, r.target), r.clean_prob, 1e-5) << rm->name;
        // cells: resid at point 3 (after layer 1's attention) and 2L-1 (after the last attention) at the subject's
        // last token and the last position; layer 1's MLP and layer 0's attention at the subject's last token
        struct cell {
            const char* what;
            int point, layer, t;
            float got;
        };
        const cell cells[] = {{"resid", 3, -1, end - 1, r.resid[(size_t)3 * T + end - 1]},
                              {"resid", 2 * L - 1, -1, T - 1, r.resid[(size_t)(2 * L - 1) * T + T - 1]},
                              {"mlp", -1, 1, end - 1, r.mlp[(size_t)1 * T + end - 1]},
                              {"attn", -1, 0, end - 1, r.attn[(size_t)0 * T + end - 1]}};
        double corrupt = 0, want[4] = {0, 0, 0, 0};
        for (int s = 0; s < S; s++) {
            const std::vector<float> noise = gb::trace_noise(end - first, d, r.sigma, 9, s);
            ref_options noised;
            for (int t = first; t < end; t++) {
                ref_resid_patch pt{0, t, std::vector<double>(clean.resid_at(0, t), clean.resid_at(0, t) + d)};
                for (int i = 0; i < d; i++) pt.values[i] += noise[(size_t)(t - first) * d + i];
                noised.resid_patches.push_back(pt);
            }
            corrupt += ref_prob(rm->reference(tokens, {}, noised), V, r.target) / S;
            for (int k = 0; k < 4; k++) {
                ref_options o = noised;
                const cell& x = cells[k];
                if (x.point >= 0) {
                    o.resid_patches.push_back({x.point, x.t, std::vector<double>(clean.resid_at(x.point, x.t), clean.resid_at(x.point, x.t) + d)});
                } else {
                    const gb::hook_point hp = x.what[0] == 'm' ? gb::HOOK_MLP_OUT : gb::HOOK_ATTN_OUT;
                    const std::vector<double>& row = clean.at(hp, x.layer);
                    o.edit = [&, hp](gb::hook_point p, int l, std::vector<double>& v) {
                        if (p == hp && l == x.layer) std::copy_n(&row[(size_t)x.t * d], d, &v[(size_t)x.t * d]);
                    };
                }
                want[k] += ref_prob(rm->reference(tokens, {}, o), V, r.target) / S;
            }
        }
        EXPECT_NEAR(r.corrupt_prob, corrupt, 2e-5) << rm->name;
        for (int k = 0; k < 4; k++)
            EXPECT_NEAR(cells[k].got, want[k], 2e-5) << rm->name << " " << cells[k].what << " point " << cells[k].point
                                                     << " layer " << cells[k].layer << " position " << cells[k].t;
        EXPECT_GT(std::fabs(want[0] - corrupt), 1e-4) << rm->name << ": a cell that restores something";
    }
}

TEST(Trace, TheSeedMakesItDeterministic) {
    const ref_model& rm = tiny_llama_ref();
    const std::vector<int> tokens = rm.tokens(5, 3);
    const gb::trace_result a = gb::causal_trace(rm.m, tokens, 1, 2, options(3, 2, 11));
    const gb::trace_result b = gb::causal_trace(rm.m, tokens, 1, 2, options(3, 2, 11));
    const gb::trace_result other = gb::causal_trace(rm.m, tokens, 1, 2, options(3, 2, 12));
    EXPECT_EQ(a.resid, b.resid);
    EXPECT_EQ(a.mlp, b.mlp);
    EXPECT_EQ(a.attn, b.attn);
    EXPECT_EQ(a.corrupt_prob, b.corrupt_prob);
    EXPECT_NE(a.corrupt_prob, other.corrupt_prob) << "another seed, other noise";
    EXPECT_EQ(gb::trace_noise(3, 4, 1.0, 11, 0), gb::trace_noise(3, 4, 1.0, 11, 0));
    EXPECT_NE(gb::trace_noise(3, 4, 1.0, 11, 0), gb::trace_noise(3, 4, 1.0, 11, 1)) << "each sample its own draw";
    // the draws are normal: mean about 0 and standard deviation about sigma
    const std::vector<float> n = gb::trace_noise(100, 100, 2.0, 1, 0);
    double sum = 0, sq = 0;
    for (float x : n) sum += x, sq += (double)x * x;
    EXPECT_NEAR(sum / n.size(), 0.0, 0.05);
    EXPECT_NEAR(std::sqrt(sq / n.size()), 2.0, 0.05);
}

// The subject's span from its text, and the one-line refusals: a subject not in the prompt, a span outside it, bad
// options, and the kinds the kind table refuses.
TEST(Trace, SubjectSpanAndRefusals) {
    const std::string dir = test_temp_dir("trace_refusals");
    tiny_spec s;
    s.n_layer = 2;
    const tiny_model tm = write_tiny_gpt2(dir + "/gpt2", s);
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> tokens = gb::encode_prompt(m.tok, "the cat sat on the mat", false);
    const int T = (int)tokens.size();
    auto bytes = [&](int a, int b) {
        std::string out;
        for (int t = a; t < b; t++) out += gb::token_bytes(m.tok, tokens[t]);
        return out;
    };
    for (const std::string subject : {"cat sat", "at on", "the", "mat"}) { // the smallest span of tokens holding it
        int first = -1, end = -1;
        gb::subject_span(first, end, m.tok, tokens, subject);
        ASSERT_TRUE(first >= 0 && first < end && end <= T) << subject;
        EXPECT_NE(bytes(first, end).find(subject), std::string::npos) << subject;
        EXPECT_EQ(bytes(first + 1, end).find(subject), std::string::npos) << subject;
        EXPECT_EQ(bytes(first, end - 1).find(subject), std::string::npos) << subject;
        if (subject == "the") { EXPECT_EQ(first, 0) << "its first occurrence"; }
        if (subject == "mat") { EXPECT_EQ(end, T); }
    }
    int first = -1, end = -1;
    expect_gb_error([&] { gb::subject_span(first, end, m.tok, tokens, "dog"); }, "the subject \"dog\" is not in the prompt");
    expect_gb_error([&] { gb::subject_span(first, end, m.tok, tokens, ""); }, "the subject is empty");
    expect_gb_error([&] { gb::causal_trace(m, tokens, 4, T + 3, {}); }, "are not inside the prompt's " + std::to_string(T));
    expect_gb_error([&] { gb::causal_trace(m, tokens, 1, 2, options(3, 0, 0)); }, "--samples must be at least 1");
    expect_gb_error([&] { gb::causal_trace(m, tokens, 1, 2, options(-1, 1, 0)); }, "--noise must be 0 or more");
    const tiny_encoder te = write_tiny_encoder(dir + "/bert", encoder_spec{});
    const gb::model bert = gb::load_model(te.dir);
    expect_gb_error([&] { gb::causal_trace(bert, {5, 6, 7}, 1, 2, {}); }, "is a masked-language-model encoder");
    const tiny_vision tv = write_tiny_vision(dir + "/vit", vision_spec{});
    const gb::model vit = gb::load_model(tv.dir);
    expect_gb_error([&] { gb::causal_trace(vit, {0, 1, 2}, 1, 2, {}); }, "an image has no subject to find");
    EXPECT_TRUE(gb::offers(m.config, gb::FEATURE_TRACE));
    EXPECT_FALSE(gb::offers(bert.config, gb::FEATURE_TRACE));
}

// The CLI: its JSON has the keys and shapes the issue names and equals the core's trace of the same tokens; the npy
// files; the errors in one line.
TEST(Trace, CliEndToEnd) {
    const std::string dir = test_temp_dir("trace_cli");
    tiny_spec s;
    s.n_layer = 2;
    s.n_head = 2;
    s.d_model = 16;
    const tiny_model tm = write_tiny_gpt2(dir + "/model", s);
    const std::string M = "--model '" + tm.dir + "' --prompt 'the cat sat on the mat'";
    std::filesystem::create_directories(dir + "/npy");
    command_result r = run_cli("trace " + M + " --subject cat --samples 3 --seed 4 --noise 2 --json '" + dir +
                           "/t.json' --npy-dir '" + dir + "/npy'");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/t.json"));
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> tokens = gb::encode_prompt(m.tok, "the cat sat on the mat", false);
    const int T = (int)tokens.size(), L = 2;
    int first = -1, end = -1;
    gb::subject_span(first, end, m.tok, tokens, "cat");
    EXPECT_NE(r.out.find("subject: tokens " + std::to_string(first) + ".." + std::to_string(end - 1)), std::string::npos) << r.out;
    const gb::trace_result want = gb::causal_trace(m, tokens, first, end, options(2, 3, 4));
    EXPECT_DOUBLE_EQ(j["clean_prob"].get<double>(), want.clean_prob);
    EXPECT_DOUBLE_EQ(j["corrupt_prob"].get<double>(), want.corrupt_prob);
    EXPECT_EQ(j["target"]["id"], want.target);
    EXPECT_EQ(j["subject"]["first"], first);
    EXPECT_EQ(j["subject"]["end"], end);
    EXPECT_EQ(j["samples"], 3);
    EXPECT_EQ(j["seed"], 4);
    ASSERT_EQ((int)j["resid"].size(), 2 * L + 1);
    ASSERT_EQ((int)j["mlp"].size(), L);
    ASSERT_EQ((int)j["attn"].size(), L);
    for (int p = 0; p < 2 * L + 1; p++) {
        ASSERT_EQ((int)j["resid"][p].size(), T);
        for (int t = 0; t < T; t++) EXPECT_FLOAT_EQ(j["resid"][p][t].get<float>(), want.resid[(size_t)p * T + t]);
    }
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            EXPECT_FLOAT_EQ(j["mlp"][l][t].get<float>(), want.mlp[(size_t)l * T + t]);
            EXPECT_FLOAT_EQ(j["attn"][l][t].get<float>(), want.attn[(size_t)l * T + t]);
        }
    // the .npy's payload (after its header) is resid [P][T] as float32
    const std::string npy = read_file(dir + "/npy/trace_resid.npy");
    const size_t bytes = want.resid.size() * sizeof(float);
    ASSERT_GT(npy.size(), bytes);
    std::vector<float> resid(want.resid.size());
    std::memcpy(resid.data(), npy.data() + npy.size() - bytes, bytes);
    EXPECT_EQ(resid, want.resid);
    EXPECT_FALSE(read_file(dir + "/npy/trace_mlp.npy").empty());
    EXPECT_FALSE(read_file(dir + "/npy/trace_attn.npy").empty());
    r = run_cli("trace " + M + " --subject dog");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("the subject \"dog\" is not in the prompt"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    const tiny_encoder te = write_tiny_encoder(dir + "/bert", encoder_spec{});
    r = run_cli("trace --model '" + te.dir + "' --prompt 'the cat' --subject cat");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("causal tracing follows a decoder's next-token answer"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}
