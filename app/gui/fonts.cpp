// Font building (base ranges plus the glyphs asked for) and glyph coverage of the text the window shows.
#include "fonts.h"

#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h> // ImTextCharFromUtf8

#include <cmath>
#include <cstdint>
#include <fstream>

#include "patching_inputs.h"
#include "ui.h"

namespace gbui {

static const char* dejavu = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

// One font at `size` px from DejaVu Sans (ImGui's own when it is missing), the CJK font merged in when there is one.
static ImFont* add_font(font_state& fs, float size) {
    ImGuiIO& io = ImGui::GetIO();
    ImFontConfig cfg;
    cfg.OversampleH = size >= 22 ? 1 : 2; // large glyphs gain nothing from it, and the atlas grows with the square
    ImFont* f = nullptr;
    if (std::ifstream(dejavu).good()) {
        f = io.Fonts->AddFontFromFileTTF(dejavu, size, &cfg, fs.ranges.Data);
    } else {
        cfg.SizePixels = size;
        f = io.Fonts->AddFontDefault(&cfg);
    }
    if (!fs.cjk.empty()) {
        ImFontConfig merge;
        merge.MergeMode = true;
        merge.OversampleH = 1;
        io.Fonts->AddFontFromFileTTF(fs.cjk.c_str(), size, &merge, fs.ranges.Data);
    }
    return f;
}

void build_fonts(font_state& fs) {
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    ImFontGlyphRangesBuilder b;
    static const ImWchar base[] = {0x0020, 0x024F, 0x0370, 0x03FF, 0x0400, 0x04FF, 0x2000, 0x206F, 0x2190, 0x21FF,
                                   0x2200, 0x22FF, 0x2400, 0x243F, 0x25A0, 0x25FF, 0xFFFD, 0xFFFD, 0};
    b.AddRanges(base);
    for (ImWchar c : fs.extra) b.AddChar(c);
    fs.ranges.clear();
    b.BuildRanges(&fs.ranges);
    if (fs.size_px <= 0) fs.size_px = 15.0f;
    add_font(fs, fs.size_px); // Fonts[0]: every panel's
    if (fs.large) add_font(fs, std::round(fs.size_px * 1.4f));
    io.Fonts->Build();
}

ImFont* large_font() {
    ImGuiIO& io = ImGui::GetIO();
    return io.Fonts->Fonts.Size > 1 ? io.Fonts->Fonts[1] : nullptr;
}

bool need_glyphs(font_state& fs, const std::string& text) {
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

std::string glyph_text(const app_state& s) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    std::string text = s.prompt;
    if (s.result) {
        for (const std::string& p : s.result->cap().pieces) text += p;
        for (const auto* list : {&s.result->pred.top, &s.result->pred.base_top})
            for (const gb::token_prob& t : *list) text += gb::token_text(s.result->model->tok, t.id);
    }
    if (s.generated) text += s.generated->text;
    const auto lens = output_of<lens_output>(s, ANALYSIS_LENS);
    const auto patching = output_of<patch_output>(s, ANALYSIS_PATCHING);
    const auto breaking = output_of<break_output>(s, ANALYSIS_BREAK);
    const auto sampling = output_of<sampling_output>(s, ANALYSIS_SAMPLING);
    if (lens) {
        const gb::tokenizer& tok = lens->from->model->tok;
        for (int id : lens->lens.top_ids) text += gb::token_text(tok, id);
    }
    if (patching) {
        const gb::tokenizer& tok = patching->model->tok;
        for (int id : patching->corrupt_ids) text += gb::token_text(tok, id);
        for (const gb::token_prob& t : patching->corrupt_top) text += gb::token_text(tok, t.id);
    }
    if (breaking)
        for (const gb::break_row& r : breaking->res.rows) text += r.explanation;
    if (sampling) {
        const gb::tokenizer& tok = sampling->from->model->tok;
        for (const sampling_column& c : sampling->columns) {
            text += c.text;
            for (int id : c.dist.ids) text += gb::token_text(tok, id);
        }
    }
    text += pin.corrupt + s.demos.caption;
    return text;
}

void refresh_glyphs(font_state& fs, const app_state& s) {
    auto& pin = inputs_of<patching_inputs>(s, TAB_PATCHING);
    std::string glyph_key = std::to_string(s.result_version) + "|" + std::to_string((uintptr_t)s.generated.get());
    for (analysis_kind k : {ANALYSIS_LENS, ANALYSIS_PATCHING, ANALYSIS_BREAK, ANALYSIS_SAMPLING}) // what glyph_text reads
        glyph_key += "|" + std::to_string((uintptr_t)s.output[k].get());
    glyph_key += "|" + s.prompt + "\x1f" + pin.corrupt + "\x1f" + s.demos.caption;
    if (glyph_key != fs.checked_for && need_glyphs(fs, glyph_text(s))) {
        build_fonts(fs);
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
        // glyphs no font has are remembered so we do not rebuild every frame
        ImFont* f = ImGui::GetIO().Fonts->Fonts[0];
        for (ImWchar c : fs.extra)
            if (!f->FindGlyphNoFallback(c)) fs.missing.insert(c);
    }
    fs.checked_for = glyph_key;
}

void find_cjk_font(font_state& fs) {
    for (const char* p : {"/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
                          "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
                          "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
                          "/usr/share/fonts/truetype/arphic/uming.ttc"})
        if (std::ifstream(p).good()) {
            fs.cjk = p;
            return;
        }
}

} // namespace gbui
