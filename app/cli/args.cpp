// The argument parser and the helpers the commands share: numbers and lists, the model, the prompt, the
// ablation, terminal-safe text, the attention backend, the analyses' inputs and outputs.
#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "analysis/export.h"
#include "analysis/sae_train.h"
#include "commands.h"
#include "io/loader.h"
#include "io/model_sources.h"
#include "kernels/gemm.h"
#include "model/arch.h"
#include "model/kind.h"
#include "run/forward.h"
#include "run/seq2seq.h"
#include "run/vision.h"
#include "tokenizer/tokenizer.h"
#include "util/image.h"
#if __has_include("gl_attention.h")
#include "gl_attention.h"
#define GLASSBOX_HAVE_GL 1
#else
#define GLASSBOX_HAVE_GL 0
#endif

namespace cli {

args parse_args(int argc, char** argv) {
    args a;
    if (argc < 2) throw usage_error("missing command (" + command_names() + ")");
    a.command = argv[1];
    const command* cmd = find_command(a.command);
    if (!cmd) throw usage_error("unknown command '" + a.command + "' (" + command_names() + ")");
    // An option another command takes is refused by name ("run does not take --temperature") rather than
    // silently ignored.
    std::set<std::string> flag_names{"help"}, option_names, any_name;
    for (const option_doc& o : cmd->options) (o.arg.empty() ? flag_names : option_names).insert(o.name);
    for (const command& c : command_table())
        for (const option_doc& o : c.options) any_name.insert(o.name);
    for (int i = 2; i < argc; i++) {
        std::string s = argv[i];
        if (s == "-h") s = "--help";
        if (s.rfind("--", 0) != 0 && a.command == "download" && a.positional.empty()) { // download hf:ORG/NAME
            a.positional.push_back(s);
            continue;
        }
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
    if (gb::is_model_name(path)) { // hf:ORG/NAME, ollama:NAME:TAG: from the cache, or downloaded with progress
        gb::resolve_options ro;
        ro.progress = download_printer();
        path = gb::resolve_model(path, ro);
    }
    gb::model m = gb::load_model(path, lo);
    // the command is a feature of the kind table; a kind without it is refused with the table's line
    const command* c = find_command(a.command);
    if (!c || c->needs == NO_MODEL) throw std::logic_error("internal: " + a.command + " opens no model");
    const std::string why = gb::refusal(m, c->needs);
    if (!why.empty()) throw usage_error(why);
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

void refuse_unless(const gb::model& m, gb::feature f, const std::string& option) {
    const std::string why = gb::refusal(m, f);
    if (!why.empty()) throw usage_error(option + ": " + why);
}

namespace {
// Whether the command takes --name (its row lists it).
bool takes(const args& a, const std::string& name) {
    for (const option_doc& o : find_command(a.command)->options)
        if (o.name == name) return true;
    return false;
}
} // namespace

gb::kind_input model_input(const args& a, const gb::model& m) {
    const gb::kind_input in = gb::kind_info_of(m.config).input;
    const std::string arch = gb::arch_table(m.config.arch).name;
    std::string is; // what m is, and what to give instead
    if (in == gb::INPUT_TEXT) is = " is a text model (" + arch + "); give --prompt TEXT";
    else if (in == gb::INPUT_IMAGE) is = " is an image classifier (" + arch + "); give --image FILE";
    else is = " is an encoder–decoder (" + arch + "); give --source TEXT" +
              (takes(a, "target-text") ? " (and --target-text TEXT)" : "");
    const std::pair<const char*, gb::kind_input> owners[] = {{"prompt", gb::INPUT_TEXT},
                                                             {"image", gb::INPUT_IMAGE},
                                                             {"source", gb::INPUT_SOURCE_TARGET},
                                                             {"target-text", gb::INPUT_SOURCE_TARGET}};
    for (const auto& [option, input] : owners)
        if (input != in && a.has(option)) throw usage_error(std::string("--") + option + ": " + m.path + is);
    if (a.has("bos")) refuse_unless(m, gb::FEATURE_BOS, "--bos");
    return in;
}

// --ablate LIST [--layers LIST] [--heads L.H,...] [--experts L.E,...], checked against the model
gb::ablation parse_ablation(const args& a, const gb::model& m) {
    if (a.has("experts")) refuse_unless(m, gb::FEATURE_EXPERTS, "--experts");
    gb::ablation ab = gb::parse_ablation(a.get("ablate"), a.get("layers"), a.get("heads"), a.get("experts"));
    if (a.has("knockout")) {
        refuse_unless(m, gb::FEATURE_KNOCKOUT, "--knockout");
        ab.knockouts = gb::parse_knockouts(a.get("knockout"));
        if (ab.knockouts.empty()) throw usage_error("--knockout: no knockout given (LAYER.HEAD:QUERY-KEY, ...)");
    }
    gb::check_ablation(ab, m); // (an encoder–decoder: a layer either stack has)
    return ab;
}

std::vector<std::string> check_knockouts(const gb::ablation& ab, const gb::model& m, int T) {
    const std::vector<std::string> notes = gb::check_knockouts(ab, m.config, T);
    for (const std::string& n : notes) std::fprintf(stderr, "note: %s\n", n.c_str());
    return notes;
}

nlohmann::json knockouts_json(const gb::ablation& ab, const std::vector<std::string>& notes) {
    nlohmann::json list = nlohmann::json::array();
    auto opt = [](int v) { return v < 0 ? nlohmann::json() : nlohmann::json(v); };
    for (const gb::knockout& k : ab.knockouts)
        list.push_back({{"layer", k.layer}, {"head", opt(k.head)}, {"query", opt(k.query)}, {"key", opt(k.key)},
                        {"text", k.describe()}});
    return {{"knockouts", list}, {"knockout_notes", notes}};
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

void parse_coder_kind(const args& a, gb::sae_train_options& o, int default_k) {
    const int given = (int)a.has("k") + (int)a.has("l1") + (int)a.has("l0");
    if (given > 1 || (given == 0 && default_k == 0))
        throw usage_error("give one of --k K (TopK), --l1 C (ReLU + L1) and --l0 C (JumpReLU + L0)");
    if ((a.has("bandwidth") || a.has("threshold")) && !a.has("l0"))
        throw usage_error("--bandwidth and --threshold are JumpReLU's: give --l0 C with them");
    if (a.has("l1")) {
        o.l1 = (float)parse_float(a.get("l1"), "--l1", 0, 1e6);
    } else if (a.has("l0")) {
        o.jumprelu = true;
        o.l0 = (float)parse_float(a.get("l0"), "--l0", 0, 1e6);
        auto or_auto = [&](const char* name) { // "auto" (0): from the data's spread (sae_train_options)
            const std::string v = a.get(name, "auto");
            return v == "auto" ? 0.0f : (float)parse_float(v, std::string("--") + name, 1e-6, 1e6);
        };
        o.bandwidth = or_auto("bandwidth");
        o.threshold = or_auto("threshold");
    } else {
        o.k = (int)parse_int(a.get("k", std::to_string(default_k)), "--k", 1, o.d_sae);
    }
}

// --backend cpu|gl: the attention function to use (empty = CPU); falls back with a notice.
gb::attention_fn choose_backend(const args& a, std::string* renderer) {
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

// --NAME TEXT (exactly one token) or --NAME-id N; -1 when neither is given and it is optional.
int token_arg(const args& a, const gb::model& m, const std::string& name, bool required) {
    if (a.has(name) && a.has(name + "-id")) throw usage_error("give --" + name + " or --" + name + "-id, not both");
    if (a.has(name + "-id")) return (int)parse_int(a.get(name + "-id"), "--" + name + "-id", 0, m.config.vocab_size - 1);
    if (a.has(name)) return gb::single_token_id(m.tok, a.get(name), "--" + name);
    if (required) throw usage_error("missing --" + name + " TEXT (one token) or --" + name + "-id N");
    return -1;
}

void write_outputs(const args& a, const nlohmann::json& j, const std::function<void(const std::string&)>& npy) {
    if (a.has("json")) gb::write_json(a.get("json"), j);
    if (a.has("npy-dir")) npy(a.get("npy-dir"));
}

} // namespace cli
