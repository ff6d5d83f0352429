// Encoder–decoders (BART, mBART, Marian): the source through the encoder stack once, then the target through the
// decoder, whose layers read the encoder's output by cross-attention. The model (model.h) is the decoder with the
// LM head; model::encoder is the encoder stack. Both run through the one forward (eval), each as its own stack.
//
// Ablations name a layer index shared by both stacks (docs/interpretability.md "Ablations"): no-attention at
// layer l zeroes encoder layer l's self-attention and decoder layer l's self- and cross-attention; no-residual
// and no-layernorm act on every sum and norm of layer l in both; head l.h zeroes head h's self-attention in both
// stacks (the cross-attention's heads are kept whole). A stack without layer l (or head h) is left alone.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/record.h"

namespace gb {

struct seq2seq_record {
    record encoder;                 // the source: self-attention [L_enc][H][S][S] (every key seen), norms, ...
    record decoder;                 // the target: masked self-attention [L][H][T][T], cross [L][H][T][S], logits
                                    // [T][V] (each target position's prediction of the next target token)
    std::vector<float> source_out;  // [S][d] the encoder's output (what every cross-attention reads)
};

// Whether m is an encoder–decoder (its decoder rows' arch_info::cross).
bool is_seq2seq(const model& m);
// The source as the encoder reads it: the tokenizer's template around the text (BART's <s> text </s>, Marian's
// text </s>, mBART's text </s> en_XX), or the text then EOS when the tokenizer names no template.
std::vector<int> source_ids(const model& m, const std::string& text);
// The decoder's input for a target text, as HF trains it (shift_tokens_right of the tokenizer's target):
// decoder_start_token_id, the tokenizer's frame before the text (BART's <s>; Marian's and mBART's have none), then
// the text's tokens (the frame's end is left for the decoder to predict).
std::vector<int> target_ids(const model& m, const std::string& text);
// The part of an ablation that applies to a stack of n_layer layers and n_head heads (the shared layer index:
// layers and heads past the stack's are dropped; a layer set that named only such layers is off).
ablation stack_ablation(const ablation& ab, int n_layer, int n_head);

// The encoder's output [S][d] for the source under ab (its part of it); rec, when given, gets the encoder's
// record (opt.keep). Throws gb::error for an empty or too-long source.
std::vector<float> run_encoder(record* rec, const model& m, const std::vector<int>& source, const ablation& ab = {},
                               const forward_options& opt = {});
// Both stacks: the encoder on source, the decoder on target (its input, decoder start first) with logits at
// every target position. opt's keep applies to both records; its interventions and hooks to the decoder only.
void run_seq2seq(seq2seq_record& out, const model& m, const std::vector<int>& source, const std::vector<int>& target,
                 const ablation& ab = {}, const forward_options& opt = {});

// Cross-attention averaged over heads [T][S]: of one layer, or (layer -1) over every layer too; the classic
// alignment picture of translation, over the layers the record kept. Empty when it kept none (or has no source).
std::vector<float> cross_average(const record& dec, int layer = -1);
// For each target row, the source position it attends to most in cross_average(dec, layer).
std::vector<int> cross_alignment(const record& dec, int layer = -1);

// The target generated for source, greedy or sampled (sp), one token at a time through the decoder's cache, the
// source encoded once: stops at EOS (kept as the last id) or after max_new tokens; the first token is the
// config's forced_bos_token_id when it has one (BART's <s>), as HF's generate makes it. ids are the decoder's input
// after decoder start (so target = {decoder_start} + ids is what run_seq2seq shows). on_token may return false to
// stop early.
generation translate(const model& m, const std::vector<int>& source, int max_new, const sampling& sp,
                     const ablation& ab = {}, const std::function<bool(int)>& on_token = {});

} // namespace gb
