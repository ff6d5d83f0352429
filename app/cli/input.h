// What a command's options ask the model to read, as its kind reads it (core/model/kind.h), made into a session
// request (core/run/session.h): every command that runs a model on its input goes through here and the session,
// whatever the kind.
#pragma once
#include <string>
#include <vector>

#include "args.h"
#include "run/session.h"

namespace cli {

// The input: --prompt TEXT [--bos] (key names another prompt option, e.g. corrupt), --image FILE (its pixels; the
// line saying how it was cut is printed), or --source TEXT [--target-text TEXT] [--max-new-tokens N]. Another
// kind's input option is a usage error naming it (model_input). The rest of the request is left at its defaults:
// the caller sets the ablation, what to keep and the budget (with_backend, with_budget below help).
gb::session_request read_input(const args& a, const gb::model& m, const std::string& key = "prompt");
// --backend and --capture-budget MB (default 512) into rq
void with_backend(gb::session_request& rq, const args& a);
void with_budget(gb::session_request& rq, const args& a);
// One request on a fresh session: the records and the prediction. rq.baseline false unless the caller wants
// the run without the interventions too.
gb::session_result run_once(const gb::model& m, const gb::session_request& rq);
// What the analyses read: patterns, z, MLP outputs and the residual stream.
void keep_for_analyses(gb::session_request& rq);

} // namespace cli
