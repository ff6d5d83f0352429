// The backward pass of an encoder–decoder (backward.h run_seq2seq_gradients): both stacks' forwards keeping what
// the backward reads, then the decoder's metric back through the decoder's layers, whose cross-attention hands the
// encoder's output its gradient, and back through the encoder's final norm and layers to the source embeddings.
#include <algorithm>

#include "model/arch.h"
#include "run/backward_pass.h"

namespace gb {

// The forward of both stacks as run_seq2seq makes it, each keeping backward_keep; their options with ab's part
// of each stack before their own interventions.
static void forward_both(seq2seq_record& rec, forward_options& enc_opt, forward_options& dec_opt, const model& m,
                         const std::vector<int>& source, const std::vector<int>& target, const ablation& ab) {
    const model& enc = *m.encoder;
    if (source.empty()) throw error("empty source: nothing to translate");
    if (target.empty()) throw error("empty target: the decoder needs at least its start token");
    if ((int)source.size() > enc.config.n_ctx)
        throw error("source too long: " + std::to_string(source.size()) + " tokens, the model's context is " +
                    std::to_string(enc.config.n_ctx));
    if ((int)target.size() > m.config.n_ctx)
        throw error("target too long: " + std::to_string(target.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    for (auto [o, st] : {std::pair{&enc_opt, &enc}, std::pair{&dec_opt, &m}}) {
        const model_config& c = st->config;
        const std::vector<intervention> iv = ablation_interventions(stack_ablation(ab, c.n_layer, c.n_head), c);
        o->interventions.insert(o->interventions.begin(), iv.begin(), iv.end());
        o->keep = backward_keep(c);
    }
    forward_state es;
    state_init(es, enc.config, (int)source.size());
    eval(rec.source_out, &rec.encoder, es, enc, source.data(), (int)source.size(), enc_opt);
    rec.encoder.logits.clear(); // eval's "logits" of a stack without a head are its output, kept as source_out
    forward_state ds;
    state_init(ds, m.config, (int)target.size());
    dec_opt.all_logits = true;
    dec_opt.source = rec.source_out.data();
    dec_opt.n_source = (int)source.size();
    eval(rec.decoder.logits, &rec.decoder, ds, m, target.data(), (int)target.size(), dec_opt);
    rec.decoder.source_pieces = rec.encoder.pieces;
}

// The backward's context for one stack's record.
static bctx context(const model& st, const record& rec, const forward_options& opt) {
    const model_config& c = st.config;
    bctx b{st, c, st.weights, arch_table(c.arch), rec, opt, rec.n_tokens, c.d_model, c.n_head, c.n_kv_head, c.d_head,
           (c.n_head + 2 * c.n_kv_head) * c.d_head, {}, {}, {}, {}, {}, {}, {}, {}, {}};
    b.plan = make_plan(b.plan_buf, opt, nullptr, c.n_layer);
    return b;
}

void run_seq2seq_gradients(gradients& out, const model& m, const std::vector<int>& source, const std::vector<int>& target,
                           const metric_spec& metric, const ablation& ab, const forward_options& opt,
                           const forward_options& source_opt, seq2seq_record* fwd) {
    require(m, FEATURE_GRADIENTS);
    if (!is_seq2seq(m)) throw error("internal: run_seq2seq_gradients needs an encoder–decoder");
    if (!source_opt.hooks.empty()) throw error("gradients cannot pass through hooks: run the forward with interventions only");
    forward_options eo = source_opt, dopt = opt;
    seq2seq_record local;
    seq2seq_record& rec = fwd ? *fwd : local;
    forward_both(rec, eo, dopt, m, source, target, ab);
    check_backward(m, rec.decoder, metric, dopt);
    const model& enc = *m.encoder;
    const int S = (int)source.size(), d = m.config.d_model;
    // the decoder, its cross-attention's share gathered at the encoder's output
    bctx b = context(m, rec.decoder, dopt);
    b.source = rec.source_out.data();
    b.S = S;
    const int L = m.config.n_layer, T = b.T, p = metric.position < 0 ? T - 1 : metric.position;
    out.n_layer = L, out.n_tokens = T, out.d_model = d, out.n_head = b.H, out.d_head = b.dh;
    out.position = p;
    out.resid.assign((size_t)(2 * L + 1) * T * d, 0.0f);
    out.z.assign((size_t)L * T * b.H * b.dh, 0.0f);
    std::vector<float> g((size_t)T * d), g_out((size_t)S * d, 0.0f);
    out.metric_value = head_backward(b, metric, p, g.data());
    stack_backward(b, g, out.resid.data(), out.z.data(), g_out.data());
    // the encoder, from its output: its final norm (mBART's; none in BART and Marian), then its layers
    bctx be = context(enc, rec.encoder, eo);
    const int Le = enc.config.n_layer;
    out.n_source = S, out.source_layers = Le;
    out.source_resid.assign((size_t)(2 * Le + 1) * S * d, 0.0f);
    out.source_z.assign((size_t)Le * S * be.H * be.dh, 0.0f);
    zero_covered(be, HOOK_FINAL_NORM, Le, g_out.data(), S, d, d);
    std::vector<float> ge((size_t)S * d);
    final_norm_backward(be, ge.data(), kept(be, HOOK_RESID_POST, Le - 1), g_out.data(), S, be.plan.identity_norm[Le]);
    stack_backward(be, ge, out.source_resid.data(), out.source_z.data(), nullptr);
}

} // namespace gb
