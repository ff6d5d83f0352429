// glassbox: the desktop app. Linear main: parse args, init GLFW + ImGui, frame loop, shutdown.
//
// Sections: arguments | fonts | layout | scripted input (tests) | screenshot | main
#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <imgui_internal.h> // ImTextCharFromUtf8
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include "analysis/analysis_json.h"
#include "analysis/export.h"
#include "demos.h"
#include "glassbox_version.h" // generated at build time (packaging/version.cmake)
#include "io/loader.h"
#include "kernels/gemm.h"
#include "run/predict.h"
#include "settings.h"
#include "ui.h"
#include "util/error.h"
#include "window_placement.h"

using namespace gbui;
using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------
struct options {
    std::string model, prompt, image, ablate, layers, heads, experts, screenshot, script, session;
    int sel_layer = -1, sel_head = -1, sel_token = -1;
    int width = 1600, height = 1000;
    bool size_given = false; // --size: wins over the size remembered from the last run
    bool remember = false;   // --remember: a screenshot or script run reads and writes the settings as a window does
    bool bos = false;
    bool prompt_given = false;
    bool gl = false;
    int budget_mb = 512;
    bool keep_stored = true; // --weights stored|f32
};

static const char* usage =
    "usage: glassbox [--model PATH] [--prompt TEXT | --image FILE] [--bos] [--ablate LIST] [--layers LIST] [--heads LIST]\n"
    "                [--experts LIST] [--select-head L.H] [--select-token I] [--session FILE.json] [--backend cpu|gl]\n"
    "                [--capture-budget MB] [--matmul fp32|amx|auto] [--weights stored|f32]\n"
    "                [--screenshot FILE.png] [--size WxH] [--script FILE] [--remember]\n"
    "       glassbox --help | --version\n";

static options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw gb::error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--model") o.model = value();
        else if (a == "--prompt") o.prompt = value(), o.prompt_given = true;
        else if (a == "--image") o.image = value(); // for a ViT / DeiT model
        else if (a == "--bos") o.bos = true;
        else if (a == "--capture-budget") {
            std::string v = value();
            o.budget_mb = std::atoi(v.c_str());
            if (o.budget_mb < 1) throw gb::error("--capture-budget: expected megabytes, got '" + v + "'");
        }
        else if (a == "--backend") {
            std::string v = value();
            if (v != "cpu" && v != "gl") throw gb::error("--backend: expected cpu or gl, got '" + v + "'");
            o.gl = v == "gl";
        }
        else if (a == "--matmul") gb::set_matmul_kind(gb::parse_matmul_kind(value())); // before any model is packed
        else if (a == "--weights") {
            const std::string v = value();
            if (v != "stored" && v != "f32") throw gb::error("--weights: expected stored or f32, got '" + v + "'");
            o.keep_stored = v == "stored";
        }
        else if (a == "--ablate") o.ablate = value();
        else if (a == "--layers") o.layers = value();
        else if (a == "--heads") o.heads = value();
        else if (a == "--experts") o.experts = value();
        else if (a == "--screenshot") o.screenshot = value();
        else if (a == "--script") o.script = value();
        else if (a == "--session") o.session = value();
        else if (a == "--remember") o.remember = true;
        else if (a == "--select-head") {
            std::string v = value();
            if (std::sscanf(v.c_str(), "%d.%d", &o.sel_layer, &o.sel_head) != 2 || o.sel_layer < 0 || o.sel_head < 0)
                throw gb::error("--select-head: expected LAYER.HEAD like 2.3, got '" + v + "'");
        } else if (a == "--select-token") {
            std::string v = value();
            char* end = nullptr;
            o.sel_token = (int)std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || o.sel_token < 0) throw gb::error("--select-token: expected an index, got '" + v + "'");
        } else if (a == "--size") {
            std::string v = value();
            if (std::sscanf(v.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width < 320 || o.height < 240 ||
                o.width > 8192 || o.height > 8192)
                throw gb::error("--size: expected WxH like 1600x1000, got '" + v + "'");
            o.size_given = true;
        } else if (a == "--help" || a == "-h") {
            std::fputs(usage, stdout);
            std::exit(0);
        } else if (a == "--version") {
            std::printf("glassbox %s\n", GLASSBOX_VERSION_FULL);
            std::exit(0);
        } else {
            throw gb::error("unknown option " + a);
        }
    }
    return o;
}

// ---------------------------------------------------------------------------------------------
// Fonts: DejaVu Sans; glyphs the prompt needs are added on demand (a CJK font when installed)
// ---------------------------------------------------------------------------------------------
struct font_state {
    std::set<ImWchar> extra;  // code points added beyond the base ranges
    std::set<ImWchar> missing; // asked for, found in no font (never retried)
    std::string cjk;          // path of a CJK font, if any
    ImVector<ImWchar> ranges;
};

static const char* dejavu = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

static void build_fonts(font_state& fs) {
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    ImFontGlyphRangesBuilder b;
    static const ImWchar base[] = {0x0020, 0x024F, 0x0370, 0x03FF, 0x0400, 0x04FF, 0x2000, 0x206F, 0x2190, 0x21FF,
                                   0x2200, 0x22FF, 0x2400, 0x243F, 0x25A0, 0x25FF, 0xFFFD, 0xFFFD, 0};
    b.AddRanges(base);
    for (ImWchar c : fs.extra) b.AddChar(c);
    fs.ranges.clear();
    b.BuildRanges(&fs.ranges);
    ImFontConfig cfg;
    cfg.OversampleH = 2;
    if (std::ifstream(dejavu).good()) io.Fonts->AddFontFromFileTTF(dejavu, 15.0f, &cfg, fs.ranges.Data);
    else io.Fonts->AddFontDefault();
    if (!fs.cjk.empty()) {
        ImFontConfig merge;
        merge.MergeMode = true;
        io.Fonts->AddFontFromFileTTF(fs.cjk.c_str(), 15.0f, &merge, fs.ranges.Data);
    }
    io.Fonts->Build();
}

// Adds glyphs for text the font lacks; returns true when the atlas must be rebuilt.
static bool need_glyphs(font_state& fs, const std::string& text) {
    ImGuiIO& io = ImGui::GetIO();
    if (io.Fonts->Fonts.empty()) return false;
    ImFont* f = io.Fonts->Fonts[0]; // GetFont() is only valid inside a frame
    bool added = false;
    for (const char* p = text.c_str(); *p;) {
        unsigned int c = 0;
        int n = ImTextCharFromUtf8(&c, p, nullptr);
        if (n <= 0) break;
        p += n;
        if (c < 0x20 || c > 0xFFFF) continue; // ImGui 1.86 is built with 16-bit ImWchar
        ImWchar w = (ImWchar)c;
        if (f->FindGlyphNoFallback(w) || fs.extra.count(w) || fs.missing.count(w)) continue;
        fs.extra.insert(w);
        added = true;
    }
    return added;
}

// Everything the window may show as text: the prompt, its tokens, the top-k tokens and the continuation.
static std::string glyph_text(const app_state& s) {
    std::string text = s.prompt;
    if (s.result) {
        for (const std::string& p : s.result->cap().pieces) text += p;
        for (const auto* list : {&s.result->top, &s.result->base_top})
            for (const gb::token_prob& t : *list) text += gb::token_text(s.result->model->tok, t.id);
    }
    if (s.generated) text += s.generated->text;
    if (s.lens) {
        const gb::tokenizer& tok = s.lens->from->model->tok;
        for (int id : s.lens->lens.top_ids) text += gb::token_text(tok, id);
    }
    if (s.patching) {
        const gb::tokenizer& tok = s.patching->model->tok;
        for (int id : s.patching->corrupt_ids) text += gb::token_text(tok, id);
        for (const gb::token_prob& t : s.patching->corrupt_top) text += gb::token_text(tok, t.id);
    }
    if (s.breaking)
        for (const gb::break_row& r : s.breaking->res.rows) text += r.explanation;
    if (s.sampling) {
        const gb::tokenizer& tok = s.sampling->from->model->tok;
        for (const sampling_column& c : s.sampling->columns) {
            text += c.text;
            for (int id : c.dist.ids) text += gb::token_text(tok, id);
        }
    }
    text += s.corrupt_prompt + s.demo_caption;
    return text;
}

static void find_cjk_font(font_state& fs) {
    for (const char* p : {"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
                          "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
                          "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
                          "/usr/share/fonts/truetype/arphic/uming.ttc"})
        if (std::ifstream(p).good()) {
            fs.cjk = p;
            return;
        }
}

// ---------------------------------------------------------------------------------------------
// Layout: a fixed tiling that fills the window and follows its size
// ---------------------------------------------------------------------------------------------
static void panel_window(const char* id, ImVec2 pos, ImVec2 size, void (*draw)(app_state&, ui_context&), app_state& s,
                         ui_context& ui, ImGuiWindowFlags extra = 0) {
    ImGui::SetNextWindowPos(pos);
    ImGui::SetNextWindowSize(size);
    ImGuiWindowFlags f = extra | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove |
                         ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoBringToFrontOnFocus |
                         ImGuiWindowFlags_NoSavedSettings;
    if (ImGui::Begin(id, nullptr, f)) {
        float y0 = ImGui::GetCursorPosY();
        draw(s, ui);
        ui.content_h[id] = ImGui::GetCursorPosY() - y0; // what the panel would need (layout, next frame)
    }
    if (ui.flash_window == id) { // a Learn link points here: a pulsing outline, gone after 1.5 s
        const double left = std::chrono::duration<double>(ui.flash_until - std::chrono::steady_clock::now()).count();
        if (left > 0) {
            const float a = 0.55f + 0.45f * (float)std::cos(left * 9.0);
            ImGui::GetForegroundDrawList()->AddRect(pos, ImVec2(pos.x + size.x, pos.y + size.y),
                                                    IM_COL32(250, 200, 90, (int)(255 * a)), 4, 0, 3);
        } else {
            ui.flash_window.clear();
        }
    }
    ImGui::End();
}

// The left column when Ablations and Model do not both fit (short windows): one panel with two tabs.
static void left_tabs(app_state& s, ui_context& ui) {
    if (ImGui::BeginTabBar("##left")) {
        for (auto [name, draw] : {std::pair{"Ablations", panel_ablations}, std::pair{"Model", panel_model}}) {
            const bool model = std::string(name) == "Model";
            const bool opened = ImGui::BeginTabItem(name, nullptr, model && ui.select_model_tab ? ImGuiTabItemFlags_SetSelected : 0);
            if (model) ui.select_model_tab = false;
            if (opened) {
                float y0 = ImGui::GetCursorPosY();
                draw(s, ui);
                ui.content_h[name] = ImGui::GetCursorPosY() - y0;
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

// Under the attention grid: the head detail and the three analyses, as tabs. A tab chosen elsewhere (a click
// on an attribution head, a script, a session) is selected through ImGui; until ImGui shows it, the bar's
// current tab does not overwrite s.tab.
static void analysis_tabs(app_state& s, ui_context& ui) {
    static const char* labels[TAB_COUNT] = {"Head", "Logit lens", "Attribution", "Patching", "Learn", "Sampling", "Experts", "Image",
                                            "Cross-attention"};
    static void (*const draw[TAB_COUNT])(app_state&, ui_context&) = {panel_head, panel_lens, panel_attribution, panel_patching,
                                                                      panel_learn, panel_sampling, panel_experts, panel_image,
                                                                      panel_cross};
    // a tab this model lacks (Experts of a dense model, chosen by a session or a script) falls back to Head, once
    // no model that might have it is on its way
    if (!tab_available(s.tab, s.model.get()) && !s.loading && !s.pending) s.tab = TAB_HEAD;
    if (ImGui::BeginTabBar("##analysis")) {
        const bool forced = s.tab != ui.tab_shown;
        for (int t = 0; t < TAB_COUNT; t++) {
            if (!tab_available((analysis_tab)t, s.model.get())) continue;
            ImGuiTabItemFlags f = forced && t == s.tab ? ImGuiTabItemFlags_SetSelected : 0;
            bool open = ImGui::BeginTabItem(labels[t], nullptr, f);
            remember_item(ui, std::string("tab ") + labels[t]);
            if (open) {
                ui.tab_shown = (analysis_tab)t;
                if (!forced) s.tab = (analysis_tab)t;
                draw[t](s, ui);
                ImGui::EndTabItem();
            }
        }
        ImGui::EndTabBar();
    }
}

static void draw_layout(app_state& s, ui_context& ui, float W, float H) {
    // the prompt panel grows with its text and token chips (up to 26% of the window; then they scroll)
    const float g = 4, status_h = 26;
    const float prompt_h = std::max(118.0f, std::min(ui.prompt_wanted_h > 0 ? ui.prompt_wanted_h : 150.0f, H * 0.26f));
    float body_y = prompt_h + g, body_h = H - body_y - status_h - g;
    float left_w = W * 0.22f, right_w = W * 0.29f, mid_w = W - left_w - right_w - 4 * g; // the middle holds the analyses
    float mid_x = left_w + 2 * g, right_x = mid_x + mid_w + g;
    panel_window("Prompt", ImVec2(g, g), ImVec2(W - 2 * g, prompt_h - g), panel_prompt, s, ui);
    // left column: Ablations over Model, each as tall as its content, when both fit; else tabs (with some
    // hysteresis so that a scrollbar's width cannot make it flip every frame)
    const float pad = 2 * ImGui::GetStyle().WindowPadding.y + 4;
    float abl_h = ui.content_h["Ablations"] + pad, model_h = ui.content_h["Model"] + pad;
    if (abl_h + model_h + g > body_h) ui.left_tabs = true;
    else if (abl_h + model_h + g < body_h - 40) ui.left_tabs = false;
    if (ui.left_tabs) {
        panel_window("Left", ImVec2(g, body_y), ImVec2(left_w, body_h), left_tabs, s, ui);
    } else {
        ui.select_model_tab = false; // (only the frame after "How it differs" opened, should the column become tabs)
        // Model is as tall as its content, or capped (then it scrolls). Uncapped it never shows a scrollbar: one
        // appearing would narrow the text, wrap it onto more lines, grow the panel, drop the scrollbar, and so on,
        // a panel that jumps every frame
        const float full_h = model_h > pad ? model_h : body_h * 0.44f;
        model_h = std::min(full_h, body_h * 0.6f);
        panel_window("Ablations", ImVec2(g, body_y), ImVec2(left_w, body_h - model_h - g), panel_ablations, s, ui);
        panel_window("Model", ImVec2(g, body_y + body_h - model_h), ImVec2(left_w, model_h), panel_model, s, ui,
                     full_h <= model_h ? ImGuiWindowFlags_NoScrollbar : 0);
    }
    panel_window("Overview", ImVec2(mid_x, body_y), ImVec2(mid_w, body_h * 0.42f - g), panel_overview, s, ui);
    panel_window("Analysis", ImVec2(mid_x, body_y + body_h * 0.42f), ImVec2(mid_w, body_h * 0.58f), analysis_tabs, s, ui);
    panel_window("Output", ImVec2(right_x, body_y), ImVec2(right_w, body_h * 0.52f - g), panel_output, s, ui);
    panel_window("Residual", ImVec2(right_x, body_y + body_h * 0.52f), ImVec2(right_w, body_h * 0.48f), panel_residual, s, ui);
    // status bar: the one-line error (previous result stays on screen), else the last status
    ImGui::SetNextWindowPos(ImVec2(g, H - status_h));
    ImGui::SetNextWindowSize(ImVec2(W - 2 * g, status_h - g));
    ImGui::Begin("Status", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoMove);
    if (!s.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "error: %s", s.error.c_str());
    else if (!s.warning.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.warning.c_str());
    else if (s.loading) ImGui::Text("loading model... %.0f%%", s.load_progress * 100);
    else if (s.busy) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "running...");
    else if (s.result && !s.result->notice.empty()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%s", s.result->notice.c_str());
    else ImGui::TextDisabled("%s", s.status.empty() ? "ready" : s.status.c_str());
    ImGui::SameLine(ImGui::GetWindowWidth() - 160);
    ImGui::TextDisabled("%.0f fps", ImGui::GetIO().Framerate);
    ImGui::End();
}

// ---------------------------------------------------------------------------------------------
// Scripted input for tests: click LABEL | rclick LABEL | type TEXT | key NAME | wait | print | measure N |
// screenshot FILE | open PATH | session FILE | scale linear|log|rowmax | tab head|lens|attribution|patching|learn|
// sampling | demo NAME | colour-by NAME | corrupt TEXT | save-session FILE | export DIR | wait-running lens|patching |
// select-token I | frames N | hover LABEL | gen-tokens N | gen-step K | flood N | latency TEXT
// ---------------------------------------------------------------------------------------------
static const int run_debounce_ms = 20;
static double g_ui_ms = 0; // CPU time of the last frame's UI build (NewFrame .. Render), without GL raster
static double g_upload_ms = 0; // time of the last frame's texture uploads (0 when none)

struct script_runner {
    std::vector<std::string> lines;
    size_t next = 0;
    clock_type::time_point measure_start, last_frame;
    double ui_ms_sum = 0, max_ms = 0; // max_ms: longest frame (e.g. one that uploads a new result)
    double max_ui_ms = 0;             // longest UI build (CPU) of one frame
    std::vector<double> latencies;    // "latency": keystroke to result shown, ms
    std::vector<double> arrivals;     // "latency": keystroke to the worker's result arriving (before its upload), ms
    std::vector<double> worker_ms;    // "latency": the result's run + scores + pixels on the worker, ms
    clock_type::time_point typed_at;
    bool arrived = false;             // the keystroke's result has come from the worker
    uint64_t result_at_type = 0;      // the newest result when the key was typed
    double max_upload_ms = 0;         // longest texture upload in one frame
    int phase = 0;      // multi-frame actions (click: move, press, release)
    bool hovering = false; // "hover": the mouse stays at hover_at (the backend resets it every frame)
    ImVec2 hover_at;
    int wait_frames = 0;
    bool done() const { return next >= lines.size(); }
    // a `latency` line is waiting for its keystroke's result
    bool latency_waiting() const { return !done() && lines[next].rfind("latency ", 0) == 0 && phase > 0 && !arrived; }
};

static void write_png(const std::string& path, int w, int h) {
    std::vector<unsigned char> px((size_t)w * h * 4), flipped(px.size());
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    for (int y = 0; y < h; y++) // GL's origin is bottom-left
        std::copy(px.begin() + (size_t)(h - 1 - y) * w * 4, px.begin() + (size_t)(h - y) * w * 4,
                  flipped.begin() + (size_t)y * w * 4);
    for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
    if (!stbi_write_png(path.c_str(), w, h, 4, flipped.data(), w * 4)) throw gb::error("cannot write " + path);
}

static nlohmann::json token_or_null(const gb::tokenizer& tok, int id) {
    return id < 0 ? nlohmann::json() : nlohmann::json(gb::token_text(tok, id));
}

static void print_state(const app_state& s, const ui_context& ui) {
    nlohmann::json j;
    if (s.result) {
        std::vector<std::string> toks(s.result->cap().pieces.begin(), s.result->cap().pieces.end());
        j["tokens"] = toks;
        j["top1"] = s.result->top.empty() ? "" : gb::token_text(s.result->model->tok, s.result->top[0].id);
        if (s.result->pred_pos >= 0) { // an encoder: where top1 is predicted, and every mask's fillers
            j["fill_position"] = s.result->pred_pos;
            j["fills"] = gb::fill_mask_json(s.result->fills, s.result->cap(), s.result->model->tok);
        }
        if (s.result->decoder) { // an encoder–decoder: the translation shown and how it was made
            j["translation"] = s.result->translation;
            j["translation_sampling"] = sampling_key(s.result->target_sampling);
        }
        j["ablation"] = s.result->ablation.describe();
        j["notice"] = s.result->notice;
        j["kl"] = s.result->kl;
        j["model"] = s.result->model->path;
        const gb::live_report& rep = s.result->report;
        j["report"] = {{"what", rep.what}, {"tokens", rep.tokens}, {"from_token", rep.from_token},
                       {"from_point", rep.from_point}, {"baseline_run", rep.baseline_run}, {"reused", rep.reused},
                       {"memory_note", rep.memory_note}, {"ms", rep.ms}};
        j["scores_ms"] = s.result->scores_ms;
        j["pixels_ms"] = s.result->pixels_ms;
        j["prompt_tokens"] = s.result->n_prompt; // the rest of "tokens" are generated ones
        j["current"] = result_is_current(s);
    }
    j["gen_step"] = s.gen_step;
    j["replay_steps"] = replay_steps(s);
    j["generated_tokens"] = s.generated ? s.generated->n_tokens : 0;
    j["generation_done"] = s.generated && s.generated->done;
    j["cancelled_runs"] = ui.work->cancelled();
    j["published_results"] = ui.work->published();
    static const char* scales[] = {"linear", "log", "rowmax"};
    j["heatmap_scale"] = s.pixels ? scales[s.pixels->scale] : ""; // what the textures on screen show
    j["selected_head"] = std::to_string(s.sel_layer) + "." + std::to_string(s.sel_head);
    j["selected_token"] = s.sel_token;
    j["prompt"] = s.prompt;
    j["image"] = s.image_path;
    if (s.result && s.result->view) { // vision: what the Image tab overlays, and where [CLS] looked
        const run_result& r = *s.result;
        std::vector<int> order;
        for (int t = 1; t < r.cap().n_tokens; t++) order.push_back(t);
        std::sort(order.begin(), order.end(), [&](int a, int b) { return r.rollout[a] > r.rollout[b]; });
        order.resize(std::min<size_t>(order.size(), 5));
        nlohmann::json top = nlohmann::json::array();
        for (int t : order) top.push_back(r.cap().pieces[t]);
        nlohmann::json classes = nlohmann::json::array();
        for (const gb::token_prob& tp : r.top) classes.push_back({{"id", tp.id}, {"prob", tp.prob}});
        j["vision"] = {{"view", {r.view->width, r.view->height}}, {"query", s.sel_token}, {"rollout", s.image_rollout},
                       {"image", r.image_path}, {"rollout_top", top}, {"classes", classes}};
    }
    j["generated"] = s.generated ? s.generated->text : "";
    j["error"] = s.error;
    j["warning"] = s.warning;
    j["status"] = s.status;
    j["recent"] = s.recent_models;
    j["config_dir"] = s.config_dir; // "" when the run remembers nothing
    j["window"] = {(int)ImGui::GetIO().DisplaySize.x, (int)ImGui::GetIO().DisplaySize.y};
    j["gl"] = s.gl_status;
    // analyses
    j["tab"] = tab_name(s.tab);
    j["flash"] = ui.flash_window;
    j["tabs"] = nlohmann::json::array(); // the tabs this model shows
    for (int t = 0; t < TAB_COUNT; t++)
        if (tab_available((analysis_tab)t, s.model.get())) j["tabs"].push_back(tab_name((analysis_tab)t));
    // learn: the walk on screen (its token, layer, head and step titles), and whether it is of the inputs now
    if (s.learn) {
        nlohmann::json titles = nlohmann::json::array();
        for (const gb::learn_step& st : s.learn->walk.steps) titles.push_back(st.title);
        j["learn"] = {{"token", s.learn->walk.token}, {"layer", s.learn->walk.layer}, {"head", s.learn->walk.head},
                      {"steps", titles}, {"current", s.learn->key == s.analysis_want[ANALYSIS_LEARN]},
                      {"prediction", s.learn->walk.steps.back().labels.empty() ? "" : s.learn->walk.steps.back().labels[0]}};
    }
    // experts (MoE models): the ablated ones (the input), and the shown result's routing of the last token
    j["ablated_experts"] = nlohmann::json::array();
    for (const gb::head_ref& e : s.ablation.experts) j["ablated_experts"].push_back(std::to_string(e.layer) + "." + std::to_string(e.head));
    if (s.result && !s.result->routing.empty()) {
        const gb::routing_table& rt = s.result->routing;
        nlohmann::json ids = nlohmann::json::array(), w = nlohmann::json::array();
        for (int l = 0; l < rt.n_layer; l++) {
            std::vector<int> li;
            std::vector<float> lw;
            for (int i = 0; i < rt.k && rt.cell_ids(l, rt.n_tokens - 1)[i] >= 0; i++)
                li.push_back(rt.cell_ids(l, rt.n_tokens - 1)[i]), lw.push_back(rt.cell_weights(l, rt.n_tokens - 1)[i]);
            ids.push_back(li);
            w.push_back(lw);
        }
        j["experts"] = {{"n_expert", rt.n_expert}, {"top_k", rt.k}, {"last_token_experts", ids}, {"last_token_weights", w}};
    }
    j["token_errors"] = nlohmann::json::array(); // the token boxes' one-line errors
    for (const std::string& e : ui.typed_error)
        if (!e.empty()) j["token_errors"].push_back(e);
    j["colour_by"] = colour_name(s.colour_by);
    j["demo"] = {{"name", demo_name(s.demo)}, {"caption", s.demo_caption}, {"waiting", s.demo_waiting},
                 {"break_row", s.break_row}};
    j["ablation_input"] = s.ablation.describe(); // what the panels ask for ("ablation" is the shown result's)
    // break it: the rows (the Learn tab's table), and whether they are of the prompt as it is now
    if (s.breaking && !s.breaking->choice) { // as `break-it --json` writes it, with what the app adds
        j["break_it"] = gb::break_it_json(s.breaking->res, s.breaking->model->tok);
        j["break_it"]["prompt"] = s.breaking->prompt;
        j["break_it"]["current"] = break_is_current(s.breaking.get(), s.model, s.prompt, s.bos);
        j["break_it"]["ms"] = s.breaking->ms;
    }
    // sampling: each column's temperature, continuation and first-token distribution (its top 8)
    if (s.sampling) {
        const sampling_output& o = *s.sampling;
        const gb::tokenizer& tok = o.from->model->tok;
        nlohmann::json cols = nlohmann::json::array();
        for (const sampling_column& c : o.columns) {
            nlohmann::json top = nlohmann::json::array();
            for (size_t i = 0; i < c.dist.ids.size() && i < 8; i++)
                top.push_back({{"token", gb::token_text(tok, c.dist.ids[i])}, {"prob", c.dist.probs[i]}});
            cols.push_back({{"temperature", c.temperature}, {"text", c.text}, {"ids", c.ids}, {"kept", c.dist.ids.size()},
                            {"top", top}});
        }
        j["sampling"] = {{"current", o.key == s.analysis_want[ANALYSIS_SAMPLING]}, {"top_k", o.top_k}, {"seed", o.seed},
                         {"tokens", o.n_tokens}, {"prompt", o.from->prompt}, {"columns", cols}};
    }
    j["sampling_inputs"] = {{"temperatures", {s.sample_temps[0], s.sample_temps[1], s.sample_temps[2]}},
                            {"top_k", s.sample_top_k}, {"tokens", s.sample_tokens}, {"seed", s.sample_seed}};
    // widgets the tests check are on screen: name -> [x0, y0, x1, y1]
    for (const char* w : {"sampling column 0", "sampling column 1", "sampling column 2", "sampling text 0",
                          "sampling text 1", "sampling text 2", "demo caption", "break next", "break it"})
        if (auto it = ui.widgets.find(w); it != ui.widgets.end())
            j["widgets"][w] = {it->second.x, it->second.y, it->second.z, it->second.w};
    j["corrupt_prompt"] = s.corrupt_prompt;
    auto token = [&](int id) -> nlohmann::json {
        if (id < 0 || !s.model || id >= s.model->config.vocab_size) return nullptr;
        return gb::token_text(s.model->tok, id);
    };
    j["lens_target"] = token(s.lens_target);
    j["attribution_target"] = token(s.attr_target);
    j["attribution_contrast"] = token(s.attr_contrast);
    j["patching_target"] = token(s.patch_target);
    j["patching_contrast"] = token(s.patch_contrast);
    static const char* kinds[ANALYSIS_COUNT] = {"lens", "attribution", "induction", "patching", "learn", "break", "sampling"};
    for (int k = 0; k < ANALYSIS_COUNT; k++) {
        const analysis_status& st = s.analysis[k];
        j["analysis"][kinds[k]] = {{"busy", st.busy}, {"progress", st.progress}, {"error", st.error}, {"cancelled", st.cancelled},
                                   {"wanted", !s.analysis_want[k].empty()}};
    }
    if (s.lens) { // the model's own top-1 is the last point's at the last position
        const gb::lens_result& l = s.lens->lens;
        const gb::tokenizer& tok = s.lens->from->model->tok;
        const size_t last = ((size_t)(l.n_points - 1) * l.n_tokens + l.n_tokens - 1) * l.k;
        j["lens"] = {{"points", l.n_points}, {"tokens", l.n_tokens}, {"top1_last", gb::token_text(tok, l.top_ids[last])},
                     {"top1_prob_last", l.top_probs[last]}, {"target", token_or_null(tok, s.lens->target)},
                     {"current", s.lens->from == s.result}, {"ms", s.lens->ms}};
    }
    if (s.attribution) {
        const gb::attribution& a = s.attribution->attr;
        const run_result& r = *s.attribution->from;
        const gb::tokenizer& tok = r.model->tok;
        nlohmann::json aj = {{"total", a.total}, {"sum", a.sum()}, {"position", a.position},
                             {"target", gb::token_text(tok, a.target)},
                             {"contrast", token_or_null(tok, a.contrast)},
                             {"current", s.attribution->from == s.result}, {"ms", s.attribution->ms}};
        if (a.position == r.cap().n_tokens - 1) { // the difference as the run's own logits give it
            const float* lg = r.cap().last_logits();
            aj["logit_diff"] = (double)lg[a.target] - (a.contrast >= 0 ? (double)lg[a.contrast] : 0.0);
        }
        j["attribution"] = aj;
    }
    if (s.induction) {
        const gb::head_scores& sc = s.induction->scores;
        float best = 0;
        for (float v : sc.score[gb::SCORE_INDUCTION]) if (std::isfinite(v)) best = std::max(best, v);
        j["induction_test"] = {{"shown", s.induction_test}, {"n", s.induction->n}, {"seed", s.induction->seed},
                               {"tokens", s.induction->ids.size()}, {"positions", sc.n_induction_positions},
                               {"max_induction", best}, {"ms", s.induction->ms}};
    }
    if (s.patching) {
        const patch_output& po = *s.patching;
        const gb::patch_result& p = po.res;
        const gb::tokenizer& tok = po.model->tok;
        const int P = 2 * p.n_layer + 1, T = p.n_tokens;
        auto num = [](float v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
        j["patching"] = {{"complete", p.complete}, {"clean", p.clean}, {"corrupt", p.corrupt}, {"runs", p.runs},
                         {"target", gb::token_text(tok, p.target)},
                         {"contrast", token_or_null(tok, p.contrast)},
                         {"normalized_last", num(p.resid_normalized[(size_t)(P - 1) * T + T - 1])},
                         {"normalized_first", num(p.resid_normalized[0])},
                         {"corrupt_prompt", po.corrupt}, {"corrupt_prompt_tokens", po.corrupt_ids.size()}, {"ms", po.ms},
                         {"note", po.note}};
    }
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
}

// Returns false while the action needs more frames.
static bool script_step(script_runner& sc, app_state& s, ui_context& ui, bool settled, int fb_w, int fb_h) {
    const std::string& line = sc.lines[sc.next];
    std::string cmd = line.substr(0, line.find(' '));
    std::string arg = line.find(' ') == std::string::npos ? "" : line.substr(line.find(' ') + 1);
    ImGuiIO& io = ImGui::GetIO();
    if (sc.hovering) io.MousePos = sc.hover_at;
    if (cmd == "wait") return settled;
    if (cmd == "print") {
        print_state(s, ui);
        return true;
    }
    if (cmd == "screenshot") {
        write_png(arg, fb_w, fb_h);
        return true;
    }
    if (cmd == "measure") { // render N frames, print the mean frame time (CPU side, incl. swap)
        int n = std::max(1, std::atoi(arg.c_str()));
        auto now = clock_type::now();
        if (sc.phase == 0) sc.measure_start = now, sc.ui_ms_sum = 0, sc.max_ms = 0, sc.max_upload_ms = 0, sc.max_ui_ms = 0;
        else sc.ui_ms_sum += g_ui_ms, sc.max_ms = std::max(sc.max_ms, std::chrono::duration<double, std::milli>(now - sc.last_frame).count()),
             sc.max_upload_ms = std::max(sc.max_upload_ms, g_upload_ms), sc.max_ui_ms = std::max(sc.max_ui_ms, g_ui_ms);
        sc.last_frame = now;
        if (++sc.phase <= n) return false;
        double ms = std::chrono::duration<double, std::milli>(now - sc.measure_start).count() / n;
        std::printf("{\"frame_ms\": %.3f, \"max_frame_ms\": %.3f, \"max_upload_ms\": %.3f, \"ui_build_ms\": %.3f, "
                    "\"max_ui_build_ms\": %.3f, \"frames\": %d, \"busy_at_end\": %s}\n",
                    ms, sc.max_ms, sc.max_upload_ms, sc.ui_ms_sum / (n - 1 > 0 ? n - 1 : 1), sc.max_ui_ms, n,
                    s.busy ? "true" : "false");
        std::fflush(stdout);
        sc.phase = 0;
        return true;
    }
    if (cmd == "type") {
        io.AddInputCharactersUTF8(arg.c_str());
        return true;
    }
    if (cmd == "latency") { // types TEXT one character at a time (the prompt editor must be active), each time
        // waiting for its result on screen; prints every keystroke-to-result time and their median
        auto since_typed = [&] { return std::chrono::duration<double, std::milli>(clock_type::now() - sc.typed_at).count(); };
        const run_result* newest = s.next_result ? s.next_result.get() : s.result.get();
        if (sc.phase > 0 && !sc.arrived && newest && newest->request_id != sc.result_at_type && newest->prompt == s.prompt) {
            const run_result& r = *newest;
            sc.arrived = true;
            sc.arrivals.push_back(since_typed());
            sc.worker_ms.push_back(r.report.ms + r.scores_ms + r.pixels_ms);
        }
        if (sc.phase > 0 && !(settled && result_is_current(s))) {
            if (since_typed() > 60000) throw gb::error("script: latency: no result");
            return false;
        }
        if (sc.phase > 0) sc.latencies.push_back(since_typed());
        if (sc.phase == (int)arg.size()) {
            auto median = [](std::vector<double> v) {
                std::sort(v.begin(), v.end());
                return v.empty() ? 0.0 : v[v.size() / 2];
            };
            nlohmann::json j = {{"keystroke_to_result_ms", sc.latencies}, {"median_ms", median(sc.latencies)},
                                {"keystroke_to_arrival_ms", sc.arrivals}, {"median_arrival_ms", median(sc.arrivals)},
                                {"worker_ms", sc.worker_ms}, {"median_worker_ms", median(sc.worker_ms)}};
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
            sc.phase = 0, sc.latencies.clear(), sc.arrivals.clear(), sc.worker_ms.clear();
            return true;
        }
        io.AddInputCharacter((unsigned char)arg[sc.phase++]);
        sc.typed_at = clock_type::now();
        sc.arrived = false;
        sc.result_at_type = newest ? newest->request_id : 0;
        return false;
    }
    if (cmd == "gen-tokens") { // as the Continuation's tokens slider
        s.gen_tokens = std::max(1, std::atoi(arg.c_str()));
        return true;
    }
    if (cmd == "gen-temperature") { // as the Continuation's temperature slider (0: greedy)
        s.gen.temperature = std::max(0.0f, std::min(2.0f, (float)std::atof(arg.c_str())));
        return true;
    }
    if (cmd == "gen-step") { // as the Continuation's step slider
        s.gen_step = std::max(0, std::min(std::atoi(arg.c_str()), replay_steps(s)));
        s.gen_follow = false;
        return true;
    }
    if (cmd == "flood") { // once a run is being computed, N run requests in a row, the prompt one character longer
        // each time (the running one stops, the waiting ones are replaced: only the newest shows)
        if (!ui.work->running() && ++sc.wait_frames < 600) return false;
        sc.wait_frames = 0;
        const int n = std::max(1, std::atoi(arg.c_str()));
        for (int k = 0; k < n; k++) {
            s.prompt += (char)('a' + k % 26);
            ui.work->run(current_run_request(s));
        }
        ui.run_requested = current_run_key(s);
        return true;
    }
    if (cmd == "open") { // as the Model panel's Open button
        open_model(s, *ui.work, arg);
        return true;
    }
    if (cmd == "session") { // as the Model panel's session Load button: a bad file's error shows in the window
        try {
            open_session(s, *ui.work, arg);
            s.status = "loaded session " + arg;
        } catch (const std::exception& e) {
            s.error = e.what();
        }
        return true;
    }
    if (cmd == "scale") { // linear | log | rowmax, as the Head panel's radio buttons
        s.scale = arg == "log" ? SCALE_LOG : arg == "rowmax" ? SCALE_ROW_MAX : SCALE_LINEAR;
        return true;
    }
    if (cmd == "image") { // as typing a path into the Image box (vision models)
        s.image_path = arg;
        return true;
    }
    if (cmd == "rollout") { // on | off: the Image tab's "attention rollout" checkbox
        s.image_rollout = arg == "on";
        return true;
    }
    if (cmd == "tab") { // as clicking the tab
        for (int t = 0; t < TAB_COUNT; t++)
            if (arg == tab_name((analysis_tab)t)) {
                s.tab = (analysis_tab)t;
                return true;
            }
        throw gb::error("script: unknown tab " + arg);
    }
    if (cmd == "demo") { // induction | prev-token | lens | ioi | break-it | temperature, as the Prompt panel's Demos
                         // combo (once a model is loaded)
        if (!s.model) {
            if (++sc.wait_frames > 6000) throw gb::error("script: demo: no model loaded");
            return false;
        }
        sc.wait_frames = 0;
        for (int d = DEMO_NONE + 1; d < DEMO_COUNT; d++)
            if (arg == demo_name((demo_kind)d)) {
                start_demo(s, (demo_kind)d);
                return true;
            }
        throw gb::error("script: unknown demo " + arg + " (induction, prev-token, lens, ioi, break-it, temperature)");
    }
    if (cmd == "colour-by") { // as the grid's combo
        for (int m = 0; m < COLOUR_COUNT; m++)
            if (arg == colour_name((colour_mode)m)) {
                s.colour_by = (colour_mode)m;
                if (m == COLOUR_PATTERN) s.induction_test = false;
                return true;
            }
        throw gb::error("script: unknown colour-by " + arg);
    }
    if (cmd == "corrupt") { // as typing into the Patching tab's corrupted prompt box
        s.corrupt_prompt = arg;
        return true;
    }
    if (cmd == "select-token") { // as clicking a token chip
        s.sel_token = std::atoi(arg.c_str());
        return true;
    }
    if (cmd == "save-session") { // as the Model panel's Save with FILE in its box
        save_session(s, arg);
        s.status = "saved session " + arg;
        return true;
    }
    if (cmd == "export") { // as the Model panel's Export with DIR in its box (without window.png)
        std::string wrote = export_capture(s, arg);
        s.status = "exported " + wrote + " to " + arg;
        return true;
    }
    if (cmd == "wait-running") { // until that analysis is running with some progress made (for cancellation tests)
        analysis_kind k = arg == "lens" ? ANALYSIS_LENS : arg == "patching" ? ANALYSIS_PATCHING : ANALYSIS_COUNT;
        if (k == ANALYSIS_COUNT) throw gb::error("script: wait-running lens|patching, not " + arg);
        if (s.analysis[k].busy && s.analysis[k].progress > 0) {
            sc.wait_frames = 0;
            return true;
        }
        if (++sc.wait_frames > 6000) throw gb::error("script: " + arg + " never ran");
        return false;
    }
    if (cmd == "wheel") { // the mouse wheel turned N notches (negative: down) where the mouse is (see hover)
        io.MouseWheel = (float)std::atof(arg.c_str());
        return true;
    }
    if (cmd == "frames") { // let N frames pass
        if (++sc.phase < std::max(1, std::atoi(arg.c_str()))) return false;
        sc.phase = 0;
        return true;
    }
    if (cmd == "key") { // one frame down, one frame up
        int k = arg == "end" ? GLFW_KEY_END : arg == "backspace" ? GLFW_KEY_BACKSPACE : arg == "enter" ? GLFW_KEY_ENTER : -1;
        if (k < 0) throw gb::error("script: unknown key " + arg);
        io.KeysDown[k] = sc.phase == 0;
        return sc.phase++ == 1 ? (sc.phase = 0, true) : false;
    }
    if (cmd == "hover") { // the mouse rests on a widget (its tooltip shows from the next frame)
        auto it = ui.widgets.find(arg);
        if (it == ui.widgets.end()) {
            if (++sc.wait_frames > 120) throw gb::error("script: no widget named '" + arg + "'");
            return false;
        }
        sc.wait_frames = 0;
        sc.hovering = true;
        sc.hover_at = io.MousePos = ImVec2((it->second.x + it->second.z) / 2, (it->second.y + it->second.w) / 2);
        return true;
    }
    if (cmd == "click" || cmd == "rclick") {
        auto it = ui.widgets.find(arg);
        if (it == ui.widgets.end()) {
            if (++sc.wait_frames > 120) throw gb::error("script: no widget named '" + arg + "'");
            return false;
        }
        ImVec4 r = it->second;
        sc.hovering = false;
        io.MousePos = ImVec2((r.x + r.z) / 2, (r.y + r.w) / 2);
        int button = cmd == "click" ? 0 : 1;
        if (sc.phase == 0) io.MouseDown[button] = false;      // move there first
        else if (sc.phase == 1) io.MouseDown[button] = true;  // press
        else io.MouseDown[button] = false;                    // release
        if (++sc.phase == 3) {
            sc.phase = 0;
            sc.wait_frames = 0;
            return true;
        }
        return false;
    }
    throw gb::error("script: unknown command '" + cmd + "'");
}

// ---------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------
static void glfw_error(int code, const char* msg) { std::fprintf(stderr, "glfw error %d: %s\n", code, msg); }

// A line about the settings for the status bar (shown with the next model load's warnings) and the log.
static void add_note(app_state& s, const std::string& note) {
    std::fprintf(stderr, "glassbox: %s\n", note.c_str());
    s.settings_note += (s.settings_note.empty() ? "" : "; ") + note;
}

// Sets s.config_dir (when the run persists and the folder can be made) and returns the remembered settings
// (defaults when there are none, or when the file is unreadable or malformed: said once, the app goes on).
static app_settings open_settings(app_state& s, bool persist) {
    s.config_dir.clear();
    if (!persist) return {};
    const std::string dir = config_dir_path();
    if (dir.empty()) {
        add_note(s, "no config folder (neither XDG_CONFIG_HOME nor HOME is set): settings are not remembered");
        return {};
    }
    if (std::string err = make_config_dir(dir); !err.empty()) {
        add_note(s, err + ": settings are not remembered");
        return {};
    }
    s.config_dir = dir;
    std::string note;
    app_settings a = read_settings(dir, &note);
    if (!note.empty()) add_note(s, note);
    return a;
}

// glassbox-20250101-120000.png in the working folder, never overwriting an earlier one.
static std::string timestamped_png() {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    std::string base = std::string("glassbox-") + stamp, path = base + ".png";
    for (int i = 2; std::ifstream(path).good(); i++) path = base + "-" + std::to_string(i) + ".png";
    return path;
}

// Files a vision model reads (by extension): dropped on the window, they become its image.
static bool is_image_path(const std::string& p) {
    std::string ext = p.substr(p.find_last_of('.') == std::string::npos ? p.size() : p.find_last_of('.'));
    for (char& ch : ext) ch = (char)std::tolower((unsigned char)ch);
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".gif" || ext == ".tga";
}

static std::vector<std::string> g_dropped; // filled by GLFW's drop callback, consumed by the frame loop
static void on_drop(GLFWwindow*, int n, const char** paths) {
    for (int i = 0; i < n; i++) g_dropped.push_back(paths[i]);
}

// Ctrl+C or a kill in the terminal closes the window as its close button does, so that the window's size is
// remembered; a second one ends the app at once (SA_RESETHAND), e.g. while a large model is still loading.
static volatile std::sig_atomic_t g_quit = 0;
static void on_quit_signal(int) { g_quit = 1; }
static void catch_quit_signals() {
    struct sigaction sa = {};
    sa.sa_handler = on_quit_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

int main(int argc, char** argv) {
    gb::keep_freed_buffers_in_heap();
    options opt;
    try {
        opt = parse_options(argc, argv);
    } catch (const gb::error& e) {
        std::fprintf(stderr, "error: %s (see glassbox --help)\n", e.what());
        return 2;
    }
    app_state s;
    script_runner script;
    if (!opt.script.empty()) {
        std::ifstream f(opt.script);
        if (!f) {
            std::fprintf(stderr, "error: cannot open script %s\n", opt.script.c_str());
            return 2;
        }
        for (std::string l; std::getline(f, l);)
            if (!l.empty() && l[0] != '#') script.lines.push_back(l);
    }
    std::string model_path = opt.model; // else the session's, the last one opened, or the embedded default (below)
    // settings naming layers and heads wait for the model they are meant for (adopt_model applies them)
    pending_settings startup;
    try {
        if (!opt.session.empty()) {
            session_file f = read_session(opt.session);
            s.prompt = f.prompt;
            s.bos = f.bos;
            apply_session_inputs(s, f);
            startup = f.settings;
            if (opt.model.empty() && !f.model.empty()) model_path = f.model;
        }
        if (opt.prompt_given) s.prompt = opt.prompt;
        if (!opt.image.empty()) s.image_path = opt.image;
        if (opt.bos) s.bos = true;
        if (opt.gl) s.use_gl = true;
        s.budget_mb = (size_t)opt.budget_mb;
        bool from_cli = false;
        if (!opt.ablate.empty() || !opt.layers.empty() || !opt.heads.empty() || !opt.experts.empty()) {
            startup.ablation = gb::parse_ablation(opt.ablate, opt.layers, opt.heads, opt.experts);
            startup.has_ablation = from_cli = true;
        }
        if (opt.sel_layer >= 0) startup.sel_layer = opt.sel_layer, startup.sel_head = opt.sel_head, from_cli = true;
        if (opt.sel_token >= 0) startup.sel_token = opt.sel_token, from_cli = true;
        if (from_cli) startup.source = startup.source.empty() ? "command line" : startup.source + " + command line";
        if (startup.has_ablation || startup.sel_layer >= 0 || startup.sel_token >= 0 || startup.has_tokens) s.pending = startup;
    } catch (const gb::error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    const bool headless_job = !opt.screenshot.empty() || !opt.script.empty();
    // What the app remembers: a window always; a screenshot or script run only when asked (--remember, or
    // GLASSBOX_CONFIG_DIR), so that docs and tests neither depend on nor change the user's settings.
    const char* env_dir = std::getenv("GLASSBOX_CONFIG_DIR");
    const app_settings saved = open_settings(s, !headless_job || opt.remember || (env_dir && *env_dir));
    s.recent_models = existing_paths(saved.recent);
    std::string restoring; // the last model, being reopened: if it fails to load, the default is opened instead
    if (model_path.empty() && !saved.last_model.empty()) {
        std::error_code ec;
        if (std::filesystem::exists(saved.last_model, ec)) model_path = restoring = saved.last_model;
        else add_note(s, "the last model, " + saved.last_model + ", no longer exists: opened the default model");
    }
    if (model_path.empty()) {
        try {
            model_path = gb::default_model_path();
        } catch (const gb::error& e) {
            s.error = e.what();
        }
    }

    glfwSetErrorCallback(glfw_error);
    if (!glfwInit()) {
        std::fprintf(stderr, "error: cannot open a window (no display? try xvfb-run -a glassbox ...)\n");
        return 2;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    if (headless_job) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
    // the size: --size, else the remembered one, else the default; the position where it was, when that is still
    // on a monitor (moved before the window shows, so it does not jump)
    int win_w = opt.width, win_h = opt.height;
    const bool restore_size = !opt.size_given && remembered_size(saved, &win_w, &win_h);
    if (restore_size && saved.maximized && !headless_job) glfwWindowHint(GLFW_MAXIMIZED, GLFW_TRUE);
    const bool restore_pos = position_on_screen(saved);
    if (restore_pos) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
    GLFWwindow* win = glfwCreateWindow(win_w, win_h, "Glassbox", nullptr, nullptr);
    if (!win) {
        std::fprintf(stderr, "error: cannot create an OpenGL 3.3 window\n");
        glfwTerminate();
        return 2;
    }
    if (restore_pos) {
        glfwSetWindowPos(win, saved.x, saved.y);
        glfwShowWindow(win);
    }
    glfwMakeContextCurrent(win);
    glfwSwapInterval(headless_job ? 0 : 1);
    glfwSetDropCallback(win, on_drop);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    // ImGui's own state goes to the config folder, never the working one (ImGui's default); none when the run
    // does not persist. io.IniFilename points into ini_path, which outlives the context.
    const std::string ini_path = s.config_dir.empty() ? "" : s.config_dir + "/imgui.ini";
    io.IniFilename = ini_path.empty() ? nullptr : ini_path.c_str();
    ImGui::StyleColorsDark();
    ImGuiStyle& st = ImGui::GetStyle();
    st.WindowRounding = 4;
    st.FrameRounding = 3;
    st.WindowPadding = ImVec2(10, 8);
    font_state fonts;
    find_cjk_font(fonts);
    build_fonts(fonts);
    ImGui_ImplGlfw_InitForOpenGL(win, true);
    ImGui_ImplOpenGL3_Init("#version 330");

    int exit_code = 0;
    {
        worker work;
        work.keep_stored = opt.keep_stored;
        analysis_worker analyses;
        ui_context ui;
        ui.work = &work;
        ui.analysis = &analyses;
        ui.headless = headless_job;
        if (!model_path.empty()) work.load(model_path);
        const std::optional<pending_settings> startup_pending = s.pending; // for the default, if `restoring` fails
        std::string pending;       // inputs seen last frame
        auto changed_at = clock_type::now();
        const gb::model* picked_for = nullptr; // model for which a default head was chosen
        std::pair<uint64_t, int> colour_asked{0, -1}; // (result, scale) last sent to be re-coloured
        std::string glyphs_for;                          // inputs the font atlas was last checked for
        auto started = clock_type::now();
        int settled_frames = 0;

        work.wake = [] { glfwPostEmptyEvent(); };
        if (!s.config_dir.empty()) catch_quit_signals(); // only to save the settings on the way out
        while (!glfwWindowShouldClose(win) && !g_quit) {
            // Frames with nothing to show wait for input, for the worker (it wakes the loop when it publishes) or
            // for the debounce to end. Drawing is CPU work where GL is software (Mesa's llvmpipe): a loop that
            // spins takes a core from the forward it waits for. Scripts step frame by frame, except while
            // `latency` waits for a result, which measures the app as a user runs it.
            const bool may_wait = !headless_job || script.latency_waiting();
            const bool animating = s.next_pixels || s.loading || ImGui::IsAnyMouseDown() ||
                                   !ImGui::GetIO().InputQueueCharacters.empty(); // typed, not yet seen by a frame
            if (may_wait && !animating) {
                // inputs changed by the last frame (typing) are sent once the debounce has passed
                const std::string key_now = s.model ? current_run_key(s) : "";
                const double debounce = headless_job ? 0.0 : 0.001 * run_debounce_ms;
                const double debounce_left =
                    key_now == ui.run_requested ? 1.0
                    : key_now != pending
                        ? debounce
                        : std::max(0.0, debounce - std::chrono::duration<double>(clock_type::now() - changed_at).count());
                const bool working = s.busy || !analyses.idle(); // progress bars move, results come
                glfwWaitEventsTimeout(std::max(0.001, std::min({working ? 0.1 : 0.5, debounce_left})));
            } else {
                glfwPollEvents();
            }
            work.poll(s);
            analyses.poll(s);
            if (!restoring.empty() && !s.loading) { // the last model loaded, or failed to: then the default, once
                if (!s.model && !s.error.empty()) {
                    add_note(s, "could not reopen the last model (" + s.error + "): opened the default model");
                    s.error.clear();
                    s.warning.clear(); // "not applied (its model did not load)": they wait for the default now
                    s.pending = startup_pending;
                    try {
                        work.load(gb::default_model_path());
                    } catch (const gb::error& e) {
                        s.error = e.what();
                    }
                }
                restoring.clear();
            }
            // a new result (or a re-colouring) replaces the shown one once its textures are all uploaded:
            // the screen always shows one complete result (large ones take a few frames, ~6 ms of uploads each)
            auto upload_start = clock_type::now();
            bool uploaded = s.next_pixels && upload_heatmaps(ui.hm, s.next_pixels, 6.0);
            if (s.next_pixels) g_upload_ms = std::chrono::duration<double, std::milli>(clock_type::now() - upload_start).count();
            else g_upload_ms = 0;
            if (uploaded) {
                s.pixels = s.next_pixels;
                if (s.next_result && s.next_result->request_id == s.pixels->request_id) {
                    s.result = s.next_result;
                    s.result_version++;
                }
                s.next_result.reset();
                s.next_pixels.reset();
            }
            // the scale changed: the worker re-colours the shown result (newest request wins)
            if (s.result && s.pixels && !s.next_result && s.pixels->scale != s.scale &&
                colour_asked != std::make_pair(s.result->request_id, (int)s.scale)) {
                work.colour(colour_request{s.result, s.scale});
                colour_asked = {s.result->request_id, (int)s.scale};
            }
            for (const std::string& p : g_dropped) { // an image is classified by the vision model; anything else opens
                if (is_image_path(p)) s.image_path = p;
                else open_model(s, work, p);
            }
            g_dropped.clear();

            // re-run when the inputs changed and have been stable for run_debounce_ms (a newer run stops an older
            // one between layers, so this only merges a burst of keys)
            std::string key;
            if (s.model) {
                if (s.gen_step > replay_steps(s)) s.gen_step = 0, s.gen_follow = false; // the prompt was edited: no replay
                key = current_run_key(s);
                if (key != pending) pending = key, changed_at = clock_type::now();
                // a generation publishes each step's result with the step slider following it: those inputs
                // need no run of their own (the follow ends with the generation, or when a run replaces it)
                const run_result* newest = s.next_result ? s.next_result.get() : s.result.get();
                if (s.gen_follow && newest && newest->key == key) ui.run_requested = key;
                if (s.gen_follow && !s.generating) s.gen_follow = false;
                bool quiet = clock_type::now() - changed_at > std::chrono::milliseconds(headless_job ? 0 : run_debounce_ms);
                if (key != ui.run_requested && quiet) {
                    try {
                        gb::check_ablation(s.ablation, s.model->config);
                        work.run(current_run_request(s)); // stops a running generation
                        s.gen_follow = false;
                    } catch (const gb::error& e) {
                        s.error = e.what();
                    }
                    ui.run_requested = key;
                }
            }
            // a sensible first head to show: the strongest previous-token head outside layer 0
            if (s.result && s.result->model.get() != picked_for) {
                picked_for = s.result->model.get();
                if (!s.selection_pinned) { // a head asked for (command line, session) is kept
                    const auto& pr = s.result->scores.score[gb::SCORE_PREV_TOKEN];
                    int H = s.result->cap().n_head, best = 0;
                    for (int k = 0; k < (int)pr.size(); k++)
                        if ((k / H > 0 || pr.size() == (size_t)H) && pr[k] > pr[best]) best = k;
                    s.sel_layer = best / H, s.sel_head = best % H;
                }
                s.selection_pinned = false;
            }
            update_demo(s); // a demo's head and caption, once its run is shown
            if (s.model) key = current_run_key(s); // the demo may have changed the inputs (Break it applies a row)
            // the analyses the open tab and the grid's mode show, when their inputs changed (analysis threads)
            const bool analyses_done = schedule_analyses(s, ui);
            // glyphs the shown text needs: prompt, tokens, top-k tokens, continuation, analyses' tokens
            std::string glyph_key = std::to_string(s.result_version) + "|" +
                                    std::to_string((uintptr_t)s.generated.get()) + "|" + std::to_string((uintptr_t)s.lens.get()) +
                                    "|" + std::to_string((uintptr_t)s.patching.get()) + "|" + std::to_string((uintptr_t)s.breaking.get()) +
                                    "|" + std::to_string((uintptr_t)s.sampling.get()) + "|" + s.prompt + "\x1f" + s.corrupt_prompt +
                                    "\x1f" + s.demo_caption;
            if (glyph_key != glyphs_for && need_glyphs(fonts, glyph_text(s))) {
                build_fonts(fonts);
                ImGui_ImplOpenGL3_DestroyFontsTexture();
                ImGui_ImplOpenGL3_CreateFontsTexture();
                // glyphs no font has are remembered so we do not rebuild every frame
                ImFont* f = io.Fonts->Fonts[0];
                for (ImWchar c : fonts.extra)
                    if (!f->FindGlyphNoFallback(c)) fonts.missing.insert(c);
            }
            glyphs_for = glyph_key;

            ImGui_ImplOpenGL3_NewFrame();
            ImGui_ImplGlfw_NewFrame();
            int fb_w, fb_h;
            glfwGetFramebufferSize(win, &fb_w, &fb_h);
            bool settled = s.model && s.result && !s.busy && !s.loading && work.idle() && key == ui.run_requested &&
                           !s.next_pixels && s.pixels && s.pixels->scale == s.scale && ui.hm.shown == s.pixels &&
                           analyses_done && s.tab == ui.tab_shown && !s.demo_waiting;
            if (!script.done()) {
                try {
                    if (script_step(script, s, ui, settled, fb_w, fb_h)) script.next++;
                } catch (const gb::error& e) {
                    std::fprintf(stderr, "error: %s\n", e.what());
                    exit_code = 1;
                    break;
                }
            }
            auto ui_start = clock_type::now();
            ImGui::NewFrame();

            // keyboard: Ctrl+O open, Ctrl+S save session, Ctrl+E export PNG, arrows move the selected head
            if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) s.want_focus_model_path = true;
            if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_S, false)) {
                try {
                    save_session(s, s.session_path);
                    s.status = "saved session " + s.session_path;
                } catch (const std::exception& e) {
                    s.error = e.what();
                }
            }
            if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_E, false)) ui.request_screenshot = true, ui.screenshot_path = timestamped_png();
            if (!io.WantTextInput && s.result) {
                const int L = s.result->cap().n_layer, H = s.result->cap().n_head;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.sel_head = (s.sel_head + H - 1) % H;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.sel_head = (s.sel_head + 1) % H;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_UpArrow))) s.sel_layer = (s.sel_layer + L - 1) % L;
                if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_DownArrow))) s.sel_layer = (s.sel_layer + 1) % L;
            }

            draw_layout(s, ui, io.DisplaySize.x, io.DisplaySize.y);
            ImGui::Render();
            g_ui_ms = std::chrono::duration<double, std::milli>(clock_type::now() - ui_start).count();
            glViewport(0, 0, fb_w, fb_h);
            glClearColor(0.08f, 0.09f, 0.11f, 1.0f);
            glClear(GL_COLOR_BUFFER_BIT);
            ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

            if (ui.request_screenshot) {
                ui.request_screenshot = false;
                try {
                    write_png(ui.screenshot_path, fb_w, fb_h);
                    s.status = "saved " + ui.screenshot_path;
                } catch (const std::exception& e) {
                    s.error = e.what();
                }
            }
            // headless screenshot: once the result is on screen for a few frames, write it and exit
            if (!opt.screenshot.empty() && script.done()) {
                settled_frames = settled ? settled_frames + 1 : 0;
                bool failed = !s.error.empty() && !s.busy && !s.loading && work.idle();
                if (settled_frames >= 3) {
                    if (!s.warning.empty()) std::fprintf(stderr, "warning: %s\n", s.warning.c_str());
                    try {
                        write_png(opt.screenshot, fb_w, fb_h);
                        std::printf("wrote %s (%dx%d)\n", opt.screenshot.c_str(), fb_w, fb_h);
                    } catch (const std::exception& e) {
                        std::fprintf(stderr, "error: %s\n", e.what());
                        exit_code = 1;
                    }
                    break;
                }
                if (failed && !s.result) {
                    std::fprintf(stderr, "error: %s\n", s.error.c_str());
                    exit_code = 2;
                    break;
                }
            }
            if (!opt.script.empty() && script.done() && opt.screenshot.empty()) break;
            if (headless_job && clock_type::now() - started > std::chrono::seconds(120)) {
                std::fprintf(stderr, "error: timed out waiting for the result\n");
                exit_code = 1;
                break;
            }
            glfwSwapBuffers(win);
        }
        free_heatmaps(ui.hm);
    }
    if (!s.config_dir.empty()) { // the window's size and place, for the next start
        std::string err = update_settings(s.config_dir, [&](app_settings& a) { read_placement(win, a); });
        if (!err.empty()) std::fprintf(stderr, "glassbox: %s: the window's size is not remembered\n", err.c_str());
    }
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(win);
    glfwTerminate();
    return exit_code;
}
