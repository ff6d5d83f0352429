// Tiny random encoder-decoder translation models (BART, mBART, Marian) written by the tests as Hugging Face
// folders (config.json, model.safetensors under BartForConditionalGeneration / MBartForConditionalGeneration /
// MarianMTModel names), and a plain double-precision reference forward for them written from HF's published
// modeling_bart.py / modeling_mbart.py / modeling_marian.py, not from core/ (which has no such forward yet: these
// are the groundwork its tests will compare against).
//
// What HF computes (eval mode, no dropout, no padding masks: every source and target id is real):
// - Embeddings, encoder and decoder alike: E[id] * embed_scale + P[t], embed_scale = sqrt(d_model) when
//   config.scale_embedding, else 1 (the scale is on the token embedding only, never on the positions).
//   BART and mBART: P is a learned table of max_position_embeddings + 2 rows read at row t + 2 (HF's
//   BartLearnedPositionalEmbedding offset, a fairseq padding legacy), then layernorm_embedding (LN of the sum).
//   Marian: P is MarianSinusoidalPositionalEmbedding's fixed table read at row t (no offset), and there is no
//   layernorm_embedding. Its layout is NOT interleaved: with half = ceil(d/2), column i < half is
//   sin(t / 10000^(2i/d)) and column half + i is cos(t / 10000^(2i/d)) (HF computes it in float64 with numpy,
//   then stores float32). MarianMTModel lists both tables in _keys_to_ignore_on_save, so a folder saved by
//   current transformers does not hold them (older pytorch_model.bin conversions do); the writer leaves them out
//   unless spec.marian_positions_stored, and the reference always uses the closed form.
// - Layers (nn.LayerNorm, eps 1e-5, everywhere):
//   Post-LN (BART, Marian): x = LN(x + sublayer(x)) after each sublayer; no final norm.
//   Pre-LN (mBART): x = x + sublayer(LN(x)); then the stack's own layer_norm (model.encoder.layer_norm,
//   model.decoder.layer_norm) after the last layer. HF decides this by the class (model_type), not by a config
//   key: the "normalize_before" the writer puts in config.json (true for mBART) is informational, as in real
//   fairseq-converted configs, and HF's modeling code never reads it.
//   Encoder layer: self_attn (self_attn_layer_norm), fc1 -> activation -> fc2 (final_layer_norm).
//   Decoder layer: causal self_attn (self_attn_layer_norm), encoder_attn (encoder_attn_layer_norm) whose keys
//   and values are k_proj / v_proj of the final encoder output (after mBART's encoder layer_norm) and whose
//   queries come from the decoder stream, then fc1 -> activation -> fc2 (final_layer_norm).
// - Attention: softmax(q k^T / sqrt(dh)) v per head, q/k/v/out_proj all with biases. HF's older code scales q by
//   dh^-0.5 before the product, the current eager path scales the product: the same numbers. The reference keeps
//   q unscaled at its hook point (as every other reference here) and scales the scores.
// - Activation: "gelu" (BART, mBART: exact erf GELU) or "swish" (Marian: x * sigmoid(x), i.e. SiLU).
// - Logits: lm_head(decoder output) + final_logits_bias, lm_head tied to model.shared unless spec.tied is false.
//   final_logits_bias [1][V] is a registered buffer that HF saves; HF initialises it to zero, but Marian's
//   converted checkpoints carry Marian's real output bias, so the writer draws it at random (a forward that
//   forgot it would not match). HF lists it in _keys_to_ignore_on_load_missing: a file without it loads as zeros.
// - The decoder reads target_ids as given: the caller puts decoder_start_token_id first (HF's
//   shift_tokens_right). Logits [T][V] are for every target position.
//
// Hook points (core/run/hooks.h names), laid out as in ref_trace.h:
// - encoder (a ref_trace with n_tokens = S): exactly the encoders' (tiny_encoder.h) for Post-LN and the
//   vision models' (tiny_vision.h) for Pre-LN: resid_pre of layer 0 is the embeddings after layernorm_embedding
//   (BART, mBART) or the plain sum (Marian); Post-LN attn_in = x, resid_mid = LN1(x + attn_out), mlp_in =
//   resid_mid, resid_post = LN2(resid_mid + mlp_out); Pre-LN attn_in = LN1(x), resid_mid = x + attn_out, mlp_in =
//   LN2(resid_mid), resid_post = resid_mid + mlp_out. final_norm [S][d] is the encoder's output (what every
//   cross-attention reads): mBART's encoder layer_norm of the last resid_post, BART's and Marian's last
//   resid_post itself. No logits (the encoder has no head): its logits stay empty.
// - decoder (a ref_trace with n_tokens = T): the same points for the self-attention and MLP sublayers, pattern
//   [H][T][T] causal (0 above the diagonal); attention = the self-attention [L][H][T][T]. The cross-attention
//   sublayer sits between resid_mid and mlp_in, with the points cross_in [T][d], cross_pattern [H][T][S], cross_z
//   [T][H*dh] and cross_out [T][d]; ref_cross_trace holds its tensors too (q, k, v),
//   including the stream after it (cross.resid), from which mlp_in is computed (Post-LN: mlp_in = cross.resid;
//   Pre-LN: mlp_in = final_layer_norm(cross.resid)), and resid_post = LN(cross.resid + mlp_out) or
//   cross.resid + mlp_out. So in the decoder trace resid_post does not follow from resid_mid and mlp_out alone.
//   final_norm = mBART's decoder layer_norm of the last resid_post, or that resid_post itself (BART, Marian);
//   logits = final_norm lm_head^T + final_logits_bias.
//
// Ablations (gb::ablation), a proposed convention for encoder-decoders: decoder layer l and encoder layer l
// share the index l, and each switch applies to both stacks by that index.
// - no_attention at layer l zeroes the encoder's self-attention output at encoder layer l, and at decoder layer
//   l both the self-attention and the cross-attention outputs (cross-attention counts as attention).
// - no_residual at layer l drops the stream from every sum of that layer (Post-LN: LN(sublayer) instead of
//   LN(x + sublayer); Pre-LN: sublayer instead of x + sublayer), the cross-attention's sum included.
// - no_layernorm at layer l makes that layer's norms the identity (self_attn_layer_norm, final_layer_norm, and
//   the decoder's encoder_attn_layer_norm); mBART's encoder layer_norm becomes the identity when the set covers
//   every encoder layer, its decoder layer_norm when it covers every decoder layer. layernorm_embedding stays
//   (it is part of the embedding), as the encoders' embedding LayerNorm does.
// - heads {l, h} zero head h's z in the self-attention of encoder layer l and of decoder layer l; never in the
//   cross-attention (whose pattern and z are kept whole).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ref_trace.h"
#include "run/ablation.h"

struct seq2seq_spec {
    std::string family = "bart"; // HF model_type: bart, mbart, marian
    int enc_layers = 2, dec_layers = 2, d_model = 32, n_head = 4, d_ff = 48, vocab = 120, n_pos = 40;
    // embeddings times sqrt(d_model): -1 the family's usual (marian and mbart true, as opus-mt and
    // mbart-large-cc25 configs say; bart false), 0 off, 1 on
    int scale_embedding = -1;
    bool tied = true; // lm_head is model.shared (not written); false: lm_head.weight is its own random tensor
    // Where the tied token embedding is stored: "shared" (model.shared.weight, what current save_pretrained keeps
    // of the tied group), "decoder" (model.decoder.embed_tokens.weight only, as facebook/bart-large-cnn's
    // checkpoint has it) or "all" (model.shared.weight plus copies under the encoder's and decoder's
    // embed_tokens, and lm_head.weight when tied, as older pytorch_model.bin conversions hold them).
    std::string embed_stored_as = "shared";
    bool marian_positions_stored = false; // Marian: also write the sinusoidal tables (HF's current saves do not)
    uint32_t seed = 1;
    float std = 0.3f; // of the weight matrices and learned positions (norm gains are 1 + N(0, 0.1))
};

struct tiny_seq2seq {
    std::string dir;
    seq2seq_spec spec;
    bool scale_embedding = false;                // resolved from spec.scale_embedding
    bool pre_ln = false;                         // mBART
    int pad_id = 1, eos_id = 2, decoder_start_id = 2;
    // Every distinct tensor once, under its HF name and layout ([out][in]): the tied token embedding is always
    // "model.shared.weight" here whatever name(s) the file stores it under; "lm_head.weight" only when untied;
    // "final_logits_bias" [V]; no Marian position tables (the reference computes them).
    std::map<std::string, std::vector<float>> w;
    const std::vector<float>& at(const std::string& name) const;
};

// dir/ with config.json and model.safetensors (every tensor f32), and (vocab >= 8) a SentencePiece Unigram
// tokenizer.json with tokenizer_config.json: "▁" pieces of letters and a few words, the family's specials and its
// source template (mBART "$A </s> en_XX" with the language code last, as mBART-cc25; BART "<s> $A </s>"; Marian
// "$A </s>"). Real BART folders carry a byte-level BPE (256 byte tokens: more than a tiny vocabulary) and Marian
// ones SentencePiece's own files, which converters turn into such a tokenizer.json.
// Special ids: BART and mBART <s> 0, <pad> 1, </s> 2, <unk> 3, decoder start </s> (BART) or the language code
// V - 1 (mBART); Marian </s> 0, <unk> 1, <pad> V - 1, decoder start <pad> (as opus-mt configs).
tiny_seq2seq write_tiny_seq2seq(const std::string& dir, const seq2seq_spec& s);

// The decoder's cross-attention sublayers, per decoder layer l (L = dec_layers, S source, T target positions).
struct ref_cross_trace {
    std::vector<double> attention;             // [L][H][T][S] softmax over the S source positions
    std::vector<std::vector<double>> attn_in;  // [L] of [T][d] the stream the queries read (Pre-LN: normed)
    std::vector<std::vector<double>> q;        // [L] of [T][H*dh] unscaled
    std::vector<std::vector<double>> k, v;     // [L] of [S][H*dh] from the final encoder output
    std::vector<std::vector<double>> z;        // [L] of [T][H*dh]
    std::vector<std::vector<double>> attn_out; // [L] of [T][d] out_proj(z) + bias, zero under no_attention
    std::vector<double> resid;                 // [L][T][d] the stream after the cross-attention sublayer
    std::vector<double> resid_norm;            // [L][T]
};

struct ref_seq2seq {
    ref_trace encoder;     // n_layer = enc_layers, n_tokens = S; attention [L][H][S][S]; final_norm = its output
    ref_trace decoder;     // n_layer = dec_layers, n_tokens = T; attention [L][H][T][T] causal; logits [T][V]
    ref_cross_trace cross; // the decoder's cross-attention, attention [L][H][T][S]
    std::vector<double> logits; // [T][V] (decoder.logits)
};

// Patches and edits for each stack's points (ref_trace.h); the cross-attention takes none.
struct seq2seq_ref_options {
    ref_options encoder, decoder;
};

// The whole model on source_ids [S] and target_ids [T] (the decoder's input as given) under ab (conventions
// above). Throws std::runtime_error for an id outside the vocabulary or a sequence longer than n_pos.
ref_seq2seq reference_seq2seq(const tiny_seq2seq& m, const std::vector<int>& source_ids,
                              const std::vector<int>& target_ids, const gb::ablation& ab,
                              const seq2seq_ref_options& opt = {});

// Marian's sinusoidal position table [n_pos][d] in double, HF's non-interleaved layout (above).
std::vector<double> marian_positions(int n_pos, int d);
