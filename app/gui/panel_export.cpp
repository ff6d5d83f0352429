// A panel's export: the extra frame, the SVG made from its draw lists, the PNG rendered offscreen at 2x.
#include "panel_export.h"

#define GLFW_INCLUDE_NONE
#include <epoxy/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h> // ImGuiWindow: a window's draw list and its child windows
#include <stb_image_write.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "layout.h"
#include "script.h"
#include "text_scale.h"
#include "util/error.h"

namespace gbui {

namespace {

// "#rrggbb" and, when not opaque, the opacity attribute's value.
std::string colour_attrs(ImU32 c, const char* what) {
    char b[96];
    const int r = (c >> IM_COL32_R_SHIFT) & 255, g = (c >> IM_COL32_G_SHIFT) & 255, bl = (c >> IM_COL32_B_SHIFT) & 255;
    const int a = (c >> IM_COL32_A_SHIFT) & 255;
    if (a == 255) snprintf(b, sizeof b, "%s=\"#%02x%02x%02x\"", what, r, g, bl);
    else snprintf(b, sizeof b, "%s=\"#%02x%02x%02x\" %s-opacity=\"%.3f\"", what, r, g, bl, what, a / 255.0);
    return b;
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '"') out += "&quot;";
        else if ((unsigned char)c < 0x20 && c != '\t') continue; // not allowed in XML 1.0
        else out += c;
    }
    return out;
}

void append_utf8(std::string& s, unsigned c) {
    if (c < 0x80) s += (char)c;
    else if (c < 0x800) s += (char)(0xC0 | c >> 6), s += (char)(0x80 | (c & 63));
    else s += (char)(0xE0 | c >> 12), s += (char)(0x80 | (c >> 6 & 63)), s += (char)(0x80 | (c & 63));
}

std::string base64(const std::vector<unsigned char>& d) {
    static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < d.size(); i += 3) {
        const unsigned v = d[i] << 16 | (i + 1 < d.size() ? d[i + 1] << 8 : 0) | (i + 2 < d.size() ? d[i + 2] : 0);
        out += t[v >> 18 & 63], out += t[v >> 12 & 63];
        out += i + 1 < d.size() ? t[v >> 6 & 63] : '=';
        out += i + 2 < d.size() ? t[v & 63] : '=';
    }
    return out;
}

// A glyph found on screen: where its text starts (in the unturned frame), its size and what it is.
struct placed_glyph {
    float x = 0, top = 0, px = 0, advance = 0, space = 0, ascent = 0; // origin, line top, font px, advances (scaled)
    ImU32 col = 0;
    bool turned = false; // drawn turned 90 degrees (add_text_vertical): reading bottom to top
    unsigned codepoint = 0;
};

// A texture's level-0 RGBA pixels (read back from GL once per export).
struct texture_pixels {
    int w = 0, h = 0;
    std::vector<unsigned char> rgba; // [h][w][4]
};

class svg_builder {
public:
    svg_builder(ImVec2 origin, float w, float h) : origin_(origin), w_(w), h_(h) {
        ImFontAtlas* atlas = ImGui::GetIO().Fonts;
        font_tex_ = atlas->TexID, white_ = atlas->TexUvWhitePixel;
        for (ImFont* f : atlas->Fonts)
            for (const ImFontGlyph& g : f->Glyphs)
                glyphs_[key(g.U0, g.V0)] = {f, &g};
    }
    void add_list(const ImDrawList* dl) {
        for (const ImDrawCmd& cmd : dl->CmdBuffer) {
            if (cmd.UserCallback || cmd.ElemCount == 0) continue;
            open_clip(cmd.ClipRect);
            add_command(dl, cmd);
            flush_text();
            close_clip();
        }
    }
    std::string finish(const std::string& title) {
        std::ostringstream o;
        o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << w_
          << "\" height=\"" << h_ << "\" viewBox=\"0 0 " << w_ << " " << h_
          << "\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n<title>" << xml_escape(title) << "</title>\n";
        if (!defs_.str().empty()) o << "<defs>\n" << defs_.str() << "</defs>\n";
        o << body_.str() << "</svg>\n";
        return o.str();
    }

private:
    ImVec2 origin_;
    float w_, h_;
    ImTextureID font_tex_;
    ImVec2 white_;
    std::map<std::pair<long, long>, std::pair<const ImFont*, const ImFontGlyph*>> glyphs_;
    std::map<ImTextureID, texture_pixels> textures_;
    std::map<std::string, int> clips_;
    std::ostringstream body_, defs_;
    std::vector<placed_glyph> run_;
    bool clipped_ = false;

    static std::pair<long, long> key(float u, float v) { return {std::lround(u * 1e5), std::lround(v * 1e5)}; }
    float X(float x) const { return x - origin_.x; }
    float Y(float y) const { return y - origin_.y; }

    void open_clip(const ImVec4& c) {
        const float x0 = std::max(0.0f, X(c.x)), y0 = std::max(0.0f, Y(c.y));
        const float x1 = std::min(w_, X(c.z)), y1 = std::min(h_, Y(c.w));
        clipped_ = x0 > 0.5f || y0 > 0.5f || x1 < w_ - 0.5f || y1 < h_ - 0.5f;
        if (!clipped_) return;
        char r[128];
        snprintf(r, sizeof r, "x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"", x0, y0, std::max(0.0f, x1 - x0),
                 std::max(0.0f, y1 - y0));
        auto it = clips_.find(r);
        if (it == clips_.end()) {
            it = clips_.emplace(r, (int)clips_.size()).first;
            defs_ << "<clipPath id=\"c" << it->second << "\"><rect " << r << "/></clipPath>\n";
        }
        body_ << "<g clip-path=\"url(#c" << it->second << ")\">\n";
    }
    void close_clip() {
        if (clipped_) body_ << "</g>\n";
    }

    // The command's triangles, as ImGui makes them: fans (a, a+k, a+k+1) from a first vertex a; a fan of 4 vertices
    // is a quad (a rectangle, a glyph, an image, a line's segment).
    void add_command(const ImDrawList* dl, const ImDrawCmd& cmd) {
        const ImDrawIdx* idx = dl->IdxBuffer.Data + cmd.IdxOffset;
        const ImDrawVert* vtx = dl->VtxBuffer.Data + cmd.VtxOffset;
        const unsigned n = cmd.ElemCount;
        for (unsigned i = 0; i + 3 <= n;) {
            const ImDrawIdx a = idx[i];
            unsigned m = 1, j = i + 3; // the fan has vertices a .. a+m+1
            if (idx[i + 1] == a + 1 && idx[i + 2] == a + 2)
                while (j + 3 <= n && idx[j] == a && idx[j + 1] == a + m + 1 && idx[j + 2] == a + m + 2) m++, j += 3;
            else m = 0; // not a fan: one triangle as it is
            if (m == 0) {
                const ImDrawVert* t[3] = {&vtx[idx[i]], &vtx[idx[i + 1]], &vtx[idx[i + 2]]};
                polygon(t, 3);
                i += 3;
                continue;
            }
            std::vector<const ImDrawVert*> v;
            for (unsigned k = 0; k < m + 2; k++) v.push_back(&vtx[a + k]);
            if (v.size() == 4) quad(cmd.TextureId, v.data());
            else polygon(v.data(), (int)v.size());
            i = j;
        }
    }

    bool is_white(const ImDrawVert* v) const { return std::fabs(v->uv.x - white_.x) < 1e-6f && std::fabs(v->uv.y - white_.y) < 1e-6f; }

    static ImU32 mean_colour(const ImDrawVert* const* v, int n) {
        unsigned sum[4] = {0, 0, 0, 0};
        for (int i = 0; i < n; i++)
            for (int c = 0; c < 4; c++) sum[c] += v[i]->col >> (8 * c) & 255;
        ImU32 out = 0;
        for (int c = 0; c < 4; c++) out |= (ImU32)((sum[c] + n / 2) / n) << (8 * c);
        return out;
    }

    void polygon(const ImDrawVert* const* v, int n) {
        const ImU32 col = mean_colour(v, n);
        if ((col >> IM_COL32_A_SHIFT & 255) == 0) return;
        flush_text();
        body_ << "<polygon points=\"";
        char b[48];
        for (int i = 0; i < n; i++) {
            snprintf(b, sizeof b, "%s%.2f,%.2f", i ? " " : "", X(v[i]->pos.x), Y(v[i]->pos.y));
            body_ << b;
        }
        body_ << "\" " << colour_attrs(col, "fill") << "/>\n";
    }

    void rect(float x0, float y0, float x1, float y1, ImU32 col) {
        char b[160];
        snprintf(b, sizeof b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" ", X(std::min(x0, x1)), Y(std::min(y0, y1)),
                 std::fabs(x1 - x0), std::fabs(y1 - y0));
        body_ << b << colour_attrs(col, "fill") << "/>\n";
    }

    void quad(ImTextureID tex, const ImDrawVert* const* v) {
        const bool axis = std::fabs(v[0]->pos.y - v[1]->pos.y) < 0.01f && std::fabs(v[1]->pos.x - v[2]->pos.x) < 0.01f &&
                          std::fabs(v[2]->pos.y - v[3]->pos.y) < 0.01f && std::fabs(v[3]->pos.x - v[0]->pos.x) < 0.01f;
        if (tex == font_tex_ && is_white(v[0]) && is_white(v[2])) { // a filled shape
            const ImU32 col = mean_colour(v, 4);
            if ((col >> IM_COL32_A_SHIFT & 255) == 0) return;
            if (!axis) return polygon(v, 4);
            flush_text();
            return rect(v[0]->pos.x, v[0]->pos.y, v[2]->pos.x, v[2]->pos.y, col);
        }
        if (tex == font_tex_) return glyph(v);
        flush_text();
        if (axis) image(tex, v);
    }

    // A glyph quad: the glyph whose atlas corner its first vertex samples, placed in the unturned frame.
    void glyph(const ImDrawVert* const* v) {
        auto it = glyphs_.find(key(v[0]->uv.x, v[0]->uv.y));
        if (it == glyphs_.end()) return; // cut by a fine clip (a text box's edge): left out
        const ImFont* f = it->second.first;
        const ImFontGlyph* g = it->second.second;
        placed_glyph p;
        p.turned = std::fabs(v[1]->pos.x - v[0]->pos.x) < 0.01f && v[1]->pos.y < v[0]->pos.y;
        auto unturn = [&](ImVec2 q) { return p.turned ? ImVec2(-Y(q.y), X(q.x)) : ImVec2(X(q.x), Y(q.y)); };
        const ImVec2 u0 = unturn(v[0]->pos), u2 = unturn(v[2]->pos);
        const float scale = g->Y1 > g->Y0 ? (u2.y - u0.y) / (g->Y1 - g->Y0) : g->X1 > g->X0 ? (u2.x - u0.x) / (g->X1 - g->X0) : 1.0f;
        p.x = u0.x - g->X0 * scale, p.top = u0.y - g->Y0 * scale, p.px = f->FontSize * scale;
        p.advance = g->AdvanceX * scale, p.ascent = f->Ascent * scale;
        const ImFontGlyph* sp = f->FindGlyphNoFallback(' ');
        p.space = sp ? sp->AdvanceX * scale : p.advance;
        p.col = v[0]->col, p.codepoint = g->Codepoint;
        if (!run_.empty()) { // the same line of text: it goes on where the last glyph ended (after spaces, which have no quad)
            const placed_glyph& b = run_.back();
            const float gap = p.x - (b.x + b.advance);
            const float spaces = b.space > 0 ? gap / b.space : 0;
            const bool same = p.turned == b.turned && p.col == b.col && std::fabs(p.px - b.px) < 0.01f &&
                              std::fabs(p.top - b.top) < 0.5f && gap > -0.75f && std::fabs(spaces - std::round(spaces)) * b.space < 0.75f &&
                              spaces < 2.5f; // words of one label, not the next column's
            if (!same) flush_text();
            else
                for (int k = 0; k < (int)std::lround(spaces); k++) {
                    placed_glyph s = b;
                    s.x = b.x + b.advance + k * b.space, s.advance = b.space, s.codepoint = ' ';
                    run_.push_back(s);
                }
        }
        run_.push_back(p);
    }

    void flush_text() {
        if (run_.empty()) return;
        const placed_glyph& a = run_.front();
        std::string text;
        for (const placed_glyph& g : run_) append_utf8(text, g.codepoint);
        // every character at its own x (as ImGui placed it), so that the text keeps its layout in any renderer
        std::string xs;
        char b[256];
        for (const placed_glyph& g : run_) {
            snprintf(b, sizeof b, "%s%.2f", xs.empty() ? "" : " ", g.x);
            xs += b;
        }
        snprintf(b, sizeof b, "\" y=\"%.2f\" font-size=\"%.2f\"%s ", a.top + a.ascent, a.px, a.turned ? " transform=\"rotate(-90)\"" : "");
        body_ << "<text x=\"" << xs << b << colour_attrs(a.col, "fill") << " xml:space=\"preserve\">" << xml_escape(text) << "</text>\n";
        run_.clear();
    }

    const texture_pixels& pixels(ImTextureID tex) {
        auto it = textures_.find(tex);
        if (it != textures_.end()) return it->second;
        texture_pixels& t = textures_[tex];
        GLint last = 0;
        glGetIntegerv(GL_TEXTURE_BINDING_2D, &last);
        glBindTexture(GL_TEXTURE_2D, (GLuint)(intptr_t)tex);
        glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_WIDTH, &t.w);
        glGetTexLevelParameteriv(GL_TEXTURE_2D, 0, GL_TEXTURE_HEIGHT, &t.h);
        if (t.w > 0 && t.h > 0) {
            t.rgba.resize((size_t)t.w * t.h * 4);
            glPixelStorei(GL_PACK_ALIGNMENT, 1);
            glGetTexImage(GL_TEXTURE_2D, 0, GL_RGBA, GL_UNSIGNED_BYTE, t.rgba.data());
        }
        glBindTexture(GL_TEXTURE_2D, (GLuint)last);
        return t;
    }

    // An image (a heatmap's texture): a <rect> per texel in the quad's UV range, or one embedded PNG when that would
    // be too many or the texels are under 1.5 px on screen.
    void image(ImTextureID tex, const ImDrawVert* const* v) {
        const texture_pixels& t = pixels(tex);
        if (t.rgba.empty()) return;
        const float u0 = std::min(v[0]->uv.x, v[2]->uv.x), u1 = std::max(v[0]->uv.x, v[2]->uv.x);
        const float w0 = std::min(v[0]->uv.y, v[2]->uv.y), w1 = std::max(v[0]->uv.y, v[2]->uv.y);
        const int c0 = std::max(0, (int)std::floor(u0 * t.w + 1e-3f)), c1 = std::min(t.w, (int)std::ceil(u1 * t.w - 1e-3f));
        const int r0 = std::max(0, (int)std::floor(w0 * t.h + 1e-3f)), r1 = std::min(t.h, (int)std::ceil(w1 * t.h - 1e-3f));
        if (c1 <= c0 || r1 <= r0) return;
        const float x0 = std::min(v[0]->pos.x, v[2]->pos.x), y0 = std::min(v[0]->pos.y, v[2]->pos.y);
        const float cw = (std::max(v[0]->pos.x, v[2]->pos.x) - x0) / (c1 - c0), ch = (std::max(v[0]->pos.y, v[2]->pos.y) - y0) / (r1 - r0);
        const auto texel = [&](int r, int c) { return &t.rgba[((size_t)r * t.w + c) * 4]; };
        if ((long)(c1 - c0) * (r1 - r0) <= 65536 && cw >= 1.5f && ch >= 1.5f) {
            body_ << "<g class=\"heatmap\" data-rows=\"" << r1 - r0 << "\" data-columns=\"" << c1 - c0 << "\">\n";
            for (int r = r0; r < r1; r++)
                for (int c = c0; c < c1; c++) {
                    const unsigned char* p = texel(r, c);
                    rect(x0 + (c - c0) * cw, y0 + (r - r0) * ch, x0 + (c - c0 + 1) * cw, y0 + (r - r0 + 1) * ch, IM_COL32(p[0], p[1], p[2], 255));
                }
            body_ << "</g>\n";
            return;
        }
        std::vector<unsigned char> region((size_t)(c1 - c0) * (r1 - r0) * 4), png;
        for (int r = r0; r < r1; r++) std::copy_n(texel(r, c0), (size_t)(c1 - c0) * 4, &region[(size_t)(r - r0) * (c1 - c0) * 4]);
        stbi_write_png_to_func([](void* ctx, void* data, int size) {
            auto* out = (std::vector<unsigned char>*)ctx;
            out->insert(out->end(), (unsigned char*)data, (unsigned char*)data + size);
        }, &png, c1 - c0, r1 - r0, 4, region.data(), (c1 - c0) * 4);
        char b[160];
        snprintf(b, sizeof b, "<image x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" preserveAspectRatio=\"none\" ", X(x0), Y(y0),
                 cw * (c1 - c0), ch * (r1 - r0));
        body_ << b << "style=\"image-rendering:pixelated\" href=\"data:image/png;base64," << base64(png) << "\"/>\n";
    }
};

// The window and its visible child windows in the order ImGui renders them (a parent before its children).
void add_window(svg_builder& b, ImGuiWindow* w) {
    b.add_list(w->DrawList);
    for (ImGuiWindow* child : w->DC.ChildWindows)
        if (child->Active && !child->Hidden) add_window(b, child);
}

// Renders the frame's draw data into an offscreen w x h framebuffer and writes it as a PNG.
void render_png(const std::string& path, int w, int h) {
    GLint max_size = 0;
    glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_size);
    if (w > max_size || h > max_size)
        throw gb::error("the panel at 2x (" + std::to_string(w) + "x" + std::to_string(h) + ") is larger than GL allows");
    GLuint tex = 0, fbo = 0;
    glGenTextures(1, &tex);
    glBindTexture(GL_TEXTURE_2D, tex);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    glGenFramebuffers(1, &fbo);
    glBindFramebuffer(GL_FRAMEBUFFER, fbo);
    glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, tex, 0);
    std::string err;
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
        err = "no offscreen framebuffer for the 2x PNG";
    } else {
        glViewport(0, 0, w, h);
        glClearColor(0.08f, 0.09f, 0.11f, 1.0f);
        glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
        try {
            write_png(path, w, h); // reads the bound (offscreen) framebuffer
        } catch (const gb::error& e) {
            err = e.what();
        }
    }
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    glDeleteFramebuffers(1, &fbo);
    glDeleteTextures(1, &tex);
    if (!err.empty()) throw gb::error(err);
}

} // namespace

std::string window_svg(const std::string& id, float w, float h, const std::string& title) {
    ImGuiWindow* win = ImGui::FindWindowByName(id.c_str());
    if (!win || !win->Active) throw gb::error("the " + id + " panel was not drawn");
    svg_builder b(win->Pos, w, h);
    add_window(b, win);
    return b.finish(title);
}

void run_panel_export(app_state& s, ui_context& ui, font_state& fonts) {
    if (ui.exports.empty()) return;
    const panel_export job = ui.exports.front();
    ui.exports.erase(ui.exports.begin());
    const auto at = ui.drawn.find("panel " + job.panel);
    if (at == ui.drawn.end()) {
        s.error = "cannot export the " + job.panel + " panel: it is not on screen";
        return;
    }
    const ImVec2 size(std::round(at->second.z - at->second.x), std::round(at->second.w - at->second.y));
    const float k = job.svg ? 1.0f : 2.0f, scale = current_ui_scale();
    // what the extra frame writes that the next one reads (the layout's measures, the widgets scripts click)
    const auto content_h = ui.content_h;
    const auto widgets = ui.widgets;
    const auto widget_frame = ui.widget_frame;
    const auto drawn = ui.drawn;
    const float prompt_h = ui.prompt_wanted_h;
    const std::string focused = ui.focused_panel, hovered = ui.hovered_panel;
    if (k != 1) apply_ui_scale(fonts, scale * k, fonts.large);
    ImGuiStyle& st = ImGui::GetStyle();
    const bool aa_lines = st.AntiAliasedLines, aa_tex = st.AntiAliasedLinesUseTex, aa_fill = st.AntiAliasedFill;
    if (job.svg) st.AntiAliasedLines = st.AntiAliasedLinesUseTex = st.AntiAliasedFill = false; // plain triangles
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(size.x * k, size.y * k);
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); // nothing hovered
    if (io.DeltaTime <= 0) io.DeltaTime = 1e-4f;
    ImGui::NewFrame();
    draw_panel_alone(s, ui, job.panel, io.DisplaySize);
    ImGui::Render();
    try {
        if (job.svg) {
            std::ofstream f(job.path, std::ios::binary);
            f << window_svg(job.panel, size.x, size.y, "Glassbox: " + job.path.substr(job.path.rfind('/') + 1));
            if (!f) throw gb::error("cannot write " + job.path);
        } else {
            render_png(job.path, (int)(size.x * k), (int)(size.y * k));
        }
        ui.exported.push_back(job.path);
        s.status = "exported " + job.path;
    } catch (const gb::error& e) {
        s.error = e.what();
    }
    st.AntiAliasedLines = aa_lines, st.AntiAliasedLinesUseTex = aa_tex, st.AntiAliasedFill = aa_fill;
    if (k != 1) apply_ui_scale(fonts, scale, fonts.large);
    ui.content_h = content_h, ui.widgets = widgets, ui.widget_frame = widget_frame, ui.drawn = drawn, ui.prompt_wanted_h = prompt_h;
    ui.focused_panel = focused, ui.hovered_panel = hovered;
}

} // namespace gbui
