// glassbox-cli grad: the gradients of a metric of the logits at every residual point, and which input tokens it
// leans on (gradient x input, integrated gradients at the embeddings' residual point), for every kind: a decoder's
// prompt, an encoder's prompt (the metric at its [MASK] by default), an image classifier's patches (the metric a
// class's logit at [CLS]), an encoder–decoder's source and target prefix (the metric at a target position).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/gradients.h"
#include "model/model.h"
#include "run/record.h"
#include "run/vision.h"
#include "tokenizer/tokenizer.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

// An image classifier's class: --NAME by its label (id2label), or --NAME-id N; -1 when neither is given.
static int class_arg(const args& a, const gb::model& m, const std::string& name, bool required) {
    if (!a.has(name)) return token_arg(a, m, name, required);
    if (a.has(name + "-id")) throw usage_error("give --" + name + " or --" + name + "-id, not both");
    const std::string label = a.get(name);
    for (int id = 0; id < m.config.vocab_size; id++)
        if (gb::token_text(m.tok, id) == label) return id;
    throw gb::error("--" + name + " '" + label + "' is not one of the model's " + std::to_string(m.config.vocab_size) +
                    " class labels (or give --" + name + "-id N)");
}

// The metric the options ask for: --metric, --target / --target-id, --contrast / --contrast-id, --position (-1
// when not given: the core's default for the kind).
static gb::metric_spec read_metric(const args& a, const gb::model& m, int T) {
    const bool classes = gb::kind_info_of(m.config).input == gb::INPUT_IMAGE;
    gb::metric_spec ms;
    ms.kind = gb::parse_metric(a.get("metric", "logit-diff"));
    ms.target = classes ? class_arg(a, m, "target", true) : token_arg(a, m, "target", true);
    ms.contrast = classes ? class_arg(a, m, "contrast", false) : token_arg(a, m, "contrast", false);
    if (ms.kind == gb::metric_spec::LOGIT_DIFF && ms.contrast < 0)
        throw usage_error("--metric logit-diff needs --contrast or --contrast-id (or use --metric logit)");
    if (ms.kind != gb::metric_spec::LOGIT_DIFF && ms.contrast >= 0)
        throw usage_error(std::string("--contrast: the metric ") + gb::metric_name(ms.kind) + " has no contrast");
    ms.position = a.has("position") ? (int)parse_int(a.get("position"), "--position", 0, T - 1) : -1;
    return ms;
}

// One table of positions: gradient x input and (steps) integrated gradients, each row named by piece(t).
template <class Piece>
static void print_rows(const char* title, int n, const std::vector<float>& gxi, const std::vector<float>& ig, bool steps,
                       Piece piece) {
    std::printf("%s\n  %-4s %-16s %14s %14s\n", title, "pos", "token", "grad x input", steps ? "integrated" : "");
    for (int t = 0; t < n; t++) {
        std::printf("  %-4d %s %+14.6f", t, padded(piece(t), 16).c_str(), gxi[t]);
        if (steps) std::printf(" %+14.6f", ig[t]);
        std::printf("\n");
    }
}

int cmd_grad(const args& a) {
    gb::model m = open_model(a);
    gb::require(m, gb::FEATURE_GRADIENTS);
    const gb::kind_input input = gb::kind_info_of(m.config).input;
    gb::session_request rq = read_input(a, m);
    const gb::ablation ab = parse_ablation(a, m);
    if (input == gb::INPUT_SOURCE_TARGET && rq.target.empty()) { // no --target-text: the model's own translation
        rq.ab = ab;
        rq.target = run_once(m, rq).target;
    }
    // the positions the metric and the rows count: the prompt, the image's, or the decoder's input
    const std::vector<int> tokens = input == gb::INPUT_IMAGE ? gb::vision_tokens(m.config)
                                    : input == gb::INPUT_SOURCE_TARGET ? rq.target
                                                                       : rq.tokens;
    const int T = (int)tokens.size();
    const gb::metric_spec ms = read_metric(a, m, T);
    const int steps = (int)parse_int(a.get("steps", "32"), "--steps", 0, 4096);
    const std::vector<std::string> notes = check_knockouts(ab, m, T);
    gb::forward_options base;
    base.pixels = input == gb::INPUT_IMAGE ? rq.pixels.data() : nullptr;
    const gb::saliency_result s = input == gb::INPUT_SOURCE_TARGET
                                      ? gb::saliency_seq2seq(m, rq.tokens, rq.target, ms, steps, ab)
                                      : gb::saliency(m, tokens, ms, steps, ab, base);
    auto piece = [&](int t) {
        return input == gb::INPUT_IMAGE ? gb::vision_piece(m.config, t) : quoted(m, tokens[t]);
    };
    const int at = s.metric.position;
    const std::string label = ms.kind == gb::metric_spec::LOGPROB ? "log p(" + quoted(m, ms.target) + ")"
                              : ms.contrast >= 0 ? "logit(" + quoted(m, ms.target) + ") - logit(" + quoted(m, ms.contrast) + ")"
                                                 : "logit(" + quoted(m, ms.target) + ")";
    std::printf("metric %s = %+.6f at position %d (%s)\n", label.c_str(), s.value, at, visible(piece(at)).c_str());
    if (input == gb::INPUT_SOURCE_TARGET)
        print_rows("source (the encoder's embeddings):", s.n_source, s.source_grad_x_input, s.source_integrated,
                   steps > 0, [&](int t) { return quoted(m, rq.tokens[t]); });
    print_rows(input == gb::INPUT_SOURCE_TARGET ? "target (the decoder's input):"
               : input == gb::INPUT_IMAGE       ? "positions ([CLS], then the patches row by row):"
                                                : "prompt:",
               T, s.grad_x_input, s.integrated, steps > 0, piece);
    if (steps > 0) {
        double sum = 0;
        for (float v : s.integrated) sum += v;
        for (float v : s.source_integrated) sum += v;
        std::printf("integrated gradients, %d midpoint steps from a zero stream: metric(x) - metric(0) = %+.6f, "
                    "their sum %+.6f, completeness gap %+.3g\n",
                    steps, s.value - s.baseline, sum, s.completeness_gap());
        // what a large gap usually means
        std::printf("(a norm rescales the nearly zero stream near alpha = 0, so the metric jumps there and is nearly flat "
                    "after: more --steps close the gap, slowly, least of all with RMSNorm)\n");
    }
    // an image's positions are not tokens of its "vocabulary" (its classes): named by their place in the grid
    nlohmann::json j = gb::saliency_json(s, m.tok, input == gb::INPUT_IMAGE ? std::vector<int>{} : tokens);
    if (input == gb::INPUT_IMAGE) {
        for (int t = 0; t < T; t++) j["tokens"].push_back({{"id", t}, {"text", gb::vision_piece(m.config, t)}});
        j["image"] = a.get("image");
    }
    if (input == gb::INPUT_SOURCE_TARGET) {
        nlohmann::json src = nlohmann::json::array();
        for (int id : rq.tokens) src.push_back({{"id", id}, {"text", gb::token_text(m.tok, id)}});
        j["source_tokens"] = src;
    }
    j["kind"] = gb::kind_info_of(m.config).name;
    j.update(knockouts_json(ab, notes));
    write_outputs(a, j, [&](const std::string& d) { gb::write_saliency_npy(d, s); });
    return 0;
}

} // namespace cli
