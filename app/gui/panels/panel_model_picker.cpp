// The model picker's window (Ctrl+O): "On this machine" (the models found, grouped by source, with a filter),
// "From Hugging Face" (a repo's files, a GGUF quant, the download's progress and Cancel) and "File..." (a typed
// path or name, the recent models); and the status bar's File menu. Keyboard: the tab's box has the focus, Up and
// Down move the selection, Enter opens, Ctrl+Tab changes tab, Esc closes. Its jobs are in model_picker.cpp.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_internal.h> // ClearActiveID: a box given new text takes the keyboard afresh
#include <imgui_stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "file_dialog.h"
#include "model_picker.h"
#include "number_format.h"
#include "settings.h"
#include "text_scale.h"
#include "ui.h"

namespace gbui {

namespace {

const ImVec4 error_colour(1, 0.45f, 0.45f, 1), ok_colour(0.55f, 0.85f, 0.55f, 1);

bool key_pressed(int glfw_key) { return ImGui::IsKeyPressed(glfw_key, true); }
bool enter_pressed() { return ImGui::IsKeyPressed(GLFW_KEY_ENTER, false) || ImGui::IsKeyPressed(GLFW_KEY_KP_ENTER, false); }

// 124 M (parameters), 548 MB (bytes); "" when unknown
std::string params_text(int64_t n) { return n < 0 ? "" : format_number((double)n); }
std::string bytes_text(int64_t n) {
    const std::string v = format_number((double)n);
    return v + (!v.empty() && std::isdigit((unsigned char)v.back()) ? " B" : "B"); // "4096 B", "12.1 MB"
}

const char* source_title(const std::string& source) {
    if (source == "hf") return "Hugging Face cache";
    if (source == "ollama") return "Ollama";
    if (source == "lmstudio") return "LM Studio";
    if (source == "llamacpp") return "llama.cpp cache";
    if (source == "recent") return "Opened recently";
    return source.c_str();
}

// "/home/me/models/gpt2" -> "gpt2"; a name ("hf:ORG/NAME") stays whole
std::string short_name(const std::string& path) {
    if (gb::is_model_name(path)) return path;
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t k = p.find_last_of('/');
    return k == std::string::npos ? p : p.substr(k + 1);
}

// The folder holding path, the home folder as "~" ("" for a name).
std::string folder_of(const std::string& path) {
    if (gb::is_model_name(path)) return "";
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t k = p.find_last_of('/');
    std::string dir = k == std::string::npos ? "." : k == 0 ? "/" : p.substr(0, k);
    const char* home = std::getenv("HOME");
    if (home && *home && dir.rfind(home, 0) == 0 && (dir.size() == std::strlen(home) || dir[std::strlen(home)] == '/'))
        dir = "~" + dir.substr(std::strlen(home));
    return dir;
}

// The tab t's first box takes the keyboard when asked (not while the bar still shows the tab before it). The box
// being edited lets go first: ImGui keeps an active box's own copy of its text, and this one may have been given
// new text (a script's picker-filter); refocused, it reads the text again.
void take_focus(model_picker& p, picker_tab t) {
    if (!p.want_focus || p.tab != t) return;
    ImGui::ClearActiveID();
    ImGui::SetKeyboardFocusHere();
    p.want_focus = false;
}

// The row i of p.found: opens it, or says in one line why it cannot be opened.
void open_found(model_picker& p, app_state& s, ui_context& ui, int i) {
    if (i < 0 || i >= (int)p.found.size()) return;
    const gb::found_model& m = p.found[i];
    if (!m.openable) {
        p.error = m.name + ": " + (m.reason.empty() ? "Glassbox cannot open it" : m.reason);
        return;
    }
    picker_open_model(p, s, *ui.work, m.path);
}

// Up / Down: the selection moves to the previous / next of rows (which hold values of *sel).
void move_selection(const std::vector<int>& rows, int* sel, bool* scroll) {
    if (rows.empty()) return;
    const int at = (int)(std::find(rows.begin(), rows.end(), *sel) - rows.begin());
    int to = at;
    if (key_pressed(GLFW_KEY_DOWN)) to = at >= (int)rows.size() ? 0 : std::min(at + 1, (int)rows.size() - 1);
    if (key_pressed(GLFW_KEY_UP)) to = at >= (int)rows.size() ? 0 : std::max(at - 1, 0);
    if (to != at) *sel = rows[to], *scroll = true;
}

// One found model's row: a selectable over every column (double-click opens), the path on hover.
void found_row(model_picker& p, app_state& s, ui_context& ui, int i) {
    const gb::found_model& m = p.found[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::PushID(i);
    const bool sel = p.selected == i;
    if (ImGui::Selectable("##row", sel, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick)) {
        p.selected = i;
        if (ImGui::IsMouseDoubleClicked(0)) open_found(p, s, ui, i);
    }
    remember_item(ui, "model " + m.source + " " + m.name);
    if (sel && p.scroll_to_selected) ImGui::SetScrollHereY(0.5f), p.scroll_to_selected = false;
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s%s%s", m.path.c_str(), m.openable ? "" : "\n", m.openable ? "" : m.reason.c_str());
    ImGui::SameLine();
    ImGui::TextUnformatted(m.name.c_str());
    for (const std::string& cell : {m.format, m.family, m.kind, params_text(m.n_params), bytes_text(m.bytes)}) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(cell.c_str());
    }
    ImGui::TableNextColumn();
    if (m.openable) ImGui::TextColored(ok_colour, "yes");
    else ImGui::TextColored(error_colour, "%s", m.reason.c_str());
    ImGui::PopID();
}

// "On this machine": the filter, then the models found grouped by source.
void machine_tab(model_picker& p, app_state& s, ui_context& ui, float footer_h) {
    take_focus(p, PICKER_MACHINE);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 24);
    if (ImGui::InputTextWithHint("##filter", "filter: name, family, format, source", &p.filter)) {
        const std::vector<int> rows = picker_rows(p);
        p.selected = rows.empty() ? -1 : rows[0], p.scroll_to_selected = true;
    }
    remember_item(ui, "picker filter");
    ImGui::SameLine();
    if (ImGui::Button("Look again")) picker_scan(p, s.recent_models);
    remember_item(ui, "picker rescan");
    const std::vector<int> rows = picker_rows(p);
    ImGui::SameLine();
    if (p.scanning.valid()) ImGui::TextDisabled("looking...");
    else ImGui::TextDisabled("%zu of %zu models", rows.size(), p.found.size());
    move_selection(rows, &p.selected, &p.scroll_to_selected);
    if (enter_pressed() && p.opening.empty()) open_found(p, s, ui, p.selected);
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("##found", 7, flags, ImVec2(-1, -footer_h))) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    // the columns as wide as their widest cell; "can open" takes the rest (a long reason is whole on hover)
    for (const char* c : {"name", "format", "family", "kind", "params", "size"}) ImGui::TableSetupColumn(c);
    ImGui::TableSetupColumn("can open", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    std::string group;
    for (int i : rows) {
        if (p.found[i].source != group) { // a source's heading row
            group = p.found[i].source;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextColored(ImVec4(0.95f, 0.8f, 0.45f, 1), "%s", source_title(group));
        }
        found_row(p, s, ui, i);
    }
    if (rows.empty() && p.scanned)
        ImGui::TableNextRow(), ImGui::TableNextColumn(),
            ImGui::TextDisabled(p.found.empty() ? "no models found (docs/models.md: Opening a model lists where it looks)"
                                                : "none matches the filter");
    ImGui::EndTable();
}

// The download's bar: bytes, rate and the time left; Cancel.
void download_bar(model_picker& p, ui_context& ui) {
    download_status& d = *p.download;
    std::lock_guard<std::mutex> l(d.mu);
    const int64_t done = d.done(), total = std::max(d.total, done);
    d.max_done = std::max(d.max_done, done);
    std::string label = bytes_text(done) + " of " + bytes_text(total);
    if (d.rate > 0) {
        label += ", " + bytes_text((int64_t)d.rate) + "/s";
        const double left = (double)(total - done) / d.rate;
        char eta[48];
        if (left < 1) std::snprintf(eta, sizeof eta, ", under 1 s left");
        else std::snprintf(eta, sizeof eta, left < 60 ? ", %.0f s left" : ", %.0f min left", left < 60 ? left : left / 60);
        label += eta;
    }
    ImGui::ProgressBar(total > 0 ? (float)((double)done / total) : 0.0f, ImVec2(-ImGui::GetFontSize() * 7, 0), label.c_str());
    remember_item(ui, "picker progress");
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) p.download->cancel = true;
    remember_item(ui, "picker cancel");
    ImGui::TextDisabled("%s", d.file.c_str());
}

// The listed repo's files (the ones the model needs marked) and, for a GGUF repo, the quant to fetch.
void repo_files(model_picker& p, float footer_h) {
    const gb::hub_repo_info& r = *p.repo;
    std::vector<std::string> needed;
    std::string why_not;
    try {
        needed = gb::hub_needed_files(r, p.gguf >= 0 ? p.ggufs[p.gguf] : "");
    } catch (const std::exception& e) {
        why_not = e.what();
    }
    int64_t all = 0;
    for (const gb::hub_file& f : r.files) all += f.size;
    ImGui::Text("%s at %s (%.7s): %zu files, %s", r.repo.c_str(), r.revision.c_str(), r.commit.c_str(), r.files.size(),
                bytes_text(all).c_str());
    if (!why_not.empty()) ImGui::TextColored(error_colour, "%s", why_not.c_str());
    if (!p.ggufs.empty()) {
        ImGui::TextUnformatted("Quant (Up/Down):");
        move_selection([&] { std::vector<int> v(p.ggufs.size()); for (size_t i = 0; i < v.size(); i++) v[i] = (int)i; return v; }(),
                       &p.gguf, &p.scroll_to_selected);
    }
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("##files", 3, flags, ImVec2(-1, -footer_h))) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("file", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("size");
    ImGui::TableSetupColumn("needed");
    ImGui::TableHeadersRow();
    for (const gb::hub_file& f : r.files) {
        const bool is_gguf = std::find(p.ggufs.begin(), p.ggufs.end(), f.path) != p.ggufs.end();
        const bool need = std::find(needed.begin(), needed.end(), f.path) != needed.end();
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (is_gguf) { // a quant to choose
            const int g = (int)(std::find(p.ggufs.begin(), p.ggufs.end(), f.path) - p.ggufs.begin());
            if (ImGui::Selectable(f.path.c_str(), p.gguf == g, ImGuiSelectableFlags_SpanAllColumns)) p.gguf = g;
            if (p.gguf == g && p.scroll_to_selected) ImGui::SetScrollHereY(0.5f), p.scroll_to_selected = false;
        } else if (need) {
            ImGui::TextUnformatted(f.path.c_str());
        } else {
            ImGui::TextDisabled("%s", f.path.c_str());
        }
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(bytes_text(f.size).c_str());
        ImGui::TableNextColumn();
        if (need) ImGui::TextColored(ok_colour, "yes");
    }
    ImGui::EndTable();
}

// "From Hugging Face": the repo box, its files, Download with its progress.
void hf_tab(model_picker& p, ui_context& ui, float footer_h) {
    take_focus(p, PICKER_HF);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 24);
    ImGui::InputTextWithHint("##repo", "ORG/NAME, e.g. openai-community/gpt2", &p.repo_input);
    remember_item(ui, "picker repo");
    const bool listed = p.repo && (p.repo_input == p.repo->repo || p.repo_input == "hf:" + p.repo->repo ||
                                   p.repo_input.find(p.repo->repo) != std::string::npos);
    ImGui::SameLine();
    if (ImGui::Button("List files")) picker_list_repo(p);
    remember_item(ui, "picker list");
    if (p.repo && !p.downloading.valid()) {
        ImGui::SameLine();
        if (ImGui::Button("Download and open")) picker_download(p);
        remember_item(ui, "picker download");
    }
    // Enter: lists a newly typed repo, downloads the one listed
    if (enter_pressed() && p.opening.empty()) listed ? picker_download(p) : picker_list_repo(p);
    ImGui::TextDisabled("from %s into %s", gb::hf_endpoint().c_str(), gb::hf_hub_cache().c_str());
    if (p.listing.valid()) ImGui::TextDisabled("asking for the repo's files...");
    if (p.downloading.valid() && p.download) download_bar(p, ui);
    if (p.repo) repo_files(p, footer_h);
}

// "File...": a typed path or name, and the recent models (Up/Down, Enter or a click opens).
void file_tab(model_picker& p, app_state& s, ui_context& ui) {
    take_focus(p, PICKER_FILE);
    const bool entered = path_box(ui, "picker path", p.path_input, BROWSE_MODEL,
                                  "model folder, .gguf, .bin, hf:ORG/NAME or ollama:NAME",
                                  ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 4);
    ImGui::SameLine();
    const bool go = ImGui::Button("Open") || entered || (enter_pressed() && p.opening.empty());
    remember_item(ui, "picker open path");
    ImGui::TextDisabled("or drop a model's folder or file on the window");
    ImGui::Separator();
    ImGui::TextUnformatted("Opened recently");
    std::vector<int> rows(s.recent_models.size());
    for (size_t i = 0; i < rows.size(); i++) rows[i] = (int)i;
    bool scroll = false;
    move_selection(rows, &p.recent_selected, &scroll);
    if (s.recent_models.empty()) ImGui::TextDisabled("no models opened yet");
    std::string chosen;
    for (size_t i = 0; i < s.recent_models.size(); i++) {
        const std::string& r = s.recent_models[i];
        ImGui::PushID((int)i);
        if (ImGui::Selectable("##recent", p.recent_selected == (int)i)) chosen = r;
        remember_item(ui, "picker recent " + r);
        ImGui::SameLine();
        ImGui::TextUnformatted(short_name(r).c_str());
        ImGui::SameLine();
        ImGui::TextDisabled("%s", folder_of(r).c_str());
        ImGui::PopID();
    }
    if (go) { // the box's text, else the recent model highlighted
        if (!p.path_input.empty()) chosen = p.path_input;
        else if (p.recent_selected >= 0 && p.recent_selected < (int)s.recent_models.size()) chosen = s.recent_models[p.recent_selected];
    }
    if (!chosen.empty()) picker_open_model(p, s, *ui.work, chosen);
}

} // namespace

void draw_model_picker(app_state& s, ui_context& ui) {
    if (!ui.picker) return;
    model_picker& p = *ui.picker;
    picker_poll(p, s, *ui.work);
    // a file chosen with the File tab's Browse... (the in-app browser, a modal at the frame's root, closed this one)
    if (take_dialog_answer("picker path", p.path_input) && !p.path_input.empty()) picker_open_model(p, s, *ui.work, p.path_input);
    const char* id = "Open a model###model_picker";
    if (p.want_open) { // a scan each time it opens: models come and go
        ImGui::OpenPopup(id);
        p.want_open = false, p.open = true;
        picker_scan(p, s.recent_models);
    }
    if (!p.open) return;
    const ImVec2 disp = ImGui::GetIO().DisplaySize;
    ImGui::SetNextWindowSize(ImVec2(std::min(disp.x - px(40), std::max(disp.x * 0.7f, px(900))), disp.y * 0.75f));
    ImGui::SetNextWindowPos(ImVec2(disp.x / 2, disp.y / 2), ImGuiCond_Always, ImVec2(0.5f, 0.5f));
    // opaque: the panels must not show through the lists
    ImGui::PushStyleColor(ImGuiCol_PopupBg, ImVec4(0.10f, 0.11f, 0.14f, 1.0f));
    const bool shown = ImGui::BeginPopupModal(id, nullptr, ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove |
                                                               ImGuiWindowFlags_NoSavedSettings);
    ImGui::PopStyleColor();
    if (!shown) {
        p.open = false;
        return;
    }
    const ImGuiIO& io = ImGui::GetIO();
    if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false)) p.want_close = true;
    if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_TAB, false)) { // the next tab (Ctrl+Shift+Tab: the previous)
        p.tab = (picker_tab)((p.tab + (io.KeyShift ? PICKER_TAB_COUNT - 1 : 1)) % PICKER_TAB_COUNT);
        p.tab_forced = p.want_focus = true;
    }
    const float footer_h = 2 * ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().ItemSpacing.y;
    static const char* labels[PICKER_TAB_COUNT] = {"On this machine", "From Hugging Face", "File..."};
    if (ImGui::BeginTabBar("##picker_tabs")) {
        int shown = -1;
        for (int t = 0; t < PICKER_TAB_COUNT; t++) {
            const bool open = ImGui::BeginTabItem(labels[t], nullptr, p.tab_forced && p.tab == t ? ImGuiTabItemFlags_SetSelected : 0);
            remember_item(ui, std::string("picker tab ") + picker_tab_name((picker_tab)t));
            if (!open) continue;
            shown = t;
            if (!p.tab_forced && p.tab != t) p.tab = (picker_tab)t, p.want_focus = true; // clicked
            if (t == PICKER_MACHINE) machine_tab(p, s, ui, footer_h);
            else if (t == PICKER_HF) hf_tab(p, ui, footer_h);
            else file_tab(p, s, ui);
            ImGui::EndTabItem();
        }
        p.tab_forced = shown != p.tab; // a tab chosen by a key or script shows from a frame after it was asked for
        ImGui::EndTabBar();
    }
    // the footer: the one-line error or note, the model being opened, Close
    ImGui::SetCursorPosY(ImGui::GetWindowHeight() - footer_h - ImGui::GetStyle().WindowPadding.y + ImGui::GetStyle().ItemSpacing.y);
    ImGui::Separator();
    if (!p.error.empty()) ImGui::TextColored(error_colour, "%s", p.error.c_str());
    else if (!p.opening.empty()) ImGui::Text("opening %s... %.0f%%", p.opening.c_str(), s.load_progress * 100);
    else if (!p.note.empty()) ImGui::TextDisabled("%s", p.note.c_str());
    else ImGui::TextDisabled("Up/Down choose, Enter opens, Ctrl+Tab next tab, Esc closes");
    note_text(ui, "picker line", !p.error.empty() ? p.error : p.note);
    ImGui::SameLine(ImGui::GetWindowWidth() - ImGui::CalcTextSize("Close").x - 2 * ImGui::GetStyle().FramePadding.x -
                    ImGui::GetStyle().WindowPadding.x);
    if (ImGui::Button("Close")) p.want_close = true;
    remember_item(ui, "picker close");
    if (p.want_close) { // a download still running stops (what it fetched stays for the next try)
        picker_cancel(p);
        p.want_close = false, p.open = false;
        ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
}

void file_menu(app_state& s, ui_context& ui) {
    if (ImGui::SmallButton("File")) {
        s.recent_models = existing_paths(s.recent_models); // deleted while the app ran
        ImGui::OpenPopup("##file_menu");
    }
    remember_item(ui, "file menu");
    ImGui::PushStyleColor(ImGuiCol_PopupBg, ImVec4(0.12f, 0.13f, 0.16f, 1.0f)); // opaque over the panels
    const bool open = ImGui::BeginPopup("##file_menu");
    ImGui::PopStyleColor();
    if (!open) return;
    if (ImGui::MenuItem("Open a model...", "Ctrl+O")) picker_show(*ui.picker, PICKER_MACHINE);
    remember_item(ui, "file open model");
    if (ImGui::MenuItem("Download from Hugging Face...")) picker_show(*ui.picker, PICKER_HF);
    remember_item(ui, "file download");
    ImGui::Separator();
    ImGui::TextDisabled("Opened recently");
    if (s.recent_models.empty()) ImGui::TextDisabled("no models opened yet");
    std::string chosen;
    for (size_t i = 0; i < s.recent_models.size(); i++) {
        const std::string& r = s.recent_models[i];
        const std::string label = short_name(r) + "###recent" + std::to_string(i); // (the id after ###)
        if (ImGui::MenuItem(label.c_str(), folder_of(r).c_str(), s.model && s.model->path == r)) chosen = r;
        remember_item(ui, "file recent " + r);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", r.c_str());
    }
    ImGui::EndPopup();
    if (!chosen.empty()) open_model(s, *ui.work, chosen);
}

} // namespace gbui
