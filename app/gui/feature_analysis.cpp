// The Features tab's work off the UI thread: the feature edits as interventions for the main run (worker.cpp),
// the shown SAE's features of the prompt with the selected feature's logit effect, and the corpus index of its
// top contexts (analysis threads); and the SAEs opened from open_sae_file (a thread each, polled every frame).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "io/loader.h"
#include "analysis_table.h"
#include "analysis_worker.h"
#include "tokenizer/tokenizer.h"
#include "util/npy.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

std::string shipped_text() {
    try {
        const std::string readme = gb::default_model_path() + "/README.md";
        return std::filesystem::exists(readme) ? readme : "";
    } catch (const std::exception&) { // no default model installed (gb::error), or a folder we may not read
        return "";
    }
}

std::string describe_feature_edit(const app_feature_edit& f) {
    char b[96];
    const gb::feature_edit& e = f.e;
    if (e.kind == gb::FEATURE_ABLATE) std::snprintf(b, sizeof b, "ablate %d", e.id);
    else std::snprintf(b, sizeof b, "%s %d=%g", e.kind == gb::FEATURE_CLAMP ? "clamp" : "steer", e.id, e.value);
    return std::string(b) + " at " + (f.sae ? gb::hook_label(f.sae->out, f.sae->layer) : "?");
}

std::string describe_feature_edits(const std::vector<app_feature_edit>& edits) {
    std::string out;
    for (const app_feature_edit& f : edits) out += (out.empty() ? "" : ", ") + describe_feature_edit(f);
    return out;
}

void add_feature_interventions(std::vector<gb::intervention>& iv, std::vector<std::vector<float>>& values,
                               const gb::model& m, const std::vector<int>& ids, const gb::ablation& ab,
                               const std::vector<app_feature_edit>& edits) {
    std::vector<const gb::bound_sae*> order; // each SAE once, in the order its first edit was made
    for (const app_feature_edit& f : edits)
        if (std::find(order.begin(), order.end(), f.sae.get()) == order.end()) order.push_back(f.sae.get());
    values.reserve(values.size() + order.size());
    for (const gb::bound_sae* b : order) {
        std::vector<gb::feature_edit> mine;
        for (const app_feature_edit& f : edits)
            if (f.sae.get() == b) mine.push_back(f.e);
        // the SAE's points as this run reaches them: the ablation, the circuit and the earlier SAEs' edits
        gb::forward_options opt;
        opt.keep.points = gb::hook_bit(b->in) | gb::hook_bit(b->out);
        opt.keep.layers.assign(m.config.n_layer, 0);
        opt.keep.layers[b->layer] = 1;
        opt.interventions = iv;
        gb::record rec;
        gb::run_forward(rec, m, ids, ab, opt);
        values.emplace_back();
        iv.push_back(gb::feature_intervention(*b, rec, mine, values.back()));
    }
}

namespace {

// The prompt as the main run encodes it (its last n_ctx tokens)
std::vector<int> prompt_ids(const gb::model& m, const std::string& prompt, bool bos) {
    std::vector<int> ids = gb::encode_prompt(m.tok, prompt, bos);
    if (ids.empty()) throw gb::error("the prompt is empty: no features to show");
    if ((int)ids.size() > m.config.n_ctx) ids.erase(ids.begin(), ids.end() - m.config.n_ctx);
    return ids;
}

const int chip_features = 3; // the top features each token's chips show

} // namespace

// Training an SAE as `glassbox-cli train-sae` does (the same activations, options and files, so the same SAE), with
// progress: a tenth for the activations, the rest for the steps; resumable from the state file in the folder.
static void train_in_app(features_output& out, const gb::model& m, const features_request& q, const keep_going& go) {
    std::ifstream f(q.corpus, std::ios::binary);
    if (!f) throw gb::error("train an SAE: cannot read the corpus " + q.corpus);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (const long bad = gb::utf8_invalid_at(text); bad >= 0)
        throw gb::error("train an SAE: the corpus " + q.corpus + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    if (!go(0.0f)) throw gb::cancelled();
    const std::vector<float> x = gb::collect_activations(m, q.point, q.layer, text, std::min(128, m.config.n_ctx), 200000, q.bos);
    const int d = m.config.d_model;
    const int64_t n = (int64_t)(x.size() / d);
    if (n == 0) throw gb::error("train an SAE: the corpus " + q.corpus + " holds no tokens");
    gb::make_dir(q.out_dir);
    gb::sae_train_progress last;
    const auto t0 = std::chrono::steady_clock::now();
    gb::sae s = gb::train_sae(x.data(), n, d, q.train, q.out_dir + "/train_state.bin", [&](const gb::sae_train_progress& p) {
        last = p;
        if (!go(0.1f + 0.9f * (float)p.step / (float)std::max<int64_t>(1, p.steps))) throw gb::cancelled();
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gb::name_trained_sae(s, m, q.point, q.layer);
    gb::write_sae_saelens(q.out_dir, s);
    char note[256];
    std::snprintf(note, sizeof note, "trained %s: %lld activations, explained %.3f, dead %.3f, %.0f activations/s",
                  q.out_dir.c_str(), (long long)n, last.explained, last.dead_fraction,
                  secs > 0 ? (double)q.train.steps * q.train.batch / secs : 0.0);
    out.trained = q.out_dir, out.train_note = note;
}

std::shared_ptr<const void> compute_features(const analysis_request& rq, const analysis_run& run) {
    const features_request& q = request_of<features_request>(rq);
    const keep_going& go = run.go;
    const auto t0 = std::chrono::steady_clock::now();
    const gb::model& m = *q.model;
    auto out = std::make_shared<features_output>();
    out->key = rq.key, out->model = q.model, out->sae = q.sae;
    if (rq.kind == ANALYSIS_SAE_TRAIN) {
        train_in_app(*out, m, q, go);
    } else if (rq.kind == ANALYSIS_FEATURE_INDEX) {
        bool built = false;
        std::string path, note;
        out->index = std::make_shared<const gb::feature_index>(gb::cached_feature_index(
            m, *q.sae, q.corpus, q.bos, [&](int done, int total) {
                if (!go(total > 0 ? (float)done / total : 0.0f)) throw gb::cancelled();
            },
            built, path, note));
        out->corpus = q.corpus;
        out->index_note = (built ? "built " : "read ") + path + (note.empty() ? "" : " (" + note + ")");
    } else {
        out->ids = prompt_ids(m, q.prompt, q.bos);
        out->res = gb::run_features(m, *q.sae, out->ids, q.ab);
        go(0.5f);
        const int d_sae = out->res.d_sae;
        for (int t = 0; t < out->res.n_tokens; t++) { // every feature a chip shows, with its top promoted tokens
            const float* a = out->res.acts.data() + (size_t)t * d_sae;
            std::vector<int> top;
            for (int i = 0; i < d_sae; i++)
                if (a[i] > 0) top.push_back(i);
            const size_t n = std::min<size_t>(top.size(), chip_features);
            std::partial_sort(top.begin(), top.begin() + n, top.end(), [&](int x, int y) { return a[x] > a[y]; });
            for (size_t j = 0; j < n; j++)
                if (std::find(out->chip_ids.begin(), out->chip_ids.end(), top[j]) == out->chip_ids.end())
                    out->chip_ids.push_back(top[j]);
        }
        const bool writes_stream = q.sae->out == gb::HOOK_RESID_PRE || q.sae->out == gb::HOOK_RESID_MID ||
                                   q.sae->out == gb::HOOK_RESID_POST || q.sae->out == gb::HOOK_ATTN_OUT ||
                                   q.sae->out == gb::HOOK_MLP_OUT;
        if (writes_stream) {
            std::vector<gb::token_effect> sup;
            for (int id : out->chip_ids) {
                out->chip_tokens.emplace_back();
                gb::feature_logit_effect(out->chip_tokens.back(), sup, m, *q.sae, id, 3);
                if (!go(0.5f)) throw gb::cancelled();
            }
            if (q.feature >= 0 && q.feature < d_sae)
                gb::feature_logit_effect(out->promotes, out->suppresses, m, *q.sae, q.feature, 10);
        }
        out->feature = q.feature;
    }
    out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

// ---- opening SAEs off the UI thread ----

const gb::bound_sae* shown_sae(const app_state& s) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    return fin.saes.empty() ? nullptr : fin.saes[std::clamp(fin.shown, 0, (int)fin.saes.size() - 1)].get();
}

void open_sae_file(app_state& s, const std::string& path) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    fin.queue.push_back(path);
    fin.path_input = path;
}

bool is_sae_folder(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(path, ec)) return false;
    const fs::path p(path);
    return (fs::exists(p / "cfg.json", ec) && fs::exists(p / "sae_weights.safetensors", ec)) ||
           fs::exists(p / "params.npz", ec) || fs::exists(p / "params.safetensors", ec);
}

// An opened SAE joins the list (one per hook point: it replaces one there, whose edits go) and is shown; the
// session's edits on its path are applied.
static void adopt_sae(app_state& s, std::shared_ptr<const gb::bound_sae> b, const std::string& path) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    int at = -1;
    for (size_t i = 0; i < fin.saes.size(); i++)
        if (fin.saes[i]->in == b->in && fin.saes[i]->out == b->out && fin.saes[i]->layer == b->layer) at = (int)i;
    if (at >= 0) {
        const gb::bound_sae* old = fin.saes[at].get();
        fin.edits.erase(std::remove_if(fin.edits.begin(), fin.edits.end(),
                                             [&](const app_feature_edit& f) { return f.sae.get() == old; }),
                              fin.edits.end());
        fin.saes[at] = b;
    } else {
        at = (int)fin.saes.size();
        fin.saes.push_back(b);
    }
    fin.shown = at;
    if (fin.sel >= b->s->d_sae) fin.sel = -1;
    for (auto it = fin.queue_edits.begin(); it != fin.queue_edits.end();)
        if (it->path == path) {
            if (it->e.id >= 0 && it->e.id < b->s->d_sae) fin.edits.push_back({b, it->e});
            it = fin.queue_edits.erase(it);
        } else ++it;
    std::string w;
    for (const std::string& x : b->warnings) w += (w.empty() ? "" : "; ") + x;
    // the folder's or file's own name: a full path fills the status bar (the SAE box and the tooltip hold it)
    const std::string name = std::filesystem::path(path).lexically_normal().filename().string();
    s.status = "opened SAE " + (name.empty() ? path : name) + (w.empty() ? "" : " (warning: " + w + ")");
    s.error.clear();
}

const std::vector<gb::hook_point>& sae_train_points() {
    static const std::vector<gb::hook_point> points = {gb::HOOK_RESID_POST, gb::HOOK_RESID_MID, gb::HOOK_RESID_PRE,
                                                       gb::HOOK_MLP_OUT, gb::HOOK_ATTN_OUT};
    return points;
}

bool start_sae_training(app_state& s) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    const features_inputs::train_fields& f = fin.train;
    std::string why;
    if (!s.model) why = "no model loaded";
    else if (!gb::offers(s.model->config, gb::FEATURE_SAE)) why = gb::refusal(*s.model, gb::FEATURE_SAE);
    else if (f.layer < 0 || f.layer >= s.model->config.n_layer)
        why = "layer " + std::to_string(f.layer) + " is outside the model (0.." + std::to_string(s.model->config.n_layer - 1) + ")";
    else if (f.point < 0 || f.point >= (int)sae_train_points().size()) why = "no such point";
    else if (f.features < 1 || f.features > (1 << 20)) why = "features must be 1..1048576";
    else if (f.k < 1 || f.k > f.features) why = "k must be 1.." + std::to_string(f.features) + " (the features)";
    else if (f.steps < 1) why = "steps must be at least 1";
    else if (f.corpus.empty() || f.out.empty()) why = "name a corpus file and a folder to write";
    if (!why.empty()) {
        s.error = "train an SAE: " + why;
        return false;
    }
    fin.train_asked = f;
    fin.train_for = s.model.get();
    fin.train_build++;
    return true;
}

void poll_saes(app_state& s, ui_context& ui) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    if (!s.model) return; // a session's SAEs wait for its model
    // an SAE trained in the tab opens once, like one typed into its box
    const features_output* trained = output_of<features_output>(s, ANALYSIS_SAE_TRAIN).get();
    if (trained && trained->model == s.model && trained->key != ui.sae_train_adopted) {
        ui.sae_train_adopted = trained->key;
        s.status = trained->train_note;
        open_sae_file(s, trained->trained);
    }
    for (const std::string& path : fin.queue) {
        const std::shared_ptr<const gb::model> m = s.model;
        const bool offered = gb::offers(m->config, gb::FEATURE_SAE);
        const std::string why = offered ? "" : gb::refusal(*m, gb::FEATURE_SAE);
        ui.sae_jobs.push_back({path, m, std::async(std::launch::async, [path, m, why] {
                                   if (!why.empty()) throw gb::error(why);
                                   return std::make_shared<const gb::bound_sae>(gb::open_sae(path, *m));
                               })});
    }
    fin.queue.clear();
    for (auto it = ui.sae_jobs.begin(); it != ui.sae_jobs.end();) {
        if (it->done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
            ++it;
            continue;
        }
        try {
            std::shared_ptr<const gb::bound_sae> b = it->done.get();
            if (it->model == s.model) adopt_sae(s, b, it->path); // else opened for a model no longer shown
        } catch (const std::exception& e) {
            const std::string what = e.what(); // the reader's errors name the file already
            s.error = what.find(it->path) != std::string::npos ? what : "SAE " + it->path + ": " + what;
            s.error_not_of_runs = s.error;
            fin.queue_edits.erase(std::remove_if(fin.queue_edits.begin(), fin.queue_edits.end(),
                                                   [&](const pending_settings::saved_edit& x) { return x.path == it->path; }),
                                    fin.queue_edits.end());
        }
        it = ui.sae_jobs.erase(it);
    }
}

// ---- sessions ----

static const char* edit_kind_name(gb::feature_edit_kind k) {
    return k == gb::FEATURE_ABLATE ? "ablate" : k == gb::FEATURE_CLAMP ? "clamp" : "steer";
}

nlohmann::json features_session_json(const app_state& s) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    nlohmann::json saes = nlohmann::json::array(), edits = nlohmann::json::array();
    for (const auto& b : fin.saes) saes.push_back(b->s->path);
    for (const app_feature_edit& f : fin.edits)
        edits.push_back({{"sae", f.sae->s->path}, {"kind", edit_kind_name(f.e.kind)}, {"id", f.e.id}, {"value", f.e.value}});
    return {{"saes", saes}, {"edits", edits}, {"selected", fin.sel}};
}

void read_features_session(pending_settings& p, const nlohmann::json& j) {
    p.has_features = true;
    for (const auto& path : j.at("saes")) p.sae_paths.push_back(path.get<std::string>());
    for (const auto& e : j.at("edits")) {
        pending_settings::saved_edit x;
        x.path = e.at("sae").get<std::string>();
        const std::string k = e.at("kind").get<std::string>();
        if (k != "ablate" && k != "clamp" && k != "steer") throw gb::error("features.edits: kind ablate, clamp or steer, got '" + k + "'");
        x.e.kind = k == "ablate" ? gb::FEATURE_ABLATE : k == "clamp" ? gb::FEATURE_CLAMP : gb::FEATURE_STEER;
        x.e.id = e.at("id").get<int>();
        x.e.value = e.at("value").get<float>();
        if (x.e.id < 0) throw gb::error("features.edits: a feature id must be >= 0");
        p.feature_edits.push_back(x);
    }
    p.feature_sel = j.value("selected", -1);
}

void apply_features_session(app_state& s, const pending_settings& p) {
    auto& fin = inputs_of<features_inputs>(s, TAB_FEATURES);
    fin.saes.clear(), fin.edits.clear();
    s.output[ANALYSIS_FEATURES].reset(), s.output[ANALYSIS_FEATURE_INDEX].reset();
    fin.queue = p.sae_paths;
    fin.queue_edits = p.feature_edits;
    fin.sel = p.feature_sel;
}

} // namespace gbui
