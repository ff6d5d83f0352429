// Tiny random image classifiers (ViT, DeiT) written by the tests as Hugging Face folders (config.json with
// id2label, model.safetensors under ViTForImageClassification / DeiTForImageClassificationWithTeacher names,
// preprocessor_config.json), and a plain double-precision reference forward written from HF's modeling_vit /
// modeling_deit, not from core/.
//
// Hook points (pre-norm blocks, as GPT-2's): resid_pre of layer 0 is the embeddings ([CLS], [DIST], patches
// W_patch p + b, each plus its position row); attn_in = layernorm_before(x); mlp_in = layernorm_after(x);
// final_norm = the model's last layernorm at every position; logits [T][V] = the class head at every position,
// except that a DeiT with a teacher's row 0 is HF's prediction: (class head at [CLS] + distillation head at
// [DIST]) / 2.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ref_trace.h"
#include "run/ablation.h"

struct vision_spec {
    std::string family = "vit"; // vit or deit
    int n_layer = 2, d_model = 32, n_head = 4, d_ff = 48, image = 16, patch = 4, channels = 3, labels = 7;
    bool teacher = true;        // DeiT: cls_classifier + distillation_classifier (false: one "classifier")
    bool with_head = true;      // false: no classifier tensors, as a bare ViTModel saves
    uint32_t seed = 1;
    float std = 0.3f;
};

struct tiny_vision {
    std::string dir;
    vision_spec spec;
    int n_prefix = 1;                            // [CLS] (+ [DIST])
    std::map<std::string, std::vector<float>> w; // logical keys (see tiny_vision.cpp), HF layouts
    const std::vector<float>& at(const std::string& name) const;
};

// dir/ with config.json (labels "label0".. in id2label), model.safetensors and a preprocessor_config.json that
// resizes to the model's size with bilinear resampling and normalises by mean 0.5 / std 0.5.
tiny_vision write_tiny_vision(const std::string& dir, const vision_spec& s);

// Seeded random pixels [C][S][S] in about -1 .. 1, what a preprocessed image looks like.
std::vector<float> random_pixels(const vision_spec& s, uint32_t seed);

ref_trace reference_vision(const tiny_vision& m, const std::vector<float>& pixels, const gb::ablation& ab,
                           const ref_options& opt = {});
