// The small inputs some tabs own (each one struct; its row in the tab table makes it, inputs_of reads it). The
// larger ones have files of their own (patching_inputs.h, sampling_inputs.h), and an analysis with files of its own
// keeps its tab's in its header (steer_analysis.h, feature_analysis.h, circuit_analysis.h, ...).
#pragma once

namespace gbui {

struct lens_inputs {             // the Logit lens tab
    int target = -1;             // the token it follows; -1: each position's final top-1
};

struct attribution_inputs {      // the Attribution tab (token ids; -1 = the default the panel names)
    int target = -1, contrast = -1; // -1: the prediction's top-1 / top-2
    int saliency_steps = 0;      // the token saliency: 0 gradient x input; N > 0 integrated gradients, N midpoint steps
    int saliency_ig_steps = 32;  // the steps integrated gradients takes when chosen
};

struct learn_inputs {            // the Learn tab
    int step = 0;                // the walk's step (or, without a walk, the picture's parts')
};

struct cross_inputs {            // the Cross-attention tab
    bool average = false;        // every head and layer averaged (the alignment)
};

struct image_inputs {            // the Image tab
    bool rollout = false;        // overlay the attention rollout instead of one head
};

} // namespace gbui
