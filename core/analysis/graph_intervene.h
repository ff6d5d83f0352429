// Interventions on transcoder features in the replacement model (docs/graphs.md "Interventions"): the model runs
// with every MLP output replaced by its transcoders' reconstruction of the run's own MLP input plus the error the
// unedited run left there (a constant), so that without edits the run is the model's own; the edited features are
// held at their values and every other feature is recomputed from its input, so an edit reaches later features
// through the paths the graph shows. With frozen attention the unedited run's patterns are written over the new ones
// (norm scales are recomputed in both cases).
#pragma once
#include <string>
#include <vector>

#include "analysis/replacement.h"
#include "io/transcoders.h"
#include "model/model.h"

namespace gb {

// Feature `index` of `layer` held at value at position pos (-1: every position at or after the first node
// position). An ablation is value 0.
struct graph_edit {
    int layer = 0, pos = -1, index = 0;
    float value = 0;
};

// "L:P:I=V" items (set; P may be * for every position), "L:P:I" items (ablate, value 0) into edits, checked
// against t and T; throws gb::error naming `what` and the bad item.
void parse_graph_edits(std::vector<graph_edit>& edits, const std::string& list, bool with_value, const std::string& what,
                       const transcoder_set& t, int T);

// The replacement model's logits at the last position [V] on r's prompt with edits. Throws gb::error for an edit
// at a position before r.first_pos (a BOS carries no feature). acts (may be null) gets every layer's feature
// activations in that run, [L][T][d_tc], the edited ones at their values (the app redraws the graph's nodes with
// them).
std::vector<float> intervene_logits(const model& m, const transcoder_set& t, const replacement& r,
                                    const std::vector<graph_edit>& edits, bool freeze_attention,
                                    std::vector<float>* acts = nullptr);

} // namespace gb
