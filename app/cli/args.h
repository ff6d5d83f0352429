// The argument parser and the helpers the commands share.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/features.h"
#include "io/hub_download.h"
#include "kernels/attention.h"
#include "model/kind.h"
#include "model/model.h"
#include "run/ablation.h"
#include "run/forward.h"
#include "run/session.h"
#include "run/steer.h"
#include "util/error.h"

namespace gb {
struct sae_train_options;
}

namespace cli {

// Bad usage is bad input: exit code 2, like gb::error.
struct usage_error : gb::error {
    using gb::error::error;
};

struct args {
    std::string command;
    std::map<std::string, std::string> opts; // --key value
    std::set<std::string> flags;             // --flag
    std::vector<std::string> positional;     // a bare argument (only download takes one: its model name)

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

// The coder an SAE or transcoder training learns: one of --k K (TopK), --l1 C (ReLU + L1) and --l0 C (JumpReLU,
// with --bandwidth and --threshold), into o (d_sae set first). default_k > 0: TopK with that k when none is given;
// 0: one must be given.
void parse_coder_kind(const args& a, gb::sae_train_options& o, int default_k);

// argv[1] is the command; every option must be one the command's documentation lists.
args parse_args(int argc, char** argv);

// s cut at sep, empty pieces dropped
std::vector<std::string> split(const std::string& s, char sep);
// s as an integer (a number) in [lo, hi]; else a usage_error naming what
long parse_int(const std::string& s, const std::string& what, long lo, long hi);
double parse_float(const std::string& s, const std::string& what, double lo, double hi);

// Download progress on stderr: on a terminal one bar a file redrawn in place (bytes, rate, ETA); otherwise a
// plain line as each file starts and ends.
gb::download_fn download_printer();

// --model (or the embedded default), --tokenizer, --matmul, --weights. A model whose kind does not offer the
// feature the command's row names is refused with the kind table's line (gb::refusal).
gb::model open_model(const args& a);
// An option that needs feature f of m's kind: a usage error "OPTION: <the kind table's line>" when m's kind
// does not offer it.
void refuse_unless(const gb::model& m, gb::feature f, const std::string& option);
// What m reads, as the kind table says: a prompt (INPUT_TEXT), a source and a target (INPUT_SOURCE_TARGET) or an
// image (INPUT_IMAGE). Another input's option (--prompt, --image, --source, --target-text), and --bos where the
// kind has no BOS, is a usage error naming it.
gb::kind_input model_input(const args& a, const gb::model& m);
// The prompt's ids; --bos on a model without a BOS token is an error rather than silently ignored.
std::vector<int> prompt_ids(const gb::model& m, const std::string& prompt, bool bos);
// --ablate LIST [--layers LIST] [--heads L.H,...] [--experts L.E,...], checked against the model
// (--experts on a kind without experts: refused with the kind table's line)
gb::ablation parse_ablation(const args& a, const gb::model& m);
// --knockout against a prompt of T tokens (gb::check_knockouts): throws for a query left no key; each knockout
// that changes nothing is said once on stderr ("note: ..."), and the notes are returned for the JSON.
std::vector<std::string> check_knockouts(const gb::ablation& ab, const gb::model& m, int T);
// {"knockouts": [{layer, head, query, key (null: every), text}], "knockout_notes": [...]}: merged into a JSON.
nlohmann::json knockouts_json(const gb::ablation& ab, const std::vector<std::string>& notes);

// Text safe to print on a terminal: control characters shown escaped ("\x07", "\u009b"); keep_newlines keeps
// \n and \t.
std::string terminal_safe(const std::string& s, bool keep_newlines);
// A token's text on one terminal line: newline as ↵, tab as →, other control characters escaped.
std::string visible(const std::string& s);
// A token's text in double quotes, on one line (visible()).
std::string quoted(const gb::model& m, int id);
// s padded with spaces to width columns, counting characters rather than bytes
std::string padded(const std::string& s, int width);

// --backend cpu|gl: the attention function to use (empty = CPU); falls back with a notice.
gb::attention_fn choose_backend(const args& a, std::string* renderer = nullptr);

// --NAME TEXT (exactly one token) or --NAME-id N; -1 when neither is given and it is optional.
int token_arg(const args& a, const gb::model& m, const std::string& name, bool required);
// --json FILE and --npy-dir DIR, when given
void write_outputs(const args& a, const nlohmann::json& j, const std::function<void(const std::string&)>& npy);

// ---- steer_args.cpp: the steering options several commands share ----
// --steer FILE [--steer-scale A (default 1)] [--steer-layers 3,4] [--steer-from I], checked against m (none without
// --steer; a --steer-* option without it is a usage error). A one-direction .npy takes its layer from --steer-layers.
gb::steering parse_steering(const args& a, const gb::model& m);
// {"file", "scale", "layers", "from", "d_model", "model_hint"} echoing what was applied (null: none)
nlohmann::json steering_json(const gb::steering& s, const std::string& file);
// The prompts of a file, one a line (empty lines skipped); an unreadable file or one without a prompt is an error
// naming it and `what` ("--positive").
std::vector<std::string> read_prompt_lines(const std::string& path, const std::string& what);
// A whole text file; an unreadable or empty one is an error naming it and `what`.
std::string read_text_file(const std::string& path, const std::string& what);

// ---- sae_args.cpp: the SAE options ----
// --sae DIR, or without it the SAE shipped with the default model when m is that model ("" otherwise).
std::string sae_path_arg(const args& a, const gb::model& m);
// --transcoders, or the set shipped with the default model when m is it; a usage error when neither.
std::string transcoders_arg(const args& a, const gb::model& m);
// That SAE against m (the kind must offer FEATURE_SAE; no --sae and no shipped SAE: the usage error "missing
// --sae"); the file's warnings are printed on stderr.
gb::bound_sae open_sae_arg(const args& a, const gb::model& m);
// run's --feature-ablate 12,40 --feature-clamp 7=3.5 --feature-steer 9=2.0 with --sae: the SET intervention they
// make, added to rq.interventions (its values in `values`, kept by the caller until the run), and their echo for
// the JSON (null without --sae).
nlohmann::json feature_edits_for_run(const args& a, const gb::model& m, gb::session_request& rq, std::vector<float>& values);

} // namespace cli
