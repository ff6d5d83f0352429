// The forward pass: eval checks the call, lays out the record, then runs the model's blocks (core/run/blocks.cpp)
// in order: embeddings, per layer self-attention, cross-attention (an encoder–decoder's decoder) and the MLP,
// then the head. Every intermediate passes its hook point (core/run/points.cpp).
//
// Sections: state and record layout | checking a call | eval | whole prompts
#include "run/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <malloc.h>
#include <omp.h>

#include "run/pass.h"
#include "run/vision.h"
#include "util/error.h"
#include "util/threads.h"

namespace gb {

// ---------------------------------------------------------------------------------------------
// State and record layout
// ---------------------------------------------------------------------------------------------
void state_init(forward_state& s, const model_config& c, int n_ctx) {
    if (n_ctx <= 0 || n_ctx > c.n_ctx) n_ctx = c.n_ctx;
    s.n_ctx = n_ctx;
    s.n_past = 0;
    // allocated by the first eval that keeps keys: one run that fills the whole context never needs them
    s.k_cache.clear();
    s.v_cache.clear();
}

void record_begin(record& rec, const model& m, const int* tokens, int n, bool all_logits, const record_plan& plan,
                  int n_source) {
    const model_config& c = m.config;
    rec.n_layer = c.n_layer;
    rec.n_head = c.n_head;
    rec.n_kv_head = c.n_kv_head;
    rec.d_model = c.d_model;
    rec.d_head = c.d_head;
    rec.d_ff = c.d_ff;
    rec.n_expert = c.n_expert;
    rec.window.resize(c.n_layer);
    for (int l = 0; l < c.n_layer; l++) rec.window[l] = c.window_at(l);
    rec.causal = !arch_table(c.arch).bidirectional;
    rec.n_tokens = n;
    rec.n_source = n_source; // (before the tensors: the cross-attention's pattern is [H][T][S])
    rec.part = plan.part;
    rec.vocab = c.vocab_size;
    rec.all_logits = all_logits;
    rec.tokens.assign(tokens, tokens + n);
    rec.pieces.resize(n);
    for (int t = 0; t < n; t++) rec.pieces[t] = (kind_of(c) == KIND_VISION) ? vision_piece(c, t) : token_text(m.tok, tokens[t]);
    for (int p = 0; p < HOOK_COUNT; p++) {
        const std::vector<uint8_t>& keep = plan.keep[p];
        rec.slot[p].assign(keep.size(), -1);
        rec.acts[p].clear();
        for (size_t l = 0; l < keep.size(); l++)
            if (keep[l] && p != HOOK_LOGITS) {
                rec.slot[p][l] = (int)rec.acts[p].size();
                rec.acts[p].push_back(std::make_shared<tensor_buffer>(rec.tensor_floats((hook_point)p, (int)l)));
            }
    }
    rec.resid_norm.assign((size_t)(2 * c.n_layer + 1) * n, 0.0f);
    const mlp_kind mk = arch_table(c.arch).mlp;
    rec.mlp_pre_parts = plan.mlp_pre ? (mk == MLP_SWIGLU || mk == MLP_GEGLU ? 2 : 1) : 0;
    rec.mlp_pre.resize((size_t)c.n_layer * rec.mlp_pre_parts * n * c.d_ff);
    rec.nonfinite_layer = -1;
    rec.nonfinite_where.clear();
    rec.budget_note = plan.note;
}

record_plan plan_of(const record& rec) {
    record_plan pl;
    for (int p = 0; p < HOOK_COUNT; p++) {
        pl.keep[p].resize(rec.slot[p].size());
        for (size_t l = 0; l < rec.slot[p].size(); l++) pl.keep[p][l] = rec.slot[p][l] >= 0;
    }
    pl.note = rec.budget_note;
    pl.part = rec.part;
    pl.mlp_pre = !rec.mlp_pre.empty();
    return pl;
}

// ---------------------------------------------------------------------------------------------
// Checking a call: what the caller promised (positions, record, resume point, inputs of the kind)
// ---------------------------------------------------------------------------------------------
static void check_call(const forward_state& s, const model& m, const int* tokens, int n, const forward_options& opt,
                       const record* rec, bool all_logits) {
    const model_config& c = m.config;
    const arch_info& arch = arch_table(c.arch);
    const int n0 = s.n_past, n_keys = n0 + n, L = c.n_layer, V = c.vocab_size;
    const bool resume = opt.start_resid != nullptr, vision = arch.kind == KIND_VISION;
    if (n <= 0) throw error("empty prompt: nothing to run");
    if (arch.bidirectional && n0 > 0)
        throw error("internal: an encoder's every position sees every token: it runs the whole prompt at once");
    if (n_keys > s.n_ctx)
        throw error("prompt too long: " + std::to_string(n_keys) + " tokens, the model's context is " +
                    std::to_string(s.n_ctx));
    if (rec && !opt.continue_record && (n0 != 0 || resume))
        throw error("internal: a record needs the prompt from position 0 and the embeddings");
    if (opt.continue_record && (!rec || rec->n_tokens != n_keys || all_logits != rec->all_logits))
        throw error("internal: a continued record must be laid out for the call's positions");
    if (opt.continue_record && n0 > 0 && !rec->mlp_pre.empty())
        throw error("internal: a continued record does not carry the MLP's pre-activations of earlier positions");
    if (opt.start_point < 0 || opt.start_point > 2 * L || (opt.start_point > 0 && !resume))
        throw error("internal: resuming at residual point " + std::to_string(opt.start_point) + " needs its stream");
    if (resume && opt.start_point % 2 && c.parallel)
        throw error("internal: a parallel block resumes at its input, not after its attention");
    check_interventions(opt.interventions, c);
    if (vision && (!opt.pixels || n0 != 0 || n != c.n_ctx))
        throw error("internal: a vision model runs its image's " + std::to_string(c.n_ctx) + " positions in one call");
    for (int t = 0; t < n; t++) {
        if (vision && tokens[t] != t) throw error("internal: a vision model's tokens are its positions");
        if (!vision && (tokens[t] < 0 || tokens[t] >= V))
            throw error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                        std::to_string(V - 1) + ")");
    }
    for (int id : opt.logit_ids)
        if (id < 0 || id >= V) throw error("logit id " + std::to_string(id) + " is outside the vocabulary");
    if (arch.cross && (!opt.source || opt.n_source <= 0))
        throw error("internal: an encoder–decoder's decoder reads the encoder's output (forward_options::source)");
    if (arch.cross && n0 > 0 && opt.n_source * 2 * c.n_head * c.d_head * L != (int64_t)s.cross_kv.size())
        throw error("internal: a continued target must read the source it started with");
    if (arch.no_head && !opt.logit_ids.empty()) throw error("internal: an encoder stack has no head to pick logits from");
}

// Scratch for n rows, and (a new target of an encoder–decoder) every layer's keys and values of the source.
static void prepare_state(forward_state& s, const model& m, int n, const forward_options& opt, bool use_cache) {
    const model_config& c = m.config;
    const arch_info& arch = arch_table(c.arch);
    const int d = c.d_model, H = c.n_head, dh = c.d_head, L = c.n_layer, kv_w = c.n_kv_head * dh;
    if (use_cache) {
        grow(s.k_cache, (size_t)L * s.n_ctx * kv_w);
        grow(s.v_cache, (size_t)L * s.n_ctx * kv_w);
    }
    grow(s.x, (size_t)n * d);
    grow(s.xn, (size_t)n * d);
    grow(s.qkv, (size_t)n * (H + 2 * c.n_kv_head) * dh);
    grow(s.att_out, (size_t)n * H * dh);
    grow(s.sub_out, (size_t)n * d);
    grow(s.ff, (size_t)n * c.d_ff);
    if (arch.mlp == MLP_SWIGLU || arch.mlp == MLP_GEGLU) grow(s.ff2, (size_t)n * c.d_ff);
    if (c.parallel) grow(s.x_in, (size_t)n * d);
    if (!arch.cross) return;
    const int S = opt.n_source, xq_w = H * dh;
    grow(s.xq, (size_t)n * xq_w);
    if (s.n_past > 0) return; // a continued target reads the keys and values its start made
    s.cross_kv.resize((size_t)L * S * 2 * xq_w);
    for (int l = 0; l < L; l++)
        gemm(&s.cross_kv[(size_t)l * S * 2 * xq_w], opt.source, m.weights.layers[l].x_kv, m.weights.layers[l].x_kv_b, S, s.gemm);
}

// ---------------------------------------------------------------------------------------------
// eval
// ---------------------------------------------------------------------------------------------
// The stream where the call starts: the embeddings, or the caller's at residual point start_point. Returns the
// first layer to run; after_attention says that layer starts after its self-attention (an odd point).
static int start_stream(pass& f, const int* tokens, bool& after_attention) {
    after_attention = false;
    if (!f.opt.start_resid) {
        embed_block(f, tokens);
        return 0;
    }
    const int q = f.opt.start_point, d = f.c.d_model;
    std::copy_n(f.opt.start_resid, (size_t)f.n * d, f.x);
    if (q == 0) {
        residual_point(f, nullptr, false, 0, HOOK_RESID_PRE, 0, "embed");
        return 0;
    }
    if (q % 2) { // after the attention of layer (q - 1) / 2: resid_mid
        after_attention = true;
        visit(f, HOOK_RESID_MID, (q - 1) / 2, f.x, f.n, d, d);
        return (q - 1) / 2;
    }
    visit(f, HOOK_RESID_POST, q / 2 - 1, f.x, f.n, d, d); // after the MLP of layer q / 2 - 1
    return q / 2;
}

// Multiply-adds of one token through every block's matrices and the LM head's row (MoE: the experts a token uses)
static int64_t macs_per_token(const model& m) {
    int64_t s = (int64_t)m.config.d_model * m.config.vocab_size;
    for (const layer_weights& l : m.weights.layers) {
        for (const weight_matrix* w : {&l.w_qkv, &l.w_o, &l.w_up, &l.w_gate, &l.w_down, &l.x_q, &l.x_kv, &l.x_o})
            s += (int64_t)w->size();
        for (const auto* experts : {&l.exp_gate, &l.exp_up, &l.exp_down})
            if (!experts->empty()) s += (int64_t)m.config.n_expert_used * (*experts)[0].size();
    }
    return s;
}

// A call small enough to run on one thread: a model of at most 16 M multiply-adds a token (its weights sit in the
// caches: a second core adds no memory bandwidth) on a call of at most 2 G. Two threads wake each other at every
// product, and such a call has hundreds of short ones: with libgomp's brief spin (threads.h) the earlier 4-layer
// default model's 16-token forward took 2.0 ms on two threads, 0.47 ms spinning and 0.68 ms on one, and it cannot be
// stalled by a busy core. OpenMP's thread count for the calling thread, restored when the call ends.
struct one_thread_if {
    int before = 0;
    explicit one_thread_if(bool one) {
        if (one && omp_get_max_threads() > 1) before = omp_get_max_threads(), omp_set_num_threads(1);
    }
    ~one_thread_if() {
        if (before) omp_set_num_threads(before);
    }
};

void eval(std::vector<float>& logits, record* rec, forward_state& s, const model& m, const int* tokens, int n,
          const forward_options& opt) {
    const auto t_start = std::chrono::steady_clock::now();
    const model_config& c = m.config;
    const arch_info& arch = arch_table(c.arch);
    if (s.n_ctx == 0) state_init(s, c, c.n_ctx);
    // an encoder predicts at every position (each [MASK]), a decoder the next token after the last
    const bool all_logits = opt.all_logits || arch.bidirectional;
    check_call(s, m, tokens, n, opt, rec, all_logits);
    const int n0 = s.n_past, n_keys = n0 + n, n_out = all_logits ? n : 1, S = arch.cross ? opt.n_source : 0;
    const int64_t per_token = macs_per_token(m);
    const one_thread_if small(per_token <= (16 << 20) &&
                              (int64_t)n * per_token + 2 * (int64_t)n * n_keys * c.d_model * c.n_layer <= (int64_t)2 << 30);
    const pinned_team pin; // one thread per core for this call (util/threads.h)
    // The cache is written only when a later call can read it: this call continues earlier ones, leaves room for
    // more, or the caller keeps it. Otherwise (a record of the whole context) attention reads keys and values in place.
    const bool use_cache = n0 > 0 || n_keys < s.n_ctx || s.keep_cache;
    prepare_state(s, m, n, opt, use_cache);
    record_plan rp;
    if (rec && opt.continue_record) {
        rp = plan_of(*rec);
    } else if (rec) {
        rp = plan_record(opt.keep, c, n, n_out, S);
        record_begin(*rec, m, tokens, n, all_logits, rp, S);
        rec->logit_ids = opt.logit_ids;
    }
    // [2L+1][T] norms: this call's positions are columns n0.. of each point's row
    float* norms = rec && (opt.keep.resid_norms || opt.continue_record) ? rec->resid_norm.data() : nullptr;
    pass f(m, s, opt, rec);
    f.n0 = n0, f.n = n, f.n_keys = n_keys, f.n_out = n_out, f.n_source = S;
    f.use_cache = use_cache;
    f.x = s.x.data();
    f.norms = norms, f.norm_row = rec ? (size_t)rec->n_tokens : (size_t)n;
    f.pos0 = n0;
    f.plan = make_plan(s.plan, opt, rec ? &rp : nullptr, c.n_layer);

    bool after_attention = false;
    const int first = start_stream(f, tokens, after_attention);
    for (int l = first; l < c.n_layer; l++) {
        if (opt.cancelled && opt.cancelled()) throw cancelled();
        if (l > first || !after_attention) attention_block(f, l);
        if (arch.cross) cross_attention_block(f, l);
        mlp_block(f, l);
    }
    head_block(f, logits);

    s.n_past = n_keys;
    f.tm.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    if (rec) rec->timing = f.tm;
}

// ---------------------------------------------------------------------------------------------
// Whole prompts
// ---------------------------------------------------------------------------------------------
void keep_freed_buffers_in_heap() {
    mallopt(M_MMAP_THRESHOLD, 256 << 20); // blocks below this come from the heap, not a fresh mmap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap's top is not handed back after each forward
}

void run_forward(record& out, const model& m, const std::vector<int>& tokens, const ablation& ab,
                 const forward_options& opt) {
    if (tokens.empty()) throw error("empty prompt: nothing to run");
    if ((int)tokens.size() > m.config.n_ctx)
        throw error("prompt too long: " + std::to_string(tokens.size()) + " tokens, the model's context is " +
                    std::to_string(m.config.n_ctx));
    forward_state s;
    state_init(s, m.config, (int)tokens.size());
    if (!ab.any()) {
        eval(out.logits, &out, s, m, tokens.data(), (int)tokens.size(), opt);
        return;
    }
    forward_options o = opt;
    std::vector<intervention> iv = ablation_interventions(ab, m.config);
    o.interventions.insert(o.interventions.begin(), iv.begin(), iv.end());
    eval(out.logits, &out, s, m, tokens.data(), (int)tokens.size(), o);
}

} // namespace gb
