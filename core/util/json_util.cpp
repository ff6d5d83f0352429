// Bounded JSON reading shared by every loader (see json_util.h).
#include "util/json_util.h"

#include <fstream>
#include <sstream>

namespace gb {

// Offset of the first bracket nested deeper than max_depth, or -1. Brackets inside strings do not count;
// text that is not JSON at all is left for the parser to refuse.
static long json_too_deep_at(const char* p, size_t n, int max_depth) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_string) {
            if (c == '\\') i++; // the escaped character cannot end the string
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return (long)i;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return -1;
}

std::string json_error_text(const std::exception& e) {
    std::string s = e.what();
    if (s.rfind("[json.exception.", 0) == 0) {
        size_t close = s.find("] ");
        if (close != std::string::npos) s.erase(0, close + 2);
    }
    return s;
}

nlohmann::json parse_json_text(const char* text, size_t n, const std::string& what) {
    long deep = json_too_deep_at(text, n, json_max_depth);
    if (deep >= 0)
        throw error(what + ": JSON nested deeper than " + std::to_string(json_max_depth) + " levels at byte " +
                    std::to_string(deep));
    try {
        return nlohmann::json::parse(text, text + n);
    } catch (const nlohmann::json::exception& e) {
        throw error(what + ": not valid JSON (" + json_error_text(e) + ")");
    }
}

nlohmann::json read_json_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("cannot open " + path);
    std::ostringstream s;
    s << f.rdbuf();
    if (f.bad()) throw error("cannot read " + path);
    const std::string text = s.str();
    return parse_json_text(text.data(), text.size(), path);
}

// A value as it appears in an error: short scalars as written, anything else by its type
static std::string json_brief(const nlohmann::json& v) {
    if (v.is_structured()) return "a JSON " + std::string(v.type_name());
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

bool json_bool(const nlohmann::json& obj, const char* key, bool def, const std::string& where) {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return def;
    const nlohmann::json& v = obj[key];
    if (!v.is_boolean()) throw error(where + ": " + key + " must be true or false, found " + json_brief(v));
    return v.get<bool>();
}

std::string json_string(const nlohmann::json& obj, const char* key, const std::string& def, const std::string& where) {
    if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return def;
    const nlohmann::json& v = obj[key];
    if (!v.is_string()) throw error(where + ": " + key + " must be a string, found " + json_brief(v));
    return v.get<std::string>();
}

} // namespace gb
