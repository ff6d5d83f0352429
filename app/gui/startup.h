// What the app starts from: the command line's and a session file's inputs, the remembered settings (and the
// notes about them for the status bar), and the model to open first.
#pragma once
#include <string>

#include "options.h"
#include "settings.h"
#include "ui.h"

namespace gbui {

// A line about the settings for the status bar (shown with the next model load's warnings) and the log.
void add_note(app_state& s, const std::string& note);
// What the app remembers: a window always; a screenshot or script run (headless) only when asked (--remember,
// or GLASSBOX_CONFIG_DIR), so that docs and tests neither depend on nor change the user's settings.
bool remembers(const options& opt, bool headless);
// Sets s.config_dir (when the run persists and the folder can be made) and returns the remembered settings
// (defaults when there are none, or when the file is unreadable or malformed: said once, the app goes on).
app_settings open_settings(app_state& s, bool persist);
// Sets the inputs the app starts with: --session's (prompt, BOS, analysis inputs), then the command line's over
// them; the ablation and selection wait in s.pending for the model they are meant for (adopt_model applies
// them). Returns the model to open: --model, else the session's ("" when neither names one). Throws gb::error
// (an unreadable session, a malformed ablation).
std::string apply_startup_inputs(app_state& s, const options& opt);
// The model to open first, in *path: the one given, else the last one opened (then returned too: if it fails to
// load, the default is opened instead), else the embedded default (s.error says why when there is none).
std::string choose_first_model(std::string* path, app_state& s, const app_settings& saved);

} // namespace gbui
