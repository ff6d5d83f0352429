// glassbox-cli bench: forward passes timed with full capture, live recompute against a fresh forward, an
// encoder–decoder's two stacks and its translation, and attention alone on the CPU and the GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <omp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/export.h"
#include "analysis/gradients.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "model/kind.h"
#include "model/model.h"
#include "run/backward.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/live.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "util/error.h"
#include "util/threads.h"

#include "analysis/features.h"
#include "args.h"
#include "commands.h"

namespace cli {
namespace {

struct stats {
    double median = 0, min = 0, max = 0;
};
stats summarize(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    stats s;
    s.min = v.front();
    s.max = v.back();
    size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}

// Attention alone, GPU vs CPU, at the model's head shape: one layer, all heads, probabilities kept.
void bench_attention_backends(const gb::model_config& c, const gb::attention_fn& gl, int repeat,
                              nlohmann::json& results) {
    std::printf("\nattention only (one layer, %d heads, d_head %d, probabilities read back):\n", c.n_head, c.d_head);
    std::printf("%8s %12s %12s %8s\n", "tokens", "cpu_ms", "gl_ms", "gl/cpu");
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int T : {64, 256, 1024}) {
        const int qw = c.n_head * c.d_head, kw = c.n_kv_head * c.d_head;
        std::vector<float> q((size_t)T * qw), k((size_t)T * kw), v((size_t)T * kw);
        for (auto* buf : {&q, &k, &v})
            for (float& x : *buf) x = nd(rng);
        std::vector<float> probs((size_t)c.n_head * T * T), out((size_t)T * qw);
        gb::attention_args aa{q.data(), k.data(), v.data(), qw, kw, T, 0, c.n_head, c.n_kv_head, c.d_head,
                              probs.data(), out.data(), qw};
        auto time_it = [&](const gb::attention_fn& f) {
            std::vector<double> ms;
            for (int r = -1; r < repeat; r++) {
                auto t0 = std::chrono::steady_clock::now();
                f(aa);
                double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                if (r >= 0) ms.push_back(dt);
            }
            return summarize(ms).median;
        };
        double cpu = time_it(gb::attention_cpu), gpu = time_it(gl);
        std::printf("%8d %12.2f %12.2f %8.2f\n", T, cpu, gpu, gpu / cpu);
        results.push_back({{"attention_only", true}, {"tokens", T}, {"cpu_ms", cpu}, {"gl_ms", gpu}});
    }
}

double ms_of(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// What bench --incremental measures: medians of each kind of live run, in ms.
struct incremental_times {
    double full = 0, append = 0, edit = 0, from_layer = 0;
    double first_toggle = 0;     // the first ablated run after a clean one
    bool baseline_cached = true; // no ablation change ran the clean baseline again
    size_t record_mb = 0;        // what a full run's record keeps
};

// One model's live recompute (core/run/live.h), keeping what the app keeps (patterns, z, MLP outputs, the residual
// stream). Each phase runs once untimed (r = -1: caches warm), then `repeat` timed runs.
struct live_bench {
    const gb::model& m;
    int repeat;
    std::vector<int> tokens; // [T] the prompt
    gb::live_request rq;
    gb::live_state st;
    gb::live_result out;
    double run() { return ms_of([&] { gb::live_run(out, st, m, rq); }); }
};

// fresh: a new live state each time, so every run is a whole forward
std::vector<double> time_fresh(live_bench& b, size_t& record_mb) {
    std::vector<double> full;
    for (int r = -1; r < b.repeat; r++) {
        gb::live_state fresh;
        b.rq.tokens = b.tokens;
        b.rq.interventions.clear();
        const double ms = ms_of([&] { gb::live_run(b.out, fresh, b.m, b.rq); });
        if (r >= 0) full.push_back(ms);
    }
    size_t bytes = 0;
    for (int p = 0; p < gb::HOOK_COUNT; p++)
        for (const auto& t : b.out.run->acts[p]) bytes += t->size() * sizeof(float);
    record_mb = bytes >> 20;
    return full;
}

// T-1 tokens kept, one appended (timed), then the end deleted again
std::vector<double> time_append(live_bench& b) {
    const int T = (int)b.tokens.size(), V = b.m.config.vocab_size;
    std::vector<double> append;
    b.rq.tokens.assign(b.tokens.begin(), b.tokens.end() - 1);
    gb::live_run(b.out, b.st, b.m, b.rq);
    for (int r = -1; r < b.repeat; r++) {
        b.rq.tokens.assign(b.tokens.begin(), b.tokens.end() - 1);
        b.rq.tokens.push_back((b.tokens.back() + r + 1) % V);
        const double ms = b.run();
        if (b.out.report.from_token != T - 1)
            throw gb::error("internal: append recomputed from " + std::to_string(b.out.report.from_token));
        if (r >= 0) append.push_back(ms);
        b.rq.tokens.pop_back();
        gb::live_run(b.out, b.st, b.m, b.rq);
    }
    return append;
}

// the token at T/2 changed: recomputed from there on
std::vector<double> time_edit(live_bench& b) {
    const int T = (int)b.tokens.size(), V = b.m.config.vocab_size;
    std::vector<double> edit;
    b.rq.tokens = b.tokens;
    gb::live_run(b.out, b.st, b.m, b.rq);
    for (int r = -1; r < b.repeat; r++) {
        b.rq.tokens[T / 2] = (b.tokens[T / 2] + 1 + (r & 1)) % V;
        const double ms = b.run();
        if (r >= 0) edit.push_back(ms);
    }
    return edit;
}

// alternate heads of the last layer: that layer only is recomputed, the clean baseline kept
std::vector<double> time_ablation_toggle(live_bench& b, incremental_times& t) {
    const gb::model_config& c = b.m.config;
    std::vector<double> from_layer;
    gb::ablation ab;
    ab.heads = {{c.n_layer - 1, 0}};
    b.rq.interventions = gb::ablation_interventions(ab, c);
    gb::live_run(b.out, b.st, b.m, b.rq); // the first ablated run starts from the clean one's kept layers
    t.first_toggle = b.out.report.ms;
    for (int r = -1; r < b.repeat; r++) {
        ab.heads = {{c.n_layer - 1, (r & 1) % c.n_head}};
        ab.no_layernorm.on = c.n_head == 1 && (r & 1); // one head: alternate it with its layer's norms instead
        ab.no_layernorm.layers = {c.n_layer - 1};
        b.rq.interventions = gb::ablation_interventions(ab, c);
        const double ms = b.run();
        t.baseline_cached &= !b.out.report.baseline_run;
        if (r >= 0) from_layer.push_back(ms);
    }
    return from_layer;
}

void report_incremental(const args& a, const gb::model& m, const incremental_times& t, int T, int repeat,
                        bool gl) {
    std::printf("record kept: %zu MB\n", t.record_mb);
    std::printf("%-34s %10s %10s\n", "", "median_ms", "x full");
    std::printf("%-34s %10.2f %10.3f\n", "full (fresh forward, full capture)", t.full, 1.0);
    std::printf("%-34s %10.2f %10.3f\n", "append one token", t.append, t.append / t.full);
    std::printf("%-34s %10.2f %10.3f\n", "edit the token at T/2", t.edit, t.edit / t.full);
    std::printf("%-34s %10.2f %10.3f\n", "ablation toggled on the last layer", t.from_layer, t.from_layer / t.full);
    std::printf("first ablation after a clean run: %.2f ms (copies the clean run's keys and values)\n", t.first_toggle);
    std::printf("baseline cached on ablation changes: %s\n", t.baseline_cached ? "yes" : "no");
    nlohmann::json j = {{"tokens", T},
                        {"full_ms", t.full},
                        {"append_ms", t.append},
                        {"edit_ms", t.edit},
                        {"from_layer_ms", t.from_layer},
                        {"first_toggle_ms", t.first_toggle},
                        {"baseline_cached", t.baseline_cached},
                        {"repeat", repeat},
                        {"record_mb", t.record_mb},
                        {"model", m.path},
                        {"matmul", gb::matmul_name(gb::matmul_kind_now())},
                        {"backend", gl ? "gl" : "cpu"}};
    if (a.has("json")) gb::write_json(a.get("json"), j);
}

// Live recompute against a fresh forward: append one token, edit the middle token, toggle a last-layer head
// ablation.
int bench_incremental(const args& a, const gb::model& m, const gb::attention_fn& attention, int repeat) {
    const gb::model_config& c = m.config;
    const int T = (int)parse_int(a.get("tokens", "256"), "--tokens (one count with --incremental)", 2, c.n_ctx);
    live_bench b{m, repeat, std::vector<int>(T), {}, {}, {}};
    std::mt19937 rng(99);
    for (int& id : b.tokens) id = (int)(rng() % (uint32_t)c.vocab_size);
    b.rq.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    b.rq.keep.resid_stream = true;
    b.rq.attention = attention;
    std::printf("model: %s, %d layers, d %d, %d heads (%d KV), %d tokens, %s, matmul %s, %d threads\n",
                c.model_type.c_str(), c.n_layer, c.d_model, c.n_head, c.n_kv_head, T, attention ? "gl" : "cpu",
                gb::matmul_name(gb::matmul_kind_now()), omp_get_max_threads());
    incremental_times t;
    t.full = summarize(time_fresh(b, t.record_mb)).median;
    t.append = summarize(time_append(b)).median;
    t.edit = summarize(time_edit(b)).median;
    t.from_layer = summarize(time_ablation_toggle(b, t)).median;
    report_incremental(a, m, t, T, repeat, (bool)attention);
    return 0;
}

// An encoder–decoder: source and target of T tokens each (random ids), both stacks with the app's full capture
// (every self- and cross-attention pattern), and the encoder alone; then a greedy translation of a 16-token source
// through the decoder's cache, per generated token.
int bench_seq2seq(const args& a, const gb::model& m, const std::vector<int>& sizes, int repeat,
                  const gb::attention_fn& attention, const std::string& renderer) {
    const gb::model_config& c = m.config;
    const gb::model_config& ec = m.encoder->config;
    std::printf("model: %s, %d encoder + %d decoder layers, d %d, %d heads, vocab %d (%s)\n", c.model_type.c_str(),
                ec.n_layer, c.n_layer, c.d_model, c.n_head, c.vocab_size, m.path.c_str());
    std::printf("backend: %s, matmul: %s, %d threads; source and target of T tokens each, full capture of both stacks\n",
                attention ? ("gl: " + renderer).c_str() : "cpu", gb::matmul_name(gb::matmul_kind_now()),
                omp_get_max_threads());
    std::printf("%8s %10s %10s %10s %12s\n", "tokens", "median_ms", "min_ms", "max_ms", "encoder_ms");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    auto random_ids = [&](int n) {
        std::vector<int> ids(n);
        for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
        return ids;
    };
    auto ms_since = [](std::chrono::steady_clock::time_point t0) {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    gb::forward_options opt;
    opt.attention = attention;
    for (int T : sizes) {
        if (T > ec.n_ctx) throw usage_error("--tokens " + std::to_string(T) + ": the encoder's context is " + std::to_string(ec.n_ctx));
        std::vector<double> both, enc;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> src = random_ids(T), tgt = random_ids(T);
            tgt[0] = c.decoder_start_id;
            auto t0 = std::chrono::steady_clock::now();
            gb::record er;
            gb::run_encoder(&er, m, src, {}, opt);
            const double e = ms_since(t0);
            gb::seq2seq_record sr;
            t0 = std::chrono::steady_clock::now();
            gb::run_seq2seq(sr, m, src, tgt, {}, opt);
            const double b = ms_since(t0);
            if (r >= 0) enc.push_back(e), both.push_back(b);
        }
        const stats s = summarize(both), se = summarize(enc);
        std::printf("%8d %10.2f %10.2f %10.2f %12.2f\n", T, s.median, s.min, s.max, se.median);
        std::fflush(stdout);
        results.push_back({{"tokens", T}, {"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max},
                           {"encoder_ms", se.median}, {"repeat", repeat},
                           {"matmul", gb::matmul_name(gb::matmul_kind_now())}});
    }
    // greedy translation: the source once through the encoder, then one decoder step per token through the cache
    const int S = std::min(16, ec.n_ctx), max_new = std::min(32, c.n_ctx - 1);
    std::vector<double> per_token;
    int made = 0;
    for (int r = -1; r < repeat; r++) {
        const gb::generation g = gb::translate(m, random_ids(S), max_new, gb::sampling{});
        if (r >= 0 && !g.ids.empty()) per_token.push_back(g.ms / (double)g.ids.size()), made = (int)g.ids.size();
    }
    if (!per_token.empty()) {
        const double ms = summarize(per_token).median;
        std::printf("translate (greedy, %d source tokens, %d target tokens): %.2f ms a token (%.1f tokens/s), encoder "
                    "included\n", S, made, ms, 1000.0 / ms);
        results.push_back({{"translate_source_tokens", S}, {"translate_tokens", made}, {"ms_per_token", ms}});
    }
    if (a.has("json")) gb::write_json(a.get("json"), results);
    return 0;
}

// Forward passes with full capture at each length (an image classifier: its positions, on random pixels), split
// into matrix products, attention and the rest; then, on the GPU, attention alone against the CPU.
int bench_forward(const args& a, const gb::model& m, const std::vector<int>& sizes, int repeat,
                  const gb::attention_fn& gl, const std::string& renderer, const std::vector<float>& pixels) {
    const bool vision = !pixels.empty();
    const gb::model_config& c = m.config;
    std::printf("model: %s, %d layers, d %d, %d heads, vocab %d (%s)\n", c.model_type.c_str(), c.n_layer, c.d_model,
                c.n_head, c.vocab_size, m.path.c_str());
    std::printf("backend: %s, matmul: %s, %d threads (waiting: %s), full capture (attention of every layer and head)\n",
                gl ? ("gl: " + renderer).c_str() : "cpu", gb::matmul_name(gb::matmul_kind_now()), omp_get_max_threads(),
                gb::wait_policy().c_str());
    std::printf("%8s %10s %10s %10s %10s %10s %10s\n", "tokens", "median_ms", "min_ms", "max_ms", "matmul", "attention",
                "rest");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    for (int T : sizes) {
        gb::forward_options opt;
        opt.attention = gl;
        if (vision) opt.pixels = pixels.data();
        std::vector<double> total, mm, at, rest;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> ids(T);
            for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
            if (vision) ids = gb::vision_tokens(c);
            gb::record cap;
            auto t0 = std::chrono::steady_clock::now();
            gb::run_forward(cap, m, ids, {}, opt);
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (r < 0) continue;
            total.push_back(ms);
            mm.push_back(cap.timing.matmul_ms);
            at.push_back(cap.timing.attention_ms);
            rest.push_back(ms - cap.timing.matmul_ms - cap.timing.attention_ms);
        }
        stats s = summarize(total);
        stats smm = summarize(mm), sat = summarize(at), sr = summarize(rest);
        std::printf("%8d %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", T, s.median, s.min, s.max, smm.median,
                    sat.median, sr.median);
        std::fflush(stdout);
        results.push_back({{"tokens", T},
                           {"median_ms", s.median},
                           {"min_ms", s.min},
                           {"max_ms", s.max},
                           {"repeat", repeat},
                           {"matmul", gb::matmul_name(gb::matmul_kind_now())},
                           {"wait_policy", gb::wait_policy()},
                           {"split_ms", {{"matmul", smm.median}, {"attention", sat.median}, {"rest", sr.median}}}});
    }
    if (gl) bench_attention_backends(c, gl, repeat, results);
    if (a.has("json")) gb::write_json(a.get("json"), results.size() == 1 ? results[0] : results);
    return 0;
}

// The backward pass against its forward at each length: the forward keeping what the backward reads, then the
// gradients of logit(1) - logit(2) at the last position at every residual point and head. The first backward of
// a length (the warm-up's) is reported apart: a matrix's first product transposes W on the fly, the later ones
// multiply by the W^T the second packed (gemm.h). Where the kind offers patching, attribution patching of two random
// prompts that differ from the first position (no shared prefix: the worst case) against a plain forward (as
// bench times it).
int bench_gradients(const args& a, const gb::model& m, const std::vector<int>& sizes, int repeat) {
    const gb::model_config& c = m.config;
    const bool atp = gb::offers(c, gb::FEATURE_PATCHING);
    std::printf("model: %s, %d layers, d %d, %d heads, vocab %d (%s), matmul: %s, %d threads\n", c.model_type.c_str(),
                c.n_layer, c.d_model, c.n_head, c.vocab_size, m.path.c_str(), gb::matmul_name(gb::matmul_kind_now()),
                omp_get_max_threads());
    std::printf("%8s %12s %12s %16s %10s", "tokens", "forward_ms", "backward_ms", "backward/forward", "first_ms");
    if (atp) std::printf(" %10s %10s %10s", "plain_ms", "atp_ms", "atp/plain");
    std::printf("\n");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    gb::metric_spec ms;
    ms.target = 1 % c.vocab_size, ms.contrast = 2 % c.vocab_size;
    gb::forward_options opt;
    opt.keep = gb::backward_keep(c);
    auto random_ids = [&](int T) {
        std::vector<int> ids(T);
        for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
        return ids;
    };
    for (int T : sizes) {
        std::vector<double> fwd, bwd, plain, patch;
        double first = 0;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> ids = random_ids(T);
            gb::record rec;
            gb::gradients g;
            const double f = ms_of([&] { gb::run_forward(rec, m, ids, {}, opt); });
            const double b = ms_of([&] { gb::backward(g, m, rec, ms, opt); });
            if (r < 0) {
                first = b;
                continue;
            }
            fwd.push_back(f);
            bwd.push_back(b);
            if (!atp) continue;
            std::vector<int> other = random_ids(T);
            other[0] = (ids[0] + 1) % c.vocab_size;
            gb::record p;
            plain.push_back(ms_of([&] { gb::run_forward(p, m, ids, {}, {}); }));
            patch.push_back(ms_of([&] { gb::attribution_patching(m, ids, other, ms.target, ms.contrast); }));
        }
        const stats sf = summarize(fwd), sb = summarize(bwd);
        std::printf("%8d %12.2f %12.2f %16.2f %10.2f", T, sf.median, sb.median, sb.median / sf.median, first);
        nlohmann::json row = {{"tokens", T}, {"forward_median_ms", sf.median}, {"backward_median_ms", sb.median},
                              {"ratio", sb.median / sf.median}, {"first_backward_ms", first}, {"repeat", repeat},
                              {"matmul", gb::matmul_name(gb::matmul_kind_now())}};
        if (atp) {
            const stats sp = summarize(plain), sa = summarize(patch);
            std::printf(" %10.2f %10.2f %10.2f", sp.median, sa.median, sa.median / sp.median);
            row["plain_forward_median_ms"] = sp.median;
            row["atp_median_ms"] = sa.median;
            row["atp_ratio"] = sa.median / sp.median;
        }
        std::printf("\n");
        std::fflush(stdout);
        results.push_back(row);
    }
    if (a.has("json")) gb::write_json(a.get("json"), results.size() == 1 ? results[0] : results);
    return 0;
}

} // namespace

// --sae: the forward that keeps the SAE's points (last position's logits, as a plain run), alone and with the
// features computed from it (activations, reconstruction, MSE, FVU; not loss_delta, which is a second forward)
int bench_sae(const args& a, const gb::model& m, const std::vector<int>& sizes, int repeat) {
    const gb::bound_sae b = open_sae_arg(a, m);
    std::printf("SAE %s: %s at %s, d_in %d, d_sae %d; matmul %s, %d threads\n", b.s->path.c_str(), gb::sae_arch_name(b.s->arch),
                gb::hook_label(b.in, b.layer).c_str(), b.s->d_in, b.s->d_sae, gb::matmul_name(gb::matmul_kind_now()),
                omp_get_max_threads());
    std::printf("%8s %12s %12s %8s\n", "tokens", "forward_ms", "features_ms", "ratio");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    gb::forward_options opt;
    opt.keep.points = gb::hook_bit(b.in) | gb::hook_bit(b.out);
    opt.keep.layers.assign(m.config.n_layer, 0);
    opt.keep.layers[b.layer] = 1;
    for (int T : sizes) {
        std::vector<double> fwd, feat;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> ids(T);
            for (int& id : ids) id = (int)(rng() % (uint32_t)m.config.vocab_size);
            gb::record rec;
            const double f = ms_of([&] { gb::run_forward(rec, m, ids, {}, opt); });
            const double e = ms_of([&] { gb::features_of(b, rec); });
            if (r < 0) continue;
            fwd.push_back(f), feat.push_back(e);
        }
        const double fm = summarize(fwd).median, em = summarize(feat).median;
        std::printf("%8d %12.2f %12.2f %8.3f\n", T, fm, em, (fm + em) / fm);
        results.push_back({{"tokens", T}, {"forward_ms", fm}, {"features_ms", em}, {"ratio", (fm + em) / fm}, {"repeat", repeat}});
    }
    write_outputs(a, {{"sae", b.s->path}, {"d_sae", b.s->d_sae}, {"results", results}}, {});
    return 0;
}

// The competing process of bench --contended: a child that spins on a core while it runs. It is stopped (SIGSTOP)
// between busy runs, so quiet and busy runs alternate, and it dies with its parent (PR_SET_PDEATHSIG).
struct spinner {
    pid_t pid = -1;
    spinner() {
        pid = fork();
        if (pid < 0) throw gb::error(std::string("--contended: cannot start the competing process: ") + std::strerror(errno));
        if (pid == 0) { // the child: the forking thread alone, touching nothing of the parent's
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (volatile uint64_t i = 0;; i = i + 1) {
            }
        }
        kill(pid, SIGSTOP);
    }
    spinner(const spinner&) = delete;
    spinner& operator=(const spinner&) = delete;
    void busy(bool on) {
        kill(pid, on ? SIGCONT : SIGSTOP);
        if (on) std::this_thread::sleep_for(std::chrono::milliseconds(5)); // scheduled before the run starts
    }
    ~spinner() {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
};

// A forward with the app's capture at each length, on a quiet machine and with another process spinning on one
// core, alternating run by run: the medians, their ratio, and each side's slowest run against its median.
int bench_contended(const args& a, const gb::model& m, const std::vector<int>& sizes, int repeat,
                    const std::vector<float>& pixels, bool s2s) {
    const gb::model_config& c = m.config;
    std::printf("model: %s, %d layers, d %d, %d heads, vocab %d (%s)\n", c.model_type.c_str(), c.n_layer, c.d_model,
                c.n_head, c.vocab_size, m.path.c_str());
    std::printf("matmul: %s, %d threads (waiting: %s), %d cores online; busy: another process spinning on a core\n",
                gb::matmul_name(gb::matmul_kind_now()), omp_get_max_threads(), gb::wait_policy().c_str(),
                (int)sysconf(_SC_NPROCESSORS_ONLN));
    std::printf("%8s %10s %14s %10s %14s %11s\n", "tokens", "quiet_ms", "quiet_max/med", "busy_ms", "busy_max/med",
                "busy/quiet");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    spinner spin;
    for (int T : sizes) {
        std::vector<double> quiet, busy;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> ids(T), src;
            for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
            if (!pixels.empty()) ids = gb::vision_tokens(c);
            if (s2s) src = ids, ids[0] = c.decoder_start_id;
            auto once = [&] {
                gb::forward_options opt;
                if (!pixels.empty()) opt.pixels = pixels.data();
                return ms_of([&] {
                    if (s2s) {
                        gb::seq2seq_record sr;
                        gb::run_seq2seq(sr, m, src, ids, {}, opt);
                    } else {
                        gb::record rec;
                        gb::run_forward(rec, m, ids, {}, opt);
                    }
                });
            };
            const double q = once();
            spin.busy(true);
            const double b = once();
            spin.busy(false);
            if (r >= 0) quiet.push_back(q), busy.push_back(b);
        }
        const stats sq = summarize(quiet), sb = summarize(busy);
        std::printf("%8d %10.2f %14.2f %10.2f %14.2f %11.2f\n", T, sq.median, sq.max / sq.median, sb.median,
                    sb.max / sb.median, sb.median / sq.median);
        std::fflush(stdout);
        results.push_back({{"tokens", T}, {"repeat", repeat}, {"quiet_median_ms", sq.median}, {"quiet_max_ms", sq.max},
                           {"busy_median_ms", sb.median}, {"busy_max_ms", sb.max}, {"ratio", sb.median / sq.median},
                           {"matmul", gb::matmul_name(gb::matmul_kind_now())}, {"wait_policy", gb::wait_policy()}});
    }
    if (a.has("json")) gb::write_json(a.get("json"), results.size() == 1 ? results[0] : results);
    return 0;
}

// Generation as a user of llama.cpp times it: a prompt of T random tokens read through the KV cache (no capture,
// as generate reads it; and, for the app's first look at it, the same prompt with full capture), then N greedy
// tokens, one forward of one token each. Medians over the runs; each run's generation is the mean per token.
int bench_generate(const args& a, const gb::model& m, int repeat) {
    const gb::model_config& c = m.config;
    const int N = (int)parse_int(a.get("generate"), "--generate", 1, c.n_ctx - 1);
    const int T = (int)parse_int(a.get("tokens", "64"), "--tokens (one prompt length with --generate)", 1, c.n_ctx - N);
    std::printf("model: %s, %d layers, d %d, %d heads (%d KV), vocab %d (%s)\n", c.model_type.c_str(), c.n_layer,
                c.d_model, c.n_head, c.n_kv_head, c.vocab_size, m.path.c_str());
    std::printf("matmul: %s, %d threads (waiting: %s); weights: %s\n", gb::matmul_name(gb::matmul_kind_now()),
                omp_get_max_threads(), gb::wait_policy().c_str(), gb::stored_types(m).mlp.c_str());
    std::mt19937 rng(1234);
    std::vector<double> prompt_ms, captured_ms, token_ms;
    std::vector<float> logits;
    for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
        std::vector<int> ids(T);
        for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
        gb::forward_state s;
        gb::state_init(s, c, T + N);
        const double p = ms_of([&] { gb::eval(logits, nullptr, s, m, ids.data(), T, {}); });
        const double g = ms_of([&] {
            for (int i = 0; i < N; i++) {
                int next = (int)(std::max_element(logits.begin(), logits.end()) - logits.begin());
                gb::eval(logits, nullptr, s, m, &next, 1, {});
            }
        });
        gb::record rec; // the app's capture, as bench times it without --generate
        const double f = ms_of([&] { gb::run_forward(rec, m, ids, {}, {}); });
        if (r < 0) continue;
        prompt_ms.push_back(p), captured_ms.push_back(f), token_ms.push_back(g / N);
    }
    const double pm = summarize(prompt_ms).median, fm = summarize(captured_ms).median;
    const stats tm = summarize(token_ms);
    std::printf("prompt of %d tokens: %.1f ms (%.1f tokens/s); with full capture %.1f ms\n", T, pm, 1000.0 * T / pm, fm);
    std::printf("generation, %d tokens after it: %.2f ms a token (%.2f tokens/s; runs %.2f-%.2f ms)\n", N, tm.median,
                1000.0 / tm.median, tm.min, tm.max);
    write_outputs(a, {{"prompt_tokens", T}, {"generated_tokens", N}, {"repeat", repeat}, {"prompt_ms", pm},
                      {"prompt_captured_ms", fm}, {"ms_per_token", tm.median}, {"tokens_per_s", 1000.0 / tm.median},
                      {"matmul", gb::matmul_name(gb::matmul_kind_now())}}, {});
    return 0;
}

int cmd_bench(const args& a) {
    gb::model m = open_model(a);
    // an image classifier always runs its image's positions: random pixels in the normalised range
    const gb::kind_input in = gb::kind_info_of(m.config).input;
    const bool vision = in == gb::INPUT_IMAGE, s2s = in == gb::INPUT_SOURCE_TARGET;
    if (a.has("incremental")) refuse_unless(m, gb::FEATURE_LIVE, "--incremental");
    if (s2s && a.has("incremental"))
        throw usage_error("--incremental times live recompute, which encoder–decoders do not have (" + m.path +
                          " reruns both stacks on every change)");
    if (vision && a.has("incremental"))
        throw usage_error("--incremental times prompt edits; " + m.path + " is an image classifier (no prompt to edit)");
    if ((s2s || vision) && a.has("grad")) // its random prompts of T tokens: one stack of text
        throw usage_error("--grad times the backward of a random text prompt; " + m.path + " is " +
                          (s2s ? "an encoder–decoder" : "an image classifier") + " (time grad itself instead)");
    if (vision && a.has("tokens"))
        throw usage_error("--tokens: " + m.path + " is an image classifier: it always runs its " +
                          std::to_string(m.config.n_ctx) + " positions");
    if (a.has("contended") && a.get("backend", "cpu") != "cpu")
        throw usage_error("--contended times the CPU forward; leave out --backend " + a.get("backend"));
    if (a.has("generate")) { // one prompt length, its own default
        refuse_unless(m, gb::FEATURE_GENERATE, "--generate");
        if (s2s) throw usage_error("--generate times a decoder's continuation; " + m.path + " is an encoder–decoder (bench "
                                   "alone times its greedy translation)");
        return bench_generate(a, m, (int)parse_int(a.get("repeat", "10"), "--repeat", 1, 100000));
    }
    std::vector<float> pixels;
    if (vision) {
        std::mt19937 prng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        pixels.resize((size_t)3 * m.config.image_size * m.config.image_size);
        for (float& p : pixels) p = u(prng);
    }
    std::vector<int> sizes;
    for (const std::string& s : split(vision ? std::to_string(m.config.n_ctx) : a.get("tokens", "16,64,256"), ','))
        sizes.push_back((int)parse_int(s, "--tokens", 1, m.config.n_ctx));
    int repeat = (int)parse_int(a.get("repeat", "10"), "--repeat", 1, 100000);
    std::string renderer;
    gb::attention_fn gl = choose_backend(a, &renderer);
    if (a.has("incremental")) return bench_incremental(a, m, gl, repeat);
    if (a.has("contended")) {
        return bench_contended(a, m, sizes, repeat, pixels, s2s);
    }
    if (a.has("grad")) {
        refuse_unless(m, gb::FEATURE_GRADIENTS, "--grad");
        return bench_gradients(a, m, sizes, repeat);
    }
    if (a.has("sae")) return bench_sae(a, m, sizes, repeat);
    if (s2s) return bench_seq2seq(a, m, sizes, repeat, gl, renderer);
    return bench_forward(a, m, sizes, repeat, gl, renderer, pixels);
}

} // namespace cli
