// glassbox-cli train-transcoder: per-layer transcoders (each layer's MLP input after its norm -> its MLP output)
// trained on the model's own activations over a corpus (TopK with --k, ReLU + L1 with --l1 or JumpReLU + L0 with
// --l0, optionally a linear skip), with a progress line per layer (explained variance of the MLP output, L0),
// resumable from the state files in --out, and written there in circuit-tracer's layout (config.yaml +
// layer_{i}.safetensors) for `graph`.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/transcoder_train.h"
#include "args.h"
#include "commands.h"
#include "io/transcoders.h"
#include "model/model.h"
#include "util/npy.h"

namespace cli {
namespace {

// The byte offset of the first byte that is not valid UTF-8 (a lead byte with its continuation bytes, no overlong
// form, no surrogate, at most U+10FFFF), or -1 when the text is valid.
long first_invalid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = (unsigned char)s[i];
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return (long)i;
        uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
        for (int k = 1; k < n; k++) {
            const unsigned char cc = (unsigned char)s[i + k];
            if ((cc >> 6) != 2) return (long)i;
            cp = (cp << 6) | (cc & 0x3F);
        }
        const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += n;
    }
    return -1;
}

// --layers all | a comma-separated list of layers (each in 0..L-1).
std::vector<int> parse_layers(const std::string& s, int L) {
    std::vector<int> out;
    if (s == "all") {
        for (int l = 0; l < L; l++) out.push_back(l);
        return out;
    }
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) out.push_back((int)parse_int(item, "--layers", 0, L - 1));
    if (out.empty()) throw usage_error("--layers: give all or a list of layers such as 0,2,5");
    return out;
}

} // namespace

int cmd_train_transcoder(const args& a) {
    gb::model m = open_model(a);
    const int L = m.config.n_layer, d = m.config.d_model;
    gb::sae_train_options o;
    o.d_sae = (int)parse_int(a.get("features", "2048"), "--features", 1, 1 << 20);
    parse_coder_kind(a, o, 32);
    o.steps = parse_int(a.get("steps", "2000"), "--steps", 1, 100000000);
    o.batch = (int)parse_int(a.get("batch", "256"), "--batch", 1, 1 << 16);
    o.lr = (float)parse_float(a.get("lr", "0.001"), "--lr", 1e-9, 1);
    o.seed = (uint32_t)parse_int(a.get("seed", "0"), "--seed", 0, 4294967295l);
    o.dead_after = (int)parse_int(a.get("dead-after", "500"), "--dead-after", 0, 100000000);
    o.skip = a.has("skip");
    const std::vector<int> layers = parse_layers(a.get("layers", "all"), L);
    const int64_t max_rows = parse_int(a.get("max-rows", "40000"), "--max-rows", 2, 100000000);
    const std::string corpus = a.need("corpus");
    const std::string text = read_text_file(corpus, "--corpus");
    const long bad = first_invalid_utf8(text);
    if (bad >= 0) throw gb::error("--corpus: " + corpus + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    const std::string out = a.need("out");
    gb::make_dir(out);

    const auto t0 = std::chrono::steady_clock::now();
    const gb::mlp_pairs pairs = gb::collect_mlp_pairs(m, layers, text, std::min(128, m.config.n_ctx), max_rows, a.has("bos"));
    const double collect_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // the last tenth of the rows (the corpus's end) is held out: the explained variance reported is on it
    const int64_t n_held = std::max<int64_t>(1, pairs.n / 10), n_train = pairs.n - n_held;
    if (n_train < 1) throw gb::error("--corpus: " + corpus + " gives " + std::to_string(pairs.n) + " positions; at least 2 are needed");
    std::printf("%lld positions x %zu layers of (mlp_in, mlp_out) (d %d) from %s in %.1f s: %lld to train on, %lld held out\n",
                (long long)pairs.n, pairs.layers.size(), d, corpus.c_str(), collect_s, (long long)n_train, (long long)n_held);

    std::vector<gb::transcoder_layer> set_layers(L);
    std::vector<bool> trained(L, false);
    nlohmann::json per_layer = nlohmann::json::array();
    double train_s = 0;
    for (size_t k = 0; k < pairs.layers.size(); k++) {
        const int l = pairs.layers[k];
        const float *x = pairs.x[k].data(), *y = pairs.y[k].data();
        const auto t1 = std::chrono::steady_clock::now();
        gb::sae_train_progress last;
        int64_t resumed = 0;
        const std::string state = out + "/train_state_" + std::to_string(l) + ".bin";
        const gb::trained_coder c = gb::train_coder(x, y, n_train, d, d, o, state, [&](const gb::sae_train_progress& pr) {
            last = pr;
            const int width = 30, done = (int)(width * pr.step / pr.steps);
            std::fprintf(stderr, "\rL%d [%s%s] step %lld/%lld  loss %.4g  explained %.3f  L0 %.1f  dead %.3f  resampled %d ",
                         l, std::string(done, '#').c_str(), std::string(width - done, '.').c_str(), (long long)pr.step,
                         (long long)pr.steps, pr.loss, pr.explained, pr.active, pr.dead_fraction, pr.resampled);
            if (pr.step == pr.steps) std::fprintf(stderr, "\n");
        }, &resumed);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        train_s += s;
        const double held = gb::coder_explained(c.s, c.skip, x + (size_t)n_train * d, y + (size_t)n_train * d, n_held);
        std::printf("L%d: held-out explained %.3f (last steps %.3f), L0 %.1f, dead %.3f, %.1f s%s\n", l, held,
                    last.explained, last.active, last.dead_fraction, s,
                    resumed > 0 ? (" (resumed at step " + std::to_string(resumed) + ")").c_str() : "");
        per_layer.push_back({{"layer", l}, {"heldout_explained", held}, {"train_explained", last.explained},
                             {"loss", last.loss}, {"active", last.active}, {"dead_fraction", last.dead_fraction},
                             {"resampled", last.resampled}, {"resumed_at", resumed}, {"train_s", s}});
        set_layers[l] = gb::transcoder_layer_of(c);
        trained[l] = true;
    }
    int empty = 0;
    for (int l = 0; l < L; l++)
        if (!trained[l]) set_layers[l] = gb::empty_transcoder_layer(o.d_sae, d, o.skip, o.jumprelu), empty++;
    const gb::transcoder_set t = gb::new_transcoder_set(m, o, std::move(set_layers));
    gb::write_transcoders(out, t);
    std::printf("wrote %s (circuit-tracer's layout: config.yaml + layer_{i}.safetensors): %d features per layer, %s%s, "
                "%zu layers trained in %.1f s%s\n", out.c_str(), o.d_sae, gb::coder_name(o).c_str(),
                o.skip ? " with a skip" : "", pairs.layers.size(), train_s,
                empty ? (", " + std::to_string(empty) + " left empty (all their MLP output is the error)").c_str() : "");
    write_outputs(a, {{"out", out}, {"model_name", t.model_name}, {"d_model", d}, {"d_tc", o.d_sae}, {"k", o.k},
                      {"l1", o.l1}, {"l0", o.l0}, {"jumprelu", o.jumprelu}, {"bandwidth", o.bandwidth},
                      {"threshold", o.threshold}, {"skip", o.skip}, {"steps", o.steps}, {"batch", o.batch}, {"lr", o.lr},
                      {"seed", o.seed}, {"positions", pairs.n}, {"train_positions", n_train}, {"heldout_positions", n_held},
                      {"collect_s", collect_s}, {"train_s", train_s}, {"layers", per_layer}}, {});
    return 0;
}

} // namespace cli
