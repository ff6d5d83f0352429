// Browse...'s listing and navigation, without ImGui (file_dialog.cpp draws them).
//
// Sections: what a kind takes | listing
#include "file_browser.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "io/transcoders.h"

namespace fs = std::filesystem;

namespace gbui {

// ---------------------------------------------------------------------------------------------
// what a kind takes
// ---------------------------------------------------------------------------------------------
const char* browse_kind_title(browse_kind k) {
    static const char* t[BROWSE_KIND_COUNT] = {"Open a model", "Open an SAE", "Open a transcoder set", "Choose a text file",
                                               "Open a steering vector", "Open a session", "Open an image",
                                               "Choose a folder"};
    return k >= 0 && k < BROWSE_KIND_COUNT ? t[k] : "Open";
}

// What a box takes, after "is not" and "nothing here that is": "a model", "an SAE", ...
const char* browse_kind_noun(browse_kind k) {
    static const char* t[BROWSE_KIND_COUNT] = {"a model", "an SAE", "a transcoder set", "a text file",
                                               "a steering vector", "a session", "an image", "a folder"};
    return k >= 0 && k < BROWSE_KIND_COUNT ? t[k] : "what the box takes";
}

static std::string lower_extension(const fs::path& p) {
    std::string e = p.extension().string();
    for (char& c : e) c = (char)std::tolower((unsigned char)c);
    return e;
}

static bool exists_in(const fs::path& dir, const char* name) {
    std::error_code ec;
    return fs::is_regular_file(dir / name, ec);
}

// A folder that is itself a choice (it opens, rather than being entered)
static bool folder_is_choice(const fs::path& dir, browse_kind kind) {
    switch (kind) {
    case BROWSE_MODEL: return exists_in(dir, "config.json");
    case BROWSE_SAE: return exists_in(dir, "cfg.json");
    case BROWSE_TRANSCODERS: return gb::is_transcoder_folder(dir.string());
    default: return false;
    }
}

static bool file_is_choice(const fs::path& file, browse_kind kind) {
    const std::string e = lower_extension(file);
    switch (kind) {
    case BROWSE_MODEL: return e == ".gguf" || e == ".bin" || e == ".safetensors";
    case BROWSE_SAE: return e == ".npz" || e == ".safetensors";
    case BROWSE_TEXT: return true;
    case BROWSE_CONTROL_VECTOR: return e == ".gguf" || e == ".npy";
    case BROWSE_SESSION: return e == ".json";
    case BROWSE_IMAGE: return e == ".png" || e == ".jpg" || e == ".jpeg";
    default: return false;
    }
}

bool browse_accepts(const std::string& path, browse_kind kind) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return kind == BROWSE_FOLDER || folder_is_choice(path, kind);
    return fs::is_regular_file(path, ec) && file_is_choice(path, kind);
}

// ---------------------------------------------------------------------------------------------
// listing
// ---------------------------------------------------------------------------------------------
static bool name_less(const browse_entry& a, const browse_entry& b) {
    if (a.dir != b.dir) return a.dir;
    const size_t n = std::min(a.name.size(), b.name.size());
    for (size_t i = 0; i < n; i++) {
        const int x = std::tolower((unsigned char)a.name[i]), y = std::tolower((unsigned char)b.name[i]);
        if (x != y) return x < y;
    }
    return a.name.size() < b.name.size();
}

browse_listing list_folder(const std::string& dir, browse_kind kind, bool show_hidden, bool all_files) {
    browse_listing l;
    std::error_code ec;
    fs::path p = fs::absolute(dir.empty() ? "." : dir, ec).lexically_normal();
    l.dir = p.string();
    if (l.dir.size() > 1 && l.dir.back() == '/') l.dir.pop_back();
    fs::directory_iterator it(p, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
        l.error = "cannot read the folder " + l.dir + ": " + ec.message();
        return l;
    }
    for (fs::directory_iterator end; it != end; it.increment(ec)) {
        if (ec) break;
        const std::string name = it->path().filename().string();
        if (!show_hidden && !name.empty() && name[0] == '.') continue;
        std::error_code e2;
        browse_entry b;
        b.name = name;
        if (it->is_directory(e2)) {
            b.choice = folder_is_choice(it->path(), kind);
            b.dir = !b.choice;
        } else if (it->is_regular_file(e2)) {
            b.choice = file_is_choice(it->path(), kind);
            if (!b.choice && !all_files) continue;
            b.bytes = (long long)it->file_size(e2);
        } else {
            continue; // sockets, broken links
        }
        l.entries.push_back(std::move(b));
    }
    std::sort(l.entries.begin(), l.entries.end(), name_less);
    return l;
}

std::string parent_folder(const std::string& dir) {
    const fs::path p = fs::path(dir).lexically_normal();
    const std::string parent = p.has_relative_path() ? p.parent_path().string() : p.string();
    return parent.empty() ? "/" : parent;
}

std::string browse_start_folder(const std::string& current, browse_kind kind) {
    std::error_code ec;
    if (!current.empty() && fs::exists(current, ec)) {
        const fs::path p = fs::absolute(current, ec).lexically_normal();
        const bool browse_it = fs::is_directory(p, ec) && (kind == BROWSE_FOLDER || !folder_is_choice(p, kind));
        const fs::path dir = browse_it ? p : p.parent_path();
        std::string s = dir.string();
        if (s.size() > 1 && s.back() == '/') s.pop_back();
        return s;
    }
    if (const char* home = std::getenv("HOME"); home && *home && fs::is_directory(home, ec)) return home;
    return fs::current_path(ec).string();
}

} // namespace gbui
