// What new users (teachers) tripped over in the desktop app, each checked by driving it: numbers in one format,
// ablation tables that keep the baseline's answer, WordPiece labels shown whole, ablated layers marked in the
// grid, BOS as the model is fed, an encoder's query on its mask, sliders that leave their values readable, the
// replay marked, a telling first head, and patching that says when its map is noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/head_scores.h"
#include "app_script.h"
#include "io/loader.h"
#include "number_format.h"
#include "test_util.h"
#include "tiny_encoder.h"
#include "tiny_llama.h"
#include "run/forward.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"

namespace {

// A tiny GPT-2 for these tests, written once into test_tmp/<name>.
const tiny_model& teach_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 3, s.n_head = 4, s.d_model = 32, s.n_ctx = 64, s.seed = 21;
        return write_tiny_gpt2(test_temp_dir("teach_model"), s);
    }();
    return tm;
}

// the number of decimals a formatted number shows ("1.52 M" -> 2, "762" -> 0)
int decimals(const std::string& s) {
    const size_t dot = s.find('.');
    if (dot == std::string::npos) return 0;
    size_t e = dot + 1;
    while (e < s.size() && isdigit((unsigned char)s[e])) e++;
    return (int)(e - dot - 1);
}

} // namespace

TEST(GuiTeach, NumberFormatIsShortAndNeverNegativeZero) {
    using gbui::format_number;
    EXPECT_EQ(format_number(379484), "379 k");
    EXPECT_EQ(format_number(1357770), "1.36 M");
    EXPECT_EQ(format_number(-1357770), "-1.36 M");
    EXPECT_EQ(format_number(41234), "41.2 k");
    EXPECT_EQ(format_number(6595), "6595");
    EXPECT_EQ(format_number(312.4), "312");
    EXPECT_EQ(format_number(4.123), "4.12");
    EXPECT_EQ(format_number(0.0523), "0.0523");
    EXPECT_EQ(format_number(0), "0");
    EXPECT_EQ(format_number(-0.0), "0");
    EXPECT_EQ(format_number(999999), "1.00 M") << "rounding carries into the next unit";
    EXPECT_EQ(format_number(9999.7), "10.0 k");
    EXPECT_EQ(format_number(2.5e9), "2.50 G");
    EXPECT_EQ(format_number(1.0 / 0.0), "inf");
    using gbui::format_delta;
    EXPECT_EQ(format_delta(0.0123), "+0.012");
    EXPECT_EQ(format_delta(-0.25), "-0.250");
    EXPECT_EQ(format_delta(-0.00004), "0.000") << "a change that rounds to zero has no sign";
    EXPECT_EQ(format_delta(0.00004), "0.000");
    EXPECT_EQ(gbui::shown_sign(-0.00004), 0);
    EXPECT_EQ(gbui::shown_sign(-0.0006), -1);
    // ticks: one unit and one number of decimals on every one of them (not "1.5e+06" over "762262")
    const std::vector<std::string> t = gbui::format_ticks({0, 381000, 762000, 1143000, 1524000});
    EXPECT_EQ(t, (std::vector<std::string>{"0", "0.38 M", "0.76 M", "1.14 M", "1.52 M"}));
    EXPECT_EQ(gbui::format_ticks({0, 2.5, 5, 7.5, 10}), (std::vector<std::string>{"0", "2.5", "5.0", "7.5", "10.0"}));
    EXPECT_EQ(gbui::format_ticks({0, 25000, 50000, 75000, 100000}),
              (std::vector<std::string>{"0", "25 k", "50 k", "75 k", "100 k"}));
}

// The app writes its numbers with that formatter: the residual chart's ticks share one format, KL is written as
// format_number writes it, and a Δp that rounds to zero shows as 0.000 (no sign).
TEST(GuiTeach, TheAppWritesNumbersInOneFormat) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--model " + sq(teach_model().dir) + " --prompt 'the cat sat on the mat. the cat'",
                               "wait\nclick No attention\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    const nlohmann::json& texts = st[0]["texts"];
    ASSERT_TRUE(texts.contains("residual tick 4")) << st[0].dump();
    const std::string top = texts["residual tick 4"];
    for (int k = 1; k <= 4; k++) {
        const std::string tk = texts["residual tick " + std::to_string(k)];
        EXPECT_EQ(decimals(tk), decimals(top)) << tk << " vs " << top;
        EXPECT_EQ(tk.find('e'), std::string::npos) << tk;
    }
    EXPECT_EQ(texts["next kl"], gbui::format_number(st[0]["kl"].get<double>()));
    int deltas = 0;
    for (auto it = texts.begin(); it != texts.end(); ++it)
        if (it.key().rfind("next dp ", 0) == 0) {
            const std::string d = it.value();
            deltas++;
            EXPECT_NE(d, "-0.000");
            EXPECT_TRUE(d == "0.000" || d[0] == '+' || d[0] == '-') << d;
        }
    EXPECT_GT(deltas, 3);
}

// Under an ablation the Next token table keeps the baseline's answer: on the embedded model "The United States of"
// is ‘ America’ (100 %); without attention the model ranks it far below the rows shown (0.05 %), yet it stays,
// pinned and said so, with its probability under the ablation. Without an ablation nothing is pinned.
TEST(GuiTeach, TheBaselinesAnswerIsPinnedInTheAblatedTable) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--prompt 'The United States of'", "wait\nprint\nclick No attention\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    ASSERT_EQ(st[0]["top1"], " America");
    for (const auto& row : st[0]["next_rows"]) EXPECT_EQ(row["pinned"], "") << row.dump();
    ASSERT_EQ(st[1]["ablation"], "no-attention");
    ASSERT_NE(st[1]["top1"], " America");
    const nlohmann::json& rows = st[1]["next_rows"];
    ASSERT_FALSE(rows.empty());
    const nlohmann::json* america = nullptr;
    for (const auto& row : rows)
        if (row["token"] == " America") america = &row;
    ASSERT_NE(america, nullptr) << "the baseline's top-1 is in the ablated table: " << rows.dump();
    EXPECT_EQ((*america)["pinned"], "baseline top-1");
    EXPECT_LT((*america)["prob"].get<double>(), rows[0]["prob"].get<double>());
    EXPECT_GT((*america)["base_prob"].get<double>(), 0.2);
    // it is pinned because the ablated model ranks it below every row shown by rank
    for (const auto& row : rows) {
        if (row["pinned"] == "") { EXPECT_GT(row["prob"].get<double>(), (*america)["prob"].get<double>()); }
    }
    const std::string note = st[1]["texts"]["next pinned"];
    EXPECT_NE(note.find("America"), std::string::npos) << note;
}

// Token text is shown whole where it goes into a widget's label: ImGui hides what follows "##" in a label, so
// BERT's ‘##s’ showed as ‘ and GPT-2's token ‘##’ as nothing. A tiny BERT's Next token rows (clickable under the
// lens tab) and the embedded model's attribution target picker (‘##’ typed in) show them.
TEST(GuiTeach, WordPieceLabelsAreShownWhole) {
    ASSERT_TRUE(have_app());
    const tiny_encoder tm = write_tiny_encoder(test_temp_dir("teach_bert") + "/m", {});
    int rc = -1;
    auto st = run_script("--model " + sq(tm.dir) + " --prompt 'the cats [MASK] on the mat'", "wait\ntab lens\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    const nlohmann::json& rows = st[0]["next_rows"];
    ASSERT_FALSE(rows.empty());
    int pieces = 0;
    for (size_t i = 0; i < rows.size(); i++) {
        const std::string tok = rows[i]["token"], shown = st[0]["texts"]["next label " + std::to_string(i)];
        EXPECT_EQ(shown, "\u2018" + tok + "\u2019") << "row " << i << " shows " << shown;
        pieces += tok.rfind("##", 0) == 0;
    }
    EXPECT_GT(pieces, 0) << "some rows are WordPiece continuations: " << rows.dump();
    st = run_script("--prompt 'The United States of'",
                    "wait\ntab attribution\nclick attribution target text\ntype ##\nkey enter\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["attribution_target"], "##");
    EXPECT_EQ(st[0]["texts"]["attribution target preview"], "\u2018##\u2019");
    bool row = false;
    for (auto it = st[0]["texts"].begin(); it != st[0]["texts"].end(); ++it)
        row |= it.key().rfind("next label ", 0) == 0 && it.value() == "\u2018##\u2019";
    EXPECT_TRUE(row) << "the picked target's row shows ‘##’: " << st[0]["texts"].dump();
}

// "No attention" on every layer crosses out every head of the grid, as an ablated head is crossed out; without an
// ablation nothing is, and a right-clicked head is crossed out as a head.
TEST(GuiTeach, LayersWithoutAttentionAreCrossedOutInTheGrid) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--model " + sq(teach_model().dir) + " --prompt 'the cat sat on the mat'",
                               "wait\nrclick head 1.2\nwait\nprint\nclick No attention\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    auto crossed = [](const nlohmann::json& j) {
        std::map<std::string, std::string> out;
        if (j.contains("texts"))
            for (auto it = j["texts"].begin(); it != j["texts"].end(); ++it)
                if (it.key().rfind("grid ablated ", 0) == 0) out[it.key().substr(13)] = it.value();
        return out;
    };
    EXPECT_EQ(crossed(st[0]), (std::map<std::string, std::string>{{"1.2", "head"}}));
    const auto all = crossed(st[1]);
    ASSERT_EQ(all.size(), 12u) << st[1]["texts"].dump();
    for (int l = 0; l < 3; l++)
        for (int h = 0; h < 4; h++) {
            const std::string k = std::to_string(l) + "." + std::to_string(h);
            ASSERT_TRUE(all.count(k)) << k;
            EXPECT_EQ(all.at(k), "no attention") << k;
        }
}

// A llama2.c model's tokenizer always starts with BOS: the prompt's first chip is <s>, and "prepend BOS" shows it
// ticked (and fixed), whether or not the box was ticked; a click on it changes neither. GPT-2 (no BOS of its own)
// still follows the box.
TEST(GuiTeach, TheBosCheckboxSaysWhatIsFed) {
    ASSERT_TRUE(have_app());
    const tiny_llama tl = write_tiny_llama2c(test_temp_dir("teach_llama2c"), tiny_llama_spec{});
    int rc = -1;
    auto st = run_script("--model " + sq(tl.model_path) + " --prompt 'hello there'",
                         "wait\nprint\nclick prepend BOS\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    for (const auto& j : st) {
        ASSERT_FALSE(j["tokens"].empty());
        EXPECT_NE(j["tokens"][0].get<std::string>().find("<s>"), std::string::npos) << j["tokens"]; // llama2.c's "\n<s>\n"
        EXPECT_EQ(j["texts"]["prepend BOS"], "ticked (the tokenizer adds it)");
    }
    EXPECT_EQ(st[0]["tokens"], st[1]["tokens"]);
    st = run_script("--model " + sq(teach_model().dir) + " --prompt 'the cat'", "wait\nprint\nclick prepend BOS\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0]["texts"]["prepend BOS"], "unticked");
    EXPECT_EQ(st[1]["texts"]["prepend BOS"], "ticked");
    EXPECT_EQ(st[1]["tokens"].size(), st[0]["tokens"].size() + 1);
}

// An encoder: the query the panels show is the [MASK] (the first one), not the [SEP] after it, until a chip is
// clicked; without a mask it is the last token. "prepend BOS" and the Demos combo (which an encoder cannot use, as
// the kind table says) are not shown, and a script cannot start a demo; a GPT-2 shows both, with every demo.
TEST(GuiTeach, AnEncodersQueryIsItsMaskAndItShowsNoBosOrDemos) {
    ASSERT_TRUE(have_app());
    const tiny_encoder tm = write_tiny_encoder(test_temp_dir("teach_bert_query") + "/m", {});
    int rc = -1;
    auto st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat [MASK] on the mat'",
                         "wait\nprint\nclick token 1\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    ASSERT_EQ(st[0]["tokens"][3], "[MASK]");
    EXPECT_EQ(st[0]["query_token"], 3) << "the mask, not [SEP] (" << st[0]["tokens"].size() - 1 << ")";
    EXPECT_EQ(st[0]["fill_position"], 3);
    EXPECT_EQ(st[1]["query_token"], 1) << "a clicked chip wins";
    EXPECT_FALSE(st[0]["texts"].contains("prepend BOS"));
    EXPECT_FALSE(st[0]["texts"].contains("demos"));
    // no mask: the last token, as before
    st = run_script("--model " + sq(tm.dir) + " --prompt 'the cat sat'", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["query_token"], (int)st[0]["tokens"].size() - 1);
    const std::string demo = test_temp_dir("teach_bert_demo") + "/demo.txt";
    std::ofstream(demo) << "wait\ndemo induction\n";
    const command_result r = run_command(xvfb_app("--model " + sq(tm.dir) + " --script " + sq(demo)));
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("not offered"), std::string::npos) << r.err;
    st = run_script("--model " + sq(teach_model().dir) + " --prompt 'the cat'", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["texts"]["prepend BOS"], "unticked");
    EXPECT_EQ(st[0]["texts"]["demos"], "induction,prev-token,lens,ioi,break-it,temperature");
    EXPECT_EQ(st[0]["query_token"], (int)st[0]["tokens"].size() - 1);
}

// Patching with a clean–corrupted gap under 1 logit says above the maps that they are then noise, and offers a
// contrast the corruption moves (the corrupted prompt's own most probable other token), which a click sets; a
// gap of a few logits says nothing; the same prompt twice says to change a word. On the embedded model, ‘ dog’
// against the app's default contrasts: "A quick brown fox jumps over the lazy" moves it 0.04 logit (against
// ‘ horse’, the clean top-2), "... over the old" 16.8 (against ‘est’, the corrupted prompt's top-1).
TEST(GuiTeach, PatchingSaysWhenTheGapIsTooSmallToRead) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--prompt 'The quick brown fox jumps over the lazy'",
                               "wait\ntab patching\ncorrupt A quick brown fox jumps over the lazy\nwait\nprint\n"
                               "click patching use suggested contrast\nwait\nprint\n"
                               "corrupt The quick brown fox jumps over the old\nwait\nprint\n"
                               "corrupt The quick brown fox jumps over the lazy\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 4u);
    const nlohmann::json& p = st[0]["patching"];
    ASSERT_LT(std::fabs(p["clean"].get<double>() - p["corrupt"].get<double>()), 1.0) << p.dump();
    ASSERT_TRUE(st[0]["texts"].contains("patching gap")) << st[0]["texts"].dump();
    const std::string note = st[0]["texts"]["patching gap"];
    EXPECT_NE(note.find("noise"), std::string::npos) << note;
    const size_t q = note.rfind("\u2018");
    ASSERT_NE(q, std::string::npos) << note;
    // the contrast the click set is the token the note names (‘·our’ is " our")
    std::string named = note.substr(q + 3, note.rfind("\u2019") - q - 3);
    for (size_t at = named.find("\u00b7"); at != std::string::npos; at = named.find("\u00b7")) named.replace(at, 2, " ");
    EXPECT_EQ(st[1]["patching_contrast"], named);
    EXPECT_EQ(st[1]["patching"]["contrast"], named);
    EXPECT_GE(std::fabs(st[2]["patching"]["clean"].get<double>() - st[2]["patching"]["corrupt"].get<double>()), 1.0);
    EXPECT_FALSE(st[2]["texts"].contains("patching gap")) << st[2]["texts"]["patching gap"];
    const std::string same = st[3]["texts"].value("patching gap", "");
    EXPECT_NE(same.find("is the clean one"), std::string::npos) << same;
}

namespace {

// rectangles [x0, y0, x1, y1] overlap
bool overlap(const nlohmann::json& a, const nlohmann::json& b) {
    return a[0].get<float>() < b[2].get<float>() && b[0].get<float>() < a[2].get<float>() &&
           a[1].get<float>() < b[3].get<float>() && b[1].get<float>() < a[3].get<float>();
}

} // namespace

// The sliders' values are written beside their tracks, where the handle cannot cover them (the Continuation's
// tokens and temperature, the replay, the Sampling tab's); the replay marks the token it stands at in the
// continuation (the last token the panels show).
TEST(GuiTeach, SliderValuesAreReadableAndTheReplayMarksItsToken) {
    ASSERT_TRUE(have_app());
    int rc = -1;
    const auto st = run_script("--model " + sq(teach_model().dir) + " --prompt 'the cat sat'",
                               "wait\ngen-tokens 8\nclick Generate\nwait\ngen-step 3\nwait\nprint\n"
                               "tab sampling\nwait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 2u);
    for (const char* name : {"tokens", "temperature", "replay"}) {
        const std::string n = std::string("slider ") + name;
        ASSERT_TRUE(st[0]["drawn"].contains(n) && st[0]["drawn"].contains(n + " text")) << n << " " << st[0]["drawn"].dump();
        EXPECT_FALSE(overlap(st[0]["drawn"][n], st[0]["drawn"][n + " text"])) << n;
    }
    EXPECT_EQ(st[0]["texts"]["slider tokens"], "8 tokens");
    EXPECT_EQ(st[0]["texts"]["slider replay"], "replay: step 3 of 8");
    for (const char* name : {"temperature 0", "temperature 1", "temperature 2", "sampling tokens"}) {
        const std::string n = std::string("slider ") + name;
        ASSERT_TRUE(st[1]["drawn"].contains(n)) << n << " " << st[1]["drawn"].dump();
        EXPECT_FALSE(overlap(st[1]["drawn"][n], st[1]["drawn"][n + " text"])) << n;
    }
    // step 3: the panels show the prompt and 3 generated tokens; the third is marked
    ASSERT_EQ(st[0]["gen_step"], 3);
    const nlohmann::json& toks = st[0]["tokens"];
    ASSERT_EQ(toks.size(), st[0]["prompt_tokens"].get<size_t>() + 3);
    EXPECT_EQ(st[0]["texts"]["replay mark"], toks.back());
    ASSERT_TRUE(st[0]["drawn"].contains("replay mark"));
}

// A model opens on a telling head: on the embedded model and its default prompt (which repeats "The cat"), the
// best induction head by the scores on the prompt, as core scores them; --select-head wins over it.
TEST(GuiTeach, TheFirstHeadIsTheBestInductionHead) {
    ASSERT_TRUE(have_app());
    const std::string prompt = "The cat sat on the mat. The cat";
    int rc = -1;
    auto st = run_script("--prompt " + sq(prompt), "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    const gb::model m = gb::load_model(st[0]["model"].get<std::string>());
    gb::record rec;
    gb::run_forward(rec, m, gb::encode_prompt(m.tok, prompt, false));
    const gb::head_scores sc = gb::score_heads(rec);
    ASSERT_GT(sc.n_induction_positions, 0);
    const std::vector<float>& ind = sc.score[gb::SCORE_INDUCTION];
    const int best = (int)(std::max_element(ind.begin(), ind.end()) - ind.begin());
    ASSERT_GE(ind[best], 0.2f) << "the embedded model has an induction head";
    EXPECT_EQ(st[0]["selected_head"], std::to_string(best / sc.n_head) + "." + std::to_string(best % sc.n_head));
    EXPECT_NE(st[0]["selected_head"], "0.0");
    st = run_script("--prompt " + sq(prompt) + " --select-head 1.2", "wait\nprint\n", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0]["selected_head"], "1.2");
}
