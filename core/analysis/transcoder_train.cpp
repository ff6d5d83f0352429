// Transcoder training: the (mlp_in, mlp_out) pairs from one forward pass per window, and the set made from what
// the shared trainer (sae_train.cpp) learnt for each layer.
#include "analysis/transcoder_train.h"

#include <algorithm>
#include <filesystem>

#include "model/model.h"
#include "run/forward.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gb {

mlp_pairs collect_mlp_pairs(const model& m, const std::vector<int>& layers, const std::string& text, int window,
                            int64_t max_rows, bool bos) {
    const int L = m.config.n_layer;
    mlp_pairs out;
    out.layers = layers;
    std::sort(out.layers.begin(), out.layers.end());
    out.layers.erase(std::unique(out.layers.begin(), out.layers.end()), out.layers.end());
    if (out.layers.empty()) throw error("train-transcoder: no layers to train");
    for (int l : out.layers)
        if (l < 0 || l >= L) throw error("train-transcoder: layer " + std::to_string(l) + " is outside the model (0.." + std::to_string(L - 1) + ")");
    if (window < 1 + (bos ? 1 : 0)) throw error("train-transcoder: a window of " + std::to_string(window) + " tokens holds no text");
    const std::vector<int> ids = encode(m.tok, text);
    if (ids.empty()) throw error("train-transcoder: the corpus holds no tokens");
    if (bos && m.tok.bos_id < 0) throw error("--bos: the model has no BOS token");
    const int body = bos ? window - 1 : window, d = m.config.d_model;
    out.d = d;
    out.x.resize(out.layers.size()), out.y.resize(out.layers.size());
    forward_options opt;
    opt.keep.points = hook_bit(HOOK_MLP_IN) | hook_bit(HOOK_MLP_OUT);
    opt.keep.layers.assign(L, 0);
    for (int l : out.layers) opt.keep.layers[l] = 1;
    opt.keep.resid_norms = false;
    for (size_t i = 0; i < ids.size() && out.n < max_rows; i += body) {
        std::vector<int> c;
        if (bos) c.push_back(m.tok.bos_id);
        for (size_t j = i; j < std::min(ids.size(), i + body); j++) c.push_back(ids[j]);
        record rec;
        run_forward(rec, m, c, {}, opt);
        const int from = bos ? 1 : 0; // the BOS position's activations are not the text's
        const int take = (int)std::min<int64_t>(rec.n_tokens - from, max_rows - out.n);
        if (take <= 0) continue;
        for (size_t k = 0; k < out.layers.size(); k++) {
            const float* a = rec.get(HOOK_MLP_IN, out.layers[k]);
            const float* b = rec.get(HOOK_MLP_OUT, out.layers[k]);
            if (!a || !b) throw error("train-transcoder: the model's run kept no MLP input or output at layer " + std::to_string(out.layers[k]));
            out.x[k].insert(out.x[k].end(), a + (size_t)from * d, a + (size_t)(from + take) * d);
            out.y[k].insert(out.y[k].end(), b + (size_t)from * d, b + (size_t)(from + take) * d);
        }
        out.n += take;
    }
    return out;
}

transcoder_layer transcoder_layer_of(const trained_coder& c) {
    const sae& s = c.s;
    transcoder_layer l;
    l.W_enc.resize((size_t)s.d_sae * s.d_in);
    for (int j = 0; j < s.d_in; j++)
        for (int f = 0; f < s.d_sae; f++) l.W_enc[(size_t)f * s.d_in + j] = s.W_enc[(size_t)j * s.d_sae + f];
    l.b_enc = s.b_enc;
    l.W_dec = s.W_dec;
    l.b_dec = s.b_dec;
    l.skip = c.skip;
    l.threshold = s.threshold; // JumpReLU's θ (empty otherwise)
    return l;
}

transcoder_layer empty_transcoder_layer(int d_tc, int d, bool skip, bool jumprelu) {
    transcoder_layer l;
    if (jumprelu) l.threshold.assign(d_tc, 1.0f); // pre-activations are all 0 here: nothing fires
    l.W_enc.assign((size_t)d_tc * d, 0.0f);
    l.b_enc.assign(d_tc, 0.0f);
    l.W_dec.assign((size_t)d_tc * d, 0.0f);
    l.b_dec.assign(d, 0.0f);
    if (skip) l.skip.assign((size_t)d * d, 0.0f);
    return l;
}

transcoder_set new_transcoder_set(const model& m, const sae_train_options& o, std::vector<transcoder_layer> layers) {
    transcoder_set t;
    t.model_name = std::filesystem::path(m.path.empty() ? "default" : m.path).filename().string();
    t.cross_layer = false;
    t.input_normed = true;
    t.arch = o.k > 0 ? SAE_TOPK : o.jumprelu ? SAE_JUMPRELU : SAE_RELU;
    t.k = o.k;
    t.n_layer = m.config.n_layer, t.d_model = m.config.d_model, t.d_tc = o.d_sae;
    t.layers = std::move(layers);
    if ((int)t.layers.size() != t.n_layer) throw error("internal: a transcoder set needs every layer");
    return t;
}

} // namespace gb
