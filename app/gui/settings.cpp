// settings.json: reading (a malformed file gives the defaults and one line, never an exception), writing
// through a temporary file, and the recent-models list.
#include "settings.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "io/model_sources.h"

namespace gbui {

namespace fs = std::filesystem;
using nlohmann::json;

std::string config_dir_path() {
    if (const char* d = std::getenv("GLASSBOX_CONFIG_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/glassbox";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/glassbox";
    return "";
}

std::string make_config_dir(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!ec && fs::is_directory(dir, ec)) return "";
    return "cannot create the config folder " + dir + " (" + (ec ? ec.message() : "not a folder") + ")";
}

namespace {

const char* file_name = "settings.json";

// Thrown for a settings file that does not have the expected shape; its text names what is wrong.
struct bad_settings {
    std::string what;
};

int int_field(const json& obj, const char* key, const char* name) {
    const json& v = obj.at(key);
    if (!v.is_number_integer()) throw bad_settings{std::string("'") + name + "' is not an integer"};
    // values beyond int are as wrong as any other bad value, and must not wrap
    const long long n = v.get<long long>();
    if (n < -1000000 || n > 1000000) throw bad_settings{std::string("'") + name + "' is out of range"};
    return (int)n;
}

app_settings parse(const json& j) {
    if (!j.is_object()) throw bad_settings{"it is not a JSON object"};
    app_settings s;
    if (j.contains("window")) {
        const json& w = j["window"];
        if (!w.is_object()) throw bad_settings{"'window' is not an object"};
        if (w.contains("width") || w.contains("height")) {
            s.width = int_field(w, "width", "window.width");
            s.height = int_field(w, "height", "window.height");
            // the limits of --size: a size outside them was not written by the app
            if (s.width < 320 || s.height < 240 || s.width > 8192 || s.height > 8192)
                throw bad_settings{"window size " + std::to_string(s.width) + "x" + std::to_string(s.height) +
                                   " is outside 320x240 .. 8192x8192"};
        }
        if (w.contains("x") || w.contains("y")) {
            s.x = int_field(w, "x", "window.x");
            s.y = int_field(w, "y", "window.y");
            s.has_pos = true;
        }
        if (w.contains("maximized")) {
            if (!w["maximized"].is_boolean()) throw bad_settings{"'window.maximized' is not true or false"};
            s.maximized = w["maximized"].get<bool>();
        }
    }
    if (j.contains("last_model")) {
        if (!j["last_model"].is_string()) throw bad_settings{"'last_model' is not a string"};
        s.last_model = j["last_model"].get<std::string>();
    }
    if (j.contains("ui_scale")) {
        const json& v = j["ui_scale"];
        if (!v.is_number()) throw bad_settings{"'ui_scale' is not a number"};
        s.ui_scale = v.get<float>();
        if (!(s.ui_scale >= 0.6f - 1e-4f && s.ui_scale <= 3.0f + 1e-4f)) // what the View menu offers
            throw bad_settings{"'ui_scale' " + v.dump() + " is outside 0.6 .. 3"};
    }
    if (j.contains("layout")) {
        const json& v = j["layout"];
        if (!v.is_array() || v.size() != 4) throw bad_settings{"'layout' is not a list of 4 numbers"};
        for (int i = 0; i < 4; i++) {
            if (!v[i].is_number()) throw bad_settings{"'layout' holds something that is not a number"};
            const float f = v[i].get<float>();
            if (f != 0 && !(f >= 0.05f - 1e-4f && f <= 0.95f + 1e-4f))
                throw bad_settings{"'layout' " + v.dump() + ": a fraction outside 0.05 .. 0.95"};
            s.split[i] = f;
        }
    }
    if (j.contains("explanations")) {
        const json& v = j["explanations"];
        if (!v.is_string() || (v != "full" && v != "folded")) throw bad_settings{"'explanations' is not \"full\" or \"folded\""};
        s.explanations = v.get<std::string>();
    }
    if (j.contains("recent")) {
        const json& r = j["recent"];
        if (!r.is_array()) throw bad_settings{"'recent' is not a list"};
        for (const json& p : r) {
            if (!p.is_string()) throw bad_settings{"'recent' holds something that is not a path"};
            if (!p.get<std::string>().empty() && s.recent.size() < max_recent_models) s.recent.push_back(p.get<std::string>());
        }
    }
    return s;
}

json to_json(const app_settings& s) {
    json j = {{"glassbox_settings", 1}, {"last_model", s.last_model}, {"recent", s.recent}};
    if (s.ui_scale > 0) j["ui_scale"] = std::round(s.ui_scale * 100) / 100; // 1.25, not 1.2500000476837158
    if (!s.explanations.empty()) j["explanations"] = s.explanations;
    if (s.split[0] || s.split[1] || s.split[2] || s.split[3]) {
        j["layout"] = json::array();
        for (float f : s.split) j["layout"].push_back(std::round(f * 1000) / 1000);
    }
    if (s.width > 0) {
        j["window"] = {{"width", s.width}, {"height", s.height}, {"maximized", s.maximized}};
        if (s.has_pos) j["window"]["x"] = s.x, j["window"]["y"] = s.y;
    }
    return j;
}

} // namespace

app_settings read_settings(const std::string& dir, std::string* note) {
    const std::string path = dir + "/" + file_name;
    std::error_code ec;
    if (!fs::exists(path, ec)) return {}; // first run
    const std::string defaults = ": using the defaults";
    if (fs::is_directory(path, ec)) {
        if (note) *note = "cannot read " + path + " (it is a folder)" + defaults;
        return {};
    }
    const auto size = fs::file_size(path, ec);
    if (!ec && size > (1u << 20)) { // the app writes a few hundred bytes; this is some other file
        if (note) *note = path + " is too large (" + std::to_string(size) + " bytes)" + defaults;
        return {};
    }
    std::ifstream f(path, std::ios::binary);
    std::string text;
    if (f) text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (!f.is_open() || f.bad()) {
        if (note) *note = "cannot read " + path + defaults;
        return {};
    }
    try {
        return parse(json::parse(text));
    } catch (const json::parse_error& e) {
        std::string why = e.what(); // "[json.exception.parse_error.101] parse error at line 1, ...": keep the plain part
        if (why.find("] ") != std::string::npos) why = why.substr(why.find("] ") + 2);
        if (note) *note = path + " is not valid JSON (" + why + ")" + defaults;
    } catch (const bad_settings& e) {
        if (note) *note = path + ": " + e.what + defaults;
    } catch (const std::exception& e) { // nothing else is expected; a settings file must never stop the app
        if (note) *note = path + ": " + e.what() + defaults;
    }
    return {};
}

std::string update_settings(const std::string& dir, const std::function<void(app_settings&)>& change, app_settings* now) {
    app_settings s = read_settings(dir, nullptr); // a malformed file was reported when the app started
    change(s);
    if (now) *now = s; // what the app goes on with, written or not
    const std::string path = dir + "/" + file_name, tmp = path + ".tmp" + std::to_string(getpid());
    // a path that is not UTF-8 cannot be a JSON string: it is written with U+FFFD (and, no longer existing
    // under that name, leaves the recent list on the next start) instead of failing the whole file
    const std::string text = to_json(s).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << text;
        f.close();
        if (!f) {
            std::error_code ec;
            fs::remove(tmp, ec);
            return "cannot write " + path;
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        const std::string why = ec.message();
        fs::remove(tmp, ec);
        return "cannot write " + path + " (" + why + ")";
    }
    return "";
}

void add_recent(std::vector<std::string>& list, const std::string& path) {
    list.erase(std::remove(list.begin(), list.end(), path), list.end());
    list.insert(list.begin(), path);
    if (list.size() > max_recent_models) list.resize(max_recent_models);
}

std::vector<std::string> existing_paths(const std::vector<std::string>& list) {
    std::vector<std::string> out;
    for (const std::string& p : list) {
        std::error_code ec;
        if (gb::is_model_name(p) || fs::exists(p, ec)) out.push_back(p);
    }
    return out;
}

} // namespace gbui
