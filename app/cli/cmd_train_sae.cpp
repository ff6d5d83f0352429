// glassbox-cli train-sae: an SAE trained on the model's own activations at a hook point over a corpus (TopK with
// --k, ReLU + L1 with --l1 or JumpReLU + L0 with --l0), with a progress line (loss, explained variance, L0, dead
// fraction), resumable from the state file in --out, and written there in SAELens's format (cfg.json +
// sae_weights.safetensors).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/export.h"
#include "analysis/sae_train.h"
#include "args.h"
#include "commands.h"
#include "io/sae.h"
#include "util/npy.h"

namespace cli {

int cmd_train_sae(const args& a) {
    gb::model m = open_model(a);
    const gb::hook_point p = gb::parse_hook_point(a.need("hook"));
    if (p != gb::HOOK_RESID_PRE && p != gb::HOOK_RESID_MID && p != gb::HOOK_RESID_POST && p != gb::HOOK_ATTN_OUT && p != gb::HOOK_MLP_OUT)
        throw usage_error("--hook " + a.get("hook") + ": train-sae reads resid_pre, resid_mid, resid_post, attn_out or mlp_out");
    const int layer = (int)parse_int(a.need("layer"), "--layer", 0, m.config.n_layer - 1);
    gb::sae_train_options o;
    o.d_sae = (int)parse_int(a.need("features"), "--features", 1, 1 << 20);
    parse_coder_kind(a, o, 0);
    o.steps = parse_int(a.get("steps", "2000"), "--steps", 1, 100000000);
    o.batch = (int)parse_int(a.get("batch", "256"), "--batch", 1, 1 << 16);
    o.lr = (float)parse_float(a.get("lr", "0.001"), "--lr", 1e-9, 1);
    o.seed = (uint32_t)parse_int(a.get("seed", "0"), "--seed", 0, 4294967295l);
    o.dead_after = (int)parse_int(a.get("dead-after", "500"), "--dead-after", 0, 100000000);
    const int64_t max_tokens = parse_int(a.get("max-tokens", "200000"), "--max-tokens", 1, 100000000);
    const std::string out = a.need("out");
    gb::make_dir(out);
    const std::string text = read_text_file(a.need("corpus"), "--corpus");
    const int window = std::min(128, m.config.n_ctx);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> x = gb::collect_activations(m, p, layer, text, window, max_tokens, a.has("bos"));
    const int d = m.config.d_model;
    const int64_t n = (int64_t)(x.size() / d);
    const double collect_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%lld activations of L%d %s (d %d) from %s in %.1f s\n", (long long)n, layer, gb::hook_name(p), d,
                a.get("corpus").c_str(), collect_s);
    const auto t1 = std::chrono::steady_clock::now();
    gb::sae_train_progress last;
    int64_t resumed = 0;
    gb::sae s = gb::train_sae(x.data(), n, d, o, out + "/train_state.bin", [&](const gb::sae_train_progress& pr) {
        last = pr;
        const int width = 30, done = (int)(width * pr.step / pr.steps);
        std::fprintf(stderr, "\r[%s%s] step %lld/%lld  loss %.4g  explained %.3f  L0 %.1f  dead %.3f  resampled %d ",
                     std::string(done, '#').c_str(), std::string(width - done, '.').c_str(), (long long)pr.step,
                     (long long)pr.steps, pr.loss, pr.explained, pr.active, pr.dead_fraction, pr.resampled);
        if (pr.step == pr.steps) std::fprintf(stderr, "\n");
    }, &resumed);
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    if (resumed > 0) std::printf("resumed at step %lld from %s/train_state.bin\n", (long long)resumed, out.c_str());
    gb::name_trained_sae(s, m, p, layer);
    gb::write_sae_saelens(out, s);
    // the explained variance on activations of a text the SAE was not trained on (--heldout)
    double heldout = -1;
    int64_t heldout_n = 0;
    if (a.has("heldout")) {
        const std::string held = read_text_file(a.get("heldout"), "--heldout");
        const std::vector<float> hx = gb::collect_activations(m, p, layer, held, window, max_tokens, a.has("bos"));
        heldout_n = (int64_t)(hx.size() / d);
        heldout = gb::sae_explained(s, hx.data(), heldout_n);
        std::printf("held out: explained %.3f on %lld activations of %s\n", heldout, (long long)heldout_n, a.get("heldout").c_str());
    }
    const double tokens_per_s = train_s > 0 ? (double)(o.steps - resumed) * o.batch / train_s : 0;
    std::printf("wrote %s (SAELens: cfg.json + sae_weights.safetensors): %d features, %s, explained %.3f, L0 %.1f, "
                "dead %.3f, %.0f activations/s\n", out.c_str(), o.d_sae, gb::coder_name(o).c_str(), last.explained,
                last.active, last.dead_fraction, tokens_per_s);
    write_outputs(a, {{"out", out}, {"hook", gb::hook_name(p)}, {"layer", layer}, {"d_in", d}, {"d_sae", o.d_sae},
                      {"k", o.k}, {"l1", o.l1}, {"l0", o.l0}, {"jumprelu", o.jumprelu}, {"bandwidth", o.bandwidth},
                      {"threshold", o.threshold}, {"steps", o.steps}, {"batch", o.batch}, {"lr", o.lr}, {"seed", o.seed},
                      {"activations", n}, {"resumed_at", resumed}, {"loss", last.loss}, {"explained", last.explained},
                      {"active", last.active}, {"dead_fraction", last.dead_fraction}, {"resampled", last.resampled},
                      {"collect_s", collect_s},
                      {"train_s", train_s}, {"activations_per_s", tokens_per_s},
                      {"heldout_explained", a.has("heldout") ? nlohmann::json(heldout) : nlohmann::json(nullptr)},
                      {"heldout_activations", heldout_n}}, {});
    return 0;
}

} // namespace cli
