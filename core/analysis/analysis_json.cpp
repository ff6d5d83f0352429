// JSON and .npy output of the analyses.
#include "analysis/analysis_json.h"

#include <cmath>

#include "util/npy.h"

namespace gb {

using json = nlohmann::json;

// v [rows][cols] as nested arrays, NaN as null
template <class T>
static json grid(const T* v, int rows, int cols) {
    json out = json::array();
    for (int r = 0; r < rows; r++) {
        json row = json::array();
        for (int c = 0; c < cols; c++) {
            const double x = (double)v[(size_t)r * cols + c];
            row.push_back(std::isfinite(x) ? json(x) : json());
        }
        out.push_back(row);
    }
    return out;
}

static json tokens_json(const std::vector<int>& ids, const tokenizer& tok) {
    json out = json::array();
    for (int id : ids) out.push_back({{"id", id}, {"text", token_text(tok, id)}});
    return out;
}

static json token_ref(int id, const tokenizer& tok) {
    return id < 0 ? json() : json{{"id", id}, {"text", token_text(tok, id)}};
}

json lens_json(const lens_result& l, const record& r, const tokenizer& tok) {
    json ids = json::array(), probs = json::array();
    for (int p = 0; p < l.n_points; p++) {
        json pi = json::array(), pp = json::array();
        for (int t = 0; t < l.n_tokens; t++) {
            const size_t o = ((size_t)p * l.n_tokens + t) * l.k;
            pi.push_back(std::vector<int>(l.top_ids.begin() + o, l.top_ids.begin() + o + l.k));
            pp.push_back(std::vector<float>(l.top_probs.begin() + o, l.top_probs.begin() + o + l.k));
        }
        ids.push_back(pi);
        probs.push_back(pp);
    }
    return {{"points", l.points},
            {"tokens", tokens_json(r.tokens, tok)},
            {"top_ids", ids},
            {"top_probs", probs},
            {"target_ids", l.target_ids},
            {"target_prob", grid(l.target_prob.data(), l.n_points, l.n_tokens)}};
}

// a number, or null where it is not finite (a broken run's KL or norm)
static json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

json break_it_json(const break_result& b, const tokenizer& tok) {
    json rows = json::array();
    for (const break_row& r : b.rows)
        rows.push_back({{"kind", break_kind_name(r.kind)},
                        {"label", r.label},
                        {"ablation", r.ab.describe()},
                        {"layer", r.layer >= 0 ? json(r.layer) : json()},
                        {"head", r.head >= 0 ? json(r.head) : json()},
                        {"top", token_ref(r.top_id, tok)},
                        {"top_prob", finite_or_null(r.top_prob)},
                        {"baseline_top_prob", finite_or_null(r.base_top_prob)},
                        {"kl", finite_or_null(r.kl)},
                        {"resid_norm", finite_or_null(r.resid_norm)},
                        {"explanation", r.explanation}});
    return {{"tokens", tokens_json(b.tokens, tok)},
            {"baseline", {{"top", token_ref(b.base_top_id, tok)},
                          {"top_prob", finite_or_null(b.base_top_prob)},
                          {"resid_norm", finite_or_null(b.base_resid_norm)}}},
            {"rows", rows},
            {"head_kl", grid(b.head_kl.data(), b.n_layer, b.n_head)},
            {"heads_scanned", b.heads_scanned},
            {"note", b.note}};
}

json temperatures_json(const std::string& prompt, const std::vector<int>& prompt_ids,
                       const std::vector<temperature_run>& runs, const sampling& sp, const tokenizer& tok) {
    json out = json::array();
    for (const temperature_run& r : runs) {
        json dist = json::array();
        for (size_t i = 0; i < r.dist.ids.size() && i < 50; i++)
            dist.push_back({{"id", r.dist.ids[i]}, {"text", token_text(tok, r.dist.ids[i])}, {"prob", r.dist.probs[i]}});
        out.push_back({{"temperature", r.temperature},
                       {"generated_ids", r.ids},
                       {"generated_text", r.text},
                       {"stopped_at_eos", r.hit_eos},
                       {"distribution", dist}});
    }
    return {{"prompt", prompt},
            {"prompt_ids", prompt_ids},
            {"runs", out},
            {"sampling", {{"top_k", sp.top_k}, {"top_p", sp.top_p}, {"seed", sp.seed}}}};
}

json attribution_json(const attribution& a, const tokenizer& tok) {
    return {{"position", a.position},
            {"target", token_ref(a.target, tok)},
            {"contrast", token_ref(a.contrast, tok)},
            {"heads", grid(a.heads.data(), a.n_layer, a.n_head)},
            {"attn_bias", a.attn_bias},
            {"has_attn_bias", a.has_attn_bias},
            {"mlp", a.mlp},
            {"embed", a.embed},
            {"bias", a.bias},
            {"has_final_bias", a.has_final_bias},
            {"total", a.total},
            {"sum", a.sum()},
            {"residual", a.total - a.sum()}};
}

json head_scores_json(const head_scores& s, const record& r) {
    json j;
    for (int k = 0; k < SCORE_COUNT; k++) j[head_score_name((head_score_kind)k)] = grid(s.score[k].data(), s.n_layer, s.n_head);
    j["induction_positions"] = s.n_induction_positions;
    j["tokens"] = r.tokens;
    j["pieces"] = r.pieces;
    return j;
}

json patch_json(const patch_result& p, const tokenizer& tok, const std::vector<int>& clean, const std::vector<int>& corrupt) {
    const int P = 2 * p.n_layer + 1;
    json j = {{"target", token_ref(p.target, tok)},
              {"contrast", token_ref(p.contrast, tok)},
              {"clean", p.clean},
              {"corrupt", p.corrupt},
              {"points", resid_labels(p.n_layer)},
              {"clean_tokens", tokens_json(clean, tok)},
              {"corrupt_tokens", tokens_json(corrupt, tok)},
              {"runs", p.runs},
              {"ms", p.ms},
              {"complete", p.complete}};
    json norm = json::object();
    if (!p.resid.empty()) {
        j["resid"] = grid(p.resid.data(), P, p.n_tokens);
        norm["resid"] = grid(p.resid_normalized.data(), P, p.n_tokens);
    }
    if (!p.heads.empty()) {
        j["heads"] = grid(p.heads.data(), p.n_layer, p.n_head);
        norm["heads"] = grid(p.heads_normalized.data(), p.n_layer, p.n_head);
    }
    j["normalized"] = norm;
    return j;
}

void write_lens_npy(const std::string& dir, const lens_result& l) {
    make_dir(dir);
    std::vector<int32_t> ids(l.top_ids.begin(), l.top_ids.end());
    write_npy(dir + "/lens_top_ids.npy", {l.n_points, l.n_tokens, l.k}, ids.data());
    write_npy(dir + "/lens_top_probs.npy", {l.n_points, l.n_tokens, l.k}, l.top_probs.data());
    write_npy(dir + "/lens_target_prob.npy", {l.n_points, l.n_tokens}, l.target_prob.data());
}

void write_attribution_npy(const std::string& dir, const attribution& a) {
    make_dir(dir);
    write_npy(dir + "/attribution_heads.npy", {a.n_layer, a.n_head}, a.heads.data());
}

void write_head_scores_npy(const std::string& dir, const head_scores& s) {
    make_dir(dir);
    std::vector<float> all;
    for (int k = 0; k < SCORE_COUNT; k++) all.insert(all.end(), s.score[k].begin(), s.score[k].end());
    write_npy(dir + "/head_scores.npy", {SCORE_COUNT, s.n_layer, s.n_head}, all.data());
}

void write_patch_npy(const std::string& dir, const patch_result& p) {
    make_dir(dir);
    const int P = 2 * p.n_layer + 1;
    if (!p.resid.empty()) {
        write_npy(dir + "/patch_resid.npy", {P, p.n_tokens}, p.resid.data());
        write_npy(dir + "/patch_resid_normalized.npy", {P, p.n_tokens}, p.resid_normalized.data());
    }
    if (!p.heads.empty()) {
        write_npy(dir + "/patch_heads.npy", {p.n_layer, p.n_head}, p.heads.data());
        write_npy(dir + "/patch_heads_normalized.npy", {p.n_layer, p.n_head}, p.heads_normalized.data());
    }
}

// ---------------------------------------------------------------------------------------------
// Gradients
// ---------------------------------------------------------------------------------------------
json saliency_json(const saliency_result& s, const tokenizer& tok, const std::vector<int>& tokens) {
    const int P = 2 * s.n_layer + 1, T = s.n_tokens, d = s.d_model;
    json grad = json::array();
    for (int p = 0; p < P; p++) grad.push_back(grid(s.resid_grad.data() + (size_t)p * T * d, T, d));
    const bool diff = s.metric.kind == metric_spec::LOGIT_DIFF && s.metric.contrast >= 0;
    const metric_spec::kind_t kind = diff || s.metric.kind != metric_spec::LOGIT_DIFF ? s.metric.kind : metric_spec::LOGIT;
    json j = {{"metric", s.value},
              {"metric_kind", metric_name(kind)},
              {"target", token_ref(s.metric.target, tok)},
              {"contrast", token_ref(diff ? s.metric.contrast : -1, tok)},
              {"position", s.metric.position},
              {"tokens", tokens_json(tokens, tok)},
              {"points", resid_labels(s.n_layer)},
              {"resid_grad", grad},
              {"grad_x_input", s.grad_x_input},
              {"steps", s.steps}};
    if (s.steps > 0) {
        j["integrated"] = s.integrated;
        j["baseline"] = s.baseline;
        j["completeness_gap"] = s.completeness_gap();
    }
    if (s.n_source > 0) { // an encoder–decoder: the encoder's side, over the source tokens
        json sg = json::array();
        for (int p = 0; p <= 2 * s.source_layers; p++)
            sg.push_back(grid(s.source_grad.data() + (size_t)p * s.n_source * d, s.n_source, d));
        j["source_points"] = resid_labels(s.source_layers);
        j["source_resid_grad"] = sg;
        j["source_grad_x_input"] = s.source_grad_x_input;
        if (s.steps > 0) j["source_integrated"] = s.source_integrated;
    }
    return j;
}

static json error_json(const estimate_error& e) {
    return {{"max", e.max}, {"rms", e.rms}, {"correlation", std::isfinite(e.correlation) ? json(e.correlation) : json()}};
}

json atp_json(const patch_result& estimate, const patch_result* exact, const tokenizer& tok, const std::vector<int>& clean,
              const std::vector<int>& corrupt) {
    json j = patch_json(estimate, tok, clean, corrupt);
    j["method"] = "attribution patching";
    if (!exact) return j;
    const json e = patch_json(*exact, tok, clean, corrupt);
    j["exact"] = {{"clean", e["clean"]}, {"corrupt", e["corrupt"]}, {"resid", e["resid"]}, {"heads", e["heads"]},
                  {"normalized", e["normalized"]}, {"runs", e["runs"]}, {"ms", e["ms"]}};
    j["error"] = {{"resid", error_json(compare_estimate(estimate.resid_normalized, exact->resid_normalized))},
                  {"heads", error_json(compare_estimate(estimate.heads_normalized, exact->heads_normalized))}};
    return j;
}

void write_saliency_npy(const std::string& dir, const saliency_result& s) {
    make_dir(dir);
    const int P = 2 * s.n_layer + 1;
    write_npy(dir + "/resid_grad.npy", {P, s.n_tokens, s.d_model}, s.resid_grad.data());
    write_npy(dir + "/grad_x_input.npy", {s.n_tokens}, s.grad_x_input.data());
    if (s.steps > 0) write_npy(dir + "/integrated.npy", {s.n_tokens}, s.integrated.data());
    if (s.n_source <= 0) return;
    write_npy(dir + "/source_resid_grad.npy", {2 * s.source_layers + 1, s.n_source, s.d_model}, s.source_grad.data());
    write_npy(dir + "/source_grad_x_input.npy", {s.n_source}, s.source_grad_x_input.data());
    if (s.steps > 0) write_npy(dir + "/source_integrated.npy", {s.n_source}, s.source_integrated.data());
}

void write_atp_npy(const std::string& dir, const patch_result& estimate, const patch_result* exact) {
    make_dir(dir);
    const int P = 2 * estimate.n_layer + 1;
    write_npy(dir + "/atp_resid.npy", {P, estimate.n_tokens}, estimate.resid.data());
    write_npy(dir + "/atp_resid_normalized.npy", {P, estimate.n_tokens}, estimate.resid_normalized.data());
    write_npy(dir + "/atp_heads.npy", {estimate.n_layer, estimate.n_head}, estimate.heads.data());
    write_npy(dir + "/atp_heads_normalized.npy", {estimate.n_layer, estimate.n_head}, estimate.heads_normalized.data());
    if (exact) write_patch_npy(dir, *exact);
}

json trace_json(const trace_result& r, const tokenizer& tok, const std::vector<int>& tokens, double noise) {
    const int P = 2 * r.n_layer + 1;
    const std::vector<int> subject(tokens.begin() + r.subject_first, tokens.begin() + r.subject_end);
    json j = {{"clean_prob", r.clean_prob},
              {"corrupt_prob", r.corrupt_prob},
              {"target", token_ref(r.target, tok)},
              {"subject", {{"first", r.subject_first}, {"end", r.subject_end}, {"tokens", tokens_json(subject, tok)}}},
              {"noise", noise},
              {"sigma", r.sigma},
              {"embed_std", r.embed_std},
              {"samples", r.samples},
              {"seed", r.seed},
              {"points", resid_labels(r.n_layer)},
              {"tokens", tokens_json(tokens, tok)},
              {"resid", grid(r.resid.data(), P, r.n_tokens)},
              {"runs", r.runs},
              {"ms", r.ms},
              {"complete", r.complete}};
    if (!r.attn.empty()) j["attn"] = grid(r.attn.data(), r.n_layer, r.n_tokens);
    if (!r.mlp.empty()) j["mlp"] = grid(r.mlp.data(), r.n_layer, r.n_tokens);
    return j;
}

void write_trace_npy(const std::string& dir, const trace_result& r) {
    write_npy(dir + "/trace_resid.npy", {2 * r.n_layer + 1, r.n_tokens}, r.resid.data());
    if (!r.attn.empty()) write_npy(dir + "/trace_attn.npy", {r.n_layer, r.n_tokens}, r.attn.data());
    if (!r.mlp.empty()) write_npy(dir + "/trace_mlp.npy", {r.n_layer, r.n_tokens}, r.mlp.data());
}

} // namespace gb
