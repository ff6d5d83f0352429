// glassbox-cli generate: continue a prompt (or translate a source), printing the text as it comes; one
// continuation per temperature with --temperatures.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/export.h"
#include "model/kind.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/seq2seq.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

// --temperatures: one continuation per temperature from the same seed, top-k and top-p, each after the
// distribution of the first token it samples from (the prompt's last logits through sampling_distribution)
int generate_at_temperatures(const args& a, const gb::model& m, const std::string& prompt, const std::vector<int>& ids,
                             int max_new, gb::sampling sp, const gb::ablation& ab, const gb::steering& steer) {
    std::vector<std::vector<float>> steer_values;
    const std::vector<gb::intervention> extra = gb::steering_interventions(steer, m.config, steer_values);
    if (a.has("temperature")) throw usage_error("give --temperature or --temperatures, not both");
    std::vector<float> temps;
    for (const std::string& t : split(a.get("temperatures"), ','))
        temps.push_back((float)parse_float(t, "--temperatures", 0, 100));
    if (temps.empty() || temps.size() > 16)
        throw usage_error("--temperatures: expected 1 to 16 comma-separated numbers, got '" + a.get("temperatures") + "'");
    if (ids.empty()) throw gb::error("empty prompt: nothing to continue");
    if ((int)ids.size() > m.config.n_ctx)
        throw gb::error("prompt too long: " + std::to_string(ids.size()) + " tokens, the model's context is " +
                        std::to_string(m.config.n_ctx));
    gb::forward_options fo; // the prompt once, for its next-token logits
    fo.keep.points = 0;
    fo.keep.resid_norms = false;
    fo.interventions = extra;
    gb::record r;
    gb::run_forward(r, m, ids, ab, fo);
    std::vector<gb::temperature_run> runs;
    for (float t : temps) {
        gb::temperature_run run = gb::run_at_temperature(m, ids, r.last_logits(), r.vocab, sp, t, max_new, ab, {}, extra);
        const gb::sampling_dist& d = run.dist;
        std::printf("T = %g%s, seed %llu: the first token is drawn from", t, t == 0 ? " (greedy)" : "",
                    (unsigned long long)sp.seed);
        if (sp.top_k > 0) std::printf(" the top %d", sp.top_k);
        std::printf("\n ");
        for (size_t i = 0; i < d.ids.size() && i < 8; i++) std::printf(" %s %.3f", quoted(m, d.ids[i]).c_str(), d.probs[i]);
        if (d.ids.size() > 8) std::printf(" ... (%zu tokens)", d.ids.size());
        std::printf("\n%s%s\n\n", terminal_safe(prompt, true).c_str(), terminal_safe(run.text, true).c_str());
        runs.push_back(std::move(run));
    }
    if (a.has("json")) {
        nlohmann::json j = gb::temperatures_json(prompt, ids, runs, sp, m.tok);
        if (steer.vec) j["steering"] = steering_json(steer, a.get("steer"));
        gb::write_json(a.get("json"), j);
    }
    return 0;
}

// Encoder–decoders: the source's translation, greedy or sampled, printed as it is made
int generate_seq2seq(const args& a, const gb::model& m, int max_new, const gb::sampling& sp, const gb::ablation& ab) {
    const std::vector<int> src = gb::source_ids(m, a.need("source"));
    std::vector<int> made;
    const gb::generation g = gb::translate(m, src, max_new, sp, ab, [&](int id) {
        made.push_back(id);
        std::printf("%s", terminal_safe(gb::token_text(m.tok, id), true).c_str());
        std::fflush(stdout);
        return true;
    });
    std::vector<int> body = g.ids;
    if (g.hit_eos) body.pop_back();
    const std::string text = gb::utf8_sanitize(gb::decode(m.tok, body));
    std::printf("\n[%zu tokens%s, %.0f ms]\n", g.ids.size(), g.hit_eos ? ", ended by EOS" : "", g.ms);
    if (a.has("json"))
        gb::write_json(a.get("json"), nlohmann::json{{"source", a.get("source")}, {"source_ids", src}, {"ids", g.ids},
                                                     {"translation", text}, {"hit_eos", g.hit_eos}});
    return 0;
}

// --temperature, --top-k, --top-p, --seed
gb::sampling parse_sampling(const args& a, const gb::model& m) {
    gb::sampling sp;
    sp.temperature = (float)parse_float(a.get("temperature", "0"), "--temperature", 0, 100);
    sp.top_k = (int)parse_int(a.get("top-k", "0"), "--top-k", 0, m.config.vocab_size);
    sp.top_p = (float)parse_float(a.get("top-p", "1"), "--top-p", 0, 1);
    if (!(sp.top_p > 0)) throw usage_error("--top-p: expected a number in (0, 1], got '" + a.get("top-p") + "'");
    sp.seed = (uint64_t)parse_int(a.get("seed", "0"), "--seed", 0, std::numeric_limits<long>::max());
    return sp;
}

} // namespace

int cmd_generate(const args& a) {
    gb::model m = open_model(a);
    const gb::kind_input in = model_input(a, m);
    if (a.has("temperatures")) refuse_unless(m, gb::FEATURE_TEMPERATURES, "--temperatures");
    if (in == gb::INPUT_SOURCE_TARGET) {
        if (a.has("steer")) refuse_unless(m, gb::FEATURE_STEERING, "--steer");
        const gb::sampling sp = parse_sampling(a, m);
        const int max_new = (int)parse_int(a.need("max-new-tokens"), "--max-new-tokens", 1, m.config.n_ctx);
        return generate_seq2seq(a, m, max_new, sp, parse_ablation(a, m));
    }
    std::string prompt = a.need("prompt");
    std::vector<int> ids = prompt_ids(m, prompt, a.has("bos"));
    int max_new = (int)parse_int(a.need("max-new-tokens"), "--max-new-tokens", 0, 1 << 20);
    const gb::sampling sp = parse_sampling(a, m);
    gb::ablation ab = parse_ablation(a, m);
    const gb::steering steer = parse_steering(a, m);
    if (a.has("temperatures")) return generate_at_temperatures(a, m, prompt, ids, max_new, sp, ab, steer);
    std::vector<std::vector<float>> steer_values;
    const std::vector<gb::intervention> extra = gb::steering_interventions(steer, m.config, steer_values);
    if (steer.any()) std::fprintf(stderr, "steering: %s\n", steer.describe().c_str());
    std::fputs(terminal_safe(prompt, true).c_str(), stdout);
    std::fflush(stdout);
    std::string pending; // bytes of a UTF-8 character split across tokens are printed once complete
    gb::generation g = gb::generate(m, ids, max_new, sp, ab, [&](int id) {
        pending += gb::token_bytes(m.tok, id);
        if (gb::utf8_invalid_at(pending) < 0) {
            std::fputs(terminal_safe(pending, true).c_str(), stdout);
            std::fflush(stdout);
            pending.clear();
        }
        return true;
    }, extra);
    std::fputs(terminal_safe(gb::utf8_sanitize(pending), true).c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout); // the timing line on stderr comes after the text, also when both are piped
    std::fprintf(stderr, "%zu tokens in %.1f ms (%.1f tokens/s)%s\n", g.ids.size(), g.ms,
                 g.ms > 0 ? 1000.0 * g.ids.size() / g.ms : 0.0, g.hit_eos ? ", stopped at end-of-text" : "");
    if (a.has("json")) {
        nlohmann::json j = {{"prompt", prompt},
                            {"prompt_ids", ids},
                            {"generated_ids", g.ids},
                            {"generated_text", gb::utf8_sanitize(gb::decode(m.tok, g.ids))},
                            {"stopped_at_eos", g.hit_eos},
                            {"sampling",
                             {{"temperature", sp.temperature}, {"top_k", sp.top_k}, {"top_p", sp.top_p},
                              {"seed", sp.seed}}}};
        if (steer.vec) j["steering"] = steering_json(steer, a.get("steer"));
        gb::write_json(a.get("json"), j);
    }
    return 0;
}

} // namespace cli
