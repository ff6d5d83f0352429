// glassbox-cli run: one forward pass and what the model predicts (next token, fill mask, classes, the
// next target token of an encoder–decoder), with --json and --npy-dir.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/export.h"
#include "kernels/softmax.h"
#include "model/kind.h"
#include "model/model.h"
#include "run/forward.h"
#include "run/hooks.h"
#include "run/predict.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/image.h"
#include "util/npy.h"

#include "args.h"
#include "commands.h"

namespace cli {
namespace {

// MoE models: the experts each layer chose for the last token, with their mixing weights, largest first; an
// ablated expert has weight 0 (it did not run) and is named after them.
void print_routing(const gb::model& m, const gb::record& cap, const gb::ablation& ab) {
    const gb::model_config& c = m.config;
    if (!gb::offers(c, gb::FEATURE_EXPERTS)) return;
    const int T = cap.n_tokens, E = c.n_expert;
    std::printf("experts of the last token \"%s\" (top %d of %d per layer):\n", visible(cap.pieces[T - 1]).c_str(),
                c.n_expert_used, E);
    const gb::routing_table rt = gb::routing_of(cap, E);
    for (int l = 0; l < c.n_layer; l++) {
        std::printf("  L%-3d", l);
        if (!rt.kept[l]) {
            std::printf(" (not kept: memory budget)\n");
            continue;
        }
        const int* ids = rt.cell_ids(l, T - 1);
        const float* w = rt.cell_weights(l, T - 1);
        int n = 0;
        for (; n < rt.k && ids[n] >= 0; n++) std::printf("  expert %-3d %.3f", ids[n], w[n]);
        if (n == 0) std::printf("  (no expert)");
        for (const gb::head_ref& e : ab.experts)
            if (e.layer == l) std::printf("  [expert %d ablated]", e.head);
        std::printf("\n");
    }
}

void print_top(const gb::model& m, const std::string& title, const std::vector<gb::token_prob>& top) {
    std::printf("%s\n", title.c_str());
    int rank = 1;
    for (const gb::token_prob& tp : top)
        std::printf("  %2d. %s %.4f  (id %d)\n", rank++, padded(quoted(m, tp.id), 20).c_str(), tp.prob, tp.id);
}

// Encoders: the masked-LM head's fillers for each mask token; without one, its best guess at every position
// (how well it reconstructs the prompt). Returns the mask positions' slots (for --json).
std::vector<gb::fill_slot> print_fill_mask(const gb::model& m, const gb::record& cap, int top_k) {
    const std::vector<int> at = gb::mask_positions(cap, m.tok);
    const std::vector<gb::fill_slot> fills = gb::fill_mask(cap, at, top_k);
    for (const gb::fill_slot& f : fills)
        print_top(m, "fill mask at position " + std::to_string(f.position) + " (top " + std::to_string(top_k) + "):", f.top);
    if (fills.empty()) {
        const std::string mask = m.tok.mask_id >= 0 ? gb::token_text(m.tok, m.tok.mask_id) : "a mask token";
        std::printf("no %s in the prompt; the masked-LM head's best guess at each position:\n", mask.c_str());
        std::vector<int> all(cap.n_tokens);
        for (int t = 0; t < cap.n_tokens; t++) all[t] = t;
        for (const gb::fill_slot& f : gb::fill_mask(cap, all, 1))
            std::printf("  %3d %-16s -> %-16s %.4f\n", f.position, ("\"" + visible(cap.pieces[f.position]) + "\"").c_str(),
                        quoted(m, f.top[0].id).c_str(), f.top[0].prob);
    }
    return fills;
}

// Vision models: the classifier's top classes at [CLS] and where [CLS] looked (attention rollout).
void print_classes(const gb::model& m, const gb::record& cap, const std::vector<float>& roll, int top_k) {
    print_top(m, "top " + std::to_string(top_k) + " classes:", gb::top_k_probs(cap.logits.data(), cap.vocab, top_k));
    std::vector<int> order;
    for (int t = m.config.n_prefix; t < cap.n_tokens; t++) order.push_back(t);
    std::sort(order.begin(), order.end(), [&](int x, int y) { return roll[x] > roll[y]; });
    std::printf("patches [CLS] draws on most (attention rollout over all layers):");
    for (size_t i = 0; i < order.size() && i < 5; i++) std::printf(" %s %.3f", cap.pieces[order[i]].c_str(), roll[order[i]]);
    std::printf("\n");
}

// Each decoder row's written token and the source token it reads most. Row t reads target token t and writes
// token t + 1 (the last row: its prediction), so the token a row's cross-attention translates is the one it writes.
std::vector<int> print_alignment(const gb::model& m, const gb::seq2seq_record& r, const std::vector<int>& tgt) {
    const gb::record& dec = r.decoder;
    const std::vector<int> align = gb::cross_alignment(dec);
    std::printf("alignment (the token each decoder row writes, and the source token it reads most: cross-attention "
                "averaged over heads and layers):\n");
    for (int t = 0; t < dec.n_tokens; t++) {
        const int writes = t + 1 < dec.n_tokens ? tgt[t + 1] : gb::top_k_probs(dec.last_logits(), dec.vocab, 1)[0].id;
        std::printf("  %s <- %s\n", padded(quoted(m, writes), 16).c_str(),
                    ("\"" + visible(r.encoder.pieces[align[t]]) + "\"").c_str());
    }
    return align;
}

// --json: the decoder's record with the source, the target, the translation and the alignment; --npy-dir: the
// encoder's record as a decoder-only run's (tokens.npy the source, attention.npy its self-attention), then the
// decoder's under decoder_* and the cross-attention; logits.npy is the decoder's [T, V]
void write_seq2seq_outputs(const args& a, const gb::model& m, const gb::seq2seq_record& r, const std::vector<int>& src,
                           const std::vector<int>& tgt, const gb::ablation& ab, int top_k, const std::vector<int>& align) {
    const gb::record& dec = r.decoder;
    if (a.has("json")) {
        nlohmann::json j = gb::capture_json(m, dec, ab, top_k);
        j["source_ids"] = src;
        j["source_tokens"] = r.encoder.pieces;
        j["target_ids"] = tgt;
        j["translation"] = gb::utf8_sanitize(gb::decode(m.tok, std::vector<int>(tgt.begin() + 1, tgt.end())));
        j["alignment"] = align;
        j["encoder_resid_norm"] = r.encoder.resid_norm;
        gb::write_json(a.get("json"), j);
    }
    if (a.has("npy-dir")) {
        const std::string dir = a.get("npy-dir");
        gb::write_capture_npy(dir, r.encoder);
        gb::write_record_npy(dir, r.encoder);
        const int L = dec.n_layer, H = dec.n_head, T = dec.n_tokens, S = dec.n_source;
        gb::write_npy(dir + "/logits.npy", {T, dec.vocab}, dec.logits.data());
        gb::write_npy(dir + "/decoder_attention.npy", {L, H, T, T}, dec.flat(gb::HOOK_PATTERN).data());
        gb::write_npy(dir + "/cross_attention.npy", {L, H, T, S}, dec.flat(gb::HOOK_CROSS_PATTERN).data());
        gb::write_npy(dir + "/decoder_residual_norms.npy", {2 * L + 1, T}, dec.resid_norm.data());
        const std::vector<int32_t> ids(tgt.begin(), tgt.end());
        gb::write_npy(dir + "/target_tokens.npy", {T}, ids.data());
    }
}

// Encoder–decoders: the source through the encoder, the target (given, or the greedy translation) through the
// decoder; the next target token, and which source token each target token reads most (cross-attention averaged
// over heads and layers)
int run_seq2seq(const args& a, const gb::model& m) {
    const std::vector<int> src = gb::source_ids(m, a.need("source"));
    const gb::ablation ab = parse_ablation(a, m);
    const int top_k = (int)parse_int(a.get("top-k", std::to_string(std::min(10, m.config.vocab_size))), "--top-k", 1, m.config.vocab_size);
    const std::vector<int> tgt = seq2seq_target(a, m, src, ab);
    gb::forward_options opt;
    opt.attention = choose_backend(a);
    opt.keep.budget_bytes = (size_t)parse_int(a.get("capture-budget", "512"), "--capture-budget", 1, 1 << 20) << 20;
    gb::seq2seq_record r;
    gb::run_seq2seq(r, m, src, tgt, ab, opt);
    const gb::record& dec = r.decoder;
    std::printf("source (%d):", r.encoder.n_tokens);
    for (int t = 0; t < r.encoder.n_tokens; t++) std::printf(" [%d \"%s\"]", src[t], visible(r.encoder.pieces[t]).c_str());
    std::printf("\ntarget (%d):", dec.n_tokens);
    for (int t = 0; t < dec.n_tokens; t++) std::printf(" [%d \"%s\"]", tgt[t], visible(dec.pieces[t]).c_str());
    const std::vector<int> body(tgt.begin() + 1, tgt.end());
    std::printf("\ntranslation: %s\nablation: %s\n", terminal_safe(gb::utf8_sanitize(gb::decode(m.tok, body)), true).c_str(),
                ab.describe().c_str());
    if (dec.nonfinite_layer >= 0) std::printf("warning: non-finite values (NaN/Inf) first appear at %s\n", dec.nonfinite_where.c_str());
    print_top(m, "top " + std::to_string(top_k) + " next target tokens:", gb::top_k_probs(dec.last_logits(), dec.vocab, top_k));
    const std::vector<int> align = print_alignment(m, r, tgt);
    write_seq2seq_outputs(a, m, r, src, tgt, ab, top_k, align);
    return 0;
}

// --all-logits, --backend, --keep (more hook points into the record, for --npy-dir) and --capture-budget; the
// prompt within the context
gb::forward_options run_options(const args& a, const gb::model& m, const std::vector<int>& ids,
                                const std::vector<float>& pixels) {
    gb::forward_options opt;
    opt.all_logits = a.has("all-logits");
    opt.attention = choose_backend(a);
    if (!pixels.empty()) opt.pixels = pixels.data();
    if ((int)ids.size() > m.config.n_ctx)
        throw gb::error("prompt too long: " + std::to_string(ids.size()) + " tokens, the model's context is " +
                        std::to_string(m.config.n_ctx));
    for (const std::string& name : split(a.get("keep"), ',')) {
        if (!a.has("npy-dir")) throw usage_error("--keep names points to write to --npy-dir, but no --npy-dir was given");
        if (name == "resid_stream") opt.keep.resid_stream = true;
        else {
            const gb::hook_point p = gb::parse_hook_point(name);
            if (p == gb::HOOK_ROUTER) refuse_unless(m, gb::FEATURE_EXPERTS, "--keep router");
            if (!gb::hook_exists(p, m.config))
                throw usage_error("--keep " + name + ": an MoE model's MLP has no single activation (see router)");
            opt.keep.points |= gb::hook_bit(p);
        }
    }
    // capture budget: beyond it only some layers are kept (the rest are zero in attention.npy and the others)
    opt.keep.budget_bytes = (size_t)parse_int(a.get("capture-budget", "512"), "--capture-budget", 1, 1 << 20) << 20;
    return opt;
}

// What run predicts, by the kind's output: an image classifier's classes at [CLS] (with the rollout), an
// encoder's fillers of each mask, or the next token.
struct prediction {
    gb::kind_output output;
    std::vector<gb::fill_slot> fills; // OUTPUT_FILL_MASK: each mask's
    std::vector<float> roll;          // OUTPUT_CLASSES: [T][T] attention rollout, row 0 [CLS]
};

prediction print_prediction(const gb::model& m, const gb::record& cap, int top_k) {
    prediction p{gb::kind_info_of(m.config).output, {}, {}};
    if (p.output == gb::OUTPUT_CLASSES) {
        p.roll = gb::attention_rollout(cap);
        print_classes(m, cap, p.roll, top_k);
    } else if (p.output == gb::OUTPUT_FILL_MASK) {
        p.fills = print_fill_mask(m, cap, top_k);
    } else {
        print_top(m, "top " + std::to_string(top_k) + " next tokens:", gb::top_k_probs(cap.last_logits(), cap.vocab, top_k));
    }
    return p;
}

// --json: the record's summary and the prediction; --npy-dir: the record's arrays (an image: also its rollout and
// pixels)
void write_run_outputs(const args& a, const gb::model& m, const gb::record& cap, const gb::ablation& ab, int top_k,
                       const prediction& p, const std::vector<float>& pixels) {
    const bool vision = p.output == gb::OUTPUT_CLASSES;
    if (a.has("json")) {
        nlohmann::json j = gb::capture_json(m, cap, ab, top_k);
        if (p.output == gb::OUTPUT_FILL_MASK) j["fill_mask"] = gb::fill_mask_json(p.fills, cap, m.tok);
        if (vision) {
            j["classes"] = gb::fill_mask_json(gb::fill_mask(cap, {0}, top_k), cap, m.tok)[0]["top"];
            j["image"] = a.get("image");
            j["rollout_cls"] = std::vector<float>(p.roll.begin(), p.roll.begin() + cap.n_tokens);
        }
        gb::write_json(a.get("json"), j);
    }
    if (a.has("npy-dir")) {
        gb::write_capture_npy(a.get("npy-dir"), cap);
        gb::write_record_npy(a.get("npy-dir"), cap);
        if (vision) {
            const int T = cap.n_tokens;
            gb::write_npy(a.get("npy-dir") + "/rollout.npy", {T, T}, p.roll.data());
            gb::write_npy(a.get("npy-dir") + "/pixels.npy", {3, m.config.image_size, m.config.image_size}, pixels.data());
        }
    }
}

} // namespace

// One forward pass of the prompt (or image) under the ablation: its tokens, the prediction, the routing of an MoE
// model, and --json / --npy-dir. An encoder–decoder's run is run_seq2seq.
int cmd_run(const args& a) {
    gb::model m = open_model(a);
    const gb::kind_input in = model_input(a, m);
    if (in == gb::INPUT_SOURCE_TARGET) return run_seq2seq(a, m);
    std::vector<float> pixels; // an image's, kept alive for the run
    const std::vector<int> ids = in == gb::INPUT_IMAGE ? image_input(a, m, pixels) : prompt_ids(m, a.need("prompt"), a.has("bos"));
    const gb::ablation ab = parse_ablation(a, m);
    const int top_k = (int)parse_int(a.get("top-k", std::to_string(std::min(10, m.config.vocab_size))), "--top-k", 1, m.config.vocab_size);
    const gb::forward_options opt = run_options(a, m, ids, pixels);
    gb::record cap;
    gb::run_forward(cap, m, ids, ab, opt);
    if (!cap.budget_note.empty())
        std::fprintf(stderr, "notice: %s; raise --capture-budget to keep every layer\n", cap.budget_note.c_str());

    if (!pixels.empty()) // an image's positions are named by their place: the first and last say it all
        std::printf("positions (%d): %s .. %s", cap.n_tokens, cap.pieces[0].c_str(), cap.pieces.back().c_str());
    else std::printf("tokens (%d):", cap.n_tokens);
    for (int t = 0; t < cap.n_tokens && pixels.empty(); t++) std::printf(" [%d \"%s\"]", cap.tokens[t], visible(cap.pieces[t]).c_str());
    std::printf("\nablation: %s\n", ab.describe().c_str());
    if (cap.nonfinite_layer >= 0)
        std::printf("warning: non-finite values (NaN/Inf) first appear at %s\n", cap.nonfinite_where.c_str());
    const prediction p = print_prediction(m, cap, top_k);
    print_routing(m, cap, ab);
    write_run_outputs(a, m, cap, ab, top_k, p, pixels);
    return 0;
}

} // namespace cli
