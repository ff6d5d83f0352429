// What the demonstration shown keeps between frames (demos.h starts, follows and ends it): which one, the prompt
// and model it was started on, its caption, and Break it's row. One field of app_state (demos).
#pragma once
#include <string>
#include <vector>

#include "analysis/break_it.h" // gb::prompt_candidate

namespace gb {
struct model;
}

namespace gbui {

// One-click demonstrations (demos.h): a prompt, a view and a selection chosen by the loaded model's own scores.
enum demo_kind { DEMO_NONE, DEMO_INDUCTION, DEMO_PREV_TOKEN, DEMO_LENS, DEMO_IOI, DEMO_BREAK, DEMO_TEMPERATURE, DEMO_COUNT };

struct demo_state {
    demo_kind kind = DEMO_NONE;
    bool waiting = false;            // its run has not arrived yet: the head and caption come with it
    std::string prompt;              // the prompt it set (editing the prompt ends the demo)
    const gb::model* model = nullptr; // the model it was started on (another model ends the demo)
    std::string caption;             // what to look at
    std::string caption_key;         // Temperature: the key of the Sampling output its caption was written from
    // Break it (demo and Learn tab): the row whose ablation is applied, -1 for none (the model restored); the
    // ablation the demo applied (changing it by hand ends the demo); the prompts the demo chooses among while
    // its first result is computed (empty once chosen)
    int break_row = -1;
    std::string ablation;
    std::vector<gb::prompt_candidate> candidates;
};

} // namespace gbui
