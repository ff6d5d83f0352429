// Steering (activation addition): scale times a per-layer direction added to the residual stream after chosen
// layers (resid_post of layer l, llama.cpp's place for its direction.l), at every position or from one on. The
// forward sees it as ADD interventions (hooks.h), so the live recompute, sessions, generation and gradients take
// it like any other intervention.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/control_vector.h"
#include "model/model.h"
#include "run/hooks.h"

namespace gb {

struct steering {
    std::shared_ptr<const steer_vector> vec; // null: no steering
    float scale = 0;                         // alpha: the direction is multiplied by it
    std::vector<int> layers;                 // empty: every layer the vector has a direction for
    int from = 0;                            // the first position steered (0: every position)
    bool any() const { return vec && scale != 0; }
    std::vector<int> applied_layers() const; // layers, or the vector's
    std::string describe() const;            // "steer 4 x vector at L2,3 from position 0" or "none"
};

// Throws gb::error (one line) when the vector does not fit c: another width, a layer outside the model, a layer
// asked for that the vector has no direction at, a non-finite scale or a from-position outside the context.
void check_steering(const steering& s, const model_config& c);
// The ADD interventions of s at resid_post (after check_steering). Their values point into `values`, which the
// caller keeps while the interventions are used (live_run and sessions copy them).
std::vector<intervention> steering_interventions(const steering& s, const model_config& c,
                                                 std::vector<std::vector<float>>& values);
// "3,4" -> {3, 4}; throws gb::error naming the bad item (ranges are checked by check_steering).
std::vector<int> parse_layer_list(const std::string& list, const std::string& what);

} // namespace gb
