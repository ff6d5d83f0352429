// The app's command line: parsing, and the usage text --help prints.
#include "options.h"

#include <cstdio>
#include <cstdlib>

#include "glassbox_version.h" // generated at build time (packaging/version.cmake)
#include "kernels/gemm.h"
#include "util/error.h"

namespace gbui {

// glassbox --help: the options, then the script commands (--script FILE; docs/app.md "Scripts and headless runs")
static const char* usage = R"(Usage: glassbox [OPTIONS]
Glassbox, a desktop microscope for transformer models: every attention head, the residual stream, ablations
recomputed live, the logit lens, attribution, patching, gradients, circuits, steering and SAE features.
Without --model it opens the last model, else the embedded default model.

Model and input:
  --model PATH|NAME        a Hugging Face folder, a .gguf or a llama2.c .bin (also hf:ORG/NAME, ollama:NAME)
  --compare PATH           a second model of the same shape, compared with the first (Compare view)
  --prompt TEXT            the prompt to open with
  --image FILE             an image (PNG/JPEG) for an image classifier
  --bos                    put the model's BOS token before the prompt
  --session FILE.json      open a saved session (model, prompt, ablations, selection)
Ablations at start:
  --ablate LIST            no-residual,no-layernorm,no-attention
  --layers LIST            the layers the ablation applies to (0,3; default all)
  --heads LIST             heads knocked out, LAYER.HEAD (5.1,5.5)
  --experts LIST           experts knocked out, LAYER.EXPERT (1.3)
  --select-head L.H        the head shown in the Head view
  --select-token I         the position selected
Compute:
  --backend cpu|gl         attention on the CPU or OpenGL 4.3 compute shaders
  --capture-budget MB      the memory the live state may take (default 512)
  --matmul fp32|amx|int8|auto   the matrix-product kernel
  --weights stored|f32     keep weights as stored (F16, BF16, quantised) or dequantise them to f32
Window:
  --size WxH               the window's size
  --ui-scale S             text and widget size, 0.6 to 3 (1 = 100 %)
  --remember               a scripted or screenshot run also saves its settings
Headless runs:
  --screenshot FILE.png    draw once the results are in, save the window, quit
  --script FILE            run the script's commands frame by frame, then quit (see below)
  --timeout S              how long a screenshot or script run waits (seconds)
  --help, --version

Script commands (one a line, # comments):
  report:     wait | print | screenshot FILE | measure N
  keyboard:   type TEXT | latency TEXT |
              key [ctrl+][shift+]end|backspace|enter|escape|left|right|up|down|tab|f5|f11|=|-|0|e|o|kp+
  generation: gen-tokens N | gen-temperature T | gen-step K | flood N
  files:      open PATH | open-b PATH | session FILE | save-session FILE | export DIR
  view:       scale linear|log|rowmax | image FILE | rollout on|off | tab NAME | compare-view a|b|avsb | demo NAME |
              colour-by NAME | corrupt TEXT | patch-mode patching|trace | subject TEXT | select-token I |
              select-head L.H | sae PATH | feature N | feature-value V | feature-corpus FILE
  layout:     ui-scale S | present on|off | maximise PANEL | restore | export-panel PANEL DIR
  waiting:    wait-running NAME (an analysis: lens, patching, ...) | frames N
  mouse:      wheel N | hover LABEL | click LABEL | rclick LABEL | dclick LABEL
  picker:     picker machine|hf|file|close | picker-filter TEXT | picker-repo ID | picker-gguf FILE |
              picker-path TEXT | picker-wait [downloading]
The manual: docs/app.md in Glassbox's source (the app's man page: man glassbox).
)";

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw gb::error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--model") o.model = value();
        else if (a == "--compare") o.model_b = value();
        else if (a == "--prompt") o.prompt = value(), o.prompt_given = true;
        else if (a == "--image") o.image = value(); // for a ViT / DeiT model
        else if (a == "--bos") o.bos = true;
        else if (a == "--capture-budget") {
            std::string v = value();
            o.budget_mb = std::atoi(v.c_str());
            if (o.budget_mb < 1) throw gb::error("--capture-budget: expected megabytes, got '" + v + "'");
        }
        else if (a == "--backend") {
            std::string v = value();
            if (v != "cpu" && v != "gl") throw gb::error("--backend: expected cpu or gl, got '" + v + "'");
            o.gl = v == "gl";
        }
        else if (a == "--matmul") gb::set_matmul_kind(gb::parse_matmul_kind(value())); // before any model is packed
        else if (a == "--weights") {
            const std::string v = value();
            if (v != "stored" && v != "f32") throw gb::error("--weights: expected stored or f32, got '" + v + "'");
            o.keep_stored = v == "stored";
        }
        else if (a == "--ablate") o.ablate = value();
        else if (a == "--layers") o.layers = value();
        else if (a == "--heads") o.heads = value();
        else if (a == "--experts") o.experts = value();
        else if (a == "--screenshot") o.screenshot = value();
        else if (a == "--script") o.script = value();
        else if (a == "--timeout") { // a screenshot or script run: how long to wait for the results
            std::string v = value();
            char* end = nullptr;
            o.timeout_s = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(o.timeout_s >= 1 && o.timeout_s <= 86400))
                throw gb::error("--timeout: expected seconds from 1 to 86400, got '" + v + "'");
        }
        else if (a == "--session") o.session = value();
        else if (a == "--remember") o.remember = true;
        else if (a == "--select-head") {
            std::string v = value();
            if (std::sscanf(v.c_str(), "%d.%d", &o.sel_layer, &o.sel_head) != 2 || o.sel_layer < 0 || o.sel_head < 0)
                throw gb::error("--select-head: expected LAYER.HEAD like 2.3, got '" + v + "'");
        } else if (a == "--select-token") {
            std::string v = value();
            char* end = nullptr;
            o.sel_token = (int)std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || o.sel_token < 0) throw gb::error("--select-token: expected an index, got '" + v + "'");
        } else if (a == "--size") {
            std::string v = value();
            if (std::sscanf(v.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width < 320 || o.height < 240 ||
                o.width > 8192 || o.height > 8192)
                throw gb::error("--size: expected WxH like 1600x1000, got '" + v + "'");
            o.size_given = true;
        } else if (a == "--ui-scale") { // text and widget size: 1 = 100 %
            std::string v = value();
            char* end = nullptr;
            o.ui_scale = std::strtof(v.c_str(), &end);
            if (v.empty() || *end || !(o.ui_scale >= 0.6f && o.ui_scale <= 3.0f))
                throw gb::error("--ui-scale: expected a scale from 0.6 to 3 (1 = 100 %), got '" + v + "'");
        } else if (a == "--help" || a == "-h") {
            std::fputs(usage, stdout);
            std::exit(0);
        } else if (a == "--version") {
            std::printf("glassbox %s\n", GLASSBOX_VERSION_FULL);
            std::exit(0);
        } else {
            throw gb::error("unknown option " + a);
        }
    }
    return o;
}

} // namespace gbui
