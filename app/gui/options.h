// The app's command line: the options it takes and what they are parsed into.
#pragma once
#include <string>

namespace gbui {

struct options {
    std::string model_b; // --compare M2: model B, compared with the model shown
    std::string model, prompt, image, ablate, layers, heads, experts, screenshot, script, session;
    int sel_layer = -1, sel_head = -1, sel_token = -1;
    int width = 1600, height = 1000;
    bool size_given = false; // --size: wins over the size remembered from the last run
    bool remember = false;   // --remember: a screenshot or script run reads and writes the settings as a window does
    bool bos = false;
    bool prompt_given = false;
    bool gl = false;
    int budget_mb = 512;
    double timeout_s = 120;      // --timeout: a screenshot or script run ends with an error after this long
    bool keep_stored = true; // --weights stored|f32
    float ui_scale = 0;      // --ui-scale S: the text scale for this run (0: the remembered one, else the monitor's)
};

// Parses argv; throws gb::error naming the option that was wrong. --help and --version print and exit here;
// --matmul sets the kernels' matmul kind at once (before any model is packed).
options parse_options(int argc, char** argv);

} // namespace gbui
