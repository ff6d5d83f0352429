// Tiny random Llama models written by the tests in llama2.c layout, and a plain double-precision reference
// forward for them (RMSNorm, RoPE on adjacent pairs or halves with rope_theta and linear / llama3 scaling,
// grouped-query attention, optional q/k/v biases, SwiGLU), with ablations.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "ref_trace.h"
#include "run/forward.h"
#include "run/record.h"

struct tiny_llama_spec {
    int dim = 32, hidden = 48, n_layer = 2, n_head = 4, n_kv_head = 2, vocab = 300, seq_len = 32;
    bool shared_classifier = true;
    uint32_t seed = 1;
    float std = 0.25f;                 // standard deviation of the weight matrices (same draws, scaled)
    // What the reference computes. A llama2.c file holds none of these (theta 10000, adjacent pairs, no
    // biases): with other values the .bin is not this model; the tests write it as HF or GGUF instead.
    double rope_theta = 10000;
    bool rope_half = false;            // rotate halves (i, i + d/2) as HF and Qwen2, not adjacent pairs (2i, 2i+1)
    std::string rope_scaling = "none"; // "none", "linear" (positions / factor) or "llama3" (Meta's rule)
    double rope_factor = 1, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
    int rope_orig_ctx = 0;             // llama3: original_max_position_embeddings
    bool qkv_bias = false;             // Qwen2: q/k/v biases, drawn after all other weights ("bq.0", "bk.0", "bv.0")
};

struct tiny_llama {
    std::string model_path, tokenizer_path;
    tiny_llama_spec spec;
    std::map<std::string, std::vector<float>> w; // llama2.c names and layouts ([out][in]), per layer "wq.0" ...
};

// Writes model.bin and tokenizer.bin (a vocabulary of <unk> <s> </s>, 256 byte tokens, then letters and merges).
tiny_llama write_tiny_llama2c(const std::string& dir, const tiny_llama_spec& s);
// A llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score, int32 length, bytes.
void write_llama2c_tokenizer(const std::string& path, const std::vector<std::string>& vocab,
                             const std::vector<float>& scores);

// logits [T][V], attention [L][H][T][T], resid_norm [2L+1][T], and every intermediate (ref_trace.h)
using llama_ref = ref_trace;
// opt patches or edits the run (ref_trace.h).
llama_ref reference_llama(const tiny_llama& m, const std::vector<int>& tokens, const gb::ablation& ab,
                          const ref_options& opt = {});
// rms_final and the classifier (wcls, or emb when shared) in double; no attention output bias.
ref_readout reference_readout(const tiny_llama& m);
// The reference's RoPE frequency of pair i (radians per position), scaling included. Exposed for tests that
// write it into files (GGUF rope_freqs.weight).
double reference_rope_freq(const tiny_llama_spec& s, int pair);

// The ablations every Llama-family test runs (needs 2 layers and 4 heads): none, each switch on all layers and
// on one, two heads, everything at once.
std::vector<std::pair<std::string, gb::ablation>> llama_ablation_cases();
// Runs m on tokens under every case and expects the record to match reference_llama(tm) (expect_record_matches,
// 1e-4; attn_out and mlp_out kept too); label names the file in failure messages.
void expect_matches_reference(const gb::model& m, const tiny_llama& tm, const std::vector<int>& tokens,
                              const std::string& label);

// The one comparison of a record with a reference (Llama and the other families): logits (all positions),
// attention and residual norms, and every other per-layer point the record kept (attn_out, mlp_out, ... as the
// request asked) at each kept layer, each within tol (scaled, test_util.h). A point the reference did not
// produce at a kept layer is a failure.
void expect_record_matches(const gb::record& got, const ref_trace& want, const std::string& label, double tol = 1e-4);
