// Shared test helpers.
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <sys/wait.h>

#include "kernels/gemm.h"
#include "tiny_model.h"
#include "tokenizer/internal.h"
#include "util/error.h"

void expect_gb_error(const std::function<void()>& fn, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const gb::error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

double max_scaled_error(const std::vector<float>& got, const std::vector<double>& want) {
    EXPECT_EQ(got.size(), want.size());
    double w = 0, scale = 1;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < std::min(got.size(), want.size()); i++) {
        // std::max(w, NaN) is w: a NaN or Inf in the result would compare as a match. Any non-finite value that
        // the reference does not have (the same way) is an infinite error.
        const double g = got[i], r = want[i];
        if (!std::isfinite(g) || !std::isfinite(r)) {
            bool same = (std::isnan(g) && std::isnan(r)) || g == r;
            if (!same) return std::numeric_limits<double>::infinity();
            continue;
        }
        w = std::max(w, std::abs(g - r));
    }
    return w / scale;
}

matmul_scope::matmul_scope(gb::matmul_kind k) : before(gb::matmul_kind_now()) { gb::set_matmul_kind(k); }
matmul_scope::~matmul_scope() { gb::set_matmul_kind(before); }

std::string amx_missing() {
    std::string why;
    return gb::amx_usable(&why) ? "" : "AMX kernel not usable here: " + why;
}

void for_each_matmul(const std::function<void()>& body) {
    const std::string missing = amx_missing();
    static bool told = false;
    if (!missing.empty() && !told) {
        told = true;
        std::cout << "[ NOTE     ] " << missing << " (its tests are skipped)\n";
    }
    for (gb::matmul_kind k : {gb::MATMUL_FP32, gb::MATMUL_AMX}) {
        if (k == gb::MATMUL_AMX && !missing.empty()) continue;
        matmul_scope kernel(k);
        SCOPED_TRACE(std::string("matmul kernel ") + gb::matmul_name(k));
        body();
    }
}

static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

command_result run_command(const std::string& cmd) {
    static int counter = 0;
    std::string dir = test_temp_dir("cmd_" + std::to_string(counter++));
    int status = std::system((cmd + " >" + dir + "/out 2>" + dir + "/err").c_str());
    command_result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir + "/out");
    r.err = slurp(dir + "/err");
    return r;
}

std::vector<int> random_tokens(int n, int vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int> t(n);
    for (int& v : t) v = (int)(rng() % (uint32_t)vocab);
    return t;
}

void expect_full_rows(const std::vector<float>& probs, int H, int T, int n_past, const std::string& label) {
    const int n_kv = n_past + T;
    ASSERT_EQ(probs.size(), (size_t)H * T * n_kv) << label;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            const float* p = &probs[((size_t)h * T + i) * n_kv];
            double s = 0;
            for (int j = 0; j < n_kv; j++) {
                ASSERT_GT(p[j], 0.0f) << label << " head " << h << " row " << i << " key " << j
                                      << (j > n_past + i ? " (above the diagonal)" : "");
                s += p[j];
            }
            ASSERT_NEAR(s, 1.0, 1e-5) << label << " head " << h << " row " << i;
        }
}

nlohmann::json run_json_encode(const std::string& json_path, const std::string& config_path, const nlohmann::json& in,
                               bool decode) {
    static int counter = 0;
    const std::string in_path = test_temp_dir("node_in_" + std::to_string(counter++)) + "/in.json";
    std::ofstream(in_path, std::ios::binary) << in.dump();
    command_result r = run_command("cd '" + node_dir + "' && node json_encode.js '" + json_path + "' '" + config_path +
                                   "'" + (decode ? " --decode" : "") + " < '" + in_path + "'");
    if (r.code != 0 || r.out.empty()) {
        std::fprintf(stderr, "node json_encode.js failed (%d): %s\n", r.code, r.err.substr(0, 2000).c_str());
        return nullptr;
    }
    return nlohmann::json::parse(r.out);
}

std::vector<int> expect_linear_encode_work(const gb::tokenizer& t, const std::string& small, const std::string& big,
                                           const std::string& what) {
    const uint64_t s0 = gb::encode_steps;
    gb::encode(t, small);
    const uint64_t s1 = gb::encode_steps;
    std::vector<int> ids = gb::encode(t, big);
    const double small_steps = (double)(s1 - s0), big_steps = (double)(gb::encode_steps - s1);
    const double k = (double)big.size() / (double)small.size();
    EXPECT_GT(small_steps, 0.0) << what << ": no encode steps counted";
    EXPECT_LE(big_steps, 1.5 * k * small_steps)
        << what << ": " << big_steps << " steps for " << big.size() << " bytes, " << small_steps << " for "
        << small.size() << " (" << big_steps / small_steps << " times the work for " << k << " times the text)";
    std::printf("%s: %.0f encode steps for %zu bytes, %.0f for %zu (%.2f times the work for %.2f times the text)\n",
                what.c_str(), big_steps, big.size(), small_steps, small.size(), big_steps / small_steps, k);
    return ids;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_all(const std::filesystem::path& p) { return read_file(p.string()); }

void write_all(const std::filesystem::path& p, const std::string& s) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << s;
}

double expect_gradient(const float* got, const std::vector<double>& want, size_t every, const std::string& label) {
    double scale = 0, worst = 0;
    for (size_t i = 0; i < want.size(); i += every) scale = std::max(scale, std::abs(want[i]));
    for (size_t i = 0; i < want.size(); i += every) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LE(worst, 2e-3 * std::max(scale, 1e-2)) << label << " (largest |gradient| " << scale << ")";
    return worst / std::max(scale, 1e-2);
}

std::string npy_shape(const std::string& bytes, const std::string& descr) {
    EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
    size_t hl = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    EXPECT_EQ((10 + hl) % 64, 0u) << "header padded to 64 bytes";
    std::string header = bytes.substr(10, hl);
    EXPECT_NE(header.find("'descr': '" + descr + "'"), std::string::npos) << header;
    EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
    size_t a = header.find("'shape': (") + 10, b = header.find(')', a);
    return header.substr(a, b - a);
}
