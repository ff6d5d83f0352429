// The Steer tab's own inputs (its row in the tab table makes them; inputs_of reads them): the contrast prompts
// (one a line), where each prompt's stream is read, the vector (built or opened), and how it is applied (the
// ablation's steer holds what is applied: the live run recomputes with it). Its analyses: steer_analysis.cpp.
#pragma once
#include <memory>
#include <string>

#include "analysis/steer.h"

namespace gbui {

struct steer_inputs {
    std::string positive = "I love this, it is wonderful.\nWhat a happy day, everyone is smiling.\nThe food was "
                           "great and we had fun.\nShe laughed with joy.";
    std::string negative = "I hate this, it is terrible.\nWhat a sad day, everyone is crying.\nThe food was bad "
                           "and we were angry.\nShe cried with pain.";
    int where = 0;             // gb::steer_position: 0 the last token, 1 the mean over positions
    int build = 0;             // bumped by Build: the build request's inputs
    std::shared_ptr<const gb::steer_vector> vec; // the vector the tab shows and applies (null: none yet)
    float scale = 4.0f;        // alpha
    int lo = 1, hi = 1;        // the layers it is added after (those with a direction)
    int from = 0;              // the first position steered
    float scales[3] = {2.0f, 4.0f, 8.0f}; // the side-by-side continuations' alphas
    int tokens = 16;
    float sweep_scales[5] = {1.0f, 2.0f, 4.0f, 8.0f, 16.0f};
    std::string reference = "The cat sat on the mat. The dog ran in the park and the children played with a "
                            "ball. Once upon a time there was a little girl who lived in a small house near the "
                            "woods. Every day she walked to school with her friend.";
    std::string path = "steer.gguf"; // Open and Save
    std::string note;          // the last Open/Save/Build outcome, one line
};

} // namespace gbui
