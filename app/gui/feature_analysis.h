// The Features tab's work beside its analyses (feature_analysis.cpp): the SAEs opened off the UI thread, training
// one, and the SAEs and edits in sessions.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analysis/sae_train.h"
#include "app_state.h"

namespace gbui {

// A text that ships with Glassbox, for the corpus boxes' defaults: the default model's README.md (English prose about
// the model, installed with it); "" when the default model is not installed.
std::string shipped_text();

// The Features tab's own inputs (its row in the tab table makes them; inputs_of reads them): the opened SAEs (one
// per hook point; opened off the UI thread from queue), the one shown, the selected feature, the corpus its top
// contexts come from, the fields of "Train an SAE", and the edits applied to the live run (the main run's request
// carries them: current_run_request).
struct features_inputs {
    std::vector<std::shared_ptr<const gb::bound_sae>> saes;
    std::vector<app_feature_edit> edits;                 // applied to the live run, listed in the Ablations panel
    std::vector<std::string> queue;                      // paths waiting to be opened (open_sae_file)
    std::vector<pending_settings::saved_edit> queue_edits; // a session's edits, applied when their SAE opens
    int shown = 0;
    std::string path_input;      // the SAE box (empty: its hint; the default model's SAE opens by itself)
    int sel = -1;                // -1: none selected
    float value = 5.0f;          // clamp's value and steer's alpha
    std::string corpus = shipped_text(); // the top contexts' text: the default model's README until one is chosen
    int index_build = 0;         // bumped by Index: builds (or reads) the index of corpus
    std::string index_path;      // the corpus Index was pressed for
    // "Train an SAE": the fields, and Train's count (each press trains once with the fields then)
    struct train_fields {
        std::string corpus = shipped_text(), out = "sae-trained";
        int point = 0; // index into sae_train_points()
        int layer = 0, features = 512, k = 16, steps = 2000;
    } train, train_asked;
    int train_build = 0;
    const gb::model* train_for = nullptr; // the model Train was pressed for (another one does not train)
};

// What the Features tab's three rows' requests carry (analysis_request::inputs), each of `model` (with bos): the
// features of `prompt` on `sae` under ab, with `feature`'s logit effect (-1: none selected); the index of `corpus`
// on `sae`; training an SAE on `corpus` at `point` of `layer` with `train`, written to out_dir.
struct features_request {
    std::shared_ptr<const gb::model> model;
    bool bos = false;
    std::string prompt;
    gb::ablation ab;
    std::shared_ptr<const gb::bound_sae> sae;
    int feature = -1;
    std::string corpus;
    gb::sae_train_options train;
    gb::hook_point point = gb::HOOK_RESID_POST;
    int layer = 0;
    std::string out_dir;
};

// The SAE the Features tab shows (null: none opened)
const gb::bound_sae* shown_sae(const app_state& s);
// Opens the SAE at path (a SAELens folder, a Gemma Scope params.npz/.safetensors or its folder) for s.model off the
// UI thread (ui's per-frame poll_saes): it joins the tab's saes (replacing one at the same hook point) and is shown; a file
// that does not fit sets s.error in one line and leaves the SAEs as they were.
void open_sae_file(app_state& s, const std::string& path);
// The points the Features tab trains SAEs on (features_inputs::train.point indexes it).
const std::vector<gb::hook_point>& sae_train_points();
// Train: checks the tab's train fields against the model (one error line in s.error, false) and starts training with it.
bool start_sae_training(app_state& s);
// Sessions: the SAEs' paths and the edits on them; read into p; applied (the SAEs opened again, the edits once
// their SAE has opened) to s
nlohmann::json features_session_json(const app_state& s);
void read_features_session(pending_settings& p, const nlohmann::json& j);
void apply_features_session(app_state& s, const pending_settings& p);
// Whether path is an SAE folder (cfg.json with sae_weights.safetensors, or params.npz / params.safetensors)
bool is_sae_folder(const std::string& path);

} // namespace gbui
