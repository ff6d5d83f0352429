// Tiny random encoders (BERT, RoBERTa, DistilBERT) written by the tests as Hugging Face folders (config.json,
// model.safetensors under the masked-LM classes' names, and a tokenizer), and a plain double-precision reference
// forward for them written from the published semantics (HF's BertForMaskedLM and friends), not from core/.
//
// Hook-point conventions for Post-LN blocks (docs/models.md "Encoders"):
// - resid_pre of layer 0 is the embeddings after their LayerNorm (token + position (+ type 0)).
// - attn_in = the stream itself (no norm before the sublayer); attn_out = W_o z + b_o.
// - resid_mid = LN1(resid_pre + attn_out), mlp_in = resid_mid, resid_post = LN2(resid_mid + mlp_out).
// - no-residual drops the stream from the sum (LN1(attn_out)); no-layernorm at a layer makes LN1 and LN2 the
//   identity, and the masked-LM head's LayerNorm (the "final norm") too when it covers every layer. The
//   embeddings' LayerNorm stays (it is part of the embedding).
// - final_norm = LN_head(GELU(x W_t + b_t)); logits = final_norm E^T + b (E the tied token embedding).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"
#include "ref_trace.h"
#include "run/ablation.h"
#include "run/forward.h"

struct encoder_spec {
    std::string family = "bert"; // HF model_type: bert, roberta, distilbert
    int n_layer = 2, d_model = 32, n_head = 4, d_ff = 48, vocab = 120, n_pos = 40, n_type = 2;
    bool tied = true;             // the decoder's weight is the token embedding (not written) or its own tensor
    bool prefixed = true;         // names with the model prefix ("bert.") as BertForMaskedLM saves them
    uint32_t seed = 1;
    float std = 0.3f;             // of the weight matrices (norm gains are 1 + N(0, 0.1))
};

struct tiny_encoder {
    std::string dir;
    encoder_spec spec;
    int pos_offset = 0;                          // RoBERTa: 2
    std::map<std::string, std::vector<float>> w; // HF names without the model prefix, HF layouts ([out][in])
    const std::vector<float>& at(const std::string& name) const;
};

// dir/ with config.json, model.safetensors and a tokenizer (bert / distilbert: vocab.txt; roberta: vocab.json +
// merges.txt). The vocabulary's first ids are the specials ([PAD] [UNK] [CLS] [SEP] [MASK] / <s> <pad> </s> <unk>
// <mask>), then ASCII letters and a few words.
tiny_encoder write_tiny_encoder(const std::string& dir, const encoder_spec& s);

// logits [T][V] at every position, attention [L][H][T][T] (full rows: no mask), residual norms and every
// intermediate (ref_trace.h) of m on tokens under ab.
ref_trace reference_encoder(const tiny_encoder& m, const std::vector<int>& tokens, const gb::ablation& ab,
                            const ref_options& opt = {});

// Options that keep every point a record can keep, so a comparison covers q, k, v, z, head_out, mlp_post,
// final_norm and the stream (the encoders' and vision models' tests).
gb::forward_options keep_every_point();

// The ablations every encoder runs: none, no-attention, no-residual (all, layer 1), no-layernorm (all, layer 0),
// heads, everything at layer 0.
std::vector<std::pair<std::string, gb::ablation>> encoder_ablation_cases();
