// Encoder–decoders (BART, mBART, Marian): core's forward against the double-precision reference (tiny_seq2seq.h)
// on tiny random models the tests write in HF layout, under every ablation and both matmul kernels: both stacks'
// records at every hook point, the cross-attention pattern, the logits; the token embedding under each name HF
// files use, an untied head, stacks of different depths; generation through the cache; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/head_scores.h"
#include "analysis/learn.h"
#include "analysis/lens.h"
#include "io/loader.h"
#include "io/safetensors.h"
#include "kernels/softmax.h"
#include "model/kind.h"
#include "run/generate.h"
#include "run/seq2seq.h"
#include "test_util.h"
#include "tiny_encoder.h" // keep_every_point, encoder_ablation_cases
#include "tiny_llama.h"   // expect_record_matches
#include "tiny_model.h"   // test_temp_dir
#include "tiny_seq2seq.h"
#include "util/error.h"

namespace {

std::vector<int> decoder_input(const tiny_seq2seq& m, int n, uint32_t seed) {
    std::vector<int> ids = random_tokens(n - 1, m.spec.vocab, seed);
    ids.insert(ids.begin(), m.decoder_start_id);
    return ids;
}

// A tiny folder of the family with the default shape, written under a name of its own, and that folder loaded.
struct family_folder {
    tiny_seq2seq tm;
    gb::model m;
};
family_folder write_and_load(const std::string& family, uint32_t seed, const std::string& name) {
    seq2seq_spec s;
    s.family = family;
    s.seed = seed;
    family_folder f;
    f.tm = write_tiny_seq2seq(test_temp_dir(name + family), s);
    f.m = gb::load_model(f.tm.dir);
    return f;
}

void expect_seq2seq_matches(const seq2seq_spec& s, const std::string& label,
                            const std::vector<std::pair<std::string, gb::ablation>>& cases) {
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_core_" + label), s);
    const std::vector<int> source = random_tokens(9, s.vocab, s.seed + 11);
    const std::vector<int> target = decoder_input(tm, 7, s.seed + 13);
    for_each_matmul([&] {
        const gb::model m = gb::load_model(tm.dir);
        ASSERT_TRUE(gb::is_seq2seq(m));
        for (const auto& [name, ab] : cases) {
            gb::seq2seq_record got;
            gb::run_seq2seq(got, m, source, target, ab, keep_every_point());
            const ref_seq2seq want = reference_seq2seq(tm, source, target, ab);
            const std::string where = label + ", " + name;
            expect_record_matches(got.encoder, want.encoder, where + ", encoder");
            expect_record_matches(got.decoder, want.decoder, where + ", decoder");
            EXPECT_LT(max_scaled_error(got.decoder.flat(gb::HOOK_CROSS_PATTERN), want.cross.attention), 1e-4) << where << ": cross-attention";
            EXPECT_EQ(got.decoder.n_source, (int)source.size());
            EXPECT_EQ(got.decoder.source_pieces.size(), source.size());
        }
    });
}

// The encoders' cases (layers 0 and 1, heads 0.1 and 1.3) under the shared-index convention
TEST(Seq2seq, BartMatchesReferenceUnderEveryAblation) { expect_seq2seq_matches({}, "bart", encoder_ablation_cases()); }

TEST(Seq2seq, MbartPreLnMatchesReferenceUnderEveryAblation) {
    seq2seq_spec s;
    s.family = "mbart";
    s.seed = 3;
    expect_seq2seq_matches(s, "mbart", encoder_ablation_cases());
}

TEST(Seq2seq, MarianSinusoidsAndSwishMatchReferenceUnderEveryAblation) {
    seq2seq_spec s;
    s.family = "marian";
    s.seed = 5;
    expect_seq2seq_matches(s, "marian", encoder_ablation_cases());
}

// HF files keep the tied embedding as model.shared, as the decoder's embed_tokens only (bart-large-cnn), or under
// every name; Marian's older conversions store the sinusoids; a head of its own; no scale_embedding
TEST(Seq2seq, EmbeddingNamesUntiedHeadAndStoredSinusoids) {
    const std::vector<std::pair<std::string, gb::ablation>> none = {{"none", {}}};
    seq2seq_spec s;
    s.embed_stored_as = "decoder";
    expect_seq2seq_matches(s, "bart_decoder_embed", none);
    s.embed_stored_as = "all";
    s.seed = 7;
    expect_seq2seq_matches(s, "bart_all_embed", none);
    s.embed_stored_as = "shared";
    s.tied = false;
    s.scale_embedding = 1;
    expect_seq2seq_matches(s, "bart_untied_scaled", none);
    seq2seq_spec mr;
    mr.family = "marian";
    mr.marian_positions_stored = true;
    mr.scale_embedding = 0;
    expect_seq2seq_matches(mr, "marian_stored_positions", none);
}

// Stacks of different depths: a layer only the encoder has is ablated there and nowhere else
TEST(Seq2seq, StacksOfDifferentDepthsShareTheLayerIndex) {
    seq2seq_spec s;
    s.family = "mbart";
    s.enc_layers = 3;
    s.dec_layers = 2;
    s.seed = 9;
    std::vector<std::pair<std::string, gb::ablation>> cases(3);
    cases[0].first = "none";
    cases[1].first = "no-attention[2]", cases[1].second.no_attention = layers_on({2});
    cases[2].first = "no-layernorm[0,1,2] (every encoder layer, every decoder layer)";
    cases[2].second.no_layernorm = layers_on({0, 1, 2});
    expect_seq2seq_matches(s, "mbart_3_2", cases);
    const gb::ablation only_encoder = gb::stack_ablation(cases[1].second, 2, 4);
    EXPECT_FALSE(only_encoder.no_attention.on) << "the decoder has no layer 2: nothing of it is ablated there";
}

// Cross-attention rows are distributions over the source, and the decoder's first row does not see later targets
TEST(Seq2seq, CrossAttentionRowsSpanTheSourceAndSelfAttentionIsCausal) {
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_rows"), {});
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> source = random_tokens(12, 120, 1), target = decoder_input(tm, 5, 2);
    gb::seq2seq_record r;
    gb::run_seq2seq(r, m, source, target);
    const int S = 12, T = 5;
    ASSERT_EQ(r.decoder.flat(gb::HOOK_CROSS_PATTERN).size(), (size_t)2 * 4 * T * S);
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 4; h++) {
            const float* c = r.decoder.cross_head(l, h);
            for (int t = 0; t < T; t++) {
                double sum = 0;
                for (int j = 0; j < S; j++) sum += c[t * S + j];
                EXPECT_NEAR(sum, 1.0, 1e-5);
            }
            const float* p = r.decoder.head(l, h);
            for (int t = 0; t < T; t++)
                for (int j = t + 1; j < T; j++) EXPECT_EQ(p[t * T + j], 0.0f);
        }
    EXPECT_TRUE(r.decoder.causal);
    EXPECT_FALSE(r.encoder.causal);
}

// Greedy translation through the cache equals re-running the whole target each step and taking the argmax
TEST(Seq2seq, GreedyTranslationThroughTheCacheMatchesFullRuns) {
    for (const char* family : {"bart", "marian"}) {
        seq2seq_spec s;
        s.family = family;
        s.std = 0.6f; // peaked distributions: no near-ties between the two ways of computing the logits
        const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir(std::string("s2s_gen_") + family), s);
        const gb::model m = gb::load_model(tm.dir);
        const std::vector<int> source = random_tokens(8, 120, 4);
        gb::ablation ab;
        ab.heads = {{1, 2}};
        const gb::generation g = gb::translate(m, source, 6, {}, ab);
        ASSERT_FALSE(g.ids.empty());
        std::vector<int> target = {m.config.decoder_start_id};
        for (size_t i = 0; i < g.ids.size(); i++) {
            if (i == 0 && m.config.forced_bos_id >= 0) { // BART: generate puts <s> first, as HF's does
                EXPECT_EQ(g.ids[0], m.config.forced_bos_id) << family;
                target.push_back(g.ids[0]);
                continue;
            }
            const ref_seq2seq ref = reference_seq2seq(tm, source, target, ab);
            const int V = 120, last = (int)target.size() - 1;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (ref.logits[(size_t)last * V + v] > ref.logits[(size_t)last * V + best]) best = v;
            EXPECT_EQ(g.ids[i], best) << family << ": step " << i;
            target.push_back(g.ids[i]);
        }
        EXPECT_EQ(g.hit_eos, g.ids.back() == m.config.eos_id);
    }
}

// mBART's source template (text </s> en_XX) and the decoder's input (its start token, then the text)
TEST(Seq2seq, SourceTemplateAndTargetStart) {
    seq2seq_spec s;
    s.family = "mbart";
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_tok"), s);
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> src = gb::source_ids(m, "the cat sat");
    ASSERT_GE(src.size(), 5u);
    EXPECT_EQ(src[src.size() - 2], 2) << "</s>";
    EXPECT_EQ(src.back(), s.vocab - 1) << "en_XX";
    EXPECT_EQ(gb::token_text(m.tok, src[0]), " the");
    const std::vector<int> tgt = gb::target_ids(m, "the cat");
    EXPECT_EQ(tgt.front(), m.config.decoder_start_id);
    EXPECT_EQ(tgt.size(), 3u);
}

// The decoder reads what HF trains it on, shift_tokens_right(tokenizer(text_target)): BART's target frame puts <s>
// after the start token ([2, 0, the, cat]), Marian's puts nothing ([pad, the, cat]); BART's config forces <s> as the
// first generated token, Marian's forces nothing. (Without <s>, a BART decoder reads an input it never saw.)
TEST(Seq2seq, BartTargetStartsWithBosAsHfTrainsIt) {
    for (const char* family : {"bart", "marian"}) {
        seq2seq_spec s;
        s.family = family;
        const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir(std::string("s2s_bos_") + family), s);
        const gb::model m = gb::load_model(tm.dir);
        const std::vector<int> body = gb::encode(m.tok, "the cat");
        std::vector<int> want = {tm.decoder_start_id};
        if (std::string(family) == "bart") want.push_back(0); // <s>
        want.insert(want.end(), body.begin(), body.end());
        EXPECT_EQ(gb::target_ids(m, "the cat"), want) << family;
        EXPECT_EQ(m.config.forced_bos_id, std::string(family) == "bart" ? 0 : -1) << family;
        const gb::generation g = gb::translate(m, gb::source_ids(m, "the cat"), 3, {});
        ASSERT_FALSE(g.ids.empty());
        if (std::string(family) == "bart") {
            EXPECT_EQ(g.ids[0], 0) << "generate forces <s> first";
        }
    }
}

// A layer only the encoder has can be ablated (the decoder is left alone); one neither stack has is an error
// naming the range both share (a distilled BART has 12 encoder and 6 decoder layers).
TEST(Seq2seq, CliAblatesALayerOnlyTheEncoderHas) {
    seq2seq_spec s;
    s.family = "marian";
    s.enc_layers = 3;
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_enc_only"), s);
    const std::string run = std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli run --model '" + tm.dir +
                            "' --source 'the cat' --target-text 'the' --ablate no-attention";
    const command_result base = run_command(run + " --layers 0 --json '" + tm.dir + "/a.json'");
    ASSERT_EQ(base.code, 0) << base.err;
    const command_result enc = run_command(run + " --layers 2");
    EXPECT_EQ(enc.code, 0) << enc.err;
    EXPECT_NE(enc.out.find("ablation: no-attention[2]"), std::string::npos) << enc.out;
    const command_result bad = run_command(run + " --layers 3");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("ablation layer 3 is outside the model (layers 0..2)"), std::string::npos) << bad.err;
}

// run --keep on an encoder–decoder writes both stacks' points: the encoder's as <point>.npy, the decoder's as
// decoder_<point>.npy, its cross-attention's among them (--keep was silently ignored: exit 0, no files)
TEST(Seq2seq, CliKeepWritesBothStacksPoints) {
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_keep"), {});
    const std::string out = test_temp_dir("s2s_keep_out");
    const command_result r = run_command(std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli run --model '" + tm.dir +
                                         "' --source 'the cat' --target-text 'the' --keep z,cross_out,resid_stream --npy-dir '" +
                                         out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* f : {"z.npy", "resid_stream.npy", "decoder_z.npy", "decoder_cross_out.npy", "decoder_resid_stream.npy",
                          "cross_attention.npy", "decoder_attention.npy", "target_tokens.npy", "logits.npy"})
        EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
    EXPECT_FALSE(std::filesystem::exists(out + "/cross_out.npy")) << "the encoder has no cross-attention";
}

TEST(Seq2seq, ErrorsNameWhatIsWrong) {
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_err"), {});
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> target = {m.config.decoder_start_id};
    gb::seq2seq_record r;
    expect_gb_error([&] { gb::run_seq2seq(r, m, {}, target); }, "empty source");
    expect_gb_error([&] { gb::run_seq2seq(r, m, random_tokens(41, 120, 1), target); }, "source too long: 41 tokens");
    expect_gb_error([&] { gb::run_seq2seq(r, m, {1, 2}, {}); }, "empty target");
    expect_gb_error([&] { gb::run_seq2seq(r, m, {1, 500}, target); }, "token id 500 is outside the vocabulary");
    expect_gb_error([&] { gb::generate(m, {1, 2}, 3, {}); }, "is an encoder–decoder");
    gb::record plain;
    expect_gb_error([&] { gb::run_forward(plain, m, {1, 2}); }, "reads the encoder's output");
    // a missing cross-attention tensor is named
    const std::string broken = test_temp_dir("s2s_missing");
    std::filesystem::create_directories(broken);
    std::filesystem::copy_file(tm.dir + "/config.json", broken + "/config.json");
    {
        const gb::safetensors_file f = gb::open_safetensors(tm.dir + "/model.safetensors");
        std::vector<gb::st_out> keep;
        for (const auto& [name, t] : f.tensors)
            if (name != "model.decoder.layers.1.encoder_attn.k_proj.weight")
                keep.push_back({name, t.shape, gb::tensor_f32(f, t, t.shape), gb::ST_F32});
        gb::write_safetensors(broken + "/model.safetensors", keep);
    }
    expect_gb_error([&] { gb::load_model(broken); }, "model.decoder.layers.1.encoder_attn.k_proj.weight");
}

// A float32 .npy file's values (version 1 header) and shape, for checking what the CLI wrote
std::vector<float> read_npy_f32(const std::string& path, std::string& header) {
    std::ifstream f(path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (all.size() < 10) return {};
    const size_t hl = (uint8_t)all[8] | (size_t)(uint8_t)all[9] << 8;
    header = all.substr(10, hl);
    std::vector<float> v((all.size() - 10 - hl) / 4);
    std::memcpy(v.data(), all.data() + 10 + hl, v.size() * 4);
    return v;
}

// glassbox-cli: run --source / --target-text prints the tokens, the next target token and the alignment, and
// writes the three attentions as .npy (cross_attention.npy equal to the reference's); generate --source
// translates; info names the kind; the decoder-only commands are refused in one line.
TEST(Seq2seq, CliRunGenerateInfoAndRefusals) {
    seq2seq_spec s;
    s.family = "marian";
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_cli"), s);
    const std::string out = test_temp_dir("s2s_cli_out");
    command_result r = run_cli("run --model '" + tm.dir + "' --source 'the cat sat' --target-text 'the dog' --heads 1.2 --json '" +
                           out + ".json' --npy-dir '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("source (4): [55 \" the\"] [56 \" cat\"] [57 \" sat\"] [0 \"</s>\"]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("top 10 next target tokens:"), std::string::npos) << r.out;
    std::string header;
    const std::vector<float> cross = read_npy_f32(out + "/cross_attention.npy", header);
    EXPECT_NE(header.find("'shape': (2, 4, 3, 4)"), std::string::npos) << header;
    gb::ablation ab;
    ab.heads = {{1, 2}};
    const std::vector<int> src = {55, 56, 57, 0}, tgt = {s.vocab - 1, 55, 60 /* " dog" */};
    const ref_seq2seq ref = reference_seq2seq(tm, src, tgt, ab);
    EXPECT_LT(max_scaled_error(cross, ref.cross.attention), 1e-4);
    {
        // the alignment lists, for each decoder row, the token it writes (the next target token; the last row's
        // prediction) and the source token its cross-attention, averaged over layers and heads, reads most
        const int L = s.dec_layers, H = s.n_head, T = 3, S = 4, V = s.vocab;
        const std::vector<std::string> src_text = {" the", " cat", " sat", "</s>"};
        const size_t at = r.out.find("alignment (the token each decoder row writes");
        ASSERT_NE(at, std::string::npos) << r.out;
        std::istringstream lines(r.out.substr(at));
        std::string line;
        std::getline(lines, line);
        const gb::model m = gb::load_model(tm.dir);
        for (int t = 0; t < T; t++) {
            std::vector<double> avg(S, 0.0);
            for (int l = 0; l < L; l++)
                for (int h = 0; h < H; h++)
                    for (int j = 0; j < S; j++) avg[j] += ref.cross.attention[(((size_t)l * H + h) * T + t) * S + j];
            const int best = (int)(std::max_element(avg.begin(), avg.end()) - avg.begin());
            const double* last = &ref.logits[(size_t)(T - 1) * V];
            const int writes = t + 1 < T ? tgt[t + 1] : (int)(std::max_element(last, last + V) - last);
            std::getline(lines, line);
            EXPECT_EQ(line.rfind("  \"" + gb::token_text(m.tok, writes) + "\"", 0), 0u) << "row " << t << ": " << line;
            EXPECT_NE(line.find("<- \"" + src_text[best] + "\""), std::string::npos) << "row " << t << ": " << line;
        }
    }
    read_npy_f32(out + "/attention.npy", header);
    EXPECT_NE(header.find("'shape': (2, 4, 4, 4)"), std::string::npos) << header;
    read_npy_f32(out + "/decoder_attention.npy", header);
    EXPECT_NE(header.find("'shape': (2, 4, 3, 3)"), std::string::npos) << header;
    nlohmann::json j;
    std::ifstream(out + ".json") >> j;
    EXPECT_EQ(j["model"]["kind"], "encoder-decoder");
    EXPECT_EQ(j["model"]["kind_title"], "encoder–decoder (translation)");
    EXPECT_EQ(j["target_ids"], nlohmann::json(tgt));
    EXPECT_EQ(j["alignment"].size(), 3u);
    // without a target: the greedy translation
    r = run_cli("run --model '" + tm.dir + "' --source 'the cat' --max-new-tokens 4");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("translation: "), std::string::npos) << r.out;
    r = run_cli("generate --model '" + tm.dir + "' --source 'hello world' --max-new-tokens 5 --json '" + out + "_gen.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    std::ifstream(out + "_gen.json") >> j;
    const gb::model m = gb::load_model(tm.dir);
    EXPECT_EQ(j["ids"], nlohmann::json(gb::translate(m, gb::source_ids(m, "hello world"), 5, {}).ids));
    r = run_cli("info --model '" + tm.dir + "'");
    EXPECT_NE(r.out.find("\"positions\": \"sinusoidal\""), std::string::npos) << r.out;
    r = run_cli("heads --model '" + tm.dir + "' --prompt hi");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("is an encoder–decoder (marian)"), std::string::npos) << r.err;
    r = run_cli("lens --model '" + tm.dir + "' --prompt hi");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("give --source TEXT"), std::string::npos) << r.err;
    r = run_cli("run --model '" + tm.dir + "' --prompt hi");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("give --source TEXT"), std::string::npos) << r.err;
}

// glassbox-cli heads on an encoder–decoder scores its decoder's self-attention on the target (--target-text, or
// the greedy translation of --source), the stack lens and learn read: the scores are score_heads' on the decoder
// of the same run. What its kind does not offer is refused with the kind table's line, the option named.
TEST(Seq2seq, CliHeadsScoreTheDecoderAndTheKindTableRefuses) {
    seq2seq_spec s;
    s.family = "marian";
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_cli_heads"), s);
    const std::string out = test_temp_dir("s2s_cli_heads_out");
    const std::string model = "--model '" + tm.dir + "' ";
    command_result r = run_cli("heads " + model + "--source 'the cat sat' --target-text 'the dog' --json '" + out + ".json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("3 target tokens (the decoder's self-attention); the five heads that score highest"), std::string::npos)
        << r.out;
    const gb::model m = gb::load_model(tm.dir);
    const std::vector<int> src = {55, 56, 57, 0}, tgt = {s.vocab - 1, 55, 60 /* " dog" */};
    gb::seq2seq_record rs;
    gb::run_seq2seq(rs, m, src, tgt);
    const gb::head_scores hs = gb::score_heads(rs.decoder);
    nlohmann::json j;
    std::ifstream(out + ".json") >> j;
    EXPECT_EQ(j["tokens"], nlohmann::json(tgt));
    ASSERT_EQ(j["prev_token"].size(), (size_t)s.dec_layers);
    for (int l = 0; l < s.dec_layers; l++)
        for (int h = 0; h < s.n_head; h++) {
            EXPECT_NEAR(j["prev_token"][l][h].get<double>(), hs.score[gb::SCORE_PREV_TOKEN][(size_t)l * s.n_head + h], 1e-6);
            EXPECT_NEAR(j["entropy"][l][h].get<double>(), hs.score[gb::SCORE_ENTROPY][(size_t)l * s.n_head + h], 1e-6);
        }
    // without a target: the greedy translation's
    r = run_cli("heads " + model + "--source 'the cat'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<std::pair<std::string, std::pair<std::string, gb::feature>>> refused = {
        {"heads --repeat-random 5", {"--repeat-random: ", gb::FEATURE_INDUCTION_TEST}},
        {"attribute --prompt hi --target-id 1", {"", gb::FEATURE_ATTRIBUTION}},
        {"patch --prompt a --corrupt b --target-id 1", {"", gb::FEATURE_PATCHING}},
        {"break-it --prompt hi", {"", gb::FEATURE_BREAK_IT}},
        {"generate --source hi --max-new-tokens 2 --temperatures 0.5,1", {"--temperatures: ", gb::FEATURE_TEMPERATURES}},
        {"run --source hi --bos", {"--bos: ", gb::FEATURE_BOS}},
        {"run --source hi --experts 0.0", {"--experts: ", gb::FEATURE_EXPERTS}},
    };
    for (const auto& [args, why] : refused) {
        const std::string cmd = args.substr(0, args.find(' '));
        r = run_cli(cmd + " " + model + args.substr(cmd.size() + 1));
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err, "error: " + why.first + gb::refusal(m, why.second) + "\n") << args;
    }
}

// The logit lens of an encoder–decoder reads its decoder: at each residual point the stream through the final
// norm (mBART's; none in Post-LN Marian) and the LM head with final_logits_bias, against the double reference's
// stream read the same way; its last point is the run's own prediction; the points are named for the decoder;
// `glassbox-cli lens --source` prints and writes it.
TEST(Seq2seq, LogitLensReadsTheDecoder) {
    for (const char* family : {"marian", "mbart"}) {
        SCOPED_TRACE(family);
        const family_folder f = write_and_load(family, 9, "s2s_lens_");
        const tiny_seq2seq& tm = f.tm;
        const seq2seq_spec& s = tm.spec;
        const gb::model& m = f.m;
        const std::vector<int> source = random_tokens(5, s.vocab, 31), target = decoder_input(tm, 4, 33);
        const int L = s.dec_layers, T = (int)target.size(), V = s.vocab, d = s.d_model, P = 2 * L + 1, k = 3;
        for (const gb::ablation& ab : {gb::ablation{}, [] { gb::ablation a; a.no_layernorm = {true, {0, 1}}; return a; }()}) {
            const ref_seq2seq ref = reference_seq2seq(tm, source, target, ab);
            gb::forward_options o;
            o.keep.resid_stream = true;
            gb::seq2seq_record r;
            gb::run_seq2seq(r, m, source, target, ab, o);
            const gb::lens_result l = gb::logit_lens(r.decoder, m, ab, k);
            ASSERT_EQ(l.n_points, P);
            EXPECT_EQ(l.points, gb::resid_labels(L, true));
            EXPECT_EQ(l.points[1], "L0 self-attn");
            EXPECT_EQ(l.points[2], "L0 cross+mlp");
            const bool final_norm = tm.pre_ln && !ab.no_layernorm.covers_all(L);
            for (int p = 0; p < P; p++)
                for (int t = 0; t < T; t++) {
                    std::vector<double> x(ref.decoder.resid_at(p, t), ref.decoder.resid_at(p, t) + d);
                    if (final_norm) x = ref_layernorm(x, tm.at("model.decoder.layer_norm.weight"),
                                                      tm.at("model.decoder.layer_norm.bias"), 1, d, 1e-5, false);
                    std::vector<double> logit(V);
                    double mx = -1e300, sum = 0;
                    for (int v = 0; v < V; v++) {
                        double z = tm.at("final_logits_bias")[v];
                        for (int i = 0; i < d; i++) z += tm.at("model.shared.weight")[(size_t)v * d + i] * x[i];
                        mx = std::max(mx, logit[v] = z);
                    }
                    for (double z : logit) sum += std::exp(z - mx);
                    const int best = (int)(std::max_element(logit.begin(), logit.end()) - logit.begin());
                    const size_t o0 = ((size_t)p * T + t) * k;
                    EXPECT_EQ(l.top_ids[o0], best) << "point " << p << " token " << t;
                    EXPECT_NEAR(l.top_probs[o0], std::exp(logit[best] - mx) / sum, 1e-4) << "point " << p << " token " << t;
                }
            // the last point is the run's own prediction at every target position
            for (int t = 0; t < T; t++)
                EXPECT_EQ(l.top_ids[((size_t)(P - 1) * T + t) * k],
                          gb::top_k_probs(&r.decoder.logits[(size_t)t * V], V, 1)[0].id);
        }
    }
    seq2seq_spec s;
    s.family = "marian";
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_lens_cli"), s);
    const std::string out = test_temp_dir("s2s_lens_cli_out");
    command_result r = run_command(std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli lens --model '" + tm.dir +
                                   "' --source 'the cat sat' --target-text 'the dog' --json '" + out + ".json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("logit lens at the last target position (\" dog\")"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("L1 cross+mlp"), std::string::npos) << r.out;
    nlohmann::json j;
    std::ifstream(out + ".json") >> j;
    EXPECT_EQ(j["points"], nlohmann::json(gb::resid_labels(2, true)));
}

// make-random --arch marian writes an opus-mt-like folder (any shape) the loader opens, whose forward matches the
// double reference read from the same file; bench times both stacks and a translation of it, refuses --incremental.
TEST(Seq2seq, MakeRandomMarianAndItsBenchmark) {
    const std::string dir = test_temp_dir("s2s_random");
    command_result r = run_cli("make-random --arch marian --layers-n 2 --encoder-layers-n 3 --d-model 32 --heads-n 4 "
                           "--ff 48 --vocab 300 --ctx 40 --seed 4 --out '" + dir + "/m'");
    ASSERT_EQ(r.code, 0) << r.err;
    // 300 x 32 shared + 3 encoder layers (4 d^2 + 4 d + 2 d ff + ff + d + 4 d) + 2 decoder layers (twice the
    // attention and its norm): the parameter count it prints
    const long d = 32, ff = 48, attn = 4 * d * d + 4 * d, mlp = 2 * d * ff + ff + d, norm = 2 * d;
    const long params = 300 * d + 3 * (attn + norm + mlp + norm) + 2 * (2 * (attn + norm) + mlp + norm);
    EXPECT_NE(r.out.find("3 encoder + 2 decoder layers, d 32, 4 heads, ff 48, vocab 300, " + std::to_string(params) +
                         " parameters"), std::string::npos) << r.out;
    const gb::model m = gb::load_model(dir + "/m");
    ASSERT_TRUE(gb::is_seq2seq(m));
    EXPECT_EQ(m.config.model_type, "marian");
    EXPECT_EQ(m.encoder->config.n_layer, 3);
    EXPECT_EQ(m.config.n_layer, 2);
    EXPECT_EQ(m.config.decoder_start_id, 298);
    EXPECT_EQ(m.config.eos_id, 299);

    tiny_seq2seq tm; // the reference reads the weights from the file the CLI wrote
    tm.dir = dir + "/m";
    tm.spec.family = "marian";
    tm.spec.enc_layers = 3, tm.spec.dec_layers = 2, tm.spec.d_model = 32, tm.spec.n_head = 4, tm.spec.d_ff = 48;
    tm.spec.vocab = 300, tm.spec.n_pos = 40;
    tm.scale_embedding = true, tm.pre_ln = false;
    const gb::safetensors_file f = gb::open_safetensors(tm.dir + "/model.safetensors");
    for (const auto& [name, t] : f.tensors) tm.w[name] = gb::tensor_f32(f, t, t.shape);
    const std::vector<int> source = gb::source_ids(m, "the cat"), target = {298, 10, 20, 30};
    EXPECT_EQ(source.back(), 299); // the byte-level text, then EOS
    const ref_seq2seq ref = reference_seq2seq(tm, source, target, {});
    gb::seq2seq_record rec;
    gb::run_seq2seq(rec, m, source, target);
    EXPECT_LT(max_scaled_error(rec.decoder.logits, ref.logits), 1e-4);
    EXPECT_LT(max_scaled_error(rec.decoder.flat(gb::HOOK_CROSS_PATTERN), ref.cross.attention), 1e-4);

    r = run_cli("bench --model '" + dir + "/m' --tokens 4,9 --repeat 2 --json '" + dir + "/b.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("3 encoder + 2 decoder layers"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("translate (greedy, 16 source tokens"), std::string::npos) << r.out;
    nlohmann::json j;
    std::ifstream(dir + "/b.json") >> j;
    ASSERT_EQ(j.size(), 3u) << j.dump();
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ(j[i]["tokens"], i ? 9 : 4);
        EXPECT_GT(j[i]["median_ms"].get<double>(), 0.0);
        EXPECT_GT(j[i]["encoder_ms"].get<double>(), 0.0);
        EXPECT_LE(j[i]["min_ms"].get<double>(), j[i]["median_ms"].get<double>());
    }
    EXPECT_GT(j[2]["ms_per_token"].get<double>(), 0.0);
    EXPECT_GE(j[2]["translate_tokens"].get<int>(), 1);
    r = run_cli("bench --incremental --model '" + dir + "/m'");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("encoder–decoders do not have"), std::string::npos) << r.err;
    r = run_cli("make-random --arch marian --dtype F16 --out '" + dir + "/f16'");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("a random Marian is written in F32"), std::string::npos) << r.err;
    r = run_cli("make-random --encoder-layers-n 2 --out '" + dir + "/g'");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--encoder-layers-n goes with --arch marian"), std::string::npos) << r.err;
}

// Learn's walk through an encoder–decoder's decoder (Post-LN Marian with sinusoids, Pre-LN mBART): its numbers
// against the double reference (not against the record it reads), the Post-LN order of its steps, the
// cross-attention row over the source, the prediction; the parameter derivation adds up; `glassbox-cli learn
// --source`.
TEST(Seq2seq, LearnWalksTheDecoderWithItsCrossAttention) {
    for (const char* family : {"marian", "mbart"}) {
        const family_folder f = write_and_load(family, 5, "s2s_learn_");
        const tiny_seq2seq& tm = f.tm;
        const seq2seq_spec& s = tm.spec;
        const gb::model& m = f.m;
        const std::vector<int> source = random_tokens(6, s.vocab, 21), target = decoder_input(tm, 5, 23);
        const ref_seq2seq ref = reference_seq2seq(tm, source, target, {});
        const int d = s.d_model, S = (int)source.size(), T = (int)target.size(), layer = 1, head = 2, token = 3;
        gb::forward_options o;
        o.keep = gb::learn_keep(m.config.n_layer, layer);
        gb::seq2seq_record r;
        gb::run_seq2seq(r, m, source, target, {}, o);
        const gb::learn_walk w = gb::walk_through(m, r.decoder, token, layer, head);
        auto find = [&](const std::string& title) -> const gb::learn_step* {
            for (const gb::learn_step& st : w.steps)
                if (st.title.find(title) != std::string::npos) return &st;
            return nullptr;
        };
        auto expect_row = [&](const gb::learn_step* st, const double* want, const char* what) {
            ASSERT_NE(st, nullptr) << family << ": " << what;
            ASSERT_EQ(st->width, d) << what;
            double sq = 0;
            for (int i = 0; i < d; i++) sq += want[i] * want[i];
            for (size_t i = 0; i < st->values.size(); i++) EXPECT_NEAR(st->values[i], want[i], 1e-4 * std::max(1.0, std::fabs(want[i]))) << family << ": " << what << " [" << i << "]";
            EXPECT_NEAR(st->norm, std::sqrt(sq), 1e-4 * std::sqrt(sq)) << family << ": " << what;
        };
        const bool post = !tm.pre_ln;
        // the embedding: Marian's √d-scaled table plus the fixed sinusoid, mBART's learned positions at t + 2 then LN
        const gb::learn_step* emb = find("Embedding");
        expect_row(emb, ref.decoder.resid_at(0, token), "embedding");
        EXPECT_NE(emb->formula.find(post ? "PE[position]" : "P[position + 2]"), std::string::npos) << emb->formula;
        if (post) {
            EXPECT_NE(emb->note.find("sin(p / 10000^(2i/d))"), std::string::npos) << emb->note;
        }
        EXPECT_EQ(find("norm before attention") == nullptr, post) << family << ": Post-LN has no norm before a sublayer";
        // the stream after each sublayer, normed (Post-LN) or not
        const gb::learn_step* self_add = find("after self-attention");
        expect_row(self_add, ref.decoder.resid_at(2 * layer + 1, token), "after self-attention");
        EXPECT_EQ(self_add->formula, post ? "x ← LayerNorm(x + attn_out)" : "x ← x + attn_out");
        const gb::learn_step* cross_add = find("after cross-attention");
        ASSERT_NE(cross_add, nullptr);
        if (post) expect_row(cross_add, &ref.cross.resid[((size_t)layer * T + token) * d], "after cross-attention");
        else EXPECT_TRUE(cross_add->values.empty()) << "Pre-LN: the stream there is not kept";
        expect_row(find("after the MLP"), ref.decoder.resid_at(2 * layer + 2, token), "after the MLP");
        // the cross-attention row: head 2's weights over every source token, labelled by them
        const gb::learn_step* xa = find("Cross-attention of head 2");
        ASSERT_NE(xa, nullptr);
        ASSERT_EQ((int)xa->values.size(), S);
        EXPECT_EQ(xa->labels, r.decoder.source_pieces);
        EXPECT_EQ(xa->panel, "Cross-attention");
        for (int j = 0; j < S; j++)
            EXPECT_NEAR(xa->values[j], ref.cross.attention[(((size_t)layer * s.n_head + head) * T + token) * S + j], 1e-5) << j;
        // the end: no final norm in Post-LN; the prediction is the reference's top-1 with final_logits_bias
        EXPECT_EQ(find("Final norm") == nullptr, post);
        const gb::learn_step* un = find("Unembedding");
        ASSERT_NE(un, nullptr);
        EXPECT_NE(un->formula.find("final_logits_bias"), std::string::npos) << un->formula;
        const double* lg = &ref.logits[(size_t)token * s.vocab];
        const int best = (int)(std::max_element(lg, lg + s.vocab) - lg);
        EXPECT_EQ(un->labels[0], gb::token_text(m.tok, best));
        EXPECT_NEAR(un->values[0], lg[best], 1e-4 * std::max(1.0, std::fabs(lg[best])));
        // the parameters: both stacks, adding up to the model's count
        const std::vector<gb::param_line> p = gb::param_derivation(m);
        int64_t sum = 0;
        for (size_t i = 1; i + 1 < p.size(); i++) sum += p[i].count;
        EXPECT_EQ(sum, p.back().count);
        EXPECT_EQ(p.back().count, gb::count_params(m).total());
        EXPECT_NE(p[0].formula.find("16·L_dec·d²"), std::string::npos);
        // out of range: one line naming it
        try {
            gb::walk_through(m, r.decoder, T, 0, 0);
            ADD_FAILURE() << "token past the target";
        } catch (const gb::error& e) {
            EXPECT_NE(std::string(e.what()).find("outside the prompt"), std::string::npos) << e.what();
        }
    }
    // the command line: the decoder's walk for a given target, and refusals
    seq2seq_spec s;
    s.family = "marian";
    const tiny_seq2seq tm = write_tiny_seq2seq(test_temp_dir("s2s_learn_cli"), s);
    const std::string json = test_temp_dir("s2s_learn_cli_out") + "/learn.json";
    command_result c = run_cli("learn --model '" + tm.dir + "' --source 'the cat sat' --target-text 'the dog' --layer 1 --head 3 --json '" + json + "'");
    ASSERT_EQ(c.code, 0) << c.err;
    EXPECT_NE(c.out.find("the decoder's token 2"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("Cross-attention of head 3"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("16·L_dec·d²"), std::string::npos) << c.out;
    nlohmann::json j;
    std::ifstream(json) >> j;
    EXPECT_EQ(j["source_tokens"], nlohmann::json({" the", " cat", " sat", "</s>"}));
    EXPECT_EQ(j["tokens"].size(), 3u);
    c = run_cli("learn --model '" + tm.dir + "' --prompt hi");
    EXPECT_EQ(c.code, 2);
    EXPECT_NE(c.err.find("give --source TEXT"), std::string::npos) << c.err;
}

} // namespace
