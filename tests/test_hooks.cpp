// Hook points, hooks, interventions, resumed runs, logit ids and the activation record vs the double-precision
// references (tests/support/reference.h, tiny_llama.h), on a tiny GPT-2 and a tiny grouped-query Llama.
//
// Sections: helpers | every point vs the reference | hooks | interventions | resuming | logit ids | budget | names
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "ref_models.h"
#include "run/forward.h"
#include "run/hooks.h"
#include "run/record.h"
#include "test_util.h"
#include "util/error.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------
const uint32_t all_points = (1u << gb::HOOK_COUNT) - 1;

// The ablations every point is compared under (3 layers, 4 heads).
std::vector<std::pair<std::string, gb::ablation>> ablation_cases() {
    std::vector<std::pair<std::string, gb::ablation>> c(9);
    c[0].first = "none";
    c[1].first = "no-layernorm", c[1].second.no_layernorm = layers_on({});
    c[2].first = "no-layernorm[1]", c[2].second.no_layernorm = layers_on({1});
    c[3].first = "no-residual[1]", c[3].second.no_residual = layers_on({1});
    c[4].first = "no-residual", c[4].second.no_residual = layers_on({});
    c[5].first = "no-attention[0,2]", c[5].second.no_attention = layers_on({0, 2});
    c[6].first = "no-attention", c[6].second.no_attention = layers_on({});
    c[7].first = "heads 0.1 2.3 2.0", c[7].second.heads = {{0, 1}, {2, 3}, {2, 0}};
    c[8].first = "mixed", c[8].second.heads = {{1, 2}}, c[8].second.no_residual = layers_on({2}),
    c[8].second.no_layernorm = layers_on({0}), c[8].second.no_attention = layers_on({1});
    return c;
}

// A run that keeps every point at every layer, the residual stream and every position's logits.
gb::record run_all(const gb::model& m, const std::vector<int>& tokens, const gb::ablation& ab = {},
                   gb::forward_options opt = {}) {
    opt.keep.points = all_points;
    opt.keep.resid_stream = true;
    opt.all_logits = true;
    gb::record rec;
    gb::run_forward(rec, m, tokens, ab, opt);
    return rec;
}

std::vector<float> floats(const float* p, size_t n) { return std::vector<float>(p, p + n); }

// Every point at every layer, the residual stream, its norms and the logits of rec (run_all) vs ref.
void expect_points_match(const gb::record& rec, const ref_trace& ref, const std::string& what) {
    const int L = rec.n_layer, T = rec.n_tokens, d = rec.d_model;
    gb::model_config shape; // which points the model has: the router only with experts
    shape.n_expert = rec.n_expert;
    for (int p = 0; p < gb::HOOK_COUNT; p++) {
        const gb::hook_point hp = (gb::hook_point)p;
        if (hp == gb::HOOK_LOGITS) continue; // the record's logits, below
        if (!gb::hook_exists(hp, shape)) continue;
        for (int l = 0; l < (gb::hook_is_final(hp) ? 1 : L); l++) {
            const int layer = gb::hook_is_final(hp) ? L : l;
            const float* got = rec.get(hp, layer);
            ASSERT_NE(got, nullptr) << what << ": " << gb::hook_label(hp, layer) << " not kept";
            const std::vector<double>& want = ref.at(hp, l);
            ASSERT_EQ(rec.layer_floats(hp), want.size()) << what << ": " << gb::hook_label(hp, layer);
            EXPECT_LT(max_scaled_error(floats(got, want.size()), want), 1e-4) << what << ": " << gb::hook_label(hp, layer);
        }
    }
    for (int point = 0; point <= 2 * L; point++) {
        ASSERT_NE(rec.resid(point), nullptr) << what << ": residual point " << point;
        std::vector<double> want(ref.resid_at(point, 0), ref.resid_at(point, 0) + (size_t)T * d);
        EXPECT_LT(max_scaled_error(floats(rec.resid(point), (size_t)T * d), want), 1e-4) << what << ": resid " << point;
    }
    EXPECT_LT(max_scaled_error(rec.resid_norm, ref.resid_norm), 1e-4) << what << ": residual norms";
    EXPECT_LT(max_scaled_error(rec.logits, ref.logits), 1e-4) << what << ": logits";
}

// Where element (block, row, col) of a point's tensor sits: the pattern is [H][T][n_keys] (block = head), every
// other point [T][width] (block 0). pos is the row's position.
using elem_fn = std::function<double(gb::hook_point p, int block, int pos, int col, double v)>;

// A hook at (p, layer) that applies f to every element and says it wrote.
gb::hook elementwise_hook(gb::hook_point p, int layer, const elem_fn& f, int n_head) {
    gb::hook h;
    h.point = p;
    h.layer = layer;
    h.fn = [p, f, n_head](gb::hook_tensor& t) {
        const int blocks = p == gb::HOOK_PATTERN ? n_head : 1;
        for (int b = 0; b < blocks; b++)
            for (int r = 0; r < t.n; r++) {
                float* row = t.row(b * t.n + r);
                for (int c = 0; c < t.width; c++) row[c] = (float)f(p, b, t.pos0 + r, c, row[c]);
            }
        return true;
    };
    return h;
}

// The same change as a reference edit (layer -1: every layer; the final points have one).
ref_edit elementwise_edit(gb::hook_point p, int layer, const elem_fn& f, int T, int n_head) {
    return [=](gb::hook_point q, int l, std::vector<double>& x) {
        if (q != p || (layer >= 0 && l != layer && !gb::hook_is_final(p))) return;
        const int blocks = p == gb::HOOK_PATTERN ? n_head : 1;
        const int width = (int)(x.size() / ((size_t)blocks * T));
        for (int b = 0; b < blocks; b++)
            for (int r = 0; r < T; r++)
                for (int c = 0; c < width; c++) {
                    double& v = x[((size_t)b * T + r) * width + c];
                    v = f(p, b, r, c, v);
                }
    };
}

// Several edits in order.
ref_edit chain(std::vector<ref_edit> edits) {
    return [edits](gb::hook_point p, int l, std::vector<double>& x) {
        for (const ref_edit& e : edits) e(p, l, x);
    };
}

// Floats in one row of point p (not the pattern), from the config.
int row_width(gb::hook_point p, const gb::model_config& c) {
    switch (p) {
    case gb::HOOK_Q:
    case gb::HOOK_Z: return c.n_head * c.d_head;
    case gb::HOOK_K:
    case gb::HOOK_V: return c.n_kv_head * c.d_head;
    case gb::HOOK_HEAD_OUT: return c.n_head * c.d_model;
    case gb::HOOK_MLP_POST: return c.d_ff;
    case gb::HOOK_LOGITS: return c.vocab_size;
    default: return c.d_model;
    }
}

// What an intervention (ZERO or SET) does to one element, written from hooks.h's description: it covers the
// head's slice (per-head points) and the position's row; SET's values are [slice] for one position, else
// [T][slice], slice = the head's width or the whole row's.
elem_fn intervention_elem(const gb::intervention& v, const gb::model_config& c) {
    const int head_width = v.point == gb::HOOK_HEAD_OUT ? c.d_model : c.d_head; // q, k, v, z: dh; head_out: d
    const int slice = v.head >= 0 ? head_width : row_width(v.point, c);
    return [v, head_width, slice](gb::hook_point p, int block, int pos, int col, double x) {
        int head = -1, in_slice = col;
        if (p == gb::HOOK_PATTERN) head = block;
        else if (gb::hook_has_heads(p)) head = col / head_width, in_slice = col % head_width;
        if (v.head >= 0 && head != v.head) return x;
        if (v.position >= 0 && pos != v.position) return x;
        if (v.kind == gb::INTERVENE_ZERO) return 0.0;
        const int c0 = v.head >= 0 ? in_slice : col;
        return (double)(v.position >= 0 ? v.values[c0] : v.values[(size_t)pos * slice + c0]);
    };
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Every hook point vs the reference
// ---------------------------------------------------------------------------------------------
TEST(HookPoints, EveryPointMatchesReferenceUnderEveryAblation) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const auto tokens = rm->tokens(13, 4);
            for (const auto& [name, ab] : ablation_cases()) {
                gb::record rec = run_all(rm->m, tokens, ab);
                expect_points_match(rec, rm->reference(tokens, ab, {}), rm->name + ", " + name);
            }
        }
    });
}

TEST(HookPoints, ShapesAndHeadsFollowTheConfig) {
    const gb::model_config& c = tiny_llama_ref().m.config;
    ASSERT_LT(c.n_kv_head, c.n_head) << "the Llama fixture must use grouped-query attention";
    EXPECT_EQ(gb::hook_heads(gb::HOOK_K, c), c.n_kv_head);
    EXPECT_EQ(gb::hook_heads(gb::HOOK_Z, c), c.n_head);
    EXPECT_EQ(gb::hook_heads(gb::HOOK_MLP_OUT, c), 1);
    EXPECT_EQ(gb::hook_width(gb::HOOK_V, c, 9), c.n_kv_head * c.d_head);
    EXPECT_EQ(gb::hook_width(gb::HOOK_HEAD_OUT, c, 9), c.n_head * c.d_model);
    EXPECT_EQ(gb::hook_width(gb::HOOK_PATTERN, c, 9), 9);
    EXPECT_EQ(gb::hook_head_width(gb::HOOK_HEAD_OUT, c, 9), c.d_model);
    EXPECT_EQ(gb::hook_head_width(gb::HOOK_Q, c, 9), c.d_head);
    EXPECT_EQ(gb::hook_label(gb::HOOK_Z, 2), "L2 z");
    EXPECT_EQ(gb::hook_label(gb::HOOK_LOGITS, 3), "logits");
}

// ---------------------------------------------------------------------------------------------
// Hooks
// ---------------------------------------------------------------------------------------------
// Hooks that overwrite: each change flows on exactly as the reference's same change does.
TEST(Hooks, OverwritingHooksMatchTheReferenceWithTheSameChange) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const gb::model_config& c = rm->m.config;
            const int T = 11, H = c.n_head, dh = c.d_head, d = c.d_model;
            const auto tokens = rm->tokens(T, 7);
            struct change {
                std::string name;
                gb::hook_point p;
                int layer;
                elem_fn f;
            };
            std::vector<change> changes = {
                {"z head 2 scaled by 0.5 at L1", gb::HOOK_Z, 1,
                 [dh](gb::hook_point, int, int, int col, double v) { return col / dh == 2 ? 0.5 * v : v; }},
                {"attn_out zeroed at L0", gb::HOOK_ATTN_OUT, 0, [](gb::hook_point, int, int, int, double) { return 0.0; }},
                {"attn_out zeroed at every layer", gb::HOOK_ATTN_OUT, -1,
                 [](gb::hook_point, int, int, int, double) { return 0.0; }},
                {"head_out of head 1 doubled at L2", gb::HOOK_HEAD_OUT, 2,
                 [d](gb::hook_point, int, int, int col, double v) { return col / d == 1 ? 2.0 * v : v; }},
                {"q of head 3 tripled at L1 (sharper pattern)", gb::HOOK_Q, 1,
                 [dh](gb::hook_point, int, int, int col, double v) { return col / dh == 3 ? 3.0 * v : v; }},
                {"k negated at L0 position 2", gb::HOOK_K, 0,
                 [](gb::hook_point, int, int pos, int, double v) { return pos == 2 ? -v : v; }},
                {"v shifted at L2", gb::HOOK_V, 2, [](gb::hook_point, int, int, int col, double v) { return v + 0.01 * col; }},
                {"pattern of head 1 uniform at L1", gb::HOOK_PATTERN, 1,
                 [](gb::hook_point, int b, int pos, int col, double v) { return b != 1 ? v : col <= pos ? 1.0 / (pos + 1) : 0.0; }},
                {"pattern: every head attends to BOS at L2", gb::HOOK_PATTERN, 2,
                 [](gb::hook_point, int, int, int col, double) { return col == 0 ? 1.0 : 0.0; }},
                {"mlp_post halved at every layer", gb::HOOK_MLP_POST, -1,
                 [](gb::hook_point, int, int, int, double v) { return 0.5 * v; }},
                {"resid_mid position 4 zeroed at L1", gb::HOOK_RESID_MID, 1,
                 [](gb::hook_point, int, int pos, int, double v) { return pos == 4 ? 0.0 : v; }},
                {"resid_pre scaled at L2", gb::HOOK_RESID_PRE, 2, [](gb::hook_point, int, int, int, double v) { return 1.5 * v; }},
                {"attn_in, mlp_in negated at L0", gb::HOOK_ATTN_IN, 0, [](gb::hook_point, int, int, int, double v) { return -v; }},
                {"final_norm scaled", gb::HOOK_FINAL_NORM, -1, [](gb::hook_point, int, int, int, double v) { return 2.0 * v; }},
                {"logits shifted by their index", gb::HOOK_LOGITS, -1,
                 [](gb::hook_point, int, int, int col, double v) { return v + 0.001 * col; }},
            };
            gb::record plain = run_all(rm->m, tokens);
            for (const change& ch : changes) {
                gb::forward_options opt;
                opt.hooks.push_back(elementwise_hook(ch.p, ch.layer, ch.f, H));
                ref_options ro;
                ro.edit = elementwise_edit(ch.p, ch.layer, ch.f, T, H);
                if (ch.p == gb::HOOK_ATTN_IN) { // and a second hook at another point of the same layer
                    opt.hooks.push_back(elementwise_hook(gb::HOOK_MLP_IN, 0, ch.f, H));
                    ro.edit = chain({ro.edit, elementwise_edit(gb::HOOK_MLP_IN, 0, ch.f, T, H)});
                }
                gb::record rec = run_all(rm->m, tokens, {}, opt);
                expect_points_match(rec, rm->reference(tokens, {}, ro), rm->name + ", " + ch.name);
                // the change must show in the output (else this test could not fail)
                double diff = 0;
                for (size_t i = 0; i < rec.logits.size(); i++) diff = std::max(diff, (double)std::abs(rec.logits[i] - plain.logits[i]));
                EXPECT_GT(diff, 1e-3) << rm->name << ", " << ch.name << ": the hook changed nothing";
            }
            // zeroing attn_out by hook is the no-attention ablation (the reference's own ablation path)
            gb::forward_options zero;
            zero.hooks.push_back(elementwise_hook(gb::HOOK_ATTN_OUT, 1, [](gb::hook_point, int, int, int, double) { return 0.0; }, H));
            gb::ablation no_attn;
            no_attn.no_attention = layers_on({1});
            EXPECT_LT(max_scaled_error(run_all(rm->m, tokens, {}, zero).logits, rm->reference(tokens, no_attn, {}).logits), 1e-4)
                << rm->name;
        }
    });
}

// A pattern hook that rewrites the probabilities makes z follow also when the record keeps no pattern (the
// probabilities then live in the forward's scratch, attention_values_cpu recomputes z from there).
TEST(Hooks, PatternHookWithoutRecordReweightsTheValues) {
    for (const ref_model* rm : ref_models()) {
        const int T = 9, H = rm->m.config.n_head;
        const auto tokens = rm->tokens(T, 3);
        elem_fn prev = [](gb::hook_point, int, int pos, int col, double) { return col == std::max(0, pos - 1) ? 1.0 : 0.0; };
        gb::forward_options opt;
        opt.all_logits = true;
        opt.keep.points = 0; // nothing kept
        opt.keep.resid_norms = false;
        opt.hooks.push_back(elementwise_hook(gb::HOOK_PATTERN, 0, prev, H));
        gb::record rec;
        gb::run_forward(rec, rm->m, tokens, {}, opt);
        EXPECT_FALSE(rec.has(gb::HOOK_PATTERN, 0));
        ref_options ro;
        ro.edit = elementwise_edit(gb::HOOK_PATTERN, 0, prev, T, H);
        EXPECT_LT(max_scaled_error(rec.logits, rm->reference(tokens, {}, ro).logits), 1e-4) << rm->name;
        EXPECT_GT(max_scaled_error(rec.logits, rm->reference(tokens, {}, {}).logits), 1e-3) << rm->name << ": no effect";
    }
}

// Hooks that only read (return false) change nothing, bit for bit, and see what the record keeps.
TEST(Hooks, ReadOnlyHooksChangeNothing) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const auto tokens = rm->tokens(12, 5);
            const int L = rm->m.config.n_layer;
            for (bool keep : {false, true}) {
                gb::forward_options opt;
                opt.all_logits = true;
                if (keep) opt.keep.points = all_points, opt.keep.resid_stream = true;
                gb::record plain;
                gb::run_forward(plain, rm->m, tokens, {}, opt);
                // one read-only hook at every point and layer, keeping a copy of what it saw
                std::vector<std::vector<float>> seen((size_t)gb::HOOK_COUNT * (L + 1));
                gb::forward_options hooked = opt;
                for (int p = 0; p < gb::HOOK_COUNT; p++) {
                    gb::hook h;
                    h.point = (gb::hook_point)p;
                    const int H = rm->m.config.n_head;
                    h.fn = [&seen, L, H](gb::hook_tensor& t) {
                        std::vector<float>& s = seen[(size_t)t.point * (L + 1) + t.layer];
                        s.clear();
                        const int blocks = t.point == gb::HOOK_PATTERN ? H : 1; // the pattern: H blocks of n rows
                        for (int r = 0; r < blocks * t.n; r++) s.insert(s.end(), t.row(r), t.row(r) + t.width);
                        return false;
                    };
                    hooked.hooks.push_back(h);
                }
                gb::record rec;
                gb::run_forward(rec, rm->m, tokens, {}, hooked);
                ASSERT_EQ(rec.logits.size(), plain.logits.size());
                EXPECT_EQ(0, std::memcmp(rec.logits.data(), plain.logits.data(), rec.logits.size() * sizeof(float)))
                    << rm->name << (keep ? " (record keeps every point)" : " (record keeps the pattern)")
                    << ": read-only hooks changed the logits";
                EXPECT_EQ(rec.resid_norm, plain.resid_norm) << rm->name;
                // every point and layer was seen; where the record keeps it, the hook saw exactly that
                for (int p = 0; p < gb::HOOK_COUNT; p++)
                    for (int l = 0; l <= L; l++) {
                        const gb::hook_point hp = (gb::hook_point)p;
                        const bool exists = (gb::hook_is_final(hp) ? l == L : l < L) && gb::hook_exists(hp, rm->m.config);
                        const std::vector<float>& s = seen[(size_t)p * (L + 1) + l];
                        EXPECT_EQ(s.empty(), !exists) << rm->name << " " << gb::hook_label(hp, l);
                        if (!exists || !rec.has(hp, l)) continue;
                        ASSERT_EQ(s.size(), rec.layer_floats(hp)) << gb::hook_label(hp, l);
                        EXPECT_EQ(0, std::memcmp(s.data(), rec.get(hp, l), s.size() * sizeof(float))) << gb::hook_label(hp, l);
                    }
                const std::vector<float>& lg = seen[(size_t)gb::HOOK_LOGITS * (L + 1) + L];
                EXPECT_EQ(lg, rec.logits) << "the logits hook sees the logits";
            }
        }
    });
}

// layer -1 fires at every layer in order, a given layer only there, the final points once with layer n_layer.
TEST(Hooks, LayerSelectionAndFinalPointsFireOnce) {
    const ref_model& rm = tiny_llama_ref();
    const int L = rm.m.config.n_layer;
    const auto tokens = rm.tokens(6, 1);
    std::vector<std::pair<int, int>> calls; // (point, layer)
    gb::forward_options opt;
    auto log = [&calls](gb::hook_tensor& t) {
        calls.push_back({t.point, t.layer});
        EXPECT_EQ(t.pos0, gb::hook_is_final(t.point) ? 5 : 0) << "rows from position 0; the final points: the last only";
        return false;
    };
    opt.hooks = {{gb::HOOK_MLP_OUT, -1, log}, {gb::HOOK_Q, 1, log}, {gb::HOOK_FINAL_NORM, -1, log},
                 {gb::HOOK_LOGITS, 0, log}, {gb::HOOK_RESID_PRE, -1, log}};
    gb::record rec;
    gb::run_forward(rec, rm.m, tokens, {}, opt);
    std::vector<std::pair<int, int>> want = {{gb::HOOK_RESID_PRE, 0}};
    for (int l = 0; l < L; l++) {
        if (l > 0) want.push_back({gb::HOOK_RESID_PRE, l});
        if (l == 1) want.push_back({gb::HOOK_Q, 1});
        want.push_back({gb::HOOK_MLP_OUT, l});
    }
    want.push_back({gb::HOOK_FINAL_NORM, L});
    want.push_back({gb::HOOK_LOGITS, L}); // a final point's layer is ignored
    EXPECT_EQ(calls, want);
    // shapes as hooks.h states them, for a call of n rows
    opt.hooks = {{gb::HOOK_PATTERN, 0,
                  [&](gb::hook_tensor& t) {
                      EXPECT_EQ(t.n, 6);
                      EXPECT_EQ(t.width, 6);
                      EXPECT_EQ(t.stride, 6);
                      return false;
                  }},
                 {gb::HOOK_K, 0,
                  [&](gb::hook_tensor& t) {
                      EXPECT_EQ(t.width, rm.m.config.n_kv_head * rm.m.config.d_head);
                      EXPECT_GE(t.stride, t.width);
                      return false;
                  }},
                 {gb::HOOK_FINAL_NORM, -1, [&](gb::hook_tensor& t) {
                      EXPECT_EQ(t.n, 1) << "without all_logits only the last position gets logits";
                      EXPECT_EQ(t.pos0, 5) << "the final points' one row is the last position";
                      return false;
                  }}};
    gb::run_forward(rec, rm.m, tokens, {}, opt);
}

// Without all_logits the final points hold one row, the last position's: an intervention there by position hits
// that position and no other.
TEST(Interventions, FinalPointsByPositionWithoutAllLogits) {
    for (const ref_model* rm : ref_models()) {
        const int T = 7, V = rm->m.config.vocab_size;
        const auto tokens = rm->tokens(T, 4);
        gb::record plain;
        gb::run_forward(plain, rm->m, tokens);
        for (int position : {0, T - 2, T - 1})
            for (gb::hook_point p : {gb::HOOK_FINAL_NORM, gb::HOOK_LOGITS}) {
                gb::forward_options opt;
                opt.interventions = {{gb::INTERVENE_ZERO, p, -1}};
                opt.interventions[0].position = position;
                gb::record rec;
                gb::run_forward(rec, rm->m, tokens, {}, opt);
                ASSERT_EQ(rec.logits.size(), (size_t)V);
                if (position == T - 1) {
                    EXPECT_EQ(rec.logits, std::vector<float>(V, 0.0f)) << rm->name << " " << gb::hook_name(p);
                } else {
                    EXPECT_EQ(rec.logits, plain.logits) << rm->name << " " << gb::hook_name(p) << ": position " << position
                                                        << " has no row here, yet the last position changed";
                }
            }
        // SET over every position reads the last position's row of the values
        std::vector<float> values((size_t)T * rm->m.config.d_model, 0.0f);
        for (int i = 0; i < rm->m.config.d_model; i++) values[(size_t)(T - 1) * rm->m.config.d_model + i] = 1.0f;
        gb::forward_options opt;
        opt.interventions = {{gb::INTERVENE_SET, gb::HOOK_FINAL_NORM, -1}};
        opt.interventions[0].values = values.data();
        gb::record rec;
        gb::run_forward(rec, rm->m, tokens, {}, opt);
        const ref_readout& ro = rm->readout;
        std::vector<double> want(V, 0.0);
        for (int v = 0; v < V; v++)
            for (int i = 0; i < ro.d; i++) want[v] += ro.unembed[(size_t)v * ro.d + i];
        EXPECT_LT(max_scaled_error(rec.logits, want), 1e-4) << rm->name;
    }
}

// ---------------------------------------------------------------------------------------------
// Interventions
// ---------------------------------------------------------------------------------------------
TEST(Interventions, ZeroAndSetMatchTheReference) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const gb::model_config& c = rm->m.config;
            const int T = 10, d = c.d_model, dh = c.d_head, KV = c.n_kv_head, H = c.n_head, ff = c.d_ff;
            const auto tokens = rm->tokens(T, 9);
            std::mt19937 rng(5);
            std::normal_distribution<float> nd(0.0f, 1.0f);
            auto values = [&](size_t n) {
                auto v = std::make_shared<std::vector<float>>(n);
                for (float& x : *v) x = nd(rng);
                return v;
            };
            std::vector<std::shared_ptr<std::vector<float>>> keep_alive;
            auto set = [&](gb::hook_point p, int layer, int head, int position, size_t n) {
                gb::intervention v{gb::INTERVENE_SET, p, layer};
                v.head = head;
                v.position = position;
                keep_alive.push_back(values(n));
                v.values = keep_alive.back()->data();
                return v;
            };
            auto zero = [](gb::hook_point p, int layer, int head, int position) {
                gb::intervention v{gb::INTERVENE_ZERO, p, layer};
                v.head = head;
                v.position = position;
                return v;
            };
            struct test_case {
                std::string name;
                std::vector<gb::intervention> iv;
            };
            std::vector<test_case> cases = {
                {"zero mlp_post L1", {zero(gb::HOOK_MLP_POST, 1, -1, -1)}},
                {"zero z head 1 at L2 position 3", {zero(gb::HOOK_Z, 2, 1, 3)}},
                {"zero q head 0 at L0", {zero(gb::HOOK_Q, 0, 0, -1)}},
                {"zero k kv-head 1 at L1 (its query heads)", {zero(gb::HOOK_K, 1, KV - 1, -1)}},
                {"zero v at every layer, position 0", {zero(gb::HOOK_V, -1, -1, 0)}},
                {"zero pattern head 2 at L1 position 4", {zero(gb::HOOK_PATTERN, 1, 2, 4)}},
                {"zero pattern at L0 position 5 (every head)", {zero(gb::HOOK_PATTERN, 0, -1, 5)}},
                {"zero head_out head 3 at L0", {zero(gb::HOOK_HEAD_OUT, 0, 3, -1)}},
                {"zero resid_mid at L1 position 2", {zero(gb::HOOK_RESID_MID, 1, -1, 2)}},
                {"zero final_norm at position 9", {zero(gb::HOOK_FINAL_NORM, -1, -1, 9)}},
                {"zero logits at position 0", {zero(gb::HOOK_LOGITS, -1, -1, 0)}},
                {"set resid_post L0 position 2", {set(gb::HOOK_RESID_POST, 0, -1, 2, d)}},
                {"set resid_pre L0 (embeddings) everywhere", {set(gb::HOOK_RESID_PRE, 0, -1, -1, (size_t)T * d)}},
                {"set v kv-head 1 at L2 everywhere", {set(gb::HOOK_V, 2, KV - 1, -1, (size_t)T * dh)}},
                {"set mlp_out L1 everywhere", {set(gb::HOOK_MLP_OUT, 1, -1, -1, (size_t)T * d)}},
                {"set attn_in L0 position 0", {set(gb::HOOK_ATTN_IN, 0, -1, 0, d)}},
                {"set z head 0 at L1 position 5", {set(gb::HOOK_Z, 1, 0, 5, dh)}},
                {"set head_out head 2 at L2 everywhere", {set(gb::HOOK_HEAD_OUT, 2, 2, -1, (size_t)T * d)}},
                {"set mlp_post at every layer, position 7", {set(gb::HOOK_MLP_POST, -1, -1, 7, ff)}},
                {"set q head 3 at L2 position 6", {set(gb::HOOK_Q, 2, H - 1, 6, dh)}},
                {"zero then set at one point (in order)",
                 {zero(gb::HOOK_ATTN_OUT, 1, -1, -1), set(gb::HOOK_ATTN_OUT, 1, -1, 3, d)}},
            };
            for (const test_case& tc : cases) {
                gb::forward_options opt;
                opt.interventions = tc.iv;
                std::vector<ref_edit> edits;
                for (const gb::intervention& v : tc.iv) edits.push_back(elementwise_edit(v.point, v.layer, intervention_elem(v, c), T, H));
                ref_options ro;
                ro.edit = chain(edits);
                gb::record rec = run_all(rm->m, tokens, {}, opt);
                expect_points_match(rec, rm->reference(tokens, {}, ro), rm->name + ", " + tc.name);
            }
            // interventions come after the ablation's own: a head ablation and a SET of another head's z
            gb::ablation ab;
            ab.heads = {{1, 0}};
            gb::forward_options opt;
            opt.interventions = {set(gb::HOOK_Z, 1, 2, -1, (size_t)T * dh)};
            ref_options ro;
            ro.edit = elementwise_edit(gb::HOOK_Z, 1, intervention_elem(opt.interventions[0], c), T, H);
            expect_points_match(run_all(rm->m, tokens, ab, opt), rm->reference(tokens, ab, ro), rm->name + ", head ablation + set");
        }
    });
}

TEST(Interventions, CheckNamesWhatDoesNotFit) {
    const ref_model& rm = tiny_llama_ref();
    const gb::model_config& c = rm.m.config; // 3 layers, 4 heads, 2 key/value heads
    float buf[64] = {};
    auto check = [&](gb::intervention v) { return [v, &c] { gb::check_interventions({v}, c); }; };
    gb::intervention v{gb::INTERVENE_ZERO, gb::HOOK_Z, 3};
    expect_gb_error(check(v), "the model has layers 0..2");
    v = {gb::INTERVENE_ZERO, gb::HOOK_Z, 0};
    v.head = 4;
    expect_gb_error(check(v), "head 4 is outside the 4 heads");
    v = {gb::INTERVENE_ZERO, gb::HOOK_K, 0};
    v.head = 2;
    expect_gb_error(check(v), "head 2 is outside the 2 heads"); // keys have KV heads
    v = {gb::INTERVENE_ZERO, gb::HOOK_MLP_OUT, 0};
    v.head = 0;
    expect_gb_error(check(v), "this point has no heads");
    v = {gb::INTERVENE_ZERO, gb::HOOK_RESID_MID, 0};
    v.position = c.n_ctx;
    expect_gb_error(check(v), "outside the context");
    expect_gb_error(check({gb::INTERVENE_IDENTITY_NORM, gb::HOOK_RESID_MID, 0}),
                    "an identity norm applies to attn_in, mlp_in or final_norm");
    expect_gb_error(check({gb::INTERVENE_NO_RESIDUAL, gb::HOOK_MLP_OUT, 0}), "applies to resid_mid or resid_post");
    v = {gb::INTERVENE_SET, gb::HOOK_PATTERN, 0};
    v.values = buf;
    expect_gb_error(check(v), "SET is not supported on the pattern");
    expect_gb_error(check({gb::INTERVENE_SET, gb::HOOK_MLP_OUT, 1}), "SET without values");
    expect_gb_error(check({gb::INTERVENE_SET, gb::HOOK_MLP_OUT, -1}), "mlp_out (every layer): SET without values");
    // what fits passes, and the forward checks before it runs
    v = {gb::INTERVENE_ZERO, gb::HOOK_K, 2};
    v.head = 1;
    gb::check_interventions({v, {gb::INTERVENE_IDENTITY_NORM, gb::HOOK_FINAL_NORM, -1}}, c);
    gb::forward_options opt;
    opt.interventions = {{gb::INTERVENE_ZERO, gb::HOOK_Q, 7}};
    gb::record rec;
    expect_gb_error([&] { gb::run_forward(rec, rm.m, rm.tokens(4, 1), {}, opt); }, "L7 q");
}

// ---------------------------------------------------------------------------------------------
// Resuming at a residual point
// ---------------------------------------------------------------------------------------------
// A run resumed at residual point p for positions t.. from the recorded stream (earlier positions in the cache
// of a full run over the same tokens) gives the full run's logits.
TEST(Resume, FromTheRecordedStreamEqualsTheFullRun) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const gb::model_config& c = rm->m.config;
            const int T = 12, L = c.n_layer, d = c.d_model, V = c.vocab_size;
            const auto tokens = rm->tokens(T, 2);
            for (bool ablate : {false, true}) {
                gb::forward_options opt;
                if (ablate) {
                    gb::ablation ab;
                    ab.heads = {{1, 1}};
                    ab.no_layernorm = layers_on({0});
                    opt.interventions = gb::ablation_interventions(ab, c);
                }
                opt.all_logits = true;
                gb::forward_options full_opt = opt;
                full_opt.keep.resid_stream = true;
                gb::forward_state s;
                gb::state_init(s, c, T);
                s.keep_cache = true;
                gb::record full;
                gb::eval(full.logits, &full, s, rm->m, tokens.data(), T, full_opt);
                std::vector<double> full_logits(full.logits.begin(), full.logits.end());
                for (int p : {0, 1, 2, 3, 2 * L - 1, 2 * L})
                    for (int t : {0, 1, 5, T - 1}) {
                        gb::forward_options o = opt;
                        o.start_point = p;
                        o.start_resid = full.resid(p) + (size_t)t * d;
                        s.n_past = t;
                        std::vector<float> lg;
                        gb::eval(lg, nullptr, s, rm->m, tokens.data() + t, T - t, o);
                        EXPECT_EQ(s.n_past, T);
                        std::vector<double> want(full_logits.begin() + (size_t)t * V, full_logits.end());
                        EXPECT_LT(max_scaled_error(lg, want), 1e-5)
                            << rm->name << (ablate ? " ablated" : "") << ": resumed at point " << p << ", position " << t;
                    }
                // a changed stream at the resume point changes the output (the resumed run really reads it)
                std::vector<float> x(full.resid(2) + (size_t)(T - 1) * d, full.resid(2) + (size_t)T * d);
                for (float& e : x) e *= -1;
                gb::forward_options o = opt;
                o.start_point = 2;
                o.start_resid = x.data();
                s.n_past = T - 1;
                std::vector<float> lg;
                gb::eval(lg, nullptr, s, rm->m, tokens.data() + T - 1, 1, o);
                std::vector<double> want(full_logits.end() - V, full_logits.end());
                EXPECT_GT(max_scaled_error(lg, want), 1e-3) << rm->name;
            }
            // resuming without a stream, or past the last point, is an internal error
            gb::forward_state s;
            gb::state_init(s, c, T);
            gb::forward_options o;
            o.start_point = 3;
            std::vector<float> lg;
            expect_gb_error([&] { gb::eval(lg, nullptr, s, rm->m, tokens.data(), T, o); }, "needs its stream");
            std::vector<float> x((size_t)T * d);
            o.start_resid = x.data();
            o.start_point = 2 * L + 1;
            expect_gb_error([&] { gb::eval(lg, nullptr, s, rm->m, tokens.data(), T, o); }, "residual point");
            gb::record rec;
            o.start_point = 1;
            expect_gb_error([&] { gb::eval(lg, &rec, s, rm->m, tokens.data(), T, o); }, "a record needs the prompt");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Logit ids
// ---------------------------------------------------------------------------------------------
TEST(LogitIds, GiveTheFullHeadsLogitsForThoseIds) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const int T = 8, V = rm->m.config.vocab_size;
            const auto tokens = rm->tokens(T, 6);
            const std::vector<int> ids = {5, V - 1, 17, 5, 0};
            for (bool all : {false, true}) {
                gb::forward_options opt;
                opt.all_logits = all;
                gb::record full, part;
                gb::run_forward(full, rm->m, tokens, {}, opt);
                opt.logit_ids = ids;
                gb::run_forward(part, rm->m, tokens, {}, opt);
                const int rows = all ? T : 1;
                ASSERT_EQ(part.logits.size(), (size_t)rows * ids.size());
                EXPECT_EQ(part.logit_ids, ids);
                std::vector<double> want;
                for (int r = 0; r < rows; r++)
                    for (int id : ids) want.push_back(full.logits[(size_t)r * V + id]);
                EXPECT_LT(max_scaled_error(part.logits, want), 1e-4) << rm->name << (all ? " all positions" : "");
                // and against the reference's logits
                const ref_trace ref = rm->reference(tokens, {}, {});
                std::vector<double> ref_want;
                for (int r = T - rows; r < T; r++)
                    for (int id : ids) ref_want.push_back(ref.logits[(size_t)r * V + id]);
                EXPECT_LT(max_scaled_error(part.logits, ref_want), 1e-4) << rm->name;
                EXPECT_EQ(part.last_logits(), part.logits.data() + (rows - 1) * ids.size());
            }
            gb::forward_options bad;
            bad.logit_ids = {V};
            gb::record rec;
            expect_gb_error([&] { gb::run_forward(rec, rm->m, tokens, {}, bad); }, "logit id " + std::to_string(V));
        }
    });
}

// ---------------------------------------------------------------------------------------------
// The record under a memory budget
// ---------------------------------------------------------------------------------------------
// 3 layers, T = 16: head_out and mlp_post are the largest points (8 KB a layer), the pattern next (4 KB).
TEST(RecordBudget, DropsTheLargestPointsFarthestLayersFirst) {
    const ref_model& rm = tiny_gpt2_ref();
    const gb::model_config& c = rm.m.config;
    const int T = 16, L = c.n_layer;
    const size_t big = gb::record_layer_bytes(gb::HOOK_HEAD_OUT, c, T, 1);
    ASSERT_EQ(big, gb::record_layer_bytes(gb::HOOK_MLP_POST, c, T, 1)) << "the fixture's two largest points tie";
    ASSERT_GT(big, gb::record_layer_bytes(gb::HOOK_PATTERN, c, T, 1));
    gb::record_request rq;
    rq.points = all_points;
    rq.resid_stream = true;
    const gb::record_plan unlimited = gb::plan_record(rq, c, T, 1);
    EXPECT_TRUE(unlimited.note.empty());
    auto kept = [&](const gb::record_plan& pl, gb::hook_point p) { return std::vector<uint8_t>(pl.keep[p].begin(), pl.keep[p].end()); };
    const std::vector<uint8_t> all(L, 1);
    for (int p = 0; p < gb::HOOK_COUNT; p++) // every point the model has (a dense one has no router)
        EXPECT_EQ(std::count(unlimited.keep[p].begin(), unlimited.keep[p].end(), 1),
                  gb::hook_exists((gb::hook_point)p, c) ? (long)unlimited.keep[p].size() : 0) << gb::hook_name((gb::hook_point)p);

    // one layer's worth over: head_out (first of the tied largest) gives up the layer farthest from focus 0
    rq.budget_bytes = unlimited.bytes - big;
    gb::record_plan pl = gb::plan_record(rq, c, T, 1);
    EXPECT_EQ(kept(pl, gb::HOOK_HEAD_OUT), (std::vector<uint8_t>{1, 1, 0}));
    EXPECT_EQ(kept(pl, gb::HOOK_MLP_POST), all);
    EXPECT_EQ(kept(pl, gb::HOOK_PATTERN), all);
    EXPECT_EQ(pl.bytes, rq.budget_bytes);
    EXPECT_EQ(pl.note, "head_out of 2 of 3 layers kept (memory budget " + std::to_string(rq.budget_bytes) + " bytes)");

    // focus 1: layers 0 and 2 are as far, the earlier goes first
    rq.focus_layer = 1;
    pl = gb::plan_record(rq, c, T, 1);
    EXPECT_EQ(kept(pl, gb::HOOK_HEAD_OUT), (std::vector<uint8_t>{0, 1, 1}));

    // two layers and a byte over: head_out keeps only the focus layer, then mlp_post gives up its farthest
    rq.focus_layer = 2;
    rq.budget_bytes = unlimited.bytes - 2 * big - 1;
    pl = gb::plan_record(rq, c, T, 1);
    EXPECT_EQ(kept(pl, gb::HOOK_HEAD_OUT), (std::vector<uint8_t>{0, 0, 1}));
    EXPECT_EQ(kept(pl, gb::HOOK_MLP_POST), (std::vector<uint8_t>{0, 1, 1}));
    EXPECT_EQ(kept(pl, gb::HOOK_PATTERN), all);
    EXPECT_LE(pl.bytes, rq.budget_bytes);
    EXPECT_NE(pl.note.find("head_out of 1 of 3 layers, mlp_post of 2 of 3 layers kept"), std::string::npos) << pl.note;

    // the record keeps exactly the planned layers, with the full record's values
    gb::forward_options opt;
    opt.keep = rq;
    const auto tokens = rm.tokens(T, 8);
    gb::record part, full;
    gb::run_forward(part, rm.m, tokens, {}, opt);
    gb::forward_options all_opt;
    all_opt.keep.points = all_points;
    all_opt.keep.resid_stream = true;
    gb::run_forward(full, rm.m, tokens, {}, all_opt);
    EXPECT_EQ(part.budget_note, pl.note);
    for (int p = 0; p < gb::HOOK_COUNT; p++) {
        const gb::hook_point hp = (gb::hook_point)p;
        if (hp == gb::HOOK_LOGITS) continue; // in record::logits
        for (int l = 0; l < (gb::hook_is_final(hp) ? 1 : L); l++) {
            const int layer = gb::hook_is_final(hp) ? L : l;
            EXPECT_EQ(part.has(hp, layer), (bool)pl.keep[p][l]) << gb::hook_label(hp, layer);
            if (!part.has(hp, layer)) {
                EXPECT_EQ(part.get(hp, layer), nullptr);
                continue;
            }
            ASSERT_TRUE(full.has(hp, layer));
            EXPECT_EQ(0, std::memcmp(part.get(hp, layer), full.get(hp, layer), part.layer_floats(hp) * sizeof(float)))
                << gb::hook_label(hp, layer) << " differs from the full record's";
        }
    }
    EXPECT_EQ(part.logits, full.logits);
    // a budget no plan can meet keeps one layer of each point and says so
    rq.budget_bytes = 1;
    pl = gb::plan_record(rq, c, T, 1);
    for (int p = 0; p < gb::HOOK_COUNT; p++)
        if (!gb::hook_is_final((gb::hook_point)p) && gb::hook_exists((gb::hook_point)p, c)) {
            EXPECT_EQ(std::count(pl.keep[p].begin(), pl.keep[p].end(), 1), 1) << p;
        }
    EXPECT_NE(pl.note.find("still exceeded"), std::string::npos) << pl.note;
}

// Only some layers asked for: the others are not kept; resid() of a later layer's resid_pre falls back on resid_post.
TEST(RecordBudget, LayerSelectionAndResidLookup) {
    const ref_model& rm = tiny_llama_ref();
    const int L = rm.m.config.n_layer;
    gb::forward_options opt;
    opt.keep.points = gb::hook_bit(gb::HOOK_RESID_PRE) | gb::hook_bit(gb::HOOK_Z);
    opt.keep.layers = {0, 1, 0};
    gb::record rec;
    gb::run_forward(rec, rm.m, rm.tokens(5, 2), {}, opt);
    EXPECT_FALSE(rec.has(gb::HOOK_Z, 0));
    EXPECT_TRUE(rec.has(gb::HOOK_Z, 1));
    EXPECT_FALSE(rec.has(gb::HOOK_Z, 2));
    EXPECT_FALSE(rec.has(gb::HOOK_Z, L));
    EXPECT_TRUE(rec.has(gb::HOOK_RESID_PRE, 1));
    EXPECT_FALSE(rec.has(gb::HOOK_PATTERN, 1)) << "only what was asked for";
    EXPECT_EQ(rec.resid(0), nullptr) << "resid_pre of layer 0 was not asked for";
    EXPECT_EQ(rec.resid(2), rec.get(gb::HOOK_RESID_PRE, 1)) << "point 2 is resid_pre of layer 1";
    EXPECT_EQ(rec.resid(1), nullptr);
    EXPECT_EQ(rec.resid(2 * L + 1), nullptr);
    EXPECT_EQ(rec.resid(-1), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------
TEST(HookNames, RoundTripAndUnknownNameListsThem) {
    std::string all;
    for (int p = 0; p < gb::HOOK_COUNT; p++) {
        const gb::hook_point hp = (gb::hook_point)p;
        EXPECT_EQ(gb::parse_hook_point(gb::hook_name(hp)), hp);
        all += std::string(p ? ", " : "") + gb::hook_name(hp);
    }
    EXPECT_STREQ(gb::hook_name(gb::HOOK_RESID_PRE), "resid_pre");
    EXPECT_STREQ(gb::hook_name(gb::HOOK_HEAD_OUT), "head_out");
    EXPECT_STREQ(gb::hook_name(gb::HOOK_LOGITS), "logits");
    EXPECT_STREQ(gb::hook_name(gb::HOOK_COUNT), "?");
    expect_gb_error([] { gb::parse_hook_point("attn_score"); }, "unknown hook point 'attn_score'");
    expect_gb_error([] { gb::parse_hook_point("Z"); }, "(expected one of " + all + ")");
    expect_gb_error([] { gb::parse_hook_point(""); }, "resid_pre, attn_in, q, k, v, pattern, z, head_out");
}
