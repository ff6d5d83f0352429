// The model picker's jobs and state changes (its window is panels/panel_model_picker.cpp): the scan, the repo's
// file list and the download on threads of their own; opening what was picked; its script commands and print.
#include "model_picker.h"

#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "io/hub_download.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

namespace fs = std::filesystem;

const char* picker_tab_name(picker_tab t) {
    static const char* names[PICKER_TAB_COUNT] = {"machine", "hf", "file"};
    return t >= 0 && t < PICKER_TAB_COUNT ? names[t] : "";
}

model_picker::~model_picker() {
    if (download) download->cancel = true; // the futures' destructors then wait for their threads
}

template <class T> static bool ready(const std::future<T>& f) {
    return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

bool picker_is_open(const model_picker& p) { return p.open || p.want_open; }

bool picker_busy(const model_picker& p) {
    return p.scanning.valid() || p.listing.valid() || p.downloading.valid() || !p.opening.empty();
}

void picker_show(model_picker& p, picker_tab t) {
    if (!p.open) p.error.clear(), p.note.clear();
    p.want_open = true;
    p.tab = t;
    p.tab_forced = p.want_focus = true;
}

void picker_scan(model_picker& p, const std::vector<std::string>& recent) {
    if (p.scanning.valid()) return; // one at a time; its result comes soon
    std::function<void()> wake = p.wake;
    p.scanning = std::async(std::launch::async, [recent, wake] {
        gb::scan_options opt;
        opt.recent = recent;
        std::vector<gb::found_model> found;
        try {
            found = gb::scan_models(opt);
        } catch (...) {
            if (wake) wake();
            throw;
        }
        if (wake) wake();
        return found;
    });
}

// "ORG/NAME", "hf:ORG/NAME", "ORG/NAME@REV" or "hf:ORG/NAME@REV:QUANT", parsed as a model name.
static gb::hf_name parse_repo_input(const std::string& input) {
    std::string t = input;
    while (!t.empty() && std::isspace((unsigned char)t.back())) t.pop_back();
    while (!t.empty() && std::isspace((unsigned char)t.front())) t.erase(t.begin());
    if (t.empty()) throw gb::error("type a repo id, e.g. openai-community/gpt2");
    return gb::parse_hf_name(t.rfind("hf:", 0) == 0 ? t : "hf:" + t);
}

void picker_list_repo(model_picker& p) {
    if (p.listing.valid() || p.downloading.valid()) return;
    p.error.clear(), p.note.clear();
    p.repo.reset();
    p.ggufs.clear();
    p.gguf = -1;
    gb::hf_name name;
    try {
        name = parse_repo_input(p.repo_input);
    } catch (const gb::error& e) {
        p.error = e.what();
        return;
    }
    std::function<void()> wake = p.wake;
    p.listing = std::async(std::launch::async, [name, wake] {
        struct waker { // wakes the UI loop whether the listing returns or throws
            std::function<void()> f;
            ~waker() { if (f) f(); }
        } w{wake};
        return gb::hub_repo(name.repo, name.revision);
    });
}

static bool ends_with_ci(const std::string& s, const std::string& end) {
    if (s.size() < end.size()) return false;
    for (size_t i = 0; i < end.size(); i++)
        if (std::tolower((unsigned char)s[s.size() - end.size() + i]) != std::tolower((unsigned char)end[i])) return false;
    return true;
}

static bool contains_ci(const std::string& s, const std::string& part) {
    auto it = std::search(s.begin(), s.end(), part.begin(), part.end(),
                          [](char a, char b) { return std::tolower((unsigned char)a) == std::tolower((unsigned char)b); });
    return it != s.end();
}

// The listed repo's GGUF files, and the one to offer first: the name's own quant or file, else Q8_0, else the first
// (as hub_needed_files picks).
static void adopt_repo(model_picker& p, gb::hub_repo_info info) {
    p.ggufs.clear();
    for (const gb::hub_file& f : info.files)
        if (ends_with_ci(f.path, ".gguf")) p.ggufs.push_back(f.path);
    std::string want;
    try {
        want = parse_repo_input(p.repo_input).file_or_quant;
    } catch (const gb::error&) {
    }
    p.gguf = p.ggufs.empty() ? -1 : 0;
    for (const std::string& key : {want, std::string("Q8_0")}) {
        if (key.empty()) continue;
        auto it = std::find_if(p.ggufs.begin(), p.ggufs.end(), [&](const std::string& g) { return g == key || contains_ci(g, key); });
        if (it != p.ggufs.end()) {
            p.gguf = (int)(it - p.ggufs.begin());
            break;
        }
    }
    p.repo = std::move(info);
}

// Bytes of the needed files, from the repo's list; a safetensors index brings its shards ("model-*.safetensors").
static int64_t needed_bytes(const gb::hub_repo_info& r, const std::vector<std::string>& files) {
    int64_t total = 0;
    const bool sharded = std::find(files.begin(), files.end(), "model.safetensors.index.json") != files.end();
    for (const gb::hub_file& f : r.files) {
        const bool shard = sharded && f.path.rfind("model-", 0) == 0 && ends_with_ci(f.path, ".safetensors");
        if (shard || std::find(files.begin(), files.end(), f.path) != files.end()) total += f.size;
    }
    return total;
}

void picker_download(model_picker& p) {
    if (!p.repo || p.downloading.valid() || p.listing.valid()) return;
    p.error.clear(), p.note.clear();
    const gb::hub_repo_info info = *p.repo;
    const std::string gguf = p.gguf >= 0 && p.gguf < (int)p.ggufs.size() ? p.ggufs[p.gguf] : "";
    std::vector<std::string> files;
    std::string snap;
    try {
        files = gb::hub_needed_files(info, gguf);
        snap = gb::hf_repo_folder(info.repo) + "/snapshots/" + info.commit;
    } catch (const gb::error& e) {
        p.error = e.what();
        return;
    }
    auto st = std::make_shared<download_status>();
    st->total = needed_bytes(info, files);
    // files the snapshot already holds are not fetched again: they count as done
    for (const gb::hub_file& f : info.files) {
        std::error_code ec;
        if (std::find(files.begin(), files.end(), f.path) != files.end() && fs::exists(snap + "/" + f.path, ec))
            st->done_before += f.size;
    }
    p.download = st;
    std::function<void()> wake = p.wake;
    p.downloading = std::async(std::launch::async, [info, files, gguf, st, wake] {
        struct waker {
            std::function<void()> f;
            ~waker() { if (f) f(); }
        } w{wake};
        gb::download_fn progress = [st, wake](const gb::download_progress& d) {
            std::lock_guard<std::mutex> l(st->mu);
            if (d.file != st->file) { // the previous file is complete
                if (!st->file.empty()) st->done_before += st->file_total > 0 ? st->file_total : st->file_done;
                st->file = d.file;
            }
            st->file_done = d.done, st->file_total = d.total, st->rate = d.rate;
            const auto now = std::chrono::steady_clock::now();
            if (wake && now - st->last_wake > std::chrono::milliseconds(50)) st->last_wake = now, wake(); // the bar moves
            return !st->cancel.load();
        };
        const std::string snapshot = gb::hub_download(info.repo, info.revision, files, progress);
        return gguf.empty() ? snapshot : snapshot + "/" + gguf;
    });
}

void picker_cancel(model_picker& p) {
    if (p.downloading.valid() && p.download) p.download->cancel = true;
}

void picker_open_model(model_picker& p, app_state& s, worker& w, const std::string& path) {
    p.error.clear();
    s.error.clear(); // (an older error must not read as this load's)
    p.opening = path;
    p.model_before = s.model.get();
    p.opening_frame = ImGui::GetFrameCount();
    open_model(s, w, path);
}

void picker_poll(model_picker& p, app_state& s, worker& w) {
    if (ready(p.scanning)) {
        try {
            p.found = p.scanning.get();
            p.scanned = true;
            const std::vector<int> rows = picker_rows(p);
            p.selected = rows.empty() ? -1 : rows[0];
        } catch (const std::exception& e) {
            p.error = std::string("cannot look for models: ") + e.what();
        }
    }
    if (ready(p.listing)) {
        try {
            adopt_repo(p, p.listing.get());
        } catch (const std::exception& e) {
            p.error = e.what();
        }
    }
    if (ready(p.downloading)) {
        try {
            const std::string path = p.downloading.get();
            p.note = "downloaded to " + path;
            picker_open_model(p, s, w, path);
        } catch (const std::exception& e) {
            if (p.download && p.download->cancel) p.note = "download cancelled";
            else p.error = e.what();
        }
    }
    // the model being opened: the worker's poll (each frame, before the panels) has seen the request once the frame
    // count moved on; then it has loaded (another model is shown) or failed (the previous one stays)
    if (!p.opening.empty() && ImGui::GetFrameCount() > p.opening_frame) {
        if (s.model.get() != p.model_before) {
            p.opening.clear();
            p.want_close = true;
        } else if (!s.loading) {
            p.error = s.error.empty() ? "cannot open " + p.opening : s.error;
            p.opening.clear();
        }
    }
}

std::vector<int> picker_rows(const model_picker& p) {
    std::vector<int> rows;
    for (int i = 0; i < (int)p.found.size(); i++) {
        const gb::found_model& m = p.found[i];
        bool keep = p.filter.empty();
        for (const std::string* f : {&m.source, &m.name, &m.path, &m.format, &m.family, &m.kind})
            keep = keep || contains_ci(*f, p.filter);
        if (keep) rows.push_back(i);
    }
    return rows;
}

nlohmann::json picker_json(const model_picker& p) {
    using nlohmann::json;
    json found = json::array(), rows = json::array();
    for (const gb::found_model& m : p.found)
        found.push_back({{"source", m.source}, {"name", m.name}, {"path", m.path}, {"format", m.format},
                         {"family", m.family}, {"kind", m.kind}, {"n_params", m.n_params}, {"bytes", m.bytes},
                         {"openable", m.openable}, {"reason", m.reason}});
    for (int i : picker_rows(p)) rows.push_back(p.found[i].name);
    json j = {{"open", p.open}, {"tab", picker_tab_name(p.tab)}, {"filter", p.filter}, {"scanned", p.scanned},
              {"found", found}, {"rows", rows}, {"error", p.error}, {"note", p.note}, {"opening", p.opening},
              {"busy", picker_busy(p)}};
    j["selected"] = p.selected >= 0 && p.selected < (int)p.found.size() ? json(p.found[p.selected].name) : json();
    if (p.repo) {
        json files = json::array();
        for (const gb::hub_file& f : p.repo->files) files.push_back({{"path", f.path}, {"size", f.size}});
        j["repo"] = {{"repo", p.repo->repo}, {"revision", p.repo->revision}, {"commit", p.repo->commit},
                     {"files", files}, {"ggufs", p.ggufs},
                     {"gguf", p.gguf >= 0 ? json(p.ggufs[p.gguf]) : json()}};
    }
    if (p.download) {
        std::lock_guard<std::mutex> l(p.download->mu);
        j["download"] = {{"running", p.downloading.valid()}, {"file", p.download->file}, {"done", p.download->done()},
                         {"total", p.download->total}, {"max_shown", p.download->max_done},
                         {"cancelled", p.download->cancel.load()}};
    }
    return j;
}

std::optional<bool> picker_command(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg) {
    model_picker& p = *ui.picker;
    if (cmd == "picker") { // machine | hf | file: as Ctrl+O (or the File menu) and a click on the tab; close: Esc
        if (arg == "close") {
            p.want_close = true;
            return true;
        }
        for (int t = 0; t < PICKER_TAB_COUNT; t++)
            if (arg == picker_tab_name((picker_tab)t)) {
                picker_show(p, (picker_tab)t);
                return true;
            }
        throw gb::error("script: picker machine|hf|file|close, not '" + arg + "'");
    }
    if (cmd == "picker-filter") { // as typing TEXT into the filter box (in place of what it held)
        p.filter = arg;
        p.want_focus = true; // (the box reads it again)
        const std::vector<int> rows = picker_rows(p);
        p.selected = rows.empty() ? -1 : rows[0];
        return true;
    }
    if (cmd == "picker-repo") { // as typing ID into the repo box and pressing Enter: its files are listed
        p.repo_input = arg;
        p.want_focus = true;
        picker_list_repo(p);
        return true;
    }
    if (cmd == "picker-gguf") { // as choosing FILE in the quant list
        auto it = std::find(p.ggufs.begin(), p.ggufs.end(), arg);
        if (it == p.ggufs.end()) throw gb::error("script: picker-gguf: the listed repo has no GGUF file " + arg);
        p.gguf = (int)(it - p.ggufs.begin());
        return true;
    }
    if (cmd == "picker-path") { // as typing TEXT into the File tab's box (in place of what it held)
        p.path_input = arg;
        p.want_focus = true;
        return true;
    }
    if (cmd == "picker-wait") { // until the scan, listing, download and opening are over; "downloading": until a
                                // download has shown some bytes (or is over)
        if (arg == "downloading") {
            if (!p.downloading.valid() || !p.download) return true;
            std::lock_guard<std::mutex> l(p.download->mu);
            return p.download->max_done > 0;
        }
        if (!arg.empty()) throw gb::error("script: picker-wait [downloading], not '" + arg + "'");
        (void)s;
        return !picker_busy(p) && !p.want_open;
    }
    return std::nullopt;
}

} // namespace gbui
