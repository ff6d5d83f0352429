// The app's command line: parsing, and the usage text --help prints.
#include "options.h"

#include <cstdio>
#include <cstdlib>

#include "glassbox_version.h" // generated at build time (packaging/version.cmake)
#include "kernels/gemm.h"
#include "util/error.h"

namespace gbui {

static const char* usage =
    "usage: glassbox [--model PATH] [--compare PATH] [--prompt TEXT | --image FILE] [--bos] [--ablate LIST] [--layers LIST] [--heads LIST]\n"
    "                [--experts LIST] [--select-head L.H] [--select-token I] [--session FILE.json] [--backend cpu|gl]\n"
    "                [--capture-budget MB] [--matmul fp32|amx|int8|auto] [--weights stored|f32]\n"
    "                [--screenshot FILE.png] [--size WxH] [--ui-scale 0.6..3] [--script FILE] [--timeout S] [--remember]\n"
    "       glassbox --help | --version\n";

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw gb::error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--model") o.model = value();
        else if (a == "--compare") o.compare = value();
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
