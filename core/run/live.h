// Live recompute: the last run of a prompt is kept (keys and values of every layer, the record, and a baseline
// without interventions) and the next request recomputes only what its change reaches:
// - tokens changed from position p (typing, an edit): positions p.. at every layer; earlier rows of a causal
//   model do not change, so the record's rows before p and the cached keys and values are reused;
// - interventions changed (an ablation, a head, a patch) whose first effect is at layer l: layers l.. for every
//   position, from the residual stream kept at l; the record's earlier layers are shared, not copied;
// - the baseline (no interventions) is its own kept run: an intervention change never re-runs it.
// A run stops between layers when the request's `cancelled` says so; what it leaves is consistent and the next
// run recomputes what the stopped one may have half written.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "run/forward.h"

namespace gb {

struct live_request {
    std::vector<int> tokens;                 // [T] from position 0 (vision models: the positions, vision_tokens)
    std::vector<float> pixels;               // vision models: [C][S][S] the image (another image is a full run)
    // encoder–decoders' decoder: the encoder's output [S][d] that the cross-attention reads, for the run with the
    // interventions (source) and for the baseline (base_source: the encoder without them; empty = source). Not
    // owned: they must outlive the call. Another source is a full run of that variant.
    const std::vector<float>* source = nullptr;
    const std::vector<float>* base_source = nullptr;
    std::vector<std::string> source_pieces;  // [S] the source tokens' text, for the records (record::source_pieces)
    std::vector<intervention> interventions; // values are copied: the caller's may go after the call
    record_request keep;                     // what each record keeps; keep.budget_bytes covers the whole live
                                             // state (both records and the keys and values); 0 = no limit
    attention_fn attention;                  // empty = attention_cpu
    std::function<bool()> cancelled;         // asked before each layer
    bool all_logits = false;                 // logits at every position (an encoder always has them); a change
                                             // of tokens then recomputes every position
    bool baseline = true;                    // keep a run without the interventions too (false: a one-shot run
                                             // that needs no comparison; result::base is then the run itself)
};

// What a live run computed, for the app's status line, the benchmark and the tests.
struct live_report {
    int tokens = 0;            // T
    int from_token = 0;        // first position computed in the intervened run (T: none)
    int from_point = 0;        // first residual point computed there (0 embeddings, 2l+1 after attention of l,
                               // 2l+2 after the MLP of l; 2L+1: none)
    bool baseline_run = false; // the baseline was (partly) computed by this call
    bool reused = false;       // something was reused (false: a full run)
    std::string what;          // "1 of 256 tokens", "layers 11.. of 12", "nothing changed", "full run: ..."
    std::string memory_note;   // what the budget dropped, in the order it drops (empty: nothing)
    double ms = 0;
};

struct live_result {
    std::shared_ptr<const record> run;  // with the interventions
    std::shared_ptr<const record> base; // without them: the same record when there are none
    live_report report;
};

// One kept run: its keys and values, its record, and what it was run with.
struct live_variant {
    forward_state fs;                       // keys and values of positions 0..T-1 at every layer
    std::shared_ptr<const record> rec;      // the last finished record (tokens, kept points); null: none
    std::vector<intervention> iv;           // what rec was run with; SET and ADD values point into iv_values
    std::vector<std::vector<float>> iv_values;
    int iv_tokens = 0;                      // the tokens iv was copied for (a SET at every position: [T][slice])
    std::vector<float> pixels;              // vision models: the image rec was run on
    std::vector<float> source;              // encoder–decoders' decoder: the encoder output rec was run on
    // A stopped run may have half written the cache: positions >= stale_token (a token change) or layers from
    // residual point stale_point (an intervention change) must be recomputed. -1: nothing stale.
    int stale_token = -1, stale_point = -1;
};

struct live_state {
    live_variant clean;   // no interventions: the baseline, and the run itself when there are none
    live_variant changed; // with the request's interventions
};

// Brings st up to date with rq and hands out its records (shared, never written again). Throws gb::cancelled
// when rq.cancelled stopped it, gb::error for bad input (st keeps its previous runs either way).
void live_run(live_result& out, live_state& st, const model& m, const live_request& rq);

// The residual point a run must restart from for intervention v to take effect (-1: from the embeddings).
int intervention_start_point(const intervention& v, int n_layer);

} // namespace gb
