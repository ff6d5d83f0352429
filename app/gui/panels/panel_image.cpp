// Image (vision models): the picture as the model sees it, cut into its patch grid, with where one position
// looks laid over it: the selected head's attention from [CLS] (or a clicked patch), or the attention rollout
// through every layer. Patches the query barely attends to are darkened; the brightest are where it looks. The
// Attribution tab draws the same picture with the class difference's saliency over the patches (image_saliency).
#include <algorithm>
#include <cmath>

#include "run/vision.h"
#include "tab_inputs.h"
#include "ui.h"

namespace gbui {

// The shown result's view in ui.image_tex (uploaded once per view: a few hundred kB).
static GLuint image_texture(ui_context& ui, const gb::image& view) {
    if (ui.image_shown == &view && ui.image_tex) return ui.image_tex;
    if (!ui.image_tex) glGenTextures(1, &ui.image_tex);
    glBindTexture(GL_TEXTURE_2D, ui.image_tex);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, view.width, view.height, 0, GL_RGB, GL_UNSIGNED_BYTE, view.rgb.data());
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST); // pixels stay pixels when enlarged
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    ui.image_shown = &view;
    return ui.image_tex;
}

void panel_image(app_state& s, ui_context& ui) {
    auto& iin = inputs_of<image_inputs>(s, TAB_IMAGE);
    panel_title("Image", "click a patch: where it looks; [CLS]: where the classifier's token looks");
    if (!s.result || !s.result->view) {
        ImGui::TextDisabled(s.image_path.empty() ? "no image yet: type the path of a PNG or JPEG above, or drop one on the window"
                                                 : "reading the image...");
        return;
    }
    const run_result& r = *s.result;
    const gb::record& c = r.cap();
    const gb::model_config& mc = r.model->config;
    const int T = c.n_tokens, G = mc.grid(), P = mc.n_prefix;
    // the query is the app's selected token (the Head tab's row, the residual panel's line): [CLS] by default
    const int q = s.sel_token < 0 ? T - 1 : std::min(s.sel_token, T - 1);

    // controls: the query, rollout or the selected head
    if (ImGui::Button("[CLS]")) s.sel_token = 0;
    remember_item(ui, "image cls");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("look from [CLS], the token the classifier reads");
    ImGui::SameLine();
    ImGui::Checkbox("attention rollout", &iin.rollout);
    remember_item(ui, "attention rollout");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("every layer at once: each layer's heads averaged, plus the residual's share (A + I) / 2,\n"
                          "multiplied through the layers (Abnar & Zuidema 2020)");
    ImGui::SameLine();
    const int l = std::clamp(s.sel_layer, 0, c.n_layer - 1), h = std::clamp(s.sel_head, 0, c.n_head - 1);
    ImGui::TextDisabled(iin.rollout ? "from %s, through all %d layers" : "from %s, head L%d.H%d (pick one in the grid)",
                        c.pieces[q].c_str(), iin.rollout ? c.n_layer : l, h);
    const float* w = nullptr;
    if (iin.rollout) w = &r.pred.rollout[(size_t)q * T];
    else if (const float* p = c.head(l, h)) w = p + (size_t)q * T;
    if (!w) {
        ImGui::TextDisabled("layer %d was not kept (capture budget): select a head of it to keep it", l);
        return;
    }
    float to_prefix = 0, mx = 1e-12f;
    for (int t = 0; t < P; t++) to_prefix += w[t];
    for (int t = P; t < T; t++) mx = std::max(mx, w[t]);

    // the picture, as large as the panel allows, square
    const float legend_h = ImGui::GetTextLineHeightWithSpacing() * 2;
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float side = std::max(64.0f, std::min(avail.x, avail.y - legend_h));
    const ImVec2 p0 = ImGui::GetCursorScreenPos(), p1(p0.x + side, p0.y + side);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddImage((ImTextureID)(intptr_t)image_texture(ui, *r.view), p0, p1);
    ImGui::InvisibleButton("##image", ImVec2(side, side));
    remember_item(ui, "image");
    const float cell = side / G;
    int hovered = -1;
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const int gr = std::clamp((int)((m.y - p0.y) / cell), 0, G - 1), gc = std::clamp((int)((m.x - p0.x) / cell), 0, G - 1);
        hovered = P + gr * G + gc;
        if (ImGui::IsMouseClicked(0)) s.sel_token = hovered;
    }
    // darken each patch by how little the query attends to it (relative to the most attended patch)
    for (int t = P; t < T; t++) {
        const auto [gr, gc] = gb::vision_cell(mc, t);
        const ImVec2 a(p0.x + gc * cell, p0.y + gr * cell), b(a.x + cell, a.y + cell);
        const float v = std::sqrt(std::clamp(w[t] / mx, 0.0f, 1.0f)); // sqrt: the faint patches stay visible
        dl->AddRectFilled(a, b, IM_COL32(0, 0, 0, (int)(215 * (1 - v))));
        dl->AddRect(a, b, IM_COL32(255, 255, 255, 28));
    }
    if (q >= P) { // the query patch
        const auto [gr, gc] = gb::vision_cell(mc, q);
        const ImVec2 a(p0.x + gc * cell, p0.y + gr * cell);
        dl->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(80, 220, 255, 255), 0, 0, 2.5f);
    }
    if (hovered >= 0) {
        const auto [gr, gc] = gb::vision_cell(mc, hovered);
        const ImVec2 a(p0.x + gc * cell, p0.y + gr * cell);
        dl->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 210, 90, 255), 0, 0, 1.5f);
        ImGui::SetTooltip("patch %s: weight %.4f (%.0f%% of the most attended patch)\nclick: look from this patch",
                          c.pieces[hovered].c_str(), w[hovered], 100 * w[hovered] / mx);
    }
    ImGui::TextDisabled("bright = attended, dark = ignored (scaled to the most attended patch, %.3f); to [CLS]%s: %.3f",
                        mx, P > 1 ? " and [DIST]" : "", to_prefix);
}

void image_saliency(app_state& s, ui_context& ui, const std::vector<float>& sal) {
    if (!s.result || !s.result->view) return;
    const run_result& r = *s.result;
    const gb::model_config& mc = r.model->config;
    const int T = (int)sal.size(), G = mc.grid(), P = mc.n_prefix;
    if (T != mc.n_ctx) return;
    float mx = 1e-12f;
    for (int t = P; t < T; t++) mx = std::max(mx, std::fabs(sal[t]));
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float side = std::max(64.0f, std::min(avail.x, avail.y - 2 * line));
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddImage((ImTextureID)(intptr_t)image_texture(ui, *r.view), p0, ImVec2(p0.x + side, p0.y + side));
    ImGui::InvisibleButton("##saliency image", ImVec2(side, side));
    remember_item(ui, "saliency image");
    const float cell = side / G;
    int hovered = -1;
    if (ImGui::IsItemHovered()) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        hovered = P + std::clamp((int)((m.y - p0.y) / cell), 0, G - 1) * G + std::clamp((int)((m.x - p0.x) / cell), 0, G - 1);
    }
    for (int t = P; t < T; t++) { // a translucent tint: the picture stays visible under the faint patches
        const auto [gr, gc] = gb::vision_cell(mc, t);
        const ImVec2 a(p0.x + gc * cell, p0.y + gr * cell), b(a.x + cell, a.y + cell);
        const float v = std::clamp(sal[t] / mx, -1.0f, 1.0f), alpha = 200 * std::sqrt(std::fabs(v));
        dl->AddRectFilled(a, b, v >= 0 ? IM_COL32(214, 60, 50, (int)alpha) : IM_COL32(50, 120, 220, (int)alpha));
        dl->AddRect(a, b, IM_COL32(255, 255, 255, 28));
    }
    if (hovered >= 0) {
        const auto [gr, gc] = gb::vision_cell(mc, hovered);
        const ImVec2 a(p0.x + gc * cell, p0.y + gr * cell);
        dl->AddRect(a, ImVec2(a.x + cell, a.y + cell), IM_COL32(255, 210, 90, 255), 0, 0, 1.5f);
        ImGui::SetTooltip("patch %s: %+.4f (%.0f%% of the largest |value|)", r.cap().pieces[hovered].c_str(), sal[hovered],
                          100 * std::fabs(sal[hovered]) / mx);
    }
    ImGui::TextDisabled("red raises the difference, blue lowers it (scaled to the largest patch, %.3g); [CLS]%s: %+.4f", mx,
                        P > 1 ? " and [DIST]" : "", P > 1 ? sal[0] + sal[1] : sal[0]);
}

} // namespace gbui
