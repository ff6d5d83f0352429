// A command's input options as a session request, by the model's kind.
#include "input.h"

#include <algorithm>
#include <cstdio>

#include "run/seq2seq.h"
#include "run/vision.h"
#include "util/image.h"

namespace cli {

gb::session_request read_input(const args& a, const gb::model& m, const std::string& key) {
    gb::session_request rq;
    rq.baseline = false; // a command runs once: the run without the interventions only when it asks for it
    switch (model_input(a, m)) {
    case gb::INPUT_TEXT:
        rq.tokens = prompt_ids(m, a.need(key), a.has("bos"));
        if (rq.tokens.empty()) throw gb::error("--" + key + " is empty: nothing to run");
        if ((int)rq.tokens.size() > m.config.n_ctx)
            throw gb::error("--" + key + " too long: " + std::to_string(rq.tokens.size()) +
                            " tokens, the model's context is " + std::to_string(m.config.n_ctx));
        break;
    case gb::INPUT_IMAGE: {
        const gb::image img = gb::load_image(a.need("image"));
        rq.pixels = gb::vision_pixels(m, img);
        std::printf("image: %s (%dx%d) as %dx%d pixels, %dx%d patches of %d px\n", a.get("image").c_str(), img.width,
                    img.height, m.config.image_size, m.config.image_size, m.config.grid(), m.config.grid(),
                    m.config.patch_size);
        break;
    }
    case gb::INPUT_SOURCE_TARGET:
        rq.tokens = gb::source_ids(m, a.need("source"));
        if (a.has("target-text")) rq.target = gb::target_ids(m, a.get("target-text"));
        if (a.has("max-new-tokens"))
            rq.max_target = (int)parse_int(a.get("max-new-tokens"), "--max-new-tokens", 1, m.config.n_ctx - 1);
        break;
    }
    return rq;
}

void with_backend(gb::session_request& rq, const args& a) { rq.attention = choose_backend(a); }

void with_budget(gb::session_request& rq, const args& a) {
    rq.keep.budget_bytes = (size_t)parse_int(a.get("capture-budget", "512"), "--capture-budget", 1, 1 << 20) << 20;
}

gb::session_result run_once(const gb::model& m, const gb::session_request& rq) {
    gb::session s;
    gb::session_result r;
    gb::session_run(r, s, m, rq);
    return r;
}

void keep_for_analyses(gb::session_request& rq) {
    rq.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    rq.keep.resid_stream = true;
}

} // namespace cli
