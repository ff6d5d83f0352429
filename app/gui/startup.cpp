// The app's start: the session's and the command line's inputs, the remembered settings (the config folder,
// settings.json, and a note when either is missing) and the first model.
#include "startup.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "io/loader.h"
#include "io/model_sources.h"
#include "util/error.h"

namespace gbui {

void add_note(app_state& s, const std::string& note) {
    std::fprintf(stderr, "glassbox: %s\n", note.c_str());
    s.settings_note += (s.settings_note.empty() ? "" : "; ") + note;
}

bool remembers(const options& opt, bool headless) {
    const char* env_dir = std::getenv("GLASSBOX_CONFIG_DIR");
    return !headless || opt.remember || (env_dir && *env_dir);
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

std::string apply_startup_inputs(app_state& s, const options& opt) {
    std::string model_path = opt.model; // else the session's, the last one opened, or the embedded default
    // settings naming layers and heads wait for the model they are meant for (adopt_model applies them)
    pending_settings startup;
    if (!opt.session.empty()) {
        session_file f = read_session(opt.session);
        s.prompt = f.prompt;
        s.bos = f.bos;
        apply_session_inputs(s, f);
        startup = f.settings;
        if (opt.model.empty() && !f.model.empty()) model_path = f.model;
    }
    if (opt.prompt_given) s.prompt = opt.prompt;
    if (!opt.image.empty()) s.image_path = opt.image;
    if (opt.bos) s.bos = true;
    if (opt.gl) s.use_gl = true;
    s.budget_mb = (size_t)opt.budget_mb;
    bool from_cli = false;
    if (!opt.ablate.empty() || !opt.layers.empty() || !opt.heads.empty() || !opt.experts.empty()) {
        startup.ablation = gb::parse_ablation(opt.ablate, opt.layers, opt.heads, opt.experts);
        startup.has_ablation = from_cli = true;
    }
    if (opt.sel_layer >= 0) startup.sel_layer = opt.sel_layer, startup.sel_head = opt.sel_head, from_cli = true;
    if (opt.sel_token >= 0) startup.sel_token = opt.sel_token, from_cli = true;
    if (from_cli) startup.source = startup.source.empty() ? "command line" : startup.source + " + command line";
    if (startup.has_ablation || startup.sel_layer >= 0 || startup.sel_token >= 0 || startup.has_tokens) s.pending = startup;
    return model_path;
}

std::string choose_first_model(std::string* path, app_state& s, const app_settings& saved) {
    std::string restoring;
    if (path->empty() && !saved.last_model.empty()) {
        std::error_code ec;
        if (gb::is_model_name(saved.last_model) || std::filesystem::exists(saved.last_model, ec))
            *path = restoring = saved.last_model; // (a name is resolved by the loader, from the cache first)
        else add_note(s, "the last model, " + saved.last_model + ", no longer exists: opened the default model");
    }
    if (path->empty()) {
        try {
            *path = gb::default_model_path();
        } catch (const gb::error& e) {
            s.error = e.what();
        }
    }
    return restoring;
}

} // namespace gbui
