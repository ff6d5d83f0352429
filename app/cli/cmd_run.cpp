// glassbox-cli run: the model on its input through the session (core/run/session.h), and what it predicts,
// printed by the kind's output: the next token, an encoder's fillers, an image's classes, an encoder–decoder's
// next target token and alignment; an MoE model's routing; with --json and --npy-dir.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/export.h"
#include "analysis/surprisal.h"
#include "args.h"
#include "commands.h"
#include "input.h"
#include "kernels/softmax.h"
#include "run/hooks.h"
#include "run/predict.h"
#include "run/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/npy.h"

namespace cli {
namespace {

// The request: the input by kind, the ablation, --all-logits, --backend, --capture-budget and --keep (more hook
// points into the records, for --npy-dir).
gb::session_request run_request(const args& a, const gb::model& m) {
    gb::session_request rq = read_input(a, m);
    rq.ab = parse_ablation(a, m);
    rq.steer = parse_steering(a, m);
    rq.top_k = (int)parse_int(a.get("top-k", std::to_string(std::min(10, m.config.vocab_size))), "--top-k", 1,
                              m.config.vocab_size);
    if (a.has("loss")) refuse_unless(m, gb::FEATURE_SURPRISAL, "--loss");
    // an encoder–decoder's logits.npy holds every target position's prediction; --loss reads every position's
    rq.all_logits = a.has("all-logits") || a.has("loss") || gb::kind_info_of(m.config).output == gb::OUTPUT_NEXT_TARGET;
    with_backend(rq, a);
    with_budget(rq, a); // beyond it only some layers are kept (the rest are zero in attention.npy and the others)
    for (const std::string& name : split(a.get("keep"), ',')) {
        if (!a.has("npy-dir")) throw usage_error("--keep names points to write to --npy-dir, but no --npy-dir was given");
        if (name == "resid_stream") {
            rq.keep.resid_stream = true;
            continue;
        }
        const gb::hook_point p = gb::parse_hook_point(name);
        if (p == gb::HOOK_ROUTER) refuse_unless(m, gb::FEATURE_EXPERTS, "--keep router");
        if (!gb::hook_exists(p, m.config))
            throw usage_error("--keep " + name + ": " +
                              (p == gb::HOOK_MLP_POST ? "an MoE model's MLP has no single activation (see router)"
                                                      : gb::refusal(m, gb::FEATURE_CROSS)));
        rq.keep.points |= gb::hook_bit(p);
    }
    return rq;
}

void print_top(const gb::model& m, const std::string& title, const std::vector<gb::token_prob>& top) {
    std::printf("%s\n", title.c_str());
    int rank = 1;
    for (const gb::token_prob& tp : top)
        std::printf("  %2d. %s %.4f  (id %d)\n", rank++, padded(quoted(m, tp.id), 20).c_str(), tp.prob, tp.id);
}

// What ran: the tokens (an image's positions by their place; an encoder–decoder's source, target and
// translation), the ablation, and where NaN or Inf first appeared.
void print_inputs(const gb::model& m, const gb::session_result& r, const gb::ablation& ab, const gb::steering& steer) {
    const gb::record& run = *r.run;
    auto tokens = [](const char* what, const gb::record& rec) {
        std::printf("%s (%d):", what, rec.n_tokens);
        for (int t = 0; t < rec.n_tokens; t++) std::printf(" [%d \"%s\"]", rec.tokens[t], visible(rec.pieces[t]).c_str());
        std::printf("\n");
    };
    switch (gb::kind_info_of(m.config).input) {
    case gb::INPUT_IMAGE:
        std::printf("positions (%d): %s .. %s\n", run.n_tokens, run.pieces[0].c_str(), run.pieces.back().c_str());
        break;
    case gb::INPUT_SOURCE_TARGET:
        tokens("source", *r.encoder);
        tokens("target", run);
        std::printf("translation: %s\n", terminal_safe(r.translation, true).c_str());
        break;
    case gb::INPUT_TEXT: tokens("tokens", run); break;
    }
    std::printf("ablation: %s\n", ab.describe().c_str());
    if (steer.any()) std::printf("steering: %s\n", steer.describe().c_str());
    if (run.nonfinite_layer >= 0) std::printf("warning: non-finite values (NaN/Inf) first appear at %s\n", run.nonfinite_where.c_str());
}

// An encoder without a mask in the prompt: the masked-LM head's best guess at each position (how well it
// reconstructs the prompt).
void print_reconstruction(const gb::model& m, const gb::record& run) {
    const std::string mask = m.tok.mask_id >= 0 ? gb::token_text(m.tok, m.tok.mask_id) : "a mask token";
    std::printf("no %s in the prompt; the masked-LM head's best guess at each position:\n", mask.c_str());
    std::vector<int> all(run.n_tokens);
    for (int t = 0; t < run.n_tokens; t++) all[t] = t;
    for (const gb::fill_slot& f : gb::fill_mask(run, all, 1))
        std::printf("  %3d %-16s -> %-16s %.4f\n", f.position, ("\"" + visible(run.pieces[f.position]) + "\"").c_str(),
                    quoted(m, f.top[0].id).c_str(), f.top[0].prob);
}

// The prediction as the kind's output says.
void print_prediction(const gb::model& m, const gb::session_result& r, int top_k) {
    const gb::prediction& p = r.pred;
    const gb::record& run = *r.run;
    const std::string k = std::to_string(top_k);
    switch (p.output) {
    case gb::OUTPUT_NEXT_TOKEN: print_top(m, "top " + k + " next tokens:", p.top); break;
    case gb::OUTPUT_FILL_MASK:
        for (const gb::fill_slot& f : p.fills)
            print_top(m, "fill mask at position " + std::to_string(f.position) + " (top " + k + "):", f.top);
        if (p.fills.empty()) print_reconstruction(m, run);
        break;
    case gb::OUTPUT_CLASSES: {
        print_top(m, "top " + k + " classes:", p.top);
        std::vector<int> order;
        for (int t = m.config.n_prefix; t < run.n_tokens; t++) order.push_back(t);
        std::sort(order.begin(), order.end(), [&](int x, int y) { return p.rollout[x] > p.rollout[y]; });
        std::printf("patches [CLS] draws on most (attention rollout over all layers):");
        for (size_t i = 0; i < order.size() && i < 5; i++) std::printf(" %s %.3f", run.pieces[order[i]].c_str(), p.rollout[order[i]]);
        std::printf("\n");
        break;
    }
    case gb::OUTPUT_NEXT_TARGET:
        print_top(m, "top " + k + " next target tokens:", p.top);
        // row t reads target token t and writes token t + 1 (the last row: its prediction), so the token a row's
        // cross-attention translates is the one it writes
        std::printf("alignment (the token each decoder row writes, and the source token it reads most: cross-attention "
                    "averaged over heads and layers):\n");
        for (int t = 0; t < run.n_tokens && t < (int)p.alignment.size(); t++) {
            const int writes = t + 1 < run.n_tokens ? r.target[t + 1] : p.top[0].id;
            std::printf("  %s <- %s\n", padded(quoted(m, writes), 16).c_str(),
                        ("\"" + visible(r.encoder->pieces[p.alignment[t]]) + "\"").c_str());
        }
        break;
    }
}

// MoE models: the experts each layer chose for the last token, with their mixing weights, largest first; an
// ablated expert has weight 0 (it did not run) and is named after them.
void print_routing(const gb::model& m, const gb::session_result& r, const gb::ablation& ab) {
    const gb::routing_table& rt = r.pred.routing;
    if (rt.empty()) return;
    const int T = r.run->n_tokens;
    std::printf("experts of the last token \"%s\" (top %d of %d per layer):\n", visible(r.run->pieces[T - 1]).c_str(),
                m.config.n_expert_used, m.config.n_expert);
    for (int l = 0; l < rt.n_layer; l++) {
        std::printf("  L%-3d", l);
        if (!rt.kept[l]) {
            std::printf(" (not kept: memory budget)\n");
            continue;
        }
        int n = 0;
        for (; n < rt.k && rt.cell_ids(l, T - 1)[n] >= 0; n++)
            std::printf("  expert %-3d %.3f", rt.cell_ids(l, T - 1)[n], rt.cell_weights(l, T - 1)[n]);
        if (n == 0) std::printf("  (no expert)");
        for (const gb::head_ref& e : ab.experts)
            if (e.layer == l) std::printf("  [expert %d ablated]", e.head);
        std::printf("\n");
    }
}

// --loss: each token's -log p given the ones before it, and the model's own guess there.
void print_loss(const gb::model& m, const gb::surprisal_result& s, const gb::record& run) {
    std::printf("loss of each token given the ones before it (nats; the model's top guess there):\n");
    for (int t = 1; t < s.n_tokens; t++)
        std::printf("  %3d %s %7.3f   %s %.3f\n", t, padded("\"" + visible(run.pieces[t]) + "\"", 16).c_str(), s.nats[t],
                    padded(quoted(m, s.top_ids[t]), 16).c_str(), s.top_probs[t]);
    std::printf("mean %.3f nats/token over %d tokens, %.3f bits per UTF-8 byte\n", s.mean_nats, s.scored, s.bits_per_byte);
}

nlohmann::json loss_json(const gb::model& m, const gb::surprisal_result& s) {
    nlohmann::json nats = nlohmann::json::array(), top = nlohmann::json::array();
    for (int t = 0; t < s.n_tokens; t++) {
        nats.push_back(t == 0 ? nlohmann::json() : nlohmann::json(s.nats[t]));
        top.push_back(t == 0 ? nlohmann::json()
                             : nlohmann::json{{"id", s.top_ids[t]}, {"text", gb::token_text(m.tok, s.top_ids[t])},
                                              {"prob", s.top_probs[t]}});
    }
    return {{"nats", nats}, {"top", top}, {"mean_nats", s.mean_nats}, {"bits_per_byte", s.bits_per_byte},
            {"scored", s.scored}};
}

// --json: the record's summary and the prediction, an encoder–decoder's source, target, translation and alignment
void write_json(const args& a, const gb::model& m, const gb::session_result& r, const gb::session_request& rq,
                const std::vector<std::string>& notes, const nlohmann::json& sae) {
    const gb::record& run = *r.run;
    nlohmann::json j = gb::capture_json(m, run, rq.ab, rq.top_k);
    j.update(knockouts_json(rq.ab, notes));
    if (rq.steer.vec) j["steering"] = steering_json(rq.steer, a.get("steer"));
    if (!sae.is_null()) j["sae"] = sae;
    switch (r.pred.output) {
    case gb::OUTPUT_FILL_MASK: j["fill_mask"] = gb::fill_mask_json(r.pred.fills, run, m.tok); break;
    case gb::OUTPUT_CLASSES:
        j["classes"] = gb::fill_mask_json(gb::fill_mask(run, {0}, rq.top_k), run, m.tok)[0]["top"];
        j["image"] = a.get("image");
        j["rollout_cls"] = std::vector<float>(r.pred.rollout.begin(), r.pred.rollout.begin() + run.n_tokens);
        break;
    case gb::OUTPUT_NEXT_TARGET:
        j["source_ids"] = r.encoder->tokens;
        j["source_tokens"] = r.encoder->pieces;
        j["target_ids"] = r.target;
        j["translation"] = r.translation;
        j["alignment"] = r.pred.alignment;
        j["encoder_resid_norm"] = r.encoder->resid_norm;
        break;
    case gb::OUTPUT_NEXT_TOKEN: break;
    }
    if (a.has("loss")) j["loss"] = loss_json(m, gb::surprisal(run, m.tok));
    gb::write_json(a.get("json"), j);
}

// --npy-dir: the record's arrays (an image: also its rollout and pixels); an encoder–decoder's encoder record as
// a decoder-only run's (tokens.npy the source, attention.npy its self-attention), then the decoder's under
// decoder_* (and target_tokens.npy, cross_attention.npy); logits.npy is the decoder's [T, V]
void write_npy_dir(const args& a, const gb::model& m, const gb::session_result& r, const gb::session_request& rq) {
    const std::string dir = a.get("npy-dir");
    const gb::record& run = *r.run;
    if (r.pred.output != gb::OUTPUT_NEXT_TARGET) {
        gb::write_capture_npy(dir, run);
        gb::write_record_npy(dir, run);
    } else {
        gb::write_capture_npy(dir, *r.encoder);
        gb::write_record_npy(dir, *r.encoder);
        gb::write_capture_npy(dir, run, "decoder_");
        gb::write_record_npy(dir, run, "decoder_");
        gb::write_npy(dir + "/logits.npy", {run.n_tokens, run.vocab}, run.logits.data()); // (as before decoder_logits.npy)
        const std::vector<int32_t> ids(r.target.begin(), r.target.end());
        gb::write_npy(dir + "/target_tokens.npy", {run.n_tokens}, ids.data());
    }
    if (r.pred.output == gb::OUTPUT_CLASSES) {
        const int T = run.n_tokens;
        gb::write_npy(dir + "/rollout.npy", {T, T}, r.pred.rollout.data());
        gb::write_npy(dir + "/pixels.npy", {3, m.config.image_size, m.config.image_size}, rq.pixels.data());
    }
}

} // namespace

int cmd_run(const args& a) {
    gb::model m = open_model(a);
    gb::session_request rq = run_request(a, m);
    std::vector<float> feature_values; // the SET values of --sae's feature interventions, kept through the run
    const nlohmann::json sae = feature_edits_for_run(a, m, rq, feature_values);
    const std::vector<std::string> notes = check_knockouts(rq.ab, m, (int)rq.tokens.size());
    const gb::session_result r = run_once(m, rq);
    if (!r.report.memory_note.empty())
        std::fprintf(stderr, "notice: %s; raise --capture-budget to keep every layer\n", r.report.memory_note.c_str());
    print_inputs(m, r, rq.ab, rq.steer);
    print_prediction(m, r, rq.top_k);
    print_routing(m, r, rq.ab);
    if (a.has("loss")) print_loss(m, gb::surprisal(*r.run, m.tok), *r.run);
    if (a.has("json")) write_json(a, m, r, rq, notes, sae);
    if (a.has("npy-dir")) write_npy_dir(a, m, r, rq);
    return 0;
}

} // namespace cli
