// The GL compute attention equals its CPU twin (attention_cpu) within 1e-5 for many shapes, with and without
// grouped-query attention and a KV cache, with huge scores, causal and non-causal (encoders), and through whole
// model forwards; shader errors name the shader and carry the GL info log; the CLI's --backend gl matches
// --backend cpu and falls back.
// Tests skip only when no OpenGL 4.3 context exists at all; a context whose shaders fail is a failure.
#include <gtest/gtest.h>
#include <epoxy/gl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <cstdlib>
#include <thread>

#include "gl_attention.h"
#include "io/loader.h"
#include "run/forward.h"
#include "run/live.h"
#include "test_util.h"
#include "tiny_llama.h"
#include "tiny_model.h"
#include "util/error.h"

namespace {

const gb::gl_info& gl() {
    static gb::gl_info info = [] {
        gb::gl_info i = gb::gl_init_headless();
        if (i.context) std::printf("GL: %s, %s\n", i.renderer.c_str(), i.version.c_str());
        return i;
    }();
    return info;
}

// Skip only without any GL 4.3 context; a context whose shaders do not build fails the test.
#define NEED_GL()                                                                                                   \
    if (!gl().context) GTEST_SKIP() << "no OpenGL 4.3 context at all (" << gl().error << "): GL tests skipped";    \
    if (!gl().ok) FAIL() << "OpenGL context (" << gl().renderer << ") but the GL attention path failed: " << gl().error

// max |a - b|, +inf when either side holds a non-finite value (std::max would drop a NaN)
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
    double w = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
        w = std::max(w, (double)std::abs(a[i] - b[i]));
    }
    return w;
}

// max |a - b| / max(1, max |a|): logits reach ~20 here, where a float's spacing is 2e-6 and three layers of
// reordered float sums (Eigen vs the shader) move them by ~10 spacings; probabilities (<= 1) stay absolute
double scaled_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double scale = 1;
    for (float x : a) scale = std::max(scale, (double)std::abs(x));
    return max_abs_diff(a, b) / scale;
}

struct case_spec {
    int T = 1, n_past = 0, H = 1, KV = 1, dh = 16;
    uint32_t seed = 1;
    float qk_scale = 1;       // > 1 with integer_qk: exact, huge scores
    bool integer_qk = false;  // q, k in {-2..2} * qk_scale: Q·Kᵀ is exact in float, so both paths see equal scores
    bool keep_probs = true;   // false: the GL path gets probs == nullptr
    int out_pad = 0;          // extra columns between output rows that the GL path must leave alone
    int window = 0;           // sliding window (0 = none)
    float softcap = 0, scale = 0; // Gemma 2's score soft-cap and scale (0 = none / 1/sqrt(dh))
    bool causal = true;       // false: every query sees every key (encoders)
};

struct case_result {
    double probs = 0, out = 0; // max abs differences
    double max_score = 0;      // largest |score| (scaled) of the case
    std::vector<float> p_gl;   // the GL path's probabilities [H][T][n_past+T] (empty without keep_probs)
};

case_result compare(const case_spec& c) {
    std::mt19937 rng(c.seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> small(-2, 2);
    const int n_kv = c.n_past + c.T, qs = c.H * c.dh + 2 * c.KV * c.dh, kvs = c.KV * c.dh, os = c.H * c.dh + c.out_pad;
    std::vector<float> q((size_t)c.T * qs), k((size_t)n_kv * kvs), v((size_t)n_kv * kvs);
    for (auto* b : {&q, &k})
        for (float& x : *b) x = c.integer_qk ? small(rng) * c.qk_scale : nd(rng) * c.qk_scale;
    for (float& x : v) x = nd(rng);
    std::vector<float> p_cpu((size_t)c.H * c.T * n_kv), p_gl(p_cpu.size(), -1);
    std::vector<float> o_cpu((size_t)c.T * os, 7.0f), o_gl(o_cpu.size(), 7.0f); // padding stays 7 on both
    gb::attention_args a{q.data(), k.data(), v.data(), qs, kvs, c.T, c.n_past, c.H, c.KV, c.dh, p_cpu.data(), o_cpu.data(), os};
    a.window = c.window, a.softcap = c.softcap, a.scale = c.scale, a.causal = c.causal;
    gb::attention_cpu(a);
    a.probs = c.keep_probs ? p_gl.data() : nullptr;
    a.out = o_gl.data();
    gb::attention_gl(a);
    case_result r;
    r.probs = c.keep_probs ? max_abs_diff(p_cpu, p_gl) : 0;
    r.out = max_abs_diff(o_cpu, o_gl);
    const float scale = 1.0f / std::sqrt((float)c.dh);
    for (int i = 0; i < c.T; i++)
        for (int h = 0; h < c.H; h++)
            for (int j = 0; j < (c.causal ? c.n_past + i + 1 : n_kv); j++) {
                double dot = 0;
                for (int d = 0; d < c.dh; d++)
                    dot += (double)q[(size_t)i * qs + h * c.dh + d] * k[(size_t)j * kvs + (h / (c.H / c.KV)) * c.dh + d];
                r.max_score = std::max(r.max_score, std::abs(dot * scale));
            }
    if (c.keep_probs) r.p_gl = std::move(p_gl);
    return r;
}

std::string describe(const case_spec& c) {
    std::ostringstream o;
    o << (c.causal ? "" : "non-causal ") << "T " << c.T << " n_past " << c.n_past << " heads " << c.H << "/" << c.KV
      << " d_head " << c.dh;
    if (c.window) o << " window " << c.window;
    if (c.softcap) o << " softcap " << c.softcap;
    return o.str();
}

case_result expect_equal(const case_spec& c) {
    case_result r = compare(c);
    EXPECT_LT(r.probs, 1e-5) << "probabilities, " << describe(c);
    EXPECT_LT(r.out, 1e-5) << "outputs, " << describe(c);
    return r;
}

// Runs the CLI with arguments already shell-quoted by the caller.
command_result cli(const std::string& args, const std::string& env = "") {
    return run_command(env + (env.empty() ? "" : " ") + std::string(GLASSBOX_BINARY_DIR) + "/glassbox-cli " + args);
}

const tiny_model& cli_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 2, s.n_head = 3, s.d_model = 24, s.n_ctx = 40;
        return write_tiny_gpt2(test_temp_dir("gl_cli_model"), s);
    }();
    return tm;
}

struct top_entry {
    int id;
    double prob;
};
// The "  1. "tok"  0.1234  (id 5)" lines of `run`.
std::vector<top_entry> parse_top(const std::string& out) {
    std::vector<top_entry> r;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        size_t idp = line.rfind("(id ");
        if (idp == std::string::npos || line.find(". \"") == std::string::npos) continue;
        std::string head = line.substr(0, line.find_last_not_of(' ', idp - 1) + 1); // ... "tok"   0.1234
        r.push_back({std::stoi(line.substr(idp + 4)), std::stod(head.substr(head.rfind(' ') + 1))});
    }
    return r;
}

int count_lines_with(const std::string& text, const std::string& needle) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
    return n;
}

} // namespace

// ---- kernel against its CPU twin ----

TEST(GlAttention, EqualsCpuForEveryShape) {
    NEED_GL();
    double worst_p = 0, worst_o = 0;
    for (int T : {1, 7, 64, 300})
        for (int dh : {16, 64, 80, 128})
            for (auto [H, KV] : {std::pair<int, int>{4, 4}, {8, 2}}) {
                case_spec c;
                c.T = T, c.H = H, c.KV = KV, c.dh = dh, c.seed = (uint32_t)(T * 131 + dh + H);
                case_result r = expect_equal(c);
                worst_p = std::max(worst_p, r.probs), worst_o = std::max(worst_o, r.out);
            }
    std::printf("32 shapes: max |GL - CPU| probabilities %.3g, outputs %.3g\n", worst_p, worst_o);
}

TEST(GlAttention, SlidingWindowSoftCapAndScaleEqualCpu) {
    NEED_GL();
    // windows shorter than a key tile, spanning tiles, and longer than the context; with and without a cache
    for (int window : {1, 5, 40, 500})
        for (int n_past : {0, 37}) {
            case_spec c;
            c.T = 90, c.n_past = n_past, c.H = 4, c.KV = 2, c.dh = 32, c.window = window, c.softcap = 2.5f, c.scale = 0.3f;
            c.seed = (uint32_t)(window * 7 + n_past);
            expect_equal(c);
        }
}

TEST(GlAttention, HeadSizesBeyond128UseTheirOwnTiles) {
    NEED_GL();
    for (int dh : {129, 200, 256}) {
        case_spec c;
        c.T = 45, c.n_past = 3, c.H = 4, c.KV = 2, c.dh = dh, c.seed = (uint32_t)dh;
        expect_equal(c);
    }
    gb::attention_args a{};
    a.n_q = 1, a.n_head = 1, a.n_kv_head = 1, a.d_head = 257;
    expect_gb_error([&] { gb::attention_gl(a); }, "head sizes 1..256");
}

TEST(GlAttention, HugeScoresNeedTheMaxSubtraction) {
    NEED_GL();
    // q, k of +-60: scores in the hundreds to thousands, far past where exp overflows a float (about 88), and a
    // running max that keeps growing across key tiles; the scores are exact so the 1e-5 bound still holds
    for (int dh : {16, 128})
        for (auto [H, KV] : {std::pair<int, int>{4, 4}, {8, 2}}) {
            case_spec c;
            c.T = 300, c.H = H, c.KV = KV, c.dh = dh, c.seed = (uint32_t)(dh + H), c.qk_scale = 30, c.integer_qk = true;
            case_result r = compare(c);
            EXPECT_GT(r.max_score, 200) << "the case must overflow exp without the max subtraction";
            EXPECT_LT(r.probs, 1e-5) << "probabilities, " << describe(c);
            EXPECT_LT(r.out, 1e-5) << "outputs, " << describe(c);
        }
}

TEST(GlAttention, KvCacheDecodeShape) {
    NEED_GL();
    for (case_spec c : {case_spec{1, 37, 6, 3, 64, 5}, case_spec{5, 100, 4, 1, 32, 6}, case_spec{40, 261, 8, 2, 128, 7},
                        case_spec{17, 15, 4, 4, 80, 8}}) // n_past not a tile multiple: tiles straddle the diagonal
        expect_equal(c);
}

TEST(GlAttention, NoProbabilitiesAndPaddedOutputRows) {
    NEED_GL();
    case_spec c{70, 9, 6, 2, 64, 11};
    c.keep_probs = false; // generation: no pattern buffer at all
    expect_equal(c);
    c.keep_probs = true;
    c.out_pad = 5; // the columns between rows belong to the caller
    expect_equal(c);
}

// ---- non-causal (encoders: BERT, ViT) ----

TEST(GlAttention, NonCausalEqualsCpuForEveryShape) {
    NEED_GL();
    // n_q below, across and not a multiple of the 16-query blocks and 32-key tiles; a KV cache before the
    // queries; grouped-query heads; soft-capped scores with the model's scale
    double worst_p = 0, worst_o = 0;
    int n = 0;
    for (int T : {1, 7, 33, 100})
        for (int dh : {8, 16, 64})
            for (auto [H, KV] : {std::pair<int, int>{4, 4}, {8, 2}})
                for (int n_past : {0, 21})
                    for (float softcap : {0.0f, 2.5f}) {
                        case_spec c;
                        c.T = T, c.n_past = n_past, c.H = H, c.KV = KV, c.dh = dh, c.causal = false;
                        c.softcap = softcap, c.scale = softcap > 0 ? 0.3f : 0.0f;
                        c.seed = (uint32_t)(++n * 7919);
                        case_result r = expect_equal(c);
                        worst_p = std::max(worst_p, r.probs), worst_o = std::max(worst_o, r.out);
                    }
    std::printf("%d non-causal shapes: max |GL - CPU| probabilities %.3g, outputs %.3g\n", n, worst_p, worst_o);
}

TEST(GlAttention, NonCausalHugeScoresWideHeadsNoProbabilitiesAndPaddedRows) {
    NEED_GL();
    // scores in the hundreds: the running max must keep growing over key tiles past the diagonal too
    case_spec c;
    c.T = 70, c.n_past = 9, c.H = 4, c.KV = 2, c.dh = 16, c.qk_scale = 30, c.integer_qk = true, c.causal = false;
    case_result r = expect_equal(c);
    EXPECT_GT(r.max_score, 200) << "the case must overflow exp without the max subtraction";
    // head sizes past 128 take the second tile shape (8 queries x 16 keys)
    for (int dh : {129, 256}) {
        case_spec w;
        w.T = 45, w.n_past = 3, w.H = 4, w.KV = 2, w.dh = dh, w.seed = (uint32_t)dh, w.causal = false;
        expect_equal(w);
    }
    case_spec o{70, 9, 6, 2, 64, 11};
    o.causal = false;
    o.keep_probs = false;
    expect_equal(o);
    o.keep_probs = true;
    o.out_pad = 5;
    expect_equal(o);
}

TEST(GlAttention, NonCausalRowsSumToOneOverEveryKey) {
    NEED_GL();
    for (int T : {5, 40}) { // one query block, and several with a partial one
        case_spec c;
        c.T = T, c.n_past = 6, c.H = 4, c.KV = 2, c.dh = 16, c.causal = false, c.seed = (uint32_t)T;
        case_result r = expect_equal(c);
        expect_full_rows(r.p_gl, c.H, c.T, c.n_past, "T " + std::to_string(T));
    }
}

TEST(GlAttention, NonCausalWithAWindowIsAnError) {
    NEED_GL();
    std::vector<float> x(64, 0.5f), probs(64), out(64);
    gb::attention_args a{x.data(), x.data(), x.data(), 8, 8, 2, 0, 1, 1, 8, probs.data(), out.data(), 8};
    a.causal = false, a.window = 4;
    expect_gb_error([&] { gb::attention_gl(a); }, "non-causal");
}

// ---- shader errors ----

TEST(GlAttention, BrokenShaderNamesItselfAndCarriesTheInfoLog) {
    NEED_GL();
    const char* bad_compile = "#version 430\nlayout(local_size_x = 1) in;\nvoid main() { undeclared_thing = 1.0; }\n";
    try {
        gb::gl_compile_compute("broken_test.comp", bad_compile, "#define X 1\n");
        ADD_FAILURE() << "a broken shader compiled";
    } catch (const gb::error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("shader broken_test.comp does not compile"), std::string::npos) << m;
        EXPECT_NE(m.find("undeclared_thing"), std::string::npos) << "the GL info log is missing: " << m;
    }
    const char* bad_link = "#version 430\nvoid main() {}\n"; // a compute shader needs a local size to link
    try {
        glDeleteProgram(gb::gl_compile_compute("no_local_size.comp", bad_link));
        ADD_FAILURE() << "a compute shader without a local size linked";
    } catch (const gb::error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("no_local_size.comp"), std::string::npos) << m;
        EXPECT_GT(m.size(), std::string("shader no_local_size.comp does not link: ").size()) << "no info log: " << m;
    }
    // and a good one builds
    GLuint p = gb::gl_compile_compute("fine.comp", "#version 430\nlayout(local_size_x = N) in;\nvoid main() {}\n",
                                      "#define N 4\n");
    EXPECT_NE(p, 0u);
    glDeleteProgram(p);
}

// ---- whole models ----

TEST(GlAttention, WholeModelForwardEqualsCpu) {
    NEED_GL();
    tiny_spec s;
    s.n_layer = 3, s.n_head = 4, s.d_model = 64, s.n_ctx = 80;
    gb::model gpt = gb::load_model(write_tiny_gpt2(test_temp_dir("gl_gpt2"), s).dir);
    tiny_llama tl = write_tiny_llama2c(test_temp_dir("gl_llama"), tiny_llama_spec{});
    gb::load_options lo;
    lo.tokenizer_path = tl.tokenizer_path;
    gb::model llama = gb::load_model(tl.model_path, lo);
    for (const gb::model* m : {&gpt, &llama}) {
        std::vector<int> tokens;
        for (int i = 0; i < 29; i++) tokens.push_back((i * 37 + 11) % 250);
        gb::ablation ab;
        ab.heads = {{1, 2}};
        gb::record c, g;
        gb::forward_options opt;
        opt.all_logits = true;
        gb::run_forward(c, *m, tokens, ab, opt);
        opt.attention = gb::attention_gl;
        gb::run_forward(g, *m, tokens, ab, opt);
        ASSERT_FALSE(c.flat(gb::HOOK_PATTERN).empty());
        EXPECT_LT(max_abs_diff(c.flat(gb::HOOK_PATTERN), g.flat(gb::HOOK_PATTERN)), 1e-5) << "attention, " << m->config.model_type;
        EXPECT_LT(scaled_diff(c.logits, g.logits), 1e-5) << "logits, " << m->config.model_type;

        // with a KV cache: the prompt, then 9 more tokens at n_past 20, no capture
        std::vector<float> lc, lg;
        for (auto [out, fn] : {std::pair<std::vector<float>*, gb::attention_fn>{&lc, {}}, {&lg, gb::attention_gl}}) {
            gb::forward_state st;
            gb::state_init(st, m->config, 0);
            gb::forward_options o;
            o.all_logits = true;
            o.attention = fn;
            o.interventions = gb::ablation_interventions(ab, m->config);
            std::vector<float> first;
            gb::eval(first, nullptr, st, *m, tokens.data(), 20, o);
            gb::eval(*out, nullptr, st, *m, tokens.data() + 20, 9, o);
        }
        EXPECT_LT(scaled_diff(lc, lg), 1e-5) << "logits after a KV cache, " << m->config.model_type;
    }
}

// Live recompute through the GL attention: typing, an edit and ablation toggles each equal a full CPU run.
TEST(GlAttention, LiveRecomputeEqualsFullCpuRuns) {
    NEED_GL();
    tiny_spec s;
    s.n_layer = 3, s.n_head = 4, s.d_model = 64, s.n_ctx = 80;
    gb::model gpt = gb::load_model(write_tiny_gpt2(test_temp_dir("gl_live_gpt2"), s).dir);
    tiny_llama tl = write_tiny_llama2c(test_temp_dir("gl_live_llama"), tiny_llama_spec{}); // 4 heads on 2 KV heads
    gb::load_options lo;
    lo.tokenizer_path = tl.tokenizer_path;
    gb::model llama = gb::load_model(tl.model_path, lo);
    for (const gb::model* m : {&gpt, &llama}) {
        std::vector<int> tokens;
        for (int i = 0; i < 24; i++) tokens.push_back((i * 37 + 11) % 250);
        gb::live_state st;
        gb::live_result out;
        gb::live_request rq;
        rq.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z);
        rq.keep.resid_stream = true;
        rq.attention = gb::attention_gl;
        gb::ablation ab;
        ab.heads = {{1, 1}};
        struct change {
            std::string what;
            std::vector<int> tokens;
            gb::ablation ab;
        };
        std::vector<int> typed = tokens, edited = tokens;
        typed.push_back(7);
        edited[12] = 99;
        for (const change& c : std::vector<change>{{"prompt", tokens, {}},
                                                   {"typed", typed, {}},
                                                   {"head 1.1", typed, ab},
                                                   {"edited", edited, ab},
                                                   {"clean again", edited, {}}}) {
            rq.tokens = c.tokens;
            rq.interventions = gb::ablation_interventions(c.ab, m->config);
            gb::live_run(out, st, *m, rq);
            gb::record want;
            gb::forward_options o;
            o.keep = rq.keep;
            gb::run_forward(want, *m, c.tokens, c.ab, o);
            const std::string what = m->config.model_type + ", " + c.what + " [" + out.report.what + "]";
            EXPECT_LT(max_abs_diff(out.run->flat(gb::HOOK_PATTERN), want.flat(gb::HOOK_PATTERN)), 1e-5) << what;
            EXPECT_LT(scaled_diff(out.run->flat(gb::HOOK_RESID_POST), want.flat(gb::HOOK_RESID_POST)), 1e-5) << what;
            EXPECT_LT(scaled_diff(out.run->resid_norm, want.resid_norm), 1e-5) << what;
            EXPECT_LT(scaled_diff(out.run->logits, want.logits), 1e-5) << what;
        }
    }
}

TEST(GlAttention, ContextOnASecondThread) {
    NEED_GL();
    // the desktop app's worker thread makes its own headless context while the main thread has another
    bool ok = false;
    case_result r;
    r.probs = r.out = 1; // failed unless the thread compares
    std::thread t([&] {
        gb::gl_info info = gb::gl_init_headless();
        ok = info.ok;
        if (ok) r = compare(case_spec{9, 3, 2, 1, 16, 7});
        gb::gl_shutdown();
    });
    t.join();
    EXPECT_TRUE(ok);
    EXPECT_LT(r.probs, 1e-5);
    EXPECT_LT(r.out, 1e-5);
}

TEST(GlAttention, EachEglPlatformEqualsCpu) {
    NEED_GL();
    // GLASSBOX_EGL takes one platform: Mesa's surfaceless one, or an EGL device (NVIDIA's headless path; Mesa
    // offers its software device there too). Each that exists here must give the CPU's numbers; one that does
    // not must say so on one line naming it. A bad value is an error, not a silent default.
    int made = 0;
    for (const char* platform : {"surfaceless", "device", "wayland"}) {
        ::setenv("GLASSBOX_EGL", platform, 1);
        gb::gl_info info;
        case_result r;
        r.probs = r.out = 1;
        std::thread t([&] {
            info = gb::gl_init_headless();
            if (info.ok) r = compare(case_spec{9, 3, 2, 1, 16, 7});
            gb::gl_shutdown();
        });
        t.join();
        ::unsetenv("GLASSBOX_EGL");
        if (std::string(platform) == "wayland") {
            EXPECT_FALSE(info.context);
            EXPECT_NE(info.error.find("GLASSBOX_EGL=wayland"), std::string::npos) << info.error;
            continue;
        }
        if (!info.context) {
            EXPECT_NE(info.error.find(platform), std::string::npos) << info.error;
            std::printf("EGL platform %s: none here (%s)\n", platform, info.error.c_str());
            continue;
        }
        made++;
        EXPECT_TRUE(info.ok) << platform << ": " << info.error;
        EXPECT_EQ(info.platform, platform);
        EXPECT_LT(r.probs, 1e-5) << platform;
        EXPECT_LT(r.out, 1e-5) << platform;
        std::printf("EGL platform %s: %s\n", platform, info.renderer.c_str());
    }
    EXPECT_GE(made, 1); // NEED_GL made a context on one of them
}

// ---- the CLI's backends ----

TEST(GlCli, RunWithGlGivesTheCpuTopK) {
    NEED_GL();
    const std::string args = "run --model '" + cli_model().dir + "' --prompt 'the cat sat on the mat' --top-k 8 --backend ";
    command_result cpu = cli(args + "cpu"), glr = cli(args + "gl");
    ASSERT_EQ(cpu.code, 0) << cpu.err;
    ASSERT_EQ(glr.code, 0) << glr.err;
    EXPECT_EQ(glr.err.find("fallback"), std::string::npos) << "the GL run fell back: " << glr.err;
    std::vector<top_entry> a = parse_top(cpu.out), b = parse_top(glr.out);
    ASSERT_EQ(a.size(), 8u) << cpu.out;
    ASSERT_EQ(b.size(), 8u) << glr.out;
    for (size_t i = 0; i < a.size(); i++) {
        EXPECT_EQ(a[i].id, b[i].id) << "rank " << i + 1;
        EXPECT_NEAR(a[i].prob, b[i].prob, 1e-4) << "rank " << i + 1; // printed with 4 decimals
    }
}

TEST(GlCli, BadBackendIsAUsageError) {
    command_result r = cli("run --model '" + cli_model().dir + "' --prompt 'the' --backend bad");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("bad"), std::string::npos) << r.err;
}

TEST(GlCli, NoGlFallsBackToTheCpuWithOneNotice) {
    // glvnd finds no EGL vendor: no context can be made, whatever the machine has
    const std::string args = "run --model '" + cli_model().dir + "' --prompt 'the cat' --top-k 5 --backend ";
    command_result r = cli(args + "gl", "__EGL_VENDOR_LIBRARY_FILENAMES=/nonexistent");
    command_result cpu = cli(args + "cpu");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(count_lines_with(r.out + r.err, "fallback"), 1) << r.out << r.err;
    std::vector<top_entry> a = parse_top(cpu.out), b = parse_top(r.out);
    ASSERT_EQ(a.size(), 5u) << cpu.out;
    ASSERT_EQ(b.size(), a.size()) << r.out;
    for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i].id, b[i].id); // the CPU path: the very same run
    EXPECT_EQ(r.out, cpu.out);
}

TEST(GlCli, BenchPrintsGlAndCpuAttentionRows) {
    NEED_GL();
    command_result r = cli("bench --model '" + cli_model().dir + "' --backend gl --tokens 8 --repeat 2");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err.find("fallback"), std::string::npos) << r.err;
    size_t at = r.out.find("attention only");
    ASSERT_NE(at, std::string::npos) << r.out;
    std::istringstream in(r.out.substr(at));
    std::string line;
    std::getline(in, line); // title
    std::getline(in, line); // column names
    EXPECT_NE(line.find("cpu_ms"), std::string::npos) << line;
    EXPECT_NE(line.find("gl_ms"), std::string::npos) << line;
    for (int T : {64, 256, 1024}) {
        ASSERT_TRUE((bool)std::getline(in, line)) << r.out;
        std::istringstream row(line);
        int t = 0;
        double cpu = -1, glms = -1;
        row >> t >> cpu >> glms;
        EXPECT_FALSE(row.fail()) << line;
        EXPECT_EQ(t, T) << line;
        EXPECT_GE(cpu, 0) << line; // a tiny model's CPU time may print as 0.00
        EXPECT_GT(glms, 0) << line;
    }
}
