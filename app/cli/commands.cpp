// The commands' documentation: the overview (--help), each command's options (the parser accepts exactly
// these) and its --help text.
#include "commands.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace cli {

// The overview (glassbox-cli --help): this head, each command of the table with its summary, then this tail. Laid
// out as GNU programs do ("Usage:", "  or:", indented two-column lists), which is also what help2man turns into
// the man page at build time (packaging/packaging.cmake).
static const char* overview_head = R"(Usage: glassbox-cli COMMAND [OPTIONS]
  or:  glassbox-cli COMMAND --help
  or:  glassbox-cli --help | --version
Look inside a transformer language model from the command line: run a prompt with parts of the model knocked
out, generate, tokenize, and read the analyses (logit lens, attribution, head scores, patching) as text, JSON
or NumPy files.

Commands (glassbox-cli COMMAND --help gives each one's usage and options):
)";
static const char* overview_tail = R"(
Options of several commands:
  --model PATH   a Hugging Face folder (config.json + model.safetensors + tokenizer), a .gguf file, a
                 llama2.c .bin (with --tokenizer tokenizer.bin), or a name: hf:ORG/NAME[@REVISION][:FILE_OR_QUANT]
                 (from the Hugging Face cache, else downloaded) or ollama:NAME[:TAG]; omitted: the embedded
                 default model
  --matmul K     fp32, amx, int8 or auto: the kernel of the matrix products (auto, the default: amx where the
                 CPU has AMX; int8: Q4_K products on inputs rounded to 8 bits, as llama.cpp, faster, not exact)
  --weights W    stored (default: F16, BF16 and quantised weights stay as the file holds them) or f32
                 (every weight dequantised at load and packed for --matmul)
  --keep POINTS  (run) hook points to write to --npy-dir, e.g. resid_stream,z,mlp_out (names: resid_pre,
                 attn_in, q, k, v, z, head_out, attn_out, resid_mid, mlp_in, router (MoE models), mlp_post
                 (dense models), mlp_out, resid_post, final_norm, resid_stream)
  --help         this overview; after a command, that command's options and exit codes
  --version      the version and, for a build from a git checkout, its commit

Errors are one line on stderr starting with "error:".

)";


// The same for every command: main() maps gb::error (bad usage or input) to 2 and anything else to 1.
const char* exit_codes_text = R"(Exit codes:
  0  success
  1  internal failure, such as running out of memory
  2  bad usage or bad input: an unknown, missing or malformed option; an unreadable or malformed model or
     tokenizer; invalid UTF-8; a prompt longer than the context; a layer, head or token out of range; an
     output file that cannot be written
)";

namespace {

// Exit codes of one command's own, listed after the common ones.
std::string exit_note(const std::string& command) {
    return command == "selftest" ? "  3  the model ran, and some facts did not match (each is listed)\n" : "";
}

// Options several commands take.
const option_doc model{"model", "PATH", "a Hugging Face folder, a .gguf file or a llama2.c .bin (default: the "
                                        "embedded default model), or a name: hf:ORG/NAME[@REV][:FILE_OR_QUANT], "
                                        "ollama:NAME[:TAG]"};
const option_doc tokenizer{"tokenizer", "FILE", "the tokenizer.bin of a llama2.c .bin (default: found next "
                                                "to the model)"};
const option_doc bos{"bos", "", "prepend the model's BOS token (an error when it has none)"};
// JumpReLU training (train-sae, train-transcoder)
const option_doc l0{"l0", "C", "JumpReLU + L0 instead: f = pre where pre > a learnt threshold; C is the cost of one "
                              "active feature in the loss's units (squared error per position)"};
const option_doc bandwidth{"bandwidth", "E", "JumpReLU: the width of the window around each threshold where its "
                                            "pseudo-gradient is taken (default auto: σ/5, σ the RMS of the input's "
                                            "entries, about a fresh feature's pre-activation spread)"};
const option_doc threshold{"threshold", "T", "JumpReLU: every threshold's starting value (default auto: σ)"};
const option_doc matmul{"matmul", "K", "fp32, amx, int8 or auto: the kernel of the matrix products (default auto: "
                                       "AMX where the CPU has it; GLASSBOX_MATMUL sets the default; int8: Q4_K "
                                       "products on inputs rounded to 8 bits, as llama.cpp, faster, not exact)"};
const option_doc weights{"weights", "stored|f32", "stored (default): F16, BF16 and quantised weights stay as "
                                                  "the file holds them; f32: every weight dequantised at load "
                                                  "and packed for --matmul (4 bytes a weight on either kernel)"};
const option_doc backend{"backend", "cpu|gl", "where attention runs (default cpu; gl without OpenGL 4.3 "
                                              "falls back to the CPU with a notice)"};
const option_doc json{"json", "FILE", "also write the result as JSON"};
const option_doc npy{"npy-dir", "DIR", "also write the result as NumPy .npy files into DIR"};
const option_doc ablate{"ablate", "LIST", "no-residual, no-layernorm, no-attention (comma-separated)"};
const option_doc layers{"layers", "LIST", "the layers --ablate applies to, e.g. 0,3 (default: all)"};
const option_doc heads{"heads", "LIST", "heads to ablate, LAYER.HEAD, e.g. 5.1,5.5"};
const option_doc knockout{"knockout", "LIST", "decoder-only models: attention knockout, LAYER.HEAD:QUERY-KEY (or "
                                              "LAYER:QUERY-KEY for every head; QUERY or KEY may be *), e.g. "
                                              "0.1:5-2,3:*-4: the query may not read the key, its pattern renormalised "
                                              "over the keys left"};
const option_doc experts{"experts", "LIST", "MoE models: experts to ablate, LAYER.EXPERT, e.g. 1.3,0.0 (the "
                                            "expert's mixing weight becomes 0 for every token; the other "
                                            "chosen experts keep theirs)"};
const option_doc prompt{"prompt", "TEXT", "the text to run"};
// steering (run, generate)
const option_doc steer{"steer", "FILE", "decoder-only models: add a steering vector, llama.cpp's control-vector .gguf "
                                        "or a .npy ([L][d], or [d] with one --steer-layers), to the residual stream "
                                        "after its layers (resid_post; direction.N after layer N, as llama.cpp)"};
const option_doc steer_scale{"steer-scale", "A", "with --steer: the vector's multiplier (default 1; negative steers away)"};
const option_doc steer_layers{"steer-layers", "LIST", "with --steer: the layers to add it at, e.g. 3,4 (default: "
                                                      "every layer the file has a direction for)"};
const option_doc steer_from{"steer-from", "I", "with --steer: steer positions I and after only (default 0: every "
                                               "position, as llama.cpp)"};
// an SAE or transcoder (features, feature, run)
const option_doc sae{"sae", "DIR", "an SAE or transcoder: a SAELens folder (cfg.json + sae_weights.safetensors) or "
                                   "Gemma Scope's params.npz or params.safetensors (or its folder); its hook point and "
                                   "layer come from it (default with the embedded default model: the SAE shipped with it, "
                                   "assets/saes/default-resid_post-L2)"};
const option_doc target_id{"target-id", "N", "the target token by id"};
// an analysis of an encoder–decoder's decoder: the target it reads
const option_doc decoder_target{"target-text", "TEXT", "encoder–decoders: the decoder's target (default: the "
                                                       "greedy translation)"};
const option_doc contrast_id{"contrast-id", "N", "the contrast token by id"};
const option_doc image{"image", "FILE", "a PNG or JPEG for a ViT or DeiT classifier (resized and normalised as its "
                                        "preprocessor_config.json says)"};
// the synopsis lines of a command that reads an image or an encoder–decoder's source
const std::string image_synopsis = "--image FILE --model VIT_OR_DEIT_FOLDER [options]";
const std::string source_synopsis = "--source TEXT [--target-text TEXT] --model BART_MBART_OR_MARIAN_FOLDER [options]";

// The command table: every command, the function that runs it, the feature of the kind table it is (selftest
// and bench run forwards; info reads the model), its summary and its options. The parser accepts exactly the
// options listed here, so a command's --help and what it takes cannot drift apart.
const std::vector<command> table = {
    {"run", cmd_run, gb::FEATURE_RUN,
     "one forward pass: the prompt's tokens and the top-k next tokens (encoders: the top-k fillers of each "
     "[MASK]; image classifiers: the top-k classes of an image and where [CLS] looked)",
     {"--prompt TEXT [--model PATH] [options]", image_synopsis, source_synopsis},
     {model, tokenizer, prompt, image,
      {"source", "TEXT", "encoder–decoders (BART, mBART, Marian): the text the encoder reads"},
      {"target-text", "TEXT", "encoder–decoders: the target the decoder reads after its start token (default: "
                              "the greedy translation of --source)"},
      {"max-new-tokens", "N", "encoder–decoders without --target-text: the longest translation (default 40)"},
      bos, ablate, layers, heads, experts, knockout,
      {"top-k", "N", "how many next tokens to list (default 10)"},
      {"all-logits", "", "keep every position's logits (logits.npy is [T, V], else [1, V])"},
      {"loss", "", "each token's loss given the ones before it (-log p, nats), the model's top guess there, the mean "
                   "and the bits per UTF-8 byte (an encoder–decoder: its target's tokens); --json: \"loss\""},
      {"json", "FILE", "write the run as JSON: model, tokens, top-k, residual norms, timing (MoE models: "
                       "the routing, each layer's and token's experts and weights)"},
      {"npy-dir", "DIR", "write tokens, logits, attention and residual norms as .npy files into DIR (image "
                         "classifiers also rollout.npy [T, T] and pixels.npy [3, S, S]; encoder–decoders: "
                         "tokens.npy and attention.npy [L, H, S, S] are the encoder's, logits.npy [T, V], "
                         "target_tokens.npy, decoder_attention.npy [L, H, T, T], decoder_residual_norms.npy "
                         "and cross_attention.npy [L, H, T, S] the decoder's)"},
      {"keep", "POINTS", "hook points to write to --npy-dir too: resid_pre, attn_in, q, k, v, z, head_out, "
                         "attn_out, resid_mid, mlp_in, router (MoE models), mlp_post (dense models), mlp_out, "
                         "resid_post, final_norm, resid_stream"},
      backend,
      {"capture-budget", "MB", "memory for the activation record; beyond it layers are left out (default 512)"},
      steer, steer_scale, steer_layers, steer_from, sae,
      {"feature-ablate", "LIST", "with --sae: features to ablate, e.g. 12,40: each set to 0 with the SAE's "
                                 "reconstruction error kept, so only that feature changes"},
      {"feature-clamp", "LIST", "with --sae: ID=VALUE, e.g. 7=3.5: the feature clamped to VALUE at every position "
                                "(the error kept)"},
      {"feature-steer", "LIST", "with --sae: ID=ALPHA, e.g. 9=2.0: ALPHA times the feature's decoder row added at "
                                "every position"},
      matmul, weights}},
    {"generate", cmd_generate, gb::FEATURE_GENERATE,
     "continue a prompt, printing the text as it is generated",
     {"--prompt TEXT --max-new-tokens N [--model PATH] [options]",
      "--source TEXT --max-new-tokens N --model BART_MBART_OR_MARIAN_FOLDER [options]"},
     {model, tokenizer, {"prompt", "TEXT", "the text to continue"},
      {"source", "TEXT", "encoder–decoders: the text to translate (the target is generated from the decoder's "
                         "start token)"},
      {"max-new-tokens", "N", "how many tokens to generate (fewer when the model ends the text)"},
      {"temperature", "T", "sampling temperature; 0, the default, is greedy"},
      {"temperatures", "LIST", "several temperatures, e.g. 0.3,0.8,1.5: one continuation each from the same "
                               "seed, each after the next-token distribution it samples from (softmax(logits "
                               "/ T) over the top-k, renormalised)"},
      {"top-k", "K", "sample from the K most probable tokens only (default 0: all)"},
      {"top-p", "P", "sample from the most probable tokens holding probability P, in (0, 1] (default 1)"},
      {"seed", "S", "the sampling seed (default 0)"}, bos, ablate, layers, heads, experts,
      {"json", "FILE", "write the prompt, the ids and the generated text as JSON (with --temperatures: "
                       "one entry per temperature, with its distribution)"},
      steer, steer_scale, steer_layers, steer_from, matmul, weights}},
    {"tokenize", cmd_tokenize, gb::FEATURE_TOKENIZE,
     "encode text to token ids, or decode ids to text",
     {"[--model PATH | --tokenizer DIR] --text TEXT", "[--model PATH | --tokenizer DIR] --decode IDS [--escape]"},
     {model,
      {"tokenizer", "DIR", "without --model: this folder's tokenizer alone, chosen and configured as a model "
                           "load does (no weights read); with a llama2.c --model: its tokenizer.bin"},
      {"text", "TEXT", "print its token ids as a JSON array (the text alone: without the special tokens run "
                       "and the app put around a prompt, which --specials adds)"},
      {"specials", "", "with --text: the ids as run reads the prompt, with the tokenizer's template around the "
                       "text ([CLS] ... [SEP], <s> ..., Llama 3's BOS)"},
      {"decode", "IDS", "comma-separated token ids: print their text as it is, control characters included"},
      {"escape", "", "with --decode: show control characters escaped (\"\\x0d\"), newlines and tabs as they are"}}},
    {"lens", cmd_lens, gb::FEATURE_LENS,
     "logit lens: what the residual stream predicts after every sublayer",
     {"--prompt TEXT [--model PATH] [options]", image_synopsis, source_synopsis},
     {model, tokenizer, prompt, bos, image,
      {"source", "TEXT", "encoder–decoders: the source; the lens reads the decoder's stream at each target token"},
      decoder_target,
      {"top-k", "K", "tokens kept per cell (default 5)"},
      {"target", "TEXT", "a token (exactly one) to follow through every point (default: each position's "
                         "final top-1)"},
      target_id, json, npy, backend, matmul, weights}},
    {"compare", cmd_compare, gb::FEATURE_LENS,
     "two models on the same prompt: where their residual streams, heads, next-token distributions, logit lens "
     "and surprisal part",
     {"--model A --model-b B --prompt TEXT [options]"},
     {model, {"model-b", "PATH", "model B: the same shape (layers, width, heads) and tokenizer as A, any family"},
      tokenizer, prompt, bos,
      {"position", "I", "the position whose logit lens both get (default: the last)"},
      {"top", "N", "rows of each ranked list in the text (default 5)"},
      {"bench", "N", "also time compare against one forward of A (medians of N runs)"},
      {"json", "FILE", "write points, tokens, cosine and rel_diff [P][T], kl, top_a, top_b, top_agree [T], head_js "
                       "[L][H], lens (both models' top-1 at each point, first_disagree) and surprisal (a, b, diff) "
                       "as JSON"},
      {"npy-dir", "DIR", "write cosine.npy and rel_diff.npy [P, T], kl.npy, top_agree.npy and surprisal_diff.npy "
                         "[T], head_js.npy [L, H] into DIR"},
      matmul, weights}},
    {"quantize", cmd_quantize, gb::FEATURE_RUN,
     "write a copy of a model with its matrices in another stored type (a GPT-2-family model as one GGUF file)",
     {"--model PATH --dtype TYPE --out FILE.gguf"},
     {model, tokenizer,
      {"dtype", "TYPE", "the matrices' type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K (rows "
                        "must be whole blocks: multiples of 256 for the K types, 32 for the others); norms, biases "
                        "and positions stay F32"},
      {"out", "FILE", "the .gguf file to write"}, weights}},
    {"attribute", cmd_attribute, gb::FEATURE_ATTRIBUTION,
     "direct logit attribution: what each head and MLP writes into a token's logit",
     {"--prompt TEXT (--target TEXT | --target-id N) [--model PATH] [options]"},
     {model, tokenizer, prompt, bos,
      {"target", "TEXT", "the token whose logit is explained (exactly one token)"}, target_id,
      {"contrast", "TEXT", "explain logit(target) - logit(contrast) instead (exactly one token)"}, contrast_id,
      {"position", "I", "the position to explain (default: the last)"}, json, npy, backend, matmul, weights}},
    {"heads", cmd_heads, gb::FEATURE_HEAD_SCORES,
     "head scores: previous-token, first-token, induction, duplicate-token and entropy of every head",
     {"--prompt TEXT [--model PATH] [options]", "--repeat-random N [--seed S] [--model PATH] [options]",
      image_synopsis, source_synopsis},
     {model, tokenizer, {"prompt", "TEXT", "the text whose attention is scored"}, image,
      {"source", "TEXT", "encoder–decoders: the source; the decoder's self-attention heads are scored on the target"},
      decoder_target,
      {"repeat-random", "N", "score N random tokens repeated twice instead of a prompt (the induction test)"},
      {"seed", "S", "with --repeat-random: the seed of the random tokens (default 0)"}, bos, json, npy,
      backend, matmul, weights}},
    {"patch", cmd_patch, gb::FEATURE_PATCHING,
     "activation patching: where the clean run's activations bring its answer back",
     {"--prompt CLEAN --corrupt CORRUPT [--target TEXT | --target-id N] [--model PATH] [options]"},
     {model, tokenizer, {"prompt", "CLEAN", "the clean prompt"},
      {"corrupt", "CORRUPT", "the corrupted prompt (the same number of tokens)"},
      {"target", "TEXT", "the metric is logit(target) - logit(contrast) at the last position (one token; default: the "
                         "clean prompt's top-1)"},
      target_id, {"contrast", "TEXT", "the metric's contrast token (one token; default: the corrupted prompt's top-1, or "
                                      "the clean prompt's top-2 when both predict the target, as in the app)"},
      contrast_id, bos, ablate, layers, heads, knockout, json, npy, backend, matmul, weights}},
    {"grad", cmd_grad, gb::FEATURE_GRADIENTS,
     "gradients: d metric / d the residual stream at every point, and each token's gradient x input and "
     "integrated gradients",
     {"--prompt TEXT (--target TEXT | --target-id N) [--contrast TEXT | --contrast-id N] [--model PATH] [options]",
      "--image FILE (--target LABEL | --target-id N) --model VIT_OR_DEIT_FOLDER [options]",
      "--source TEXT [--target-text TEXT] (--target TEXT | --target-id N) --model BART_MBART_OR_MARIAN_FOLDER "
      "[options]"},
     {model, tokenizer, prompt, bos, image,
      {"source", "TEXT", "encoder–decoders: the source; the metric reads the decoder's logits, and the gradients "
                         "reach the source embeddings through the cross-attention (source_* keys)"},
      decoder_target,
      {"target", "TEXT", "the metric's token (exactly one token); an image classifier's class by its label"},
      target_id,
      {"contrast", "TEXT", "logit-diff's second token (or class): logit(target) - logit(contrast)"},
      contrast_id,
      {"metric", "M", "logit-diff (default; needs a contrast), logit or logprob (log p(target))"},
      {"position", "I", "the position whose logits the metric reads (default: the last; an encoder's first "
                        "[MASK]; an image classifier reads [CLS], position 0, only; an encoder–decoder's last "
                        "target position)"},
      {"steps", "N", "integrated gradients' midpoint steps from a zero stream at the embeddings (default 32; 0: "
                     "none)"},
      ablate, layers, heads, knockout,
      {"json", "FILE", "write kind, metric (its value), metric_kind, target, contrast, position, tokens, points, "
                       "resid_grad [2L+1][T][d], grad_x_input [T], integrated [T], baseline and completeness_gap as "
                       "JSON (encoder–decoders also source_tokens, source_points, source_resid_grad [2Le+1][S][d], "
                       "source_grad_x_input [S], source_integrated [S])"},
      {"npy-dir", "DIR", "write resid_grad.npy [P, T, d], grad_x_input.npy [T] and integrated.npy [T] into DIR "
                         "(encoder–decoders also source_resid_grad.npy, source_grad_x_input.npy, "
                         "source_integrated.npy)"},
      matmul, weights}},
    {"atp", cmd_atp, gb::FEATURE_GRADIENTS,
     "attribution patching: activation patching estimated from one backward pass (--exact: against the real thing)",
     {"--prompt CLEAN --corrupt CORRUPT [--target TEXT | --target-id N] [--model PATH] [options]"},
     {model, tokenizer, {"prompt", "CLEAN", "the clean prompt"},
      {"corrupt", "CORRUPT", "the corrupted prompt (the same number of tokens)"},
      {"target", "TEXT", "the metric is logit(target) - logit(contrast) at the last position (one token; default: the "
                         "clean prompt's top-1)"},
      target_id, {"contrast", "TEXT", "the metric's contrast token (one token; default: the corrupted prompt's top-1, or "
                                      "the clean prompt's top-2 when both predict the target, as in the app)"},
      contrast_id, bos, ablate, layers, heads, knockout,
      {"exact", "", "also run exact activation patching: JSON \"exact\" and \"error\" (max, RMS and correlation of "
                    "the normalized difference)"},
      {"json", "FILE", "write patch's keys (the estimates) and \"method\" as JSON"},
      {"npy-dir", "DIR", "write atp_resid.npy [P, T], atp_heads.npy [L, H] and their *_normalized twins (--exact: "
                         "patch's files too) into DIR"},
      matmul, weights}},
    {"circuit", cmd_circuit, gb::FEATURE_PATCHING,
     "a circuit: embeddings, heads, MLPs and logits, edges scored by edge attribution patching, and the top "
     "edges' faithfulness",
     {"--prompt CLEAN --corrupt CORRUPT [--target TEXT | --target-id N] [--contrast TEXT | --contrast-id N] "
      "[--model PATH] [options]"},
     {model, tokenizer, {"prompt", "CLEAN", "the clean prompt"},
      {"corrupt", "CORRUPT", "the corrupted prompt (the same number of tokens)"},
      {"target", "TEXT", "the metric is logit(target) - logit(contrast) at the last position (one token; default: the "
                         "clean prompt's top-1)"},
      target_id, {"contrast", "TEXT", "the metric's contrast token (one token; default: as patch's)"}, contrast_id, bos,
      {"edges", "N", "the circuit: the nodes the N edges of largest |score| touch (default 40)"},
      ablate, layers, heads, knockout,
      {"json", "FILE", "write nodes (id, kind, layer, head, score, in_circuit), edges (from, to, score: the top N), "
                       "faithfulness, circuit_metric, faithfulness_curve, clean and corrupt as JSON"},
      matmul, weights}},
    {"trace", cmd_trace, gb::FEATURE_TRACE,
     "causal tracing: noise on the subject's embeddings, then each activation restored from the clean run in turn",
     {"--prompt TEXT --subject TEXT [--noise X] [--samples N] [--seed S] [--model PATH] [options]"},
     {model, tokenizer, prompt, bos,
      {"subject", "TEXT", "words of the prompt (their first occurrence): the tokens they overlap are noised"},
      {"noise", "X", "the noise's standard deviation in units of the token embeddings' (default 3)"},
      {"samples", "N", "noise draws, every cell averaged over them (default 10)"},
      {"seed", "S", "the draws' seed (default 0): the same seed gives the same numbers"},
      ablate, layers, heads, knockout,
      {"json", "FILE", "write clean_prob, corrupt_prob (of the clean run's top-1, target), resid [2L+1][T], mlp and "
                       "attn [L][T] (the probability with that activation restored), subject, sigma, embed_std, "
                       "samples, seed, points and tokens as JSON"},
      {"npy-dir", "DIR", "write trace_resid.npy [P, T], trace_mlp.npy and trace_attn.npy [L, T] into DIR"},
      backend, matmul, weights}},
    {"bench", cmd_bench, gb::FEATURE_RUN,
     "time forward passes with full capture, or live recompute against a fresh forward (an "
     "encoder–decoder: both stacks on T source and T target tokens, and a greedy translation)",
     {"[--tokens 16,64,256] [--repeat N] [--model PATH] [options]",
      "--incremental [--tokens 256] [--repeat N] [--model PATH] [options]"},
     {model, tokenizer,
      {"tokens", "LIST", "prompt lengths to time (default 16,64,256; one length with --incremental, "
                         "default 256)"},
      {"repeat", "N", "timed runs per length, reported as median, min and max (default 10)"},
      {"incremental", "", "time appending a token, editing the middle one and toggling a last-layer "
                          "ablation, against a fresh forward"},
      {"sae", "DIR", "time the forward that keeps an SAE's points against the features computed from it "
                      "(activations, reconstruction, MSE, FVU): median ms of each and (forward + features) / forward"},
      {"grad", "", "time the backward pass (every residual point's and head's gradient) against its forward"},
      {"contended", "", "time each forward on a quiet machine and with another process spinning on a core, "
                        "alternating: medians, their ratio and each side's slowest run against its median"},
      {"generate", "N", "time greedy generation of N tokens after a prompt of --tokens random tokens (one length, "
                        "default 64): the prompt without and with full capture, and ms a generated token"},
      {"backend", "cpu|gl", "where attention runs (default cpu); gl also times attention alone on both"},
      json, matmul, weights}},
    {"make-random", cmd_make_random, NO_MODEL,
     "write a random GPT-2, Llama or Marian model folder, or a GGUF file of any decoder family llama.cpp runs, "
     "for benchmarks and tests",
     {"--out DIR [options]", "--arch FAMILY --out FILE.gguf [--dtype TYPE] [options]",
      "--arch marian --out DIR [--encoder-layers-n N] [options]",
      "--transcoders --out DIR [--layers-n N] [--d-model D] [--features N] [--bias B] [--skip] [--dtype TYPE]"},
     {{"out", "DIR", "the folder to write; a path ending in .gguf writes one GGUF file"},
      {"arch", "FAMILY", "the architecture (default gpt2): gpt2, llama or marian (an encoder–decoder, opus-mt's "
                         "shape by default) for a folder; for a .gguf gpt2, llama, mistral, qwen2, qwen3, gemma, gemma2, "
                         "phi3, olmo2, gpt_neox, mixtral, qwen2_moe, qwen3_moe or olmoe (llama.cpp's layout and keys)"},
      {"layers-n", "N", "layers (default 12; marian: decoder layers, default 6)"},
      {"encoder-layers-n", "N", "marian only: encoder layers (default: --layers-n)"},
      {"d-model", "D", "model width (default 768; marian 512)"},
      {"heads-n", "H", "attention heads (default 12; marian 8)"},
      {"kv-heads-n", "H", "llama and the GGUF families but gpt2 and gpt_neox: key/value heads (default: --heads-n)"},
      {"ff", "N", "MLP width, and each expert's (default 4 * --d-model)"},
      {"vocab", "V", "vocabulary size (default 50257; marian 58101)"},
      {"ctx", "N", "context length, max_position_embeddings (default 1024; marian 512)"},
      {"dtype", "TYPE", "the weights' type: F32 or F16 in model.safetensors (llama also BF16); a .gguf's matrices "
                        "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K (rows must be whole blocks: "
                        "multiples of 256 for the K types, 32 for the others) (default F32)"},
      {"seed", "S", "the seed of the random weights (default 1)"},
      {"tied", "0|1", "llama and the GGUF families but gemma, gemma2, phi3 and gpt_neox: the LM head is the "
                      "embedding matrix (default 1)"},
      {"rope-theta", "X", "llama and the GGUF families with RoPE: RoPE's base (default 500000)"},
      {"std", "S", ".gguf only: the matrices' standard deviation (default 0.02)"},
      {"dequantised", "", ".gguf only: write the matrices as F32 holding what --dtype keeps of them (the same model "
                          "for a reader that computes in f32, as a reference for the quantised file)"},
      {"experts-n", "E", ".gguf of a MoE family: experts per layer (default 4)"},
      {"experts-used-n", "K", ".gguf of a MoE family: experts each token is routed to (default 2)"},
      {"transcoders", "", "write a random per-layer ReLU transcoder set (circuit-tracer's layout) for a model of "
                          "--layers-n layers of width --d-model, for graph benchmarks, instead of a model; --dtype "
                          "F32, F16 or BF16"},
      {"features", "N", "--transcoders: features a layer (default 24576)"},
      {"bias", "B", "--transcoders: b_enc's mean (default -3; a pre-activation is about N(B, 1) on an input of norm "
                    "sqrt(d), so -3 leaves about 0.1% of the features active)"},
      {"skip", "", "--transcoders: with a random skip W_skip"}}},
    {"info", cmd_info, gb::FEATURE_RUN,
     "the model as JSON: architecture, sizes, parameters by component, the matmul kernel",
     {"[--model PATH] [--matmul K]"},
     {model, tokenizer, matmul, weights}},
    {"learn", cmd_learn, gb::FEATURE_LEARN,
     "a walk through the model on your prompt: each step's formula, shapes and this token's numbers",
     {"--prompt TEXT [--token I] [--layer L] [--head H] [--model PATH] [options]",
      "--source TEXT [--target-text TEXT] [--token I] ... --model BART_MBART_OR_MARIAN_FOLDER"},
     {model, tokenizer, prompt, bos,
      {"source", "TEXT", "encoder–decoders: the source; the walk follows the decoder, cross-attention included"},
      decoder_target,
      {"token", "I", "the position whose numbers are shown (default: the last)"},
      {"layer", "L", "the block walked through (default 0)"},
      {"head", "H", "the attention head shown (default 0)"},
      {"json", "FILE", "also write the steps and the parameter derivation as JSON"}, matmul, weights}},
    {"break-it", cmd_break_it, gb::FEATURE_BREAK_IT,
     "remove each part of the model in turn and see what changes: no attention, no layer norm, no "
     "residual, each layer's attention, the three heads that matter most",
     {"--prompt TEXT [--model PATH] [options]"},
     {model, tokenizer, prompt, bos,
      {"scan-heads", "N", "at most N single-head runs to find the heads that matter most (default 256; "
                          "beyond it the heads of the layers whose attention matters most)"},
      {"json", "FILE", "also write every row's numbers and sentence as JSON"}, matmul, weights}},
    {"selftest", cmd_selftest, gb::FEATURE_RUN,
     "check facts published about GPT-2 small on your copy of it (loss, L4H11, L5H5, Paris)",
     {"--model DIR [--json FILE]"},
     {model, {"json", "FILE", "also write each fact, what was expected and what came, as JSON"}, matmul, weights}},
    {"steer", cmd_steer, gb::FEATURE_STEERING,
     "a contrastive steering vector: the mean residual stream after a layer over the positive prompts minus over "
     "the negative ones, as llama.cpp's control-vector GGUF or a .npy",
     {"--positive FILE --negative FILE --layer L --out V.gguf|V.npy [--position last|mean] [--model PATH] [options]"},
     {model, tokenizer,
      {"positive", "FILE", "the positive prompts, one a line (empty lines skipped)"},
      {"negative", "FILE", "the negative prompts, one a line"},
      {"layer", "L", "the layer whose resid_post is read: one (3), a list (3,4) or all (a .gguf: from layer 1, "
                     "llama.cpp has no direction.0)"},
      {"position", "last|mean", "each prompt's last token (default), or the mean over its positions, then the mean "
                                "over the prompts"},
      {"out", "FILE", "V.gguf: llama.cpp's control vector (direction.N added after layer N; layer 0 is refused), "
                      "V.npy: [L][d] float32, rows of zeros where no layer was asked for"},
      bos, {"json", "FILE", "also write the layers, the prompts' counts and each direction's norm as JSON"},
      matmul, weights}},
    {"steer-sweep", cmd_steer_sweep, gb::FEATURE_STEERING,
     "the price of a steering vector over scale x layer: KL(baseline || steered) of the next-token distributions "
     "on a reference text, the steered loss there, and a greedy continuation of the prompt in each cell",
     {"--prompt P --steer V.gguf --scales LIST --reference FILE [--layers LIST] [--json F] [--model PATH] [options]"},
     {model, tokenizer, {"prompt", "TEXT", "the text each cell continues (greedy)"},
      {"steer", "FILE", "the vector: a .gguf control vector or a .npy; at each layer its direction there (one "
                        "direction: that one, at each layer)"},
      {"scales", "LIST", "the multipliers, e.g. 1,2,4,8,16"},
      {"layers", "LIST", "the layers, e.g. 1,2,3 or all (default: the vector's; all for a vector with one direction)"},
      {"reference", "FILE", "the text the KL and the loss are measured on (cut to the context)"},
      {"steer-from", "I", "steer positions I and after only (default 0)"},
      {"max-new-tokens", "N", "tokens of each cell's continuation (default 8; 0: none)"}, bos,
      {"json", "FILE", "write the steering, the kl and loss grids [scales][layers], the baseline loss, each cell with "
                       "its continuation, and the time taken as JSON"},
      matmul, weights}},
    {"features", cmd_features, gb::FEATURE_SAE,
     "an SAE's or transcoder's features on a prompt: each token's top features, the reconstruction's error (MSE, "
     "fraction of variance unexplained) and the next-token loss with the reconstruction spliced in",
     {"--prompt TEXT [--sae DIR] [--top K] [--json FILE] [--npy-dir DIR] [--model PATH] [options]"},
     {model, tokenizer, prompt, bos, sae,
      {"top", "K", "features listed per token (default 5; --json: exactly K per token, highest first)"},
      {"json", "FILE", "write hook, layer, d_sae, top [T][K] of {id, act}, l0 [T], mse [T], fvu [T], fvu_all, loss, "
                       "loss_spliced and loss_delta as JSON"},
      {"npy-dir", "DIR", "write features.npy [T, d_sae] and reconstruction.npy [T, d_out] into DIR"},
      matmul, weights}},
    {"feature", cmd_feature, gb::FEATURE_SAE,
     "one feature of an SAE: its max-activating contexts over a corpus (indexed once, cached beside the SAE) and "
     "its decoder direction's effect on the logits (the tokens it promotes and suppresses)",
     {"[--sae DIR] --id N [--corpus FILE] [--top 20] [--json FILE] [--model PATH] [options]"},
     {model, tokenizer, sae, {"id", "N", "the feature"},
      {"corpus", "FILE", "a text file: cut into windows of 64 tokens (or the context), each window run once; the "
                         "index is written beside the SAE as glassbox-index-HASH.bin and reused"},
      {"top", "N", "contexts and tokens listed (default 20; the index keeps 32 per feature)"}, bos,
      {"json", "FILE", "write contexts [{text, position, activation, token, window}], promotes and suppresses "
                       "[{id, text, effect}] as JSON"},
      matmul, weights}},
    {"graph", cmd_graph, gb::FEATURE_SAE,
     "an attribution graph: the direct effects between transcoder features, error nodes, tokens and the top logits "
     "through the frozen replacement model, pruned by influence, with the replacement and completeness scores "
     "(docs/graphs.md); --open reads a graph made elsewhere (circuit-tracer, Neuronpedia)",
     {"--prompt TEXT [--transcoders DIR] [--npy-dir D] [--json F] [--neuronpedia G.json] [--node-threshold 0.8] "
      "[--edge-threshold 0.98] [--max-logits 10] [--logit-prob 0.95] [--max-feature-nodes N] [--model PATH] [options]",
      "--open G.json [--json F]"},
     {model, tokenizer, prompt, bos,
      {"transcoders", "DIR", "circuit-tracer's transcoder folder: per-layer (layer_{i}.safetensors) or cross-layer "
                             "(W_enc_{i} and W_dec_{i}.safetensors), with its config.yaml (default on the default "
                             "model: the set shipped with it, assets/transcoders/glassbox-tiny-en)"},
      {"node-threshold", "F", "keep the nodes holding this fraction of the influence (default 0.8)"},
      {"edge-threshold", "F", "keep the edges holding this fraction of the edge influence (default 0.98)"},
      {"max-logits", "N", "logit nodes at most (default 10)"},
      {"logit-prob", "P", "logit nodes: the fewest top tokens whose probabilities reach P (default 0.95)"},
      {"max-feature-nodes", "N", "feature nodes at most, chosen by estimated influence (default 8192)"},
      {"npy-dir", "DIR", "write tokens, active_features [n_f][3] (layer, pos, index), activation_values, "
                         "logit_tokens, logit_probabilities, adjacency [N][N], node_influence, node_mask and "
                         "edge_mask as .npy into DIR"},
      {"json", "FILE", "write replacement_score, completeness_score, the counts, the cut-offs, the logits and the "
                       "time taken as JSON (with --open: n_nodes, n_links, prompt_tokens)"},
      {"neuronpedia", "FILE", "write the pruned graph as Neuronpedia's graph JSON"},
      {"open", "FILE", "read a graph JSON (Neuronpedia's schema) and report its nodes, links and prompt tokens"},
      {"head-loadings", "T,S", "the edge from node S to node T (indices in the adjacency) split at each attention "
                               "layer it crosses into each head's part and the part that bypasses it"},
      matmul, weights}},
    {"intervene", cmd_intervene, gb::FEATURE_SAE,
     "set, clamp or ablate transcoder features at (layer, position) in the replacement model (every MLP output its "
     "transcoders' reconstruction plus the unedited run's error, the other features recomputed), attention frozen "
     "or not, and print the next-token probabilities before and after (docs/graphs.md)",
     {"--prompt TEXT [--transcoders DIR] (--set L:P:I=V,... | --ablate L:P:I,...) [--freeze-attention] [--top-k 10] "
      "[--json F] [--model PATH] [options]"},
     {model, tokenizer, prompt, bos,
      {"transcoders", "DIR", "circuit-tracer's transcoder folder (as graph; the default model's own by default)"},
      {"set", "LIST", "features held at a value: LAYER:POS:INDEX=VALUE, POS * for every position (a clamp), e.g. "
                      "2:5:311=4.0,1:*:17=0.5"},
      {"ablate", "LIST", "features set to 0: LAYER:POS:INDEX, e.g. 3:7:1024"},
      {"freeze-attention", "", "write the unedited run's attention patterns over the new ones"},
      {"top-k", "N", "tokens listed (default 10)"},
      {"json", "FILE", "write tokens, edits, before and after [{id, text, prob, prob_after / prob_before}] as JSON"},
      matmul, weights}},
    {"train-sae", cmd_train_sae, gb::FEATURE_SAE,
     "train an SAE on the model's own activations at a hook point over a corpus (TopK, ReLU + L1 or JumpReLU + L0, "
     "Adam, unit-norm decoder rows, dead features resampled), resumable, written in SAELens's format",
     {"--hook POINT --layer L --corpus FILE --features N (--k K | --l1 C | --l0 C) --out DIR [--model PATH] [options]"},
     {model, tokenizer,
      {"hook", "POINT", "resid_pre, resid_mid, resid_post, attn_out or mlp_out"},
      {"layer", "L", "the layer"},
      {"corpus", "FILE", "a text file, cut into windows of 128 tokens (or the context)"},
      {"features", "N", "d_sae, the number of features"},
      {"k", "K", "TopK: the K largest pre-activations of each position kept"},
      {"l1", "C", "ReLU + L1: the L1 coefficient on the activations (decoder rows are unit norm)"}, l0, bandwidth,
      threshold,
      {"out", "DIR", "the SAE's folder: cfg.json, sae_weights.safetensors and train_state.bin, from which a run with "
                     "the same options resumes (a longer --steps continues it)"},
      {"steps", "S", "Adam steps (default 2000)"}, {"batch", "B", "activations per step (default 256)"},
      {"lr", "LR", "Adam's learning rate (default 0.001)"}, {"seed", "S", "initialisation and batches (default 0)"},
      {"dead-after", "N", "steps without firing after which a feature is resampled (default 500; 0: never)"},
      {"max-tokens", "N", "activations collected from the corpus at most (default 200000)"}, bos,
      {"heldout", "FILE", "a text not trained on: the explained variance over its activations (as many at most), "
                          "printed and in --json as heldout_explained"},
      {"json", "FILE", "write the options, the final loss, explained variance, dead fraction and the throughput as JSON"},
      matmul, weights}},
    {"train-transcoder", cmd_train_transcoder, gb::FEATURE_SAE,
     "train per-layer transcoders (each layer's MLP input after its norm -> its MLP output, optionally with a linear "
     "skip; TopK, ReLU + L1 or JumpReLU + L0, Adam, unit-norm decoder rows, dead features resampled) on the model's "
     "own activations, resumable, written in circuit-tracer's layout for graph and intervene (docs/graphs.md)",
     {"--corpus FILE --out DIR [--model PATH] [--features N] [--k K | --l1 C | --l0 C] [--skip] [--layers all|LIST] "
      "[options]"},
     {model, tokenizer,
      {"corpus", "FILE", "a UTF-8 text file, cut into windows of 128 tokens (or the context); its last tenth of "
                         "positions is held out for the explained variance"},
      {"out", "DIR", "the set's folder: config.yaml, layer_{i}.safetensors and train_state_{i}.bin, from which a run "
                     "with the same options resumes (a longer --steps continues it)"},
      {"features", "N", "features per layer (default 2048)"},
      {"k", "K", "TopK: the K largest pre-activations of each position kept (the default, K 32)"},
      {"l1", "C", "ReLU + L1 instead: the L1 coefficient on the activations (decoder rows are unit norm)"}, l0,
      bandwidth, threshold,
      {"skip", "", "also learn a linear skip: MLP out ~ decoder + b_dec + x W_skip^T (circuit-tracer's W_skip)"},
      {"layers", "all|LIST", "the layers trained, e.g. 0,2,5 (default all); the others are written empty (all of "
                             "their MLP output is the error node)"},
      {"steps", "S", "Adam steps per layer (default 2000)"}, {"batch", "B", "positions per step (default 256)"},
      {"lr", "LR", "Adam's learning rate (default 0.001)"}, {"seed", "S", "initialisation and batches (default 0)"},
      {"dead-after", "N", "steps without firing after which a feature is resampled (default 500; 0: never)"},
      {"max-rows", "R", "positions collected from the corpus at most (default 40000; each keeps 2 x layers x d floats)"},
      bos,
      {"json", "FILE", "write the options, the timing and each layer's held-out and training explained variance, "
                       "loss and dead fraction as JSON"},
      matmul, weights}},
    {"models", cmd_models, NO_MODEL,
     "the models already on this machine, without loading them: the Hugging Face cache, Ollama, LM Studio and "
     "llama.cpp's cache, each with its format, family, kind, parameters, size and whether Glassbox opens it",
     {"[--json FILE]"},
     {{"json", "FILE", "also write {\"models\": [{source, name, path, format, family, kind, n_params, bytes, openable, "
                       "reason}]} as JSON"}}},
    {"download", cmd_download, NO_MODEL,
     "download the files a model needs (config, weights or one GGUF, tokenizer) from the Hugging Face Hub into its "
     "cache, where other tools find them too; prints the path --model opens",
     {"hf:ORG/NAME[@REVISION][:FILE_OR_QUANT] [--revision R] [--file F]"},
     {{"revision", "R", "a branch, tag or commit (default main)"},
      {"file", "F", "a GGUF repo's file, or a quant such as Q4_K_M (default: the Q8_0 file, or the only GGUF)"}}},
};

} // namespace

const std::vector<command>& command_table() { return table; }

const command* find_command(const std::string& name) {
    for (const command& c : table)
        if (c.name == name) return &c;
    return nullptr;
}

std::string command_names() {
    std::string s;
    for (const command& c : table) s += (s.empty() ? "" : ", ") + c.name;
    return s;
}

// Words wrapped at width columns, every line but the first indented to col (the first continues line).
static std::string wrap(std::string line, const std::string& text, size_t col, size_t width) {
    std::string out;
    std::istringstream words(text);
    bool first = true;
    for (std::string w; words >> w; first = false) {
        if (!first && line.size() + 1 + w.size() > width) {
            out += line + "\n";
            line.assign(col, ' ');
            first = true;
        }
        line += (first ? "" : " ") + w;
    }
    return out + line + "\n";
}

std::string overview_text() {
    std::string out = overview_head;
    for (const command& c : command_table()) {
        std::string name = "  " + c.name;
        name.resize(std::max<size_t>(name.size() + 2, 17), ' ');
        out += wrap(name, c.summary, 17, 110);
    }
    return out + overview_tail;
}

// `glassbox-cli NAME --help`: what the command does, its usage, every option it takes, the exit codes.
std::string command_help(const command& c) {
    std::string out;
    for (size_t i = 0; i < c.synopsis.size(); i++)
        out += (i == 0 ? "Usage: " : "  or:  ") + ("glassbox-cli " + c.name + " " + c.synopsis[i]) + "\n";
    out += (char)std::toupper((unsigned char)c.summary[0]) + c.summary.substr(1) + ".\n\nOptions:\n";
    auto add = [&](const std::string& left, const std::string& help) {
        // a two-column list; the help wraps at 110 columns, and a long left side puts it on its own line
        const size_t col = 26;
        std::string line = "  " + left;
        if (line.size() + 2 > col) {
            out += line + "\n";
            line.clear();
        }
        line.resize(col, ' ');
        out += wrap(line, help, col, 110);
    };
    for (const option_doc& o : c.options) add("--" + o.name + (o.arg.empty() ? "" : " " + o.arg), o.help);
    add("--help", "this help");
    return out + "\n" + exit_codes_text + exit_note(c.name);
}

} // namespace cli
