// The model picker (Ctrl+O, the File menu's "Open a model..."): a window with three tabs, "On this machine" (the
// models gb::scan_models finds), "From Hugging Face" (a repo's files, downloaded into the hub cache with progress)
// and "File..." (a typed path or name, the recent models). Its state lives here, not in app_state; the scan, the
// repo's file list and the download run on threads of their own, never on the UI thread.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_sources.h"

namespace gbui {

struct app_state;
struct ui_context;
class worker;

enum picker_tab { PICKER_MACHINE, PICKER_HF, PICKER_FILE, PICKER_TAB_COUNT };
const char* picker_tab_name(picker_tab t); // "machine", "hf", "file" (scripts, print)

// A download's progress, written by its thread (under mu) and read by the UI thread.
struct download_status {
    std::mutex mu;
    std::string file;           // the repo file coming now
    int64_t file_done = 0, file_total = 0; // its bytes so far, and in all (0: unknown)
    int64_t done_before = 0;    // bytes of the needed files finished (or already in the cache) before it
    int64_t total = 0;          // bytes of every needed file (from the repo's list)
    double rate = 0;            // bytes/s of the current transfer
    int64_t max_done = 0;       // the most bytes the bar has shown (tests: progress was seen)
    std::atomic<bool> cancel{false}; // the progress callback returns false: hub_download throws "cancelled"
    std::chrono::steady_clock::time_point last_wake;
    int64_t done() const { return done_before + file_done; } // (under mu)
};

struct model_picker {
    bool open = false;           // shown (a modal window)
    bool want_open = false;      // opened by a key, menu or script: the popup opens at the frame's root
    bool want_close = false;
    picker_tab tab = PICKER_MACHINE;
    bool tab_forced = false;     // the tab was chosen by a key or script: the tab bar selects it once
    bool want_focus = false;     // the shown tab's first box takes the keyboard (on opening, on a tab change)
    std::string error;           // one line: what went wrong last (the app keeps its model)
    std::string note;            // one line: what happened last ("download cancelled")

    // On this machine
    std::string filter;
    std::vector<gb::found_model> found;                  // the last scan, in scan_models' order
    std::future<std::vector<gb::found_model>> scanning; // valid while a scan runs
    bool scanned = false;                                // found holds a finished scan
    int selected = -1;                                   // index into found of the highlighted row (-1: none)
    bool scroll_to_selected = false;

    // From Hugging Face
    std::string repo_input;                              // "ORG/NAME", "hf:ORG/NAME" or "ORG/NAME@REVISION"
    std::future<gb::hub_repo_info> listing;              // valid while the repo's files are asked for
    std::optional<gb::hub_repo_info> repo;               // the repo listed
    std::vector<std::string> ggufs;                      // its GGUF files (a quant is chosen among them)
    int gguf = -1;                                       // the chosen one, -1 when the repo has none
    std::future<std::string> downloading;                // valid while downloading: the path to open
    std::shared_ptr<download_status> download;           // the last download's progress (shared with its thread)

    // File...
    std::string path_input;
    int recent_selected = -1;

    // a model being opened from the picker: it closes when the model has loaded, or says why it did not
    std::string opening;
    const void* model_before = nullptr;
    int opening_frame = 0;

    std::function<void()> wake; // wakes the UI loop from a job's thread (glfwPostEmptyEvent); set before use
    ~model_picker();            // cancels a download and waits for the jobs' threads
};

// Opens the picker on a tab (it scans again when it opens on "On this machine" and no scan runs).
void picker_show(model_picker& p, picker_tab t);
// True while the picker is open (the app's own shortcuts then wait).
bool picker_is_open(const model_picker& p);
// Every frame, at the frame's root after the panels: takes in finished jobs and draws the picker when open.
void draw_model_picker(app_state& s, ui_context& ui);
// The status bar's File menu: "Open a model..." and the last models opened, one click each.
void file_menu(app_state& s, ui_context& ui);

// Jobs (model_picker.cpp), called by the picker's window and by scripts:
void picker_scan(model_picker& p, const std::vector<std::string>& recent);
void picker_list_repo(model_picker& p);    // the repo in repo_input: its files (gb::hub_repo)
void picker_download(model_picker& p);     // the listed repo's needed files (the chosen GGUF), then opens it
void picker_cancel(model_picker& p);       // stops a download (what is fetched so far stays as .incomplete)
void picker_poll(model_picker& p, app_state& s, worker& w); // finished jobs in; the model being opened checked
// Loads path as the Model panel's Open does; the picker closes once it has loaded, or shows the error.
void picker_open_model(model_picker& p, app_state& s, worker& w, const std::string& path);
// The rows "On this machine" shows: indices into p.found that the filter keeps (case-insensitive, any of source,
// name, path, format, family, kind), in order.
std::vector<int> picker_rows(const model_picker& p);
// True while a scan, a listing, a download or an opening is under way.
bool picker_busy(const model_picker& p);

// The script's `print`: the picker's state.
nlohmann::json picker_json(const model_picker& p);
// The picker's script commands (nothing when cmd is not one; else whether it is done):
//   picker machine|hf|file|close | picker-filter TEXT | picker-repo ID | picker-gguf FILE | picker-path TEXT |
//   picker-wait [downloading]
std::optional<bool> picker_command(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg);

} // namespace gbui
