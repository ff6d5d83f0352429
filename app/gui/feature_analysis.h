// The Features tab's work beside its analyses (feature_analysis.cpp): the SAEs opened off the UI thread, training
// one, and the SAEs and edits in sessions.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app_state.h"

namespace gbui {

// The SAE the Features tab shows (null: none opened)
const gb::bound_sae* shown_sae(const app_state& s);
// Opens the SAE at path (a SAELens folder, a Gemma Scope params.npz/.safetensors or its folder) for s.model off the
// UI thread (ui's per-frame poll_saes): it joins s.saes (replacing one at the same hook point) and is shown; a file
// that does not fit sets s.error in one line and leaves the SAEs as they were.
void open_sae_file(app_state& s, const std::string& path);
// The points the Features tab trains SAEs on (s.sae_train.point indexes it).
const std::vector<gb::hook_point>& sae_train_points();
// Train: checks s.sae_train against the model (one error line in s.error, false) and starts training with it.
bool start_sae_training(app_state& s);
// Sessions: the SAEs' paths and the edits on them; read into p; applied (the SAEs opened again, the edits once
// their SAE has opened) to s
nlohmann::json features_session_json(const app_state& s);
void read_features_session(pending_settings& p, const nlohmann::json& j);
void apply_features_session(app_state& s, const pending_settings& p);
// Whether path is an SAE folder (cfg.json with sae_weights.safetensors, or params.npz / params.safetensors)
bool is_sae_folder(const std::string& path);

} // namespace gbui
