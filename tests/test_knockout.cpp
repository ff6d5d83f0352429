// Attention knockout (run/ablation.h's knockout, the KNOCKOUT intervention): on the tiny GPT-2 and the GQA Llama,
// the forward against a naive double reference whose softmax masks the knocked keys with -inf; every key but one
// gives one-hot attention and the value row; a knockout of masked keys changes nothing; a query left no key is an
// error; the gradient through a knockout against finite differences of that reference; and the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/patching.h"
#include "run/ablation.h"
#include "run/backward.h"
#include "run/forward.h"
#include "ref_models.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_model.h"

namespace {

// The reference's edit that knocks out ko (the -inf scores of a masked softmax): it keeps each layer's q and k as
// they pass, and at the pattern recomputes the knocked rows from them in double, from scratch.
struct masked_softmax {
    const gb::model_config& c;
    std::vector<gb::knockout> ko;
    std::map<int, std::vector<double>> q, k; // per layer: [T][H*dh], [T][KV*dh]

    bool knocked(int l, int h, int i, int j) const {
        for (const gb::knockout& o : ko)
            if (o.layer == l && (o.head < 0 || o.head == h) && (o.query < 0 || o.query == i) && (o.key < 0 || o.key == j))
                return true;
        return false;
    }
    void operator()(gb::hook_point p, int l, std::vector<double>& x) {
        if (p == gb::HOOK_Q) q[l] = x;
        if (p == gb::HOOK_K) k[l] = x;
        if (p != gb::HOOK_PATTERN) return;
        const int H = c.n_head, KV = c.n_kv_head, dh = c.d_head, T = (int)(q[l].size() / ((size_t)H * dh));
        const double scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt((double)dh);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                bool any = false;
                for (int j = 0; j <= i; j++) any |= knocked(l, h, i, j);
                if (!any) continue;
                std::vector<double> s(i + 1, -std::numeric_limits<double>::infinity());
                double mx = -std::numeric_limits<double>::infinity(), sum = 0;
                const int g = h / (H / KV);
                for (int j = 0; j <= i; j++) {
                    if (knocked(l, h, i, j)) continue;
                    double dot = 0;
                    for (int e = 0; e < dh; e++) dot += q[l][(size_t)i * H * dh + h * dh + e] * k[l][(size_t)j * KV * dh + g * dh + e];
                    s[j] = scale * dot;
                    mx = std::max(mx, s[j]);
                }
                for (int j = 0; j <= i; j++) sum += std::exp(s[j] - mx); // exp(-inf) = 0
                for (int j = 0; j < T; j++)
                    x[((size_t)h * T + i) * T + j] = j <= i ? std::exp(s[j] - mx) / sum : 0.0;
            }
    }
};

ref_trace reference(const ref_model& rm, const std::vector<int>& tokens, const std::vector<gb::knockout>& ko,
                    const ref_edit& also = nullptr) {
    masked_softmax ms{rm.m.config, ko, {}, {}};
    ref_options o;
    o.edit = [&](gb::hook_point p, int l, std::vector<double>& x) {
        if (also) also(p, l, x);
        ms(p, l, x);
    };
    return rm.reference(tokens, {}, o);
}

gb::record forward(const gb::model& m, const std::vector<int>& tokens, const std::vector<gb::knockout>& ko) {
    gb::ablation ab;
    ab.knockouts = ko;
    gb::forward_options o;
    o.all_logits = true;
    o.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_V);
    gb::record r;
    gb::run_forward(r, m, tokens, ab, o);
    return r;
}

std::vector<float> copy_of(const gb::record& r, gb::hook_point p, int l) {
    const float* x = r.get(p, l);
    return std::vector<float>(x, x + r.layer_floats(p));
}

gb::knockout ko(int layer, int head, int query, int key) { return {layer, head, query, key}; }

// Knockouts of every kind: one head and pair, every head and query of one key, and one query's several keys.
std::vector<gb::knockout> mixed() { return {ko(0, 1, 3, 0), ko(1, -1, -1, 2), ko(2, 0, 5, 1), ko(2, 0, 5, 4)}; }

} // namespace

TEST(Knockout, ForwardMatchesMaskedSoftmaxReference) {
    for (const ref_model* rm : ref_models()) {
        const std::vector<int> tokens = rm->tokens(7, 3);
        const gb::record r = forward(rm->m, tokens, mixed());
        const ref_trace want = reference(*rm, tokens, mixed());
        const ref_trace plain = rm->reference(tokens, {}, {});
        const int L = rm->m.config.n_layer, T = (int)tokens.size();
        for (int l = 0; l < L; l++) {
            const std::vector<double> wp(want.attention.begin() + (size_t)l * rm->m.config.n_head * T * T,
                                         want.attention.begin() + (size_t)(l + 1) * rm->m.config.n_head * T * T);
            EXPECT_LE(max_scaled_error(copy_of(r, gb::HOOK_PATTERN, l), wp), 1e-5) << rm->name << " L" << l << " pattern";
            EXPECT_LE(max_scaled_error(copy_of(r, gb::HOOK_Z, l), want.at(gb::HOOK_Z, l)), 1e-4) << rm->name << " L" << l << " z";
        }
        EXPECT_LE(max_scaled_error(r.logits, want.logits), 1e-4) << rm->name << " logits";
        // and the knockouts matter: the reference without them is elsewhere
        EXPECT_GT(max_scaled_error(r.logits, plain.logits), 1e-3) << rm->name;
        // knocked keys read 0 (layer 1: key 2 for every head and query past it)
        const float* p1 = r.get(gb::HOOK_PATTERN, 1);
        for (int h = 0; h < rm->m.config.n_head; h++)
            for (int i = 2; i < T; i++) EXPECT_EQ(p1[((size_t)h * T + i) * T + 2], 0.0f) << rm->name;
    }
}

TEST(Knockout, EveryKeyButOneIsOneHot) {
    for (const ref_model* rm : ref_models()) {
        const gb::model_config& c = rm->m.config;
        const std::vector<int> tokens = rm->tokens(6, 9);
        const int T = 6, q = 5, keep = 2, h = 1, l = 0, dh = c.d_head, KV = c.n_kv_head;
        std::vector<gb::knockout> all_but;
        for (int j = 0; j <= q; j++)
            if (j != keep) all_but.push_back(ko(l, h, q, j));
        const gb::record r = forward(rm->m, tokens, all_but);
        const float* p = r.get(gb::HOOK_PATTERN, l) + ((size_t)h * T + q) * T;
        for (int j = 0; j < T; j++) EXPECT_EQ(p[j], j == keep ? 1.0f : 0.0f) << rm->name << " key " << j;
        // the head's output is the value row of that key (its key/value head under GQA)
        const int g = h / (c.n_head / KV);
        const float* z = r.get(gb::HOOK_Z, l) + (size_t)q * c.n_head * dh + h * dh;
        const float* v = r.get(gb::HOOK_V, l) + (size_t)keep * KV * dh + g * dh;
        for (int e = 0; e < dh; e++) EXPECT_NEAR(z[e], v[e], 1e-6) << rm->name << " dim " << e;
    }
}

TEST(Knockout, MaskedKeysChangeNothing) {
    const ref_model& rm = tiny_gpt2_ref();
    const std::vector<int> tokens = rm.tokens(6, 4);
    gb::ablation ab;
    ab.knockouts = {ko(0, -1, 2, 5), ko(1, 1, 0, 3)}; // keys after their query: already masked
    const std::vector<std::string> notes = gb::check_knockouts(ab, rm.m.config, 6);
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_NE(notes[0].find("0:2-5 changes nothing"), std::string::npos) << notes[0];
    const gb::record with = forward(rm.m, tokens, ab.knockouts), without = forward(rm.m, tokens, {});
    EXPECT_EQ(with.logits, without.logits);
    for (int l = 0; l < rm.m.config.n_layer; l++)
        EXPECT_EQ(copy_of(with, gb::HOOK_PATTERN, l), copy_of(without, gb::HOOK_PATTERN, l)) << "L" << l;
    // one that reaches a key is no note
    ab.knockouts = {ko(0, -1, 2, 1)};
    EXPECT_TRUE(gb::check_knockouts(ab, rm.m.config, 6).empty());
}

TEST(Knockout, QueryLeftNoKeyIsAnError) {
    const ref_model& rm = tiny_llama_ref();
    gb::ablation ab;
    ab.knockouts = {ko(1, 2, 1, 0), ko(1, 2, 1, 1)};
    expect_gb_error([&] { gb::check_knockouts(ab, rm.m.config, 4); }, "knockouts 1.2:1-0,1.2:1-1 leave query 1 of head 1.2 no key");
    ab.knockouts = {ko(0, -1, -1, 0)};
    expect_gb_error([&] { gb::check_knockouts(ab, rm.m.config, 4); }, "position 0 reads only itself");
    ab.knockouts = {ko(0, -1, 6, 0)};
    expect_gb_error([&] { gb::check_knockouts(ab, rm.m.config, 4); }, "outside the prompt's 4 tokens");
    ab.knockouts = {ko(3, 0, 1, 0)};
    expect_gb_error([&] { gb::check_ablation(ab, rm.m.config); }, "knockout 3.0:1-0 is outside the model");
    // the forward itself refuses it too (a caller that did not check)
    ab.knockouts = {ko(1, 2, 1, 0), ko(1, 2, 1, 1)};
    expect_gb_error([&] { forward(rm.m, rm.tokens(4, 1), ab.knockouts); }, "query 1 of head 1.2 has no key left");
}

TEST(Knockout, ParsesAndDescribes) {
    const std::vector<gb::knockout> k = gb::parse_knockouts("0.1:3-2,2:*-0,1.0:4-*");
    ASSERT_EQ(k.size(), 3u);
    EXPECT_EQ(k[0], ko(0, 1, 3, 2));
    EXPECT_EQ(k[1], ko(2, -1, -1, 0));
    EXPECT_EQ(k[2], ko(1, 0, 4, -1));
    gb::ablation ab;
    ab.knockouts = k;
    EXPECT_EQ(ab.describe(), "knockout 0.1:3-2,2:*-0,1.0:4-*");
    for (const char* bad : {"0.1:3", "0.1-3-2", "x:1-0", "0:1-y", "0.-1:1-0"})
        expect_gb_error([&] { gb::parse_knockouts(bad); }, "--knockout");
    gb::toggle_knockout(ab, ko(2, -1, -1, 0));
    EXPECT_FALSE(gb::knocked_out(ab, ko(2, -1, -1, 0)));
    EXPECT_EQ(ab.knockouts.size(), 2u);
}

// d metric / d (residual points, z) with knockouts in force, against central differences of the masked reference
TEST(Knockout, GradientMatchesFiniteDifferences) {
    for (const ref_model* rm : ref_models()) {
        const gb::model_config& c = rm->m.config;
        const std::vector<int> tokens = rm->tokens(6, 5);
        const int T = 6, d = c.d_model, V = c.vocab_size, L = c.n_layer;
        const std::vector<gb::knockout> k = {ko(0, 1, 5, 4), ko(1, -1, 5, 0), ko(1, -1, 5, 5), ko(2, 0, -1, 1)};
        gb::ablation ab;
        ab.knockouts = k;
        gb::metric_spec ms;
        ms.kind = gb::metric_spec::LOGIT;
        ms.target = 7;
        gb::gradients g;
        gb::run_gradients(g, rm->m, tokens, ms, ab);
        const ref_trace base = reference(*rm, tokens, k);
        EXPECT_NEAR(g.metric_value, base.logits[(size_t)(T - 1) * V + 7], 1e-3) << rm->name;
        const double h = 1e-4;
        for (int pt : {0, 2, 2 * L - 1}) {
            gb::hook_point p;
            int l;
            gb::resid_point_hook(pt, p, l);
            double scale = 0, worst = 0;
            for (size_t i = 0; i < (size_t)T * d; i += 5) {
                double f[2];
                for (int s = 0; s < 2; s++) {
                    const ref_edit nudge = [&](gb::hook_point q, int layer, std::vector<double>& x) {
                        if (q == p && layer == l) x[i] += s ? -h : h;
                    };
                    f[s] = reference(*rm, tokens, k, nudge).logits[(size_t)(T - 1) * V + 7];
                }
                const double want = (f[0] - f[1]) / (2 * h);
                scale = std::max(scale, std::abs(want));
                worst = std::max(worst, std::abs(g.resid_at(pt)[i] - want));
            }
            EXPECT_GT(scale, 1e-4) << rm->name << " point " << pt;
            EXPECT_LE(worst, 2e-3 * std::max(scale, 1e-2)) << rm->name << " point " << pt;
        }
    }
}

// Activation patching keeps the knockouts in every run, the resumed ones too (they start at the patched position,
// so a knockout's rows are positions from there): patching the embeddings where the prompts differ brings the
// clean run back exactly.
TEST(Knockout, PatchingKeepsThemInResumedRuns) {
    for (const ref_model* rm : ref_models()) {
        const std::vector<int> clean = rm->tokens(7, 6);
        std::vector<int> corrupt = clean;
        corrupt[1] = clean[1] == 5 ? 6 : 5;
        gb::patch_options po;
        po.ab.knockouts = mixed();
        const int target = 7, V = rm->m.config.vocab_size;
        const gb::patch_result p = gb::activation_patching(rm->m, clean, corrupt, target, -1, po);
        const gb::record kc = forward(rm->m, clean, mixed()), plain = forward(rm->m, clean, {});
        EXPECT_NEAR(p.clean, kc.logits[(size_t)6 * V + target], 1e-4) << rm->name;
        EXPECT_GT(std::abs(p.clean - plain.logits[(size_t)6 * V + target]), 1e-4) << rm->name << ": the knockouts matter";
        EXPECT_NEAR(p.resid[1], p.clean, 1e-4) << rm->name << ": embeddings patched at position 1";
    }
}

// run, grad, patch and atp take --knockout and echo it; a query left no key and a bad item are one-line errors
TEST(Knockout, CliRunsAndEchoes) {
    const std::string dir = test_temp_dir("knockout_cli");
    tiny_spec s;
    s.n_layer = 2;
    s.n_head = 3;
    s.d_model = 24;
    s.n_ctx = 40;
    const tiny_model tm = write_tiny_gpt2(dir + "/model", s);
    const std::string M = "--model '" + tm.dir + "' --prompt 'the cat sat on'";
    command_result r = run_cli("run " + M + " --knockout '0.1:3-0,1:*-1,0:2-6' --json '" + dir + "/run.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("ablation: knockout 0.1:3-0,1:*-1,0:2-6"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("note: knockout 0:2-6 changes nothing"), std::string::npos) << r.err;
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/run.json"));
    ASSERT_EQ(j["knockouts"].size(), 3u);
    EXPECT_EQ(j["knockouts"][0], nlohmann::json({{"layer", 0}, {"head", 1}, {"query", 3}, {"key", 0}, {"text", "0.1:3-0"}}));
    EXPECT_TRUE(j["knockouts"][1]["head"].is_null());
    EXPECT_TRUE(j["knockouts"][1]["query"].is_null());
    ASSERT_EQ(j["knockout_notes"].size(), 1u);
    r = run_cli("run " + M + " --knockout '0:1-0,0:1-1'");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("leave query 1 of head 0.0 no key to read"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    r = run_cli("run " + M + " --knockout '0.1:3'");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("expected LAYER.HEAD:QUERY-KEY"), std::string::npos) << r.err;
    // grad, atp and patch take it and echo it
    r = run_cli("grad " + M + " --target-id 5 --metric logit --steps 0 --knockout 0.1:3-0 --json '" + dir + "/grad.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/grad.json"))["knockouts"][0]["text"], "0.1:3-0");
    r = run_cli("patch --model '" + tm.dir + "' --prompt 'the hat sat' --corrupt 'the mat sat' --target-id 5 "
            "--knockout 1:3-2 --json '" + dir + "/patch.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/patch.json"))["knockouts"][0]["text"], "1:3-2");
    r = run_cli("atp --model '" + tm.dir + "' --prompt 'the hat sat' --corrupt 'the mat sat' --target-id 5 "
            "--knockout 1:3-2 --json '" + dir + "/atp.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/atp.json"))["knockouts"][0]["text"], "1:3-2");
}

TEST(Knockout, OtherKindsAreRefused) {
    const tiny_encoder enc = write_tiny_encoder(test_temp_dir("knockout_encoder"), encoder_spec{});
    const command_result r = run_cli("run --model '" + enc.dir + "' --prompt 'a b [MASK]' --knockout 0:2-1");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("attention knockout is built for decoder-only models"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}
