// glassbox-cli: headless runs, generation, tokenisation and benchmarks on the core library.
//
// Sections: argument parsing | run | generate | tokenize | analyses (lens, attribute, heads, patch) | bench |
//           make-random | info, learn, break-it, selftest | main
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <omp.h>
#include <sstream>

#include "analysis/analysis_json.h"
#include "analysis/break_it.h"
#include "analysis/export.h"
#include "analysis/learn.h"
#include "analysis/selftest.h"
#include "glassbox_version.h" // generated at build time (packaging/version.cmake)
#include "io/loader.h"
#include "io/writers.h"
#include "kernels/gemm.h"
#include "kernels/softmax.h"
#include "model/model.h"
#include "model/quant.h"
#include "run/forward.h"
#include "run/generate.h"
#include "run/live.h"
#include "run/predict.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_util.h"
#include "util/npy.h"
#if __has_include("gl_attention.h")
#include "gl_attention.h"
#define GLASSBOX_HAVE_GL 1
#else
#define GLASSBOX_HAVE_GL 0
#endif

namespace {

// ---------------------------------------------------------------------------------------------
// argument parsing and help
// ---------------------------------------------------------------------------------------------
// The overview (glassbox-cli --help). Laid out as GNU programs do ("Usage:", "  or:", indented two-column
// lists), which is also what help2man turns into the man page at build time (packaging/packaging.cmake).
const char* usage_text = R"(Usage: glassbox-cli COMMAND [OPTIONS]
  or:  glassbox-cli COMMAND --help
  or:  glassbox-cli --help | --version
Look inside a transformer language model from the command line: run a prompt with parts of the model knocked
out, generate, tokenize, and read the analyses (logit lens, attribution, head scores, patching) as text, JSON
or NumPy files.

Commands and their options (glassbox-cli COMMAND --help explains each):
  run          [--model PATH] (--prompt TEXT | --image FILE | --source TEXT [--target-text TEXT])
               [--ablate no-residual,no-layernorm,no-attention]
               [--layers 0,3] [--heads 5.1,5.5] [--experts 1.3] [--top-k 10] [--bos] [--all-logits]
               [--json FILE] [--npy-dir DIR] [--keep POINTS] [--backend cpu|gl] [--capture-budget MB]
               [--matmul K]
  generate     [--model PATH] (--prompt TEXT | --source TEXT) --max-new-tokens N
               [--temperature T | --temperatures 0.3,0.8,1.5]
               [--top-k K] [--top-p P] [--seed S] [--bos] [--ablate ...] [--layers ...] [--heads ...]
               [--experts ...] [--json FILE] [--matmul K]
  tokenize     [--model PATH | --tokenizer DIR] (--text TEXT | --decode 1,2,3 [--escape])
  lens         (--prompt TEXT | --source TEXT [--target-text TEXT]) [--top-k 5] [--target TEXT | --target-id N]
               [--json FILE] [--npy-dir DIR]
  attribute    --prompt TEXT (--target TEXT | --target-id N) [--contrast TEXT | --contrast-id N]
               [--position I] [--json FILE] [--npy-dir DIR]
  heads        (--prompt TEXT | --repeat-random N [--seed S]) [--json FILE] [--npy-dir DIR]
  patch        --prompt CLEAN --corrupt CORRUPT (--target TEXT | --target-id N)
               [--contrast TEXT | --contrast-id N] [--json FILE] [--npy-dir DIR]
               (the analyses lens, attribute, heads and patch also take --model, --bos, --matmul, --backend)
  bench        [--model PATH] [--tokens 16,64,256] [--repeat N] [--backend cpu|gl] [--json FILE] [--matmul K]
               or --incremental [--model PATH] [--tokens 256] [--repeat N] [--backend cpu|gl] [--json FILE]
  make-random  --out DIR [--arch gpt2|llama|marian] [--layers-n 12] [--d-model 768] [--heads-n 12] [--ff 4*d]
               [--vocab 50257] [--ctx 1024] [--dtype F32|F16] [--seed S]
               llama only: [--kv-heads-n H] [--tied 0|1 (1)] [--rope-theta 500000] [--dtype BF16]
               --out FILE.gguf (llama): one GGUF file, [--dtype F32|F16|BF16|Q8_0|Q4_K]
               marian: an encoder–decoder, [--encoder-layers-n N]; defaults 6 + 6 layers, d 512, 8 heads, vocab 58101
  info         [--model PATH] [--matmul K]
  learn        (--prompt TEXT | --source TEXT [--target-text TEXT]) [--token I] [--layer L] [--head H]
               [--json FILE]   the model step by step (an encoder–decoder's decoder, cross-attention included)
  break-it     --prompt TEXT [--scan-heads N] [--json FILE]   each ablation in turn, with what it changes
  selftest     --model DIR [--json FILE]   GPT-2 small's published facts on your copy (exit 3: some differ)

Options of several commands:
  --model PATH   a Hugging Face folder (config.json + model.safetensors + tokenizer), a .gguf file or a
                 llama2.c .bin (with --tokenizer tokenizer.bin); omitted: the embedded default model
  --matmul K     fp32, amx or auto: the kernel of the matrix products (auto, the default: amx where the CPU
                 has AMX)
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

// One option of a command, as its --help lists it. arg is the value's placeholder; empty for a flag.
struct option_doc {
    std::string name, arg, help;
};
struct command_doc {
    std::string name, summary;
    std::vector<std::string> synopsis; // each after "glassbox-cli NAME "
    std::vector<option_doc> options;
};

// Exit codes of one command's own, listed after the common ones.
std::string exit_note(const std::string& command) {
    return command == "selftest" ? "  3  the model ran, and some facts did not match (each is listed)\n" : "";
}

// Every command and its options. The parser accepts exactly the options listed here, so a command's --help
// and what it takes cannot drift apart.
const std::vector<command_doc>& command_docs() {
    static const std::vector<command_doc> docs = [] {
        const option_doc model{"model", "PATH", "a Hugging Face folder, a .gguf file or a llama2.c .bin (default: the "
                                                "embedded default model)"};
        const option_doc tokenizer{"tokenizer", "FILE", "the tokenizer.bin of a llama2.c .bin (default: found next "
                                                        "to the model)"};
        const option_doc bos{"bos", "", "prepend the model's BOS token (an error when it has none)"};
        const option_doc matmul{"matmul", "K", "fp32, amx or auto: the kernel of the matrix products (default auto: "
                                               "AMX where the CPU has it; GLASSBOX_MATMUL sets the default)"};
        const option_doc weights{"weights", "stored|f32", "stored (default): F16, BF16 and quantised weights stay as "
                                                          "the file holds them; f32: every weight dequantised at load "
                                                          "and packed for --matmul (4 bytes a weight, AMX digits 3)"};
        const option_doc backend{"backend", "cpu|gl", "where attention runs (default cpu; gl without OpenGL 4.3 "
                                                      "falls back to the CPU with a notice)"};
        const option_doc json{"json", "FILE", "also write the result as JSON"};
        const option_doc npy{"npy-dir", "DIR", "also write the result as NumPy .npy files into DIR"};
        const option_doc ablate{"ablate", "LIST", "no-residual, no-layernorm, no-attention (comma-separated)"};
        const option_doc layers{"layers", "LIST", "the layers --ablate applies to, e.g. 0,3 (default: all)"};
        const option_doc heads{"heads", "LIST", "heads to ablate, LAYER.HEAD, e.g. 5.1,5.5"};
        const option_doc experts{"experts", "LIST", "MoE models: experts to ablate, LAYER.EXPERT, e.g. 1.3,0.0 (the "
                                                    "expert's mixing weight becomes 0 for every token; the other "
                                                    "chosen experts keep theirs)"};
        const option_doc prompt{"prompt", "TEXT", "the text to run"};
        const option_doc target_id{"target-id", "N", "the target token by id"};
        // an analysis of an encoder–decoder's decoder: the target it reads
        const option_doc decoder_target{"target-text", "TEXT", "encoder–decoders: the decoder's target (default: the "
                                                               "greedy translation)"};
        const option_doc contrast_id{"contrast-id", "N", "the contrast token by id"};
        return std::vector<command_doc>{
            {"run", "one forward pass: the prompt's tokens and the top-k next tokens (encoders: the top-k fillers of each "
                    "[MASK]; image classifiers: the top-k classes of an image and where [CLS] looked)",
             {"--prompt TEXT [--model PATH] [options]", "--image FILE --model VIT_OR_DEIT_FOLDER [options]",
              "--source TEXT [--target-text TEXT] --model BART_MBART_OR_MARIAN_FOLDER [options]"},
             {model, tokenizer, prompt, {"image", "FILE", "a PNG or JPEG for a ViT or DeiT classifier (resized and normalised "
                                                          "as its preprocessor_config.json says)"},
              {"source", "TEXT", "encoder–decoders (BART, mBART, Marian): the text the encoder reads"},
              {"target-text", "TEXT", "encoder–decoders: the target the decoder reads after its start token (default: "
                                      "the greedy translation of --source)"},
              {"max-new-tokens", "N", "encoder–decoders without --target-text: the longest translation (default 40)"},
              bos, ablate, layers, heads, experts,
              {"top-k", "N", "how many next tokens to list (default 10)"},
              {"all-logits", "", "keep every position's logits (logits.npy is [T, V], else [1, V])"},
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
              matmul, weights}},
            {"generate", "continue a prompt, printing the text as it is generated",
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
                               "one entry per temperature, with its distribution)"}, matmul, weights}},
            {"tokenize", "encode text to token ids, or decode ids to text",
             {"[--model PATH | --tokenizer DIR] --text TEXT", "[--model PATH | --tokenizer DIR] --decode IDS [--escape]"},
             {model,
              {"tokenizer", "DIR", "without --model: this folder's tokenizer alone, chosen and configured as a model "
                                   "load does (no weights read); with a llama2.c --model: its tokenizer.bin"},
              {"text", "TEXT", "print its token ids as a JSON array"},
              {"decode", "IDS", "comma-separated token ids: print their text as it is, control characters included"},
              {"escape", "", "with --decode: show control characters escaped (\"\\x0d\"), newlines and tabs as they are"}}},
            {"lens", "logit lens: what the residual stream predicts after every sublayer",
             {"--prompt TEXT [--model PATH] [options]",
              "--source TEXT [--target-text TEXT] --model BART_MBART_OR_MARIAN_FOLDER [options]"},
             {model, tokenizer, prompt, bos,
              {"source", "TEXT", "encoder–decoders: the source; the lens reads the decoder's stream at each target token"},
              decoder_target,
              {"top-k", "K", "tokens kept per cell (default 5)"},
              {"target", "TEXT", "a token (exactly one) to follow through every point (default: each position's "
                                 "final top-1)"},
              target_id, json, npy, backend, matmul, weights}},
            {"attribute", "direct logit attribution: what each head and MLP writes into a token's logit",
             {"--prompt TEXT (--target TEXT | --target-id N) [--model PATH] [options]"},
             {model, tokenizer, prompt, bos,
              {"target", "TEXT", "the token whose logit is explained (exactly one token)"}, target_id,
              {"contrast", "TEXT", "explain logit(target) - logit(contrast) instead (exactly one token)"}, contrast_id,
              {"position", "I", "the position to explain (default: the last)"}, json, npy, backend, matmul, weights}},
            {"heads", "head scores: previous-token, first-token, induction, duplicate-token and entropy of every head",
             {"--prompt TEXT [--model PATH] [options]", "--repeat-random N [--seed S] [--model PATH] [options]"},
             {model, tokenizer, {"prompt", "TEXT", "the text whose attention is scored"},
              {"repeat-random", "N", "score N random tokens repeated twice instead of a prompt (the induction test)"},
              {"seed", "S", "with --repeat-random: the seed of the random tokens (default 0)"}, bos, json, npy,
              backend, matmul, weights}},
            {"patch", "activation patching: where the clean run's activations bring its answer back",
             {"--prompt CLEAN --corrupt CORRUPT (--target TEXT | --target-id N) [--model PATH] [options]"},
             {model, tokenizer, {"prompt", "CLEAN", "the clean prompt"},
              {"corrupt", "CORRUPT", "the corrupted prompt (the same number of tokens)"},
              {"target", "TEXT", "the metric is logit(target) - logit(contrast) at the last position (one token)"},
              target_id, {"contrast", "TEXT", "the metric's contrast token (one token; default: none, logit(target) alone)"},
              contrast_id, bos, json, npy, backend, matmul, weights}},
            {"bench", "time forward passes with full capture, or live recompute against a fresh forward (an "
                      "encoder–decoder: both stacks on T source and T target tokens, and a greedy translation)",
             {"[--tokens 16,64,256] [--repeat N] [--model PATH] [options]",
              "--incremental [--tokens 256] [--repeat N] [--model PATH] [options]"},
             {model, tokenizer,
              {"tokens", "LIST", "prompt lengths to time (default 16,64,256; one length with --incremental, "
                                 "default 256)"},
              {"repeat", "N", "timed runs per length, reported as median, min and max (default 10)"},
              {"incremental", "", "time appending a token, editing the middle one and toggling a last-layer "
                                  "ablation, against a fresh forward"},
              {"backend", "cpu|gl", "where attention runs (default cpu); gl also times attention alone on both"},
              json, matmul, weights}},
            {"make-random", "write a random GPT-2, Llama or Marian model folder (or a Llama .gguf file), for benchmarks and tests",
             {"--out DIR [options]", "--arch llama --out FILE.gguf [--dtype F32|F16|BF16|Q8_0|Q4_K] [options]",
              "--arch marian --out DIR [--encoder-layers-n N] [options]"},
             {{"out", "DIR", "the folder to write; a path ending in .gguf writes one GGUF file (llama only)"},
              {"arch", "gpt2|llama|marian", "the architecture (default gpt2); marian: an encoder–decoder, opus-mt's "
                                            "shape by default"},
              {"layers-n", "N", "layers (default 12; marian: decoder layers, default 6)"},
              {"encoder-layers-n", "N", "marian only: encoder layers (default: --layers-n)"},
              {"d-model", "D", "model width (default 768; marian 512)"},
              {"heads-n", "H", "attention heads (default 12; marian 8)"},
              {"kv-heads-n", "H", "llama only: key/value heads (default: --heads-n)"},
              {"ff", "N", "MLP width (default 4 * --d-model)"},
              {"vocab", "V", "vocabulary size (default 50257; marian 58101)"},
              {"ctx", "N", "context length, max_position_embeddings (default 1024; marian 512)"},
              {"dtype", "F32|F16|...", "the weights' type: F32 or F16 in model.safetensors (llama also BF16); a .gguf "
                                       "also BF16, Q8_0 or Q4_K (default F32)"},
              {"seed", "S", "the seed of the random weights (default 1)"},
              {"tied", "0|1", "llama only: the LM head is the embedding matrix (default 1)"},
              {"rope-theta", "X", "llama only: RoPE's base (default 500000)"}}},
            {"info", "the model as JSON: architecture, sizes, parameters by component, the matmul kernel",
             {"[--model PATH] [--matmul K]"},
             {model, tokenizer, matmul, weights}},
            {"learn", "a walk through the model on your prompt: each step's formula, shapes and this token's numbers",
             {"--prompt TEXT [--token I] [--layer L] [--head H] [--model PATH] [options]",
              "--source TEXT [--target-text TEXT] [--token I] ... --model BART_MBART_OR_MARIAN_FOLDER"},
             {model, tokenizer, prompt, bos,
              {"source", "TEXT", "encoder–decoders: the source; the walk follows the decoder, cross-attention included"},
              decoder_target,
              {"token", "I", "the position whose numbers are shown (default: the last)"},
              {"layer", "L", "the block walked through (default 0)"},
              {"head", "H", "the attention head shown (default 0)"},
              {"json", "FILE", "also write the steps and the parameter derivation as JSON"}, matmul, weights}},
            {"break-it", "remove each part of the model in turn and see what changes: no attention, no layer norm, no "
                         "residual, each layer's attention, the three heads that matter most",
             {"--prompt TEXT [--model PATH] [options]"},
             {model, tokenizer, prompt, bos,
              {"scan-heads", "N", "at most N single-head runs to find the heads that matter most (default 256; "
                                  "beyond it the heads of the layers whose attention matters most)"},
              {"json", "FILE", "also write every row's numbers and sentence as JSON"}, matmul, weights}},
            {"selftest", "check facts published about GPT-2 small on your copy of it (loss, L4H11, L5H5, Paris)",
             {"--model DIR [--json FILE]"},
             {model, {"json", "FILE", "also write each fact, what was expected and what came, as JSON"}, matmul, weights}},
        };
    }();
    return docs;
}

const command_doc* find_command(const std::string& name) {
    for (const command_doc& c : command_docs())
        if (c.name == name) return &c;
    return nullptr;
}

std::string command_names() {
    std::string s;
    for (const command_doc& c : command_docs()) s += (s.empty() ? "" : ", ") + c.name;
    return s;
}

// `glassbox-cli NAME --help`: what the command does, its usage, every option it takes, the exit codes.
std::string command_help(const command_doc& c) {
    std::string out;
    for (size_t i = 0; i < c.synopsis.size(); i++)
        out += (i == 0 ? "Usage: " : "  or:  ") + ("glassbox-cli " + c.name + " " + c.synopsis[i]) + "\n";
    out += (char)std::toupper((unsigned char)c.summary[0]) + c.summary.substr(1) + ".\n\nOptions:\n";
    auto add = [&](const std::string& left, const std::string& help) {
        // a two-column list; the help wraps at 110 columns, and a long left side puts it on its own line
        const size_t col = 26, width = 110;
        std::string line = "  " + left;
        if (line.size() + 2 > col) {
            out += line + "\n";
            line.clear();
        }
        line.resize(col, ' ');
        std::istringstream words(help);
        bool first = true;
        for (std::string w; words >> w; first = false) {
            if (!first && line.size() + 1 + w.size() > width) {
                out += line + "\n";
                line.assign(col, ' ');
                first = true;
            }
            line += (first ? "" : " ") + w;
        }
        out += line + "\n";
    };
    for (const option_doc& o : c.options) add("--" + o.name + (o.arg.empty() ? "" : " " + o.arg), o.help);
    add("--help", "this help");
    return out + "\n" + exit_codes_text + exit_note(c.name);
}

// Bad usage is bad input: exit code 2, like gb::error.
struct usage_error : gb::error {
    using gb::error::error;
};

struct args {
    std::string command;
    std::map<std::string, std::string> opts; // --key value
    std::set<std::string> flags;             // --flag

    bool has(const std::string& k) const { return opts.count(k) || flags.count(k); }
    std::string get(const std::string& k, const std::string& def = "") const {
        auto it = opts.find(k);
        return it == opts.end() ? def : it->second;
    }
    std::string need(const std::string& k) const {
        auto it = opts.find(k);
        if (it == opts.end()) throw usage_error("missing --" + k + " (see glassbox-cli " + command + " --help)");
        return it->second;
    }
};

args parse_args(int argc, char** argv) {
    args a;
    if (argc < 2) throw usage_error("missing command (" + command_names() + ")");
    a.command = argv[1];
    const command_doc* cmd = find_command(a.command);
    if (!cmd) throw usage_error("unknown command '" + a.command + "' (" + command_names() + ")");
    // An option another command takes is refused by name ("run does not take --temperature") rather than
    // silently ignored.
    std::set<std::string> flag_names{"help"}, option_names, any_name;
    for (const option_doc& o : cmd->options) (o.arg.empty() ? flag_names : option_names).insert(o.name);
    for (const command_doc& c : command_docs())
        for (const option_doc& o : c.options) any_name.insert(o.name);
    for (int i = 2; i < argc; i++) {
        std::string s = argv[i];
        if (s == "-h") s = "--help";
        if (s.rfind("--", 0) != 0) throw usage_error("unexpected argument '" + s + "'");
        std::string key = s.substr(2), value;
        size_t eq = key.find('=');
        bool inline_value = eq != std::string::npos;
        if (inline_value) {
            value = key.substr(eq + 1);
            key = key.substr(0, eq);
        }
        if (flag_names.count(key)) {
            if (inline_value) throw usage_error("--" + key + " takes no value");
            a.flags.insert(key);
        } else if (option_names.count(key)) {
            if (!inline_value) {
                if (i + 1 >= argc) throw usage_error("--" + key + " needs a value");
                value = argv[++i];
            }
            a.opts[key] = value;
        } else if (any_name.count(key)) {
            throw usage_error(a.command + " does not take --" + key);
        } else {
            throw usage_error("unknown option --" + key + " for '" + a.command + "'");
        }
    }
    return a;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep))
        if (!cur.empty()) out.push_back(cur);
    return out;
}

long parse_int(const std::string& s, const std::string& what, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
        throw usage_error(what + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got '" + s + "'");
    return v;
}

double parse_float(const std::string& s, const std::string& what, double lo, double hi) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi)
        throw usage_error(what + ": expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got '" + s + "'");
    return v;
}

gb::model open_model(const args& a) {
    // the kernel is fixed when the weights are packed, at load
    if (a.has("matmul")) gb::set_matmul_kind(gb::parse_matmul_kind(a.get("matmul")));
    gb::load_options lo;
    lo.tokenizer_path = a.get("tokenizer");
    const std::string weights = a.get("weights", "stored");
    if (weights != "stored" && weights != "f32") throw usage_error("--weights: expected stored or f32, got '" + weights + "'");
    lo.keep_stored = weights == "stored";
    std::string path = a.has("model") ? a.get("model") : gb::default_model_path();
    gb::model m = gb::load_model(path, lo);
    // an image classifier has no text: only run (--image), info and bench take it
    if ((gb::kind_of(m.config) == gb::KIND_VISION) && a.command != "run" && a.command != "info" && a.command != "bench")
        throw usage_error(m.path + " is an image classifier (" + gb::arch_table(m.config.arch).name +
                          "): it reads images, with `run --image FILE`; " + a.command + " reads text");
    // an encoder–decoder reads a source: run, generate and learn take it (--source); info, tokenize and bench none
    if (gb::arch_table(m.config.arch).cross && a.command != "run" && a.command != "generate" && a.command != "info" &&
        a.command != "tokenize" && a.command != "learn" && a.command != "bench" && a.command != "lens")
        throw usage_error(m.path + " is an encoder–decoder (" + gb::arch_table(m.config.arch).name +
                          "): it translates a source, with `run --source TEXT`, `generate --source TEXT`, `lens --source "
                          "TEXT` or `learn --source TEXT`; " + a.command + " is for decoder-only models");
    if (!m.nonfinite_tensor.empty()) // not an error: the model still runs and the display copes
        std::fprintf(stderr, "warning: the weights hold NaN/Inf, first in %s: outputs will be meaningless\n",
                     m.nonfinite_tensor.c_str());
    return m;
}

// The prompt's ids; --bos on a model without a BOS token is an error rather than silently ignored.
std::vector<int> prompt_ids(const gb::model& m, const std::string& prompt, bool bos) {
    if (bos && m.tok.bos_id < 0)
        throw usage_error("--bos: this model's tokenizer has no BOS token (" + m.path + ")");
    return gb::encode_prompt(m.tok, prompt, bos);
}

// --ablate LIST [--layers LIST] [--heads L.H,...] [--experts L.E,...], checked against the model
gb::ablation parse_ablation(const args& a, const gb::model_config& c) {
    gb::ablation ab = gb::parse_ablation(a.get("ablate"), a.get("layers"), a.get("heads"), a.get("experts"));
    gb::check_ablation(ab, c);
    return ab;
}

// Text safe to print on a terminal: control characters (C0 but keep_newlines' \n and \t, DEL, and C1 such as
// U+009B CSI) never reach it raw; they show as "\x07" or "\u009b". Valid UTF-8 is expected (bytes of a partial
// character were already shown as <E6> by token_text or replaced by utf8_sanitize).
std::string terminal_safe(const std::string& s, bool keep_newlines) {
    std::string out;
    char hex[12];
    for (size_t i = 0; i < s.size(); i++) {
        unsigned char ch = (unsigned char)s[i];
        if (keep_newlines && (ch == '\n' || ch == '\t')) {
            out += (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            std::snprintf(hex, sizeof hex, "\\x%02x", ch);
            out += hex;
        } else if (ch == 0xc2 && i + 1 < s.size() && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9f) {
            std::snprintf(hex, sizeof hex, "\\u%04x", (unsigned char)s[i + 1]);
            out += hex;
            i++;
        } else {
            out += (char)ch;
        }
    }
    return out;
}

// A token's text on one terminal line: newline as ↵, tab as →, other control characters escaped.
std::string visible(const std::string& s) {
    std::string out;
    for (char ch : s) {
        if (ch == '\n') out += "\u21b5";
        else if (ch == '\t') out += "\u2192";
        else out += ch;
    }
    return terminal_safe(out, false);
}

// A token's text in double quotes, on one line (visible()).
std::string quoted(const gb::model& m, int id) { return "\"" + visible(gb::token_text(m.tok, id)) + "\""; }

// s padded with spaces to width columns, counting characters rather than bytes ("près" is four columns, five bytes),
// for tables that printf's %-Ns would misalign on non-ASCII tokens
std::string padded(const std::string& s, int width) {
    int cols = 0;
    for (unsigned char ch : s) cols += (ch & 0xC0) != 0x80;
    return s + std::string((size_t)std::max(0, width - cols), ' ');
}

// --backend cpu|gl: the attention function to use (empty = CPU); falls back with a notice.
gb::attention_fn choose_backend(const args& a, std::string* renderer = nullptr) {
    std::string b = a.get("backend", "cpu");
    if (b == "cpu") return {};
    if (b != "gl") throw usage_error("--backend: expected cpu or gl, got '" + b + "'");
#if GLASSBOX_HAVE_GL
    gb::gl_info info = gb::gl_init_headless();
    if (info.ok) {
        if (renderer) *renderer = info.renderer;
        return gb::attention_gl;
    }
    if (info.context) // a context, but the driver refused our shaders: say so, it is not a missing GPU
        std::fprintf(stderr, "notice: the GL shaders failed on %s (%s); fallback to the CPU backend\n",
                     info.renderer.c_str(), info.error.c_str());
    else
        std::fprintf(stderr, "notice: no OpenGL 4.3 context (%s); fallback to the CPU backend\n", info.error.c_str());
#else
    (void)renderer;
    std::fprintf(stderr, "notice: this build has no OpenGL support; fallback to the CPU backend\n");
#endif
    return {};
}

// ---------------------------------------------------------------------------------------------
// run
// ---------------------------------------------------------------------------------------------
// MoE models: the experts each layer chose for the last token, with their mixing weights, largest first; an
// ablated expert has weight 0 (it did not run) and is named after them.
void print_routing(const gb::model& m, const gb::record& cap, const gb::ablation& ab) {
    const gb::model_config& c = m.config;
    if (c.n_expert <= 0) return;
    const int T = cap.n_tokens, E = c.n_expert;
    std::printf("experts of the last token \"%s\" (top %d of %d per layer):\n", visible(cap.pieces[T - 1]).c_str(),
                c.n_expert_used, E);
    const gb::routing_table rt = gb::routing_of(cap, E);
    for (int l = 0; l < c.n_layer; l++) {
        std::printf("  L%-3d", l);
        if (!rt.kept[l]) {
            std::printf(" (not kept: memory budget)\n");
            continue;
        }
        const int* ids = rt.cell_ids(l, T - 1);
        const float* w = rt.cell_weights(l, T - 1);
        int n = 0;
        for (; n < rt.k && ids[n] >= 0; n++) std::printf("  expert %-3d %.3f", ids[n], w[n]);
        if (n == 0) std::printf("  (no expert)");
        for (const gb::head_ref& e : ab.experts)
            if (e.layer == l) std::printf("  [expert %d ablated]", e.head);
        std::printf("\n");
    }
}

void print_top(const gb::model& m, const std::string& title, const std::vector<gb::token_prob>& top) {
    std::printf("%s\n", title.c_str());
    int rank = 1;
    for (const gb::token_prob& tp : top)
        std::printf("  %2d. %s %.4f  (id %d)\n", rank++, padded(quoted(m, tp.id), 20).c_str(), tp.prob, tp.id);
}

// Encoders: the masked-LM head's fillers for each mask token; without one, its best guess at every position
// (how well it reconstructs the prompt). Returns the mask positions' slots (for --json).
std::vector<gb::fill_slot> print_fill_mask(const gb::model& m, const gb::record& cap, int top_k) {
    const std::vector<int> at = gb::mask_positions(cap, m.tok);
    const std::vector<gb::fill_slot> fills = gb::fill_mask(cap, at, top_k);
    for (const gb::fill_slot& f : fills)
        print_top(m, "fill mask at position " + std::to_string(f.position) + " (top " + std::to_string(top_k) + "):", f.top);
    if (fills.empty()) {
        const std::string mask = m.tok.mask_id >= 0 ? gb::token_text(m.tok, m.tok.mask_id) : "a mask token";
        std::printf("no %s in the prompt; the masked-LM head's best guess at each position:\n", mask.c_str());
        std::vector<int> all(cap.n_tokens);
        for (int t = 0; t < cap.n_tokens; t++) all[t] = t;
        for (const gb::fill_slot& f : gb::fill_mask(cap, all, 1))
            std::printf("  %3d %-16s -> %-16s %.4f\n", f.position, ("\"" + visible(cap.pieces[f.position]) + "\"").c_str(),
                        quoted(m, f.top[0].id).c_str(), f.top[0].prob);
    }
    return fills;
}

// Vision models: the classifier's top classes at [CLS] and where [CLS] looked (attention rollout).
void print_classes(const gb::model& m, const gb::record& cap, const std::vector<float>& roll, int top_k) {
    print_top(m, "top " + std::to_string(top_k) + " classes:", gb::top_k_probs(cap.logits.data(), cap.vocab, top_k));
    std::vector<int> order;
    for (int t = m.config.n_prefix; t < cap.n_tokens; t++) order.push_back(t);
    std::sort(order.begin(), order.end(), [&](int x, int y) { return roll[x] > roll[y]; });
    std::printf("patches [CLS] draws on most (attention rollout over all layers):");
    for (size_t i = 0; i < order.size() && i < 5; i++) std::printf(" %s %.3f", cap.pieces[order[i]].c_str(), roll[order[i]]);
    std::printf("\n");
}

// --image FILE for a vision model (its pixels, kept alive for the run) or --prompt TEXT for the others; the ids
std::vector<int> run_input(const args& a, const gb::model& m, std::vector<float>& pixels) {
    if (gb::kind_of(m.config) != gb::KIND_VISION) {
        if (a.has("image"))
            throw usage_error("--image: " + m.path + " is a text model (" + gb::arch_table(m.config.arch).name +
                              "); images are for ViT and DeiT classifiers");
        return prompt_ids(m, a.need("prompt"), a.has("bos"));
    }
    if (a.has("prompt"))
        throw usage_error("--prompt: " + m.path + " is an image classifier (" + gb::arch_table(m.config.arch).name +
                          "); give --image FILE");
    const gb::image img = gb::load_image(a.need("image"));
    pixels = gb::vision_pixels(m, img);
    std::printf("image: %s (%dx%d) as %dx%d pixels, %dx%d patches of %d px\n", a.get("image").c_str(), img.width,
                img.height, m.config.image_size, m.config.image_size, m.config.grid(), m.config.grid(), m.config.patch_size);
    return gb::vision_tokens(m.config);
}

// The decoder's input: --target-text's tokens after the decoder start, or the model's greedy translation of src
// under ab (its EOS left for the last row to predict)
std::vector<int> seq2seq_target(const args& a, const gb::model& m, const std::vector<int>& src, const gb::ablation& ab) {
    if (a.has("target-text")) return gb::target_ids(m, a.get("target-text"));
    const int max_new = (int)parse_int(a.get("max-new-tokens", std::to_string(std::min(40, m.config.n_ctx - 1))), "--max-new-tokens", 1, m.config.n_ctx - 1);
    gb::generation g = gb::translate(m, src, max_new, {}, ab);
    if (g.hit_eos) g.ids.pop_back();
    std::vector<int> tgt = {m.config.decoder_start_id};
    tgt.insert(tgt.end(), g.ids.begin(), g.ids.end());
    return tgt;
}

// Encoder–decoders: the source through the encoder, the target (given, or the greedy translation) through the
// decoder; the next target token, and which source token each target token reads most (cross-attention averaged
// over heads and layers)
int run_seq2seq(const args& a, const gb::model& m) {
    if (a.has("prompt") || a.has("image"))
        throw usage_error(std::string(a.has("prompt") ? "--prompt" : "--image") + ": " + m.path +
                          " is an encoder–decoder: give --source TEXT (and --target-text TEXT)");
    const std::vector<int> src = gb::source_ids(m, a.need("source"));
    const gb::ablation ab = parse_ablation(a, m.config);
    const int top_k = (int)parse_int(a.get("top-k", std::to_string(std::min(10, m.config.vocab_size))), "--top-k", 1, m.config.vocab_size);
    const std::vector<int> tgt = seq2seq_target(a, m, src, ab);
    gb::forward_options opt;
    opt.attention = choose_backend(a);
    opt.keep.budget_bytes = (size_t)parse_int(a.get("capture-budget", "512"), "--capture-budget", 1, 1 << 20) << 20;
    gb::seq2seq_record r;
    gb::run_seq2seq(r, m, src, tgt, ab, opt);
    const gb::record& dec = r.decoder;
    std::printf("source (%d):", r.encoder.n_tokens);
    for (int t = 0; t < r.encoder.n_tokens; t++) std::printf(" [%d \"%s\"]", src[t], visible(r.encoder.pieces[t]).c_str());
    std::printf("\ntarget (%d):", dec.n_tokens);
    for (int t = 0; t < dec.n_tokens; t++) std::printf(" [%d \"%s\"]", tgt[t], visible(dec.pieces[t]).c_str());
    const std::vector<int> body(tgt.begin() + 1, tgt.end());
    std::printf("\ntranslation: %s\nablation: %s\n", terminal_safe(gb::utf8_sanitize(gb::decode(m.tok, body)), true).c_str(),
                ab.describe().c_str());
    if (dec.nonfinite_layer >= 0) std::printf("warning: non-finite values (NaN/Inf) first appear at %s\n", dec.nonfinite_where.c_str());
    print_top(m, "top " + std::to_string(top_k) + " next target tokens:", gb::top_k_probs(dec.last_logits(), dec.vocab, top_k));
    // decoder row t reads target token t and writes token t + 1 (the last row: its prediction), so the token a
    // row's cross-attention translates is the one it writes
    const std::vector<int> align = gb::cross_alignment(dec);
    std::printf("alignment (the token each decoder row writes, and the source token it reads most: cross-attention "
                "averaged over heads and layers):\n");
    for (int t = 0; t < dec.n_tokens; t++) {
        const int writes = t + 1 < dec.n_tokens ? tgt[t + 1] : gb::top_k_probs(dec.last_logits(), dec.vocab, 1)[0].id;
        std::printf("  %s <- %s\n", padded(quoted(m, writes), 16).c_str(),
                    ("\"" + visible(r.encoder.pieces[align[t]]) + "\"").c_str());
    }
    if (a.has("json")) {
        nlohmann::json j = gb::capture_json(m, dec, ab, top_k);
        j["source_ids"] = src;
        j["source_tokens"] = r.encoder.pieces;
        j["target_ids"] = tgt;
        j["translation"] = gb::utf8_sanitize(gb::decode(m.tok, body));
        j["alignment"] = align;
        j["encoder_resid_norm"] = r.encoder.resid_norm;
        gb::write_json(a.get("json"), j);
    }
    if (a.has("npy-dir")) {
        const std::string dir = a.get("npy-dir");
        // the encoder's record as a decoder-only run's (tokens.npy the source, attention.npy its self-attention),
        // then the decoder's under decoder_* and the cross-attention; logits.npy is the decoder's [T, V]
        gb::write_capture_npy(dir, r.encoder);
        gb::write_record_npy(dir, r.encoder);
        const int L = dec.n_layer, H = dec.n_head, T = dec.n_tokens, S = dec.n_source;
        gb::write_npy(dir + "/logits.npy", {T, dec.vocab}, dec.logits.data());
        gb::write_npy(dir + "/decoder_attention.npy", {L, H, T, T}, dec.flat(gb::HOOK_PATTERN).data());
        gb::write_npy(dir + "/cross_attention.npy", {L, H, T, S}, dec.flat(gb::HOOK_CROSS_PATTERN).data());
        gb::write_npy(dir + "/decoder_residual_norms.npy", {2 * L + 1, T}, dec.resid_norm.data());
        const std::vector<int32_t> ids(tgt.begin(), tgt.end());
        gb::write_npy(dir + "/target_tokens.npy", {T}, ids.data());
    }
    return 0;
}

int cmd_run(const args& a) {
    gb::model m = open_model(a);
    if (gb::is_seq2seq(m)) return run_seq2seq(a, m);
    for (const char* k : {"source", "target-text"})
        if (a.has(k))
            throw usage_error(std::string("--") + k + ": " + m.path + " is not an encoder–decoder (" +
                              gb::arch_table(m.config.arch).name + "); give --prompt TEXT");
    std::vector<float> pixels;
    std::vector<int> ids = run_input(a, m, pixels);
    gb::ablation ab = parse_ablation(a, m.config);
    int top_k = (int)parse_int(a.get("top-k", std::to_string(std::min(10, m.config.vocab_size))), "--top-k", 1, m.config.vocab_size);
    gb::forward_options opt;
    opt.all_logits = a.has("all-logits");
    opt.attention = choose_backend(a);
    if (!pixels.empty()) opt.pixels = pixels.data();
    if ((int)ids.size() > m.config.n_ctx)
        throw gb::error("prompt too long: " + std::to_string(ids.size()) + " tokens, the model's context is " +
                        std::to_string(m.config.n_ctx));
    // --keep: more hook points into the record, written to --npy-dir
    for (const std::string& name : split(a.get("keep"), ',')) {
        if (!a.has("npy-dir")) throw usage_error("--keep names points to write to --npy-dir, but no --npy-dir was given");
        if (name == "resid_stream") opt.keep.resid_stream = true;
        else {
            const gb::hook_point p = gb::parse_hook_point(name);
            if (!gb::hook_exists(p, m.config))
                throw usage_error("--keep " + name + ": " + (p == gb::HOOK_ROUTER ? "this model has no experts (its MLP is dense)"
                                                                                  : "an MoE model's MLP has no single activation (see router)"));
            opt.keep.points |= gb::hook_bit(p);
        }
    }
    // capture budget: beyond it only some layers are kept (the rest are zero in attention.npy and the others)
    opt.keep.budget_bytes = (size_t)parse_int(a.get("capture-budget", "512"), "--capture-budget", 1, 1 << 20) << 20;
    gb::record cap;
    gb::run_forward(cap, m, ids, ab, opt);
    if (!cap.budget_note.empty())
        std::fprintf(stderr, "notice: %s; raise --capture-budget to keep every layer\n", cap.budget_note.c_str());

    if (!pixels.empty()) // an image's positions are named by their place: the first and last say it all
        std::printf("positions (%d): %s .. %s", cap.n_tokens, cap.pieces[0].c_str(), cap.pieces.back().c_str());
    else std::printf("tokens (%d):", cap.n_tokens);
    for (int t = 0; t < cap.n_tokens && pixels.empty(); t++) std::printf(" [%d \"%s\"]", cap.tokens[t], visible(cap.pieces[t]).c_str());
    std::printf("\nablation: %s\n", ab.describe().c_str());
    if (cap.nonfinite_layer >= 0)
        std::printf("warning: non-finite values (NaN/Inf) first appear at %s\n", cap.nonfinite_where.c_str());
    const bool vision = (gb::kind_of(m.config) == gb::KIND_VISION);
    const bool encoder = gb::arch_table(m.config.arch).bidirectional && !vision;
    std::vector<gb::fill_slot> fills;
    const std::vector<float> roll = vision ? gb::attention_rollout(cap) : std::vector<float>(); // [T][T], row 0 [CLS]
    if (vision) print_classes(m, cap, roll, top_k);
    else if (encoder) fills = print_fill_mask(m, cap, top_k);
    else print_top(m, "top " + std::to_string(top_k) + " next tokens:", gb::top_k_probs(cap.last_logits(), cap.vocab, top_k));
    print_routing(m, cap, ab);
    if (a.has("json")) {
        nlohmann::json j = gb::capture_json(m, cap, ab, top_k);
        if (encoder) j["fill_mask"] = gb::fill_mask_json(fills, cap, m.tok);
        if (vision) {
            j["classes"] = gb::fill_mask_json(gb::fill_mask(cap, {0}, top_k), cap, m.tok)[0]["top"];
            j["image"] = a.get("image");
            j["rollout_cls"] = std::vector<float>(roll.begin(), roll.begin() + cap.n_tokens);
        }
        gb::write_json(a.get("json"), j);
    }
    if (a.has("npy-dir")) {
        gb::write_capture_npy(a.get("npy-dir"), cap);
        gb::write_record_npy(a.get("npy-dir"), cap);
        if (vision) {
            const int T = cap.n_tokens;
            gb::write_npy(a.get("npy-dir") + "/rollout.npy", {T, T}, roll.data());
            gb::write_npy(a.get("npy-dir") + "/pixels.npy", {3, m.config.image_size, m.config.image_size}, pixels.data());
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// generate
// ---------------------------------------------------------------------------------------------
// --temperatures: one continuation per temperature from the same seed, top-k and top-p, each after the
// distribution of the first token it samples from (the prompt's last logits through sampling_distribution)
int generate_at_temperatures(const args& a, const gb::model& m, const std::string& prompt, const std::vector<int>& ids,
                             int max_new, gb::sampling sp, const gb::ablation& ab) {
    if (a.has("temperature")) throw usage_error("give --temperature or --temperatures, not both");
    std::vector<float> temps;
    for (const std::string& t : split(a.get("temperatures"), ','))
        temps.push_back((float)parse_float(t, "--temperatures", 0, 100));
    if (temps.empty() || temps.size() > 16)
        throw usage_error("--temperatures: expected 1 to 16 comma-separated numbers, got '" + a.get("temperatures") + "'");
    if (ids.empty()) throw gb::error("empty prompt: nothing to continue");
    if ((int)ids.size() > m.config.n_ctx)
        throw gb::error("prompt too long: " + std::to_string(ids.size()) + " tokens, the model's context is " +
                        std::to_string(m.config.n_ctx));
    gb::forward_options fo; // the prompt once, for its next-token logits
    fo.keep.points = 0;
    fo.keep.resid_norms = false;
    gb::record r;
    gb::run_forward(r, m, ids, ab, fo);
    std::vector<gb::temperature_run> runs;
    for (float t : temps) {
        gb::temperature_run run = gb::run_at_temperature(m, ids, r.last_logits(), r.vocab, sp, t, max_new, ab);
        const gb::sampling_dist& d = run.dist;
        std::printf("T = %g%s, seed %llu: the first token is drawn from", t, t == 0 ? " (greedy)" : "",
                    (unsigned long long)sp.seed);
        if (sp.top_k > 0) std::printf(" the top %d", sp.top_k);
        std::printf("\n ");
        for (size_t i = 0; i < d.ids.size() && i < 8; i++) std::printf(" %s %.3f", quoted(m, d.ids[i]).c_str(), d.probs[i]);
        if (d.ids.size() > 8) std::printf(" ... (%zu tokens)", d.ids.size());
        std::printf("\n%s%s\n\n", terminal_safe(prompt, true).c_str(), terminal_safe(run.text, true).c_str());
        runs.push_back(std::move(run));
    }
    if (a.has("json")) gb::write_json(a.get("json"), gb::temperatures_json(prompt, ids, runs, sp, m.tok));
    return 0;
}

// Encoder–decoders: the source's translation, greedy or sampled, printed as it is made
int generate_seq2seq(const args& a, const gb::model& m, int max_new, const gb::sampling& sp, const gb::ablation& ab) {
    if (a.has("prompt")) throw usage_error("--prompt: " + m.path + " is an encoder–decoder: give --source TEXT");
    if (a.has("temperatures")) throw usage_error("--temperatures: encoder–decoders take one --temperature");
    const std::vector<int> src = gb::source_ids(m, a.need("source"));
    std::vector<int> made;
    const gb::generation g = gb::translate(m, src, max_new, sp, ab, [&](int id) {
        made.push_back(id);
        std::printf("%s", terminal_safe(gb::token_text(m.tok, id), true).c_str());
        std::fflush(stdout);
        return true;
    });
    std::vector<int> body = g.ids;
    if (g.hit_eos) body.pop_back();
    const std::string text = gb::utf8_sanitize(gb::decode(m.tok, body));
    std::printf("\n[%zu tokens%s, %.0f ms]\n", g.ids.size(), g.hit_eos ? ", ended by EOS" : "", g.ms);
    if (a.has("json"))
        gb::write_json(a.get("json"), nlohmann::json{{"source", a.get("source")}, {"source_ids", src}, {"ids", g.ids},
                                                     {"translation", text}, {"hit_eos", g.hit_eos}});
    return 0;
}

// --temperature, --top-k, --top-p, --seed
gb::sampling parse_sampling(const args& a, const gb::model& m) {
    gb::sampling sp;
    sp.temperature = (float)parse_float(a.get("temperature", "0"), "--temperature", 0, 100);
    sp.top_k = (int)parse_int(a.get("top-k", "0"), "--top-k", 0, m.config.vocab_size);
    sp.top_p = (float)parse_float(a.get("top-p", "1"), "--top-p", 0, 1);
    if (!(sp.top_p > 0)) throw usage_error("--top-p: expected a number in (0, 1], got '" + a.get("top-p") + "'");
    sp.seed = (uint64_t)parse_int(a.get("seed", "0"), "--seed", 0, std::numeric_limits<long>::max());
    return sp;
}

int cmd_generate(const args& a) {
    gb::model m = open_model(a);
    if (gb::is_seq2seq(m)) {
        const gb::sampling sp = parse_sampling(a, m);
        const int max_new = (int)parse_int(a.need("max-new-tokens"), "--max-new-tokens", 1, m.config.n_ctx);
        return generate_seq2seq(a, m, max_new, sp, parse_ablation(a, m.config));
    }
    if (a.has("source"))
        throw usage_error("--source: " + m.path + " is not an encoder–decoder (" + gb::arch_table(m.config.arch).name +
                          "); give --prompt TEXT");
    std::string prompt = a.need("prompt");
    std::vector<int> ids = prompt_ids(m, prompt, a.has("bos"));
    int max_new = (int)parse_int(a.need("max-new-tokens"), "--max-new-tokens", 0, 1 << 20);
    const gb::sampling sp = parse_sampling(a, m);
    gb::ablation ab = parse_ablation(a, m.config);
    if (a.has("temperatures")) return generate_at_temperatures(a, m, prompt, ids, max_new, sp, ab);
    std::fputs(terminal_safe(prompt, true).c_str(), stdout);
    std::fflush(stdout);
    std::string pending; // bytes of a UTF-8 character split across tokens are printed once complete
    gb::generation g = gb::generate(m, ids, max_new, sp, ab, [&](int id) {
        pending += gb::token_bytes(m.tok, id);
        if (gb::utf8_invalid_at(pending) < 0) {
            std::fputs(terminal_safe(pending, true).c_str(), stdout);
            std::fflush(stdout);
            pending.clear();
        }
        return true;
    });
    std::fputs(terminal_safe(gb::utf8_sanitize(pending), true).c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout); // the timing line on stderr comes after the text, also when both are piped
    std::fprintf(stderr, "%zu tokens in %.1f ms (%.1f tokens/s)%s\n", g.ids.size(), g.ms,
                 g.ms > 0 ? 1000.0 * g.ids.size() / g.ms : 0.0, g.hit_eos ? ", stopped at end-of-text" : "");
    if (a.has("json")) {
        nlohmann::json j = {{"prompt", prompt},
                            {"prompt_ids", ids},
                            {"generated_ids", g.ids},
                            {"generated_text", gb::utf8_sanitize(gb::decode(m.tok, g.ids))},
                            {"stopped_at_eos", g.hit_eos},
                            {"sampling",
                             {{"temperature", sp.temperature}, {"top_k", sp.top_k}, {"top_p", sp.top_p},
                              {"seed", sp.seed}}}};
        gb::write_json(a.get("json"), j);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// tokenize
// ---------------------------------------------------------------------------------------------
int cmd_tokenize(const args& a) {
    gb::tokenizer tok;
    if (a.has("tokenizer") && !a.has("model")) {
        // the folder's tokenizer exactly as a model load picks it: tokenizer.json with tokenizer_config.json
        // (BOS/EOS, add_bos_token), or vocab.json + merges.txt for GPT-2 (model_type from config.json if any)
        std::string dir = a.get("tokenizer"), model_type;
        if (std::ifstream(dir + "/config.json"))
            model_type = gb::json_string(gb::read_json_file(dir + "/config.json"), "model_type", "", dir + "/config.json");
        tok = gb::load_folder_tokenizer(dir, model_type);
    } else {
        tok = open_model(a).tok;
    }
    if (a.has("decode")) {
        std::vector<int> ids;
        for (const std::string& s : split(a.get("decode"), ','))
            ids.push_back((int)parse_int(s, "--decode", 0, (long)tok.vocab.size() - 1));
        // Raw by default: the decoded bytes exactly, for pipes and files (decode(encode(x)) == x). --escape
        // is for a terminal: control characters, which could move the cursor or recolour it, shown escaped.
        const std::string text = gb::decode(tok, ids);
        if (a.has("escape")) {
            std::printf("%s\n", terminal_safe(gb::utf8_sanitize(text), true).c_str());
        } else {
            std::fwrite(text.data(), 1, text.size(), stdout); // fwrite: a NUL byte is text too
            std::fputc('\n', stdout);
        }
        return 0;
    }
    if (a.has("escape")) throw usage_error("--escape goes with --decode");
    std::vector<int> ids = gb::encode(tok, a.need("text"));
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
    return 0;
}

// ---------------------------------------------------------------------------------------------
// analyses: lens, attribute, heads, patch
// ---------------------------------------------------------------------------------------------
// --NAME TEXT (exactly one token) or --NAME-id N; -1 when neither is given and it is optional.
int token_arg(const args& a, const gb::model& m, const std::string& name, bool required) {
    if (a.has(name) && a.has(name + "-id")) throw usage_error("give --" + name + " or --" + name + "-id, not both");
    if (a.has(name + "-id")) return (int)parse_int(a.get(name + "-id"), "--" + name + "-id", 0, m.config.vocab_size - 1);
    if (a.has(name)) return gb::single_token_id(m.tok, a.get(name), "--" + name);
    if (required) throw usage_error("missing --" + name + " TEXT (one token) or --" + name + "-id N");
    return -1;
}

// A prompt for the analyses: present, and within the context.
std::vector<int> analysis_prompt(const gb::model& m, const args& a, const std::string& key = "prompt") {
    std::vector<int> ids = prompt_ids(m, a.need(key), a.has("bos"));
    if (ids.empty()) throw gb::error("--" + key + " is empty: nothing to run");
    if ((int)ids.size() > m.config.n_ctx)
        throw gb::error("--" + key + " too long: " + std::to_string(ids.size()) + " tokens, the model's context is " +
                        std::to_string(m.config.n_ctx));
    return ids;
}

// What the analyses read: patterns, z, MLP outputs and the residual stream.
gb::forward_options analysis_options(const args& a) {
    gb::forward_options opt;
    opt.attention = choose_backend(a);
    opt.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    opt.keep.resid_stream = true;
    return opt;
}
gb::record analysis_run(const gb::model& m, const std::vector<int>& ids, const args& a) {
    gb::record r;
    gb::run_forward(r, m, ids, {}, analysis_options(a));
    return r;
}

// Whether the command reads an encoder–decoder's --source (and --target-text) rather than a --prompt; the wrong
// one of the two for m is a usage error.
bool reads_source(const args& a, const gb::model& m) {
    const bool s2s = gb::is_seq2seq(m);
    if (s2s && a.has("prompt"))
        throw usage_error("--prompt: " + m.path + " is an encoder–decoder: give --source TEXT (and --target-text TEXT)");
    if (!s2s && (a.has("source") || a.has("target-text")))
        throw usage_error(std::string(a.has("source") ? "--source" : "--target-text") + ": " + m.path +
                          " is not an encoder–decoder: give --prompt TEXT");
    return s2s;
}

void write_outputs(const args& a, const nlohmann::json& j, const std::function<void(const std::string&)>& npy) {
    if (a.has("json")) gb::write_json(a.get("json"), j);
    if (a.has("npy-dir")) npy(a.get("npy-dir"));
}

// An encoder–decoder's lens reads its decoder: each target token's prediction of the next target token.
int cmd_lens(const args& a) {
    gb::model m = open_model(a);
    const bool s2s = reads_source(a, m);
    std::vector<int> src;
    const std::vector<int> ids = s2s ? seq2seq_target(a, m, src = gb::source_ids(m, a.need("source")), {}) : analysis_prompt(m, a);
    const int k = (int)parse_int(a.get("top-k", "5"), "--top-k", 1, m.config.vocab_size);
    const int target = token_arg(a, m, "target", false);
    gb::record plain;
    gb::seq2seq_record rs;
    if (s2s) gb::run_seq2seq(rs, m, src, ids, {}, analysis_options(a));
    else plain = analysis_run(m, ids, a);
    const gb::record& r = s2s ? rs.decoder : plain;
    gb::lens_result l = gb::logit_lens(r, m, {}, k, target);
    const int T = l.n_tokens;
    std::printf("logit lens at the last %sposition (\"%s\"): top-%d at each residual point\n", s2s ? "target " : "",
                visible(r.pieces[T - 1]).c_str(), std::min(k, 3));
    for (int p = 0; p < l.n_points; p++) {
        std::printf("  %s", padded(l.points[p], s2s ? 14 : 9).c_str());
        for (int j = 0; j < std::min(k, 3); j++) {
            const size_t o = ((size_t)p * T + T - 1) * k + j;
            std::printf("  %s %.3f", padded(quoted(m, l.top_ids[o]), 14).c_str(), l.top_probs[o]);
        }
        std::printf("   p(%s) = %.3f\n", quoted(m, l.target_ids[T - 1]).c_str(), l.target_prob[(size_t)p * T + T - 1]);
    }
    write_outputs(a, gb::lens_json(l, r, m.tok), [&](const std::string& d) { gb::write_lens_npy(d, l); });
    return 0;
}

int cmd_attribute(const args& a) {
    gb::model m = open_model(a);
    std::vector<int> ids = analysis_prompt(m, a);
    const int target = token_arg(a, m, "target", true), contrast = token_arg(a, m, "contrast", false);
    const int T = (int)ids.size();
    const int pos = (int)parse_int(a.get("position", std::to_string(T - 1)), "--position", 0, T - 1);
    gb::record r = analysis_run(m, ids, a);
    gb::attribution at = gb::attribute(r, m, {}, target, contrast, pos);
    std::printf("direct logit attribution of logit(%s)%s at position %d (\"%s\")\n", quoted(m, target).c_str(),
                contrast >= 0 ? (" - logit(" + quoted(m, contrast) + ")").c_str() : "", pos, visible(r.pieces[pos]).c_str());
    // the largest components, by magnitude
    std::vector<std::pair<double, std::string>> parts{{at.embed, "embeddings"}, {at.bias, "final norm bias"}};
    for (int l = 0; l < at.n_layer; l++) {
        parts.push_back({at.mlp[l], "L" + std::to_string(l) + " mlp"});
        if (at.attn_bias[l] != 0) parts.push_back({at.attn_bias[l], "L" + std::to_string(l) + " attn bias"});
        for (int h = 0; h < at.n_head; h++)
            parts.push_back({at.heads[(size_t)l * at.n_head + h], "head " + std::to_string(l) + "." + std::to_string(h)});
    }
    std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return std::fabs(x.first) > std::fabs(y.first); });
    for (size_t i = 0; i < parts.size() && i < 12; i++) std::printf("  %-16s %+9.4f\n", parts[i].second.c_str(), parts[i].first);
    std::printf("  sum of components %+.6f, the run's logit difference %+.6f (residual %.2g)\n", at.sum(), at.total,
                at.total - at.sum());
    write_outputs(a, gb::attribution_json(at, m.tok), [&](const std::string& d) { gb::write_attribution_npy(d, at); });
    return 0;
}

int cmd_heads(const args& a) {
    gb::model m = open_model(a);
    std::vector<int> ids;
    if (a.has("repeat-random")) {
        if (a.has("prompt")) throw usage_error("give --prompt or --repeat-random, not both");
        const int n = (int)parse_int(a.get("repeat-random"), "--repeat-random", 1, 1 << 20);
        const bool bos = a.has("bos") || m.tok.add_bos;
        if (a.has("bos") && m.tok.bos_id < 0) throw usage_error("--bos: this model's tokenizer has no BOS token (" + m.path + ")");
        if (2 * n + (bos && m.tok.bos_id >= 0) > m.config.n_ctx)
            throw gb::error("--repeat-random " + std::to_string(n) + ": twice that is longer than the model's context (" +
                            std::to_string(m.config.n_ctx) + ")");
        const uint64_t seed = (uint64_t)parse_int(a.get("seed", "0"), "--seed", 0, std::numeric_limits<long>::max());
        ids = gb::repeated_random_tokens(m.tok, m.config.vocab_size, n, seed, bos);
    } else {
        if (a.has("seed")) throw usage_error("--seed goes with --repeat-random");
        ids = analysis_prompt(m, a);
    }
    gb::forward_options opt;
    opt.attention = choose_backend(a);
    gb::record r;
    gb::run_forward(r, m, ids, {}, opt);
    gb::head_scores s = gb::score_heads(r);
    std::printf("%d tokens%s; the highest-scoring heads (layer.head):\n", r.n_tokens,
                a.has("repeat-random") ? " (random tokens, repeated)" : "");
    for (int k = 0; k < gb::SCORE_COUNT; k++) {
        const gb::head_score_kind kind = (gb::head_score_kind)k;
        std::vector<int> order;
        for (int i = 0; i < s.n_layer * s.n_head; i++)
            if (std::isfinite(s.score[k][i])) order.push_back(i);
        // entropy: the most focused heads (lowest) are the interesting ones
        std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
            return kind == gb::SCORE_ENTROPY ? s.score[k][x] < s.score[k][y] : s.score[k][x] > s.score[k][y];
        });
        std::printf("  %-16s", gb::head_score_name(kind));
        if (order.empty()) std::printf(" (undefined: no token occurs twice)");
        for (size_t i = 0; i < order.size() && i < 5; i++)
            std::printf("  %d.%d %.3f", order[i] / s.n_head, order[i] % s.n_head, s.score[k][order[i]]);
        std::printf("\n");
    }
    write_outputs(a, gb::head_scores_json(s, r), [&](const std::string& d) { gb::write_head_scores_npy(d, s); });
    return 0;
}

int cmd_patch(const args& a) {
    gb::model m = open_model(a);
    std::vector<int> clean = analysis_prompt(m, a), corrupt = analysis_prompt(m, a, "corrupt");
    const int target = token_arg(a, m, "target", true), contrast = token_arg(a, m, "contrast", false);
    gb::patch_options po;
    po.attention = choose_backend(a);
    gb::patch_result p = gb::activation_patching(m, clean, corrupt, target, contrast, po);
    const int T = p.n_tokens;
    std::printf("metric logit(%s)%s at the last position: clean %+.4f, corrupt %+.4f\n", quoted(m, target).c_str(),
                contrast >= 0 ? (" - logit(" + quoted(m, contrast) + ")").c_str() : "", p.clean, p.corrupt);
    std::printf("%d patched runs in %.0f ms; normalized (1 = the clean answer is back):\n", p.runs, p.ms);
    const std::vector<std::string> labels = gb::resid_labels(p.n_layer);
    for (int pt = 0; pt < 2 * p.n_layer + 1; pt++) { // the position where patching matters most at each point
        int best = 0;
        for (int t = 1; t < T; t++)
            if (std::fabs(p.resid_normalized[(size_t)pt * T + t]) > std::fabs(p.resid_normalized[(size_t)pt * T + best])) best = t;
        std::printf("  %-9s best position %2d (\"%s\") %+.3f\n", labels[pt].c_str(), best, visible(gb::token_text(m.tok, clean[best])).c_str(),
                    p.resid_normalized[(size_t)pt * T + best]);
    }
    std::vector<int> order(p.heads.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int)i;
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return std::fabs(p.heads_normalized[x]) > std::fabs(p.heads_normalized[y]); });
    std::printf("  heads:");
    for (size_t i = 0; i < order.size() && i < 6; i++)
        std::printf("  %d.%d %+.3f", order[i] / p.n_head, order[i] % p.n_head, p.heads_normalized[order[i]]);
    std::printf("\n");
    write_outputs(a, gb::patch_json(p, m.tok, clean, corrupt), [&](const std::string& d) { gb::write_patch_npy(d, p); });
    return 0;
}

// ---------------------------------------------------------------------------------------------
// bench
// ---------------------------------------------------------------------------------------------
struct stats {
    double median = 0, min = 0, max = 0;
};
stats summarize(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    stats s;
    s.min = v.front();
    s.max = v.back();
    size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}

// Attention alone, GPU vs CPU, at the model's head shape: one layer, all heads, probabilities kept.
void bench_attention_backends(const gb::model_config& c, const gb::attention_fn& gl, int repeat,
                              nlohmann::json& results) {
    std::printf("\nattention only (one layer, %d heads, d_head %d, probabilities read back):\n", c.n_head, c.d_head);
    std::printf("%8s %12s %12s %8s\n", "tokens", "cpu_ms", "gl_ms", "gl/cpu");
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int T : {64, 256, 1024}) {
        const int qw = c.n_head * c.d_head, kw = c.n_kv_head * c.d_head;
        std::vector<float> q((size_t)T * qw), k((size_t)T * kw), v((size_t)T * kw);
        for (auto* buf : {&q, &k, &v})
            for (float& x : *buf) x = nd(rng);
        std::vector<float> probs((size_t)c.n_head * T * T), out((size_t)T * qw);
        gb::attention_args aa{q.data(), k.data(), v.data(), qw, kw, T, 0, c.n_head, c.n_kv_head, c.d_head,
                              probs.data(), out.data(), qw};
        auto time_it = [&](const gb::attention_fn& f) {
            std::vector<double> ms;
            for (int r = -1; r < repeat; r++) {
                auto t0 = std::chrono::steady_clock::now();
                f(aa);
                double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                if (r >= 0) ms.push_back(dt);
            }
            return summarize(ms).median;
        };
        double cpu = time_it(gb::attention_cpu), gpu = time_it(gl);
        std::printf("%8d %12.2f %12.2f %8.2f\n", T, cpu, gpu, gpu / cpu);
        results.push_back({{"attention_only", true}, {"tokens", T}, {"cpu_ms", cpu}, {"gl_ms", gpu}});
    }
}

// Live recompute (core/run/live.h) against a fresh forward, all keeping what the app keeps (patterns, z, MLP outputs,
// the residual stream): append one token, edit the middle token, toggle a last-layer head ablation.
int bench_incremental(const args& a, const gb::model& m, const gb::attention_fn& attention, int repeat) {
    const gb::model_config& c = m.config;
    const int T = (int)parse_int(a.get("tokens", "256"), "--tokens (one count with --incremental)", 2, c.n_ctx);
    std::mt19937 rng(99);
    auto random_tokens = [&](int n) {
        std::vector<int> ids(n);
        for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
        return ids;
    };
    const std::vector<int> tokens = random_tokens(T);
    gb::live_request rq;
    rq.keep.points = gb::hook_bit(gb::HOOK_PATTERN) | gb::hook_bit(gb::HOOK_Z) | gb::hook_bit(gb::HOOK_MLP_OUT);
    rq.keep.resid_stream = true;
    rq.attention = attention;
    auto ms_of = [](auto&& f) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    std::printf("model: %s, %d layers, d %d, %d heads (%d KV), %d tokens, %s, matmul %s, %d threads\n",
                c.model_type.c_str(), c.n_layer, c.d_model, c.n_head, c.n_kv_head, T, attention ? "gl" : "cpu",
                gb::matmul_name(gb::matmul_kind_now()), omp_get_max_threads());
    std::vector<double> full, append, edit, from_layer;
    gb::live_result out;
    size_t record_mb = 0;
    for (int r = -1; r < repeat; r++) { // fresh: a new live state each time (r = -1 warms caches)
        gb::live_state st;
        rq.tokens = tokens;
        rq.interventions.clear();
        double ms = ms_of([&] { gb::live_run(out, st, m, rq); });
        if (r >= 0) full.push_back(ms);
    }
    {
        size_t bytes = 0;
        for (int p = 0; p < gb::HOOK_COUNT; p++)
            for (const auto& t : out.run->acts[p]) bytes += t->size() * sizeof(float);
        record_mb = bytes >> 20;
    }
    gb::live_state st;
    rq.tokens.assign(tokens.begin(), tokens.end() - 1);
    gb::live_run(out, st, m, rq);
    for (int r = -1; r < repeat; r++) { // T-1 kept, one token appended (timed), then the end deleted again
        rq.tokens.assign(tokens.begin(), tokens.end() - 1);
        rq.tokens.push_back((tokens.back() + r + 1) % c.vocab_size);
        double ms = ms_of([&] { gb::live_run(out, st, m, rq); });
        if (out.report.from_token != T - 1) throw gb::error("internal: append recomputed from " + std::to_string(out.report.from_token));
        if (r >= 0) append.push_back(ms);
        rq.tokens.pop_back();
        gb::live_run(out, st, m, rq);
    }
    rq.tokens = tokens;
    gb::live_run(out, st, m, rq);
    for (int r = -1; r < repeat; r++) { // the token at T/2 changed: from there on
        rq.tokens[T / 2] = (tokens[T / 2] + 1 + (r & 1)) % c.vocab_size;
        double ms = ms_of([&] { gb::live_run(out, st, m, rq); });
        if (r >= 0) edit.push_back(ms);
    }
    bool baseline_cached = true;
    gb::ablation ab;
    ab.heads = {{c.n_layer - 1, 0}};
    rq.interventions = gb::ablation_interventions(ab, c);
    gb::live_run(out, st, m, rq); // the first ablated run starts from the clean one's kept layers
    const double first_toggle_ms = out.report.ms;
    for (int r = -1; r < repeat; r++) { // alternate heads of the last layer: that layer only
        ab.heads = {{c.n_layer - 1, (r & 1) % c.n_head}};
        ab.no_layernorm.on = c.n_head == 1 && (r & 1); // one head: alternate it with its layer's norms instead
        ab.no_layernorm.layers = {c.n_layer - 1};
        rq.interventions = gb::ablation_interventions(ab, c);
        double ms = ms_of([&] { gb::live_run(out, st, m, rq); });
        baseline_cached &= !out.report.baseline_run;
        if (r >= 0) from_layer.push_back(ms);
    }
    const double f = summarize(full).median, ap = summarize(append).median, ed = summarize(edit).median,
                 fl = summarize(from_layer).median;
    std::printf("record kept: %zu MB\n", record_mb);
    std::printf("%-34s %10s %10s\n", "", "median_ms", "x full");
    std::printf("%-34s %10.2f %10.3f\n", "full (fresh forward, full capture)", f, 1.0);
    std::printf("%-34s %10.2f %10.3f\n", "append one token", ap, ap / f);
    std::printf("%-34s %10.2f %10.3f\n", "edit the token at T/2", ed, ed / f);
    std::printf("%-34s %10.2f %10.3f\n", "ablation toggled on the last layer", fl, fl / f);
    std::printf("first ablation after a clean run: %.2f ms (copies the clean run's keys and values)\n", first_toggle_ms);
    std::printf("baseline cached on ablation changes: %s\n", baseline_cached ? "yes" : "no");
    nlohmann::json j = {{"tokens", T},
                        {"full_ms", f},
                        {"append_ms", ap},
                        {"edit_ms", ed},
                        {"from_layer_ms", fl},
                        {"first_toggle_ms", first_toggle_ms},
                        {"baseline_cached", baseline_cached},
                        {"repeat", repeat},
                        {"record_mb", record_mb},
                        {"model", m.path},
                        {"matmul", gb::matmul_name(gb::matmul_kind_now())},
                        {"backend", attention ? "gl" : "cpu"}};
    if (a.has("json")) gb::write_json(a.get("json"), j);
    return 0;
}

// An encoder–decoder: source and target of T tokens each (random ids), both stacks with the app's full capture
// (every self- and cross-attention pattern), and the encoder alone; then a greedy translation of a 16-token source
// through the decoder's cache, per generated token.
int bench_seq2seq(const args& a, const gb::model& m, const std::vector<int>& sizes, int repeat,
                  const gb::attention_fn& attention, const std::string& renderer) {
    const gb::model_config& c = m.config;
    const gb::model_config& ec = m.encoder->config;
    std::printf("model: %s, %d encoder + %d decoder layers, d %d, %d heads, vocab %d (%s)\n", c.model_type.c_str(),
                ec.n_layer, c.n_layer, c.d_model, c.n_head, c.vocab_size, m.path.c_str());
    std::printf("backend: %s, matmul: %s, %d threads; source and target of T tokens each, full capture of both stacks\n",
                attention ? ("gl: " + renderer).c_str() : "cpu", gb::matmul_name(gb::matmul_kind_now()),
                omp_get_max_threads());
    std::printf("%8s %10s %10s %10s %12s\n", "tokens", "median_ms", "min_ms", "max_ms", "encoder_ms");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    auto random_ids = [&](int n) {
        std::vector<int> ids(n);
        for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
        return ids;
    };
    auto ms_since = [](std::chrono::steady_clock::time_point t0) {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    gb::forward_options opt;
    opt.attention = attention;
    for (int T : sizes) {
        if (T > ec.n_ctx) throw usage_error("--tokens " + std::to_string(T) + ": the encoder's context is " + std::to_string(ec.n_ctx));
        std::vector<double> both, enc;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> src = random_ids(T), tgt = random_ids(T);
            tgt[0] = c.decoder_start_id;
            auto t0 = std::chrono::steady_clock::now();
            gb::record er;
            gb::run_encoder(&er, m, src, {}, opt);
            const double e = ms_since(t0);
            gb::seq2seq_record sr;
            t0 = std::chrono::steady_clock::now();
            gb::run_seq2seq(sr, m, src, tgt, {}, opt);
            const double b = ms_since(t0);
            if (r >= 0) enc.push_back(e), both.push_back(b);
        }
        const stats s = summarize(both), se = summarize(enc);
        std::printf("%8d %10.2f %10.2f %10.2f %12.2f\n", T, s.median, s.min, s.max, se.median);
        std::fflush(stdout);
        results.push_back({{"tokens", T}, {"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max},
                           {"encoder_ms", se.median}, {"repeat", repeat},
                           {"matmul", gb::matmul_name(gb::matmul_kind_now())}});
    }
    // greedy translation: the source once through the encoder, then one decoder step per token through the cache
    const int S = std::min(16, ec.n_ctx), max_new = std::min(32, c.n_ctx - 1);
    std::vector<double> per_token;
    int made = 0;
    for (int r = -1; r < repeat; r++) {
        const gb::generation g = gb::translate(m, random_ids(S), max_new, gb::sampling{});
        if (r >= 0 && !g.ids.empty()) per_token.push_back(g.ms / (double)g.ids.size()), made = (int)g.ids.size();
    }
    if (!per_token.empty()) {
        const double ms = summarize(per_token).median;
        std::printf("translate (greedy, %d source tokens, %d target tokens): %.2f ms a token (%.1f tokens/s), encoder "
                    "included\n", S, made, ms, 1000.0 / ms);
        results.push_back({{"translate_source_tokens", S}, {"translate_tokens", made}, {"ms_per_token", ms}});
    }
    if (a.has("json")) gb::write_json(a.get("json"), results);
    return 0;
}

int cmd_bench(const args& a) {
    gb::model m = open_model(a);
    // an image classifier always runs its image's positions: random pixels in the normalised range
    const bool vision = (gb::kind_of(m.config) == gb::KIND_VISION);
    if (gb::is_seq2seq(m) && a.has("incremental"))
        throw usage_error("--incremental times live recompute, which encoder–decoders do not have (" + m.path +
                          " reruns both stacks on every change)");
    if (vision && a.has("incremental"))
        throw usage_error("--incremental times prompt edits; " + m.path + " is an image classifier (no prompt to edit)");
    if (vision && a.has("tokens"))
        throw usage_error("--tokens: " + m.path + " is an image classifier: it always runs its " +
                          std::to_string(m.config.n_ctx) + " positions");
    std::vector<float> pixels;
    if (vision) {
        std::mt19937 prng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        pixels.resize((size_t)3 * m.config.image_size * m.config.image_size);
        for (float& p : pixels) p = u(prng);
    }
    std::vector<int> sizes;
    for (const std::string& s : split(vision ? std::to_string(m.config.n_ctx) : a.get("tokens", "16,64,256"), ','))
        sizes.push_back((int)parse_int(s, "--tokens", 1, m.config.n_ctx));
    int repeat = (int)parse_int(a.get("repeat", "10"), "--repeat", 1, 100000);
    std::string renderer;
    gb::attention_fn gl = choose_backend(a, &renderer);
    if (a.has("incremental")) return bench_incremental(a, m, gl, repeat);
    if (gb::is_seq2seq(m)) return bench_seq2seq(a, m, sizes, repeat, gl, renderer);
    const gb::model_config& c = m.config;
    std::printf("model: %s, %d layers, d %d, %d heads, vocab %d (%s)\n", c.model_type.c_str(), c.n_layer, c.d_model,
                c.n_head, c.vocab_size, m.path.c_str());
    std::printf("backend: %s, matmul: %s, %d threads, full capture (attention of every layer and head)\n",
                gl ? ("gl: " + renderer).c_str() : "cpu", gb::matmul_name(gb::matmul_kind_now()), omp_get_max_threads());
    std::printf("%8s %10s %10s %10s %10s %10s %10s\n", "tokens", "median_ms", "min_ms", "max_ms", "matmul", "attention",
                "rest");
    nlohmann::json results = nlohmann::json::array();
    std::mt19937 rng(1234);
    for (int T : sizes) {
        gb::forward_options opt;
        opt.attention = gl;
        if (vision) opt.pixels = pixels.data();
        std::vector<double> total, mm, at, rest;
        for (int r = -1; r < repeat; r++) { // r = -1 warms caches and allocations
            std::vector<int> ids(T);
            for (int& id : ids) id = (int)(rng() % (uint32_t)c.vocab_size);
            if (vision) ids = gb::vision_tokens(c);
            gb::record cap;
            auto t0 = std::chrono::steady_clock::now();
            gb::run_forward(cap, m, ids, {}, opt);
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (r < 0) continue;
            total.push_back(ms);
            mm.push_back(cap.timing.matmul_ms);
            at.push_back(cap.timing.attention_ms);
            rest.push_back(ms - cap.timing.matmul_ms - cap.timing.attention_ms);
        }
        stats s = summarize(total);
        stats smm = summarize(mm), sat = summarize(at), sr = summarize(rest);
        std::printf("%8d %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", T, s.median, s.min, s.max, smm.median,
                    sat.median, sr.median);
        std::fflush(stdout);
        results.push_back({{"tokens", T},
                           {"median_ms", s.median},
                           {"min_ms", s.min},
                           {"max_ms", s.max},
                           {"repeat", repeat},
                           {"matmul", gb::matmul_name(gb::matmul_kind_now())},
                           {"split_ms", {{"matmul", smm.median}, {"attention", sat.median}, {"rest", sr.median}}}});
    }
    if (gl) bench_attention_backends(c, gl, repeat, results);
    if (a.has("json")) gb::write_json(a.get("json"), results.size() == 1 ? results[0] : results);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// make-random, info
// ---------------------------------------------------------------------------------------------
// A random model for benchmarks: GPT-2 built in memory and saved; Llama drawn while its file is written, since
// a Llama-3.2-1B shape (1.2 billion parameters) would take 5 GB as floats.
int cmd_make_random(const args& a) {
    const std::string arch = a.get("arch", "gpt2");
    if (arch != "gpt2" && arch != "llama" && arch != "marian")
        throw usage_error("--arch: expected gpt2, llama or marian, got '" + arch + "'");
    const bool llama = arch == "llama", marian = arch == "marian";
    if (!llama)
        for (const char* k : {"kv-heads-n", "tied", "rope-theta"})
            if (a.has(k)) throw usage_error(std::string("--") + k + " goes with --arch llama (" + arch + " has one K/V head per "
                                            "head, a tied head and " + (marian ? "sinusoidal" : "learned") + " positions)");
    if (!marian && a.has("encoder-layers-n")) throw usage_error("--encoder-layers-n goes with --arch marian");
    // defaults: GPT-2 small, Llama at GPT-2 small's width, Marian as opus-mt-en-de (6 + 6 layers, d 512, 58101 pieces)
    gb::model_config c;
    c.n_layer = (int)parse_int(a.get("layers-n", marian ? "6" : "12"), "--layers-n", 1, 256);
    c.d_model = (int)parse_int(a.get("d-model", marian ? "512" : "768"), "--d-model", 1, 16384);
    c.n_head = (int)parse_int(a.get("heads-n", marian ? "8" : "12"), "--heads-n", 1, 256);
    c.vocab_size = (int)parse_int(a.get("vocab", marian ? "58101" : "50257"), "--vocab", marian ? 258 : 257, 1 << 20);
    c.n_ctx = (int)parse_int(a.get("ctx", marian ? "512" : "1024"), "--ctx", 1, 1 << 16);
    if (c.d_model % c.n_head) throw usage_error("--d-model must be a multiple of --heads-n");
    c.d_head = c.d_model / c.n_head;
    // grouped-query attention: query head h reads K/V head h / (heads / kv-heads)
    c.n_kv_head = (int)parse_int(a.get("kv-heads-n", std::to_string(c.n_head)), "--kv-heads-n", 1, c.n_head);
    if (c.n_head % c.n_kv_head) throw usage_error("--heads-n must be a multiple of --kv-heads-n");
    if (llama && c.d_head % 2)
        throw usage_error("--d-model / --heads-n = " + std::to_string(c.d_head) + " is odd; llama's RoPE rotates pairs");
    // 4 d for both: GPT-2's n_inner, and Llama-3.2-1B's 8192 at d 2048
    c.d_ff = (int)parse_int(a.get("ff", std::to_string(4 * c.d_model)), "--ff", 1, 1 << 20);
    c.tied_lm_head = parse_int(a.get("tied", "1"), "--tied", 0, 1) == 1;
    c.rope_theta = (float)parse_float(a.get("rope-theta", "500000"), "--rope-theta", 1, 1e9);
    std::string dtype = a.get("dtype", "F32");
    uint64_t seed = (uint64_t)parse_int(a.get("seed", "1"), "--seed", 0, std::numeric_limits<long>::max());
    const std::string out = a.need("out");
    if (out.size() > 5 && out.compare(out.size() - 5, 5, ".gguf") == 0) {
        if (!llama) throw usage_error("--out " + out + ": GGUF files are written for --arch llama only");
        const std::pair<const char*, uint32_t> types[] = {{"F32", gb::GGML_F32}, {"F16", gb::GGML_F16}, {"BF16", gb::GGML_BF16},
                                                          {"Q8_0", gb::GGML_Q8_0}, {"Q4_K", gb::GGML_Q4_K}};
        int found = -1;
        for (int i = 0; i < 5; i++) found = dtype == types[i].first ? i : found;
        if (found < 0) throw usage_error("--dtype: expected F32, F16, BF16, Q8_0 or Q4_K for a .gguf, got '" + dtype + "'");
        int64_t n = gb::write_random_llama_gguf(out, c, seed, types[found].second);
        std::printf("wrote a random Llama (%d layers, d %d, %d heads, %d kv heads, ff %d, vocab %d, %s head, "
                    "%lld parameters, %s) to %s\n", c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_ff, c.vocab_size,
                    c.tied_lm_head ? "tied" : "untied", (long long)n, dtype.c_str(), out.c_str());
        return 0;
    }
    if (marian) {
        if (dtype != "F32") throw usage_error("--dtype: a random Marian is written in F32, got '" + dtype + "'");
        const int enc_layers = (int)parse_int(a.get("encoder-layers-n", std::to_string(c.n_layer)), "--encoder-layers-n", 1, 256);
        int64_t n = gb::write_random_marian_hf(out, c, enc_layers, seed);
        std::printf("wrote a random Marian (%d encoder + %d decoder layers, d %d, %d heads, ff %d, vocab %d, "
                    "%lld parameters) to %s\n", enc_layers, c.n_layer, c.d_model, c.n_head, c.d_ff, c.vocab_size,
                    (long long)n, out.c_str());
        return 0;
    }
    if (dtype != "F32" && dtype != "F16" && !(llama && dtype == "BF16"))
        throw usage_error("--dtype: expected F32 or F16" + std::string(llama ? " or BF16" : "") + " for a folder, got '" +
                          dtype + "'");
    if (llama) {
        int64_t n = gb::write_random_llama_hf(out, c, seed, dtype);
        std::printf("wrote a random Llama (%d layers, d %d, %d heads, %d kv heads, ff %d, vocab %d, %s head, "
                    "%lld parameters, %s) to %s\n", c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_ff, c.vocab_size,
                    c.tied_lm_head ? "tied" : "untied", (long long)n, dtype.c_str(), out.c_str());
        return 0;
    }
    gb::model m = gb::random_gpt2(c, seed);
    gb::save_hf_gpt2(out, m, dtype);
    std::printf("wrote a random GPT-2 (%d layers, d %d, %d heads, ff %d, vocab %d, %lld parameters) to %s\n", c.n_layer,
                c.d_model, c.n_head, c.d_ff, c.vocab_size, (long long)gb::count_params(m).total(), out.c_str());
    return 0;
}

// An encoder–decoder walks its decoder: the target's token (--target-text, or the greedy translation of --source),
// with the cross-attention step reading the source.
int cmd_learn(const args& a) {
    gb::model m = open_model(a);
    const bool s2s = reads_source(a, m);
    std::vector<int> src;
    const std::vector<int> ids = s2s ? seq2seq_target(a, m, src = gb::source_ids(m, a.need("source")), {}) : analysis_prompt(m, a);
    const int T = (int)ids.size(), L = m.config.n_layer;
    const int token = (int)parse_int(a.get("token", std::to_string(T - 1)), "--token", 0, T - 1);
    const int layer = (int)parse_int(a.get("layer", "0"), "--layer", 0, L - 1);
    const int head = (int)parse_int(a.get("head", "0"), "--head", 0, m.config.n_head - 1);
    gb::forward_options opt;
    opt.keep = gb::learn_keep(L, layer);
    gb::record r;
    gb::seq2seq_record rs;
    if (s2s) gb::run_seq2seq(rs, m, src, ids, {}, opt);
    else gb::run_forward(r, m, ids, {}, opt);
    const gb::learn_walk w = gb::walk_through(m, s2s ? rs.decoder : r, token, layer, head);
    std::printf("%stoken %d \"%s\", layer %d, head %d of %s\n\n", s2s ? "the decoder's " : "", token,
                visible(w.pieces[token]).c_str(), layer, head, m.config.model_type.c_str());
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < w.steps.size(); i++) {
        const gb::learn_step& st = w.steps[i];
        std::printf("%2zu. %s\n    %s\n    shape %s\n", i + 1, st.title.c_str(), st.formula.c_str(), st.shape.c_str());
        if (!st.values.empty()) {
            std::printf("    ");
            for (size_t v = 0; v < st.values.size(); v++) {
                if (st.labels.empty()) std::printf("%s%.4g", v ? " " : "", st.values[v]);
                else std::printf("%s\"%s\" %.4g", v ? ", " : "", visible(st.labels[v]).c_str(), st.values[v]);
            }
            if (st.labels.empty() && st.width > (int)st.values.size()) std::printf(" ... (%d values)", st.width);
            if (st.norm >= 0) std::printf("   |x| = %.4g", st.norm);
            std::printf("\n");
        }
        if (!st.note.empty()) std::printf("    %s\n", st.note.c_str());
        steps.push_back({{"title", st.title}, {"formula", st.formula}, {"shape", st.shape}, {"note", st.note},
                         {"panel", st.panel}, {"values", st.values}, {"labels", st.labels}, {"width", st.width},
                         {"norm", st.norm >= 0 ? nlohmann::json(st.norm) : nlohmann::json()}});
    }
    std::printf("\nParameters:\n");
    nlohmann::json params = nlohmann::json::array();
    for (const gb::param_line& p : gb::param_derivation(m)) {
        std::printf("  %-18s %14lld   %s\n", p.what.c_str(), (long long)p.count, p.formula.c_str());
        params.push_back({{"what", p.what}, {"formula", p.formula}, {"count", p.count}});
    }
    nlohmann::json j{{"token", token}, {"layer", layer}, {"head", head}, {"tokens", w.pieces},
                     {"merges", w.merges}, {"steps", steps}, {"params", params}};
    if (s2s) j["source_tokens"] = rs.decoder.source_pieces;
    write_outputs(a, j, nullptr);
    return 0;
}

// The table, then each row's sentence; --json writes the numbers (analysis_json.h's break_it_json).
int cmd_break_it(const args& a) {
    gb::model m = open_model(a);
    const std::vector<int> ids = analysis_prompt(m, a);
    gb::break_options o;
    o.max_head_scan = (int)parse_int(a.get("scan-heads", "256"), "--scan-heads", 1, 1 << 20);
    const gb::break_result b = gb::break_it(m, ids, o);
    std::printf("break it: %zu tokens, %s; baseline top-1 %s %.1f %%, the last token's |x| after the last layer %.4g\n\n",
                ids.size(), m.config.model_type.c_str(), quoted(m, b.base_top_id).c_str(), 100.0 * b.base_top_prob,
                b.base_resid_norm);
    const std::string keeps = "p(" + quoted(m, b.base_top_id) + ")";
    std::printf("  %-28s %-16s %8s %12s %10s %10s\n", "removed", "top-1", "p", keeps.c_str(), "KL nats", "|x| last");
    auto num = [](double v) { // 0.4891, 85.81; 6595 and 19312 rather than 1.93e+04
        char s[32];
        std::snprintf(s, sizeof s, std::isfinite(v) && std::fabs(v) >= 1000 && std::fabs(v) < 1e9 ? "%.0f" : "%.4g", v);
        return std::string(s);
    };
    for (const gb::break_row& r : b.rows)
        std::printf("  %-28s %-16s %7.2f%% %11.2f%% %10s %10s\n", r.label.c_str(), quoted(m, r.top_id).c_str(),
                    100.0 * r.top_prob, 100.0 * r.base_top_prob, num(r.kl).c_str(), num(r.resid_norm).c_str());
    std::printf("\n");
    for (const gb::break_row& r : b.rows) std::printf("%s\n", terminal_safe(r.explanation, false).c_str());
    if (!b.note.empty()) std::printf("\nnote: %s\n", b.note.c_str());
    write_outputs(a, gb::break_it_json(b, m.tok), nullptr);
    return 0;
}

// Exit 3 when some fact does not match: a script can tell a broken conversion from a broken command.
int cmd_selftest(const args& a) {
    gb::model m = open_model(a);
    const gb::selftest_result r = gb::gpt2_selftest(m);
    nlohmann::json facts = nlohmann::json::array();
    for (const gb::selftest_fact& f : r.facts) {
        std::printf("%s  %s\n      expected %s, got %s\n", f.matched ? "ok  " : "FAIL", f.name.c_str(), f.expected.c_str(),
                    f.got.c_str());
        facts.push_back({{"fact", f.name}, {"expected", f.expected}, {"got", f.got}, {"matched", f.matched}});
    }
    const int n = (int)r.facts.size();
    std::printf("%d of %d facts match%s\n", r.matched(), n,
                r.matched() == n ? ": this is GPT-2 small, loaded and run as published"
                                 : ": not the published GPT-2 small (other weights, or a broken conversion)");
    write_outputs(a, nlohmann::json{{"model", gb::model_json(m)}, {"facts", facts}, {"matched", r.matched()}, {"of", n}}, nullptr);
    return r.matched() == n ? 0 : 3;
}

int cmd_info(const args& a) {
    gb::model m = open_model(a);
    nlohmann::json j = gb::model_json(m);
    gb::param_counts p = gb::count_params(m);
    j["params"] = {{"embeddings", p.embeddings}, {"attention", p.attention}, {"mlp", p.mlp}, {"norms", p.norms}};
    j["d_ff"] = m.config.d_ff;
    const gb::weight_types t = gb::stored_types(m);
    j["stored_types"] = {{"attention", t.attention}, {"mlp", t.mlp}, {"embedding", t.embedding}, {"head", t.head}};
    j["resident_bytes"] = gb::weight_bytes(m);
    j["matmul"] = gb::matmul_name(gb::matmul_kind_now());
    std::string why;
    if (!gb::amx_usable(&why)) j["matmul_note"] = "no AMX kernel: " + why;
    if (!m.source_note.empty()) j["note"] = m.source_note;
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    gb::keep_freed_buffers_in_heap();
    try {
        const std::string first = argc >= 2 ? argv[1] : "";
        if (first == "--version") {
            std::printf("glassbox-cli %s\n", GLASSBOX_VERSION_FULL);
            return 0;
        }
        if (first == "--help" || first == "-h" || first == "help") {
            if (argc >= 3) { // help COMMAND
                const command_doc* c = find_command(argv[2]);
                if (!c) throw usage_error("unknown command '" + std::string(argv[2]) + "' (" + command_names() + ")");
                std::fputs(command_help(*c).c_str(), stdout);
            } else {
                std::fputs(usage_text, stdout);
                std::fputs(exit_codes_text, stdout);
            }
            return 0;
        }
        args a = parse_args(argc, argv);
        if (a.has("help")) {
            std::fputs(command_help(*find_command(a.command)).c_str(), stdout);
            return 0;
        }
        if (a.command == "run") return cmd_run(a);
        if (a.command == "generate") return cmd_generate(a);
        if (a.command == "tokenize") return cmd_tokenize(a);
        if (a.command == "lens") return cmd_lens(a);
        if (a.command == "attribute") return cmd_attribute(a);
        if (a.command == "heads") return cmd_heads(a);
        if (a.command == "patch") return cmd_patch(a);
        if (a.command == "bench") return cmd_bench(a);
        if (a.command == "make-random") return cmd_make_random(a);
        if (a.command == "info") return cmd_info(a);
        if (a.command == "selftest") return cmd_selftest(a);
        if (a.command == "learn") return cmd_learn(a);
        if (a.command == "break-it") return cmd_break_it(a);
        throw usage_error("unknown command '" + a.command + "' (" + command_names() + ")");
    } catch (const gb::error& e) { // one line, whatever the message holds (a file name, a token with a newline)
        std::fprintf(stderr, "error: %s\n", terminal_safe(e.what(), false).c_str());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: internal: %s\n", terminal_safe(e.what(), false).c_str());
        return 1;
    }
}
