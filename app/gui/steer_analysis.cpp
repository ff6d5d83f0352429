// The Steer tab's work on the analysis threads: the contrastive vector from the tab's prompt boxes, the prompt
// continued with and without the steering at several scales, and the cost sweep over scale x layer.
#include <chrono>
#include <sstream>

#include "analysis_table.h"
#include "analysis_worker.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace gbui {

namespace {

std::vector<std::vector<int>> prompt_lines(const gb::model& m, const std::string& text, bool bos, const char* side) {
    std::vector<std::vector<int>> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(gb::encode_prompt(m.tok, line, bos));
    if (out.empty()) throw gb::error(std::string("no ") + side + " prompts: write one a line");
    return out;
}

// The prompt as the main run encodes it (its last n_ctx tokens), leaving room for the continuation
std::vector<int> prompt_ids(const gb::model& m, const std::string& prompt, bool bos, int room) {
    std::vector<int> ids = gb::encode_prompt(m.tok, prompt, bos);
    if (ids.empty()) throw gb::error("the prompt is empty: nothing to continue");
    const int keep = std::max(1, m.config.n_ctx - room);
    if ((int)ids.size() > keep) ids.erase(ids.begin(), ids.end() - keep);
    return ids;
}

} // namespace

std::shared_ptr<const void> compute_steer(const analysis_request& q, const analysis_run& run) {
    const std::function<bool()>& stopped = run.stopped;
    const auto t0 = std::chrono::steady_clock::now();
    const gb::model& m = *q.model;
    auto out = std::make_shared<steer_output>();
    out->key = q.key;
    out->model = q.model;
    if (q.kind == ANALYSIS_STEER_BUILD) {
        std::vector<int> layers;
        for (int l = 0; l < m.config.n_layer; l++) layers.push_back(l);
        auto v = std::make_shared<gb::steer_vector>(gb::contrastive_vector(
            m, prompt_lines(m, q.positive, q.bos, "positive"), prompt_lines(m, q.negative, q.bos, "negative"), layers,
            q.where == 1 ? gb::STEER_MEAN : gb::STEER_LAST, stopped));
        v->name = "contrast#" + q.key.substr(q.key.rfind('|') + 1);
        out->vec = v;
    } else if (q.kind == ANALYSIS_STEER_COMPARE) {
        const std::vector<int> ids = prompt_ids(m, q.prompt, q.bos, q.gen_tokens);
        for (int id : ids) out->prompt_pieces.push_back(gb::token_text(m.tok, id));
        gb::compare_steering(out->compare, m, ids, q.steering, q.scales, q.gen_tokens, q.sampling, stopped);
    } else {
        const std::vector<int> ref = prompt_ids(m, q.reference, q.bos, 0);
        const std::vector<int> ids = prompt_ids(m, q.prompt, q.bos, 8);
        const int from = std::min(q.steering.from, (int)ref.size() - 1);
        gb::steer_sweep(out->sweep, m, *q.steering.vec, q.scales, q.layers, ref, from, ids, 8, stopped);
    }
    out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace gbui
