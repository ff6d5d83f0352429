// What the app remembers between runs: the window's size and position, the last model and the recent models,
// the text scale, in settings.json in the config folder (ImGui's own imgui.ini sits beside it). Files and paths only: the
// app decides when to read and write.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/features.h"
#include "run/ablation.h"

namespace gbui {

constexpr size_t max_recent_models = 10; // the File menu lists them

struct app_settings {
    int width = 0, height = 0;       // window size in screen coordinates; 0 = not saved
    bool has_pos = false;            // the window's position was saved (GLFW cannot always tell it)
    int x = 0, y = 0;
    bool maximized = false;
    std::string last_model;          // the last model that loaded ("" = none)
    std::vector<std::string> recent; // models that loaded, most recent first, at most max_recent_models
    float ui_scale = 0;              // the text scale chosen (View menu, Ctrl+=/-/0), 0.6 .. 3; 0 = never chosen
    // the tiled layout's splitters as the user dragged them (layout.h split_kind), fractions in [0.05, 0.95];
    // 0 = the automatic size
    float split[4] = {0, 0, 0, 0};
    // the panels' explanations: "" = never shown yet (in full at the first start, which writes "folded" for the later
    // ones), "full" or "folded" (the View menu's choice)
    std::string explanations;
};

// The config folder: $GLASSBOX_CONFIG_DIR, else $XDG_CONFIG_HOME/glassbox, else $HOME/.config/glassbox;
// "" when none of them is set.
std::string config_dir_path();

// Creates the folder (and its parents) if needed; "" on success, else one line saying why not.
std::string make_config_dir(const std::string& dir);

// dir/settings.json. A missing file gives the defaults quietly; an unreadable or malformed one gives the
// defaults and one line in *note (what is wrong, and that the defaults are used).
app_settings read_settings(const std::string& dir, std::string* note);

// Reads dir/settings.json (defaults when it is missing or malformed), lets `change` edit it and writes it back
// through a temporary file (a crash never leaves half a file). Read-modify-write, so that two windows open at
// once do not drop each other's recent models. Returns "" or one line saying why it could not be written;
// *now (optional) receives what was written.
std::string update_settings(const std::string& dir, const std::function<void(app_settings&)>& change,
                            app_settings* now = nullptr);

// Puts path first in list (once), keeping at most max_recent_models.
void add_recent(std::vector<std::string>& list, const std::string& path);
// The entries of list that still exist on disk, in order (model names, "hf:ORG/NAME", "ollama:NAME", are kept).
std::vector<std::string> existing_paths(const std::vector<std::string>& list);

// Settings that name a model's layers and heads (from the command line or a session): held until the
// model they are meant for has loaded, then checked against it (apply_settings).
struct pending_settings {
    std::string source;          // "the command line", "session FILE": named in the message when they do not fit
    bool has_ablation = false;
    gb::ablation ablation;
    int sel_layer = -1, sel_head = -1; // -1: not given
    int sel_token = -1;                // -1: not given
    // the Features tab (sessions): the SAEs to open, and the edits on them (by the SAE's path)
    std::vector<std::string> sae_paths;
    struct saved_edit { std::string path; gb::feature_edit e; };
    std::vector<saved_edit> feature_edits;
    int feature_sel = -1;
    bool has_features = false;   // a session said them (replacing the SAEs open)
    // token ids (-1: not given / default): checked against the model's vocabulary
    bool has_tokens = false;
    int lens_target = -1, attr_target = -1, attr_contrast = -1, patch_target = -1, patch_contrast = -1;
    std::string lens_target_text, attr_target_text, attr_contrast_text, patch_target_text, patch_contrast_text; // "" = not saved
};

} // namespace gbui
