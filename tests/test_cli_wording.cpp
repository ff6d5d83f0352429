// What the CLI and the app's --help say, read as a new user reads them: one default contrast for patch, atp,
// circuit and the app; patch names the position that restores the answer (not the largest magnitude); a target
// given without its space is answered with the token that has it; lens prints the K it was asked for; heads
// labels entropy's order; features does not write "L0" beside a layer name; glassbox --help lists everything.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/patching.h"
#include "io/loader.h"
#include "kernels/softmax.h"
#include "run/forward.h"
#include "test_util.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

std::vector<gb::token_prob> top_of(const gb::model& m, const std::vector<int>& ids) {
    gb::record r;
    gb::run_forward(r, m, ids);
    return gb::top_k_probs(r.last_logits(), m.config.vocab_size, 10);
}

} // namespace

// The rule itself: the corrupted prompt's top-1, unless that is the target; then the clean run's best other token.
TEST(CliWording, DefaultContrastRule) {
    std::vector<gb::token_prob> clean = {{5, 0.6f}, {7, 0.3f}, {9, 0.1f}}, corrupt = {{7, 0.5f}, {5, 0.4f}};
    std::string note;
    EXPECT_EQ(gb::default_contrast(clean, corrupt, 5, &note), 7);
    EXPECT_NE(note.find("corrupted prompt's top-1"), std::string::npos) << note;
    std::vector<gb::token_prob> same = {{5, 0.9f}, {9, 0.1f}};
    EXPECT_EQ(gb::default_contrast(clean, same, 5, &note), 7); // both predict 5: the clean top-2
    EXPECT_NE(note.find("clean prompt's top-2"), std::string::npos) << note;
}

// patch, atp and circuit without --target and --contrast choose what the app chooses, and say so.
TEST(CliWording, PatchAtpAndCircuitShareTheDefaultContrast) {
    const std::string dir = test_temp_dir("cli_wording_contrast");
    const std::string prompts = " --prompt 'the hat sat on' --corrupt 'the mat sat on'";
    gb::model m = gb::load_model(cli_test_model().dir);
    const std::vector<int> clean = ids_of(m, "the hat sat on"), corrupt = ids_of(m, "the mat sat on");
    const int target = top_of(m, clean)[0].id;
    const int contrast = gb::default_contrast(top_of(m, clean), top_of(m, corrupt), target, nullptr);
    int t = -1, c = -1;
    gb::choose_patch_tokens(t, c, m, clean, corrupt, {});
    EXPECT_EQ(t, target);
    EXPECT_EQ(c, contrast);
    for (const char* cmd : {"patch", "atp", "circuit"}) {
        command_result r = run_cli(std::string(cmd) + " " + M() + prompts + " --json " + dir + "/" + cmd + ".json");
        ASSERT_EQ(r.code, 0) << cmd << ": " << r.err;
        EXPECT_NE(r.out.find("target = the clean prompt's top-1"), std::string::npos) << cmd << ": " << r.out;
        auto j = nlohmann::json::parse(read_file(dir + "/" + cmd + ".json"));
        EXPECT_EQ(j["target"]["id"].get<int>(), target) << cmd;
        EXPECT_EQ(j["contrast"]["id"].get<int>(), contrast) << cmd;
    }
}

// Each residual point's line names the position with the largest value (the one that restores most), and shows
// the most negative one only when it goes further the other way.
TEST(CliWording, PatchNamesThePositionThatRestoresMost) {
    const std::string dir = test_temp_dir("cli_wording_patch");
    command_result r = run_cli("patch " + M() + " --prompt 'the hat sat on the' --corrupt 'the mat sat on the' --json " +
                           dir + "/p.json");
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = nlohmann::json::parse(read_file(dir + "/p.json"));
    const auto& rows = j["normalized"]["resid"];
    int checked = 0;
    for (const std::string& line : lines_of(r.out)) {
        const size_t at = line.find("restores most at");
        if (at == std::string::npos) continue;
        const auto& row = rows[checked++];
        int hi = 0, lo = 0;
        for (int i = 1; i < (int)row.size(); i++) {
            if (row[i].get<double>() > row[hi].get<double>()) hi = i;
            if (row[i].get<double>() < row[lo].get<double>()) lo = i;
        }
        EXPECT_EQ(std::stoi(line.substr(at + 16)), hi) << line;
        const bool hurts = row[lo].get<double>() < 0 && -row[lo].get<double>() > std::fabs(row[hi].get<double>());
        EXPECT_EQ(line.find("hurts most at") != std::string::npos, hurts) << line;
    }
    EXPECT_EQ(checked, (int)rows.size()) << r.out;
    EXPECT_EQ(r.out.find("best position"), std::string::npos) << r.out;
}

// On the default model "Mary" is two tokens and " Mary" one: the error suggests the spaced one.
TEST(CliWording, TargetWithoutItsSpaceSuggestsTheSpacedToken) {
    command_result r = run_cli("patch --prompt 'When Mary and John went out, John gave a book to' --corrupt "
                           "'When John and Mary went out, Mary gave a book to' --target Mary");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.err.find("did you mean ' Mary'"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// lens --top-k K prints K tokens at every point.
TEST(CliWording, LensPrintsTopK) {
    for (int k : {1, 5}) {
        command_result r = run_cli("lens " + M() + " --prompt 'the hat sat' --top-k " + std::to_string(k));
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_NE(r.out.find("top-" + std::to_string(k) + " at each"), std::string::npos) << r.out;
        int rows = 0;
        for (const std::string& line : lines_of(r.out)) {
            if (line.find("p(") == std::string::npos) continue;
            rows++;
            int quotes = (int)std::count(line.begin(), line.end(), '"');
            EXPECT_EQ(quotes, 2 * (k + 1)) << line; // K tokens and the target, each quoted
        }
        EXPECT_EQ(rows, 5) << r.out; // embed and two layers' attn and mlp
    }
}

// heads: entropy's row is labelled as the lowest (the most focused); the other scores are listed highest first.
TEST(CliWording, HeadsLabelsEntropyAsLowest) {
    command_result r = run_cli("heads " + M() + " --prompt 'the hat sat on the hat sat on'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("the highest-scoring heads"), std::string::npos) << r.out;
    int entropy_rows = 0;
    for (const std::string& line : lines_of(r.out)) {
        if (line.rfind("  ", 0) != 0 || line.find("undefined") != std::string::npos) continue;
        // "  name [(lowest)]  L.H value  L.H value ...": the values are every second word after the name
        std::istringstream in(line);
        std::vector<std::string> w;
        for (std::string x; in >> x;) w.push_back(x);
        const bool entropy = w[0] == "entropy";
        const size_t first = entropy ? 3 : 2;
        if (entropy) {
            EXPECT_EQ(w[1], "(lowest)") << line;
            entropy_rows++;
        }
        for (size_t i = first + 2; i < w.size(); i += 2) {
            const double prev = std::stod(w[i - 2]), cur = std::stod(w[i]);
            if (entropy) {
                EXPECT_LE(prev, cur) << line;
            } else {
                EXPECT_GE(prev, cur) << line;
            }
        }
    }
    EXPECT_EQ(entropy_rows, 1) << r.out;
}

// features names the count of active features "active", not "L0" (which reads as a layer).
TEST(CliWording, FeaturesSaysActiveNotL0) {
    command_result r = run_cli("features --prompt 'The cat sat on the mat' --top 2");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" active "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(" L0 "), std::string::npos) << r.out;
}

// glassbox --help lists the options and the script commands (it needs no display: it exits before the window).
TEST(CliWording, AppHelpListsOptionsAndScriptCommands) {
    const std::string app = std::string(GLASSBOX_BINARY_DIR) + "/glassbox";
    if (!std::filesystem::exists(app)) GTEST_SKIP() << "the app is not built here";
    command_result r = run_command(app + " --help");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* want : {"--model", "--compare", "--session", "--capture-budget", "--script", "--screenshot",
                             "--ui-scale", "Script commands", "screenshot FILE", "present on|off", "click LABEL"})
        EXPECT_NE(r.out.find(want), std::string::npos) << want;
    EXPECT_GT(std::count(r.out.begin(), r.out.end(), '\n'), 30) << r.out;
}

// glassbox-cli --help is made from the command table: every command the CLI knows is listed, with its summary.
TEST(CliWording, OverviewListsEveryCommandOfTheTable) {
    command_result bad = run_cli("help frobnicate"); // its error lists the table's names: "(run, generate, ...)"
    ASSERT_EQ(bad.code, 2);
    const size_t a = bad.err.find('('), b = bad.err.rfind(')');
    ASSERT_NE(a, std::string::npos) << bad.err;
    std::vector<std::string> names;
    std::istringstream in(bad.err.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(in, n, ',');) names.push_back(n.substr(n.find_first_not_of(' ')));
    EXPECT_GE(names.size(), 20u) << bad.err;
    command_result all = run_cli("--help");
    ASSERT_EQ(all.code, 0) << all.err;
    for (const std::string& n : names) EXPECT_NE(all.out.find("\n  " + n + " "), std::string::npos) << n;
}

// attribute lists bias rows only for a model that has those biases: GPT-2 (W_o's bias, LayerNorm's) yes, Llama
// (no biases, RMSNorm) no; the parts still add up.
TEST(CliWording, AttributeShowsOnlyTheBiasesAModelHas) {
    const std::string dir = test_temp_dir("cli_wording_bias");
    ASSERT_EQ(run_cli("make-random --arch llama --layers-n 2 --d-model 64 --heads-n 4 --kv-heads-n 2 --ff 96 --vocab 300 "
                      "--ctx 32 --out " + dir + "/llama").code, 0);
    for (const auto& [model, biases] : {std::pair<std::string, bool>{M(), true}, {"--model " + dir + "/llama", false}}) {
        command_result r = run_cli("attribute " + model + " --prompt 'the cat sat' --target-id 3 --json " + dir + "/a.json");
        ASSERT_EQ(r.code, 0) << r.err;
        const auto j = nlohmann::json::parse(read_file(dir + "/a.json"));
        EXPECT_EQ(j["has_attn_bias"], biases) << model;
        EXPECT_EQ(j["has_final_bias"], biases) << model;
        if (!biases) {
            EXPECT_EQ(r.out.find("bias"), std::string::npos) << r.out;
            EXPECT_EQ(j["bias"], 0.0);
        }
    }
}
