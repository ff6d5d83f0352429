// The tiny models and script helpers the app's end-to-end tests share (test_gui.cpp, test_gui_analyses.cpp,
// test_gui_live.cpp): each written once per test binary into test_tmp/.
#pragma once
#include <map>
#include <string>

#include "io/loader.h"

#include "tiny_model.h"

// A tiny GPT-2 for the app tests, written into test_tmp/<name>.
inline tiny_model write_gui_model(const std::string& name, int n_layer, int n_head, int d_model, uint32_t seed) {
    tiny_spec s;
    s.n_layer = n_layer;
    s.n_head = n_head;
    s.d_model = d_model;
    s.n_ctx = 64;
    s.seed = seed;
    return write_tiny_gpt2(test_temp_dir(name), s);
}

inline const tiny_model& gui_model() {
    static tiny_model tm = write_gui_model("gui_model", 3, 4, 32, 11);
    return tm;
}

// A second model of another shape (4 layers x 6 heads), for sessions that name it.
inline const tiny_model& other_model() {
    static tiny_model tm = write_gui_model("gui_model_b", 4, 6, 48, 12);
    return tm;
}

// The tiny model's prompts: " cat", " sat" and " the" are single tokens; "mat" and "hat" have the same length.
inline const std::string clean_prompt = "the cat sat on the mat";

// n backspace key presses, as script lines.
inline std::string backspaces(int n) {
    std::string out;
    for (int i = 0; i < n; i++) out += "key backspace\n";
    return out;
}

// A model whose patching takes seconds on a long prompt (for cancellation).
inline const tiny_model& long_model() {
    static tiny_model tm = [] {
        tiny_spec s;
        s.n_layer = 6;
        s.n_head = 4;
        s.d_model = 128;
        s.n_ctx = 256;
        s.seed = 13;
        return write_tiny_gpt2(test_temp_dir("gui_model_long"), s);
    }();
    return tm;
}

// The model in tm.dir, loaded once per test binary (the tests compare the app with the core on it).
inline const gb::model& loaded(const tiny_model& tm) {
    static std::map<std::string, gb::model> models;
    auto it = models.find(tm.dir);
    if (it == models.end()) it = models.emplace(tm.dir, gb::load_model(tm.dir)).first;
    return it->second;
}
