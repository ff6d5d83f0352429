// Browse...: the desktop's dialog on a thread of its own, the in-app browser window, and the path box with its
// button (file_dialog.h).
//
// Sections: the desktop's dialog | the dialog's state | the in-app window | path_box
#include "file_dialog.h"

#include "ui.h" // before GLFW: its GL header comes through epoxy

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <sys/wait.h>

#include "file_browser.h"

namespace fs = std::filesystem;

namespace gbui {

// ---------------------------------------------------------------------------------------------
// the desktop's dialog
// ---------------------------------------------------------------------------------------------
static bool on_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::string all = path ? path : "/usr/bin:/bin";
    for (size_t a = 0; a <= all.size();) {
        size_t b = all.find(':', a);
        if (b == std::string::npos) b = all.size();
        std::error_code ec;
        if (b > a && fs::is_regular_file(fs::path(all.substr(a, b - a)) / program, ec)) return true;
        a = b + 1;
    }
    return false;
}

std::string desktop_dialog() {
    const char* forced = std::getenv("GLASSBOX_FILE_DIALOG");
    if (forced && *forced) return std::string(forced) == "app" ? "" : forced;
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) return "";
    for (const char* p : {"zenity", "kdialog"})
        if (on_path(p)) return p;
    return "";
}

static std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// What the desktop dialog answered: a path, "" (cancelled), or failed (the program did not run: the in-app one)
struct desktop_answer {
    std::string path;
    bool failed = false;
};

static desktop_answer run_desktop_dialog(const std::string& program, browse_kind kind, const std::string& start) {
    const bool folder = kind == BROWSE_FOLDER || kind == BROWSE_TRANSCODERS;
    std::string cmd;
    if (program == "kdialog")
        cmd = "kdialog --title " + shell_quote(browse_kind_title(kind)) +
              (folder ? " --getexistingdirectory " : " --getopenfilename ") + shell_quote(start + "/");
    else
        cmd = program + " --file-selection --title=" + shell_quote(browse_kind_title(kind)) +
              (folder ? " --directory" : "") + " --filename=" + shell_quote(start + "/");
    desktop_answer a;
    FILE* f = popen((cmd + " 2>/dev/null").c_str(), "r");
    if (!f) return {"", true};
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), f)) a.path.append(buf.data(), n);
    const int status = pclose(f);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    while (!a.path.empty() && (a.path.back() == '\n' || a.path.back() == '\r')) a.path.pop_back();
    if (code == 1) a.path.clear();                   // cancelled
    else if (code != 0) a.failed = true, a.path.clear(); // 127: not there after all, or it could not open a window
    // a model or SAE folder is chosen through its config file (these dialogs pick files or folders, not both)
    const fs::path p(a.path);
    if ((kind == BROWSE_MODEL && p.filename() == "config.json") || (kind == BROWSE_SAE && p.filename() == "cfg.json"))
        a.path = p.parent_path().string();
    return a;
}

// ---------------------------------------------------------------------------------------------
// the dialog's state: one at a time, for the box that opened it
// ---------------------------------------------------------------------------------------------
namespace {
struct dialog_state {
    bool open = false;          // the in-app window is shown
    bool want_popup = false;    // it opens at the frame's root next frame
    std::string owner;          // the path box's id
    browse_kind kind = BROWSE_MODEL;
    browse_listing list;
    std::string line;           // the path line (the selection, or what was typed)
    int selected = -1;          // index into list.entries
    bool show_hidden = false, all_files = false;
    bool focus_line = false, scroll_to_selected = false;
    std::string error;          // one line under the list
    std::future<desktop_answer> desktop; // valid while the desktop's dialog is up
    std::string chosen;         // the answer, for owner's path_box next frame
    bool answered = false;
};
dialog_state& dlg() {
    static dialog_state d;
    return d;
}
} // namespace

bool file_dialog_open() { return dlg().open || dlg().desktop.valid(); }

nlohmann::json file_dialog_json() {
    const dialog_state& d = dlg();
    nlohmann::json entries = nlohmann::json::array();
    for (const browse_entry& e : d.list.entries) entries.push_back(e.dir ? e.name + "/" : e.name);
    return {{"open", file_dialog_open()}, {"owner", d.owner}, {"kind", browse_kind_noun(d.kind)}, {"dir", d.list.dir},
            {"entries", entries}, {"line", d.line}, {"error", d.error}};
}

static void show_folder(dialog_state& d, const std::string& dir) {
    browse_listing l = list_folder(dir, d.kind, d.show_hidden, d.all_files);
    if (!l.error.empty()) {
        d.error = l.error; // keep showing the folder we had
        return;
    }
    d.list = std::move(l);
    d.selected = -1;
    d.line = d.kind == BROWSE_FOLDER ? d.list.dir : "";
    d.error.clear();
}

static void start_dialog(const std::string& owner, browse_kind kind, const std::string& current) {
    dialog_state& d = dlg();
    if (file_dialog_open()) return;
    d.owner = owner;
    d.kind = kind;
    d.answered = false;
    const std::string start = browse_start_folder(current, kind);
    const std::string program = desktop_dialog();
    if (!program.empty()) {
        d.desktop = std::async(std::launch::async, [program, kind, start] {
            desktop_answer a = run_desktop_dialog(program, kind, start);
            glfwPostEmptyEvent(); // the UI loop may be asleep waiting for events
            return a;
        });
        return;
    }
    show_folder(d, start);
    d.open = d.want_popup = d.focus_line = true;
}

static void answer(dialog_state& d, const std::string& path) {
    d.chosen = path;
    d.answered = true;
    d.open = false;
    ImGui::CloseCurrentPopup();
}

// Enter on the path line or Open: a folder to enter is entered, a choice is answered, anything else is an error.
static void open_line(dialog_state& d) {
    std::string p = d.line.empty() ? d.list.dir : d.line;
    if (!p.empty() && p[0] == '~') p = browse_start_folder("", d.kind) + p.substr(1);
    std::error_code ec;
    fs::path abs = fs::path(p).is_absolute() ? fs::path(p) : fs::path(d.list.dir) / p;
    abs = abs.lexically_normal();
    if (browse_accepts(abs.string(), d.kind)) return answer(d, abs.string());
    if (fs::is_directory(abs, ec)) return show_folder(d, abs.string());
    d.error = fs::exists(abs, ec) ? abs.string() + " is not " + browse_kind_noun(d.kind) : "there is no " + abs.string();
}

// ---------------------------------------------------------------------------------------------
// the in-app window
// ---------------------------------------------------------------------------------------------
static std::string size_text(long long b) {
    char s[32];
    if (b < 0) return "";
    if (b >= 1000000000) std::snprintf(s, sizeof s, "%.1f GB", b / 1e9);
    else if (b >= 1000000) std::snprintf(s, sizeof s, "%.1f MB", b / 1e6);
    else if (b >= 1000) std::snprintf(s, sizeof s, "%.0f kB", b / 1e3);
    else std::snprintf(s, sizeof s, "%lld B", b);
    return s;
}

static void select_entry(dialog_state& d, int i) {
    d.selected = i;
    d.line = d.list.entries[i].name;
}

// The list: a click selects, a double-click enters a folder or answers a choice; Up/Down move the selection.
static void entry_list(dialog_state& d, ui_context& ui, float h) {
    ImGui::BeginChild("##browse list", ImVec2(0, h), true);
    const float size_x = ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("000.0 MB").x;
    for (int i = 0; i < (int)d.list.entries.size(); i++) {
        const browse_entry& e = d.list.entries[i];
        const std::string label = (e.dir ? e.name + "/" : e.name) + "##browse " + std::to_string(i);
        if (ImGui::Selectable(label.c_str(), d.selected == i, ImGuiSelectableFlags_AllowDoubleClick)) {
            select_entry(d, i);
            if (ImGui::IsMouseDoubleClicked(0)) {
                if (e.dir) show_folder(d, d.list.dir + (d.list.dir == "/" ? "" : "/") + e.name);
                else open_line(d);
                break;
            }
        }
        remember_item(ui, "browse entry " + e.name);
        if (d.scroll_to_selected && d.selected == i) ImGui::SetScrollHereY(0.5f), d.scroll_to_selected = false;
        if (e.bytes >= 0) {
            ImGui::SameLine(size_x);
            ImGui::TextDisabled("%s", size_text(e.bytes).c_str());
        }
    }
    if (d.list.entries.empty()) ImGui::TextDisabled("(nothing here is %s: \"all files\" shows the rest)", browse_kind_noun(d.kind));
    ImGui::EndChild();
}

static void browser_keys(dialog_state& d) {
    if (ImGui::IsAnyItemActive() || d.list.entries.empty()) return;
    const int n = (int)d.list.entries.size();
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow))) select_entry(d, std::min(n - 1, d.selected + 1)), d.scroll_to_selected = true;
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow))) select_entry(d, std::max(0, d.selected - 1)), d.scroll_to_selected = true;
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Backspace))) show_folder(d, parent_folder(d.list.dir));
    if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_KeyPadEnter))) open_line(d);
}

static void browser_window(dialog_state& d, ui_context& ui) {
    const ImVec2 disp = ImGui::GetIO().DisplaySize;
    ImGui::SetNextWindowSize(ImVec2(std::min(disp.x * 0.9f, 60 * ImGui::GetFontSize()), disp.y * 0.8f), ImGuiCond_Appearing);
    ImGui::SetNextWindowPos(ImVec2(disp.x * 0.5f, disp.y * 0.5f), ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    const std::string title = std::string(browse_kind_title(d.kind)) + "###file browser";
    if (d.want_popup) ImGui::OpenPopup(title.c_str()), d.want_popup = false;
    bool keep = true;
    if (!ImGui::BeginPopupModal(title.c_str(), &keep)) {
        if (d.open && !keep) d.open = false;
        return;
    }
    if (ImGui::Button("Up##browse")) show_folder(d, parent_folder(d.list.dir));
    remember_item(ui, "browse up");
    ImGui::SameLine();
    if (ImGui::Button("Home##browse")) show_folder(d, browse_start_folder("", d.kind));
    remember_item(ui, "browse home");
    ImGui::SameLine();
    if (ImGui::Checkbox("all files##browse", &d.all_files)) show_folder(d, d.list.dir);
    ImGui::SameLine();
    if (ImGui::Checkbox("hidden##browse", &d.show_hidden)) show_folder(d, d.list.dir);
    ImGui::TextUnformatted(d.list.dir.c_str());
    ImGui::SetNextItemWidth(-1);
    if (d.focus_line) ImGui::SetKeyboardFocusHere(), d.focus_line = false;
    if (ImGui::InputTextWithHint("##browse path", "a name in this folder, or a path", &d.line, ImGuiInputTextFlags_EnterReturnsTrue))
        open_line(d);
    remember_item(ui, "browse path");
    const float foot = ImGui::GetFrameHeightWithSpacing() * 2 + ImGui::GetStyle().ItemSpacing.y;
    entry_list(d, ui, std::max(4 * ImGui::GetFontSize(), ImGui::GetContentRegionAvail().y - foot));
    browser_keys(d);
    if (!d.error.empty()) ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", d.error.c_str());
    else ImGui::TextDisabled("Enter or a double-click opens; Backspace goes up; Esc cancels");
    if (d.open && ImGui::Button(d.kind == BROWSE_FOLDER ? "Choose this folder##browse" : "Open##browse")) open_line(d);
    remember_item(ui, "browse open");
    ImGui::SameLine();
    if (d.open && (ImGui::Button("Cancel##browse") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape)))) {
        d.open = false;
        ImGui::CloseCurrentPopup();
    }
    remember_item(ui, "browse cancel");
    ImGui::EndPopup();
}

void file_dialog_frame(ui_context& ui) {
    dialog_state& d = dlg();
    if (d.desktop.valid() && d.desktop.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        const desktop_answer a = d.desktop.get();
        if (a.failed) { // the program would not run here: the in-app browser instead
            show_folder(d, browse_start_folder("", d.kind));
            d.open = d.want_popup = d.focus_line = true;
        } else if (!a.path.empty()) {
            d.chosen = a.path;
            d.answered = true;
        }
    }
    if (d.open) browser_window(d, ui);
}

// ---------------------------------------------------------------------------------------------
// path_box
// ---------------------------------------------------------------------------------------------
bool take_dialog_answer(const char* id, std::string& path) {
    dialog_state& d = dlg();
    if (!d.answered || d.owner != id) return false;
    path = d.chosen;
    d.answered = false;
    return true;
}

bool path_box(ui_context& ui, const char* id, std::string& path, browse_kind kind, const char* hint, float width,
              path_box_use* use) {
    dialog_state& d = dlg();
    bool chosen = false;
    if (d.answered && d.owner == id) {
        path = d.chosen;
        d.answered = false;
        chosen = true;
    }
    const float button_w = ImGui::CalcTextSize("Browse...").x + 2 * ImGui::GetStyle().FramePadding.x;
    ImGui::SetNextItemWidth(std::max(4 * ImGui::GetFontSize(), width - button_w - ImGui::GetStyle().ItemSpacing.x));
    const std::string box = std::string("##") + id;
    if (ImGui::InputTextWithHint(box.c_str(), hint, &path, ImGuiInputTextFlags_EnterReturnsTrue)) chosen = true;
    if (use) use->active = ImGui::IsItemActive(), use->left_after_edit = ImGui::IsItemDeactivatedAfterEdit();
    remember_item(ui, id);
    ImGui::SameLine();
    const std::string button = std::string("Browse...##") + id;
    if (ImGui::Button(button.c_str())) start_dialog(id, kind, path);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", browse_kind_title(kind));
    remember_item(ui, std::string("browse ") + id);
    return chosen;
}

} // namespace gbui
