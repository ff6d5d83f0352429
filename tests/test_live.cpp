// Live recompute (core/run/live.h): every incremental result equals a full run of the same request (attention,
// every kept point, residual norms, logits, the logit lens) within 1e-5, on a tiny GPT-2 and a tiny
// grouped-query Llama; and each change recomputes only what it reaches (the report says what).
//
// Sections: helpers | typing and editing | interventions | cancellation | memory budget | generation
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "analysis/head_scores.h"
#include "analysis/lens.h"
#include "ref_models.h"
#include "tiny_llama.h"
#include "run/ablation.h"
#include "run/live.h"
#include "test_util.h"
#include "util/error.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------
// What the app keeps: patterns, z, MLP outputs and the whole residual stream.
gb::record_request app_keep() {
    gb::record_request k;
    k.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    k.resid_stream = true;
    return k;
}

gb::record full_run(const gb::model& m, const std::vector<int>& tokens, const std::vector<gb::intervention>& iv,
                    const gb::record_request& keep) {
    gb::forward_options o;
    o.keep = keep;
    o.interventions = iv;
    gb::record r;
    gb::run_forward(r, m, tokens, {}, o);
    return r;
}

// max |a - b| / max(1, max |b|): absolute for ordinary activations, relative to the tensor's scale where
// ablations blow values up (as test_util's max_scaled_error); infinite where only one side is finite.
double diff(const float* a, const float* b, size_t n) {
    double w = 0, scale = 1;
    for (size_t i = 0; i < n; i++) {
        if (std::isfinite(a[i]) != std::isfinite(b[i])) return INFINITY;
        if (!std::isfinite(a[i])) continue;
        w = std::max(w, std::abs((double)a[i] - b[i]));
        scale = std::max(scale, std::abs((double)b[i]));
    }
    return w / scale;
}

// Every kept tensor, norm and logit of got vs want (a full run of the same request), and the lens on both.
void expect_same(const gb::record& got, const gb::record& want, const gb::model& m, const std::string& what) {
    ASSERT_EQ(got.n_tokens, want.n_tokens) << what;
    ASSERT_EQ(got.tokens, want.tokens) << what;
    for (int p = 0; p < gb::HOOK_COUNT; p++)
        for (int l = 0; l < (int)want.slot[p].size(); l++) {
            const gb::hook_point hp = (gb::hook_point)p;
            ASSERT_EQ(got.has(hp, l), want.has(hp, l)) << what << ": " << gb::hook_label(hp, l);
            if (!want.has(hp, l)) continue;
            ASSERT_EQ(got.tensor_floats(hp, l), want.tensor_floats(hp, l)) << what << ": " << gb::hook_label(hp, l);
            EXPECT_LT(diff(got.get(hp, l), want.get(hp, l), want.tensor_floats(hp, l)), 1e-5)
                << what << ": " << gb::hook_label(hp, l);
        }
    ASSERT_EQ(got.resid_norm.size(), want.resid_norm.size()) << what;
    EXPECT_LT(diff(got.resid_norm.data(), want.resid_norm.data(), want.resid_norm.size()), 1e-5) << what << ": norms";
    ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
    EXPECT_LT(diff(got.logits.data(), want.logits.data(), want.logits.size()), 1e-5) << what << ": logits";
    if (got.resid(0) && got.resid(2 * got.n_layer)) {
        gb::lens_result lg = gb::logit_lens(got, m, {}, 3), lw = gb::logit_lens(want, m, {}, 3);
        EXPECT_EQ(lg.top_ids, lw.top_ids) << what << ": lens";
        EXPECT_LT(diff(lg.target_prob.data(), lw.target_prob.data(), lw.target_prob.size()), 1e-5) << what << ": lens";
    }
}

struct live_fixture {
    const ref_model& rm;
    gb::live_state st;
    gb::live_result out;
    gb::record_request keep = app_keep();
    gb::attention_fn attention;
    explicit live_fixture(const ref_model& r) : rm(r) {}

    // Runs tokens with iv live, checks both records against full runs, returns the report.
    gb::live_report run(const std::vector<int>& tokens, const std::vector<gb::intervention>& iv = {},
                        const std::string& what = "") {
        gb::live_request rq;
        rq.tokens = tokens;
        rq.interventions = iv;
        rq.keep = keep;
        rq.attention = attention;
        gb::live_run(out, st, rm.m, rq);
        const std::string label = rm.name + ", " + what + " [" + out.report.what + "]";
        expect_same(*out.run, full_run(rm.m, tokens, iv, keep), rm.m, label);
        expect_same(*out.base, full_run(rm.m, tokens, {}, keep), rm.m, label + " baseline");
        return out.report;
    }
};

std::vector<gb::intervention> ablate(const gb::model& m, const gb::ablation& ab) {
    return gb::ablation_interventions(ab, m.config);
}

gb::ablation heads(std::vector<std::pair<int, int>> h) {
    gb::ablation ab;
    for (auto [l, hd] : h) ab.heads.push_back({l, hd});
    return ab;
}

// ---------------------------------------------------------------------------------------------
// Typing and editing
// ---------------------------------------------------------------------------------------------
TEST(Live, TypingAtTheEndComputesOneToken) {
    for (const ref_model* rm : ref_models()) {
        live_fixture f{*rm};
        std::vector<int> all = rm->tokens(24, 5);
        std::vector<int> t(all.begin(), all.begin() + 12);
        gb::live_report r = f.run(t, {}, "first");
        EXPECT_FALSE(r.reused);
        for (int n = 13; n <= 24; n++) {
            t.push_back(all[n - 1]);
            r = f.run(t, {}, "typed to " + std::to_string(n));
            EXPECT_TRUE(r.reused);
            EXPECT_EQ(r.from_token, n - 1) << "only the new token";
        }
        // the same request again: nothing to compute, the same record
        auto before = f.out.run;
        r = f.run(t, {}, "again");
        EXPECT_EQ(r.what, "nothing changed");
        EXPECT_EQ(f.out.run, before);
    }
}

TEST(Live, EditsRecomputeFromTheFirstChangedToken) {
    for (const ref_model* rm : ref_models()) {
        live_fixture f{*rm};
        std::vector<int> t = rm->tokens(30, 7);
        f.run(t, {}, "prompt");
        t[15] = (t[15] + 1) % (rm->m.config.vocab_size - 4) + 3;
        EXPECT_EQ(f.run(t, {}, "edit at 15").from_token, 15);
        t.resize(22); // deleted the end: only the new last position's logits are missing
        EXPECT_EQ(f.run(t, {}, "deleted to 22").from_token, 21);
        t.insert(t.begin() + 4, t[9]); // inserted: everything after shifts
        EXPECT_EQ(f.run(t, {}, "inserted at 4").from_token, 4);
        t[0] = t[1];
        gb::live_report r = f.run(t, {}, "first token changed");
        EXPECT_FALSE(r.reused);
        EXPECT_EQ(r.from_token, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Interventions: recompute from the first affected layer; the baseline is never re-run
// ---------------------------------------------------------------------------------------------
TEST(Live, AblationChangesRecomputeFromTheirFirstLayer) {
    for (const ref_model* rm : ref_models()) {
        const gb::model& m = rm->m;
        const int L = m.config.n_layer;
        live_fixture f{*rm};
        std::vector<int> t = rm->tokens(20, 9);
        f.run(t, {}, "clean");
        auto base = f.out.base;

        gb::live_report r = f.run(t, ablate(m, heads({{L - 1, 1}})), "head on the last layer");
        EXPECT_EQ(r.from_point, 2 * (L - 1));
        EXPECT_FALSE(r.baseline_run);
        EXPECT_EQ(f.out.base, base) << "the baseline is the kept one";

        r = f.run(t, ablate(m, heads({{L - 1, 2}})), "another head on the last layer");
        EXPECT_EQ(r.from_point, 2 * (L - 1));
        EXPECT_FALSE(r.baseline_run);

        r = f.run(t, ablate(m, heads({{L - 1, 2}, {1, 0}})), "and a head on layer 1");
        EXPECT_EQ(r.from_point, 2);

        gb::ablation nores;
        nores.no_residual.on = true;
        nores.no_residual.layers = {1};
        r = f.run(t, ablate(m, nores), "no residual on layer 1");
        EXPECT_LE(r.from_point, 2);

        gb::intervention fin{gb::INTERVENE_IDENTITY_NORM, gb::HOOK_FINAL_NORM};
        r = f.run(t, {fin}, "no final norm");
        EXPECT_TRUE(r.reused);
        EXPECT_FALSE(r.baseline_run);

        // every ablation case, in turn, each from the previous one's kept run
        gb::ablation every;
        every.no_layernorm.on = every.no_attention.on = true;
        every.no_attention.layers = {0};
        r = f.run(t, ablate(m, every), "no layernorm, no attention on 0");
        EXPECT_FALSE(r.baseline_run);
        r = f.run(t, {}, "back to clean");
        EXPECT_EQ(r.what, "nothing changed");
        EXPECT_EQ(f.out.run, base);

        // tokens and interventions changing together: correct, from a full run
        t.push_back(t[3]);
        r = f.run(t, ablate(m, heads({{0, 0}})), "typed while ablating");
        // and typing while an ablation stays: both runs take the token alone
        t.push_back(t[4]);
        r = f.run(t, ablate(m, heads({{0, 0}})), "typed, same ablation");
        EXPECT_EQ(r.from_token, (int)t.size() - 1);
        EXPECT_TRUE(r.baseline_run);
    }
}

TEST(Live, PatchValuesAreComparedByContent) {
    for (const ref_model* rm : ref_models()) {
        const gb::model& m = rm->m;
        live_fixture f{*rm};
        std::vector<int> t = rm->tokens(16, 11);
        f.run(t, {}, "clean");
        std::vector<float> row(m.config.d_model, 0.5f);
        gb::intervention set{gb::INTERVENE_SET, gb::HOOK_RESID_POST, 1, -1, 6, row.data()};
        gb::live_report r = f.run(t, {set}, "patched resid_post 1 at 6");
        EXPECT_EQ(r.from_point, 3);
        row[0] = -2.0f; // same pointer, new values: must be seen as a change
        r = f.run(t, {set}, "new values");
        EXPECT_EQ(r.from_point, 3);
        std::vector<float> copy = row; // other pointer, same values: no change
        set.values = copy.data();
        EXPECT_EQ(f.run(t, {set}, "same values elsewhere").what, "nothing changed");
    }
}

// A patch at every position holds [T][d] values: after more tokens the kept run's values are the shorter ones, and
// only they may be read (the soak's ASan run caught a read past them when a prompt grew under a patch).
TEST(Live, PatchesOfEveryPositionAreComparedAtTheirOwnLength) {
    for (const ref_model* rm : ref_models()) {
        const gb::model& m = rm->m;
        const int d = m.config.d_model;
        live_fixture f{*rm};
        const std::vector<int> t = rm->tokens(12, 5);
        const std::vector<int> shorter(t.begin(), t.begin() + 7);
        std::vector<float> few((size_t)7 * d, 0.25f), more((size_t)12 * d, 0.25f);
        gb::intervention set{gb::INTERVENE_SET, gb::HOOK_RESID_POST, 1, -1, -1, few.data()};
        f.run(shorter, {set}, "every position patched, 7 tokens");
        set.values = more.data(); // the same patch over more tokens: values of the new length
        const gb::live_report r = f.run(t, {set}, "every position patched, 12 tokens");
        EXPECT_NE(r.what, "nothing changed");
        set.values = few.data(); // and back (the kept run's values are now the longer ones)
        f.run(shorter, {set}, "every position patched, 7 tokens again");
    }
}

// ---------------------------------------------------------------------------------------------
// Cancellation: a stopped run leaves the kept runs consistent; the next result is exact
// ---------------------------------------------------------------------------------------------
TEST(Live, CancelledRunsLeaveNothingHalfDone) {
    for (const ref_model* rm : ref_models()) {
        const gb::model& m = rm->m;
        const int L = m.config.n_layer;
        for (int stop_after = 0; stop_after < L; stop_after++) {
            live_fixture f{*rm};
            std::vector<int> t = rm->tokens(20, 13);
            f.run(t, {}, "clean");
            auto shown = f.out.run;
            auto cancel_after = [&](int layers) {
                auto n = std::make_shared<int>(0);
                return [n, layers] { return (*n)++ >= layers; };
            };
            auto try_run = [&](const std::vector<int>& tok, const std::vector<gb::intervention>& iv) {
                gb::live_request rq;
                rq.tokens = tok;
                rq.interventions = iv;
                rq.keep = f.keep;
                rq.cancelled = cancel_after(stop_after);
                gb::live_result out;
                try { // a run with fewer layers to go than stop_after finishes
                    gb::live_run(out, f.st, m, rq);
                } catch (const gb::cancelled&) {
                    EXPECT_FALSE(out.run) << "a stopped run hands out nothing";
                }
            };
            // an edit stopped: the next edit (elsewhere) is still exact
            std::vector<int> t2 = t;
            t2[10] = t[11];
            try_run(t2, {});
            EXPECT_EQ(f.out.run, shown);
            t2[14] = t[2];
            EXPECT_LE(f.run(t2, {}, "after a stopped edit").from_token, 10);
            // an ablation stopped, then another
            try_run(t2, ablate(m, heads({{0, 1}})));
            f.run(t2, ablate(m, heads({{L - 1, 0}})), "after a stopped ablation");
            try_run(t2, ablate(m, heads({{1, 1}})));
            t2.push_back(t[1]);
            f.run(t2, ablate(m, heads({{L - 1, 0}})), "typed after a stopped ablation");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory budget: what is dropped first is said; results stay exact
// ---------------------------------------------------------------------------------------------
TEST(Live, BudgetDropsFarLayersFirstAndSaysSo) {
    const ref_model& rm = tiny_gpt2_ref();
    std::vector<int> t = rm.tokens(28, 17);
    gb::record full = full_run(rm.m, t, {}, app_keep());
    size_t all = 0;
    for (int p = 0; p < gb::HOOK_COUNT; p++)
        for (int l = 0; l < (int)full.slot[p].size(); l++)
            if (full.has((gb::hook_point)p, l)) all += full.layer_floats((gb::hook_point)p) * 4;
    gb::live_state st;
    gb::live_result out;
    gb::live_request rq;
    rq.tokens = t;
    rq.keep = app_keep();
    const gb::model_config& c = rm.m.config;
    const size_t rows = std::min(64, c.n_ctx); // the cache's capacity for 28 tokens
    const size_t kv = 2 * 2 * 4 * (size_t)c.n_layer * rows * c.n_kv_head * c.d_head; // both variants' caches
    ASSERT_LT(kv, all);
    rq.keep.budget_bytes = 2 * kv + all; // the keys and values fit; a record gets (budget - kv) / 2 < all
    rq.keep.focus_layer = 2;
    gb::live_run(out, st, rm.m, rq);
    EXPECT_NE(out.report.memory_note.find("pattern of"), std::string::npos) << out.report.memory_note;
    EXPECT_TRUE(out.run->has(gb::HOOK_PATTERN, 2)) << "the focus layer is kept";
    EXPECT_FALSE(out.run->has(gb::HOOK_PATTERN, 0)) << "the farthest layer goes first";
    rq.tokens.push_back(t[5]);
    gb::live_run(out, st, rm.m, rq);
    EXPECT_EQ(out.report.from_token, 28);
    for (int h = 0; h < rm.m.config.n_head; h++)
        EXPECT_LT(diff(out.run->head(2, h), full_run(rm.m, rq.tokens, {}, app_keep()).head(2, h), 29 * 29), 1e-5);

    rq.keep.budget_bytes = 4096; // not even the keys and values: full runs, said once
    gb::live_run(out, st, rm.m, rq);
    EXPECT_FALSE(out.report.reused);
    EXPECT_NE(out.report.memory_note.find("no live recompute"), std::string::npos) << out.report.memory_note;
    gb::record want = full_run(rm.m, rq.tokens, {}, app_keep());
    EXPECT_LT(diff(out.run->last_logits(), want.last_logits(), rm.m.config.vocab_size), 1e-5);

    rq.keep.budget_bytes = 0; // room again: the runs without kept keys and values leave nothing to resume from
    rq.tokens.push_back(t[7]);
    gb::live_run(out, st, rm.m, rq);
    EXPECT_FALSE(out.report.reused) << out.report.what;
    expect_same(*out.run, full_run(rm.m, rq.tokens, {}, app_keep()), rm.m, "after full runs without a cache");
    rq.tokens.push_back(t[8]);
    gb::live_run(out, st, rm.m, rq);
    EXPECT_EQ(out.report.from_token, 30);
    expect_same(*out.run, full_run(rm.m, rq.tokens, {}, app_keep()), rm.m, "typed after that");
}

// A budget under one layer's pattern: that layer keeps the heads that fit, in a block holding the focus head, each
// the same as a full run's; a hook on the pattern (which needs every head) and live runs (typing, an ablation)
// keep them the same way.
TEST(Live, APatternOverTheBudgetKeepsSomeHeadsOfOneLayer) {
    for (const ref_model* rm : ref_models()) {
        const gb::model_config& c = rm->m.config;
        const int T = 20, H = c.n_head;
        ASSERT_GE(H, 4) << rm->name;
        std::vector<int> t = rm->tokens(T + 1, 31);
        t.resize(T);
        const size_t head = sizeof(float) * (size_t)T * T;
        gb::record_request keep = app_keep();
        keep.focus_layer = 1;
        keep.focus_head = 3;
        keep.budget_bytes = 1; // the least kept: one layer of each point, one head of the pattern
        gb::record_plan least = gb::plan_record(keep, c, T, 1);
        EXPECT_EQ(least.part.count, 1);
        EXPECT_EQ(least.part.head0, 3);
        const size_t others = least.bytes - head;
        keep.budget_bytes = others + 2 * head + head / 2; // two heads fit
        gb::record_plan pl = gb::plan_record(keep, c, T, 1);
        EXPECT_EQ(pl.part.layer, 1) << rm->name;
        EXPECT_EQ(pl.part.count, 2) << rm->name;
        EXPECT_EQ(pl.part.head0, 2) << rm->name << ": the block of two holding head 3";
        EXPECT_LE(pl.bytes, keep.budget_bytes);
        EXPECT_NE(pl.note.find("pattern of 2 of " + std::to_string(H) + " heads (2..3) of 1 of"), std::string::npos) << pl.note;

        gb::record_request all = app_keep();
        const gb::record whole = full_run(rm->m, t, {}, all);
        const gb::record r = full_run(rm->m, t, {}, keep);
        EXPECT_EQ(r.part.layer, 1);
        EXPECT_FALSE(r.has_layer(1));
        EXPECT_TRUE(r.has_head(1, 2) && r.has_head(1, 3));
        EXPECT_FALSE(r.has_head(1, 0) || r.has_head(1, 1) || r.has_head(0, 2) || r.has_head(2, 3));
        EXPECT_EQ(r.tensor_floats(gb::HOOK_PATTERN, 1), 2 * (size_t)T * T);
        for (int h = 2; h < 4; h++)
            EXPECT_EQ(0, std::memcmp(r.head(1, h), whole.head(1, h), head)) << rm->name << " head " << h;
        // a hook on the pattern sees every head; the kept ones are copied from it, the same values
        gb::forward_options o;
        o.keep = keep;
        int seen = 0;
        o.hooks.push_back({gb::HOOK_PATTERN, 1, [&](gb::hook_tensor& x) { seen += x.n > 0; return false; }});
        gb::record hooked;
        gb::run_forward(hooked, rm->m, t, {}, o);
        EXPECT_EQ(seen, 1);
        ASSERT_EQ(hooked.part.layer, 1);
        for (int h = 2; h < 4; h++) EXPECT_EQ(0, std::memcmp(hooked.head(1, h), whole.head(1, h), head)) << h;

    }
}

// Live runs on a part layer: a budget whose keys and values fit (live recompute) and whose one layer keeps some
// heads; the run, a typed token (the kept rows reused) and an ablation of a later layer (from that layer on) keep
// the focus head's block, each kept head as a full run's. A long-context tiny Llama: at 100 tokens a layer's
// pattern passes the keys and values.
TEST(Live, APartLayerIsReusedAsTheWholeOnes) {
    tiny_llama_spec spec;
    spec.dim = 16, spec.hidden = 24, spec.n_layer = 3, spec.n_head = 4, spec.n_kv_head = 1, spec.seq_len = 128;
    const tiny_llama tl = write_tiny_llama2c(test_temp_dir("live_part_layer"), spec);
    gb::load_options lo;
    lo.tokenizer_path = tl.tokenizer_path;
    const gb::model m = gb::load_model(tl.model_path, lo);
    const int T = 100, H = spec.n_head;
    std::mt19937 rng(5);
    std::vector<int> t(T + 1);
    for (int& id : t) id = 3 + (int)(rng() % (spec.vocab - 3));
    const int typed = t[T];
    t.resize(T);
    const gb::record_request all = app_keep();
    gb::live_state st;
    gb::live_result out;
    gb::live_request rq;
    rq.tokens = t;
    rq.keep = all;
    rq.keep.focus_layer = 1;
    rq.keep.focus_head = 3;
    rq.baseline = false;
    const size_t layer = sizeof(float) * (size_t)H * T * T;
    for (size_t budget = layer / 4; budget < 8 * layer; budget += layer / 16) {
        rq.keep.budget_bytes = budget;
        st = gb::live_state();
        gb::live_run(out, st, m, rq);
        if (out.report.memory_note.find("no live recompute") == std::string::npos && out.run->part.layer == 1) break;
    }
    ASSERT_EQ(out.report.memory_note.find("no live recompute"), std::string::npos) << out.report.memory_note;
    ASSERT_EQ(out.run->part.layer, 1) << out.report.memory_note;
    for (int step = 1; step < 3; step++) {
        if (step == 1) rq.tokens.push_back(typed);
        if (step == 2) rq.interventions = ablate(m, heads({{2, 0}}));
        gb::live_run(out, st, m, rq);
        EXPECT_TRUE(out.report.reused) << step << ": " << out.report.what;
        const gb::record& lr = *out.run;
        const int n = (int)rq.tokens.size();
        const gb::record want = full_run(m, rq.tokens, rq.interventions, all);
        ASSERT_EQ(lr.part.layer, 1) << step << ": " << out.report.memory_note;
        EXPECT_TRUE(lr.has_head(1, 3)) << step << ": the focus head";
        for (int h = 0; h < H; h++) {
            if (!lr.has_head(1, h)) continue;
            EXPECT_LT(diff(lr.head(1, h), want.head(1, h), (size_t)n * n), 1e-5)
                << "step " << step << " head " << h << " [" << out.report.what << "]";
        }
        EXPECT_LT(diff(lr.last_logits(), want.last_logits(), m.config.vocab_size), 1e-5) << step;
    }
}

TEST(Live, BadRequestsKeepTheKeptRun) {
    const ref_model& rm = tiny_llama_ref();
    live_fixture f{rm};
    std::vector<int> t = rm.tokens(10, 3);
    f.run(t, {}, "prompt");
    auto shown = f.out.run;
    gb::live_request rq;
    rq.keep = f.keep;
    expect_gb_error([&] { gb::live_run(f.out, f.st, rm.m, rq); }, "empty prompt");
    rq.tokens = t;
    rq.tokens[3] = rm.m.config.vocab_size;
    expect_gb_error([&] { gb::live_run(f.out, f.st, rm.m, rq); }, "outside the vocabulary");
    rq.tokens.assign(rm.m.config.n_ctx + 1, 3);
    expect_gb_error([&] { gb::live_run(f.out, f.st, rm.m, rq); }, "prompt too long");
    EXPECT_EQ(f.out.run, shown);
    t.push_back(t[0]);
    EXPECT_EQ(f.run(t, {}, "after bad requests").from_token, 10);
}

// Head scores resume from the previous record's sums (what the app does per keystroke): the same numbers as
// scoring from scratch, for typed tokens, an edit, and a layer recomputed after an ablation.
TEST(Live, HeadScoresResumeToTheSameNumbers) {
    for (const ref_model* rm : ref_models()) {
        live_fixture f{*rm};
        std::vector<int> t = rm->tokens(12, 23);
        t.insert(t.end(), t.begin() + 2, t.begin() + 8); // repeats, so the induction score is defined
        f.run(t, {}, "prompt");
        gb::score_sums sums;
        gb::score_heads_resume(sums, *f.out.run, {}, 0);
        auto prev = f.out.run;
        auto check = [&](const std::string& what, int same_rows) {
            std::vector<uint8_t> same(rm->m.config.n_layer, 0);
            for (int l = 0; l < (int)same.size(); l++)
                same[l] = prev->n_tokens == f.out.run->n_tokens &&
                          prev->acts[gb::HOOK_PATTERN][l] == f.out.run->acts[gb::HOOK_PATTERN][l];
            gb::head_scores got = gb::score_heads_resume(sums, *f.out.run, same, same_rows);
            gb::head_scores want = gb::score_heads(*f.out.run);
            for (int k = 0; k < gb::SCORE_COUNT; k++)
                for (size_t i = 0; i < want.score[k].size(); i++) {
                    if (std::isnan(want.score[k][i])) EXPECT_TRUE(std::isnan(got.score[k][i])) << what;
                    else EXPECT_EQ(got.score[k][i], want.score[k][i]) << what << ": " << gb::head_score_name((gb::head_score_kind)k);
                }
            prev = f.out.run;
        };
        t.push_back(t[3]);
        f.run(t, {}, "typed");
        check("typed", (int)t.size() - 1);
        t[9] = t[4];
        f.run(t, {}, "edited");
        check("edited", 9);
        f.run(t, ablate(rm->m, heads({{rm->m.config.n_layer - 1, 0}})), "ablated");
        check("ablated (same layers shared)", 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Generation appends through the same path: every step equals a full run of its prefix
// ---------------------------------------------------------------------------------------------
TEST(Live, GenerationStepsAreAppends) {
    for (const ref_model* rm : ref_models()) {
        live_fixture f{*rm};
        std::vector<int> t = rm->tokens(6, 19);
        auto iv = ablate(rm->m, heads({{1, 1}}));
        f.run(t, iv, "prompt");
        for (int step = 0; step < 8; step++) {
            const float* lg = f.out.run->last_logits();
            int best = 0;
            for (int v = 1; v < rm->m.config.vocab_size; v++) best = lg[v] > lg[best] ? v : best;
            t.push_back(best);
            gb::live_report r = f.run(t, iv, "generated step " + std::to_string(step));
            EXPECT_EQ(r.from_token, (int)t.size() - 1);
        }
        // replaying an earlier step: the prefix, then forward again
        std::vector<int> part(t.begin(), t.begin() + 9);
        EXPECT_EQ(f.run(part, iv, "replay step 3").from_token, 8);
        EXPECT_EQ(f.run(t, iv, "replay the end").from_token, 9);
    }
}

} // namespace
