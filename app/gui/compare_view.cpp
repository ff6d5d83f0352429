// Model B in the app: its loading and the comparison on a thread of their own, and the B and "A vs B" views of the
// head grid, the residual stream and the lens.
#include "compare_view.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "file_dialog.h"
#include "io/loader.h"
#include "number_format.h"
#include "text_scale.h"
#include "ui.h"
#include "util/error.h"

namespace gbui {

// ---------------------------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------------------------
compare_worker::compare_worker() : thread_([this] { loop(); }) {}

compare_worker::~compare_worker() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void compare_worker::load(const std::string& path, bool keep_stored) {
    std::lock_guard<std::mutex> lk(mu_);
    job j;
    j.load = true, j.path = path, j.keep_stored = keep_stored;
    load_ = j;
    cv_.notify_all();
}

void compare_worker::compare(const std::string& key, std::shared_ptr<const gb::model> a, std::shared_ptr<const gb::model> b,
                             std::vector<int> tokens) {
    std::lock_guard<std::mutex> lk(mu_);
    job j;
    j.key = key, j.a = std::move(a), j.b = std::move(b), j.tokens = std::move(tokens);
    compare_ = j;
    newer_ = true;
    cv_.notify_all();
}

bool compare_worker::idle() const {
    std::lock_guard<std::mutex> lk(mu_);
    return !load_ && !compare_ && !running_ && !loaded_ && !done_ && !has_error_;
}

void compare_worker::loop() {
    for (;;) {
        job j;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stop_ || load_ || compare_; });
            if (stop_) return;
            std::optional<job>& next = load_ ? load_ : compare_; // a load first: a comparison waits for B
            j = *next;
            next.reset();
            running_ = true;
            if (!j.load) newer_ = false;
        }
        std::shared_ptr<const gb::model> loaded;
        std::shared_ptr<compare_output> out;
        std::string err;
        try {
            if (j.load) {
                gb::load_options lo;
                lo.keep_stored = j.keep_stored;
                loaded = std::make_shared<const gb::model>(gb::load_model(j.path, lo));
            } else {
                const auto t0 = std::chrono::steady_clock::now();
                auto rb = std::make_shared<gb::record>();
                out = std::make_shared<compare_output>();
                gb::compare_options opt;
                opt.cancelled = [this] { return newer_.load() || stop_; };
                gb::compare_models(out->res, *j.a, *j.b, j.tokens, opt, rb.get());
                out->key = j.key, out->a = j.a, out->b = j.b, out->tokens = j.tokens, out->run_b = rb;
                out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            }
        } catch (const gb::cancelled&) { // a newer comparison replaced it: nothing to publish
            out.reset();
        } catch (const std::exception& e) { // gb::error, and running out of memory: one line, the app goes on
            err = std::string(j.load ? "model B: " : "compare: ") + e.what();
            if (!j.load && err.rfind("compare: compare: ", 0) == 0) err = err.substr(9);
        }
        {
            std::lock_guard<std::mutex> lk(mu_);
            running_ = false;
            if (loaded) loaded_ = loaded;
            if (out) done_ = out;
            if (!err.empty()) error_ = err, error_key_ = j.load ? "" : j.key, has_error_ = true;
        }
        if (wake) wake();
    }
}

void compare_worker::poll(app_state& s) {
    std::lock_guard<std::mutex> lk(mu_);
    compare_slot& c = s.cmp;
    c.loading = load_.has_value() || (running_ && c.loading);
    if (loaded_ && s.model) { // B waits for A, whose shape it must have
        try {
            gb::check_comparable(*s.model, *loaded_);
            c.model = loaded_, c.out.reset(), c.asked.clear();
            if (c.shown == compare_slot::VIEW_A) c.shown = compare_slot::VIEW_AVB;
            s.status = "model B: " + loaded_->path;
        } catch (const gb::error& e) {
            s.error = std::string("model B: ") + e.what();
        }
        loaded_.reset();
        c.loading = false;
    }
    if (done_) c.out = done_, done_.reset();
    if (has_error_) {
        s.error = error_, has_error_ = false;
        if (!error_key_.empty()) c.failed = error_key_;
        c.loading = false;
        if (!c.model) c.asked.clear();
    }
    c.busy = compare_.has_value() || (running_ && !c.loading);
}

// ---------------------------------------------------------------------------------------------
// Scheduling
// ---------------------------------------------------------------------------------------------
std::string compare_key(const app_state& s) {
    if (!s.cmp.model || !s.model || !s.result || !result_is_current(s) || s.result->model != s.model) return "";
    std::string k = std::to_string((uintptr_t)s.model.get()) + "|" + std::to_string((uintptr_t)s.cmp.model.get()) + "|";
    for (int id : s.result->cap().tokens) k += std::to_string(id) + ",";
    return k;
}

bool schedule_compare(app_state& s, ui_context& ui) {
    const std::string key = compare_key(s);
    if (key.empty()) return !s.cmp.loading;
    if (key != s.cmp.asked) {
        ui.compare->compare(key, s.model, s.cmp.model, s.result->cap().tokens);
        s.cmp.asked = key;
        s.cmp.busy = true;
    }
    // done: compared, or failed with its error shown (until the inputs change)
    return !s.cmp.loading && ((s.cmp.out && s.cmp.out->key == key) || s.cmp.failed == key);
}

const compare_output* current_compare(const app_state& s) {
    const std::string key = compare_key(s);
    return !key.empty() && s.cmp.out && s.cmp.out->key == key ? s.cmp.out.get() : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Controls
// ---------------------------------------------------------------------------------------------
void compare_switch(app_state& s, ui_context& ui) {
    if (!s.cmp.model) return;
    const char* names[] = {"A", "B", "A vs B"};
    const char* ids[] = {"view A", "view B", "view A vs B"};
    for (int v = 0; v < 3; v++) {
        if (v) ImGui::SameLine();
        if (ImGui::RadioButton(names[v], s.cmp.shown == v)) s.cmp.shown = (compare_slot::view)v;
        remember_item(ui, ids[v]);
    }
    ImGui::SameLine();
    std::string b = s.cmp.model->path;
    if (b.size() > 48) b = "..." + b.substr(b.size() - 45);
    ImGui::TextDisabled("B: %s%s", b.c_str(), s.cmp.busy ? "  (comparing...)" : "");
}

void model_b_button(app_state& s, ui_context& ui) {
    // a file chosen with Browse... (the in-app browser, a modal at the frame's root, closed this popup on opening)
    if (take_dialog_answer("model B path", s.cmp.path_input) && !s.cmp.path_input.empty()) {
        ui.compare->load(s.cmp.path_input, true);
        s.cmp.loading = true;
    }
    if (ImGui::Button(s.cmp.loading ? "B..*" : "B...")) ImGui::OpenPopup("##model_b");
    remember_item(ui, "Model B");
    if (ImGui::IsItemHovered() && !ImGui::IsPopupOpen("##model_b"))
        ImGui::SetTooltip(s.cmp.loading ? "loading model B..." : s.cmp.model ? "model B: %s" : "Open model B... (a second model "
                          "of the same shape, to compare with)", s.cmp.model ? s.cmp.model->path.c_str() : "");
    if (!ImGui::BeginPopup("##model_b")) return;
    ImGui::TextDisabled("Open model B... (the same shape and tokenizer as the model shown)");
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    const bool enter = path_box(ui, "model B path", s.cmp.path_input, BROWSE_MODEL, "model folder, .gguf or .bin",
                                ImGui::GetFontSize() * 30);
    ImGui::SameLine();
    if ((ImGui::Button("Open model B") || enter) && !s.cmp.path_input.empty()) {
        ui.compare->load(s.cmp.path_input, true);
        s.cmp.loading = true;
        ImGui::CloseCurrentPopup();
    }
    remember_item(ui, "Open model B");
    if (s.cmp.model) {
        ImGui::TextDisabled("B: %s", s.cmp.model->path.c_str());
        if (ImGui::SmallButton("Close model B")) s.cmp = compare_slot{}, ImGui::CloseCurrentPopup();
        remember_item(ui, "Close model B");
    }
    ImGui::EndPopup();
}

// ---------------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------------
namespace {

bool waiting(const app_state& s, const compare_output* c) {
    if (c) return false;
    ImGui::TextDisabled(s.cmp.busy || s.cmp.loading ? "comparing A and B..." : "no comparison yet");
    return true;
}

// A head's pattern [T][T] drawn as at most n x n blocks, each the mean of its cells, on viridis
void pattern_blocks(ImDrawList* dl, ImVec2 a, float cell, const float* pat, int T) {
    const int n = std::min(T, std::max(1, (int)(cell / 2)));
    const float bs = cell / n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const int q0 = i * T / n, q1 = (i + 1) * T / n, k0 = j * T / n, k1 = (j + 1) * T / n;
            double sum = 0;
            for (int q = q0; q < q1; q++)
                for (int k = k0; k < k1; k++) sum += pat[(size_t)q * T + k];
            const float v = (float)(sum / std::max(1, (q1 - q0) * (k1 - k0)));
            const bool masked = k0 > q1 - 1; // wholly above the diagonal: the causal mask
            dl->AddRectFilled(ImVec2(a.x + j * bs, a.y + i * bs), ImVec2(a.x + (j + 1) * bs, a.y + (i + 1) * bs),
                              masked ? IM_COL32(45, 45, 50, 255) : viridis_u32(std::sqrt(v)));
        }
}

} // namespace

void compare_grid(app_state& s, ui_context&) {
    const compare_output* c = current_compare(s);
    if (waiting(s, c)) return;
    const gb::compare_result& r = c->res;
    const int L = r.n_layer, H = r.n_head;
    const bool avb = s.cmp.shown == compare_slot::VIEW_AVB;
    float jmax = 1e-12f;
    for (float v : r.head_js) jmax = std::max(jmax, v);
    if (avb) {
        ImGui::TextDisabled("colour: JS divergence of A's and B's patterns, 0 .. %.3g nats", jmax);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("each head's Jensen-Shannon divergence between A's and B's attention rows, averaged over "
                              "the query rows");
    } else {
        ImGui::TextDisabled("model B's patterns (sqrt scale)");
    }
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = px(34), head_h = px(18), gap = px(3);
    float cell = std::min((avail.x - label_w) / H, (avail.y - head_h) / L) - gap;
    cell = std::max(8.0f, std::min(cell, px(160)));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImU32 lc = IM_COL32(170, 170, 180, 255);
    char b[32];
    for (int h = 0; h < H; h++) {
        snprintf(b, sizeof b, "%d", h);
        if (ImGui::CalcTextSize(b).x <= cell + gap) dl->AddText(ImVec2(o.x + label_w + h * (cell + gap) + cell / 2 - px(4), o.y), lc, b);
    }
    for (int l = 0; l < L; l++) {
        snprintf(b, sizeof b, "L%d", l);
        dl->AddText(ImVec2(o.x, o.y + head_h + l * (cell + gap) + cell / 2 - ImGui::GetTextLineHeight() / 2), lc, b);
        for (int h = 0; h < H; h++) {
            const ImVec2 a(o.x + label_w + h * (cell + gap), o.y + head_h + l * (cell + gap)), z(a.x + cell, a.y + cell);
            const float js = r.head_js[(size_t)l * H + h];
            if (avb) {
                const ImU32 col = viridis_u32(js / jmax);
                dl->AddRectFilled(a, z, col);
                snprintf(b, sizeof b, "%.3f", js);
                const ImVec2 ts = ImGui::CalcTextSize(b);
                if (ts.x + px(4) <= cell && ts.y <= cell) dl->AddText(ImVec2(a.x + (cell - ts.x) / 2, a.y + (cell - ts.y) / 2), text_on(col), b);
            } else if (const float* pat = c->run_b->head(l, h)) {
                pattern_blocks(dl, a, cell, pat, r.n_tokens);
            }
            if (l == s.sel_layer && h == s.sel_head)
                dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), IM_COL32(255, 190, 60, 255), 0, 0, 2.5f);
            if (ImGui::IsMouseHoveringRect(a, z) && ImGui::IsWindowHovered()) {
                ImGui::SetTooltip("L%d H%d\nJS(A, B) = %.4f nats (mean over query rows)", l, h, js);
                if (ImGui::IsMouseClicked(0)) s.sel_layer = l, s.sel_head = h;
            }
        }
    }
    ImGui::Dummy(ImVec2(label_w + H * (cell + gap), head_h + L * (cell + gap)));
}

void compare_residual(app_state& s, ui_context& ui) {
    const compare_output* c = current_compare(s);
    if (waiting(s, c)) return;
    const gb::compare_result& r = c->res;
    const int P = r.n_points, T = r.n_tokens;
    const bool avb = s.cmp.shown == compare_slot::VIEW_AVB;
    // the value of each cell, and its colour's range
    std::vector<float> v((size_t)P * T);
    for (size_t i = 0; i < v.size(); i++)
        v[i] = !avb ? std::log10(std::max(1e-6f, c->run_b->resid_norm[i])) : s.cmp.rel ? r.rel_diff[i] : 1.0f - r.cosine[i];
    float lo = avb ? 0.0f : 1e30f, hi = -1e30f;
    for (float x : v)
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    if (avb) {
        ImGui::Checkbox("|a - b| / |a|  (else 1 - cos)", &s.cmp.rel);
        remember_item(ui, "compare rel");
    }
    ImGui::TextDisabled("%s: %s (dark) .. %s (bright)", avb ? (s.cmp.rel ? "|a - b| / |a|" : "1 - cos(a, b)") : "B's log10 |x|",
                        format_number(lo).c_str(), format_number(hi).c_str());
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 avail = ImGui::GetContentRegionAvail(), o = ImGui::GetCursorScreenPos();
    float label_w = 0;
    for (const std::string& p : r.points) label_w = std::max(label_w, ImGui::CalcTextSize(p.c_str()).x);
    if (avb) label_w = std::max(label_w, ImGui::CalcTextSize("B - A").x);
    label_w += px(6);
    const float lh = ImGui::GetTextLineHeight(), strip_h = avb ? 2 * lh + px(10) : 0;
    const float hh = std::max(px(40), avail.y - lh - strip_h - px(6)), cw = (avail.x - label_w) / T, rh = hh / P;
    for (int p = 0; p < P; p++) {
        if (rh >= lh * 0.8f || p % std::max(1, (int)(lh / rh + 1)) == 0)
            dl->AddText(ImVec2(o.x, o.y + p * rh + (rh - lh) / 2), IM_COL32(190, 190, 190, 255), r.points[p].c_str());
        for (int t = 0; t < T; t++) {
            const float x = v[(size_t)p * T + t];
            const ImVec2 a(o.x + label_w + t * cw, o.y + p * rh);
            dl->AddRectFilled(a, ImVec2(a.x + cw, a.y + rh),
                              std::isfinite(x) ? viridis_u32(hi > lo ? (x - lo) / (hi - lo) : 0) : IM_COL32(90, 90, 90, 255));
            if (ImGui::IsMouseHoveringRect(a, ImVec2(a.x + cw, a.y + rh)) && ImGui::IsWindowHovered())
                ImGui::SetTooltip("%s, token %d \u2018%s\u2019\ncos(a, b) = %.6f\n|a - b| / |a| = %.4g", r.points[p].c_str(), t,
                                  visible_token(r.pieces[t]).c_str(), r.cosine[(size_t)p * T + t], r.rel_diff[(size_t)p * T + t]);
        }
    }
    note_drawn(ui, "compare residual heatmap", ImVec2(o.x + label_w, o.y), ImVec2(o.x + avail.x, o.y + hh));
    if (!avb || r.surprisal_a.scored == 0) {
        ImGui::Dummy(ImVec2(avail.x, hh));
        return;
    }
    // the prompt's tokens with B's surprisal minus A's: red where B finds the token harder, blue easier
    double dmax = 1e-9;
    for (int t = 1; t < T; t++) dmax = std::max(dmax, std::fabs(r.surprisal_diff[t]));
    const float y = o.y + hh + px(6);
    dl->AddText(ImVec2(o.x, y + px(2)), IM_COL32(190, 190, 190, 255), "B - A");
    for (int t = 0; t < T; t++) {
        const ImVec2 a(o.x + label_w + t * cw, y), z(a.x + cw - 1, y + lh + px(4));
        const double d = r.surprisal_diff[t];
        const ImU32 col = t == 0 ? IM_COL32(60, 60, 68, 255) : diverging_u32((float)(d / dmax));
        dl->AddRectFilled(a, z, col);
        const std::string tok = visible_token(r.pieces[t]);
        if (ImGui::CalcTextSize(tok.c_str()).x <= cw - 2) dl->AddText(ImVec2(a.x + 1, a.y + px(2)), text_on(col), tok.c_str());
        if (ImGui::IsMouseHoveringRect(a, z) && ImGui::IsWindowHovered() && t > 0)
            ImGui::SetTooltip("token %d \u2018%s\u2019\nA %.3f nats, B %.3f nats: B - A = %+.3f", t, tok.c_str(),
                              r.surprisal_a.nats[t], r.surprisal_b.nats[t], d);
    }
    char cap[96];
    snprintf(cap, sizeof cap, "surprisal B - A: blue easier, red harder (\u00b1%.2g)", dmax);
    dl->AddText(ImVec2(o.x + label_w, y + lh + px(6)), IM_COL32(170, 170, 180, 255), cap);
    ImGui::Dummy(ImVec2(avail.x, hh + strip_h));
}

void compare_lens(app_state& s, ui_context& ui) {
    const compare_output* c = current_compare(s);
    if (waiting(s, c)) return;
    const gb::compare_result& r = c->res;
    const gb::tokenizer& tok = c->a->tok;
    ImGui::Text("logit lens of A and B at the last token \u2018%s\u2019: each point's top-1",
                visible_token(r.pieces[r.lens_position]).c_str());
    if (r.first_disagree >= 0)
        ImGui::TextColored(ImVec4(1, 0.6f, 0.3f, 1), "first disagreement: %s", r.points[r.first_disagree].c_str());
    else ImGui::TextDisabled("A and B agree at every point");
    note_text(ui, "compare first disagreement", r.first_disagree >= 0 ? r.points[r.first_disagree] : "none");
    ImGui::TextDisabled("next token: top-1 agrees at %d of %d positions, mean KL(A || B) %.4g nats", r.top_agree_count,
                        r.n_tokens, r.mean_kl);
    if (!ImGui::BeginTable("##cmp_lens", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV))
        return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("point");
    ImGui::TableSetupColumn("A: top-1  p");
    ImGui::TableSetupColumn("B: top-1  p");
    ImGui::TableHeadersRow();
    for (int p = 0; p < r.n_points; p++) {
        ImGui::TableNextRow();
        const bool differ = r.lens_top_a[p] != r.lens_top_b[p];
        if (p == r.first_disagree) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(120, 70, 20, 200));
        const ImVec4 col = differ ? ImVec4(1, 0.65f, 0.35f, 1) : ImVec4(0.85f, 0.85f, 0.85f, 1);
        ImGui::TableNextColumn();
        ImGui::TextColored(col, "%s%s", r.points[p].c_str(), p == r.first_disagree ? "  \u2190 first" : "");
        ImGui::TableNextColumn();
        ImGui::TextColored(col, "%s  %.3f", quoted(tok, r.lens_top_a[p]).c_str(), r.lens_prob_a[p]);
        ImGui::TableNextColumn();
        ImGui::TextColored(col, "%s  %.3f", quoted(tok, r.lens_top_b[p]).c_str(), r.lens_prob_b[p]);
    }
    ImGui::EndTable();
}

} // namespace gbui
