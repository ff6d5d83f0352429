// The kind table: for each kind of model, its input, its output and the features it does not offer, with why.
#include "model/kind.h"

#include "model/arch.h"
#include "util/error.h"

namespace gb {

// Reasons shared by several kinds.
static const char* no_experts = "its MLPs are dense: it has no experts to route tokens to";
static const char* no_cross = "it has no encoder, so no cross-attention";
static const char* no_image = "it reads text, not images";
static const char* no_knockout = "attention knockout is built for decoder-only models, whose queries read only the "
                                 "keys before them";

const kind_info& kind_table(model_kind k) {
    static kind_info table[KIND_COUNT];
    static const bool filled = [] {
        kind_info& dec = table[KIND_DECODER];
        dec = {"decoder", "decoder-only language model", INPUT_TEXT, OUTPUT_NEXT_TOKEN, {}};
        dec.why_not[FEATURE_EXPERTS] = no_experts;
        dec.why_not[FEATURE_CROSS] = no_cross;
        dec.why_not[FEATURE_IMAGE] = no_image;

        kind_info& moe = table[KIND_MOE];
        moe = {"moe", "mixture-of-experts language model", INPUT_TEXT, OUTPUT_NEXT_TOKEN, {}};
        moe.why_not[FEATURE_CROSS] = no_cross;
        moe.why_not[FEATURE_IMAGE] = no_image;

        kind_info& enc = table[KIND_ENCODER];
        enc = {"encoder", "masked-language-model encoder", INPUT_TEXT, OUTPUT_FILL_MASK, {}};
        enc.why_not[FEATURE_GENERATE] = "it fills masked tokens (fill mask); it does not generate text";
        enc.why_not[FEATURE_TEMPERATURES] = "it fills masked tokens; it has no continuation to sample";
        enc.why_not[FEATURE_BOS] = "its tokenizer wraps every prompt in its own special tokens (e.g. [CLS] ... [SEP])";
        enc.why_not[FEATURE_ATTRIBUTION] = "its stream is normalised after every residual add (Post-LN), so the heads' "
                                           "and MLPs' writes do not sum to its logits";
        enc.why_not[FEATURE_PATCHING] = "activation patching scores a next-token prediction; an encoder predicts at "
                                        "its masks (see fill mask)";
        enc.why_not[FEATURE_BREAK_IT] = "break it follows a next-token prediction; ablate parts by hand and watch fill mask";
        enc.why_not[FEATURE_LEARN] = "the walk follows a decoder's next-token prediction; an encoder predicts none "
                                     "(see fill mask and the logit lens)";
        enc.why_not[FEATURE_DEMOS] = "the demos follow a decoder's next-token prediction; an encoder fills masks instead";
        enc.why_not[FEATURE_EXPERTS] = no_experts;
        enc.why_not[FEATURE_KNOCKOUT] = no_knockout;
        enc.why_not[FEATURE_CROSS] = no_cross;
        enc.why_not[FEATURE_IMAGE] = no_image;
        enc.why_not[FEATURE_TRACE] = "causal tracing follows a decoder's next-token answer; an encoder predicts at its "
                                     "masks (see fill mask)";
        enc.why_not[FEATURE_STEERING] = "steering is built for decoder-only models' continuations; an encoder fills "
                                        "masks and generates nothing to steer";
        enc.why_not[FEATURE_SAE] = "SAEs are read on a decoder's causal stream (SAELens's and Gemma Scope's hooks); "
                                   "an encoder's stream sees the whole prompt";
        enc.why_not[FEATURE_SURPRISAL] = "every token sees the whole prompt, so none is predicted from the ones before "
                                         "it (a masked LM's loss is per mask: see fill mask)";

        kind_info& s2s = table[KIND_SEQ2SEQ];
        s2s = {"encoder-decoder", "encoder–decoder (translation)", INPUT_SOURCE_TARGET, OUTPUT_NEXT_TARGET, {}};
        s2s.why_not[FEATURE_TEMPERATURES] = "it samples one translation at a time: give one temperature "
                                            "(generate --source TEXT --temperature T)";
        s2s.why_not[FEATURE_BOS] = "its tokenizer frames the source, and the decoder starts from its decoder start token";
        s2s.why_not[FEATURE_ATTRIBUTION] = "direct logit attribution follows a decoder-only stream; the cross-attention's "
                                           "share is not split out";
        s2s.why_not[FEATURE_INDUCTION_TEST] = "repeated random tokens would run the decoder without a source";
        s2s.why_not[FEATURE_PATCHING] = "activation patching compares two prompts of a decoder-only model; patching a "
                                        "source against a corrupted source is not built";
        s2s.why_not[FEATURE_BREAK_IT] = "break it ablates the parts of a decoder-only forward one at a time; the two "
                                        "stacks of an encoder–decoder are not walked";
        s2s.why_not[FEATURE_DEMOS] = "the demos are written for a decoder's next-token prediction";
        s2s.why_not[FEATURE_TRACE] = "causal tracing noises a decoder-only prompt's subject; noising the source of "
                                     "an encoder–decoder is not built";
        s2s.why_not[FEATURE_EXPERTS] = no_experts;
        s2s.why_not[FEATURE_KNOCKOUT] = no_knockout;
        s2s.why_not[FEATURE_IMAGE] = no_image;
        s2s.why_not[FEATURE_SAE] = "SAEs are read on a decoder-only model's stream; an encoder–decoder's two stacks "
                                   "are not built";
        s2s.why_not[FEATURE_STEERING] = "steering is built for decoder-only models; an encoder–decoder's two stacks "
                                        "are not steered";

        kind_info& vis = table[KIND_VISION];
        vis = {"vision", "image classifier", INPUT_IMAGE, OUTPUT_CLASSES, {}};
        vis.why_not[FEATURE_GENERATE] = "it classifies an image; it does not generate text";
        vis.why_not[FEATURE_TEMPERATURES] = "it classifies an image; it has no text to sample";
        vis.why_not[FEATURE_TOKENIZE] = "it reads an image, not text: its positions are [CLS] and the image's patches";
        vis.why_not[FEATURE_BOS] = "its positions are [CLS] and the image's patches";
        vis.why_not[FEATURE_ATTRIBUTION] = "direct logit attribution follows a language model's next-token logit; the "
                                           "classifier's logit at [CLS] is not split into heads";
        vis.why_not[FEATURE_INDUCTION_TEST] = "its tokens are image patches: there is no token sequence to repeat";
        vis.why_not[FEATURE_PATCHING] = "activation patching compares two prompts; patching one image into another is "
                                        "not built";
        vis.why_not[FEATURE_BREAK_IT] = "break it follows a language model's next-token prediction";
        vis.why_not[FEATURE_LEARN] = "the walk follows a language model's next-token prediction";
        vis.why_not[FEATURE_DEMOS] = "the demos are written for a language model";
        vis.why_not[FEATURE_EXPERTS] = no_experts;
        vis.why_not[FEATURE_KNOCKOUT] = no_knockout;
        vis.why_not[FEATURE_CROSS] = no_cross;
        vis.why_not[FEATURE_TRACE] = "causal tracing noises a subject's tokens; an image has no subject to find";
        vis.why_not[FEATURE_SURPRISAL] = "it reads an image: there are no tokens to predict";
        vis.why_not[FEATURE_SAE] = "it classifies an image; SAEs are read on a language model's stream";
        vis.why_not[FEATURE_STEERING] = "it classifies an image; steering is built for language models' continuations";
        return true;
    }();
    (void)filled;
    if (k < 0 || k >= KIND_COUNT) throw error("internal: model kind " + std::to_string((int)k) + " is not in the kind table");
    return table[k];
}

model_kind kind_of(const model_config& c) { return arch_table(c.arch).kind; }

const char* feature_name(feature f) {
    static const char* names[FEATURE_COUNT] = {"run", "live", "generate", "temperatures", "tokenize", "bos", "lens",
                                               "attribution", "head scores", "induction test", "patching", "break it",
                                               "learn", "demos", "experts", "cross-attention", "image", "surprisal",
                                               "gradients", "knockout", "trace", "steering", "sae"};
    return f >= 0 && f < FEATURE_COUNT ? names[f] : "?";
}

bool offers(const model_config& c, feature f) { return kind_info_of(c).why_not[f] == nullptr; }

std::string refusal(const model& m, feature f) {
    const kind_info& k = kind_info_of(m.config);
    if (!k.why_not[f]) return "";
    // "a image classifier" reads wrong: the article follows the title's first letter
    const char first = k.title[0];
    const bool vowel = first == 'a' || first == 'e' || first == 'i' || first == 'o' || first == 'u';
    return m.path + " is " + (vowel ? "an " : "a ") + k.title + " (" + arch_table(m.config.arch).name + "): " + k.why_not[f];
}

void require(const model& m, feature f) {
    const std::string why = refusal(m, f);
    if (!why.empty()) throw error(why);
}

} // namespace gb
