// Model panel: architecture and sizes, parameters by component vs the textbook formula, opening a model
// (path field, recent list, drag-and-drop onto the window), sessions and export.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "error.h"
#include "gemm.h"
#include "ui.h"

namespace gbui {

void panel_model(app_state& s, ui_context& ui) {
    panel_title("Model");
    if (s.model) {
        const gb::model& m = *s.model;
        const gb::model_config& c = m.config;
        const gb::arch_info& a = gb::arch_table(c.arch);
        ImGui::TextWrapped("%s", m.path.c_str());
        ImGui::Text("%s: %s, %s MLP, %s positions", c.model_type.c_str(), a.norm == gb::NORM_LAYERNORM ? "LayerNorm" : "RMSNorm",
                    a.mlp == gb::MLP_GELU ? "GELU" : "SwiGLU", a.pos == gb::POS_LEARNED ? "learned" : "rotary");
        ImGui::TextWrapped("L %d   H %d   d_model %d   d_ff %d   vocab %d   context %d", c.n_layer, c.n_head, c.d_model, c.d_ff,
                           c.vocab_size, c.n_ctx);
        gb::param_counts p = gb::count_params(m);
        double V = c.vocab_size, d = c.d_model, L = c.n_layer;
        double textbook = V * d + 12 * L * d * d;
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
            cell("V\u00b7d + 12\u00b7L\u00b7d\u00b2", textbook);
            ImGui::EndTable();
        }
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("difference %+.0f (%+.1f%%): %s", p.total() - textbook, 100.0 * (p.total() - textbook) / textbook,
                            c.arch == gb::ARCH_GPT2 ? "positions, biases, norms"
                                                    : "SwiGLU's 3 matrices, smaller K/V (GQA), no positions");
        ImGui::PopTextWrapPos();
        if (!m.source_note.empty()) ImGui::TextWrapped("%s", m.source_note.c_str());
        // the kernel the weights were packed for at load (glassbox --matmul fp32|amx chooses it)
        const bool amx = !m.weights.layers.empty() && m.weights.layers[0].w_qkv.amx();
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("matrix products: %s", amx ? "AMX int8 digits, exact sums" : "fp32 multiply-adds");
        ImGui::PopTextWrapPos();
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(amx ? "Each weight is 3 base-256 digits, each input 4; Intel AMX multiplies the digits\n"
                                    "exactly and the sums are put back together in fp32 (README: Matrix products).\n"
                                    "Start glassbox with --matmul fp32 to use fp32 multiply-adds instead."
                                  : "fp32 fused multiply-adds (AVX-512/AVX2). Where the CPU has AMX,\n"
                                    "glassbox --matmul amx (the default there) uses its int8 tile unit.");
        if (c.arch != gb::ARCH_GPT2 && ImGui::TreeNode("How it differs from GPT-2")) {
            ImGui::BulletText("RMSNorm (scale only, no mean, no bias) instead of LayerNorm");
            ImGui::BulletText("SwiGLU MLP: silu(x W_gate) * (x W_up), then W_down: 3 matrices, d_ff %d", c.d_ff);
            ImGui::BulletText("rotary position embedding (theta %.0f, %s pairs), no learned position table", c.rope_theta,
                              c.rope == gb::ROPE_HALF ? "half-split" : "adjacent");
            if (c.n_kv_head != c.n_head)
                ImGui::BulletText("grouped-query attention: %d query heads share %d key/value heads", c.n_head, c.n_kv_head);
            ImGui::BulletText("%s, vocabulary %d", m.tok.kind == gb::TOK_SPM_BPE ? "SentencePiece-style BPE" : "byte-level BPE",
                              c.vocab_size);
            ImGui::BulletText(c.qkv_bias ? "biases on q/k/v only" : "no biases");
            ImGui::BulletText(c.tied_lm_head ? "output head tied to the embedding" : "separate output head");
            ImGui::TreePop();
        }
    } else {
        ImGui::TextDisabled("no model loaded");
    }
    ImGui::Checkbox("attention on the GPU (OpenGL compute)", &s.use_gl);
    remember_item(ui, "attention on the GPU");
    if (!s.gl_status.empty() && s.use_gl) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", s.gl_status.c_str());
        ImGui::PopTextWrapPos();
    }
    ImGui::Separator();
    if (s.want_focus_model_path) {
        ImGui::SetKeyboardFocusHere();
        s.want_focus_model_path = false;
    }
    // one row: path, Open, and the recent models (remembered between runs) behind a small arrow
    const float buttons_w = ImGui::CalcTextSize("Open").x + ImGui::GetFrameHeight() + 4 * ImGui::GetStyle().ItemSpacing.x + 8;
    ImGui::SetNextItemWidth(-buttons_w);
    bool enter = ImGui::InputTextWithHint("##path", "model folder, .gguf or .bin (or drop it here)", &s.model_path_input,
                                          ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if ((ImGui::Button("Open") || enter) && !s.model_path_input.empty()) ui.work->load(s.model_path_input);
    ImGui::SameLine();
    if (ImGui::BeginCombo("##recent", nullptr, ImGuiComboFlags_NoPreview | ImGuiComboFlags_PopupAlignLeft)) {
        if (s.recent_models.empty()) ImGui::TextDisabled("no recent models");
        for (const std::string& r : s.recent_models)
            if (ImGui::Selectable(r.c_str(), s.model && s.model->path == r)) {
                s.model_path_input = r;
                ui.work->load(r);
            }
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("recent models");
    if (s.loading) ImGui::ProgressBar(s.load_progress, ImVec2(-1, 0), s.load_label.c_str());
    ImGui::SetNextItemWidth(-110);
    ImGui::InputText("##session", &s.session_path);
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
    ImGui::SetNextItemWidth(-110);
    ImGui::InputText("##export", &s.export_dir);
    ImGui::SameLine();
    if (ImGui::SmallButton("Export")) {
        try {
            std::string wrote = export_capture(s, s.export_dir);
            ui.screenshot_path = s.export_dir + "/window.png";
            ui.request_screenshot = true;
            s.status = "exported " + wrote + " and window.png to " + s.export_dir;
        } catch (const std::exception& e) {
            s.error = e.what();
        }
    }
    remember_item(ui, "Export");
    ImGui::TextDisabled("Ctrl+O open  Ctrl+S save session  Ctrl+E save PNG");
}

} // namespace gbui
