// What the panels share: the UI-thread context (textures, widget rectangles for scripted input, the worker)
// and one draw function per panel (each in its own panel_*.cpp).
#pragma once
#include <imgui.h>

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "app_state.h"
#include "feature_analysis.h"
#include "heatmaps.h"
#include "learn_view.h"
#include "worker.h"

namespace gbui {

struct model_picker; // model_picker.h

// A panel to export (view.h): as SVG (vector) or as PNG at twice the scale, to `path`.
struct panel_export {
    std::string panel;  // its window ("Residual", "Analysis", ...)
    bool svg = true;
    std::string path;
};

// A row of the Next token table as drawn (the script's print): its token, probability (under the ablation) and the
// baseline's, and why it is pinned ("" when it is there by rank).
struct shown_row {
    std::string token;
    float prob = 0, base_prob = 0;
    std::string pinned;
};

struct ui_context {
    heatmaps hm;
    GLuint image_tex = 0;                  // the Image tab's picture (a vision result's view)
    const gb::image* image_shown = nullptr; // the view image_tex holds
    std::string image_input;               // the image path box while it is edited
    std::string target_input;              // encoder–decoders: the target box while it is edited
    bool target_editing = false;
    bool image_editing = false;            // the box was being edited last frame (else it shows s.image_path)
    worker* work = nullptr;
    std::map<std::string, ImVec4> widgets; // label -> screen rect (x0, y0, x1, y1), for scripted tests
    std::map<std::string, int> widget_frame; // label -> the ImGui frame it was last drawn in (scripts skip old ones)
    bool request_screenshot = false;       // Ctrl+E / export button: main writes the PNG after the frame
    std::string screenshot_path = "glassbox.png";
    float prompt_wanted_h = 0;             // height the prompt panel's content asked for (layout, next frame)
    std::map<std::string, float> content_h; // panel -> height its content took last frame (layout)
    bool left_tabs = false;                 // Ablations and Model share the left column as tabs
    std::string left_measured;              // the model, column width and scale the tabs decision was made for
    bool select_model_tab = false;          // "How it differs" just opened: if the column becomes tabs, show Model's
    bool prompt_editing = false;           // the prompt shows its editor (else the wrapped text)
    int prompt_edit_frames = 0;            // frames since the editor was asked for (focus takes two)
    bool prompt_cursor_to_end = false;     // the editor puts its cursor at the end on its first active frame
    std::string run_requested;              // run_key of the inputs last sent to the worker (or covered by a
                                            // generation, which publishes the prompt's result first)
    // analyses
    analysis_worker* analysis = nullptr;
    model_picker* picker = nullptr;         // the model picker (Ctrl+O, the File menu; model_picker.h)
    bool headless = false;                  // screenshot/script runs: no debounce
    std::string asked[ANALYSIS_COUNT];      // inputs of the last request of each kind ("" = none, or cancelled)
    std::string sae_train_adopted;          // the Features tab: the training whose SAE it opened
    std::string export_shown;               // the export (or its error) the status line last said
    int analysis_waiting = -1;              // the first analysis the last frame still awaited (-1: none)
    struct sae_job {                        // the Features tab: an SAE being opened off the UI thread
        std::string path;
        std::shared_ptr<const gb::model> model; // the model it is bound to
        std::future<std::shared_ptr<const gb::bound_sae>> done;
    };
    std::vector<sae_job> sae_jobs;
    std::string settling[ANALYSIS_COUNT];   // each analysis's inputs last frame, and since when (inputs_settled)
    std::chrono::steady_clock::time_point settling_since[ANALYSIS_COUNT];
    learn_view learn_drawn;                 // what the Learn tab's picture drew last (the script's print)
    bool learn_full = false;                // the Learn tab's Present: its picture over the window
    float learn_scale = 1.3f;               // Present's text scale, fitted to the window frame by frame
    bool learn_beside = false;              // Present: the step beside the picture (else under it), whichever
                                            // lets the picture be larger
    int break_row_shown = -2;               // the Break-it row the Learn tab last highlighted (scrolls when it changes)
    analysis_tab tab_shown = TAB_HEAD;      // the tab the tab bar showed last frame
    std::string flash_window;               // a panel window ("Residual", "Output", ...) outlined for a moment:
                                            // where a Learn step's link points
    std::chrono::steady_clock::time_point flash_until;
    std::string typed[4], typed_error[4];   // token boxes: attribution target/contrast, patching target/contrast
    // the view (view.h)
    std::string maximised;                  // the panel window filling the window ("" = the tiled layout)
    std::string focused_panel, hovered_panel; // panel windows last focused, and under the mouse (F11, Ctrl+Shift+E)
    std::vector<panel_export> exports;      // panel exports waiting for their frame, first first
    std::vector<std::string> exported;      // the files the last exports wrote (the script's print)
    float default_ui_scale = 1.0f;          // the monitor's content scale: what Ctrl+0 returns to
    float saved_ui_scale = 0;               // the scale settings.json holds (written when s.ui_scale moves off it)
    bool explain_full = true;               // the panels' explanations in full (else behind "(?)"; View menu)
    float split[4] = {0, 0, 0, 0};          // the tiled layout's splitters (layout.h split_kind): fractions of the
                                            // window's width or the body's height; 0 = the automatic size
    // what was drawn this frame where tests check that it fits (cleared every frame): "panel NAME", captions,
    // labels -> screen rect (x0, y0, x1, y1)
    std::map<std::string, ImVec4> drawn;
    std::map<std::string, std::string> texts; // name -> the text drawn there this frame (what the tests read)
    std::vector<shown_row> next_rows;         // the Next token table's rows this frame
    std::string lens_scrolled_for;          // the lens output the grid was last scrolled to the end for
    int lens_drawn_frame = -10;             // the frame the lens grid was last drawn (it reopens: scrolled again)
};

// Draws text rotated 90 degrees counter-clockwise (reading bottom to top) with its start at the bottom-left
// corner `at`: ImGui 1.86 has no rotated text, so the vertices AddText emits are rotated afterwards.
void add_text_vertical(ImDrawList* dl, ImVec2 at, ImU32 col, const char* text, float font_size = 0);
// A token's visible text cut to max_chars characters (with "…" when cut), for axis labels.
std::string short_label(const std::string& s, size_t max_chars = 10);
// Indices 0, k, 2k, ... of n labels spaced `spacing` pixels apart, with k the smallest step that gives each
// label `need` pixels (so labels never overlap).
int label_step(int n, float spacing, float need);

// Token text in widgets: ImGui shows a label only up to its first "##" (the rest is its id), and WordPiece pieces
// (‘##i’) and GPT-2's ‘##’ hold one. These show the text whole: the widget gets only the id, the text is drawn on it.
// A Selectable of text (id: e.g. "##row3"); the last item is the Selectable, as ImGui::Selectable leaves it.
bool text_selectable(const std::string& text, const char* id, bool selected, ImGuiSelectableFlags flags = 0);
// A combo (id: e.g. "##pick") whose closed box shows `preview` whole; as ImGui::BeginCombo (EndCombo when true).
bool text_combo(const char* id, const std::string& preview, float width);
// An analysis still coming: a progress bar saying busy_text (with "%.0f%%" for the progress) while the worker runs
// it, "waiting for the prompt's run" before; remembered as item for scripts.
void analysis_progress(ui_context& ui, const analysis_status& st, const char* busy_text, const char* item);
// A table's header row from names, each drawn whole (in place of TableSetupColumn names + TableHeadersRow).
void text_headers(const std::vector<std::string>& names);

// Sliders whose value is written beside them, not on the track: ImGui centres the value on the track, where the
// handle covers it (a short track or a small range makes the handle wide). `text` is the value with its name
// ("30 tokens"); name notes the track ("slider NAME") and the text ("slider NAME text") for the tests. Return true
// when the value changed; the last item is the text.
bool slider_int_beside(ui_context& ui, const char* name, int* v, int lo, int hi, const std::string& text, float w);
bool slider_float_beside(ui_context& ui, const char* name, float* v, float lo, float hi, const std::string& text, float w);

// Remembers the last item's rectangle under a name (scripted input finds widgets by it).
void remember_item(ui_context& ui, const std::string& name);
// Notes a rectangle drawn this frame where the tests check that it fits its panel (ui.drawn).
void note_drawn(ui_context& ui, const std::string& name, ImVec2 a, ImVec2 b);
// Notes the text shown under a name this frame (ui.texts): numbers as formatted, token labels as drawn.
void note_text(ui_context& ui, const std::string& name, const std::string& text);

// A rows x cols grid of cw x ch cells in a scrolling child window, with sticky row labels (label_w wide) on the
// left and a header (header_h tall) on top: the lens and the experts tab. begin_grid opens the child; the caller
// draws the cells in [r0, r1) x [c0, c1) (cell (r, c) at o + (label_w + c cw, header_h + r ch)) and its tooltips, then end_grid reserves the content size
// and closes the child.
struct grid_view {
    ImDrawList* dl = nullptr;
    ImVec2 o, wp, ws;          // content origin (moves with the scroll), the visible window's corner and size
    float label_w = 0, header_h = 0, cw = 0, ch = 0;
    int rows = 0, cols = 0;
    int r0 = 0, r1 = 0, c0 = 0, c1 = 0; // visible cells
    int hover_r = -1, hover_c = -1;     // the cell under the mouse (not over the labels), or -1
    // the row label under the mouse, or -1
    int hovered_label(ImVec2 m) const;
};
// flags: more for the child window (e.g. ImGuiWindowFlags_AlwaysVerticalScrollbar).
grid_view begin_grid(const char* id, ImVec2 size, float label_w, float header_h, float cw, float ch, int rows, int cols,
                     ImGuiWindowFlags flags = 0);
void end_grid(const grid_view& g);
ImU32 viridis_u32(float t, float alpha = 1.0f);
// Diverging blue-white-red map centred at 0 (ColorBrewer RdBu's control points): t in [-1, 1], NaN grey.
ImU32 diverging_u32(float t);
// Text colour that reads on a cell of colour c (dark on light cells).
ImU32 text_on(ImU32 c);
// A horizontal colour bar from lo to hi with labels under it (lo, mid, hi); returns the height used.
float colour_bar(ImDrawList* dl, ImVec2 at, float w, bool diverging, const char* lo, const char* mid, const char* hi);
// A token chooser: a combo of `offered` (with probabilities) and of "default" (default_label), then a box to
// type one token (Enter; "#123" = id 123). *id: -1 = the default. slot: which of ui.typed this box uses; name
// (e.g. "attribution target") names the widgets for scripts. Returns true when *id changed.
bool token_picker(const char* name, int* id, const std::string& default_label, const std::vector<gb::token_prob>& offered,
                  const gb::tokenizer& tok, int vocab, int slot, ui_context& ui, float combo_w);
// Width of a picker with its label in front (label, combo, typing box), for one-line-or-two layouts.
float token_picker_w(const char* label, float combo_w);
float token_box_w(float combo_w);
// Pixels left on the line to the right of the last item.
float room_right_of_item();
// A token's visible text in quotes: ‘·cat’ ("(none)" for -1: no contrast token).
std::string quoted(const gb::tokenizer& tok, int id);
// Text from the core ("moves from ‘ mat’ to ‘,’") with each quoted token's whitespace made visible as the app
// shows tokens (‘·mat’).
std::string visible_quotes(const std::string& s);
// Text wrapped to `width` pixels at spaces only (ImGui's wrapping also breaks after '.' and ',', inside numbers
// such as 0.489), one item (a group) for remember_item.
// Removes text's last UTF-8 character (all its bytes).
void pop_utf8_char(std::string& text);
void text_wrapped_at_spaces(const ImVec4& col, const std::string& text, float width);
// Ablation helpers shared by the overview grid and the ablations panel.
bool head_ablated(const gb::ablation& ab, int layer, int head);
void toggle_head(gb::ablation& ab, int layer, int head);
// A heading line for a panel, with a one-line hint.
// (line_open: no separator under it; the caller goes on on the same line)
void panel_title(const char* title, const char* hint = nullptr, bool line_open = false);
// A Learn step's "see: PANEL" link (gb::learn_step::panel): opens the tab it names (Head, Logit lens,
// Attribution, Experts) and outlines the window that shows it for 1.5 s.
void follow_panel_link(app_state& s, ui_context& ui, const std::string& panel);
// The one-line hint of a tab's panel (the tab names it), wrapped when long.
void tab_hint(const char* hint);
// Whether tab_hint draws nothing this frame (presenting a demo: its caption explains; the layout sets it each frame).
void hide_tab_hints(bool hidden);
// Whether explanations are folded behind "(?)" this frame: the View menu's choice, and always when presenting (the
// layout sets it at the start of every frame; tab_hint and the panels ask).
void fold_explanations(bool folded);
bool explanations_folded();
// A "(?)" on the line of the last item that shows text when hovered (a folded explanation).
void folded_explanation(const std::string& text);

void panel_prompt(app_state& s, ui_context& ui);
// The active demo's caption with its End button and Break it's steps (panels/panel_demo.cpp): in the Prompt panel
// (own_panel false), or presenting as the Demo panel beside the picture.
void demo_caption(app_state& s, ui_context& ui, bool own_panel);
void panel_demo(app_state& s, ui_context& ui);
// The surprisal strip under the prompt's chips (panels/surprisal_strip.cpp): whether the shown result has one;
// the line above the chips (the mean per token and per byte, the colour legend; or, where the kind or the memory
// budget gives none, a one-line reason on hover); the bar from a to b under chip t, with its tooltip.
bool surprisal_shown(const app_state& s);
void surprisal_header(const app_state& s, ui_context& ui);
void surprisal_bar(const app_state& s, ui_context& ui, int t, ImVec2 a, ImVec2 b, bool window_hovered);
void panel_overview(app_state& s, ui_context& ui);
void panel_head(app_state& s, ui_context& ui);
void panel_residual(app_state& s, ui_context& ui);
void panel_ablations(app_state& s, ui_context& ui);
void panel_output(app_state& s, ui_context& ui);
void panel_model(app_state& s, ui_context& ui);
// The Model panel's "Open recent" arrow and its menu.
void recent_menu(app_state& s, ui_context& ui);
// Opens a model as the Model panel's Open does (also "Open recent", a dropped folder, the script's `open`).
void open_model(app_state& s, worker& w, const std::string& path);
void panel_lens(app_state& s, ui_context& ui);
void panel_attribution(app_state& s, ui_context& ui);
void panel_patching(app_state& s, ui_context& ui);
// MoE models: a layer x token grid of the experts the router chose (bars by weight, colour = expert); right-click
// (or ctrl+click) an expert's bar to ablate it at that layer.
void panel_experts(app_state& s, ui_context& ui);
void panel_image(app_state& s, ui_context& ui);
// The shown run's image with sal [T] (one value per position) over its patches: red raises the difference, blue
// lowers it, scaled to the largest |value|; [CLS]'s (and [DIST]'s) own value in the line under it.
void image_saliency(app_state& s, ui_context& ui, const std::vector<float>& sal);
void panel_cross(app_state& s, ui_context& ui); // encoder–decoders: target rows over source columns // vision models: the image, its patch grid and attention overlaid
void panel_learn(app_state& s, ui_context& ui);
// Sampling: the prompt continued at three temperatures from one seed and top-k, side by side, each under the
// distribution its first token is drawn from.
void panel_sampling(app_state& s, ui_context& ui);
// Features: the opened SAEs' features of the prompt as chips, the reconstruction error, the selected feature's
// page (activation, logit effect, top contexts) and its edits, applied live (feature_analysis.cpp opens SAEs).
void panel_features(app_state& s, ui_context& ui);
void panel_graph(app_state& s, ui_context& ui); // an attribution graph over transcoder features
// Every frame: starts opening the paths open_sae_file queued, and adopts those opened (or says their error).
void poll_saes(app_state& s, ui_context& ui);
// A distinct colour per expert (a 20-colour categorical palette, then golden-angle hues).
ImU32 expert_colour(int e);

// The main run's request for the inputs as they are now: the prompt, or the replayed generation step.
run_request current_run_request(const app_state& s);
// run_key of current_run_request (with the focus layer when the shown capture leaves layers out).
std::string current_run_key(const app_state& s);

// Sends the analyses that the open tab / grid mode shows when their inputs changed (newest wins; a run whose
// inputs changed is stopped at once). Sets s.analysis_want. Returns true when everything wanted is done.
bool schedule_analyses(app_state& s, ui_context& ui);
// One analysis: stops its run when its inputs changed; sends the new inputs (named `inputs`, carried by `request`,
// of the type k's row names: throws gb::error when it is another) when visible, offered by the model's kind (its
// row's needs) and ready. The scheduler's own code and the rows' schedule hooks call it.
void schedule_analysis(app_state& s, ui_context& ui, analysis_kind k, const std::string& inputs, bool visible,
                       bool ready, std::any request);
// Whether k's inputs have stayed as they are for 150 ms (at once in scripted runs): typed inputs are debounced like
// the main run.
bool inputs_settled(ui_context& ui, analysis_kind k, const std::string& inputs);
// A chosen token id, or -1 when none is chosen or it is outside this model's vocabulary.
int token_or_default(int id, const run_result& r);
// The Patching tab's inputs (the prompt as typed and the corrupted one, target, contrast) into q, with their key
// ("" while there is no model or corrupted prompt); the analyses of the same prompts read them too.
std::string patching_key(const app_state& s, patch_request& q);
// The attribution's target and contrast ids: the chosen ones, else the prediction's top-1 and the best other token.
void attribution_tokens(const app_state& s, int* target, int* contrast);
// The position the Attribution tab's difference is read at: the selected token (an encoder's [MASK] by default);
// an image classifier's [CLS]; an encoder–decoder's last target position while its source is shown.
int attribution_position(const app_state& s);

// Sessions (.json: model path, prompt, BOS, ablations, selection) and capture export.
struct session_file {
    std::string model;          // path of the model it was saved with ("" if none)
    std::string prompt;
    bool bos = false;
    pending_settings settings;  // ablation, selection and chosen tokens, checked against that model once it has loaded
    // analysis inputs (absent in older session files: then the defaults stay)
    std::optional<std::string> corrupt_prompt;
    std::optional<std::string> image; // vision models: the image's path
    std::optional<analysis_tab> tab;
    std::optional<colour_mode> colour_by;
    struct sampling_inputs {    // the Sampling tab's
        float temps[3];
        int top_k, tokens;
        uint64_t seed;
    };
    std::optional<sampling_inputs> sampling;
    struct translation_inputs { // encoder–decoders: the Target box, how a translation is made, what is shown
        std::string target_text;
        gb::sampling sampling;
        int stack = 1;
        bool cross_average = false;
    };
    std::optional<translation_inputs> translation;
};
void save_session(const app_state& s, const std::string& path);
session_file read_session(const std::string& path); // throws gb::error (file, JSON), no model checks
// The panel's Load (and the script's "session FILE"): prompt and BOS at once; the session's model is loaded
// if it is not the current one, and its ablation and selection are applied (and checked) against it.
void open_session(app_state& s, worker& w, const std::string& path);
// The session's model-independent analysis inputs (corrupt prompt, tab, grid colouring), when it has them.
void apply_session_inputs(app_state& s, const session_file& f);
// Writes the capture (.npy, capture.json) and the analyses computed for the shown result (head_scores, lens,
// attribution, patching, the induction test: .npy + .json each); returns what it wrote, e.g. ".npy, capture.json, lens".
std::string export_capture(const app_state& s, const std::string& dir);

} // namespace gbui
