// Ablations: parsing, checking, describing, and their translation into interventions on hook points.
#include "run/ablation.h"

#include <algorithm>
#include <sstream>

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
    return no_attention.on || no_residual.on || no_layernorm.on || !heads.empty() || !experts.empty();
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
    return o.tellp() > 0 ? o.str() : "none";
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

int ablation_layers(const model& m) {
    return m.encoder ? std::max(m.config.n_layer, m.encoder->config.n_layer) : m.config.n_layer;
}

int ablation_heads(const model& m) { return m.encoder ? std::max(m.config.n_head, m.encoder->config.n_head) : m.config.n_head; }

void check_ablation(const ablation& ab, const model& m) {
    model_config widest = m.config; // (an encoder–decoder has no experts: an expert ablation is refused as for any dense model)
    widest.n_layer = ablation_layers(m);
    widest.n_head = ablation_heads(m);
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
    return out;
}

} // namespace gb
