// glassbox-cli steer-sweep: the price of a steering vector over a grid of scale x layer: KL(baseline || steered)
// of the next-token distributions on a reference text, the steered loss there, and a greedy continuation of the
// prompt in each cell.
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/export.h"
#include "analysis/steer.h"
#include "io/control_vector.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

std::vector<float> scale_list(const args& a) {
    std::vector<float> out;
    for (const std::string& s : split(a.need("scales"), ',')) out.push_back((float)parse_float(s, "--scales", -1e6, 1e6));
    if (out.empty() || out.size() > 64) throw usage_error("--scales: expected 1 to 64 comma-separated numbers");
    return out;
}

// --layers LIST (or all); default: the vector's layers, or every layer for a vector with one direction
std::vector<int> sweep_layers(const args& a, const gb::model& m, const gb::steer_vector& v) {
    std::vector<int> ls;
    const std::string s = a.get("layers");
    if (s == "all" || (s.empty() && v.layers().size() == 1))
        for (int l = 0; l < m.config.n_layer; l++) ls.push_back(l);
    else if (s.empty())
        ls = v.layers();
    else
        ls = gb::parse_layer_list(s, "--layers");
    return ls;
}

void print_grid(const char* title, const gb::steer_sweep_result& r, const std::vector<double>& x) {
    std::printf("%s\n  %8s", title, "scale");
    for (int l : r.layers) std::printf(" %8s", ("L" + std::to_string(l)).c_str());
    std::printf("\n");
    for (size_t si = 0; si < r.scales.size(); si++) {
        std::printf("  %8g", r.scales[si]);
        for (size_t li = 0; li < r.layers.size(); li++) std::printf(" %8.4f", x[r.at((int)si, (int)li)]);
        std::printf("\n");
    }
}

} // namespace

int cmd_steer_sweep(const args& a) {
    gb::model m = open_model(a);
    refuse_unless(m, gb::FEATURE_STEERING, "steer-sweep");
    const std::string file = a.need("steer");
    const std::vector<float> scales = scale_list(a);
    const std::string prompt = a.need("prompt");
    const std::vector<int> prompt_tokens = prompt_ids(m, prompt, a.has("bos"));
    if (prompt_tokens.empty()) throw gb::error("--prompt is empty: nothing to continue");
    std::vector<int> ref = prompt_ids(m, read_text_file(a.need("reference"), "--reference"), a.has("bos"));
    if ((int)ref.size() > m.config.n_ctx) {
        std::fprintf(stderr, "notice: the reference's %zu tokens are cut to the context's %d\n", ref.size(), m.config.n_ctx);
        ref.resize(m.config.n_ctx);
    }
    const gb::steer_vector v = gb::read_steer_vector(file, 0); // a one-direction [d] .npy: moved to each layer anyway
    const std::vector<int> layers = sweep_layers(a, m, v);
    const int from = (int)parse_int(a.get("steer-from", "0"), "--steer-from", 0, m.config.n_ctx - 1);
    const int max_new = (int)parse_int(a.get("max-new-tokens", "8"), "--max-new-tokens", 0, m.config.n_ctx);
    gb::steer_sweep_result r;
    gb::steer_sweep(r, m, v, scales, layers, ref, from, prompt_tokens, max_new);
    std::printf("reference: %d tokens, baseline loss %.4f nats/token\n", r.ref_tokens, r.base_loss);
    print_grid("KL(baseline || steered), nats per position:", r, r.kl);
    print_grid("steered loss on the reference, nats per token:", r, r.loss);
    std::fprintf(stderr, "%zu x %zu grid in %.1f ms (continuations %.1f ms)\n", scales.size(), layers.size(), r.grid_ms,
                 r.text_ms);
    if (a.has("json")) {
        nlohmann::json cells = nlohmann::json::array();
        for (size_t si = 0; si < scales.size(); si++)
            for (size_t li = 0; li < layers.size(); li++) {
                const int k = r.at((int)si, (int)li);
                nlohmann::json c = {{"scale", scales[si]}, {"layer", layers[li]}, {"kl", r.kl[k]}, {"loss", r.loss[k]}};
                if (!r.texts.empty()) c["text"] = r.texts[k];
                cells.push_back(c);
            }
        gb::write_json(a.get("json"),
                       {{"steering", {{"file", file}, {"scales", scales}, {"layers", layers}, {"from", from},
                                      {"d_model", v.d_model}, {"model_hint", v.model_hint}, {"vector_layers", v.layers()}}},
                        {"prompt", prompt}, {"reference_tokens", r.ref_tokens}, {"base_loss", r.base_loss},
                        {"kl", r.kl}, {"loss", r.loss}, {"cells", cells}, {"grid_ms", r.grid_ms}, {"text_ms", r.text_ms}});
    }
    return 0;
}

} // namespace cli
