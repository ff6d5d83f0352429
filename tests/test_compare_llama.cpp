// tools/compare_llama.py, the script that remakes docs/performance.md's table against llama.cpp: on the tiny shape,
// one round, it writes the files, runs both programs and prints the table with a row per type whose numbers are
// the runs' own (the JSON it writes beside it); bad options are one line and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_util.h"
#include "support/tiny_model.h"

namespace {

const std::string script = std::string(GLASSBOX_SOURCE_DIR) + "/tools/compare_llama.py";

std::string compare(const std::string& args) {
    return "/usr/bin/python3 '" + script + "' --build '" + std::string(GLASSBOX_BINARY_DIR) + "' " + args;
}

bool have_llama_cpp() {
    return std::filesystem::exists(std::string(GLASSBOX_SOURCE_DIR) + "/tests/llama_cpp/node_modules/node-llama-cpp");
}

std::vector<std::string> cells(const std::string& row) { // "| a | b |" -> {"a", "b"}
    std::vector<std::string> out;
    std::stringstream in(row);
    std::string c;
    std::getline(in, c, '|');
    while (std::getline(in, c, '|')) {
        const size_t a = c.find_first_not_of(' '), b = c.find_last_not_of(' ');
        if (a != std::string::npos) out.push_back(c.substr(a, b - a + 1));
    }
    return out;
}

} // namespace

TEST(CompareLlama, OneRoundOnTheTinyShapeGivesARowPerTypeFromItsRuns) {
    if (!have_llama_cpp()) GTEST_SKIP() << "no node-llama-cpp in tests/llama_cpp (tools/setup.sh --tests)";
    const std::string dir = test_temp_dir("compare_llama");
    command_result r = run_command(compare("--shape tiny --types Q8_0,Q4_K --rounds 1 --repeat 1 --prompt 8 --generate 4 "
                                           "--dir '" + dir + "' --out '" + dir + "/table.md' --json '" + dir + "/runs.json'"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(std::filesystem::exists(dir + "/tiny-Q8_0.gguf"));
    EXPECT_TRUE(std::filesystem::exists(dir + "/tiny-Q4_K.gguf"));
    EXPECT_NE(r.out.find("Machine: "), std::string::npos) << "the machine and its load above the table";
    EXPECT_NE(r.out.find("Load before "), std::string::npos);
    std::ifstream t(dir + "/table.md");
    const std::string table((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
    EXPECT_EQ(table, r.out) << "--out holds what it printed";
    nlohmann::json runs;
    std::ifstream(dir + "/runs.json") >> runs;
    std::stringstream lines(r.out);
    std::string line;
    int rows = 0;
    while (std::getline(lines, line)) {
        const std::vector<std::string> c = cells(line);
        if (c.size() != 10 || (c[0] != "Q8_0" && c[0] != "Q4_K")) continue;
        rows++;
        const nlohmann::json& o = runs["results"][c[0]]["ours"][0];
        const nlohmann::json& l = runs["results"][c[0]]["llama"][0];
        // one round: the medians are that round's numbers, as printed with one decimal
        EXPECT_NEAR(std::stod(c[1]), o["tokens_per_s"].get<double>(), 0.051) << line;
        EXPECT_NEAR(std::stod(c[2]), l["tokens_per_s"].get<double>(), 0.051) << line;
        EXPECT_NEAR(std::stod(c[3]), o["tokens_per_s"].get<double>() / l["tokens_per_s"].get<double>(),
                    0.006 * std::stod(c[3]) + 0.006) << line;
        EXPECT_NEAR(std::stod(c[4]), o["prompt_captured_ms"].get<double>(), 0.051) << line;
        EXPECT_NEAR(std::stod(c[6]), l["prompt_ms"].get<double>(), 0.051) << line;
        EXPECT_GT(o["peak_mb"].get<double>(), 1.0) << "each process's own peak";
        EXPECT_GT(l["peak_mb"].get<double>(), 1.0);
    }
    EXPECT_EQ(rows, 2) << r.out;
}

TEST(CompareLlama, BadOptionsAreOneLine) {
    for (const std::string& args : {std::string("--types Q9_9"), std::string("--rounds 0"),
                                    std::string("--build /nonexistent")}) {
        command_result r = run_command(compare(args + " --shape tiny --dir '" + test_temp_dir("compare_llama_bad") + "'"));
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err.rfind("compare_llama: ", 0), 0u) << args << ": " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    }
}
