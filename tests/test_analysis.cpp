// The analyses (logit lens, direct logit attribution, head scores, activation patching) vs independent double
// computations from the references' intermediates, on a tiny GPT-2 (LayerNorm) and a tiny grouped-query Llama
// (RMSNorm).
//
// Sections: helpers | logit lens | attribution | head scores | activation patching
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "analysis/attribution.h"
#include "analysis/head_scores.h"
#include "analysis/lens.h"
#include "analysis/patching.h"
#include "analysis/surprisal.h"
#include "ref_models.h"
#include "run/forward.h"
#include "test_util.h"
#include "util/error.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------
bool covers_all(const gb::ablation& ab, int L) {
    if (!ab.no_layernorm.on) return false;
    for (int l = 0; l < L; l++)
        if (!ab.no_layernorm.layers.empty() &&
            std::find(ab.no_layernorm.layers.begin(), ab.no_layernorm.layers.end(), l) == ab.no_layernorm.layers.end())
            return false;
    return true;
}

bool covers(const gb::layer_set& s, int l) {
    return s.on && (s.layers.empty() || std::find(s.layers.begin(), s.layers.end(), l) != s.layers.end());
}

// softmax in double
std::vector<double> softmax(const std::vector<double>& x) {
    const double mx = *std::max_element(x.begin(), x.end());
    std::vector<double> p(x.size());
    double s = 0;
    for (size_t i = 0; i < x.size(); i++) s += p[i] = std::exp(x[i] - mx);
    for (double& v : p) v /= s;
    return p;
}

// A record with the residual stream, z, mlp_out and the pattern at every layer, every position's logits.
gb::record run_record(const gb::model& m, const std::vector<int>& tokens, const gb::ablation& ab, bool all_logits = true) {
    gb::forward_options opt;
    opt.keep.points = gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT) | gb::hook_bit(gb::HOOK_PATTERN);
    opt.keep.resid_stream = true;
    opt.all_logits = all_logits;
    gb::record rec;
    gb::run_forward(rec, m, tokens, ab, opt);
    return rec;
}

std::vector<std::pair<std::string, gb::ablation>> analysis_ablations() {
    std::vector<std::pair<std::string, gb::ablation>> c(5);
    c[0].first = "none";
    c[1].first = "heads 1.2 0.0", c[1].second.heads = {{1, 2}, {0, 0}};
    c[2].first = "no-attention[1]", c[2].second.no_attention = layers_on({1});
    c[3].first = "no-layernorm[0]", c[3].second.no_layernorm = layers_on({0});
    c[4].first = "no-layernorm (identity final norm)", c[4].second.no_layernorm = layers_on({});
    return c;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Logit lens
// ---------------------------------------------------------------------------------------------
// Every point and position: softmax(final_norm(reference stream) . W_U) in double, through the identity final
// norm when no-layernorm covers every layer.
TEST(Lens, EveryPointAndPositionMatchesTheReference) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const int T = 9, K = 5, L = rm->m.config.n_layer, P = 2 * L + 1, V = rm->m.config.vocab_size;
            const auto tokens = rm->tokens(T, 12);
            for (const auto& [name, ab] : analysis_ablations())
                for (int target : {-1, 7}) {
                    const std::string what = rm->name + ", " + name + (target < 0 ? "" : ", target 7");
                    const gb::record rec = run_record(rm->m, tokens, ab);
                    const ref_trace ref = rm->reference(tokens, ab, {});
                    const bool identity = covers_all(ab, L);
                    const gb::lens_result lens = gb::logit_lens(rec, rm->m, ab, K, target);
                    ASSERT_TRUE(lens.complete);
                    ASSERT_EQ(lens.n_points, P);
                    ASSERT_EQ(lens.n_tokens, T);
                    ASSERT_EQ(lens.k, K);
                    ASSERT_EQ(lens.points, gb::resid_labels(L));
                    ASSERT_EQ(lens.top_ids.size(), (size_t)P * T * K);
                    ASSERT_EQ(lens.target_prob.size(), (size_t)P * T);
                    int exact_ids = 0, checked_ids = 0;
                    for (int p = 0; p < P; p++)
                        for (int t = 0; t < T; t++) {
                            const std::vector<double> lg = rm->readout.logits(ref.resid_at(p, t), identity);
                            const std::vector<double> prob = softmax(lg);
                            std::vector<int> order(V); // ids, most probable first
                            std::iota(order.begin(), order.end(), 0);
                            std::sort(order.begin(), order.end(), [&](int a, int b) { return lg[a] > lg[b]; });
                            std::vector<double> sorted(V);
                            for (int v = 0; v < V; v++) sorted[v] = prob[order[v]];
                            double lg_scale = 1;
                            for (double x : lg) lg_scale = std::max(lg_scale, std::abs(x));
                            const size_t o = ((size_t)p * T + t) * K;
                            for (int j = 0; j < K; j++) {
                                const int id = lens.top_ids[o + j];
                                ASSERT_GE(id, 0);
                                ASSERT_LT(id, V);
                                // the j-th probability, and the reported token really has it (ties may swap ids)
                                EXPECT_NEAR(lens.top_probs[o + j], sorted[j], 1e-4) << what << ": point " << p << " position " << t;
                                EXPECT_NEAR(prob[id], sorted[j], 1e-4) << what << ": point " << p << " position " << t;
                                // where the ranking is clear (logits apart by more than float rounding) the id is the
                                // reference's own
                                const double gap = std::min(j > 0 ? lg[order[j - 1]] - lg[order[j]] : INFINITY,
                                                            lg[order[j]] - lg[order[j + 1]]);
                                if (gap > 1e-3 * lg_scale) {
                                    checked_ids++;
                                    exact_ids += id == order[j];
                                }
                            }
                            const int tid = lens.target_ids[t];
                            if (target >= 0) {
                                EXPECT_EQ(tid, target);
                            } else if (p == P - 1) { // each position's final top-1
                                EXPECT_NEAR(prob[tid], sorted[0], 1e-4) << what << ": position " << t;
                            }
                            EXPECT_NEAR(lens.target_prob[(size_t)p * T + t], prob[tid], 1e-4) << what << ": point " << p;
                        }
                    EXPECT_EQ(exact_ids, checked_ids) << what;
                    EXPECT_GT(checked_ids, P * T * K / 2) << what << ": too few clear rankings to check ids";
                    // the last point is the model's own output: same ids, same probabilities as its logits
                    for (int t = 0; t < T; t++) {
                        const std::vector<double> own = softmax(std::vector<double>(rec.logits.begin() + (size_t)t * V,
                                                                                    rec.logits.begin() + (size_t)(t + 1) * V));
                        const size_t o = ((size_t)(P - 1) * T + t) * K;
                        for (int j = 0; j < K; j++) EXPECT_NEAR(lens.top_probs[o + j], own[lens.top_ids[o + j]], 1e-6) << what;
                        EXPECT_EQ(lens.top_ids[o], (int)(std::max_element(own.begin(), own.end()) - own.begin())) << what;
                    }
                }
        }
    });
}

// The identity final norm really is used with no-layernorm on every layer (the normal one would differ), and
// only then.
TEST(Lens, IdentityFinalNormOnlyWhenEveryLayerHasNone) {
    for (const ref_model* rm : ref_models()) {
        const int T = 5, L = rm->m.config.n_layer;
        const auto tokens = rm->tokens(T, 3);
        gb::ablation ab;
        ab.no_layernorm = layers_on({});
        const gb::record rec = run_record(rm->m, tokens, ab);
        const ref_trace ref = rm->reference(tokens, ab, {});
        const gb::lens_result lens = gb::logit_lens(rec, rm->m, ab, 1, 11);
        for (int p = 0; p <= 2 * L; p++) {
            const double with_norm = softmax(rm->readout.logits(ref.resid_at(p, T - 1), false))[11];
            const double without = softmax(rm->readout.logits(ref.resid_at(p, T - 1), true))[11];
            EXPECT_NEAR(lens.target_prob[(size_t)p * T + T - 1], without, 1e-4) << rm->name << " point " << p;
            if (std::abs(with_norm - without) > 1e-3) {
                EXPECT_GT(std::abs(lens.target_prob[(size_t)p * T + T - 1] - with_norm), 1e-4);
            }
        }
        // the same stream with an ablation that leaves one layer's norms: the final norm is the model's
        const gb::lens_result normed = gb::logit_lens(rec, rm->m, {}, 1, 11);
        const double with_norm = softmax(rm->readout.logits(ref.resid_at(0, 0), false))[11];
        EXPECT_NEAR(normed.target_prob[0], with_norm, 1e-4) << rm->name;
    }
}

// Choosing another target reuses the lens's normalisers: the same probabilities as a whole new lens, for targets
// inside and outside each cell's top-k, and back to the default (each position's final top-1).
TEST(Lens, RetargetEqualsAWholeNewLens) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const std::vector<int> tokens = rm->tokens(9, 21);
            for (const auto& [name, ab] : analysis_ablations()) {
                gb::record r = run_record(rm->m, tokens, ab);
                gb::lens_result l = gb::logit_lens(r, rm->m, ab, 3);
                const gb::lens_result first = l;
                for (int target : {tokens[4], 0, rm->m.config.vocab_size - 1, -1}) {
                    gb::lens_retarget(l, r, rm->m, ab, target);
                    gb::lens_result want = gb::logit_lens(r, rm->m, ab, 3, target);
                    ASSERT_EQ(l.target_ids, want.target_ids) << rm->name << " " << name << " target " << target;
                    for (size_t i = 0; i < want.target_prob.size(); i++)
                        ASSERT_NEAR(l.target_prob[i], want.target_prob[i], 2e-6 + 1e-5 * want.target_prob[i])
                            << rm->name << " " << name << " target " << target << " cell " << i;
                    EXPECT_EQ(l.top_ids, first.top_ids) << "the top-k do not depend on the target";
                }
            }
        }
    });
    const ref_model& rm = tiny_gpt2_ref();
    gb::record r = run_record(rm.m, rm.tokens(5, 2), {});
    gb::lens_result l = gb::logit_lens(r, rm.m, {}, 3);
    expect_gb_error([&] { gb::lens_retarget(l, r, rm.m, {}, rm.m.config.vocab_size); }, "outside the vocabulary");
}

TEST(Lens, ProgressStopsAndErrorsAreClear) {
    const ref_model& rm = tiny_gpt2_ref();
    const auto tokens = rm.tokens(6, 1);
    const gb::record rec = run_record(rm.m, tokens, {});
    std::vector<float> fractions;
    const gb::lens_result part = gb::logit_lens(rec, rm.m, {}, 3, -1, [&](float f) {
        fractions.push_back(f);
        return fractions.size() < 2;
    });
    EXPECT_FALSE(part.complete);
    ASSERT_EQ(fractions.size(), 2u);
    EXPECT_FLOAT_EQ(fractions[0], 1.0f / 7);
    EXPECT_FLOAT_EQ(fractions[1], 2.0f / 7);
    expect_gb_error([&] { gb::logit_lens(rec, rm.m, {}, 3, rm.m.config.vocab_size); }, "outside the vocabulary");
    gb::record bare;
    gb::run_forward(bare, rm.m, tokens);
    expect_gb_error([&] { gb::logit_lens(bare, rm.m, {}, 3); }, "needs the residual stream");
}

// ---------------------------------------------------------------------------------------------
// Direct logit attribution
// ---------------------------------------------------------------------------------------------
namespace {

// The attribution as attribution.h defines it, from the reference's head outputs, MLP outputs and stream:
// each component c contributes sum_i (c_i - mean c [LayerNorm]) / sigma * g_i * u_i with sigma the final norm's
// at the final stream, u = W_U[target] - W_U[contrast]; the final norm's bias adds sum_i b_i u_i.
gb::attribution reference_attribution(const ref_model& rm, const ref_trace& ref, const gb::ablation& ab, int target,
                                      int contrast, int pos) {
    const ref_readout& ro = rm.readout;
    const gb::model_config& c = rm.m.config;
    const int L = c.n_layer, H = c.n_head, d = c.d_model, V = c.vocab_size;
    const bool identity = covers_all(ab, L);
    std::vector<double> u(d);
    for (int i = 0; i < d; i++) u[i] = ro.unembed[(size_t)target * d + i] - (contrast >= 0 ? ro.unembed[(size_t)contrast * d + i] : 0.0);
    const double inv = identity ? 1.0 : ro.inv_sigma(ref.resid_at(2 * L, pos));
    auto share = [&](const double* comp) {
        double mean = 0;
        if (ro.layernorm && !identity) {
            for (int i = 0; i < d; i++) mean += comp[i];
            mean /= d;
        }
        double s = 0;
        for (int i = 0; i < d; i++) s += (comp[i] - mean) * (identity ? 1.0 : ro.g[i]) * u[i];
        return s * inv;
    };
    gb::attribution a;
    a.n_layer = L, a.n_head = H, a.position = pos, a.target = target, a.contrast = contrast;
    a.heads.assign((size_t)L * H, 0.0);
    a.attn_bias.assign(L, 0.0);
    a.mlp.assign(L, 0.0);
    a.embed = share(ref.resid_at(0, pos));
    if (!identity)
        for (int i = 0; i < d && !ro.b.empty(); i++) a.bias += ro.b[i] * u[i];
    for (int l = 0; l < L; l++) {
        a.mlp[l] = share(&ref.at(gb::HOOK_MLP_OUT, l)[(size_t)pos * d]);
        if (covers(ab.no_attention, l)) continue; // the sublayer wrote nothing
        for (int h = 0; h < H; h++) a.heads[(size_t)l * H + h] = share(&ref.at(gb::HOOK_HEAD_OUT, l)[((size_t)pos * H + h) * d]);
        if (!ro.b_o[l].empty()) a.attn_bias[l] = share(ro.b_o[l].data());
    }
    a.total = ref.logits[(size_t)pos * V + target] - (contrast >= 0 ? ref.logits[(size_t)pos * V + contrast] : 0.0);
    return a;
}

} // namespace

TEST(Attribution, ComponentsMatchTheReferenceAndSumToTheLogitDifference) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const int T = 9, L = rm->m.config.n_layer, H = rm->m.config.n_head;
            const auto tokens = rm->tokens(T, 31);
            for (const auto& [name, ab] : analysis_ablations())
                for (bool all_logits : {true, false})
                    for (int pos : {T - 1, 3})
                        for (int contrast : {40, -1}) {
                            const std::string what = rm->name + ", " + name + ", position " + std::to_string(pos) +
                                                     ", contrast " + std::to_string(contrast) +
                                                     (all_logits ? "" : ", last logits only");
                            const gb::record rec = run_record(rm->m, tokens, ab, all_logits);
                            const ref_trace ref = rm->reference(tokens, ab, {});
                            const int target = 25;
                            const gb::attribution got = gb::attribute(rec, rm->m, ab, target, contrast, pos);
                            const gb::attribution want = reference_attribution(*rm, ref, ab, target, contrast, pos);
                            // the reference's own components add up to its logit difference (the definition holds)
                            ASSERT_NEAR(want.sum(), want.total, 1e-9 * std::max(1.0, std::abs(want.total))) << what;
                            double scale = 1;
                            for (double v : want.heads) scale = std::max(scale, std::abs(v));
                            for (double v : want.mlp) scale = std::max(scale, std::abs(v));
                            scale = std::max({scale, std::abs(want.embed), std::abs(want.total)});
                            const double tol = 1e-4 * scale;
                            EXPECT_EQ(got.position, pos);
                            EXPECT_EQ(got.target, target);
                            EXPECT_EQ(got.contrast, contrast);
                            ASSERT_EQ(got.heads.size(), (size_t)L * H);
                            for (int l = 0; l < L; l++) {
                                for (int h = 0; h < H; h++)
                                    EXPECT_NEAR(got.heads[(size_t)l * H + h], want.heads[(size_t)l * H + h], tol)
                                        << what << ": head " << l << "." << h;
                                EXPECT_NEAR(got.attn_bias[l], want.attn_bias[l], tol) << what << ": attention bias " << l;
                                EXPECT_NEAR(got.mlp[l], want.mlp[l], tol) << what << ": mlp " << l;
                            }
                            EXPECT_NEAR(got.embed, want.embed, tol) << what << ": embeddings";
                            EXPECT_NEAR(got.bias, want.bias, tol) << what << ": final norm bias";
                            EXPECT_NEAR(got.total, want.total, tol) << what << ": total";
                            EXPECT_NEAR(got.sum(), got.total, tol) << what << ": the components add up";
                            // what ablations say about single components
                            for (const gb::head_ref& hr : ab.heads) EXPECT_EQ(got.heads[(size_t)hr.layer * H + hr.head], 0.0) << what;
                            for (int l = 0; l < L; l++)
                                if (covers(ab.no_attention, l)) {
                                    for (int h = 0; h < H; h++) EXPECT_EQ(got.heads[(size_t)l * H + h], 0.0) << what;
                                    EXPECT_EQ(got.attn_bias[l], 0.0) << what;
                                }
                        }
        }
    });
}

TEST(Attribution, RefusesWhatItCannotAttribute) {
    const ref_model& rm = tiny_llama_ref();
    const int T = 5, V = rm.m.config.vocab_size;
    const auto tokens = rm.tokens(T, 2);
    gb::ablation no_res;
    no_res.no_residual = layers_on({1});
    const gb::record rec = run_record(rm.m, tokens, no_res);
    expect_gb_error([&] { gb::attribute(rec, rm.m, no_res, 3, -1, T - 1); }, "no-residual replaces it");
    const gb::record ok = run_record(rm.m, tokens, {});
    expect_gb_error([&] { gb::attribute(ok, rm.m, {}, V, -1, T - 1); }, "target id " + std::to_string(V));
    expect_gb_error([&] { gb::attribute(ok, rm.m, {}, 3, V, T - 1); }, "contrast id");
    expect_gb_error([&] { gb::attribute(ok, rm.m, {}, 3, -1, T); }, "position 5 is outside the prompt (0..4)");
    gb::record bare;
    gb::run_forward(bare, rm.m, tokens);
    expect_gb_error([&] { gb::attribute(bare, rm.m, {}, 3, -1, T - 1); }, "did not keep them all (the memory budget left layers out");
}

// ---------------------------------------------------------------------------------------------
// Head scores
// ---------------------------------------------------------------------------------------------
namespace {

// The formulas of head_scores.h, naively from the reference's patterns A[i][j] (double).
std::vector<double> reference_scores(const ref_trace& ref, const std::vector<int>& tokens, int L, int H, int kind) {
    const int T = (int)tokens.size();
    std::vector<double> out((size_t)L * H, NAN);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            auto A = [&](int i, int j) { return ref.at(gb::HOOK_PATTERN, l)[((size_t)h * T + i) * T + j]; };
            double sum = 0;
            int count = 0;
            for (int i = 0; i < T; i++) {
                switch (kind) {
                case gb::SCORE_PREV_TOKEN:
                    if (i >= 1) sum += A(i, i - 1), count++;
                    break;
                case gb::SCORE_FIRST_TOKEN: sum += A(i, 0), count++; break;
                case gb::SCORE_ENTROPY: {
                    double e = 0;
                    for (int j = 0; j <= i; j++)
                        if (A(i, j) > 0) e -= A(i, j) * std::log(A(i, j));
                    sum += e, count++;
                    break;
                }
                default: { // induction, duplicate_token: the most recent earlier occurrence j, with j + 1 < i
                    int j = -1;
                    for (int k = 0; k < i; k++)
                        if (tokens[k] == tokens[i]) j = k;
                    if (j < 0 || j + 1 >= i) break;
                    sum += kind == gb::SCORE_INDUCTION ? A(i, j + 1) : A(i, j);
                    count++;
                }
                }
            }
            if (count) out[(size_t)l * H + h] = sum / count;
        }
    return out;
}

} // namespace

TEST(HeadScores, EachScoreIsItsFormulaOnTheReferencePatterns) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const gb::model_config& c = rm->m.config;
            const int L = c.n_layer, H = c.n_head;
            // distinct tokens (no repeats), a repeated random sequence after BOS, and one with an adjacent repeat
            std::vector<int> distinct(10);
            std::iota(distinct.begin(), distinct.end(), 40);
            const std::vector<int> repeated = gb::repeated_random_tokens(rm->m.tok, c.vocab_size, 7, 5, true);
            const std::vector<int> adjacent = {50, 61, 61, 72, 50, 83};
            for (const auto& tokens : {distinct, repeated, adjacent})
                for (bool ablate : {false, true}) {
                    gb::ablation ab;
                    if (ablate) ab.heads = {{0, 1}, {1, 3}};
                    const gb::record rec = run_record(rm->m, tokens, ab);
                    const ref_trace ref = rm->reference(tokens, ab, {});
                    const gb::head_scores s = gb::score_heads(rec);
                    ASSERT_EQ(s.n_layer, L);
                    ASSERT_EQ(s.n_head, H);
                    const std::string what = rm->name + ", " + std::to_string(tokens.size()) + " tokens" + (ablate ? ", ablated" : "");
                    for (int k = 0; k < gb::SCORE_COUNT; k++) {
                        const std::vector<double> want = reference_scores(ref, tokens, L, H, k);
                        ASSERT_EQ(s.score[k].size(), want.size());
                        for (int l = 0; l < L; l++)
                            for (int h = 0; h < H; h++) {
                                const float got = s.at((gb::head_score_kind)k, l, h);
                                const double w = want[(size_t)l * H + h];
                                if (std::isnan(w)) {
                                    EXPECT_TRUE(std::isnan(got)) << what << ": " << gb::head_score_name((gb::head_score_kind)k);
                                } else {
                                    EXPECT_NEAR(got, w, 1e-4 * std::max(1.0, std::abs(w)))
                                        << what << ": " << gb::head_score_name((gb::head_score_kind)k) << " of " << l << "." << h;
                                }
                            }
                    }
                }
            // how many positions induction averages over
            EXPECT_EQ(gb::score_heads(run_record(rm->m, distinct, {})).n_induction_positions, 0);
            EXPECT_EQ(gb::score_heads(run_record(rm->m, repeated, {})).n_induction_positions, 7);
            EXPECT_EQ(gb::score_heads(run_record(rm->m, adjacent, {})).n_induction_positions, 1) << "61 61 is too close";
            EXPECT_TRUE(std::isnan(gb::score_heads(run_record(rm->m, distinct, {})).at(gb::SCORE_INDUCTION, 0, 0)));
        }
    });
}

TEST(HeadScores, LayersWithoutPatternAreNaN) {
    const ref_model& rm = tiny_gpt2_ref();
    gb::forward_options opt;
    opt.keep.layers = {1, 0, 1};
    gb::record rec;
    gb::run_forward(rec, rm.m, rm.tokens(6, 1), {}, opt);
    const gb::head_scores s = gb::score_heads(rec);
    for (int k = 0; k < gb::SCORE_COUNT; k++)
        for (int h = 0; h < rm.m.config.n_head; h++) EXPECT_TRUE(std::isnan(s.at((gb::head_score_kind)k, 1, h)));
    EXPECT_FALSE(std::isnan(s.at(gb::SCORE_ENTROPY, 0, 0)));
    EXPECT_FALSE(std::isnan(s.at(gb::SCORE_PREV_TOKEN, 2, 3)));
    // one token: no previous position
    gb::record one;
    gb::run_forward(one, rm.m, {5});
    const gb::head_scores s1 = gb::score_heads(one);
    EXPECT_TRUE(std::isnan(s1.at(gb::SCORE_PREV_TOKEN, 0, 0)));
    EXPECT_FLOAT_EQ(s1.at(gb::SCORE_FIRST_TOKEN, 0, 0), 1.0f);
    EXPECT_FLOAT_EQ(s1.at(gb::SCORE_ENTROPY, 0, 0), 0.0f);
}

TEST(HeadScores, RepeatedRandomTokens) {
    for (const ref_model* rm : ref_models()) {
        const gb::tokenizer& tok = rm->m.tok;
        const int V = rm->m.config.vocab_size;
        ASSERT_GE(tok.bos_id, 0);
        std::set<int> special{tok.bos_id, tok.eos_id};
        for (const std::string& sp : tok.specials) special.insert(tok.ids.at(sp));
        for (bool bos : {false, true}) {
            const std::vector<int> a = gb::repeated_random_tokens(tok, V, 300, 9, bos);
            EXPECT_EQ(a, gb::repeated_random_tokens(tok, V, 300, 9, bos)) << "deterministic for a seed";
            EXPECT_NE(a, gb::repeated_random_tokens(tok, V, 300, 10, bos)) << "another seed, other tokens";
            ASSERT_EQ(a.size(), 600u + bos);
            if (bos) {
                EXPECT_EQ(a[0], tok.bos_id);
            }
            const std::vector<int> half(a.begin() + bos, a.begin() + bos + 300);
            EXPECT_EQ(std::vector<int>(a.begin() + bos + 300, a.end()), half) << "the second half repeats the first";
            for (int id : half) {
                EXPECT_GE(id, 0);
                EXPECT_LT(id, V);
                EXPECT_EQ(special.count(id), 0u) << rm->name << ": special token " << id << " drawn";
            }
            EXPECT_GT(std::set<int>(half.begin(), half.end()).size(), 100u) << "spread over the vocabulary";
        }
    }
    // the same ids on every platform: pinned for one seed (std::mt19937_64, rng() % V)
    const ref_model& g = tiny_gpt2_ref();
    std::mt19937_64 rng(3);
    std::vector<int> want;
    while (want.size() < 4) {
        const int id = (int)(rng() % (uint64_t)g.m.config.vocab_size);
        if (id != g.m.tok.bos_id && id != g.m.tok.eos_id) want.push_back(id);
    }
    const std::vector<int> got = gb::repeated_random_tokens(g.m.tok, g.m.config.vocab_size, 4, 3, false);
    EXPECT_EQ(std::vector<int>(got.begin(), got.begin() + 4), want);
    expect_gb_error([&] { gb::repeated_random_tokens(g.m.tok, g.m.config.vocab_size, 0, 1, false); }, "at least 1 token");
}

// ---------------------------------------------------------------------------------------------
// Activation patching
// ---------------------------------------------------------------------------------------------
TEST(Patching, EveryPatchEqualsTheReferenceRunWithThatPatch) {
    for_each_matmul([] {
        for (const ref_model* rm : ref_models()) {
            const gb::model_config& c = rm->m.config;
            const int T = 7, L = c.n_layer, H = c.n_head, d = c.d_model, dh = c.d_head, V = c.vocab_size, P = 2 * L + 1;
            const int changed = 2;
            const std::vector<int> clean = rm->tokens(T, 17);
            std::vector<int> corrupt = clean;
            corrupt[changed] = clean[changed] == 100 ? 101 : 100;
            for (bool ablate : {false, true}) {
                gb::patch_options po;
                if (ablate) po.ab.heads = {{2, 1}}, po.ab.no_layernorm = layers_on({0});
                const ref_trace rc = rm->reference(clean, po.ab, {}), rx = rm->reference(corrupt, po.ab, {});
                // target: the clean run's top token at the last position; contrast: the corrupt run's (or the runner-up)
                const double* lc = &rc.logits[(size_t)(T - 1) * V];
                const double* lx = &rx.logits[(size_t)(T - 1) * V];
                const int target = (int)(std::max_element(lc, lc + V) - lc);
                int contrast = (int)(std::max_element(lx, lx + V) - lx);
                if (contrast == target) contrast = (target + 1) % V;
                auto metric = [&](const ref_trace& r) {
                    return r.logits[(size_t)(T - 1) * V + target] - r.logits[(size_t)(T - 1) * V + contrast];
                };
                const gb::patch_result out = gb::activation_patching(rm->m, clean, corrupt, target, contrast, po);
                const std::string what = rm->name + (ablate ? ", ablated" : "");
                const double tol = 1e-4 * std::max({1.0, std::abs(metric(rc)), std::abs(metric(rx))});
                ASSERT_TRUE(out.complete);
                EXPECT_EQ(out.n_layer, L);
                EXPECT_EQ(out.n_head, H);
                EXPECT_EQ(out.n_tokens, T);
                EXPECT_NEAR(out.clean, metric(rc), tol) << what;
                EXPECT_NEAR(out.corrupt, metric(rx), tol) << what;
                ASSERT_GT(std::abs(metric(rc) - metric(rx)), 0.1) << what << ": the prompts must differ in the metric";
                ASSERT_EQ(out.resid.size(), (size_t)P * T);
                ASSERT_EQ(out.heads.size(), (size_t)L * H);
                int differ = 0; // patches where the clean and corrupt activations differ: the runs the analysis computes
                for (int p = 0; p < P; p++)
                    for (int t = 0; t < T; t++) {
                        ref_options ro;
                        ro.resid_patches.push_back({p, t, std::vector<double>(rc.resid_at(p, t), rc.resid_at(p, t) + d)});
                        const double want = metric(rm->reference(corrupt, po.ab, ro));
                        EXPECT_NEAR(out.resid[(size_t)p * T + t], want, tol) << what << ": resid point " << p << " position " << t;
                        // after an MLP the patch shares the run after its attention (the MLP is per position)
                        if (p == 0 || p % 2) differ += !std::equal(rc.resid_at(p, t), rc.resid_at(p, t) + d, rx.resid_at(p, t));
                        if (t < changed) { // the prompts agree up to here: nothing to patch
                            EXPECT_EQ(out.resid[(size_t)p * T + t], (float)out.corrupt) << what;
                        }
                    }
                for (int l = 0; l < L; l++)
                    for (int h = 0; h < H; h++) {
                        ref_options ro;
                        ref_z_patch zp{l, h, std::vector<double>((size_t)T * dh)};
                        for (int t = 0; t < T; t++)
                            for (int e = 0; e < dh; e++) zp.values[(size_t)t * dh + e] = rc.at(gb::HOOK_Z, l)[((size_t)t * H + h) * dh + e];
                        ro.z_patches.push_back(zp);
                        const double want = metric(rm->reference(corrupt, po.ab, ro));
                        EXPECT_NEAR(out.heads[(size_t)l * H + h], want, tol) << what << ": head " << l << "." << h;
                        bool same = true;
                        for (int i = 0; i < T * H * dh; i++)
                            if ((i / dh) % H == h) same = same && rc.at(gb::HOOK_Z, l)[i] == rx.at(gb::HOOK_Z, l)[i];
                        differ += !same;
                    }
                EXPECT_EQ(out.runs, differ) << what << ": one run per patch that changes something";
                // normalized = (patched - corrupt) / (clean - corrupt), from the result's own numbers
                const double span = out.clean - out.corrupt;
                for (size_t i = 0; i < out.resid.size(); i++)
                    EXPECT_NEAR(out.resid_normalized[i], (out.resid[i] - out.corrupt) / span, 1e-5) << what;
                for (size_t i = 0; i < out.heads.size(); i++)
                    EXPECT_NEAR(out.heads_normalized[i], (out.heads[i] - out.corrupt) / span, 1e-5) << what;
                // the differing token's embedding gives the clean run back, and so does the whole final stream at the
                // last position; the final stream elsewhere changes nothing at the last position
                EXPECT_NEAR(out.resid_normalized[changed], 1.0, 1e-3) << what;
                EXPECT_NEAR(out.resid_normalized[(size_t)(P - 1) * T + T - 1], 1.0, 1e-4) << what;
                for (int t = 0; t < T - 1; t++) EXPECT_NEAR(out.resid_normalized[(size_t)(P - 1) * T + t], 0.0, 1e-4) << what;
                // so does the stream after the last attention at the last position (only the MLP, per position, follows)
                EXPECT_NEAR(out.resid_normalized[(size_t)(P - 2) * T + T - 1], 1.0, 1e-3) << what;
            }
        }
    });
}

TEST(Patching, ErrorsProgressAndChoices) {
    const ref_model& rm = tiny_gpt2_ref();
    const int T = 6, L = rm.m.config.n_layer, H = rm.m.config.n_head, P = 2 * L + 1, V = rm.m.config.vocab_size;
    const std::vector<int> clean = rm.tokens(T, 3);
    std::vector<int> corrupt = clean;
    corrupt[1] = (clean[1] + 1) % V;
    std::vector<int> shorter(clean.begin(), clean.end() - 1);
    expect_gb_error([&] { gb::activation_patching(rm.m, clean, shorter, 5, -1, {}); },
                    "the clean prompt has 6 tokens and the corrupted one 5: patching needs prompts of the same length");
    expect_gb_error([&] { gb::activation_patching(rm.m, clean, {}, 5, -1, {}); }, "non-empty");
    expect_gb_error([&] { gb::activation_patching(rm.m, clean, corrupt, V, -1, {}); }, "target id");
    expect_gb_error([&] { gb::activation_patching(rm.m, clean, corrupt, 5, V, {}); }, "contrast id");
    // progress: fractions rise; false stops, the rest stays NaN
    std::vector<float> fractions;
    const gb::patch_result part = gb::activation_patching(rm.m, clean, corrupt, 5, 9, {}, [&](float f) {
        fractions.push_back(f);
        return fractions.size() < 10;
    });
    EXPECT_FALSE(part.complete);
    ASSERT_EQ(fractions.size(), 10u);
    for (size_t i = 0; i < fractions.size(); i++) EXPECT_FLOAT_EQ(fractions[i], (float)(i + 1) / (P * T + L * H));
    ASSERT_EQ(part.resid.size(), (size_t)P * T);
    for (size_t i = 0; i < part.resid.size(); i++) EXPECT_EQ(std::isnan(part.resid[i]), i >= 10) << i;
    for (float v : part.heads) EXPECT_TRUE(std::isnan(v));
    // a full run calls progress once per patch and ends at 1
    fractions.clear();
    const gb::patch_result full = gb::activation_patching(rm.m, clean, corrupt, 5, 9, {}, [&](float f) {
        fractions.push_back(f);
        return true;
    });
    EXPECT_TRUE(full.complete);
    EXPECT_EQ(fractions.size(), (size_t)(P * T + L * H));
    EXPECT_FLOAT_EQ(fractions.back(), 1.0f);
    for (size_t i = 0; i < 10; i++) EXPECT_EQ(part.resid[i], full.resid[i]) << "the stopped run's values are the full run's";
    // only the heads, or only the stream; contrast -1 is logit(target) alone
    gb::patch_options heads_only;
    heads_only.resid = false;
    const gb::patch_result h = gb::activation_patching(rm.m, clean, corrupt, 5, 9, heads_only);
    EXPECT_TRUE(h.resid.empty());
    ASSERT_EQ(h.heads.size(), (size_t)L * H);
    for (int i = 0; i < L * H; i++) EXPECT_NEAR(h.heads[i], full.heads[i], 1e-5);
    gb::patch_options resid_only;
    resid_only.heads = false;
    const gb::patch_result alone = gb::activation_patching(rm.m, clean, corrupt, 5, -1, resid_only);
    EXPECT_TRUE(alone.heads.empty());
    const ref_trace rc = rm.reference(clean, {}, {});
    EXPECT_NEAR(alone.clean, rc.logits[(size_t)(T - 1) * V + 5], 1e-4 * std::max(1.0, std::abs(alone.clean)));
    // identical prompts: nothing differs, no run, normalized undefined
    const gb::patch_result same = gb::activation_patching(rm.m, clean, clean, 5, 9, {});
    EXPECT_EQ(same.runs, 0);
    EXPECT_EQ(same.clean, same.corrupt);
    for (float v : same.resid_normalized) EXPECT_TRUE(std::isnan(v));
}

// ---------------------------------------------------------------------------------------------
// Surprisal: each token's -log softmax at the position before it, against the reference's logits in double
// ---------------------------------------------------------------------------------------------
TEST(Surprisal, EqualsMinusLogSoftmaxOfTheReference) {
    for (const ref_model* rm : ref_models()) {
        const int T = 10, V = rm->m.config.vocab_size;
        const auto tokens = rm->tokens(T, 21);
        const gb::record rec = run_record(rm->m, tokens, {});
        const ref_trace ref = rm->reference(tokens, {}, {});
        const gb::surprisal_result s = gb::surprisal(rec, rm->m.tok);
        ASSERT_EQ(s.n_tokens, T);
        EXPECT_TRUE(std::isnan(s.nats[0])) << "nothing predicts the first token";
        EXPECT_EQ(s.top_ids[0], -1);
        double total = 0;
        size_t bytes = 0;
        for (int t = 1; t < T; t++) {
            const std::vector<double> lg(ref.logits.begin() + (size_t)(t - 1) * V, ref.logits.begin() + (size_t)t * V);
            const std::vector<double> p = softmax(lg);
            const double want = -std::log(p[tokens[t]]);
            EXPECT_NEAR(s.nats[t], want, 1e-4 * std::max(1.0, want)) << rm->name << " token " << t;
            EXPECT_EQ(s.top_ids[t], (int)(std::max_element(p.begin(), p.end()) - p.begin())) << rm->name << " " << t;
            total += want;
            bytes += gb::token_bytes(rm->m.tok, tokens[t]).size();
        }
        EXPECT_EQ(s.scored, T - 1);
        EXPECT_NEAR(s.mean_nats, total / (T - 1), 1e-4);
        EXPECT_NEAR(s.bits_per_byte, total / std::log(2.0) / (double)bytes, 1e-4);
        // a run with only the last position's logits cannot give it
        const gb::record last = run_record(rm->m, tokens, {}, false);
        expect_gb_error([&] { gb::surprisal(last, rm->m.tok); }, "needs every position's logits");
    }
}

// The app's surprisal: from the last residual point through the final norm and the LM head of a run that kept
// only the last position's logits; equal to the one from every position's logits, with an ablation that makes the
// final norm the identity too; the rows an earlier result shares are taken from it, the rest computed.
TEST(Surprisal, FromTheStreamEqualsFromEveryPositionsLogits) {
    for (const ref_model* rm : ref_models()) {
        const int T = 9;
        const auto tokens = rm->tokens(T, 22);
        gb::ablation no_ln;
        no_ln.no_layernorm.on = true;
        for (const gb::ablation& ab : {gb::ablation{}, no_ln}) {
            gb::record last;
            gb::forward_options o;
            o.keep.resid_stream = true;
            gb::run_forward(last, rm->m, tokens, ab, o);
            const gb::surprisal_result want = gb::surprisal(run_record(rm->m, tokens, ab), rm->m.tok);
            const gb::surprisal_result got = gb::surprisal_from_stream(last, rm->m, ab);
            for (int t = 1; t < T; t++) {
                EXPECT_NEAR(got.nats[t], want.nats[t], 1e-4 * std::max(1.0, want.nats[t])) << rm->name << " token " << t;
                EXPECT_EQ(got.top_ids[t], want.top_ids[t]) << rm->name << " token " << t;
            }
            EXPECT_NEAR(got.mean_nats, want.mean_nats, 1e-4) << rm->name;
            EXPECT_NEAR(got.bits_per_byte, want.bits_per_byte, 1e-4) << rm->name;
            // an earlier result sharing rows [0, 4): its entries below 4 are kept (a marked one shows it), the rest new
            gb::surprisal_result before = got;
            before.nats[2] = 123.0;
            before.nats[5] = 456.0;
            const gb::surprisal_result part = gb::surprisal_from_stream(last, rm->m, ab, &before, 4);
            EXPECT_EQ(part.nats[2], 123.0) << "kept from the earlier result";
            EXPECT_NEAR(part.nats[5], want.nats[5], 1e-4 * std::max(1.0, want.nats[5])) << "computed again";
        }
        gb::record no_stream;
        gb::run_forward(no_stream, rm->m, tokens);
        expect_gb_error([&] { gb::surprisal_from_stream(no_stream, rm->m, {}); }, "memory budget left it out");
    }
}
