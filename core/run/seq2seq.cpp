#include "run/seq2seq.h"

#include <algorithm>
#include <chrono>

#include "model/arch.h"
#include "util/error.h"

namespace gb {

bool is_seq2seq(const model& m) { return kind_of(m.config) == KIND_SEQ2SEQ && m.encoder; }

static void need_seq2seq(const model& m) {
    if (!is_seq2seq(m))
        throw error(std::string(arch_table(m.config.arch).name) + " is not an encoder–decoder: it has no source");
}

std::vector<int> source_ids(const model& m, const std::string& text) {
    need_seq2seq(m);
    std::vector<int> ids = encode_prompt(m.tok, text, false);
    if (m.tok.prefix_ids.empty() && m.tok.suffix_ids.empty() && m.config.eos_id >= 0) ids.push_back(m.config.eos_id);
    return ids;
}

std::vector<int> target_ids(const model& m, const std::string& text) {
    need_seq2seq(m);
    // HF trains the decoder on shift_tokens_right(tokenizer(text_target)): the start token, then the target as the
    // tokenizer frames it, its end cut off: BART's <s> comes first (<s> text </s>), Marian's and mBART's frames add
    // nothing before the text
    std::vector<int> ids = {m.config.decoder_start_id};
    ids.insert(ids.end(), m.tok.prefix_ids.begin(), m.tok.prefix_ids.end());
    const std::vector<int> body = encode(m.tok, text);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
}

ablation stack_ablation(const ablation& ab, int n_layer, int n_head) {
    ablation out;
    for (auto [from, to] : {std::pair{&ab.no_attention, &out.no_attention}, std::pair{&ab.no_residual, &out.no_residual},
                            std::pair{&ab.no_layernorm, &out.no_layernorm}}) {
        if (!from->on) continue;
        to->on = true;
        for (int l : from->layers)
            if (l < n_layer) to->layers.push_back(l);
        if (!from->layers.empty() && to->layers.empty()) to->on = false; // named only layers this stack lacks
    }
    for (const head_ref& h : ab.heads)
        if (h.layer < n_layer && h.head < n_head) out.heads.push_back(h);
    return out;
}

std::vector<float> run_encoder(record* rec, const model& m, const std::vector<int>& source, const ablation& ab,
                               const forward_options& opt) {
    need_seq2seq(m);
    const model& enc = *m.encoder;
    if (source.empty()) throw error("empty source: nothing to translate");
    if ((int)source.size() > enc.config.n_ctx)
        throw error("source too long: " + std::to_string(source.size()) + " tokens, the model's context is " +
                    std::to_string(enc.config.n_ctx));
    forward_state s;
    state_init(s, enc.config, (int)source.size());
    forward_options o;
    o.keep = opt.keep;
    o.cancelled = opt.cancelled;
    o.attention = opt.attention;
    o.interventions = ablation_interventions(stack_ablation(ab, enc.config.n_layer, enc.config.n_head), enc.config);
    std::vector<float> out;
    eval(out, rec, s, enc, source.data(), (int)source.size(), o);
    if (rec) rec->logits.clear(); // eval's "logits" of a stack without a head are its output, returned here
    return out;
}

void run_seq2seq(seq2seq_record& out, const model& m, const std::vector<int>& source, const std::vector<int>& target,
                 const ablation& ab, const forward_options& opt) {
    out.source_out = run_encoder(&out.encoder, m, source, ab, opt);
    if (target.empty()) throw error("empty target: the decoder needs at least its start token");
    if ((int)target.size() > m.config.n_ctx)
        throw error("target too long: " + std::to_string(target.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    forward_state s;
    state_init(s, m.config, (int)target.size());
    forward_options o = opt;
    o.all_logits = true;
    o.source = out.source_out.data();
    o.n_source = (int)source.size();
    const std::vector<intervention> iv =
        ablation_interventions(stack_ablation(ab, m.config.n_layer, m.config.n_head), m.config);
    o.interventions.insert(o.interventions.begin(), iv.begin(), iv.end());
    eval(out.decoder.logits, &out.decoder, s, m, target.data(), (int)target.size(), o);
    out.decoder.source_pieces = out.encoder.pieces;
}

std::vector<float> cross_average(const record& dec, int layer) {
    const int T = dec.n_tokens, S = dec.n_source, H = dec.n_head;
    if (S <= 0) return {};
    if (layer >= dec.n_layer) throw error("layer " + std::to_string(layer) + " is outside the decoder's " + std::to_string(dec.n_layer));
    const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? dec.n_layer : layer + 1;
    std::vector<double> sum((size_t)T * S, 0.0);
    int kept = 0; // layers whose pattern the record kept (a memory budget may leave some out)
    for (int l = l0; l < l1; l++) {
        if (!dec.has(HOOK_CROSS_PATTERN, l)) continue;
        kept++;
        for (int h = 0; h < H; h++) {
            const float* c = dec.cross_head(l, h);
            for (size_t i = 0; i < sum.size(); i++) sum[i] += c[i];
        }
    }
    if (kept == 0) return {};
    const double k = 1.0 / ((double)kept * H);
    std::vector<float> out(sum.size());
    for (size_t i = 0; i < sum.size(); i++) out[i] = (float)(sum[i] * k);
    return out;
}

std::vector<int> cross_alignment(const record& dec, int layer) {
    const std::vector<float> avg = cross_average(dec, layer);
    const int S = dec.n_source;
    std::vector<int> at;
    for (size_t r = 0; S > 0 && r < avg.size() / S; r++)
        at.push_back((int)(std::max_element(avg.begin() + r * S, avg.begin() + (r + 1) * S) - (avg.begin() + r * S)));
    return at;
}

generation translate(const model& m, const std::vector<int>& source, int max_new, const sampling& sp,
                     const ablation& ab, const std::function<bool(int)>& on_token) {
    const auto t_start = std::chrono::steady_clock::now();
    if (max_new < 0) throw error("max new tokens must be >= 0");
    const std::vector<float> src = run_encoder(nullptr, m, source, ab);
    generation g;
    const int n_ctx = std::min(m.config.n_ctx, max_new + 1);
    forward_state s;
    state_init(s, m.config, n_ctx);
    forward_options opt;
    opt.source = src.data();
    opt.n_source = (int)source.size();
    opt.interventions = ablation_interventions(stack_ablation(ab, m.config.n_layer, m.config.n_head), m.config);
    std::mt19937_64 rng(sp.seed);
    std::vector<float> logits;
    int next = m.config.decoder_start_id;
    for (int i = 0; i < max_new && s.n_past < s.n_ctx; i++) {
        eval(logits, nullptr, s, m, &next, 1, opt); // one token through the cache
        // BART's generate forces <s> as the first token (forced_bos_token_id), as HF's does
        next = i == 0 && m.config.forced_bos_id >= 0 ? m.config.forced_bos_id
                                                     : sample_token(logits.data(), m.config.vocab_size, sp, rng);
        g.ids.push_back(next);
        if (next == m.config.eos_id) {
            g.hit_eos = true;
            break;
        }
        if (on_token && !on_token(next)) break;
    }
    g.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    return g;
}

} // namespace gb
