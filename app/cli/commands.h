// The glassbox-cli commands: their documentation (the overview, each command's options and --help) and the
// functions that run them, one file each (cmd_<name>.cpp).
#pragma once
#include <string>
#include <vector>

#include "model/kind.h"

namespace cli {

struct args;

// The overview (glassbox-cli --help: every command of the table with its summary, and the shared options) and
// the exit codes every command shares.
std::string overview_text();
extern const char* exit_codes_text;

// One option of a command, as its --help lists it. arg is the value's placeholder; empty for a flag.
struct option_doc {
    std::string name, arg, help;
};

// A command that opens no model (make-random): its row needs no feature.
constexpr gb::feature NO_MODEL = gb::FEATURE_COUNT;

// One row of the command table: `glassbox-cli NAME` runs run(args), and NAME --help shows the rest. open_model
// refuses a model whose kind does not offer `needs`, with the kind table's line.
struct command {
    std::string name;
    int (*run)(const args&); // returns the exit code
    gb::feature needs;       // the feature of the kind table the command is; NO_MODEL when it opens none
    std::string summary;     // one line, lower case: "one forward pass: ..."
    std::vector<std::string> synopsis; // each after "glassbox-cli NAME "
    std::vector<option_doc> options;   // every option it takes, as its --help lists them
};

// The command table, in the order the overview lists the commands.
const std::vector<command>& command_table();
const command* find_command(const std::string& name); // nullptr when there is none
std::string command_names();                          // "run, generate, ..."
// `glassbox-cli NAME --help`: what the command does, its usage, every option it takes, the exit codes.
std::string command_help(const command& c);

// The commands; each returns the exit code.
int cmd_run(const args& a);
int cmd_generate(const args& a);
int cmd_tokenize(const args& a);
int cmd_lens(const args& a);
int cmd_compare(const args& a);
int cmd_quantize(const args& a);
int cmd_attribute(const args& a);
int cmd_heads(const args& a);
int cmd_patch(const args& a);
int cmd_grad(const args& a);
int cmd_atp(const args& a);
int cmd_circuit(const args& a);
int cmd_trace(const args& a);
int cmd_bench(const args& a);
int cmd_make_random(const args& a);
int cmd_info(const args& a);
int cmd_learn(const args& a);
int cmd_break_it(const args& a);
int cmd_selftest(const args& a);
int cmd_steer(const args& a);
int cmd_steer_sweep(const args& a);
int cmd_features(const args& a);
int cmd_feature(const args& a);
int cmd_train_sae(const args& a);
int cmd_train_transcoder(const args& a);
int cmd_models(const args& a);
int cmd_download(const args& a);
int cmd_graph(const args& a);
int cmd_intervene(const args& a);

} // namespace cli
