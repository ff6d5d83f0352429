// Small helpers shared by the test files: expected errors, scale-aware comparison, running commands.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.h"
#include "kernels/gemm.h"
#include "tokenizer/tokenizer.h"

// n token ids in [0, vocab), seeded (mt19937): the same prompt for the same seed.
std::vector<int> random_tokens(int n, int vocab, uint32_t seed);

// Runs fn and expects a gb::error whose message contains needle (a gtest failure otherwise).
void expect_gb_error(const std::function<void()>& fn, const std::string& needle);

// max |got - want| / max(1, max |want|): absolute for ordinary activations, relative to the tensor's scale
// where ablations (no LayerNorm, no residual) blow values up and float32 rounding grows with them.
// Infinite when got holds a NaN or Inf where want does not (or the other way round).
double max_scaled_error(const std::vector<float>& got, const std::vector<double>& want);

// A backward's gradient against central differences, at every `every`-th value (where they were taken): within
// 2e-3 of the largest |difference| (at least 1e-2), so not all zero where the differences are not. Returns the
// worst error relative to that scale.
double expect_gradient(const float* got, const std::vector<double>& want, size_t every, const std::string& label);

// Attention without the causal mask: every probability of probs [H][T][n_past + T] is above 0 (above the diagonal
// too) and each row sums to 1 over all keys; label names the case in failures.
void expect_full_rows(const std::vector<float>& probs, int H, int T, int n_past, const std::string& label);

// Runs body once per matmul kernel this machine can run (fp32 always, AMX where usable), with that kernel chosen
// for new weights and named in failure messages; says once why AMX was left out. Restores the previous choice.
void for_each_matmul(const std::function<void()>& body);

// Chooses a matmul kernel for a scope and puts the previous choice back when it ends, also when an assertion
// leaves the test early.
struct matmul_scope {
    gb::matmul_kind before;
    explicit matmul_scope(gb::matmul_kind k);
    ~matmul_scope();
};
// Why the AMX kernel cannot run here ("" when it can): for GTEST_SKIP.
std::string amx_missing();

struct command_result {
    int code = -1;
    std::string out, err;
};
// Runs a shell command (already quoted) with stdout and stderr captured.
command_result run_command(const std::string& cmd);
// Runs the built glassbox-cli with args (already quoted); inline, for GLASSBOX_BINARY_DIR is the test's own.
inline command_result run_cli(const std::string& args) {
    return run_command(std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli " + args);
}
// A .npy file's shape tuple text ("3, 4"), checking its magic, 64-byte header padding, dtype descr and C order.
std::string npy_shape(const std::string& bytes, const std::string& descr);
// The bytes of a file ("" when it cannot be read).
std::string read_file(const std::string& path);
// Writes text to path as it is (binary), replacing the file
void write_file(const std::string& path, const std::string& text);
// The same for filesystem paths; write_all also makes the file's folder
std::string read_all(const std::filesystem::path& p);
void write_all(const std::filesystem::path& p, const std::string& s);

// tests/node (the npm reference tokenizers, installed by tools/setup.sh --tests); inline, so that a test file's
// own constants built from it are initialised after it
inline const std::string node_dir = std::string(GLASSBOX_SOURCE_DIR) + "/tests/node";
// Runs tests/node/json_encode.js (@lenml/tokenizers) on a tokenizer.json + tokenizer_config.json with a JSON
// input: texts to encode, or id arrays to decode; its parsed output, null when node failed (the caller's
// NODE_RESULTS assertion then names tools/setup.sh --tests).
nlohmann::json run_json_encode(const std::string& json_path, const std::string& config_path, const nlohmann::json& in,
                               bool decode);
#define NODE_RESULTS(want, n)                                                                                   \
    ASSERT_EQ((want).size(), (size_t)(n)) << "could not run node " << node_dir                                 \
                                          << "/json_encode.js (@lenml/tokenizers): run tools/setup.sh --tests"

// Encodes small and big (about k times as long) and checks that gb::encode's work on big, counted by the tokenizer
// (gb::encode_steps: its lookups and comparisons; a count, so the machine's load cannot fail it), is at most 1.5 k
// times its work on small: linear growth, where a quadratic step would multiply it by k once more. what names the
// case in failures. Returns big's ids.
std::vector<int> expect_linear_encode_work(const gb::tokenizer& t, const std::string& small, const std::string& big,
                                           const std::string& what);
