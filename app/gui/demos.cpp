// One-click demonstrations (demos.h).
#include "demos.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "sampling_inputs.h"
#include "tab_inputs.h"
#include "ui.h"

namespace gbui {

const char* demo_name(demo_kind d) {
    static const char* names[DEMO_COUNT] = {"", "induction", "prev-token", "lens", "ioi", "break-it", "temperature"};
    return names[d];
}

const char* demo_label(demo_kind d) {
    static const char* labels[DEMO_COUNT] = {"(none)", "Induction head", "Previous-token head", "Logit lens",
                                             "Indirect object", "Break it", "Temperature and top-k"};
    return labels[d];
}

static const int induction_demo_n = 20; // random tokens, repeated once: short enough to read in the token strip

// Prompts that a model which has learnt English completes with one clear answer: Break it runs the one this model
// gets right most confidently (or, when it gets none right, the one it is surest about), so that there is a
// prediction to break.
static const std::vector<gb::prompt_candidate>& break_candidates() {
    static const std::vector<gb::prompt_candidate> c = {
        {"The cat sat on the mat. The cat sat on the", " mat"},
        {"Thank you very", " much"},
        {"It was the best of times, it was the worst of", " times"},
        {"one, two, three, four,", " five"},
        {"Once upon a", " time"},
        {"Ladies and", " gentlemen"},
        {"The United States of", " America"},
        {"from time to", " time"},
        {"little by", " little"},
    };
    return c;
}

// The temperature demo's prompt and settings: a greedy-ish T repeats itself, a hot one wanders
static const char* temperature_prompt = "The old man looked at the sea and said";

// The single token that text encodes to, or -1.
static int single_token(const gb::model& m, const std::string& text) {
    std::vector<int> ids = gb::encode(m.tok, text);
    return ids.size() == 1 ? ids[0] : -1;
}

bool demo_offered(const gb::model& m, demo_kind d) {
    static const gb::feature shows[DEMO_COUNT] = {gb::FEATURE_DEMOS,      gb::FEATURE_HEAD_SCORES, gb::FEATURE_HEAD_SCORES,
                                                  gb::FEATURE_LENS,       gb::FEATURE_ATTRIBUTION, gb::FEATURE_BREAK_IT,
                                                  gb::FEATURE_TEMPERATURES};
    return d > DEMO_NONE && d < DEMO_COUNT && gb::offers(m.config, gb::FEATURE_DEMOS) && gb::offers(m.config, shows[d]);
}

void start_demo(app_state& s, demo_kind d) {
    auto& test = state_of<induction_inputs>(s, ANALYSIS_INDUCTION);
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    auto& lin = inputs_of<lens_inputs>(s, TAB_LENS);
    auto& smp = inputs_of<sampling_inputs>(s, TAB_SAMPLING);
    const gb::model& m = *s.model;
    end_demo(s); // a Break-it row still applied is taken off first
    s.demos.kind = d;
    s.demos.waiting = true;
    s.demos.caption = "running the demo...";
    s.sel_token = -1;
    s.gen_step = 0, s.gen_follow = false;
    test.shown = false; // the grid's scores are the demo prompt's
    s.colour_by = COLOUR_PATTERN;
    s.tab = TAB_HEAD;
    switch (d) {
    case DEMO_INDUCTION: {
        // the induction test's prompt as text: random tokens, then the same tokens again
        // (tokens that are whole UTF-8 text without control characters, so that the prompt is text one can read and edit)
        const int n = std::max(2, std::min(induction_demo_n, m.config.n_ctx / 2 - 1));
        std::vector<int> pool = gb::repeated_random_tokens(m.tok, m.config.vocab_size, 8 * n, test.seed, false);
        std::vector<int> ids;
        for (int i = 0; i < 8 * n && (int)ids.size() < n; i++) {
            const std::string b = gb::token_bytes(m.tok, pool[i]);
            bool plain = !b.empty() && b == gb::token_text(m.tok, pool[i]) && b.find("\xEF\xBF\xBD") == std::string::npos;
            for (unsigned char c : b) plain = plain && c >= 0x20 && c != 0x7f; // no control characters
            if (plain) ids.push_back(pool[i]);
        }
        const std::string half = gb::decode(m.tok, ids);
        s.prompt = half + half;
        s.colour_by = COLOUR_INDUCTION;
        break;
    }
    case DEMO_PREV_TOKEN:
        s.prompt = "The quick brown fox jumps over the lazy dog because it was hungry";
        s.colour_by = COLOUR_PREV_TOKEN;
        break;
    case DEMO_LENS:
        s.prompt = "The Eiffel Tower is in the city of";
        s.tab = TAB_LENS;
        lin.target = -1;
        break;
    case DEMO_IOI:
        s.prompt = "When Mary and John went to the store, John gave a drink to";
        s.tab = TAB_ATTRIBUTION;
        ain.target = single_token(m, " Mary"), ain.contrast = single_token(m, " John");
        if (ain.target < 0 || ain.contrast < 0) ain.target = ain.contrast = -1; // the top-2 instead
        break;
    case DEMO_BREAK:
        // the prompt comes from the analysis thread (the candidate this model gets right most confidently); until
        // then the current one stays, with nothing ablated
        s.ablation = {};
        s.demos.candidates = break_candidates();
        s.demos.caption = "choosing a prompt this model predicts well...";
        s.tab = TAB_LEARN; // the table of every row is at the end of the Learn tab
        break;
    case DEMO_TEMPERATURE:
        s.prompt = temperature_prompt;
        s.tab = TAB_SAMPLING;
        smp.temps[0] = 0.3f, smp.temps[1] = 0.8f, smp.temps[2] = 1.5f;
        smp.top_k = 40, smp.tokens = 30, smp.seed = 1;
        break;
    default:
        end_demo(s);
        return;
    }
    s.demos.prompt = s.prompt;
    s.demos.model = s.model.get();
    s.demos.ablation = s.ablation.describe();
}

void end_demo(app_state& s) {
    // a row Break it applied is taken off again (one the user set by hand is theirs: it differs)
    if (s.demos.kind == DEMO_BREAK && s.ablation.describe() == s.demos.ablation) s.ablation = {};
    s.demos.kind = DEMO_NONE, s.demos.waiting = false, s.demos.caption.clear();
    s.demos.candidates.clear();
    s.demos.break_row = -1;
    s.demos.caption_key.clear();
}

// The head with the largest finite score of kind k (layer -1 when none is finite).
static void best_head(const gb::head_scores& sc, gb::head_score_kind k, int* layer, int* head, float* value) {
    *layer = *head = -1, *value = NAN;
    const std::vector<float>& v = sc.score[k];
    for (size_t i = 0; i < v.size(); i++)
        if (std::isfinite(v[i]) && (*layer < 0 || v[i] > *value))
            *layer = (int)i / sc.n_head, *head = (int)i % sc.n_head, *value = v[i];
}

static std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char* f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

// The caption of a head demo: the chosen head, or that the model has none above `clear`.
static std::string head_caption(app_state& s, gb::head_score_kind k, float clear, const char* what, const char* look) {
    int l, h;
    float v;
    best_head(s.result->scores, k, &l, &h, &v);
    if (l < 0) return fmt("no %s score on this prompt (no layer's pattern was kept)", what);
    s.sel_layer = l, s.sel_head = h;
    if (v < clear)
        return fmt("This model has no clear %s head (best L%dH%d %.2f): the grid stays dark; compare a trained model.",
                   what, l, h, v);
    return fmt("%s Strongest here: L%dH%d (score %.2f), open in the Head tab.", look, l, h, v);
}

// "‘·much’ (34 %)" for the captions
static std::string token_pct(const gb::tokenizer& tok, int id, double p) {
    return quoted(tok, id) + fmt(" (%.*f %%)", 100 * p < 9.95 ? 1 : 0, 100 * p);
}

void break_step(app_state& s, int row) {
    const break_output* b = output_of<break_output>(s, ANALYSIS_BREAK).get();
    if (!break_is_current(b, s.model, s.prompt, s.bos)) return;
    const gb::break_result& res = b->res;
    const int n = (int)res.rows.size();
    row = std::max(-1, std::min(row, n - 1));
    if (s.demos.kind != DEMO_BREAK) { // a click on a row of the Learn tab: step through from there
        end_demo(s);
        s.demos.kind = DEMO_BREAK;
        s.demos.prompt = s.prompt;
        s.demos.model = s.model.get();
    }
    s.demos.waiting = false;
    s.demos.break_row = row;
    s.ablation = row >= 0 ? res.rows[row].ab : gb::ablation{};
    s.demos.ablation = s.ablation.describe();
    if (row >= 0) {
        s.demos.caption = fmt("%d of %d, %s. ", row + 1, n, res.rows[row].label.c_str()) + visible_quotes(res.rows[row].explanation);
    } else {
        const double n0 = res.base_resid_norm; // 312, 4.12; 1234 rather than 1.23e+03 (as the rows' sentences)
        s.demos.caption = "Nothing removed: the model predicts " + token_pct(s.model->tok, res.base_top_id, res.base_top_prob) +
                         fmt(std::fabs(n0) >= 1000 ? " and the last token's vector is %.0f long." : " and the last token's vector is %.3g long.", n0) +
                         " Next removes one part of the model at a time.";
    }
}

void update_demo(app_state& s) {
    auto& ain = inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION);
    if (s.demos.kind == DEMO_NONE) return;
    if (s.prompt != s.demos.prompt || !s.model || s.model.get() != s.demos.model ||
        (s.demos.kind == DEMO_BREAK && s.ablation.describe() != s.demos.ablation)) {
        end_demo(s); // edited: the caption no longer describes what is shown
        return;
    }
    if (s.demos.kind == DEMO_BREAK) {
        const analysis_status& st = s.analysis[ANALYSIS_BREAK];
        if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_BREAK]) { // e.g. a prompt too long
            s.demos.waiting = false;
            s.demos.caption = "could not break it: " + st.error;
            return;
        }
        const break_output* b = output_of<break_output>(s, ANALYSIS_BREAK).get();
        if (!s.demos.candidates.empty()) { // choosing: the chosen prompt becomes the demo's
            if (b && b->choice && b->model == s.model && b->bos == s.bos) {
                s.prompt = s.demos.prompt = b->prompt;
                s.demos.candidates.clear();
                s.demos.caption = "removing each part of the model in turn...";
            }
            return;
        }
        if (s.demos.waiting && break_is_current(b, s.model, s.prompt, s.bos)) break_step(s, 0);
        return;
    }
    if (s.demos.kind == DEMO_TEMPERATURE) { // the caption follows the columns shown (the temperatures may be changed)
        const analysis_status& st = s.analysis[ANALYSIS_SAMPLING];
        if (!st.error.empty() && st.error_key == s.analysis_want[ANALYSIS_SAMPLING]) {
            s.demos.waiting = false;
            s.demos.caption = "could not sample: " + st.error;
            return;
        }
        const sampling_output* o = output_of<sampling_output>(s, ANALYSIS_SAMPLING).get();
        if (!o || o->key != s.analysis_want[ANALYSIS_SAMPLING] || o->key == s.demos.caption_key || o->columns.size() != 3) return;
        s.demos.waiting = false;
        s.demos.caption_key = o->key;
        const gb::tokenizer& tok = s.model->tok;
        const int top = o->columns[0].dist.ids[0];
        std::string shares;
        for (size_t i = 0; i < 3; i++) {
            const sampling_column& c = o->columns[i];
            const double p = c.dist.ids[0] == top ? c.dist.probs[0] : 0.0;
            shares += fmt("%s%.0f %% at T %.2g", i == 0 ? "" : i == 1 ? ", " : " and ", 100 * p, c.temperature);
        }
        s.demos.caption = fmt("One prompt, one seed, %s, three temperatures: the top token %s holds ",
                             o->top_k > 0 ? fmt("top-k %d", o->top_k).c_str() : "every token", quoted(tok, top).c_str()) +
                         shares + ". A low temperature sharpens the distribution and repeats the safe words; a high one "
                                  "flattens it, and the text wanders.";
        return;
    }
    if (!s.demos.waiting || !s.result || !result_is_current(s)) return;
    s.demos.waiting = false;
    const gb::tokenizer& tok = s.model->tok;
    switch (s.demos.kind) {
    case DEMO_INDUCTION:
        s.demos.caption = head_caption(
            s, gb::SCORE_INDUCTION, 0.1f, "induction",
            "The second half repeats the first: an induction head looks from each repeated token to the one that "
            "followed its earlier copy (a stripe below the diagonal).");
        break;
    case DEMO_PREV_TOKEN:
        s.demos.caption = head_caption(
            s, gb::SCORE_PREV_TOKEN, 0.3f, "previous-token",
            "A previous-token head sends each token's attention to the token just before it (the line under the "
            "diagonal).");
        break;
    case DEMO_LENS: {
        const std::string top = s.result->pred.top.empty() ? "?" : quoted(tok, s.result->pred.top[0].id);
        s.demos.caption = "Each row decodes the residual stream after one layer as if it were the last. The model's "
                         "final guess is " + top + ": find the layer where it first becomes the top token at the last "
                         "position.";
        break;
    }
    case DEMO_IOI: {
        int t = -1, c = -1;
        attribution_tokens(s, &t, &c);
        if (ain.target >= 0)
            s.demos.caption = "Which heads push " + quoted(tok, t) + " over " + quoted(tok, c) +
                             "? Each cell of the map is a head's direct share of that logit difference: red heads push it up "
                             "(the name movers, which copy the indirect object), blue heads push back.";
        else
            s.demos.caption = "' Mary' or ' John' is not one token in this model, so this shows its own top-2, " +
                             quoted(tok, t) + " over " + quoted(tok, c) + ": each cell of the map is a head's direct share of "
                             "that logit difference.";
        break;
    }
    default: break;
    }
}

} // namespace gbui
