// The GL compute attention equals its CPU twin (attention_cpu) within 1e-5 for many shapes, with and without
// grouped-query attention and a KV cache, and through a whole model forward. Skips only without GL 4.3.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "forward.h"
#include "gl_attention.h"
#include "tiny_llama.h"
#include "tiny_model.h"

namespace {

bool have_gl(std::string* why) {
    static gb::gl_info info = [] {
        gb::gl_info i = gb::gl_init_headless();
        if (i.ok) std::printf("GL: %s, %s\n", i.renderer.c_str(), i.version.c_str());
        return i;
    }();
    if (!info.ok && why) *why = info.error;
    return info.ok;
}

#define NEED_GL()                                                                                   \
    std::string why;                                                                                \
    if (!have_gl(&why)) GTEST_SKIP() << "no OpenGL 4.3 context at all (" << why << "): GL tests skipped";

double compare(int T, int n_past, int H, int KV, int dh, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n_kv = n_past + T, qs = H * dh + 2 * KV * dh, kvs = KV * dh;
    std::vector<float> q((size_t)T * qs), k((size_t)n_kv * kvs), v((size_t)n_kv * kvs);
    for (auto* b : {&q, &k, &v})
        for (float& x : *b) x = nd(rng);
    std::vector<float> p_cpu((size_t)H * T * n_kv), p_gl(p_cpu.size(), -1), o_cpu((size_t)T * H * dh), o_gl(o_cpu.size(), -1);
    gb::attention_args a{q.data(), k.data(), v.data(), qs, kvs, T, n_past, H, KV, dh, p_cpu.data(), o_cpu.data(), H * dh};
    gb::attention_cpu(a);
    a.probs = p_gl.data();
    a.out = o_gl.data();
    gb::attention_gl(a);
    double w = 0;
    for (size_t i = 0; i < p_cpu.size(); i++) w = std::max(w, (double)std::abs(p_cpu[i] - p_gl[i]));
    for (size_t i = 0; i < o_cpu.size(); i++) w = std::max(w, (double)std::abs(o_cpu[i] - o_gl[i]));
    return w;
}

} // namespace

TEST(GlAttention, EqualsCpuForEveryShape) {
    NEED_GL();
    for (int T : {1, 7, 64, 300})
        for (int dh : {16, 64, 80, 128})
            for (auto [H, KV] : {std::pair<int, int>{4, 4}, {8, 2}}) {
                if (T == 300 && dh > 64 && H == 8) continue; // keeps llvmpipe's time reasonable; 300 x 128 runs with H 4
                EXPECT_LT(compare(T, 0, H, KV, dh, T * 131 + dh), 1e-5) << "T " << T << " d_head " << dh << " heads " << H << "/" << KV;
            }
}

TEST(GlAttention, KvCacheDecodeShape) {
    NEED_GL();
    EXPECT_LT(compare(1, 37, 6, 3, 64, 5), 1e-5);
    EXPECT_LT(compare(5, 100, 4, 1, 32, 6), 1e-5);
}

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
        gb::capture c, g;
        gb::forward_options opt;
        opt.all_logits = true;
        gb::run_forward(c, *m, tokens, ab, opt);
        opt.attention = gb::attention_gl;
        gb::run_forward(g, *m, tokens, ab, opt);
        double w = 0;
        for (size_t i = 0; i < c.logits.size(); i++) w = std::max(w, (double)std::abs(c.logits[i] - g.logits[i]));
        for (size_t i = 0; i < c.attention.size(); i++) w = std::max(w, (double)std::abs(c.attention[i] - g.attention[i]));
        EXPECT_LT(w, 1e-4) << m->config.model_type;
    }
}

TEST(GlAttention, ContextOnASecondThread) {
    NEED_GL();
    // the desktop app's worker thread makes its own headless context while the main thread has another
    bool ok = false;
    double err = 1;
    std::thread t([&] {
        gb::gl_info info = gb::gl_init_headless();
        ok = info.ok;
        if (ok) err = compare(9, 3, 2, 1, 16, 7);
        gb::gl_shutdown();
    });
    t.join();
    EXPECT_TRUE(ok);
    EXPECT_LT(err, 1e-5);
}
