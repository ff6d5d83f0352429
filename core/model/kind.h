// The kind of a model: what it reads, what it predicts, and which features it offers. One row per kind (the kind
// table, core/model/kind.cpp); every row of the architecture table names its kind. The CLI's commands, the app's
// tabs and the analyses ask this table — nothing outside core/model and core/run reads architecture flags to
// find out what a model is — and a feature a kind does not offer comes with the one line both front ends print.
#pragma once
#include <string>

namespace gb {

struct model;
struct model_config;

enum model_kind {
    KIND_DECODER, // decoder-only language model: causal, predicts the next token (GPT-2, Llama, Gemma, ...)
    KIND_MOE,     // a decoder whose MLPs are mixtures of experts chosen per token (Mixtral, Qwen-MoE, OLMoE)
    KIND_ENCODER, // masked language model: every token sees every token, fills [MASK] (BERT, RoBERTa, DistilBERT)
    KIND_SEQ2SEQ, // encoder–decoder: the encoder reads a source, the decoder writes a target (BART, mBART, Marian)
    KIND_VISION,  // image classifier: patches in, classes out at [CLS] (ViT, DeiT)
    KIND_COUNT
};

// What a request carries for a kind.
enum kind_input {
    INPUT_TEXT,          // a prompt's tokens
    INPUT_SOURCE_TARGET, // a source text for the encoder, a target for the decoder (given, or the model's translation)
    INPUT_IMAGE,         // an image, cut into patches
};

// What a kind predicts, and where.
enum kind_output {
    OUTPUT_NEXT_TOKEN,  // the token after the last one
    OUTPUT_FILL_MASK,   // each mask's fillers (without a mask: the last position the template does not fix)
    OUTPUT_CLASSES,     // the classifier's classes at [CLS], and where [CLS] looked (attention rollout)
    OUTPUT_NEXT_TARGET, // the decoder's next target token, and the source token each target token reads most
};

// Everything a user can ask of a model, in the CLI (commands, options) and in the app (tabs, controls).
enum feature {
    FEATURE_RUN,            // one forward pass with its record (every kind)
    FEATURE_LIVE,           // live recompute: an edit or an intervention recomputes only what it reaches
    FEATURE_GENERATE,       // continue the prompt (a decoder) or translate the source (an encoder–decoder)
    FEATURE_TEMPERATURES,   // one prompt continued at several temperatures from one seed (the Sampling tab)
    FEATURE_TOKENIZE,       // text to tokens and back
    FEATURE_BOS,            // a BOS token before the prompt (a tokenizer template that adds its own is not this)
    FEATURE_LENS,           // the logit lens: every residual point read through the final norm and the head
    FEATURE_ATTRIBUTION,    // direct logit attribution: each head's and MLP's share of a logit
    FEATURE_HEAD_SCORES,    // the heads' scores on the prompt (previous token, first token, induction, ...)
    FEATURE_INDUCTION_TEST, // the heads' scores on repeated random tokens
    FEATURE_PATCHING,       // activation patching between a clean and a corrupted prompt
    FEATURE_BREAK_IT,       // knock out each part of the model in turn and watch the prediction
    FEATURE_LEARN,          // the step-by-step walk through the forward pass of one token
    FEATURE_DEMOS,          // the app's guided demos (induction, previous token, lens, IOI, break it, temperature)
    FEATURE_EXPERTS,        // the routing of tokens to experts, and expert ablations
    FEATURE_CROSS,          // cross-attention: target rows over source columns, the alignment
    FEATURE_IMAGE,          // the image with its patch grid, attention and rollout overlaid
    FEATURE_SURPRISAL,      // each token's loss given the ones before it (run --loss, the strip under the chips)
    FEATURE_GRADIENTS,      // the backward pass: a metric's gradients at the hook points (grad, atp)
    FEATURE_KNOCKOUT,       // attention knockout: a query kept from reading a key (run/grad/atp/patch --knockout)
    FEATURE_TRACE,          // causal tracing: the subject's embeddings noised, each activation restored in turn
    FEATURE_STEERING,       // steering vectors: a direction added to the stream after a layer (steer, --steer)
    FEATURE_SAE,            // sparse autoencoders and transcoders on a hook point (features, feature, run --sae)
    FEATURE_COUNT
};

struct kind_info {
    const char* name;   // "decoder", "moe", "encoder", "encoder-decoder", "vision" (JSON, sessions, the CLI)
    const char* title;  // "decoder-only language model", for people
    kind_input input;
    kind_output output;
    // why_not[f]: nullptr when the kind offers f; else why not, one line that completes "<path> is a <title>: ..."
    const char* why_not[FEATURE_COUNT];
};

const kind_info& kind_table(model_kind k);
// The kind of a model: its architecture's row says (the decoder row of an encoder–decoder and its encoder stack's
// row both say KIND_SEQ2SEQ).
model_kind kind_of(const model_config& c);
inline const kind_info& kind_info_of(const model_config& c) { return kind_table(kind_of(c)); }
const char* feature_name(feature f); // "run", "live", "generate", ... (messages, tests)
bool offers(const model_config& c, feature f);
// Throws gb::error "<path> is a <title> (<arch>): <why_not>" when m's kind does not offer f.
void require(const model& m, feature f);
// The same message, for a front end that shows it rather than throwing ("" when f is offered).
std::string refusal(const model& m, feature f);

} // namespace gb
