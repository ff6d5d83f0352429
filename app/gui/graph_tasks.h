// The Graph tab's work beside its analysis (graph_tasks.cpp), on a thread of its own so that the UI never waits:
// a hovered feature's top contexts and logit effects, a hovered edge's head loadings, reading and writing graph
// files. Each job runs once per key and its answer stays (a hover that comes back finds it done).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/features.h"
#include "graph_analysis.h"

namespace gbui {

struct graph_job {
    bool done = false;
    std::shared_ptr<const void> result; // the job's answer (its type is the caller's), null on error
    std::string error;                  // one line
};

// The job of key: started with fn the first time (newest first: the hover of now before older ones), then its
// state. fn runs on the tab's thread and throws gb::error (or std::exception) for its error line.
graph_job graph_job_at(const std::string& key, std::function<std::shared_ptr<const void>()> fn);
// Forgets a finished job (a file to read again).
void graph_job_forget(const std::string& key);
// Nothing queued or running (the scripts' graph-wait).
bool graph_jobs_idle();

// A feature's dashboard: its top contexts in the corpus and the tokens its decoder promotes and suppresses.
struct graph_dashboard {
    std::vector<std::pair<float, std::string>> contexts; // activation, the text with the token in [[ ]]
    std::vector<gb::token_effect> promotes, suppresses;
    std::string corpus;                                  // the file the contexts come from
};
// The dashboard job of feature `index` of `layer` of go's set over the corpus file (the Features tab's default:
// the default model's README).
graph_job dashboard_job(const graph_output& go, int layer, int index, const std::string& corpus);

// The head loadings job of go's edge (target, source) (indices in go's graph): [L][H + 1] as core's
// edge_head_loadings gives them.
graph_job loadings_job(const std::shared_ptr<const graph_output>& go, int target, int source);

} // namespace gbui
