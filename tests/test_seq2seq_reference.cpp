// The encoder-decoder reference (tiny_seq2seq.h) checked on its own, before any core forward exists to compare
// it with: properties a wrong reference would break (causality, the source reaching the logits only through
// cross-attention, Marian's sinusoid layout, Pre-LN vs Post-LN structure, softmax rows), the HF names and config
// the writer produces, and one model small enough (d = 2) to compute by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/safetensors.h"
#include "test_util.h"
#include "tiny_model.h" // test_temp_dir
#include "tiny_seq2seq.h"
#include "tokenizer/tokenizer.h"

namespace {

using vec = std::vector<double>;

const std::vector<std::string> seq2seq_families = {"bart", "mbart", "marian"};

tiny_seq2seq write_family(const std::string& family, uint32_t seed = 1) {
    seq2seq_spec s;
    s.family = family;
    s.seed = seed;
    return write_tiny_seq2seq(test_temp_dir("s2s_" + family + "_" + std::to_string(seed)), s);
}

// the decoder's input as HF builds it: decoder_start_token_id first
std::vector<int> decoder_ids(const tiny_seq2seq& m, int n, uint32_t seed) {
    std::vector<int> ids = random_tokens(n - 1, m.spec.vocab, seed);
    ids.insert(ids.begin(), m.decoder_start_id);
    return ids;
}

double max_abs_gap(const double* a, const double* b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e = std::max(e, std::fabs(a[i] - b[i]));
    return e;
}
double max_abs_gap(const vec& a, const vec& b) {
    EXPECT_EQ(a.size(), b.size());
    return a.size() == b.size() ? max_abs_gap(a.data(), b.data(), a.size()) : INFINITY;
}
bool all_finite(const vec& v) {
    for (double x : v)
        if (!std::isfinite(x)) return false;
    return true;
}

// LayerNorm of one row [d] without gain and bias (to undo one with its gain and bias first)
void expect_layernorm_rows(const vec& x, const std::vector<float>& g, const std::vector<float>& b, int n, int d,
                           const std::string& label) {
    for (int t = 0; t < n; t++) {
        double mean = 0, ms = 0;
        for (int i = 0; i < d; i++) mean += (x[(size_t)t * d + i] - b[i]) / g[i];
        mean /= d;
        for (int i = 0; i < d; i++) {
            const double u = (x[(size_t)t * d + i] - b[i]) / g[i];
            ms += u * u;
        }
        ms /= d;
        EXPECT_NEAR(mean, 0.0, 1e-9) << label << " row " << t;
        EXPECT_NEAR(ms, 1.0, 1e-3) << label << " row " << t; // var / (var + eps)
    }
}

// the rows of x [n][d] are outputs of m's LayerNorm `norm` (its ".weight" and ".bias")
void expect_normed_by(const tiny_seq2seq& m, const vec& x, const std::string& norm, int n, const std::string& label) {
    expect_layernorm_rows(x, m.at(norm + ".weight"), m.at(norm + ".bias"), n, m.spec.d_model, label);
}

} // namespace

// (1) Logits at target position t read only targets 0..t, and every position reads the source.
TEST(Seq2seqReference, DecoderIsCausalAndEveryPositionReadsTheSource) {
    for (const std::string& fam : seq2seq_families) {
        const tiny_seq2seq m = write_family(fam);
        const int V = m.spec.vocab, T = 6;
        const std::vector<int> src = random_tokens(7, V, 11), tgt = decoder_ids(m, T, 12);
        const ref_seq2seq base = reference_seq2seq(m, src, tgt, {});
        ASSERT_EQ(base.logits.size(), (size_t)T * V) << fam;
        ASSERT_TRUE(all_finite(base.logits)) << fam;
        for (int t0 = 1; t0 < T; t0++) {
            std::vector<int> tgt2 = tgt;
            tgt2[t0] = (tgt2[t0] + 1) % V;
            const ref_seq2seq r = reference_seq2seq(m, src, tgt2, {});
            for (int t = 0; t < t0; t++)
                EXPECT_EQ(max_abs_gap(&r.logits[(size_t)t * V], &base.logits[(size_t)t * V], V), 0.0)
                    << fam << ": position " << t << " saw the target at " << t0;
            EXPECT_GT(max_abs_gap(&r.logits[(size_t)t0 * V], &base.logits[(size_t)t0 * V], V), 1e-3)
                << fam << ": position " << t0 << " did not see its own token";
        }
        std::vector<int> src2 = src;
        src2[3] = (src2[3] + 5) % V;
        const ref_seq2seq r = reference_seq2seq(m, src2, tgt, {});
        for (int t = 0; t < T; t++)
            EXPECT_GT(max_abs_gap(&r.logits[(size_t)t * V], &base.logits[(size_t)t * V], V), 1e-4)
                << fam << ": position " << t << " did not see the source";
        // the self-attention pattern: zero above the diagonal, rows summing to 1
        const int H = m.spec.n_head;
        for (int l = 0; l < m.spec.dec_layers; l++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    double sum = 0;
                    for (int j = 0; j < T; j++) {
                        const double p = base.decoder.attention[(((size_t)l * H + h) * T + t) * T + j];
                        if (j > t) {
                            EXPECT_EQ(p, 0.0) << fam;
                        }
                        sum += p;
                    }
                    EXPECT_NEAR(sum, 1.0, 1e-12) << fam;
                }
    }
}

// (2) Marian's positions: sin in the first half of the dimensions, cos in the second, not interleaved; at row t
// (no offset); added to the token embedding times sqrt(d); not stored unless asked for.
TEST(Seq2seqReference, MarianPositionsAreSinThenCosHalves) {
    seq2seq_spec s;
    s.family = "marian";
    const tiny_seq2seq m = write_tiny_seq2seq(test_temp_dir("s2s_marian_pos"), s);
    const int d = s.d_model, n = s.n_pos;
    ASSERT_TRUE(m.scale_embedding) << "Marian scales its embeddings by default";
    const std::vector<int> src = random_tokens(n, s.vocab, 3), tgt = random_tokens(n, s.vocab, 4);
    const ref_seq2seq r = reference_seq2seq(m, src, tgt, {});
    const std::vector<float>& E = m.at("model.shared.weight");
    for (const auto& [trace, ids] : {std::make_pair(&r.encoder, &src), std::make_pair(&r.decoder, &tgt)}) {
        const vec& x = trace->at(gb::HOOK_RESID_PRE, 0);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < d; i++) {
                const int k = i % (d / 2); // column i and i + d/2 share frequency 10000^(-2k/d)
                const double theta = t * std::exp(-std::log(10000.0) * 2.0 * k / d);
                const double want = i < d / 2 ? std::sin(theta) : std::cos(theta);
                const double pos = x[(size_t)t * d + i] - std::sqrt((double)d) * E[(size_t)(*ids)[t] * d + i];
                ASSERT_NEAR(pos, want, 1e-12) << "t " << t << " column " << i;
            }
    }
    // spot values an interleaved table would get wrong
    const vec p = marian_positions(n, d);
    EXPECT_EQ(p[0], 0.0);
    EXPECT_EQ(p[d / 2], 1.0);
    EXPECT_NEAR(p[(size_t)d + 1], std::sin(std::pow(10000.0, -2.0 / d)), 1e-15);
    EXPECT_NEAR(p[(size_t)d + d / 2], std::cos(1.0), 1e-15);
    // MarianMTModel does not save the tables; an older conversion's stored float32 table is the same one
    const gb::safetensors_file f = gb::open_safetensors(m.dir + "/model.safetensors");
    EXPECT_EQ(f.tensors.count("model.encoder.embed_positions.weight"), 0u);
    EXPECT_EQ(f.tensors.count("model.decoder.embed_positions.weight"), 0u);
    s.marian_positions_stored = true;
    const tiny_seq2seq m2 = write_tiny_seq2seq(test_temp_dir("s2s_marian_pos_stored"), s);
    const gb::safetensors_file f2 = gb::open_safetensors(m2.dir + "/model.safetensors");
    for (const char* name : {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}) {
        ASSERT_EQ(f2.tensors.count(name), 1u) << name;
        const std::vector<float> stored = gb::tensor_f32(f2, f2.tensors.at(name), {n, d});
        for (size_t i = 0; i < stored.size(); i++) ASSERT_NEAR(stored[i], p[i], 1e-7) << name << " " << i;
    }
}

// (3) Post-LN (BART, Marian) leaves every stream point a LayerNorm output; Pre-LN (mBART) adds each sublayer to
// the stream and norms only at the end; the same weights read the other way give other logits.
TEST(Seq2seqReference, PostLnNormsEverySumAndPreLnAddsThem) {
    for (const std::string& fam : seq2seq_families) {
        const tiny_seq2seq m = write_family(fam, 5);
        const int d = m.spec.d_model, S = 6, T = 5;
        const std::vector<int> src = random_tokens(S, m.spec.vocab, 21), tgt = decoder_ids(m, T, 22);
        const ref_seq2seq r = reference_seq2seq(m, src, tgt, {});
        for (int l = 0; l < m.spec.dec_layers; l++) {
            const std::string p = "model.decoder.layers." + std::to_string(l) + ".";
            const std::string label = fam + " decoder layer " + std::to_string(l);
            const vec& mid = r.decoder.at(gb::HOOK_RESID_MID, l);
            const vec& post = r.decoder.at(gb::HOOK_RESID_POST, l);
            const vec cross(r.cross.resid.begin() + (size_t)l * T * d, r.cross.resid.begin() + (size_t)(l + 1) * T * d);
            if (!m.pre_ln) {
                expect_normed_by(m, mid, p + "self_attn_layer_norm", T, label + " resid_mid");
                expect_normed_by(m, cross, p + "encoder_attn_layer_norm", T, label + " cross");
                expect_normed_by(m, post, p + "final_layer_norm", T, label + " resid_post");
                EXPECT_EQ(r.decoder.at(gb::HOOK_MLP_IN, l), cross) << label;
                EXPECT_EQ(r.cross.attn_in[l], mid) << label;
            } else {
                const vec& pre = r.decoder.at(gb::HOOK_RESID_PRE, l);
                const vec& a = r.decoder.at(gb::HOOK_ATTN_OUT, l);
                const vec& o = r.decoder.at(gb::HOOK_MLP_OUT, l);
                for (size_t i = 0; i < mid.size(); i++) {
                    ASSERT_NEAR(mid[i], pre[i] + a[i], 1e-12) << label;
                    ASSERT_NEAR(cross[i], mid[i] + r.cross.attn_out[l][i], 1e-12) << label;
                    ASSERT_NEAR(post[i], cross[i] + o[i], 1e-12) << label;
                }
                expect_normed_by(m, r.decoder.at(gb::HOOK_ATTN_IN, l), p + "self_attn_layer_norm", T, label + " attn_in");
                expect_normed_by(m, r.cross.attn_in[l], p + "encoder_attn_layer_norm", T, label + " cross attn_in");
                expect_normed_by(m, r.decoder.at(gb::HOOK_MLP_IN, l), p + "final_layer_norm", T, label + " mlp_in");
            }
        }
        for (int l = 0; l < m.spec.enc_layers; l++) {
            const std::string p = "model.encoder.layers." + std::to_string(l) + ".";
            const std::string label = fam + " encoder layer " + std::to_string(l);
            const vec& mid = r.encoder.at(gb::HOOK_RESID_MID, l);
            const vec& post = r.encoder.at(gb::HOOK_RESID_POST, l);
            if (!m.pre_ln) {
                expect_normed_by(m, mid, p + "self_attn_layer_norm", S, label + " resid_mid");
                expect_normed_by(m, post, p + "final_layer_norm", S, label + " resid_post");
            } else {
                const vec& pre = r.encoder.at(gb::HOOK_RESID_PRE, l);
                const vec& a = r.encoder.at(gb::HOOK_ATTN_OUT, l);
                const vec& o = r.encoder.at(gb::HOOK_MLP_OUT, l);
                for (size_t i = 0; i < mid.size(); i++) {
                    ASSERT_NEAR(mid[i], pre[i] + a[i], 1e-12) << label;
                    ASSERT_NEAR(post[i], mid[i] + o[i], 1e-12) << label;
                }
                expect_normed_by(m, r.encoder.at(gb::HOOK_ATTN_IN, l), p + "self_attn_layer_norm", S, label + " attn_in");
            }
        }
        const vec& enc_out = r.encoder.at(gb::HOOK_FINAL_NORM, m.spec.enc_layers);
        if (m.pre_ln) expect_normed_by(m, enc_out, "model.encoder.layer_norm", S, fam + " encoder output");
        else EXPECT_EQ(enc_out, r.encoder.at(gb::HOOK_RESID_POST, m.spec.enc_layers - 1)) << fam;
        const vec& final_norm = r.decoder.at(gb::HOOK_FINAL_NORM, m.spec.dec_layers);
        const vec& last = r.decoder.at(gb::HOOK_RESID_POST, m.spec.dec_layers - 1);
        if (m.pre_ln) expect_normed_by(m, final_norm, "model.decoder.layer_norm", T, fam + " final");
        else EXPECT_EQ(final_norm, last) << fam << ": no final norm after a Post-LN stack";
        // the same tensors as the other layout (mBART's extra layer_norm then unused)
        tiny_seq2seq other = m;
        other.pre_ln = !m.pre_ln;
        if (!m.pre_ln)
            for (const char* stack : {"encoder", "decoder"}) {
                other.w[std::string("model.") + stack + ".layer_norm.weight"] = std::vector<float>(d, 1.0f);
                other.w[std::string("model.") + stack + ".layer_norm.bias"] = std::vector<float>(d, 0.0f);
            }
        EXPECT_GT(max_abs_gap(reference_seq2seq(other, src, tgt, {}).logits, r.logits), 0.1) << fam;
    }
}

// (4) Cross-attention: [L][H][T][S], every row a softmax over all source positions (none masked), keys and
// values from the encoder's output alone.
TEST(Seq2seqReference, CrossAttentionRowsAreSoftmaxesOverTheSource) {
    for (const std::string& fam : seq2seq_families) {
        const tiny_seq2seq m = write_family(fam, 7);
        const int S = 9, T = 4, H = m.spec.n_head, L = m.spec.dec_layers;
        const std::vector<int> src = random_tokens(S, m.spec.vocab, 31), tgt = decoder_ids(m, T, 32);
        const ref_seq2seq r = reference_seq2seq(m, src, tgt, {});
        ASSERT_EQ(r.cross.attention.size(), (size_t)L * H * T * S) << fam;
        for (int row = 0; row < L * H * T; row++) {
            double sum = 0;
            for (int j = 0; j < S; j++) {
                EXPECT_GT(r.cross.attention[(size_t)row * S + j], 0.0) << fam;
                sum += r.cross.attention[(size_t)row * S + j];
            }
            EXPECT_NEAR(sum, 1.0, 1e-12) << fam << " row " << row;
        }
        // keys and values: k_proj / v_proj of the encoder's output (after mBART's encoder layer_norm)
        const vec& enc_out = r.encoder.at(gb::HOOK_FINAL_NORM, m.spec.enc_layers);
        const int d = m.spec.d_model;
        for (int l = 0; l < L; l++) {
            const std::string p = "model.decoder.layers." + std::to_string(l) + ".encoder_attn.";
            const vec k = ref_linear(m.at(p + "k_proj.weight"), m.at(p + "k_proj.bias"), enc_out, S, d, d),
                      v = ref_linear(m.at(p + "v_proj.weight"), m.at(p + "v_proj.bias"), enc_out, S, d, d);
            EXPECT_LT(max_abs_gap(r.cross.k[l], k), 1e-12) << fam;
            EXPECT_LT(max_abs_gap(r.cross.v[l], v), 1e-12) << fam;
        }
        // another target: the same keys and values (the encoder's), other queries
        const ref_seq2seq r2 = reference_seq2seq(m, src, decoder_ids(m, T, 33), {});
        for (int l = 0; l < L; l++) {
            EXPECT_EQ(r2.cross.k[l], r.cross.k[l]) << fam;
            EXPECT_EQ(r2.cross.v[l], r.cross.v[l]) << fam;
            EXPECT_GT(max_abs_gap(r2.cross.q[l], r.cross.q[l]), 1e-3) << fam;
        }
        // what the encoder leaves at final_norm is what the cross-attention reads: zeroed, no source reaches it
        seq2seq_ref_options opt;
        opt.encoder.edit = [](gb::hook_point p, int, vec& x) {
            if (p == gb::HOOK_FINAL_NORM) std::fill(x.begin(), x.end(), 0.0);
        };
        const ref_seq2seq a = reference_seq2seq(m, src, tgt, {}, opt);
        const ref_seq2seq b = reference_seq2seq(m, random_tokens(S, m.spec.vocab, 34), tgt, {}, opt);
        EXPECT_EQ(a.logits, b.logits) << fam;
    }
}

// (5) Ablations: with no attention anywhere (cross-attention included) the logits do not depend on the source;
// head ablations touch the self-attention only; every switch changes the logits and stays finite.
TEST(Seq2seqReference, AblationsFollowTheProposedConvention) {
    for (const std::string& fam : seq2seq_families) {
        const tiny_seq2seq m = write_family(fam, 9);
        const int S = 7, T = 5, H = m.spec.n_head, L = m.spec.dec_layers;
        const std::vector<int> src = random_tokens(S, m.spec.vocab, 41), src2 = random_tokens(S, m.spec.vocab, 42),
                               tgt = decoder_ids(m, T, 43);
        gb::ablation no_attn;
        no_attn.no_attention = layers_on({});
        EXPECT_EQ(reference_seq2seq(m, src, tgt, no_attn).logits, reference_seq2seq(m, src2, tgt, no_attn).logits)
            << fam;
        EXPECT_GT(max_abs_gap(reference_seq2seq(m, src, tgt, {}).logits, reference_seq2seq(m, src2, tgt, {}).logits),
                  1e-3)
            << fam;
        // every head of every layer's self-attention: z is zero in both stacks, the cross-attention still reads
        gb::ablation heads;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++) heads.heads.push_back({l, h});
        const ref_seq2seq rh = reference_seq2seq(m, src, tgt, heads);
        for (int l = 0; l < L; l++) {
            for (double z : rh.encoder.at(gb::HOOK_Z, l)) ASSERT_EQ(z, 0.0) << fam;
            for (double z : rh.decoder.at(gb::HOOK_Z, l)) ASSERT_EQ(z, 0.0) << fam;
            double zc = 0;
            for (double z : rh.cross.z[l]) zc = std::max(zc, std::fabs(z));
            EXPECT_GT(zc, 1e-3) << fam << ": a head ablation reached the cross-attention";
        }
        EXPECT_GT(max_abs_gap(rh.logits, reference_seq2seq(m, src2, tgt, heads).logits), 1e-3) << fam;
        // no-layernorm everywhere: mBART's final norms become the identity too, layernorm_embedding stays
        gb::ablation no_norm;
        no_norm.no_layernorm = layers_on({});
        const ref_seq2seq rn = reference_seq2seq(m, src, tgt, no_norm);
        EXPECT_EQ(rn.decoder.at(gb::HOOK_FINAL_NORM, L), rn.decoder.at(gb::HOOK_RESID_POST, L - 1)) << fam;
        EXPECT_EQ(rn.encoder.at(gb::HOOK_FINAL_NORM, m.spec.enc_layers),
                  rn.encoder.at(gb::HOOK_RESID_POST, m.spec.enc_layers - 1))
            << fam;
        if (fam != "marian") {
            expect_normed_by(m, rn.encoder.at(gb::HOOK_RESID_PRE, 0), "model.encoder.layernorm_embedding", S,
                             fam + " embeddings");
        }
        // no-attention at layer 1 only: the decoder's layer 1 loses both its attention outputs, layer 0 keeps them
        gb::ablation one;
        one.no_attention = layers_on({1});
        const ref_seq2seq r1 = reference_seq2seq(m, src, tgt, one);
        for (double a : r1.cross.attn_out[1]) ASSERT_EQ(a, 0.0) << fam;
        for (double a : r1.decoder.at(gb::HOOK_ATTN_OUT, 1)) ASSERT_EQ(a, 0.0) << fam;
        EXPECT_GT(max_abs_gap(r1.cross.attn_out[0], vec(r1.cross.attn_out[0].size(), 0.0)), 1e-3) << fam;
        const ref_seq2seq base = reference_seq2seq(m, src, tgt, {});
        std::vector<std::pair<std::string, gb::ablation>> cases(6);
        cases[0].first = "no-residual", cases[0].second.no_residual = layers_on({});
        cases[1].first = "no-residual[1]", cases[1].second.no_residual = layers_on({1});
        cases[2].first = "no-layernorm[0]", cases[2].second.no_layernorm = layers_on({0});
        cases[3].first = "heads 0.1 1.3", cases[3].second.heads = {{0, 1}, {1, 3}};
        cases[4].first = "no-attention[0]", cases[4].second.no_attention = layers_on({0});
        cases[5].first = "all at layer 0", cases[5].second.no_attention = cases[5].second.no_residual =
            cases[5].second.no_layernorm = layers_on({0});
        for (const auto& [name, ab] : cases) {
            const ref_seq2seq r = reference_seq2seq(m, src, tgt, ab);
            EXPECT_TRUE(all_finite(r.logits)) << fam << " " << name;
            EXPECT_GT(max_abs_gap(r.logits, base.logits), 1e-4) << fam << " " << name;
        }
    }
}

// (6) One encoder layer, one decoder layer, d = 2, one head, one target position, computed by hand: Marian
// (Post-LN, sinusoids, sqrt(d) scaling, swish). Most weights are zero so each step is a line below; the
// source's tokens are chosen so that leaving out the sqrt(d) flips a LayerNorm's sign.
TEST(Seq2seqReference, HandComputedOneLayerMarian) {
    seq2seq_spec s;
    s.family = "marian";
    s.enc_layers = s.dec_layers = 1;
    s.d_model = 2, s.n_head = 1, s.d_ff = 1, s.vocab = 3, s.n_pos = 4;
    tiny_seq2seq m = write_tiny_seq2seq(test_temp_dir("s2s_hand"), s);
    for (auto& [name, v] : m.w) {
        const bool gain = name.size() > 17 && name.compare(name.size() - 17, 17, "layer_norm.weight") == 0;
        std::fill(v.begin(), v.end(), gain ? 1.0f : 0.0f);
    }
    const double beta = 1.5;
    const std::string p = "model.decoder.layers.0.";
    m.w["model.shared.weight"] = {0.3f, -0.2f, 1.0f, 0.0f, 0.0f, 0.3f};
    m.w[p + "self_attn.out_proj.bias"] = {0.2f, -0.1f};
    m.w[p + "encoder_attn.q_proj.bias"] = {(float)beta, 0.0f};
    for (const char* k : {"k_proj", "v_proj", "out_proj"}) m.w[p + "encoder_attn." + k + ".weight"] = {1, 0, 0, 1};
    m.w[p + "fc1.bias"] = {1.0f};
    m.w[p + "fc2.weight"] = {0.5f, -0.5f};
    m.w[p + "fc2.bias"] = {0.1f, 0.2f};
    m.w[p + "final_layer_norm.weight"] = {2.0f, 1.0f};
    m.w[p + "final_layer_norm.bias"] = {0.0f, 0.5f};
    m.w["final_logits_bias"] = {0.1f, -0.2f, 0.3f};

    struct pair2 {
        double a, b;
    };
    // LayerNorm of two values: mean (a + b) / 2, variance ((a - b) / 2)^2, eps 1e-5
    auto ln = [](pair2 x, pair2 g = {1, 1}, pair2 bias = {0, 0}) {
        const double mean = (x.a + x.b) / 2, inv = 1 / std::sqrt((x.a - x.b) * (x.a - x.b) / 4 + 1e-5);
        return pair2{(x.a - mean) * inv * g.a + bias.a, (x.b - mean) * inv * g.b + bias.b};
    };
    const double r2 = std::sqrt(2.0);
    // encoder: sqrt(2) E[id] + (sin t, cos t); every sublayer outputs 0, so the stream is only normed twice
    const pair2 x0 = {r2 * 1.0 + std::sin(0.0), r2 * 0.0 + std::cos(0.0)}; // token 1 at t = 0
    const pair2 x1 = {r2 * 0.0 + std::sin(1.0), r2 * 0.3 + std::cos(1.0)}; // token 2 at t = 1
    const pair2 e0 = ln(ln(x0)), e1 = ln(ln(x1));
    ASSERT_GT(e0.a, 0.9); // the two source rows point opposite ways
    ASSERT_LT(e1.a, -0.9);
    // decoder at t = 0 reading token 2 (the start, <pad>): self-attention gives its out_proj bias alone
    const pair2 y = {r2 * 0.0 + 0.0, r2 * 0.3 + 1.0};
    const pair2 y1 = ln({y.a + 0.2, y.b - 0.1});
    // cross-attention: q = (beta, 0), k = v = the encoder rows, out_proj the identity
    const double s0 = beta * e0.a / r2, s1 = beta * e1.a / r2;
    const double p0 = 1 / (1 + std::exp(s1 - s0)), p1 = 1 - p0;
    const pair2 a = {p0 * e0.a + p1 * e1.a, p0 * e0.b + p1 * e1.b};
    const pair2 y2 = ln({y1.a + a.a, y1.b + a.b});
    // MLP: fc1 = 0 x + 1, swish(1), fc2 = (0.5, -0.5) h + (0.1, 0.2); then the gained final_layer_norm
    const double h = 1 / (1 + std::exp(-1.0));
    const pair2 y3 = ln({y2.a + 0.5 * h + 0.1, y2.b - 0.5 * h + 0.2}, {2, 1}, {0, 0.5});
    const double E[3][2] = {{0.3, -0.2}, {1.0, 0.0}, {0.0, 0.3}}, bias[3] = {0.1, -0.2, 0.3};

    const ref_seq2seq r = reference_seq2seq(m, {1, 2}, {2}, {});
    ASSERT_EQ(r.cross.attention.size(), 2u);
    EXPECT_NEAR(r.cross.attention[0], p0, 1e-6); // float32 weights: 0.3f and 0.2f are not 0.3 and 0.2
    EXPECT_NEAR(r.cross.attention[1], p1, 1e-6);
    ASSERT_EQ(r.logits.size(), 3u);
    for (int v = 0; v < 3; v++) EXPECT_NEAR(r.logits[v], E[v][0] * y3.a + E[v][1] * y3.b + bias[v], 1e-5) << v;
    EXPECT_NEAR(r.encoder.at(gb::HOOK_FINAL_NORM, 1)[0], e0.a, 1e-6);
    EXPECT_NEAR(r.encoder.at(gb::HOOK_FINAL_NORM, 1)[3], e1.b, 1e-6);
    EXPECT_NEAR(r.decoder.at(gb::HOOK_MLP_POST, 0)[0], h, 1e-12); // swish, not GELU (0.841)
}

// The folder: HF's names and shapes for each family, the tied embedding under the chosen name(s), config.json.
TEST(Seq2seqReference, FolderHasHuggingFaceNamesAndConfig) {
    for (const std::string& fam : seq2seq_families) {
        const tiny_seq2seq m = write_family(fam, 13);
        const seq2seq_spec& s = m.spec;
        const int d = s.d_model, V = s.vocab, ff = s.d_ff;
        std::map<std::string, std::vector<int64_t>> want = {{"model.shared.weight", {V, d}}, {"final_logits_bias", {1, V}}};
        for (const std::string& stack : std::vector<std::string>{"encoder", "decoder"}) {
            const std::string p = "model." + stack + ".";
            if (fam != "marian") {
                want[p + "embed_positions.weight"] = {s.n_pos + 2, d}; // HF's offset of 2 rows
                want[p + "layernorm_embedding.weight"] = want[p + "layernorm_embedding.bias"] = {d};
            }
            if (fam == "mbart") want[p + "layer_norm.weight"] = want[p + "layer_norm.bias"] = {d};
            for (int l = 0; l < 2; l++) {
                const std::string lp = p + "layers." + std::to_string(l) + ".";
                for (const std::string& attn : stack == "encoder" ? std::vector<std::string>{"self_attn"}
                                                                  : std::vector<std::string>{"self_attn", "encoder_attn"}) {
                    for (const char* k : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
                        want[lp + attn + "." + k + ".weight"] = {d, d};
                        want[lp + attn + "." + k + ".bias"] = {d};
                    }
                    want[lp + attn + "_layer_norm.weight"] = want[lp + attn + "_layer_norm.bias"] = {d};
                }
                want[lp + "fc1.weight"] = {ff, d}, want[lp + "fc1.bias"] = {ff};
                want[lp + "fc2.weight"] = {d, ff}, want[lp + "fc2.bias"] = {d};
                want[lp + "final_layer_norm.weight"] = want[lp + "final_layer_norm.bias"] = {d};
            }
        }
        const gb::safetensors_file f = gb::open_safetensors(m.dir + "/model.safetensors");
        std::map<std::string, std::vector<int64_t>> got;
        for (const auto& [name, t] : f.tensors) got[name] = t.shape;
        EXPECT_EQ(got, want) << fam;

        std::ifstream cf(m.dir + "/config.json");
        const nlohmann::json c = nlohmann::json::parse(cf);
        EXPECT_EQ(c.at("model_type"), fam);
        EXPECT_EQ(c.at("activation_function"), fam == "marian" ? "swish" : "gelu");
        EXPECT_EQ(c.at("scale_embedding"), fam != "bart");
        EXPECT_EQ(c.at("normalize_before"), fam == "mbart");
        EXPECT_EQ(c.at("decoder_start_token_id"), m.decoder_start_id);
        EXPECT_EQ(c.at("pad_token_id"), fam == "marian" ? V - 1 : 1);
        EXPECT_EQ(c.at("max_position_embeddings"), s.n_pos);
        for (const char* k : {"d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
                              "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size",
                              "eos_token_id", "forced_eos_token_id", "tie_word_embeddings"})
            EXPECT_TRUE(c.contains(k)) << fam << " " << k;
    }
    // BART's learned positions are read at row t + 2, after the token embedding (unscaled) and before
    // layernorm_embedding
    const tiny_seq2seq m = write_family("bart", 13);
    const int d = m.spec.d_model;
    const std::vector<int> src = {5, 9, 14};
    const ref_seq2seq r = reference_seq2seq(m, src, {m.decoder_start_id}, {});
    for (int offset : {2, 0}) {
        vec x((size_t)3 * d);
        for (int t = 0; t < 3; t++)
            for (int i = 0; i < d; i++)
                x[(size_t)t * d + i] = (double)m.at("model.shared.weight")[(size_t)src[t] * d + i] +
                                       m.at("model.encoder.embed_positions.weight")[(size_t)(t + offset) * d + i];
        const vec want = ref_layernorm(x, m.at("model.encoder.layernorm_embedding.weight"),
                                       m.at("model.encoder.layernorm_embedding.bias"), 3, d, 1e-5);
        if (offset == 2) EXPECT_LT(max_abs_gap(r.encoder.at(gb::HOOK_RESID_PRE, 0), want), 1e-12);
        else EXPECT_GT(max_abs_gap(r.encoder.at(gb::HOOK_RESID_PRE, 0), want), 0.1);
    }
}

// Where the tied embedding is stored, and an untied lm_head that the logits then use.
TEST(Seq2seqReference, EmbeddingNamesAndUntiedHead) {
    auto names = [](const tiny_seq2seq& m) {
        std::set<std::string> n;
        for (const auto& [name, t] : gb::open_safetensors(m.dir + "/model.safetensors").tensors)
            if (name.find("embed_tokens") != std::string::npos || name == "model.shared.weight" || name == "lm_head.weight")
                n.insert(name);
        return n;
    };
    seq2seq_spec s;
    s.embed_stored_as = "decoder"; // as facebook/bart-large-cnn
    EXPECT_EQ(names(write_tiny_seq2seq(test_temp_dir("s2s_emb_dec"), s)),
              (std::set<std::string>{"model.decoder.embed_tokens.weight"}));
    s.embed_stored_as = "all";
    EXPECT_EQ(names(write_tiny_seq2seq(test_temp_dir("s2s_emb_all"), s)),
              (std::set<std::string>{"model.shared.weight", "model.encoder.embed_tokens.weight",
                                     "model.decoder.embed_tokens.weight", "lm_head.weight"}));
    s.embed_stored_as = "shared";
    s.tied = false;
    const tiny_seq2seq untied = write_tiny_seq2seq(test_temp_dir("s2s_untied"), s);
    EXPECT_EQ(names(untied), (std::set<std::string>{"model.shared.weight", "lm_head.weight"}));
    std::ifstream cf(untied.dir + "/config.json");
    EXPECT_EQ(nlohmann::json::parse(cf)["tie_word_embeddings"], false);
    const std::vector<int> src = random_tokens(5, s.vocab, 51), tgt = {untied.decoder_start_id, 7, 8};
    tiny_seq2seq as_tied = untied;
    as_tied.spec.tied = true;
    EXPECT_GT(max_abs_gap(reference_seq2seq(untied, src, tgt, {}).logits,
                           reference_seq2seq(as_tied, src, tgt, {}).logits),
              0.1);
    // final_logits_bias is added: taking it out moves every logit by exactly it
    tiny_seq2seq no_bias = untied;
    std::fill(no_bias.w["final_logits_bias"].begin(), no_bias.w["final_logits_bias"].end(), 0.0f);
    const vec a = reference_seq2seq(untied, src, tgt, {}).logits, b = reference_seq2seq(no_bias, src, tgt, {}).logits;
    for (size_t i = 0; i < a.size(); i++) ASSERT_NEAR(a[i] - b[i], untied.at("final_logits_bias")[i % s.vocab], 1e-12);
}

// mBART's tokenizer.json loads with core's Unigram tokenizer and wraps a text as mBART-cc25 does.
TEST(Seq2seqReference, MbartTokenizerLoads) {
    const tiny_seq2seq m = write_family("mbart", 17);
    const gb::tokenizer t = gb::load_folder_tokenizer(m.dir, "mbart");
    const std::vector<int> ids = gb::encode_prompt(t, "the cat", false);
    std::ifstream jf(m.dir + "/tokenizer.json");
    const nlohmann::json vocab = nlohmann::json::parse(jf).at("model").at("vocab");
    auto piece_id = [&](const std::string& piece) {
        for (size_t i = 0; i < vocab.size(); i++)
            if (vocab[i][0] == piece) return (int)i;
        return -1;
    };
    ASSERT_EQ(ids.size(), 4u);
    EXPECT_EQ(ids[0], piece_id("\xE2\x96\x81the"));
    EXPECT_EQ(ids[1], piece_id("\xE2\x96\x81" "cat"));
    EXPECT_EQ(ids[2], m.eos_id);
    EXPECT_EQ(ids[3], m.decoder_start_id); // en_XX, the last id
}

TEST(Seq2seqReference, RefusesBadInput) {
    const tiny_seq2seq m = write_family("bart", 19);
    EXPECT_THROW(reference_seq2seq(m, {}, {2}, {}), std::runtime_error);
    EXPECT_THROW(reference_seq2seq(m, {1, m.spec.vocab}, {2}, {}), std::runtime_error);
    EXPECT_THROW(reference_seq2seq(m, {1}, std::vector<int>(m.spec.n_pos + 1, 2), {}), std::runtime_error);
    seq2seq_spec s;
    s.family = "t5";
    EXPECT_THROW(write_tiny_seq2seq(test_temp_dir("s2s_t5"), s), std::runtime_error);
}
