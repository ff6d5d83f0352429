// glassbox-cli features: an SAE's or transcoder's features on a prompt: each token's top features, the
// reconstruction error (MSE, fraction of variance unexplained) and the change in next-token loss with the
// reconstruction spliced in; with --json and --npy-dir (features.npy, reconstruction.npy).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "analysis/export.h"
#include "analysis/features.h"
#include "args.h"
#include "commands.h"
#include "input.h"
#include "util/npy.h"

namespace cli {
namespace {

// The K features of position t with the highest activations, highest first (ties: lower id first).
std::vector<int> top_features(const gb::feature_result& r, int t, int K) {
    std::vector<int> ids(r.d_sae);
    std::iota(ids.begin(), ids.end(), 0);
    const float* f = r.acts.data() + (size_t)t * r.d_sae;
    std::partial_sort(ids.begin(), ids.begin() + K, ids.end(), [&](int a, int b) { return f[a] > f[b] || (f[a] == f[b] && a < b); });
    ids.resize(K);
    return ids;
}

int active(const gb::feature_result& r, int t) {
    int n = 0;
    for (int i = 0; i < r.d_sae; i++) n += r.acts[(size_t)t * r.d_sae + i] > 0;
    return n;
}

} // namespace

int cmd_features(const args& a) {
    gb::model m = open_model(a);
    const gb::session_request rq = read_input(a, m);
    const gb::bound_sae b = open_sae_arg(a, m);
    const int K = (int)parse_int(a.get("top", "5"), "--top", 1, b.s->d_sae);
    const gb::feature_result r = gb::run_features(m, b, rq.tokens);
    const int T = r.n_tokens;
    std::printf("SAE %s: %s, %s at %s, d_in %d, d_sae %d%s\n", b.s->path.c_str(), b.s->format.c_str(),
                b.s->transcoder ? "transcoder" : gb::sae_arch_name(b.s->arch), gb::hook_label(b.in, b.layer).c_str(),
                b.s->d_in, b.s->d_sae, b.s->transcoder ? (" writing " + gb::hook_label(b.out, b.layer)).c_str() : "");
    nlohmann::json top = nlohmann::json::array();
    for (int t = 0; t < T; t++) {
        const std::vector<int> ids = top_features(r, t, K);
        std::printf("  %3d %s active %-4d fvu %.3f ", t, padded(quoted(m, rq.tokens[t]), 14).c_str(), active(r, t), r.fvu[t]);
        nlohmann::json row = nlohmann::json::array();
        for (int id : ids) {
            const float act = r.acts[(size_t)t * r.d_sae + id];
            row.push_back({{"id", id}, {"act", act}});
            if (act > 0) std::printf(" %d:%.3g", id, act);
        }
        std::printf("\n");
        top.push_back(row);
    }
    std::printf("fraction of variance unexplained %.4f over the prompt; next-token loss %.4f -> %.4f with the "
                "reconstruction spliced in (%+.4f nats)\n", r.fvu_all, r.loss, r.loss_spliced, r.loss_delta);
    std::vector<int> l0(T);
    for (int t = 0; t < T; t++) l0[t] = active(r, t);
    auto finite = [](const std::vector<float>& v) { // an all-constant prompt has no variance: fvu is null there
        nlohmann::json j = nlohmann::json::array();
        for (float x : v) j.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
        return j;
    };
    const nlohmann::json j = {{"sae", b.s->path}, {"format", b.s->format}, {"architecture", gb::sae_arch_name(b.s->arch)},
                              {"transcoder", b.s->transcoder}, {"hook", gb::hook_name(b.in)}, {"hook_out", gb::hook_name(b.out)},
                              {"hook_name", b.s->hook_name}, {"layer", b.layer}, {"d_in", b.s->d_in}, {"d_sae", b.s->d_sae},
                              {"tokens", rq.tokens}, {"top", top}, {"l0", l0}, {"mse", r.mse}, {"fvu", finite(r.fvu)},
                              {"fvu_all", std::isfinite(r.fvu_all) ? nlohmann::json(r.fvu_all) : nlohmann::json()},
                              {"loss", r.loss}, {"loss_spliced", r.loss_spliced}, {"loss_delta", r.loss_delta},
                              {"warnings", b.warnings}};
    write_outputs(a, j, [&](const std::string& dir) {
        gb::make_dir(dir);
        gb::write_npy(dir + "/features.npy", {T, r.d_sae}, r.acts.data());
        gb::write_npy(dir + "/reconstruction.npy", {T, r.d_out}, r.recon.data());
    });
    return 0;
}

} // namespace cli
