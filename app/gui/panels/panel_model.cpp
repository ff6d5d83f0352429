// Model panel: architecture and sizes, parameters by component vs the textbook formula, opening a model
// (path field, recent list, drag-and-drop onto the window), sessions and export.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cstdarg>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "analysis/learn.h"
#include "kernels/gemm.h"
#include "settings.h"
#include "text_scale.h"
#include "ui.h"
#include "util/error.h"
#include "file_dialog.h"

namespace gbui {

void open_model(app_state& s, worker& w, const std::string& path) {
    s.model_path_input = path;
    w.load(path); // on failure the status bar says why and the current model stays
}

namespace {

// "/home/me/models/gpt2" -> "gpt2" (a trailing slash does not count)
std::string base_name(const std::string& path) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    size_t k = p.find_last_of('/');
    return k == std::string::npos ? p : p.substr(k + 1);
}

// p cut at the left to fit max_w: whole leading folders first ("…/c/d"), then, should the last name alone not
// fit, its leading characters (whole UTF-8 characters).
std::string elide_path(const std::string& p, float max_w) {
    const std::string ell = "\u2026";
    std::string out = p;
    while (ImGui::CalcTextSize(out.c_str()).x > max_w) {
        size_t cut = out.find('/', out.rfind(ell, 0) == 0 ? ell.size() + 1 : 1); // the next folder after the cut
        if (cut == std::string::npos) break;
        out = ell + out.substr(cut);
    }
    size_t from = out.rfind(ell, 0) == 0 ? ell.size() : 0;
    while (ImGui::CalcTextSize(out.c_str()).x > max_w && out.size() > from + 1) {
        size_t next = from + 1;
        while (next < out.size() && ((unsigned char)out[next] & 0xC0) == 0x80) next++;
        out = ell + out.substr(next);
        from = ell.size();
    }
    return out;
}

// The folder that holds it, with the home folder as "~" and, when wider than max_w pixels, its start cut ("…/b/c").
std::string folder_label(const std::string& path, float max_w) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    size_t k = p.find_last_of('/');
    std::string dir = k == std::string::npos ? "." : k == 0 ? "/" : p.substr(0, k);
    if (const char* home = std::getenv("HOME"); home && *home && dir.rfind(home, 0) == 0 &&
                                                  (dir.size() == std::strlen(home) || dir[std::strlen(home)] == '/'))
        dir = "~" + dir.substr(std::strlen(home));
    return elide_path(dir, max_w);
}

} // namespace

// The arrow beside Open: a menu of the models opened before (most recent first; those deleted since are left
// out), each opened like a typed path. Scripts click "Open recent", then "recent PATH".
void recent_menu(app_state& s, ui_context& ui) {
    if (ImGui::ArrowButton("##recent", ImGuiDir_Down)) {
        s.recent_models = existing_paths(s.recent_models); // deleted while the app ran
        ImGui::OpenPopup("##recent_menu");
    }
    remember_item(ui, "Open recent");
    const ImVec2 arrow_min = ImGui::GetItemRectMin(), arrow_max = ImGui::GetItemRectMax();
    if (ImGui::IsItemHovered() && !ImGui::IsPopupOpen("##recent_menu")) ImGui::SetTooltip("Open recent");
    if (!ImGui::IsPopupOpen("##recent_menu")) return;
    // two columns: the model's name, then (dimmed) the folder it is in
    const ImGuiStyle& st = ImGui::GetStyle();
    const float gap = 2 * ImGui::GetFontSize(), folder_max = 26 * ImGui::GetFontSize();
    float name_w = ImGui::CalcTextSize("Open recent").x, folder_w = 0;
    std::vector<std::string> names, folders;
    for (const std::string& r : s.recent_models) {
        names.push_back(base_name(r));
        folders.push_back(folder_label(r, folder_max));
        name_w = std::max(name_w, ImGui::CalcTextSize(names.back().c_str()).x);
        folder_w = std::max(folder_w, ImGui::CalcTextSize(folders.back().c_str()).x);
    }
    // like a menu: its right edge at the arrow's, dropping down, or up where the window ends first
    const float w = name_w + gap + folder_w + 2 * st.WindowPadding.x;
    const float h = 2 * st.WindowPadding.y + (std::max<size_t>(1, names.size()) + 1) * ImGui::GetTextLineHeightWithSpacing() +
                    st.ItemSpacing.y;
    const bool up = arrow_max.y + 2 + h > ImGui::GetIO().DisplaySize.y;
    ImGui::SetNextWindowPos(ImVec2(std::max(4.0f, arrow_max.x - w), up ? arrow_min.y - 2 : arrow_max.y + 2), ImGuiCond_Always,
                            ImVec2(0, up ? 1.0f : 0.0f));
    // opaque, a shade lighter than the panels: the Model panel's text must not show through the list
    ImGui::PushStyleColor(ImGuiCol_PopupBg, ImVec4(0.12f, 0.13f, 0.16f, 1.0f));
    const bool open = ImGui::BeginPopup("##recent_menu");
    ImGui::PopStyleColor();
    if (!open) return;
    ImGui::TextDisabled("Open recent");
    ImGui::Separator();
    if (s.recent_models.empty()) ImGui::TextDisabled("no models opened yet");
    std::string chosen;
    for (size_t i = 0; i < s.recent_models.size(); i++) {
        const std::string& r = s.recent_models[i];
        ImGui::PushID((int)i);
        const bool current = s.model && s.model->path == r;
        const float x0 = ImGui::GetCursorPosX();
        // the row is one selectable without a label (a name holding "##" would be cut as an ImGui label), the
        // name and folder drawn over it
        if (ImGui::Selectable("##row", current, 0, ImVec2(name_w + gap + folder_w, 0))) chosen = r;
        remember_item(ui, "recent " + r);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s%s", r.c_str(), current ? "\n(open now)" : "");
        ImGui::SameLine(x0);
        ImGui::TextUnformatted(names[i].c_str());
        ImGui::SameLine(x0 + name_w + gap);
        ImGui::TextDisabled("%s", folders[i].c_str());
        ImGui::PopID();
    }
    ImGui::EndPopup();
    if (!chosen.empty()) open_model(s, *ui.work, chosen);
}

// A bullet whose text wraps at the panel's edge (ImGui 1.86's BulletText does not wrap; the panel is narrow).
IM_FMTARGS(1) static void bullet(const char* fmt, ...) {
    ImGui::Bullet();
    va_list args;
    va_start(args, fmt);
    ImGui::TextWrappedV(fmt, args);
    va_end(args);
}

// Where the model is from, its family's choices (norm, MLP, positions) and its sizes.
static void architecture_lines(const gb::model& m) {
    const gb::model_config& c = m.config;
    const gb::arch_info& a = gb::arch_table(c.arch);
    // one line whatever the path's length (a wrapped path would grow the panel and fold the column into tabs); the
    // whole path on hover
    const std::string shown = elide_path(m.path, ImGui::GetContentRegionAvail().x);
    ImGui::TextUnformatted(shown.c_str());
    if (shown != m.path && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", m.path.c_str());
    const gb::model_kind kind = gb::kind_of(c);
    const bool s2s = gb::kind_table(kind).input == gb::INPUT_SOURCE_TARGET;
    const char* mlp = a.mlp == gb::MLP_GELU || a.mlp == gb::MLP_GELU_ERF ? "GELU"
                      : a.mlp == gb::MLP_GEGLU                           ? "GeGLU"
                      : a.mlp == gb::MLP_SILU                            ? "swish"
                                                                         : "SwiGLU";
    const char* pos = a.pos == gb::POS_LEARNED ? "learned" : a.pos == gb::POS_SINUSOID ? "sinusoidal" : "rotary";
    ImGui::TextWrapped("%s%s: %s%s, %s MLP, %s positions", c.model_type.c_str(), s2s ? " (encoder–decoder)" : "",
                       gb::norm_name(a), a.post_ln ? " after each add (Post-LN)" : "",
                       mlp, pos);
    const std::string layers = s2s ? std::to_string(m.encoder->config.n_layer) + " + " + std::to_string(c.n_layer)
                                   : std::to_string(c.n_layer);
    ImGui::TextWrapped("L %s   H %d   d_model %d   d_ff %d   %s %d   %s %d", layers.c_str(), c.n_head, c.d_model, c.d_ff,
                       gb::kind_table(kind).output == gb::OUTPUT_CLASSES ? "classes" : "vocab", c.vocab_size,
                       gb::kind_table(kind).input == gb::INPUT_IMAGE ? "positions" : "context", c.n_ctx);
}

// Parameters by component, beside the textbook count and where the difference comes from.
static void parameter_table(const gb::model& m) {
    const gb::model_config& c = m.config;
    const gb::model_kind kind = gb::kind_of(c);
    const bool s2s = gb::kind_table(kind).input == gb::INPUT_SOURCE_TARGET;
    gb::param_counts p = gb::count_params(m);
    const double textbook = (double)gb::textbook_params(m); // Learn's derivation starts from the same count
    // parameters by component, two per row, in millions (the textbook count sits beside the real total)
    if (ImGui::BeginTable("##params", 4, ImGuiTableFlags_SizingFixedFit)) {
        auto cell = [](const char* k, double v) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(k);
            ImGui::TableNextColumn();
            ImGui::Text(v < 1e5 ? "%7.0f" : "%7.2f M", v < 1e5 ? v : v / 1e6);
        };
        cell("embeddings", (double)p.embeddings);
        cell("attention", (double)p.attention);
        cell("MLP", (double)p.mlp);
        cell("norms", (double)p.norms);
        cell("total", (double)p.total());
        cell(s2s ? "textbook" : "V\u00b7d + 12\u00b7L\u00b7d\u00b2", textbook); // (the two-stack formula is long: below)
        ImGui::EndTable();
    }
    ImGui::PushTextWrapPos(0.0f);
    if (s2s) ImGui::TextDisabled("textbook: V\u00b7d + 12\u00b7L_enc\u00b7d\u00b2 + 16\u00b7L_dec\u00b7d\u00b2 (a decoder layer "
                                 "adds the cross-attention's 4\u00b7d\u00b2)");
    ImGui::TextDisabled("difference %+.0f (%+.1f%%): %s", p.total() - textbook, 100.0 * (p.total() - textbook) / textbook,
                        c.arch == gb::ARCH_GPT2 ? "positions, biases, norms"
                        : s2s                   ? "positions, biases, norms, final_logits_bias"
                        : kind == gb::KIND_ENCODER ? "positions, token types, biases, norms, the masked-LM head"
                        : gb::kind_table(kind).output == gb::OUTPUT_CLASSES ? "V is the classes: the patch embedding, positions, biases, norms"
                        : kind == gb::KIND_MOE    ? "experts, smaller K/V (GQA), no positions"
                                                : "gated MLP's 3 matrices, smaller K/V (GQA), no positions");
    ImGui::PopTextWrapPos();
}

// The source note, how the weights are held and how the matrix products are computed.
static void weights_lines(const app_state& s, const gb::model& m) {
    if (!m.source_note.empty()) ImGui::TextWrapped("%s", m.source_note.c_str());
    // how the weights are held (as stored, or packed for a kernel at load: glassbox --matmul fp32|amx|int8)
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("%s", s.weights_line.c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("F16, BF16 and Q8_0 weights stay as the file stores them; each product turns a\n"
                          "cache-sized slice into floats just before multiplying, so the numbers equal\n"
                          "those of weights dequantised at load (docs/internals.md: Weights as stored).");
    const gb::matmul_kind kernel = s.kernel;
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("matrix products: %s", kernel == gb::MATMUL_AMX    ? "AMX int8 digits, exact sums"
                                               : kernel == gb::MATMUL_INT8 ? "Q4_K with 8-bit inputs (not exact), others fp32"
                                                                           : "fp32 multiply-adds");
    ImGui::PopTextWrapPos();
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", kernel == gb::MATMUL_AMX
                                    ? "Each weight and each input is 4 base-256 digits; Intel AMX multiplies the digits\n"
                                      "exactly and the sums are put back together in fp32\n"
                                      "(docs/internals.md: Matrix products).\n"
                                      "Start glassbox with --matmul fp32 to use fp32 multiply-adds instead."
                                : kernel == gb::MATMUL_INT8
                                    ? "glassbox --matmul int8: products by Q4_K weights round each input row to 8 bits\n"
                                      "a block of 256, as llama.cpp does, and multiply on AVX-512 VNNI (prompts about\n"
                                      "twice as fast) or AVX2 (a third faster): numbers no longer exact\n"
                                      "(docs/internals.md: The int8 kernel).\n"
                                      "Start glassbox without it for exact products."
                                    : "fp32 fused multiply-adds (AVX-512/AVX2). Where the CPU has AMX,\n"
                                      "glassbox --matmul amx (the default there) uses its int8 tile unit for F32 weights;\n"
                                      "glassbox --matmul int8 runs Q4_K products on 8-bit inputs (faster, not exact).");
}

// "How it differs from GPT-2"'s bullets, from the architecture table: what this family computes differently.
static void differences_from_gpt2(const gb::model& m) {
    const gb::model_config& c = m.config;
    const gb::arch_info& a = gb::arch_table(c.arch);
    const gb::model_kind kind = gb::kind_of(c);
    const bool s2s = gb::kind_table(kind).input == gb::INPUT_SOURCE_TARGET;
    if (a.norm == gb::NORM_RMSNORM) bullet("RMSNorm (scale only, no mean, no bias) instead of LayerNorm");
    if (a.gain_plus_one) bullet("norm gains stored as w, applied as 1 + w");
    if (gb::kind_table(kind).input == gb::INPUT_IMAGE) {
        bullet("a Vision Transformer: the image is cut into %dx%d patches of %d px; each patch's pixels "
               "times a matrix is its embedding, after a learned [CLS]%s", c.grid(), c.grid(), c.patch_size,
               c.n_prefix > 1 ? " and DeiT's distillation token [DIST]" : "");
        bullet("attention is not causal: every patch sees the whole image");
        bullet("the classifier reads [CLS] after the final LayerNorm: %d classes%s", c.vocab_size,
               m.weights.dist_head.empty() ? "" : " (averaged with the distillation head at [DIST])");
    } else if (s2s) {
        bullet("an encoder–decoder: %d encoder layers read the source with full attention (no masked "
               "triangle); each of the %d decoder layers has masked self-attention over the target, then "
               "cross-attention over the encoder's output, then the MLP",
               m.encoder->config.n_layer, c.n_layer);
    } else if (kind == gb::KIND_ENCODER) {
        bullet("an encoder: attention is not causal, every token sees the whole prompt (no masked triangle)");
    }
    if (a.post_ln)
        bullet("Post-LN: LayerNorm after each residual add, x = LN(x + sublayer(x)), not before the sublayer");
    if (c.n_token_type > 0) bullet("token-type (segment) embeddings: type 0 added to every token");
    if (!m.weights.emb_norm_g.empty()) bullet("the summed embeddings are LayerNormed before layer 0");
    if (kind == gb::KIND_ENCODER)
        bullet("masked-LM head: LN(GELU(x W + b)) times the tied embedding, plus a bias: fills %s tokens",
               m.tok.mask_id >= 0 ? gb::token_text(m.tok, m.tok.mask_id).c_str() : "mask");
    if (c.pos_offset > 0)
        bullet("learned positions start at row %d (%s offset)", c.pos_offset,
               s2s ? "BART's" : "RoBERTa's padding");
    if (a.pos == gb::POS_SINUSOID)
        bullet("fixed sinusoidal positions, nothing learned: sin(p / 10000^(2i/d)) in one half of the "
               "columns, cos in the other");
    if (s2s && !m.weights.lm_head_b.empty()) bullet("final_logits_bias added to the logits");
    if (!a.pre_norm && !a.post_ln) bullet("no norm before the sublayers: each sublayer's output is normed instead");
    else if (a.post_norm) bullet("norms on both sides of each sublayer (before, and on its output)");
    if (a.qk_norm != gb::QK_NORM_NONE)
        bullet("q and k are RMS-normed (%s) before the rotation",
               a.qk_norm == gb::QK_NORM_FULL ? "all heads at once" : "each head");
    if (c.parallel) bullet("parallel blocks: attention and MLP both read the layer's input");
    if (kind == gb::KIND_MOE)
        bullet("mixture of experts: a router picks %d of %d expert MLPs (width %d) per token%s", c.n_expert_used,
               c.n_expert, c.d_ff_expert, c.d_ff_shared > 0 ? ", plus a shared expert" : "");
    else if (a.mlp == gb::MLP_SWIGLU)
        bullet("SwiGLU MLP: silu(x W_gate) * (x W_up), then W_down: 3 matrices, d_ff %d", c.d_ff);
    else if (a.mlp == gb::MLP_GEGLU)
        bullet("GeGLU MLP: gelu(x W_gate) * (x W_up), then W_down: 3 matrices, d_ff %d", c.d_ff);
    else if (a.mlp == gb::MLP_GELU_ERF)
        bullet("exact (erf) GELU instead of GPT-2's tanh approximation");
    else if (a.mlp == gb::MLP_SILU)
        bullet("swish MLP: x * sigmoid(x) instead of GELU, still 2 matrices, d_ff %d", c.d_ff);
    if (a.embed_scale) bullet("token embeddings scaled by sqrt(d_model) = %.1f", std::sqrt((double)c.d_model));
    const int rot = c.rope_dims > 0 ? c.rope_dims : c.d_head;
    if (a.pos == gb::POS_ROPE)
        bullet("rotary position embedding (theta %.0f, %s pairs%s), no learned position table", c.rope_theta,
               c.rope == gb::ROPE_HALF ? "half-split" : "adjacent",
               rot < c.d_head ? (", " + std::to_string(rot) + " of " + std::to_string(c.d_head) + " dims").c_str() : "");
    if (c.n_kv_head != c.n_head)
        bullet("grouped-query attention: %d query heads share %d key/value heads", c.n_head, c.n_kv_head);
    if (c.d_head * c.n_head != c.d_model) bullet("head size %d (heads x size != d_model)", c.d_head);
    if (c.sliding_window > 0)
        bullet("sliding window: a token sees the last %d tokens%s", c.sliding_window,
               c.window_every == 2 ? " (every other layer; the rest see all)" : "");
    if (c.attn_softcap > 0) bullet("attention scores soft-capped at %.0f (cap * tanh(s / cap))", c.attn_softcap);
    if (c.final_softcap > 0) bullet("logits soft-capped at %.0f", c.final_softcap);
    if (gb::kind_table(kind).input == gb::INPUT_IMAGE)
        bullet("no tokenizer: %d classes named by config.json's id2label", c.vocab_size);
    else
        bullet("%s, vocabulary %d",
               m.tok.kind == gb::TOK_SPM_BPE     ? "SentencePiece-style BPE"
               : m.tok.kind == gb::TOK_WORDPIECE ? "WordPiece"
               : m.tok.kind == gb::TOK_UNIGRAM   ? "SentencePiece Unigram"
                                                 : "byte-level BPE",
               c.vocab_size);
    bullet(c.qkv_bias && c.mlp_bias ? "biases everywhere" : c.qkv_bias ? "biases on q/k/v only" : "no biases");
    bullet(c.tied_lm_head ? "output head tied to the embedding" : "separate output head");
}

// The path box with Open and Open recent, the session box with Save and Load, the export box with Export.
static void file_rows(app_state& s, ui_context& ui) {
    auto& ex = state_of<export_inputs>(s, ANALYSIS_EXPORT);
    const ImVec2 top = ImGui::GetCursorScreenPos();
    // one row: path, Open, and "Open recent" (the models opened before, remembered between runs) behind an arrow
    // Open and B... with their frame padding, the square arrow, and the gaps between the four items
    const ImGuiStyle& st = ImGui::GetStyle();
    const float buttons_w = ImGui::CalcTextSize("Open").x + ImGui::CalcTextSize("B...").x + 4 * st.FramePadding.x +
                            ImGui::GetFrameHeight() + 3 * st.ItemSpacing.x;
    const bool enter = path_box(ui, "model path", s.model_path_input, BROWSE_MODEL,
                                "model folder, .gguf, .bin or hf:ORG/NAME (or drop it here)",
                                ImGui::GetContentRegionAvail().x - buttons_w);
    ImGui::SameLine();
    if ((ImGui::Button("Open") || enter) && !s.model_path_input.empty()) open_model(s, *ui.work, s.model_path_input);
    ImGui::SameLine();
    recent_menu(s, ui);
    ImGui::SameLine();
    draw_parts(s, ui, PART_MODEL); // e.g. a second model to compare with
    if (s.loading) ImGui::ProgressBar(s.load_progress, ImVec2(-1, 0), s.load_label.c_str());
    path_box(ui, "session path", s.session_path, BROWSE_SESSION, "session .json", ImGui::GetContentRegionAvail().x - px(110));
    ImGui::SameLine();
    if (ImGui::SmallButton("Save")) {
        try {
            save_session(s, s.session_path);
            s.status = "saved session " + s.session_path;
        } catch (const std::exception& e) {
            s.error = e.what();
        }
    }
    remember_item(ui, "Save");
    ImGui::SameLine();
    if (ImGui::SmallButton("Load")) {
        try {
            open_session(s, *ui.work, s.session_path); // ablations wait for (and are checked against) its model
            s.status = "loaded session " + s.session_path;
        } catch (const std::exception& e) {
            s.error = e.what();
        }
    }
    path_box(ui, "export folder", ex.dir, BROWSE_FOLDER, "folder to export into", ImGui::GetContentRegionAvail().x - px(110));
    ImGui::SameLine();
    if (ImGui::SmallButton("Export")) { // written on an analysis thread (the export row, analysis_export.cpp)
        if (!s.result) s.error = "nothing to export yet";
        else ex.asked++, s.status = "exporting to " + ex.dir + "...";
    }
    remember_item(ui, "Export");
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("Ctrl+O find a model  Ctrl+S save session  Ctrl+E save PNG  Ctrl+= / Ctrl+- text size  F5 present  F11 "
                        "fill the window with a panel");
    ImGui::PopTextWrapPos();
    note_drawn(ui, "model file rows", top, ImVec2(top.x + ImGui::GetContentRegionAvail().x, ImGui::GetCursorScreenPos().y));
}

void panel_model(app_state& s, ui_context& ui) {
    panel_title("Model");
    if (s.model) {
        const gb::model& m = *s.model;
        const gb::model_config& c = m.config;
        architecture_lines(m);
        parameter_table(m);
        weights_lines(s, m);
        const bool differs = c.arch != gb::ARCH_GPT2 && ImGui::TreeNode("How it differs from GPT-2");
        if (c.arch != gb::ARCH_GPT2) remember_item(ui, "how it differs");
        if (differs && ImGui::IsItemToggledOpen()) ui.select_model_tab = true; // it may grow the column into tabs
        if (differs) {
            differences_from_gpt2(m);
            ImGui::TreePop();
        }
    } else {
        ImGui::TextDisabled("no model loaded");
    }
    if (s.presenting) return; // the class sees the model, not the controls (F5 brings them back)
    ImGui::Checkbox("attention on the GPU (OpenGL compute)", &s.use_gl);
    remember_item(ui, "attention on the GPU");
    if (!s.gl_status.empty() && s.use_gl) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", s.gl_status.c_str());
        ImGui::PopTextWrapPos();
    }
    ImGui::Separator();
    file_rows(s, ui);
}

} // namespace gbui
