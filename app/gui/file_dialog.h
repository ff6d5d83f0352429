// Browse... beside every path box: the desktop's own file dialog when the machine has one (zenity or kdialog, run
// on a thread of their own), else a file browser inside the app (a modal window: a path line, Up and Home, the
// folder's entries filtered to what the box takes (file_browser.h), Open and Cancel, all of it from the keyboard
// too). One dialog at a time; its state lives in file_dialog.cpp, not in app_state.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "file_browser.h"

namespace gbui {

struct ui_context;

// The desktop's dialog: "zenity", "kdialog" or "" (none: the in-app browser). GLASSBOX_FILE_DIALOG=app forces the
// in-app one (the tests), =zenity or =kdialog that program.
std::string desktop_dialog();

// How the box itself was used this frame (beyond path_box's answer).
struct path_box_use {
    bool active = false;           // the box has the keyboard
    bool left_after_edit = false;  // it lost the keyboard after an edit (a box that applies on leaving)
};
// A path box with its Browse... button: the box (an InputText of `width` with both, hint when empty) and the
// button; id names both for scripts ("ID" the box, "browse ID" the button). Returns true on the frame the user
// chose a path in a dialog or pressed Enter in the box: path then holds it.
bool path_box(ui_context& ui, const char* id, std::string& path, browse_kind kind, const char* hint, float width,
              path_box_use* use = nullptr);
// The answer a dialog started by the box `id` has for it, taken where the box is not drawn this frame (a popup the
// dialog closed: the model B box); true once, with path set.
bool take_dialog_answer(const char* id, std::string& path);
// The open dialog's window, once per frame at the frame's root (main's frame loop): the in-app browser, or a wait
// for the desktop's dialog (its thread).
void file_dialog_frame(ui_context& ui);
// Whether a dialog is open (the app's keys then leave the keyboard to it).
bool file_dialog_open();
// The dialog for the script's print: {"open", "owner", "kind", "dir", "entries": [names, folders with '/'],
// "line", "error"}.
nlohmann::json file_dialog_json();

} // namespace gbui
