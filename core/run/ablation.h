// Ablations as the user names them (CLI flags, app toggles, sessions), and their meaning as interventions on
// hook points (docs/interpretability.md "Ablations"). The forward pass sees only the interventions.
#pragma once
#include <string>
#include <vector>

#include "model/model.h"
#include "run/hooks.h"
#include "run/steer.h"

namespace gb {

struct layer_set {
    bool on = false;
    std::vector<int> layers; // empty = every layer
    bool covers(int layer) const;
    bool covers_all(int n_layer) const; // on, and every layer 0..n_layer-1 included
};

struct head_ref {
    int layer = 0;
    int head = 0;
    bool operator==(const head_ref& o) const { return layer == o.layer && head == o.head; }
};

// Attention knockout: query position `query` of head `head` in layer `layer` may not read key position `key`
// (-1: every head, query or key; "L.H:Q-K", "L:Q-K" and "*" as the CLI spells them). The pattern is renormalised
// over the keys left. Decoder-only kinds (FEATURE_KNOCKOUT).
struct knockout {
    int layer = 0;
    int head = -1;
    int query = -1;
    int key = -1;
    bool operator==(const knockout& o) const {
        return layer == o.layer && head == o.head && query == o.query && key == o.key;
    }
    std::string describe() const; // "0.1:3-2", "2:*-0"
};

struct ablation {
    layer_set no_attention;  // attn_out is zero (and an encoder–decoder decoder's cross_out)
    layer_set no_residual;   // resid_mid / resid_post: x <- f(x) instead of x + f(x)
    layer_set no_layernorm;  // attn_in / mlp_in norms are the identity; final_norm too when all layers
    std::vector<head_ref> heads; // the head's z (weighted values, before W_o) is zero; its pattern is still kept
    std::vector<head_ref> experts; // MoE: (layer, expert): the expert's mixing weight is zero for every token (the
                                   // other chosen experts keep theirs, not renormalised); head_ref::head = expert
    std::vector<knockout> knockouts; // attention knockouts, in the order given
    steering steer;                  // a steering vector added to resid_post (decoder kinds, FEATURE_STEERING): the
                                     // app applies it like an ablation, and a run without it is the baseline
    bool any() const;
    std::string describe() const; // "no-residual[0,3] heads 5.1 experts 1.3 knockout 0.1:3-2" or "none"
};

// Throws gb::error when a layer, head or expert index is outside the model (or experts are named for a dense one).
void check_ablation(const ablation& ab, const model_config& c);
// The layers and heads an ablation may name in m: an encoder–decoder's stacks share the index (each leaves alone
// what it lacks: a distilled BART has 12 encoder and 6 decoder layers), so the larger of the two.
int ablation_layers(const model& m);
int ablation_heads(const model& m);
// check_ablation against those (a dense model's or an MoE model's own config otherwise); knockouts on a kind
// without FEATURE_KNOCKOUT are refused with the kind table's line.
void check_ablation(const ablation& ab, const model& m);
// "0.1:3-2,2:*-0" (LAYER.HEAD:QUERY-KEY or LAYER:QUERY-KEY, QUERY or KEY may be *). Throws gb::error naming the
// bad item; ranges are checked by check_ablation and check_knockouts.
std::vector<knockout> parse_knockouts(const std::string& list);
// The knockouts of ab against a prompt of T tokens in c: throws gb::error (one line, naming the knockout) for a
// query or key outside the prompt, or for a query that a knockout leaves no key to read (position 0 reads only
// itself). Returns a note for each knockout that changes nothing (every key it names comes after its query, or
// outside its window: already masked), to be said once.
std::vector<std::string> check_knockouts(const ablation& ab, const model_config& c, int T);
// Whether knockout k is in ab; toggle_knockout adds it or takes it out (the app's right-click).
bool knocked_out(const ablation& ab, const knockout& k);
void toggle_knockout(ablation& ab, const knockout& k);
// From the CLI's/app's lists: ablate "no-residual,no-layernorm,no-attention", layers "0,3" (restricts
// ablate), heads "5.1,5.5", experts "1.3,0.0" (LAYER.EXPERT). Throws gb::error naming the bad item; ranges are
// checked by check_ablation.
ablation parse_ablation(const std::string& ablate, const std::string& layers, const std::string& heads,
                        const std::string& experts = "");
// Whether expert e of layer l is in ab.experts; toggle_expert adds it or takes it out (the app's right-click).
bool expert_ablated(const ablation& ab, int layer, int expert);
void toggle_expert(ablation& ab, int layer, int expert);

// The ablation as interventions: no-attention = ZERO attn_out (and cross_out in an encoder–decoder's decoder);
// no-residual = NO_RESIDUAL at resid_mid and resid_post (the cross-attention's add, between them, drops the stream
// too); no-layernorm = IDENTITY_NORM at attn_in and mlp_in (every norm of those sublayers, the cross-attention's
// included; and final_norm when it covers every layer);
// head L.H = ZERO of head H's slice of z at layer L; expert L.E = ZERO of expert E's weight at the router of
// layer L; knockout L.H:Q-K = KNOCKOUT at layer L's pattern (head H, position Q, key K; -1 for *); steering =
// ADD of each direction (values in ab.steer's vector, scale its scale) at resid_post of its layer, from its
// position on: the interventions point into ab, which must outlive them. Checked against c first.
std::vector<intervention> ablation_interventions(const ablation& ab, const model_config& c);

} // namespace gb
