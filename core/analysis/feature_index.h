// A corpus index of an SAE's features: the corpus cut into windows of tokens, run through the model, and each
// feature's highest activations (window, position, activation) kept; built once, with progress, and cached in a
// file beside the SAE (keyed by the corpus, the model and the SAE's encoder, so another of any builds a new one).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/features.h"

namespace gb {

struct feature_context {
    int window = 0, position = 0; // the window (chunks[window]) and the position in it
    float act = 0;
};

struct feature_index {
    uint64_t key = 0;
    int window = 0;                           // tokens per window (the last one may be shorter)
    int per_feature = 0;                      // contexts kept per feature
    int d_sae = 0;
    std::vector<std::vector<int>> chunks;     // [windows][<= window] token ids
    std::vector<std::vector<feature_context>> top; // [d_sae] highest activation first; only activations above 0
};

// progress(done, total) after each window (may be empty).
using index_progress = std::function<void(int done, int total)>;

// Builds the index of corpus text (bos: each window starts with the model's BOS).
feature_index build_feature_index(const model& m, const bound_sae& b, const std::string& text, bool bos,
                                  int window, int per_feature, const index_progress& progress);

// The index of the corpus file for b on m: read from its cache file beside the SAE when one was built from the same
// corpus, model and SAE, else built and written there (a cache that cannot be written is a warning in note).
// built says which happened; path is the cache file.
feature_index cached_feature_index(const model& m, const bound_sae& b, const std::string& corpus_path, bool bos,
                                   const index_progress& progress, bool& built, std::string& path, std::string& note);

// The text of a context: up to `before` tokens before the position, the token itself in [[ ]], `after` after.
std::string context_text(const model& m, const feature_index& ix, const feature_context& c, int before = 12, int after = 4);

} // namespace gb
