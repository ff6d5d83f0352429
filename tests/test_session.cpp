// The session (core/run/session.h) and the kind table (core/model/kind.h): for every kind, a session request
// gives the records a direct forward of the same input gives, with and without the ablation, and the kind's
// prediction read from them; an encoder–decoder runs live (typing in the target, toggling an ablation, another
// source) and every step equals a whole run; every feature a kind does not offer says why in one line.
//
// Sections: helpers | one stack per kind | encoder–decoders live | the kind table
#include <gtest/gtest.h>

#include <cmath>

#include "io/loader.h"
#include "kernels/softmax.h"
#include "model/kind.h"
#include "run/forward.h"
#include "run/predict.h"
#include "run/seq2seq.h"
#include "run/session.h"
#include "run/vision.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_family.h"
#include "tiny_model.h"
#include "tiny_seq2seq.h"
#include "tiny_vision.h"
#include "util/error.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------
// What the app keeps: patterns (the cross-attention's too), z, MLP outputs and the residual stream.
gb::record_request session_keep() {
    gb::record_request k;
    k.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT) |
               gb::hook_bit(gb::HOOK_ROUTER);
    k.resid_stream = true;
    return k;
}

// max |a - b| over every tensor want keeps (and got must keep too), the norms and the logits.
double record_gap(const gb::record& got, const gb::record& want) {
    if (got.n_tokens != want.n_tokens || got.tokens != want.tokens) return INFINITY;
    double gap = 0;
    auto worse = [&](const float* a, const float* b, size_t n) {
        for (size_t i = 0; i < n; i++) gap = std::max(gap, (double)std::fabs(a[i] - b[i]));
    };
    for (int p = 0; p < gb::HOOK_COUNT; p++)
        for (int l = 0; l < (int)want.slot[p].size(); l++) {
            const float* w = want.get((gb::hook_point)p, l);
            if (!w) continue;
            const float* g = got.get((gb::hook_point)p, l);
            if (!g || got.layer_floats((gb::hook_point)p) != want.layer_floats((gb::hook_point)p)) return INFINITY;
            worse(g, w, want.layer_floats((gb::hook_point)p));
        }
    if (got.resid_norm.size() != want.resid_norm.size()) return INFINITY;
    worse(got.resid_norm.data(), want.resid_norm.data(), want.resid_norm.size());
    // the logits both have: a decoder's session keeps the last position's
    const size_t n = std::min(got.logits.size(), want.logits.size());
    worse(got.logits.data() + got.logits.size() - n, want.logits.data() + want.logits.size() - n, n);
    return gap;
}

gb::record direct(const gb::model& m, const std::vector<int>& tokens, const gb::ablation& ab,
                  const std::vector<float>& pixels = {}) {
    gb::forward_options o;
    o.keep = session_keep();
    if (!pixels.empty()) o.pixels = pixels.data();
    gb::record r;
    gb::run_forward(r, m, tokens, ab, o);
    return r;
}

// The session's run and baseline equal direct forwards with and without the ablation, and its prediction is the
// kind's, read at the kind's position of those logits.
void expect_session_matches(const gb::model& m, const std::vector<int>& tokens, const gb::ablation& ab,
                            const std::vector<float>& pixels, gb::kind_output output, const std::string& what) {
    gb::session s;
    gb::session_request rq;
    rq.tokens = tokens;
    rq.pixels = pixels;
    rq.ab = ab;
    rq.keep = session_keep();
    rq.top_k = 5;
    gb::session_result r;
    gb::session_run(r, s, m, rq);
    const std::vector<int> ids = pixels.empty() ? tokens : gb::vision_tokens(m.config);
    const gb::record want = direct(m, ids, ab, pixels), want_base = direct(m, ids, {}, pixels);
    EXPECT_LT(record_gap(*r.run, want), 1e-5) << what << ": the run";
    EXPECT_LT(record_gap(*r.base, want_base), 1e-5) << what << ": the baseline";
    ASSERT_EQ(r.pred.output, output) << what;
    const int at = gb::prediction_position(m, want);
    const int V = m.config.vocab_size;
    const float* row = want.all_logits ? &want.logits[(size_t)at * V] : want.last_logits();
    const std::vector<gb::token_prob> top = gb::top_k_probs(row, V, 5);
    ASSERT_EQ(r.pred.top.size(), top.size()) << what;
    for (size_t i = 0; i < top.size(); i++) {
        EXPECT_EQ(r.pred.top[i].id, top[i].id) << what << ": top " << i;
        EXPECT_NEAR(r.pred.top[i].prob, top[i].prob, 1e-5) << what << ": top " << i;
    }
    EXPECT_EQ(r.pred.position, at) << what;
    EXPECT_GE(r.pred.kl, 0.0) << what;
    EXPECT_EQ(ab.any(), r.pred.kl > 0) << what << ": an ablation moves the distribution, none does not";
}

gb::ablation ablate(const std::string& what, const std::string& layers, const std::string& heads = "") {
    return gb::parse_ablation(what, layers, heads);
}

// ---------------------------------------------------------------------------------------------
// One stack per kind: decoder, MoE, encoder, vision
// ---------------------------------------------------------------------------------------------
TEST(Session, DecoderMatchesTheForwardAndPredictsTheNextToken) {
    tiny_spec sp;
    const tiny_model tm = write_tiny_gpt2(test_temp_dir("session_gpt2"), sp);
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> tokens = random_tokens(11, m.config.vocab_size, 3);
    expect_session_matches(m, tokens, {}, {}, gb::OUTPUT_NEXT_TOKEN, "gpt2, none");
    expect_session_matches(m, tokens, ablate("no-attention", "1"), {}, gb::OUTPUT_NEXT_TOKEN, "gpt2, no-attention 1");
    expect_session_matches(m, tokens, ablate("", "", "0.1"), {}, gb::OUTPUT_NEXT_TOKEN, "gpt2, head 0.1");
}

TEST(Session, MoeMatchesTheForwardAndReportsTheRouting) {
    family_spec sp;
    sp.family = "mixtral";
    const tiny_family tf = write_tiny_family(test_temp_dir("session_moe"), sp);
    const gb::model m = gb::load_model(tf.hf_dir);
    ASSERT_EQ(gb::kind_of(m.config), gb::KIND_MOE);
    const std::vector<int> tokens = random_tokens(9, m.config.vocab_size, 4);
    gb::session s;
    gb::session_request rq;
    rq.tokens = tokens;
    gb::session_result r;
    gb::session_run(r, s, m, rq);
    ASSERT_FALSE(r.pred.routing.empty());
    EXPECT_EQ(r.pred.routing.ids, gb::routing_of(*r.run, m.config.n_expert_used).ids);
    // ablate the expert the last token's layer 0 weighs most: the prediction must move
    const int T = r.run->n_tokens, e = r.pred.routing.cell_ids(0, T - 1)[0];
    ASSERT_GE(e, 0);
    gb::ablation ab;
    ab.experts.push_back({0, e});
    expect_session_matches(m, tokens, ab, {}, gb::OUTPUT_NEXT_TOKEN, "mixtral, expert 0." + std::to_string(e));
    rq.ab = ab;
    gb::session_run(r, s, m, rq);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < r.pred.routing.k; k++) EXPECT_NE(r.pred.routing.cell_ids(0, t)[k], e) << "the ablated expert ran";
    EXPECT_EQ(r.pred.base_routing.cell_ids(0, T - 1)[0], e) << "the baseline keeps it";
}

TEST(Session, EncoderFillsTheMaskAtItsPosition) {
    encoder_spec sp;
    const tiny_encoder te = write_tiny_encoder(test_temp_dir("session_bert"), sp);
    const gb::model m = gb::load_model(te.dir);
    std::vector<int> tokens = gb::encode_prompt(m.tok, "a b [MASK] c", false);
    ASSERT_GE(m.tok.mask_id, 0);
    expect_session_matches(m, tokens, {}, {}, gb::OUTPUT_FILL_MASK, "bert, none");
    expect_session_matches(m, tokens, ablate("no-residual", "1"), {}, gb::OUTPUT_FILL_MASK, "bert, no-residual 1");
    gb::session s;
    gb::session_request rq;
    rq.tokens = tokens;
    gb::session_result r;
    gb::session_run(r, s, m, rq);
    ASSERT_EQ(r.pred.masks.size(), 1u);
    EXPECT_EQ(tokens[r.pred.masks[0]], m.tok.mask_id);
    ASSERT_EQ(r.pred.fills.size(), 1u);
    EXPECT_EQ(r.pred.fills[0].top[0].id, r.pred.top[0].id) << "the table's first row is the first mask's";
}

TEST(Session, VisionClassifiesAtClsWithTheRollout) {
    vision_spec sp;
    const tiny_vision tv = write_tiny_vision(test_temp_dir("session_vit"), sp);
    const gb::model m = gb::load_model(tv.dir);
    const std::vector<float> pixels = random_pixels(sp, 5);
    expect_session_matches(m, {}, {}, pixels, gb::OUTPUT_CLASSES, "vit, none");
    expect_session_matches(m, {}, ablate("no-attention", "0"), pixels, gb::OUTPUT_CLASSES, "vit, no-attention 0");
    gb::session s;
    gb::session_request rq;
    rq.pixels = pixels;
    gb::session_result r;
    gb::session_run(r, s, m, rq);
    EXPECT_EQ(r.pred.position, 0) << "[CLS]";
    const std::vector<float> roll = gb::attention_rollout(*r.run);
    EXPECT_EQ(r.pred.rollout, roll);
    // an image for a text model and text for an image classifier are one-line errors
    gb::session_request text;
    text.tokens = {1, 2};
    expect_gb_error([&] { gb::session_run(r, s, m, text); }, "is an image classifier: give it an image");
}

TEST(Session, AnotherModelStartsAfresh) {
    const tiny_model a = write_tiny_gpt2(test_temp_dir("session_two_a"), tiny_spec{});
    tiny_spec sb;
    sb.seed = 9;
    const tiny_model b = write_tiny_gpt2(test_temp_dir("session_two_b"), sb);
    const gb::model ma = gb::load_model(a.dir), mb = gb::load_model(b.dir);
    gb::session s;
    gb::session_request rq;
    rq.tokens = random_tokens(6, ma.config.vocab_size, 1);
    rq.keep = session_keep();
    gb::session_result r;
    gb::session_run(r, s, ma, rq);
    gb::session_run(r, s, mb, rq);
    EXPECT_FALSE(r.report.reused) << r.report.what;
    EXPECT_LT(record_gap(*r.run, direct(mb, rq.tokens, {})), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// Encoder–decoders: two live stacks
// ---------------------------------------------------------------------------------------------
// Both stacks of a session result equal run_seq2seq of the same source, target and ablation (and without it).
void expect_seq2seq_same(const gb::session_result& r, const gb::model& m, const std::vector<int>& source,
                         const gb::ablation& ab, const std::string& what) {
    gb::forward_options o;
    o.keep = session_keep();
    gb::seq2seq_record want, want_base;
    gb::run_seq2seq(want, m, source, r.target, ab, o);
    gb::run_seq2seq(want_base, m, source, r.target, {}, o);
    EXPECT_LT(record_gap(*r.encoder, want.encoder), 1e-5) << what << ": encoder";
    EXPECT_LT(record_gap(*r.run, want.decoder), 1e-5) << what << ": decoder";
    EXPECT_LT(record_gap(*r.encoder_base, want_base.encoder), 1e-5) << what << ": encoder baseline";
    EXPECT_LT(record_gap(*r.base, want_base.decoder), 1e-5) << what << ": decoder baseline";
    const std::vector<int> align = gb::cross_alignment(want.decoder);
    EXPECT_EQ(r.pred.alignment, align) << what;
    const std::vector<gb::token_prob> top = gb::top_k_probs(want.decoder.last_logits(), m.config.vocab_size, 1);
    EXPECT_EQ(r.pred.top[0].id, top[0].id) << what;
}

TEST(Session, EncoderDecoderIsLiveAndEveryStepEqualsAWholeRun) {
    for (const char* family : {"bart", "mbart", "marian"}) {
        seq2seq_spec sp;
        sp.family = family;
        sp.enc_layers = 3; // a layer the decoder lacks: ablating it changes the encoder only
        const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir(std::string("session_s2s_") + family), sp);
        const gb::model m = gb::load_model(tm.dir);
        const std::vector<int> source = random_tokens(8, sp.vocab, 2);
        std::vector<int> target = {tm.decoder_start_id};
        gb::session s;
        gb::session_request rq;
        rq.tokens = source;
        rq.keep = session_keep();
        gb::session_result r;
        // typing the target a token at a time: the encoder is kept, the decoder computes the new row only
        for (int t = 0; t < 5; t++) {
            target.push_back(random_tokens(1, sp.vocab, 100 + t)[0]);
            rq.target = target;
            gb::session_run(r, s, m, rq);
            expect_seq2seq_same(r, m, source, {}, std::string(family) + ", typed " + std::to_string(t));
            if (t > 0) {
                EXPECT_NE(r.report.what.find("source: nothing changed"), std::string::npos) << r.report.what;
                EXPECT_NE(r.report.what.find("target: 1 of " + std::to_string(target.size()) + " tokens"),
                          std::string::npos) << r.report.what;
            }
        }
        // an ablation at a layer only the encoder has: the decoder reads another source, runs whole
        rq.ab = ablate("no-attention", "2");
        gb::session_run(r, s, m, rq);
        expect_seq2seq_same(r, m, source, rq.ab, std::string(family) + ", encoder layer 2");
        // an ablation both stacks have, at their last shared layer: from that layer on
        rq.ab = ablate("no-residual", "1");
        gb::session_run(r, s, m, rq);
        expect_seq2seq_same(r, m, source, rq.ab, std::string(family) + ", no-residual 1");
        EXPECT_NE(r.report.what.find("source: layers 1.."), std::string::npos) << r.report.what;
        // another source: everything again
        rq.tokens = random_tokens(6, sp.vocab, 7);
        gb::session_run(r, s, m, rq);
        expect_seq2seq_same(r, m, rq.tokens, rq.ab, std::string(family) + ", another source");
        // no target: the model's own translation under the ablation, the decoder start first
        rq.target.clear();
        gb::session_run(r, s, m, rq);
        ASSERT_FALSE(r.target.empty());
        EXPECT_EQ(r.target[0], m.config.decoder_start_id);
        expect_seq2seq_same(r, m, rq.tokens, rq.ab, std::string(family) + ", translated");
        // a layer neither stack has is an error that names it
        rq.ab = ablate("no-attention", "5");
        expect_gb_error([&] { gb::session_run(r, s, m, rq); }, "ablation layer 5 is outside the model");
    }
}

// ---------------------------------------------------------------------------------------------
// The kind table
// ---------------------------------------------------------------------------------------------
TEST(KindTable, EveryArchitectureHasAKindAndEveryRefusalIsOneLine) {
    int offered[gb::KIND_COUNT] = {};
    for (int k = 0; k < gb::KIND_COUNT; k++) {
        const gb::kind_info& info = gb::kind_table((gb::model_kind)k);
        EXPECT_FALSE(std::string(info.name).empty());
        EXPECT_EQ(info.why_not[gb::FEATURE_RUN], nullptr) << info.name << " runs";
        EXPECT_EQ(info.why_not[gb::FEATURE_LIVE], nullptr) << info.name << " is live";
        for (int f = 0; f < gb::FEATURE_COUNT; f++) {
            const char* why = info.why_not[f];
            if (!why) {
                offered[k]++;
                continue;
            }
            const std::string w = why;
            EXPECT_FALSE(w.empty()) << info.name << " " << gb::feature_name((gb::feature)f);
            EXPECT_EQ(w.find('\n'), std::string::npos) << info.name << " " << gb::feature_name((gb::feature)f);
        }
    }
    EXPECT_EQ(offered[gb::KIND_DECODER] + 1, offered[gb::KIND_MOE]) << "an MoE model offers the experts too";
    for (int a = 0; a < gb::ARCH_COUNT; a++) {
        const gb::arch_info& info = gb::arch_table((gb::arch_id)a);
        EXPECT_GE((int)info.kind, 0) << info.name;
        EXPECT_LT((int)info.kind, (int)gb::KIND_COUNT) << info.name;
    }
    EXPECT_EQ(gb::arch_table(gb::ARCH_MIXTRAL).kind, gb::KIND_MOE);
    EXPECT_EQ(gb::arch_table(gb::ARCH_BERT).kind, gb::KIND_ENCODER);
    EXPECT_EQ(gb::arch_table(gb::ARCH_VIT).kind, gb::KIND_VISION);
    EXPECT_EQ(gb::arch_table(gb::ARCH_MARIAN).kind, gb::KIND_SEQ2SEQ);
    EXPECT_EQ(gb::arch_table(gb::ARCH_QWEN3).kind, gb::KIND_DECODER);
}

TEST(KindTable, RefusalNamesThePathTheKindAndWhy) {
    encoder_spec sp;
    const tiny_encoder te = write_tiny_encoder(test_temp_dir("kind_bert"), sp);
    const gb::model m = gb::load_model(te.dir);
    EXPECT_EQ(gb::refusal(m, gb::FEATURE_LENS), "");
    const std::string why = gb::refusal(m, gb::FEATURE_GENERATE);
    EXPECT_EQ(why, m.path + " is a masked-language-model encoder (bert): it fills masked tokens (fill mask); it does "
                            "not generate text");
    expect_gb_error([&] { gb::require(m, gb::FEATURE_PATCHING); }, "(bert): activation patching scores a next-token");
    const tiny_model tg = write_tiny_gpt2(test_temp_dir("kind_gpt2"), tiny_spec{});
    const gb::model g = gb::load_model(tg.dir);
    EXPECT_NE(gb::refusal(g, gb::FEATURE_EXPERTS).find(" is a decoder-only language model (gpt2): "), std::string::npos);
}

} // namespace
