// The SAE options: opening --sae (or, on the default model, the SAE shipped with it) with its warnings on
// stderr, --transcoders (or the default model's shipped set), and run's feature interventions (--feature-ablate, --feature-clamp, --feature-steer) made into a SET
// intervention at the SAE's point.
#include <cstdio>

#include "analysis/features.h"
#include "args.h"
#include "io/loader.h"

namespace cli {

std::string sae_path_arg(const args& a, const gb::model& m) {
    return a.has("sae") ? a.get("sae") : gb::default_sae_path(m);
}

std::string transcoders_arg(const args& a, const gb::model& m) {
    const std::string path = a.has("transcoders") ? a.get("transcoders") : gb::default_transcoders_path(m);
    if (path.empty()) a.need("transcoders"); // the usage error: m is not the default model with its set
    return path;
}

gb::bound_sae open_sae_arg(const args& a, const gb::model& m) {
    refuse_unless(m, gb::FEATURE_SAE, "--sae");
    const std::string path = sae_path_arg(a, m);
    if (path.empty()) a.need("sae"); // the usage error: no --sae, and m is not the default model with its SAE
    gb::bound_sae b = gb::open_sae(path, m);
    for (const std::string& w : b.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    return b;
}

nlohmann::json feature_edits_for_run(const args& a, const gb::model& m, gb::session_request& rq, std::vector<float>& values) {
    const char* opts[] = {"feature-ablate", "feature-clamp", "feature-steer"};
    bool any = false;
    for (const char* o : opts) any |= a.has(o);
    if (!a.has("sae") && !any) return nullptr;
    if (sae_path_arg(a, m).empty())
        throw usage_error("--feature-ablate, --feature-clamp and --feature-steer need --sae DIR (only the default model "
                          "has an SAE without it)");
    if (!any) throw usage_error("--sae needs a feature intervention: --feature-ablate, --feature-clamp or --feature-steer "
                                "(glassbox-cli features shows its features)");
    if (rq.steer.any()) throw usage_error("--sae's feature interventions and --steer together are not supported yet");
    const gb::bound_sae b = open_sae_arg(a, m);
    std::vector<gb::feature_edit> edits;
    const gb::feature_edit_kind kinds[] = {gb::FEATURE_ABLATE, gb::FEATURE_CLAMP, gb::FEATURE_STEER};
    for (int i = 0; i < 3; i++)
        if (a.has(opts[i])) gb::parse_feature_edits(edits, kinds[i], a.get(opts[i]), std::string("--") + opts[i], b.s->d_sae);
    // the activations at the SAE's points as this run reaches them (the ablation applies before them), then the edits
    const gb::record rec = gb::sae_record(m, b, rq.tokens, rq.ab);
    rq.interventions.push_back(gb::feature_intervention(b, rec, edits, values));
    nlohmann::json ablate = nlohmann::json::array(), clamp = nlohmann::json::array(), steer = nlohmann::json::array();
    std::string said;
    for (const gb::feature_edit& e : edits) {
        if (e.kind == gb::FEATURE_ABLATE) ablate.push_back(e.id);
        else (e.kind == gb::FEATURE_CLAMP ? clamp : steer).push_back({{"id", e.id}, {"value", e.value}});
        char v[64];
        std::snprintf(v, sizeof v, e.kind == gb::FEATURE_ABLATE ? "ablate %d" : e.kind == gb::FEATURE_CLAMP ? "clamp %d=%g" : "steer %d=%g",
                      e.id, e.value);
        said += (said.empty() ? "" : ", ") + std::string(v);
    }
    std::printf("features: %s at %s (%s, d_sae %d)\n", said.c_str(), gb::hook_label(b.out, b.layer).c_str(), b.s->hook_name.c_str(), b.s->d_sae);
    return {{"path", b.s->path}, {"hook", gb::hook_name(b.out)}, {"hook_name", b.s->hook_name}, {"layer", b.layer},
            {"d_sae", b.s->d_sae}, {"feature_ablate", ablate}, {"feature_clamp", clamp}, {"feature_steer", steer}};
}

} // namespace cli
