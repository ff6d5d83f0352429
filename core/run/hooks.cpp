// Hook point names, shapes and the checks on interventions.
#include "run/hooks.h"

#include "model/arch.h"
#include "util/error.h"

namespace gb {

static const char* const names[HOOK_COUNT] = {
    "resid_pre", "attn_in",  "q",        "k",       "v",          "pattern",    "z",          "head_out",
    "attn_out",  "resid_mid", "cross_in", "cross_pattern", "cross_z", "cross_out", "mlp_in", "router",
    "mlp_post",  "mlp_out",  "resid_post", "final_norm", "logits"};

const char* hook_name(hook_point p) { return p >= 0 && p < HOOK_COUNT ? names[p] : "?"; }

hook_point parse_hook_point(const std::string& name) {
    std::string all;
    for (int p = 0; p < HOOK_COUNT; p++) {
        if (name == names[p]) return (hook_point)p;
        all += std::string(p ? ", " : "") + names[p];
    }
    throw error("unknown hook point '" + name + "' (expected one of " + all + ")");
}

bool hook_exists(hook_point p, const model_config& c) {
    if (p == HOOK_ROUTER) return kind_of(c) == KIND_MOE;
    if (p == HOOK_MLP_POST) return kind_of(c) != KIND_MOE;
    if (p == HOOK_CROSS_IN || p == HOOK_CROSS_PATTERN || p == HOOK_CROSS_Z || p == HOOK_CROSS_OUT)
        return arch_table(c.arch).cross;
    return p >= 0 && p < HOOK_COUNT;
}

int hook_heads(hook_point p, const model_config& c) {
    if (p == HOOK_K || p == HOOK_V) return c.n_kv_head;
    if (p == HOOK_ROUTER) return c.n_expert;
    return hook_has_heads(p) ? c.n_head : 1;
}

int hook_head_width(hook_point p, const model_config& c, int n_keys) {
    switch (p) {
    case HOOK_Q:
    case HOOK_K:
    case HOOK_V:
    case HOOK_Z:
    case HOOK_CROSS_Z: return c.d_head;
    case HOOK_PATTERN:
    case HOOK_CROSS_PATTERN: return n_keys;
    case HOOK_HEAD_OUT: return c.d_model;
    case HOOK_ROUTER: return 1;
    default: return hook_width(p, c, n_keys);
    }
}

int hook_width(hook_point p, const model_config& c, int n_keys) {
    switch (p) {
    case HOOK_Q:
    case HOOK_Z:
    case HOOK_CROSS_Z: return c.n_head * c.d_head;
    case HOOK_K:
    case HOOK_V: return c.n_kv_head * c.d_head;
    case HOOK_PATTERN:
    case HOOK_CROSS_PATTERN: return n_keys;
    case HOOK_HEAD_OUT: return c.n_head * c.d_model;
    case HOOK_ROUTER: return c.n_expert;
    case HOOK_MLP_POST: return c.d_ff;
    case HOOK_LOGITS: return c.vocab_size;
    default: return c.d_model;
    }
}

std::string hook_label(hook_point p, int layer) {
    if (hook_is_final(p)) return hook_name(p);
    return "L" + std::to_string(layer) + " " + hook_name(p);
}

void check_interventions(const std::vector<intervention>& iv, const model_config& c) {
    for (const intervention& v : iv) {
        if (v.point < 0 || v.point >= HOOK_COUNT) throw error("intervention at an unknown hook point");
        // named only when something is wrong: checking runs on every forward call, a generated token included
        auto at = [&] { return v.layer < 0 ? std::string(hook_name(v.point)) + " (every layer)" : hook_label(v.point, v.layer); };
        if (!hook_exists(v.point, c))
            throw error("intervention at " + at() + (v.point == HOOK_ROUTER      ? ": this model has no experts (a dense MLP)"
                                                     : v.point == HOOK_MLP_POST ? ": an MoE model's MLP has no single activation"
                                                                                : ": this model has no cross-attention (no encoder)"));
        if (!hook_is_final(v.point) && v.layer >= c.n_layer)
            throw error("intervention at " + at() + ": the model has layers 0.." + std::to_string(c.n_layer - 1));
        if (v.head >= 0) {
            if (!hook_has_heads(v.point)) throw error("intervention at " + at() + ": this point has no heads");
            if (v.head >= hook_heads(v.point, c))
                throw error("intervention at " + at() + ": " + (v.point == HOOK_ROUTER ? "expert " : "head ") +
                            std::to_string(v.head) + " is outside the " + std::to_string(hook_heads(v.point, c)) +
                            (v.point == HOOK_ROUTER ? " experts" : " heads") + " there");
        }
        if (v.position >= c.n_ctx) throw error("intervention at " + at() + ": position " + std::to_string(v.position) +
                                                " is outside the context");
        switch (v.kind) {
        case INTERVENE_ZERO: break;
        case INTERVENE_SET:
            if (!v.values) throw error("intervention at " + at() + ": SET without values");
            if (hook_is_pattern(v.point)) throw error("intervention at " + at() + ": SET is not supported on the pattern (use a hook)");
            break;
        case INTERVENE_IDENTITY_NORM:
            if (v.point != HOOK_ATTN_IN && v.point != HOOK_MLP_IN && v.point != HOOK_FINAL_NORM)
                throw error("intervention at " + at() + ": an identity norm applies to attn_in, mlp_in or final_norm");
            if (v.head >= 0 || v.position >= 0) throw error("intervention at " + at() + ": a norm is the identity for every position");
            break;
        case INTERVENE_NO_RESIDUAL:
            if (v.point != HOOK_RESID_MID && v.point != HOOK_RESID_POST)
                throw error("intervention at " + at() + ": dropping the residual add applies to resid_mid or resid_post");
            if (v.head >= 0 || v.position >= 0) throw error("intervention at " + at() + ": the residual is dropped for every position");
            break;
        case INTERVENE_KNOCKOUT:
            if (v.point != HOOK_PATTERN) throw error("intervention at " + at() + ": a knockout applies to the pattern");
            if (v.key >= c.n_ctx) throw error("intervention at " + at() + ": key " + std::to_string(v.key) + " is outside the context");
            break;
        case INTERVENE_ADD:
            if (!v.values) throw error("intervention at " + at() + ": ADD without values");
            if (v.point != HOOK_RESID_PRE && v.point != HOOK_RESID_MID && v.point != HOOK_RESID_POST)
                throw error("intervention at " + at() + ": adding a vector applies to resid_pre, resid_mid or resid_post");
            if (v.head >= 0) throw error("intervention at " + at() + ": an added vector covers whole rows");
            if (v.from < 0 || v.from >= c.n_ctx)
                throw error("intervention at " + at() + ": from position " + std::to_string(v.from) + " is outside the context");
            break;
        default: throw error("intervention at " + at() + ": unknown kind");
        }
    }
}

} // namespace gb
