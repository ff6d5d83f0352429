// glassbox-cli feature: one feature of an SAE: its max-activating contexts over a corpus (the index built once,
// with progress, and cached beside the SAE) and its decoder direction's direct effect on the logits.
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/feature_index.h"
#include "analysis/features.h"
#include "args.h"
#include "commands.h"
#include "tokenizer/tokenizer.h"

namespace cli {

int cmd_feature(const args& a) {
    gb::model m = open_model(a);
    const gb::bound_sae b = open_sae_arg(a, m);
    const int id = (int)parse_int(a.need("id"), "--id", 0, b.s->d_sae - 1);
    const int top = (int)parse_int(a.get("top", "20"), "--top", 1, 1000);
    if (a.has("bos") && m.tok.bos_id < 0) throw usage_error("--bos: the model has no BOS token");
    nlohmann::json j = {{"sae", b.s->path}, {"hook", gb::hook_name(b.out)}, {"layer", b.layer}, {"id", id}};
    std::printf("feature %d of %s (%s, d_sae %d)\n", id, b.s->path.c_str(), gb::hook_label(b.in, b.layer).c_str(), b.s->d_sae);
    if (a.has("corpus")) {
        bool built = false;
        std::string path, note;
        const gb::feature_index ix = gb::cached_feature_index(m, b, a.get("corpus"), a.has("bos"), [](int done, int total) {
            if (done != total && (int64_t)done * 100 / total == (int64_t)(done - 1) * 100 / total) return; // each percent
            std::fprintf(stderr, "\rindexing the corpus: window %d of %d", done, total);
            if (done == total) std::fprintf(stderr, "\n");
        }, built, path, note);
        if (!note.empty()) std::fprintf(stderr, "warning: %s\n", note.c_str());
        std::printf("corpus index %s (%s, %zu windows of up to %d tokens)\n", path.c_str(), built ? "built" : "cached",
                    ix.chunks.size(), ix.window);
        nlohmann::json contexts = nlohmann::json::array();
        const std::vector<gb::feature_context>& tops = ix.top[id];
        if (top > ix.per_feature)
            std::fprintf(stderr, "note: the index keeps %d contexts per feature; showing at most those\n", ix.per_feature);
        for (size_t i = 0; i < tops.size() && (int)i < top; i++) {
            const std::string text = gb::context_text(m, ix, tops[i]);
            std::printf("  %8.3f  %s\n", tops[i].act, visible(text).c_str());
            const int token = ix.chunks[tops[i].window][tops[i].position];
            contexts.push_back({{"text", text}, {"window", tops[i].window}, {"position", tops[i].position},
                                {"token", gb::token_text(m.tok, token)}, {"activation", tops[i].act}});
        }
        if (tops.empty()) std::printf("  (the feature is never active on this corpus)\n");
        j["contexts"] = contexts;
        j["index"] = {{"path", path}, {"built", built}, {"windows", ix.chunks.size()}, {"window", ix.window}};
    }
    std::vector<gb::token_effect> up, down;
    gb::feature_logit_effect(up, down, m, b, id, std::min(top, m.config.vocab_size));
    auto list = [&](const char* what, const std::vector<gb::token_effect>& v) {
        nlohmann::json out = nlohmann::json::array();
        std::printf("%s:", what);
        for (const gb::token_effect& e : v) {
            std::printf(" %s %+.3f", quoted(m, e.id).c_str(), e.effect);
            out.push_back({{"id", e.id}, {"text", gb::token_text(m.tok, e.id)}, {"effect", e.effect}});
        }
        std::printf("\n");
        return out;
    };
    j["promotes"] = list("promotes", up);
    j["suppresses"] = list("suppresses", down);
    write_outputs(a, j, {});
    return 0;
}

} // namespace cli
