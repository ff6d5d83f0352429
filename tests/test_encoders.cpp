// Encoders (BERT, RoBERTa, DistilBERT): the forward against a double-precision reference on tiny random models
// the tests write in HF layout, under every ablation and both matmul kernels; bidirectional attention, Post-LN,
// token types, RoBERTa's position offset, the masked-LM head; fill mask, the logit lens, live recompute and the CLI.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "analysis/export.h"
#include "analysis/lens.h"
#include "io/loader.h"
#include "kernels/softmax.h"
#include "model/kind.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/live.h"
#include "run/predict.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_llama.h" // expect_record_matches
#include "util/error.h"

namespace {

std::string temp_dir(const std::string& name) {
    const std::string d = std::string(::testing::TempDir()) + "glassbox_enc_" + name;
    std::filesystem::remove_all(d);
    return d;
}

void expect_encoder_matches(const encoder_spec& s, const std::string& label) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir(label), s);
    const std::vector<int> tokens = random_tokens(11, s.vocab, s.seed + 7);
    for_each_matmul([&] {
        const gb::model m = gb::load_model(tm.dir);
        for (const auto& [name, ab] : encoder_ablation_cases()) {
            gb::record cap;
            gb::run_forward(cap, m, tokens, ab, keep_every_point());
            ASSERT_TRUE(cap.all_logits) << label << ": an encoder's run keeps every position's logits";
            expect_record_matches(cap, reference_encoder(tm, tokens, ab), label + ", " + name);
        }
    });
}

TEST(Encoders, BertMatchesReferenceUnderEveryAblation) { expect_encoder_matches({}, "bert"); }

TEST(Encoders, RobertaMatchesReferenceWithItsPositionOffset) {
    encoder_spec s;
    s.family = "roberta";
    s.vocab = 270;
    s.n_type = 1;
    s.seed = 3;
    expect_encoder_matches(s, "roberta");
}

TEST(Encoders, DistilbertMatchesReference) {
    encoder_spec s;
    s.family = "distilbert";
    s.seed = 5;
    expect_encoder_matches(s, "distilbert");
}

TEST(Encoders, UntiedDecoderAndBareModelNames) {
    encoder_spec s;
    s.tied = false;
    s.prefixed = false; // a bare BertModel's names next to the head's
    s.n_layer = 3;
    s.std = 0.2f; // three layers without their norms: keep the scores where float32 still resolves the softmax
    s.seed = 9;
    expect_encoder_matches(s, "bert_untied");
}

// The pattern is full: every query attends above the diagonal too, and rows sum to 1 over all keys.
TEST(Encoders, AttentionIsBidirectional) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("bidir"), {});
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> tokens = random_tokens(9, 120, 2);
    gb::record cap;
    gb::run_forward(cap, m, tokens, {}, {});
    const int T = cap.n_tokens;
    double above = 0;
    for (int h = 0; h < cap.n_head; h++) {
        const float* p = cap.head(0, h);
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) sum += p[i * T + j], above += j > i ? p[i * T + j] : 0;
            EXPECT_NEAR(sum, 1.0, 1e-5);
        }
    }
    EXPECT_GT(above, 1.0) << "keys after the query must get weight";
    // so the first position's output depends on the last token (a decoder's would not)
    std::vector<int> changed = tokens;
    changed.back() = (changed.back() + 1) % 120;
    gb::record cap2;
    gb::run_forward(cap2, m, changed, {}, {});
    double diff = 0;
    for (int v = 0; v < cap.vocab; v++) diff = std::max(diff, (double)std::fabs(cap.logits[v] - cap2.logits[v]));
    EXPECT_GT(diff, 1e-3);
}

// The tokenizer adds [CLS] ... [SEP]; fill mask reads the masked position's logits, as the reference's softmax.
TEST(Encoders, FillMaskGivesTheHeadsTopFillersAtEachMask) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("fill"), {});
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> ids = gb::encode_prompt(m.tok, "the cat [MASK] on the [MASK].", false);
    ASSERT_GE(m.tok.mask_id, 0);
    ASSERT_EQ(ids.front(), m.tok.prefix_ids.at(0));
    ASSERT_EQ(ids.back(), m.tok.suffix_ids.at(0));
    gb::record cap;
    gb::run_forward(cap, m, ids, {}, {});
    const std::vector<int> at = gb::mask_positions(cap, m.tok);
    ASSERT_EQ(at.size(), 2u);
    const std::vector<gb::fill_slot> slots = gb::fill_mask(cap, at, 5);
    const ref_trace ref = reference_encoder(tm, ids, {});
    const int V = tm.spec.vocab;
    for (const gb::fill_slot& f : slots) {
        ASSERT_EQ(f.top.size(), 5u);
        std::vector<double> p(V);
        double mx = -1e300, sum = 0;
        for (int v = 0; v < V; v++) mx = std::max(mx, ref.logits[(size_t)f.position * V + v]);
        for (int v = 0; v < V; v++) sum += p[v] = std::exp(ref.logits[(size_t)f.position * V + v] - mx);
        int best = 0;
        for (int v = 1; v < V; v++)
            if (p[v] > p[best]) best = v;
        EXPECT_EQ(f.top[0].id, best);
        for (const gb::token_prob& tp : f.top) EXPECT_NEAR(tp.prob, p[tp.id] / sum, 1e-5);
        for (size_t j = 1; j < f.top.size(); j++) EXPECT_GE(f.top[j - 1].prob, f.top[j].prob);
    }
    const nlohmann::json j = gb::fill_mask_json(slots, cap, m.tok);
    EXPECT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0]["token"], "[MASK]");
}

// The logit lens of an encoder reads each point through the masked-LM head: its last point is the run's logits.
TEST(Encoders, LogitLensUsesTheMaskedLmHead) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("lens"), {});
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> tokens = random_tokens(7, 120, 4);
    for (const auto& [name, ab] : encoder_ablation_cases()) {
        if (ab.no_residual.on) continue; // the lens needs the stream
        gb::forward_options opt;
        opt.keep.resid_stream = true;
        gb::record cap;
        gb::run_forward(cap, m, tokens, ab, opt);
        const gb::lens_result l = gb::logit_lens(cap, m, ab, 3);
        const int P = 2 * tm.spec.n_layer + 1, T = cap.n_tokens, V = cap.vocab;
        for (int t = 0; t < T; t++) {
            const std::vector<gb::token_prob> top = gb::top_k_probs(&cap.logits[(size_t)t * V], V, 3);
            EXPECT_EQ(l.top_ids[((size_t)(P - 1) * T + t) * 3], top[0].id) << name << " position " << t;
            EXPECT_NEAR(l.top_probs[((size_t)(P - 1) * T + t) * 3], top[0].prob, 1e-5) << name;
        }
    }
}

// Live: a token change recomputes every position (each sees every token); an ablation resumes from its layer.
// Both equal a fresh run.
TEST(Encoders, LiveRecomputeEqualsAFreshRun) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("live"), {});
    const gb::model m = gb::load_model(tm.dir);
    gb::live_state st;
    gb::live_request rq;
    rq.keep.resid_stream = true; // a resumed run starts from the kept stream
    rq.tokens = random_tokens(8, 120, 5);
    gb::live_result out;
    gb::live_run(out, st, m, rq);
    rq.tokens.push_back(17); // an append: a decoder would compute one token
    gb::live_run(out, st, m, rq);
    EXPECT_FALSE(out.report.reused) << out.report.what;
    EXPECT_NE(out.report.what.find("encoder"), std::string::npos) << out.report.what;
    gb::record fresh;
    gb::run_forward(fresh, m, rq.tokens, {}, {});
    EXPECT_LT(max_scaled_error(out.run->logits, std::vector<double>(fresh.logits.begin(), fresh.logits.end())), 1e-5);
    gb::ablation ab;
    ab.heads = {{1, 2}};
    rq.interventions = gb::ablation_interventions(ab, m.config);
    gb::live_run(out, st, m, rq);
    EXPECT_TRUE(out.report.reused) << out.report.what;
    gb::record fresh_ab;
    gb::run_forward(fresh_ab, m, rq.tokens, ab, {});
    EXPECT_LT(max_scaled_error(out.run->logits, std::vector<double>(fresh_ab.logits.begin(), fresh_ab.logits.end())), 1e-5);
    const std::vector<float> want = fresh_ab.flat(gb::HOOK_PATTERN);
    EXPECT_LT(max_scaled_error(out.run->flat(gb::HOOK_PATTERN), std::vector<double>(want.begin(), want.end())), 1e-5);
}

TEST(Encoders, GenerationAndTheDecoderWalkAreRefusedByName) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("refuse"), {});
    const gb::model m = gb::load_model(tm.dir);
    expect_gb_error([&] { gb::generate(m, {2, 20, 3}, 3, {}, {}); }, "bert is an encoder");
}

TEST(Encoders, FillMaskOnADecoderRunSaysWhatIsMissing) {
    gb::record r;
    r.n_tokens = 3, r.vocab = 5;
    r.logits.assign(5, 0.0f);
    expect_gb_error([&] { gb::fill_mask(r, {1}, 3); }, "every position's logits");
}

void write_config(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c;
    std::ifstream(dir + "/config.json") >> c;
    edit(c);
    std::ofstream(dir + "/config.json") << c.dump();
}

TEST(Encoders, BadConfigsAndFilesGetOneClearLine) {
    const std::string dir = temp_dir("bad");
    write_tiny_encoder(dir, {});
    write_config(dir, [](nlohmann::json& c) { c["hidden_act"] = "relu"; });
    expect_gb_error([&] { gb::load_model(dir); }, "hidden_act relu is not supported for bert");
    write_config(dir, [](nlohmann::json& c) {
        c["hidden_act"] = "gelu";
        c["position_embedding_type"] = "relative_key";
    });
    expect_gb_error([&] { gb::load_model(dir); }, "position_embedding_type relative_key");
    write_config(dir, [](nlohmann::json& c) {
        c["position_embedding_type"] = "absolute";
        c["hidden_size"] = 40;
    });
    expect_gb_error([&] { gb::load_model(dir); }, "expected shape");
    const std::string dir2 = temp_dir("bad2");
    encoder_spec s;
    s.family = "roberta", s.vocab = 270;
    write_tiny_encoder(dir2, s);
    write_config(dir2, [](nlohmann::json& c) { c["max_position_embeddings"] = 2; });
    expect_gb_error([&] { gb::load_model(dir2); }, "leaves no position");
}

// glassbox-cli on an encoder: run prints the fillers and writes them to --json; attention.npy holds full rows;
// info names the family and kind; generate and the decoder-only analyses are refused with the kind table's line.
// The lens of an encoder reads the position the masked-LM head fills (it read the last one, [SEP]), and tokenize
// says that run reads the prompt inside the tokenizer's template ([CLS] ... [SEP]), which --specials prints.
TEST(Encoders, CliLensAtTheMaskAndTokenizeNamesTheTemplate) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("cli_lens"), {});
    command_result r = run_cli("lens --model '" + tm.dir + "' --prompt 'the cat [MASK] on the mat'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("logit lens at the position the masked-LM head fills (\"[MASK]\")"), std::string::npos) << r.out;
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> bare = gb::encode(m.tok, "the cat"), framed = gb::encode_prompt(m.tok, "the cat", false);
    ASSERT_NE(bare, framed);
    r = run_cli("tokenize --model '" + tm.dir + "' --text 'the cat'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, nlohmann::json(bare).dump() + "\n");
    EXPECT_NE(r.err.find("note: run and the app read " + nlohmann::json(framed).dump()), std::string::npos) << r.err;
    r = run_cli("tokenize --model '" + tm.dir + "' --text 'the cat' --specials");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, nlohmann::json(framed).dump() + "\n");
    EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Encoders, CliRunInfoAndGenerate) {
    const tiny_encoder tm = write_tiny_encoder(temp_dir("cli"), {});
    const std::string out = temp_dir("cli_out");
    command_result r = run_cli("run --model '" + tm.dir + "' --prompt 'the cat [MASK] on the mat' --top-k 3 --json '" + out +
                           ".json' --npy-dir '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("fill mask at position 3 (top 3):"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("next tokens"), std::string::npos) << r.out;
    nlohmann::json j;
    std::ifstream(out + ".json") >> j;
    ASSERT_EQ(j["fill_mask"].size(), 1u);
    EXPECT_EQ(j["fill_mask"][0]["position"], 3);
    EXPECT_EQ(j["fill_mask"][0]["top"].size(), 3u);
    EXPECT_EQ(j["model"]["family"], "bert");
    EXPECT_EQ(j["model"]["kind"], "encoder");
    EXPECT_EQ(j["model"]["kind_title"], "masked-language-model encoder");
    EXPECT_TRUE(std::filesystem::exists(out + "/attention.npy"));
    // without a mask: the head's best guess at every position
    r = run_cli("run --model '" + tm.dir + "' --prompt 'the cat'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("no [MASK] in the prompt"), std::string::npos) << r.out;
    r = run_cli("info --model '" + tm.dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("\"family\": \"bert\""), std::string::npos) << r.out;
    // what the kind does not offer: the kind table's line, the option named where an option asked for it
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<std::pair<std::string, std::pair<std::string, gb::feature>>> refused = {
        {"generate --prompt 'the cat' --max-new-tokens 3", {"", gb::FEATURE_GENERATE}},
        {"attribute --prompt 'the cat' --target-id 1", {"", gb::FEATURE_ATTRIBUTION}},
        {"patch --prompt 'the cat' --corrupt 'the dog' --target-id 1", {"", gb::FEATURE_PATCHING}},
        {"learn --prompt 'the cat'", {"", gb::FEATURE_LEARN}},
        {"break-it --prompt 'the cat'", {"", gb::FEATURE_BREAK_IT}},
        {"run --prompt 'the cat' --bos", {"--bos: ", gb::FEATURE_BOS}},
    };
    for (const auto& [args, why] : refused) {
        const std::string cmd = args.substr(0, args.find(' '));
        r = run_cli(cmd + " --model '" + tm.dir + "' " + args.substr(cmd.size() + 1));
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err, "error: " + why.first + gb::refusal(m, why.second) + "\n") << args;
    }
    EXPECT_NE(gb::refusal(m, gb::FEATURE_GENERATE).find("masked-language-model encoder (bert): it fills masked tokens"),
              std::string::npos);
}

} // namespace
