// Ablations: parsing, checking, describing, and their translation into interventions on hook points.
#include "run/ablation.h"

#include <algorithm>
#include <sstream>

#include "model/kind.h"
#include "util/error.h"

namespace gb {

bool layer_set::covers(int layer) const {
    if (!on) return false;
    return layers.empty() || std::find(layers.begin(), layers.end(), layer) != layers.end();
}

bool layer_set::covers_all(int n_layer) const {
    if (!on) return false;
    for (int l = 0; l < n_layer; l++)
        if (!covers(l)) return false;
    return true;
}

bool ablation::any() const {
    return no_attention.on || no_residual.on || no_layernorm.on || !heads.empty() || !experts.empty() ||
           !knockouts.empty() || steer.any();
}

static std::string star(int v) { return v < 0 ? "*" : std::to_string(v); }

std::string knockout::describe() const {
    return std::to_string(layer) + (head >= 0 ? "." + std::to_string(head) : "") + ":" + star(query) + "-" + star(key);
}

bool knocked_out(const ablation& ab, const knockout& k) {
    return std::find(ab.knockouts.begin(), ab.knockouts.end(), k) != ab.knockouts.end();
}

void toggle_knockout(ablation& ab, const knockout& k) {
    auto it = std::find(ab.knockouts.begin(), ab.knockouts.end(), k);
    if (it != ab.knockouts.end()) ab.knockouts.erase(it);
    else ab.knockouts.push_back(k);
}

bool expert_ablated(const ablation& ab, int layer, int expert) {
    return std::find(ab.experts.begin(), ab.experts.end(), head_ref{layer, expert}) != ab.experts.end();
}

void toggle_expert(ablation& ab, int layer, int expert) {
    auto it = std::find(ab.experts.begin(), ab.experts.end(), head_ref{layer, expert});
    if (it != ab.experts.end()) ab.experts.erase(it);
    else ab.experts.push_back({layer, expert});
}

static void describe_set(std::ostringstream& o, const char* name, const layer_set& s) {
    if (!s.on) return;
    if (o.tellp() > 0) o << ' ';
    o << name;
    if (!s.layers.empty()) {
        o << '[';
        for (size_t i = 0; i < s.layers.size(); i++) o << (i ? "," : "") << s.layers[i];
        o << ']';
    }
}

std::string ablation::describe() const {
    std::ostringstream o;
    describe_set(o, "no-residual", no_residual);
    describe_set(o, "no-layernorm", no_layernorm);
    describe_set(o, "no-attention", no_attention);
    if (!heads.empty()) {
        if (o.tellp() > 0) o << ' ';
        o << "heads";
        for (size_t i = 0; i < heads.size(); i++) o << (i ? "," : " ") << heads[i].layer << '.' << heads[i].head;
    }
    if (!experts.empty()) {
        if (o.tellp() > 0) o << ' ';
        o << "experts";
        for (size_t i = 0; i < experts.size(); i++) o << (i ? "," : " ") << experts[i].layer << '.' << experts[i].head;
    }
    if (!knockouts.empty()) {
        if (o.tellp() > 0) o << ' ';
        o << "knockout";
        for (size_t i = 0; i < knockouts.size(); i++) o << (i ? "," : " ") << knockouts[i].describe();
    }
    if (steer.any()) {
        if (o.tellp() > 0) o << ' ';
        o << steer.describe();
    }
    return o.tellp() > 0 ? o.str() : "none";
}

static void check_knockout_ranges(const ablation& ab, const model_config& c) {
    for (const knockout& k : ab.knockouts) {
        if (k.layer < 0 || k.layer >= c.n_layer || k.head >= c.n_head)
            throw error("knockout " + k.describe() + " is outside the model (" + std::to_string(c.n_layer) +
                        " layers x " + std::to_string(c.n_head) + " heads)");
        if (k.query >= c.n_ctx || k.key >= c.n_ctx)
            throw error("knockout " + k.describe() + ": position outside the model's context of " + std::to_string(c.n_ctx));
    }
}

void check_ablation(const ablation& ab, const model_config& c) {
    for (const layer_set* s : {&ab.no_attention, &ab.no_residual, &ab.no_layernorm})
        for (int l : s->layers)
            if (l < 0 || l >= c.n_layer)
                throw error("ablation layer " + std::to_string(l) + " is outside the model (layers 0.." +
                            std::to_string(c.n_layer - 1) + ")");
    for (const head_ref& h : ab.heads)
        if (h.layer < 0 || h.layer >= c.n_layer || h.head < 0 || h.head >= c.n_head)
            throw error("ablated head " + std::to_string(h.layer) + "." + std::to_string(h.head) +
                        " is outside the model (" + std::to_string(c.n_layer) + " layers x " +
                        std::to_string(c.n_head) + " heads)");
    for (const head_ref& e : ab.experts) {
        const std::string name = std::to_string(e.layer) + "." + std::to_string(e.head);
        if (c.n_expert <= 0)
            throw error("ablated expert " + name + ": this model has no experts (its MLP is dense)");
        if (e.layer < 0 || e.layer >= c.n_layer || e.head < 0 || e.head >= c.n_expert)
            throw error("ablated expert " + name + " is outside the model (" + std::to_string(c.n_layer) +
                        " layers x " + std::to_string(c.n_expert) + " experts: 0.0.." + std::to_string(c.n_layer - 1) +
                        "." + std::to_string(c.n_expert - 1) + ")");
    }
    check_knockout_ranges(ab, c);
    if (ab.steer.any()) check_steering(ab.steer, c);
}

static std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, ','))
        if (!cur.empty()) out.push_back(cur);
    return out;
}

static int parse_index(const std::string& s, const std::string& what) {
    char* end = nullptr;
    long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < 0 || v > 1000000)
        throw error(what + ": expected a non-negative integer, got '" + s + "'");
    return (int)v;
}

ablation parse_ablation(const std::string& ablate, const std::string& layers, const std::string& heads,
                        const std::string& experts) {
    ablation ab;
    std::vector<int> ls;
    for (const std::string& s : split_list(layers)) ls.push_back(parse_index(s, "--layers"));
    for (const std::string& name : split_list(ablate)) {
        layer_set* set = name == "no-residual"    ? &ab.no_residual
                         : name == "no-layernorm" ? &ab.no_layernorm
                         : name == "no-attention" ? &ab.no_attention
                                                  : nullptr;
        if (!set)
            throw error("--ablate: unknown ablation '" + name + "' (expected no-residual, no-layernorm, no-attention)");
        set->on = true;
        set->layers = ls;
    }
    if (!ls.empty() && !ab.any()) throw error("--layers restricts --ablate, but no --ablate was given");
    for (const std::string& s : split_list(heads)) {
        size_t dot = s.find('.');
        if (dot == std::string::npos) throw error("--heads: expected LAYER.HEAD like 5.1, got '" + s + "'");
        ab.heads.push_back({parse_index(s.substr(0, dot), "--heads"), parse_index(s.substr(dot + 1), "--heads")});
    }
    for (const std::string& s : split_list(experts)) {
        size_t dot = s.find('.');
        if (dot == std::string::npos) throw error("--experts: expected LAYER.EXPERT like 1.3, got '" + s + "'");
        ab.experts.push_back({parse_index(s.substr(0, dot), "--experts"), parse_index(s.substr(dot + 1), "--experts")});
    }
    return ab;
}

// A position of a knockout: a non-negative integer, or * (-1).
static int parse_position(const std::string& s, const std::string& item) {
    if (s == "*") return -1;
    return parse_index(s, "--knockout " + item + ": a position");
}

std::vector<knockout> parse_knockouts(const std::string& list) {
    std::vector<knockout> out;
    for (const std::string& item : split_list(list)) {
        const size_t colon = item.find(':'), dash = item.find('-', colon == std::string::npos ? 0 : colon);
        if (colon == std::string::npos || dash == std::string::npos)
            throw error("--knockout: expected LAYER.HEAD:QUERY-KEY or LAYER:QUERY-KEY like 0.1:3-2 or 2:*-0, got '" +
                        item + "'");
        const std::string head = item.substr(0, colon);
        const size_t dot = head.find('.');
        knockout k;
        k.layer = parse_index(head.substr(0, dot), "--knockout " + item + ": the layer");
        if (dot != std::string::npos) k.head = parse_index(head.substr(dot + 1), "--knockout " + item + ": the head");
        k.query = parse_position(item.substr(colon + 1, dash - colon - 1), item);
        k.key = parse_position(item.substr(dash + 1), item);
        out.push_back(k);
    }
    return out;
}

// Whether knockout k covers query q of head h and key j.
static bool covers(const knockout& k, int h, int q, int j) {
    return (k.head < 0 || k.head == h) && (k.query < 0 || k.query == q) && (k.key < 0 || k.key == j);
}

std::vector<std::string> check_knockouts(const ablation& ab, const model_config& c, int T) {
    check_knockout_ranges(ab, c);
    std::vector<std::string> notes;
    for (const knockout& k : ab.knockouts) {
        if (k.query >= T || k.key >= T)
            throw error("knockout " + k.describe() + ": position " + std::to_string(std::max(k.query, k.key)) +
                        " is outside the prompt's " + std::to_string(T) + " tokens");
        const int window = c.window_at(k.layer);
        bool reaches = false; // a key it names that a query it names sees
        for (int h = 0; h < c.n_head; h++) {
            if (k.head >= 0 && k.head != h) continue;
            for (int q = 0; q < T; q++) {
                if (k.query >= 0 && k.query != q) continue;
                const int j0 = window > 0 && q >= window ? q - window + 1 : 0;
                int left = 0;
                for (int j = j0; j <= q; j++) {
                    if (covers(k, h, q, j)) reaches = true;
                    bool off = false;
                    for (const knockout& o : ab.knockouts) off |= o.layer == k.layer && covers(o, h, q, j);
                    left += !off;
                }
                if (left > 0) continue;
                std::string names; // every knockout of that row: together they leave it nothing
                int count = 0;
                for (const knockout& o : ab.knockouts)
                    if (o.layer == k.layer && (o.head < 0 || o.head == h) && (o.query < 0 || o.query == q))
                        names += (count++ ? "," : "") + o.describe();
                throw error(std::string(count > 1 ? "knockouts " : "knockout ") + names + (count > 1 ? " leave" : " leaves") +
                            " query " + std::to_string(q) + " of head " + std::to_string(k.layer) + "." +
                            std::to_string(h) + " no key to read" + (q == 0 ? " (position 0 reads only itself)" : ""));
            }
        }
        if (!reaches)
            notes.push_back("knockout " + k.describe() + " changes nothing: every key it names comes after its query "
                            "(or outside its window), which cannot read it anyway");
    }
    return notes;
}

int ablation_layers(const model& m) {
    return m.encoder ? std::max(m.config.n_layer, m.encoder->config.n_layer) : m.config.n_layer;
}

int ablation_heads(const model& m) { return m.encoder ? std::max(m.config.n_head, m.encoder->config.n_head) : m.config.n_head; }

void check_ablation(const ablation& ab, const model& m) {
    model_config widest = m.config; // (an encoder–decoder has no experts: an expert ablation is refused as for any dense model)
    widest.n_layer = ablation_layers(m);
    widest.n_head = ablation_heads(m);
    if (!ab.knockouts.empty()) require(m, FEATURE_KNOCKOUT);
    if (ab.steer.any()) require(m, FEATURE_STEERING);
    check_ablation(ab, widest);
}

std::vector<intervention> ablation_interventions(const ablation& ab, const model_config& c) {
    check_ablation(ab, c);
    std::vector<intervention> out;
    for (int l = 0; l < c.n_layer; l++) {
        if (ab.no_layernorm.covers(l)) {
            out.push_back({INTERVENE_IDENTITY_NORM, HOOK_ATTN_IN, l});
            out.push_back({INTERVENE_IDENTITY_NORM, HOOK_MLP_IN, l});
        }
        if (ab.no_attention.covers(l)) {
            out.push_back({INTERVENE_ZERO, HOOK_ATTN_OUT, l});
            // an encoder–decoder's decoder layer: its cross-attention is attention too
            if (hook_exists(HOOK_CROSS_OUT, c)) out.push_back({INTERVENE_ZERO, HOOK_CROSS_OUT, l});
        }
        if (ab.no_residual.covers(l)) {
            out.push_back({INTERVENE_NO_RESIDUAL, HOOK_RESID_MID, l});
            out.push_back({INTERVENE_NO_RESIDUAL, HOOK_RESID_POST, l});
        }
    }
    if (ab.no_layernorm.covers_all(c.n_layer)) out.push_back({INTERVENE_IDENTITY_NORM, HOOK_FINAL_NORM, c.n_layer});
    for (const head_ref& h : ab.heads) {
        intervention z{INTERVENE_ZERO, HOOK_Z, h.layer};
        z.head = h.head;
        out.push_back(z);
    }
    for (const head_ref& e : ab.experts) {
        intervention z{INTERVENE_ZERO, HOOK_ROUTER, e.layer};
        z.head = e.head;
        out.push_back(z);
    }
    for (const knockout& k : ab.knockouts) {
        intervention v{INTERVENE_KNOCKOUT, HOOK_PATTERN, k.layer};
        v.head = k.head;
        v.position = k.query;
        v.key = k.key;
        out.push_back(v);
    }
    if (ab.steer.any())
        for (int l : ab.steer.applied_layers()) {
            intervention v{INTERVENE_ADD, HOOK_RESID_POST, l};
            v.values = ab.steer.vec->dirs[l].data();
            v.scale = ab.steer.scale;
            v.from = ab.steer.from;
            out.push_back(v);
        }
    return out;
}

} // namespace gb
