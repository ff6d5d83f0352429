// The remembered settings at start: the config folder, settings.json, and the notes when either is missing.
#include "startup.h"

#include <cstdio>

namespace gbui {

void add_note(app_state& s, const std::string& note) {
    std::fprintf(stderr, "glassbox: %s\n", note.c_str());
    s.settings_note += (s.settings_note.empty() ? "" : "; ") + note;
}

app_settings open_settings(app_state& s, bool persist) {
    s.config_dir.clear();
    if (!persist) return {};
    const std::string dir = config_dir_path();
    if (dir.empty()) {
        add_note(s, "no config folder (neither XDG_CONFIG_HOME nor HOME is set): settings are not remembered");
        return {};
    }
    if (std::string err = make_config_dir(dir); !err.empty()) {
        add_note(s, err + ": settings are not remembered");
        return {};
    }
    s.config_dir = dir;
    std::string note;
    app_settings a = read_settings(dir, &note);
    if (!note.empty()) add_note(s, note);
    return a;
}

} // namespace gbui
