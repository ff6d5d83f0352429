// The View controls: the text scale (Ctrl+= / Ctrl+- / Ctrl+0 and the status bar's View menu), presentation mode
// (F5), one panel filling the window (a double-click on its title line, or F11; Esc returns) and a panel's export as
// SVG or as a PNG at twice the scale (its title line's right-click menu, Ctrl+Shift+E, the View menu).
#pragma once
#include <string>

#include "ui.h"

namespace gbui {

// The panel windows as scripts name them ("residual", "overview", "analysis", ...): the window id ("Residual"),
// "" when there is none of that name.
std::string panel_window_id(const std::string& name);
// What a panel's exported files are named after: "residual-stream", "attention-heads", "next-token", and for
// the analysis panel its tab ("head-L3H0", "logit-lens", ...).
std::string panel_file_name(const app_state& s, const std::string& window);
// The scale the frames are drawn at: the chosen one, x1.5 in presentation mode (within 0.6 .. 3).
float shown_ui_scale(const app_state& s);
// Writes the chosen scale to settings.json once it moved off the saved one (when the run remembers settings).
void remember_ui_scale(app_state& s, ui_context& ui);
// The keys (inside a frame): Ctrl+= (or Ctrl++) larger, Ctrl+- smaller, Ctrl+0 the monitor's default; F5
// presentation mode on and off; F11 the focused panel fills the window (again: back); Esc back to the tiled
// layout, else out of presentation mode; Ctrl+Shift+E exports the focused panel as SVG and PNG (2x).
void view_keys(app_state& s, ui_context& ui);
// The status bar's View button and its menu: text size, presentation mode, maximise, export.
void view_menu(app_state& s, ui_context& ui);
// Inside a panel window, after its content: the window's first line (its title, or its tab bar) takes a
// double-click (fill the window / back) and a right-click (the panel's menu); notes focus, hover, its rectangles.
void panel_title_line(app_state& s, ui_context& ui, const char* window);
// Queues the panel's export as SVG and as PNG (2x) into dir ("" = the working folder), named after the panel
// (glassbox-residual-stream.svg, glassbox-residual-stream@2x.png), with a time stamp when `stamped` (never
// overwriting an earlier one then). The files are written over the next frames (panel_export.h).
void export_panel(app_state& s, ui_context& ui, const std::string& window, const std::string& dir, bool stamped);

} // namespace gbui
