// glassbox-cli compare: one prompt through two models (base vs fine-tuned, F16 vs Q4_K of one file), and where
// their computations part: the residual streams, the next-token distributions, the heads, the lens, each token's
// surprisal. The text lists the worst first; --json and --npy-dir hold everything.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "analysis/compare.h"
#include "run/forward.h"
#include "util/npy.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

nlohmann::json nan_null(const std::vector<double>& v) {
    nlohmann::json j = nlohmann::json::array();
    for (double x : v) j.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
    return j;
}

nlohmann::json compare_json(const gb::compare_result& c, const gb::model& a, const gb::model& b,
                            const std::vector<int>& ids) {
    const int P = c.n_points, T = c.n_tokens;
    nlohmann::json cos = nlohmann::json::array(), rel = nlohmann::json::array();
    for (int p = 0; p < P; p++) {
        cos.push_back(std::vector<float>(c.cosine.begin() + (size_t)p * T, c.cosine.begin() + (size_t)(p + 1) * T));
        rel.push_back(std::vector<float>(c.rel_diff.begin() + (size_t)p * T, c.rel_diff.begin() + (size_t)(p + 1) * T));
    }
    nlohmann::json js = nlohmann::json::array();
    for (int l = 0; l < c.n_layer; l++)
        js.push_back(std::vector<float>(c.head_js.begin() + (size_t)l * c.n_head, c.head_js.begin() + (size_t)(l + 1) * c.n_head));
    auto texts = [&](const std::vector<int>& ids) {
        std::vector<std::string> s;
        for (int id : ids) s.push_back(gb::token_text(a.tok, id));
        return s;
    };
    nlohmann::json j = {
        {"model_a", a.path}, {"model_b", b.path}, {"token_ids", ids}, {"tokens", c.pieces}, {"points", c.points},
        {"cosine", cos}, {"rel_diff", rel}, {"point_mean_cosine", c.point_mean_cos}, {"point_mean_rel_diff", c.point_mean_rel},
        {"kl", nan_null(c.kl)}, {"mean_kl", c.mean_kl}, {"top_a", c.top_a}, {"top_b", c.top_b},
        {"top_a_text", texts(c.top_a)}, {"top_b_text", texts(c.top_b)},
        {"top_agree", std::vector<int>(c.top_agree.begin(), c.top_agree.end())}, {"top_agree_count", c.top_agree_count},
        {"head_js", js},
        {"lens", {{"position", c.lens_position}, {"top_a", c.lens_top_a}, {"top_b", c.lens_top_b},
                  {"top_a_text", texts(c.lens_top_a)}, {"top_b_text", texts(c.lens_top_b)},
                  {"prob_a", c.lens_prob_a}, {"prob_b", c.lens_prob_b},
                  {"first_disagree", c.first_disagree < 0 ? nlohmann::json() : nlohmann::json(c.first_disagree)}}},
        {"timing_ms", {{"forward_a", c.forward_ms_a}, {"forward_b", c.forward_ms_b}, {"analysis", c.analysis_ms}}},
        {"side_by_side", c.side_by_side}};
    if (c.surprisal_a.scored > 0)
        j["surprisal"] = {{"a", nan_null(c.surprisal_a.nats)}, {"b", nan_null(c.surprisal_b.nats)},
                          {"diff", nan_null(c.surprisal_diff)}, {"mean_a", c.surprisal_a.mean_nats},
                          {"mean_b", c.surprisal_b.mean_nats}};
    return j;
}

void write_compare_npy(const std::string& dir, const gb::compare_result& c) {
    const int P = c.n_points, T = c.n_tokens;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec); // (a failure shows as the first file's "cannot write")
    gb::write_npy(dir + "/cosine.npy", {P, T}, c.cosine.data());
    gb::write_npy(dir + "/rel_diff.npy", {P, T}, c.rel_diff.data());
    gb::write_npy(dir + "/kl.npy", {T}, c.kl.data());
    const std::vector<int32_t> agree(c.top_agree.begin(), c.top_agree.end());
    gb::write_npy(dir + "/top_agree.npy", {T}, agree.data());
    gb::write_npy(dir + "/head_js.npy", {c.n_layer, c.n_head}, c.head_js.data());
    gb::write_npy(dir + "/surprisal_diff.npy", {T}, c.surprisal_diff.data());
}

// The text: the points whose streams moved most, the heads with the largest divergence, the positions' KL and
// top-1s, the lens of both at the last position, and the tokens whose surprisal changed most.
void print_compare(const gb::compare_result& c, const gb::model& a, const gb::model& b, int top) {
    const int P = c.n_points, T = c.n_tokens;
    std::printf("A: %s\nB: %s\n%d tokens; next-token top-1 agrees at %d of %d positions; mean KL(A || B) %.4g nats\n",
                a.path.c_str(), b.path.c_str(), T, c.top_agree_count, T, c.mean_kl);
    std::vector<int> order(P);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return c.point_mean_rel[x] > c.point_mean_rel[y]; });
    std::printf("residual points that moved most (mean over positions of |a - b| / |a|, and cosine):\n");
    for (int i = 0; i < std::min(top, P); i++)
        std::printf("  %-12s rel %.4g  cos %.6f\n", c.points[order[i]].c_str(), c.point_mean_rel[order[i]],
                    c.point_mean_cos[order[i]]);
    std::vector<int> heads(c.head_js.size());
    std::iota(heads.begin(), heads.end(), 0);
    std::stable_sort(heads.begin(), heads.end(), [&](int x, int y) { return c.head_js[x] > c.head_js[y]; });
    std::printf("heads whose patterns moved most (Jensen-Shannon divergence, nats, mean over query rows):\n");
    for (int i = 0; i < std::min(top, (int)heads.size()); i++)
        std::printf("  L%dH%-3d %.4g\n", heads[i] / c.n_head, heads[i] % c.n_head, c.head_js[heads[i]]);
    std::vector<int> pos(T);
    std::iota(pos.begin(), pos.end(), 0);
    std::stable_sort(pos.begin(), pos.end(), [&](int x, int y) { return c.kl[x] > c.kl[y]; });
    std::printf("positions whose next-token distributions differ most (KL(A || B), nats; top-1 of A and B):\n");
    for (int i = 0; i < std::min(top, T); i++) {
        const int t = pos[i];
        std::printf("  %3d %s KL %.4g  %s %s %s\n", t, padded("\"" + visible(c.pieces[t]) + "\"", 14).c_str(), c.kl[t],
                    quoted(a, c.top_a[t]).c_str(), c.top_agree[t] ? "=" : "vs", quoted(a, c.top_b[t]).c_str());
    }
    std::printf("logit lens of both at position %d (top-1 of A | B):\n", c.lens_position);
    for (int p = 0; p < P; p++)
        std::printf("  %-12s %s %.3f | %s %.3f%s\n", c.points[p].c_str(), padded(quoted(a, c.lens_top_a[p]), 14).c_str(),
                    c.lens_prob_a[p], padded(quoted(a, c.lens_top_b[p]), 14).c_str(), c.lens_prob_b[p],
                    p == c.first_disagree ? "   <- first disagreement" : "");
    if (c.first_disagree < 0) std::printf("  (the lenses agree at every point)\n");
    if (c.surprisal_a.scored == 0) return;
    std::printf("surprisal: mean %.4f nats/token in A, %.4f in B; tokens that changed most (B - A, nats):\n",
                c.surprisal_a.mean_nats, c.surprisal_b.mean_nats);
    std::vector<int> tok(T - 1);
    std::iota(tok.begin(), tok.end(), 1);
    std::stable_sort(tok.begin(), tok.end(), [&](int x, int y) { return std::fabs(c.surprisal_diff[x]) > std::fabs(c.surprisal_diff[y]); });
    for (int i = 0; i < std::min(top, T - 1); i++)
        std::printf("  %3d %s %+.4f  (%.3f -> %.3f)\n", tok[i], padded("\"" + visible(c.pieces[tok[i]]) + "\"", 14).c_str(),
                    c.surprisal_diff[tok[i]], c.surprisal_a.nats[tok[i]], c.surprisal_b.nats[tok[i]]);
}

double median_ms(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// --bench N: compare's cost against one forward, both with what compare keeps and with a plain run's defaults
// (the last position's logits, the patterns). Compare runs each model once, so "one forward" is the mean of one
// forward of A and one of B (the same number when B is A).
void bench_compare(const gb::model& a, const gb::model& b, const std::vector<int>& ids, int repeat) {
    gb::forward_options keep, plain;
    keep.keep = gb::compare_request();
    keep.all_logits = true;
    std::vector<double> t_plain, t_keep, t_cmp;
    bool side = false;
    auto ms = [](auto t0, auto t1) { return std::chrono::duration<double, std::milli>(t1 - t0).count(); };
    for (int i = 0; i < repeat + 1; i++) { // the first round warms the caches and is dropped
        gb::record r;
        auto t0 = std::chrono::steady_clock::now();
        gb::run_forward(r, a, ids, {}, plain);
        auto t1 = std::chrono::steady_clock::now();
        gb::run_forward(r, b, ids, {}, plain);
        auto t2 = std::chrono::steady_clock::now();
        gb::run_forward(r, a, ids, {}, keep);
        auto t3 = std::chrono::steady_clock::now();
        gb::run_forward(r, b, ids, {}, keep);
        auto t4 = std::chrono::steady_clock::now();
        gb::compare_result c;
        gb::compare_models(c, a, b, ids);
        auto t5 = std::chrono::steady_clock::now();
        side = c.side_by_side;
        if (i == 0) continue;
        t_plain.push_back((ms(t0, t1) + ms(t1, t2)) / 2);
        t_keep.push_back((ms(t2, t3) + ms(t3, t4)) / 2);
        t_cmp.push_back(ms(t4, t5));
    }
    const double p = median_ms(t_plain), k = median_ms(t_keep), c = median_ms(t_cmp);
    std::printf("bench (%d tokens, median of %d; one forward = the mean of A's and B's): one forward %.2f ms (plain), "
                "%.2f ms (keeping what compare keeps); compare %.2f ms (%s) = %.2fx the plain forward, %.2fx the "
                "same-capture forward\n",
                (int)ids.size(), repeat, p, k, c, side ? "A and B side by side" : "A then B", c / p, c / k);
}

} // namespace

int cmd_compare(const args& a) {
    gb::model ma = open_model(a);
    args ab = a;
    ab.opts["model"] = a.need("model-b");
    gb::model mb = open_model(ab);
    gb::check_comparable(ma, mb);
    const std::string prompt = a.need("prompt");
    const std::vector<int> ids = prompt_ids(ma, prompt, a.has("bos"));
    gb::check_same_ids(ma, mb, ids, prompt_ids(mb, prompt, a.has("bos")));
    if (ids.empty()) throw gb::error("--prompt is empty: nothing to run");
    if ((int)ids.size() > std::min(ma.config.n_ctx, mb.config.n_ctx))
        throw gb::error("--prompt too long: " + std::to_string(ids.size()) + " tokens, the models' context is " +
                        std::to_string(std::min(ma.config.n_ctx, mb.config.n_ctx)));
    gb::compare_options opt;
    if (a.has("position")) opt.lens_position = (int)parse_int(a.get("position"), "--position", 0, (long)ids.size() - 1);
    gb::compare_result c;
    gb::compare_models(c, ma, mb, ids, opt);
    print_compare(c, ma, mb, (int)parse_int(a.get("top", "5"), "--top", 1, 1 << 20));
    write_outputs(a, compare_json(c, ma, mb, ids), [&](const std::string& dir) { write_compare_npy(dir, c); });
    if (a.has("bench")) bench_compare(ma, mb, ids, (int)parse_int(a.get("bench"), "--bench", 1, 100000));
    return 0;
}

} // namespace cli
