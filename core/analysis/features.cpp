// Features of an SAE or transcoder on a model: binding it to a hook point, encoding and decoding, the
// reconstruction's quality, feature interventions and a feature's logit effect.
#include "analysis/features.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "model/kind.h"
#include "kernels/gemm.h"
#include "model/quant.h"
#include "run/forward.h"
#include "util/error.h"

namespace gb {
namespace {

using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const mat>;
using mmap = Eigen::Map<mat>;

// Mean over the T - 1 predicted tokens of -log softmax(logits[t])[tokens[t + 1]] (0 with one token).
double mean_next_token_loss(const record& rec, const std::vector<int>& tokens) {
    const int T = (int)tokens.size(), V = rec.vocab;
    if (T < 2) return 0;
    double sum = 0;
    for (int t = 0; t + 1 < T; t++) {
        const float* z = rec.logits.data() + (size_t)t * V;
        double mx = z[0];
        for (int v = 1; v < V; v++) mx = std::max(mx, (double)z[v]);
        double se = 0;
        for (int v = 0; v < V; v++) se += std::exp((double)z[v] - mx);
        sum += mx + std::log(se) - z[tokens[t + 1]];
    }
    return sum / (T - 1);
}

const float* kept(const record& rec, hook_point p, int layer) {
    const float* x = rec.get(p, layer);
    if (!x) throw error("the run did not keep " + hook_label(p, layer) + ", which the SAE reads");
    return x;
}

} // namespace

bound_sae bind_sae(std::shared_ptr<const sae> s, const model& m) {
    bound_sae b;
    const model_config& c = m.config;
    const std::string where = s->path + " (" + s->hook_name + ")";
    b.in = parse_hook_point(s->hook_in);
    b.out = parse_hook_point(s->hook_out);
    b.layer = s->layer;
    for (hook_point p : {b.in, b.out}) {
        if (hook_is_pattern(p) || hook_is_final(p) || p == HOOK_ROUTER || p == HOOK_HEAD_OUT || p == HOOK_Q || p == HOOK_K || p == HOOK_V)
            throw error(where + ": an SAE at " + hook_name(p) + " is not supported");
        if (!hook_exists(p, c)) throw error(where + ": this model has no " + hook_name(p) + " point");
    }
    if (b.layer < 0 || b.layer >= c.n_layer)
        throw error(where + ": layer " + std::to_string(b.layer) + ", the model has layers 0.." + std::to_string(c.n_layer - 1));
    if (s->d_in != hook_width(b.in, c, 1))
        throw error(where + ": d_in is " + std::to_string(s->d_in) + ", the model's " + hook_name(b.in) + " is " +
                    std::to_string(hook_width(b.in, c, 1)) + " wide");
    if (s->d_out != hook_width(b.out, c, 1))
        throw error(where + ": d_out is " + std::to_string(s->d_out) + ", the model's " + hook_name(b.out) + " is " +
                    std::to_string(hook_width(b.out, c, 1)) + " wide");
    if (!s->model_name.empty()) { // compared with the model's folder or file name (no config names a model)
        auto base = [](std::string x) {
            while (!x.empty() && x.back() == '/') x.pop_back();
            x = x.substr(x.find_last_of('/') == std::string::npos ? 0 : x.find_last_of('/') + 1);
            const size_t dot = x.rfind('.');
            if (dot != std::string::npos && dot > 0) x.resize(dot);
            for (char& ch : x) ch = (char)std::tolower((unsigned char)ch);
            return x;
        };
        const std::string ours = base(m.path.empty() ? "the default model" : m.path);
        if (base(s->model_name) != ours)
            b.warnings.push_back("the SAE names its model " + s->model_name + ", the model loaded is " + ours);
    }
    b.enc = std::make_shared<const weight_matrix>(pack_matrix(s->W_enc, s->d_in, s->d_sae));
    b.s = std::move(s);
    return b;
}

bound_sae open_sae(const std::string& path, const model& m) {
    require(m, FEATURE_SAE);
    return bind_sae(std::make_shared<const sae>(read_sae(path)), m);
}

void sae_encode(std::vector<float>& f, const sae& s, const float* x, int n, const weight_matrix* enc) {
    f.assign((size_t)n * s.d_sae, 0.0f);
    mat xin = cmap(x, n, s.d_in);
    if (s.apply_b_dec_to_input) xin.rowwise() -= Eigen::Map<const Eigen::RowVectorXf>(s.b_dec.data(), s.d_in);
    if (enc) {
        gemm_scratch scratch;
        gemm(f.data(), xin.data(), *enc, s.b_enc, n, scratch);
    } else {
        mmap pre(f.data(), n, s.d_sae);
        pre.noalias() = xin * cmap(s.W_enc.data(), s.d_in, s.d_sae);
        pre.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(s.b_enc.data(), s.d_sae);
    }
    std::vector<float> row;
    for (int t = 0; t < n; t++) {
        float* r = f.data() + (size_t)t * s.d_sae;
        switch (s.arch) {
        case SAE_RELU:
            for (int i = 0; i < s.d_sae; i++) r[i] = std::max(r[i], 0.0f);
            break;
        case SAE_JUMPRELU:
            for (int i = 0; i < s.d_sae; i++) r[i] = r[i] > s.threshold[i] && r[i] > 0 ? r[i] : 0.0f;
            break;
        case SAE_TOPK: { // the k-th largest pre-activation; ties at it keep the lowest ids
            row.assign(r, r + s.d_sae);
            std::nth_element(row.begin(), row.begin() + (s.k - 1), row.end(), std::greater<float>());
            const float kth = row[s.k - 1];
            int above = 0;
            for (int i = 0; i < s.d_sae; i++) above += r[i] > kth;
            int ties = s.k - above;
            for (int i = 0; i < s.d_sae; i++) {
                const bool keep = r[i] > kth || (r[i] == kth && ties-- > 0);
                r[i] = keep ? std::max(r[i], 0.0f) : 0.0f;
            }
            break;
        }
        }
    }
}

void sae_decode(std::vector<float>& xhat, const sae& s, const float* f, int n) {
    xhat.resize((size_t)n * s.d_out);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        float* out = xhat.data() + (size_t)t * s.d_out;
        std::copy(s.b_dec.begin(), s.b_dec.end(), out);
        const float* ft = f + (size_t)t * s.d_sae;
        for (int i = 0; i < s.d_sae; i++)
            if (ft[i] != 0) {
                const float a = ft[i], *w = s.W_dec.data() + (size_t)i * s.d_out;
                for (int j = 0; j < s.d_out; j++) out[j] += a * w[j];
            }
    }
}

record sae_record(const model& m, const bound_sae& b, const std::vector<int>& tokens, const ablation& ab) {
    forward_options opt;
    opt.all_logits = true;
    opt.keep.points = hook_bit(b.in) | hook_bit(b.out);
    opt.keep.layers.assign(m.config.n_layer, 0);
    opt.keep.layers[b.layer] = 1;
    record rec;
    run_forward(rec, m, tokens, ab, opt);
    return rec;
}

feature_result features_of(const bound_sae& b, const record& rec) {
    const sae& s = *b.s;
    feature_result r;
    const int T = rec.n_tokens, d = s.d_out;
    r.n_tokens = T, r.d_sae = s.d_sae, r.d_out = d;
    sae_encode(r.acts, s, kept(rec, b.in, b.layer), T, b.enc.get());
    sae_decode(r.recon, s, r.acts.data(), T);
    const float* x = kept(rec, b.out, b.layer);
    std::vector<double> mean(d, 0.0);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < d; j++) mean[j] += x[(size_t)t * d + j] / T;
    r.mse.resize(T), r.fvu.resize(T);
    double err_all = 0, var_all = 0;
    for (int t = 0; t < T; t++) {
        double err = 0, var = 0;
        for (int j = 0; j < d; j++) {
            const double e = (double)x[(size_t)t * d + j] - r.recon[(size_t)t * d + j], v = x[(size_t)t * d + j] - mean[j];
            err += e * e, var += v * v;
        }
        r.mse[t] = (float)(err / d);
        r.fvu[t] = var > 0 ? (float)(err / var) : (err > 0 ? INFINITY : 0.0f);
        err_all += err, var_all += var;
    }
    r.fvu_all = var_all > 0 ? err_all / var_all : (err_all > 0 ? INFINITY : 0.0);
    return r;
}

feature_result run_features(const model& m, const bound_sae& b, const std::vector<int>& tokens, const ablation& ab) {
    const record rec = sae_record(m, b, tokens, ab);
    feature_result r = features_of(b, rec);
    r.loss = mean_next_token_loss(rec, tokens);
    forward_options opt;
    opt.all_logits = true;
    opt.keep.points = 0;
    opt.keep.resid_norms = false;
    intervention iv{INTERVENE_SET, b.out, b.layer};
    iv.values = r.recon.data();
    opt.interventions.push_back(iv);
    record spliced;
    run_forward(spliced, m, tokens, ab, opt);
    r.loss_spliced = mean_next_token_loss(spliced, tokens);
    r.loss_delta = tokens.size() < 2 ? 0 : r.loss_spliced - r.loss;
    return r;
}

void parse_feature_edits(std::vector<feature_edit>& edits, feature_edit_kind kind, const std::string& list,
                         const std::string& what, int d_sae) {
    size_t i = 0;
    bool any = false;
    while (i <= list.size()) {
        size_t j = list.find(',', i);
        if (j == std::string::npos) j = list.size();
        const std::string item = list.substr(i, j - i);
        i = j + 1;
        if (item.empty()) continue;
        feature_edit e;
        e.kind = kind;
        const size_t eq = item.find('=');
        const std::string id = item.substr(0, eq);
        const std::string example = kind == FEATURE_ABLATE ? "12,40" : "7=3.5";
        if ((kind == FEATURE_ABLATE) != (eq == std::string::npos) || id.empty() || id.size() > 9 ||
            id.find_first_not_of("0123456789") != std::string::npos)
            throw error(what + ": '" + item + "' is not " + (kind == FEATURE_ABLATE ? "a feature id" : "ID=VALUE") + " (expected e.g. " + example + ")");
        e.id = std::stoi(id);
        if (e.id >= d_sae) throw error(what + ": feature " + id + " is outside the SAE's 0.." + std::to_string(d_sae - 1));
        if (eq != std::string::npos) {
            const std::string v = item.substr(eq + 1);
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !std::isfinite(x) || std::fabs(x) > 1e6)
                throw error(what + ": '" + v + "' is not a finite number (in '" + item + "')");
            e.value = (float)x;
        }
        edits.push_back(e);
        any = true;
    }
    if (!any) throw error(what + ": no feature given (expected e.g. " + std::string(kind == FEATURE_ABLATE ? "12,40" : "7=3.5") + ")");
}

intervention feature_intervention(const bound_sae& b, const record& rec, const std::vector<feature_edit>& edits,
                                  std::vector<float>& values) {
    const sae& s = *b.s;
    const int T = rec.n_tokens, d = s.d_out;
    std::vector<float> f;
    sae_encode(f, s, kept(rec, b.in, b.layer), T, b.enc.get());
    const float* x = kept(rec, b.out, b.layer);
    values.assign(x, x + (size_t)T * d);
    for (int t = 0; t < T; t++) {
        std::map<int, float> cur, coef; // the edited features' values so far, and each one's decoder multiplier
        for (const feature_edit& e : edits) {
            const float now = cur.count(e.id) ? cur[e.id] : f[(size_t)t * s.d_sae + e.id];
            if (e.kind == FEATURE_STEER) coef[e.id] += e.value;
            else coef[e.id] += (e.kind == FEATURE_CLAMP ? e.value : 0.0f) - now, cur[e.id] = e.kind == FEATURE_CLAMP ? e.value : 0.0f;
        }
        float* row = values.data() + (size_t)t * d;
        for (const auto& kv : coef)
            for (int j = 0; j < d; j++) row[j] += kv.second * s.W_dec[(size_t)kv.first * d + j];
    }
    intervention iv{INTERVENE_SET, b.out, b.layer};
    iv.values = values.data();
    return iv;
}

void feature_logit_effect(std::vector<token_effect>& promotes, std::vector<token_effect>& suppresses, const model& m,
                          const bound_sae& b, int id, int top) {
    const sae& s = *b.s;
    if (b.out != HOOK_RESID_PRE && b.out != HOOK_RESID_MID && b.out != HOOK_RESID_POST && b.out != HOOK_ATTN_OUT && b.out != HOOK_MLP_OUT)
        throw error(std::string("a feature's logit effect needs an SAE that writes the residual stream; this one writes ") + hook_name(b.out));
    if (id < 0 || id >= s.d_sae) throw error("feature " + std::to_string(id) + " is outside the SAE's 0.." + std::to_string(s.d_sae - 1));
    const int d = m.config.d_model;
    std::vector<float> dir(s.W_dec.begin() + (size_t)id * d, s.W_dec.begin() + (size_t)(id + 1) * d);
    if (!m.weights.normf_g.empty())
        for (int j = 0; j < d; j++) dir[j] *= m.weights.normf_g[j];
    const row_table& U = m.weights.unembedding();
    std::vector<token_effect> all((size_t)U.rows);
    std::vector<float> row(d);
    for (int64_t v = 0; v < U.rows; v++) {
        table_row(row.data(), U, v);
        double e = 0;
        for (int j = 0; j < d; j++) e += (double)dir[j] * row[j];
        all[v] = {(int)v, (float)e};
    }
    const int k = std::min<int>(top, (int)all.size());
    auto by = [](bool desc) {
        return [desc](const token_effect& a, const token_effect& c) { return desc ? a.effect > c.effect : a.effect < c.effect; };
    };
    std::partial_sort(all.begin(), all.begin() + k, all.end(), by(true));
    promotes.assign(all.begin(), all.begin() + k);
    std::partial_sort(all.begin(), all.begin() + k, all.end(), by(false));
    suppresses.assign(all.begin(), all.begin() + k);
}

} // namespace gb
