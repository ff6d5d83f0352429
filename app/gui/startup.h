// What the app starts from: the remembered settings (and the notes about them for the status bar).
#pragma once
#include <string>

#include "settings.h"
#include "ui.h"

namespace gbui {

// A line about the settings for the status bar (shown with the next model load's warnings) and the log.
void add_note(app_state& s, const std::string& note);
// Sets s.config_dir (when the run persists and the folder can be made) and returns the remembered settings
// (defaults when there are none, or when the file is unreadable or malformed: said once, the app goes on).
app_settings open_settings(app_state& s, bool persist);

} // namespace gbui
