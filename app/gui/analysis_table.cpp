// The analysis table's rows (analysis_table.h), in the order of analysis_kind.
#include "analysis_table.h"

#include "analysis_worker.h"
#include "circuit_analysis.h"
#include "compare_analysis.h"
#include "feature_analysis.h"
#include "graph_analysis.h"
#include "patching_inputs.h"
#include "sampling_inputs.h"
#include "steer_analysis.h"
#include "tab_inputs.h"
#include "trace_analysis.h"
#include "ui.h"

namespace gbui {

using gb::FEATURE_RUN;

// What a click on a Next-token row picks while the tab is open
static int* lens_pick(app_state& s) { return &inputs_of<lens_inputs>(s, TAB_LENS).target; }
static int* attribution_pick(app_state& s) { return &inputs_of<attribution_inputs>(s, TAB_ATTRIBUTION).target; }
static int* patching_pick(app_state& s) { return &inputs_of<patching_inputs>(s, TAB_PATCHING).target; }

static const tab_entry tabs[TAB_COUNT] = {
    // tab, name, label, feature, panel, pick, make_inputs, inputs, picks, model_only, applied (its line, save, read)
    {TAB_HEAD, "head", "Head", gb::FEATURE_HEAD_SCORES, panel_head, "", nullptr, nullptr, nullptr},
    {TAB_LENS, "lens", "Logit lens", gb::FEATURE_LENS, panel_lens, "the logit lens follows that token", make_inputs<lens_inputs>, &typeid(lens_inputs), lens_pick},
    {TAB_ATTRIBUTION, "attribution", "Attribution", gb::FEATURE_ATTRIBUTION, panel_attribution, "the attribution's target", make_inputs<attribution_inputs>, &typeid(attribution_inputs), attribution_pick},
    {TAB_PATCHING, "patching", "Patching", gb::FEATURE_PATCHING, panel_patching, "the patching target", make_inputs<patching_inputs>, &typeid(patching_inputs), patching_pick},
    {TAB_LEARN, "learn", "Learn", gb::FEATURE_LEARN, panel_learn, "", make_inputs<learn_inputs>, &typeid(learn_inputs), nullptr},
    {TAB_SAMPLING, "sampling", "Sampling", gb::FEATURE_TEMPERATURES, panel_sampling, "", make_inputs<sampling_inputs>, &typeid(sampling_inputs), nullptr},
    {TAB_EXPERTS, "experts", "Experts", gb::FEATURE_EXPERTS, panel_experts, "", nullptr, nullptr, nullptr, true},
    {TAB_IMAGE, "image", "Image", gb::FEATURE_IMAGE, panel_image, "", make_inputs<image_inputs>, &typeid(image_inputs), nullptr, true},
    {TAB_CROSS, "cross", "Cross-attention", gb::FEATURE_CROSS, panel_cross, "", make_inputs<cross_inputs>, &typeid(cross_inputs), nullptr, true},
    // of patching's prompts: a click picks patching's target
    {(analysis_tab)(TAB_CROSS + 1), "circuit", "Circuit", gb::FEATURE_PATCHING, panel_circuit, "the circuit's target",
     make_inputs<circuit_inputs>, &typeid(circuit_inputs), patching_pick, true},
    {(analysis_tab)(TAB_CROSS + 2), "steer", "Steer", gb::FEATURE_STEERING, panel_steer, "", make_inputs<steer_inputs>,
     &typeid(steer_inputs), nullptr, false, steer_applied, save_steer_applied, read_steer_applied},
    {TAB_FEATURES, "features", "Features", gb::FEATURE_SAE, panel_features, "", make_inputs<features_inputs>, &typeid(features_inputs), nullptr},
    {TAB_GRAPH, "graph", "Graph", gb::FEATURE_SAE, panel_graph, "", make_inputs<graph_inputs>, &typeid(graph_inputs), nullptr}, // transcoders: SAE's kinds
};

const tab_entry& tab_info(analysis_tab t) {
    const tab_entry& e = tabs[t >= 0 && t < TAB_COUNT ? t : TAB_HEAD];
    if (e.tab != (t >= 0 && t < TAB_COUNT ? t : TAB_HEAD)) throw gb::error("tab table: no row for tab " + std::to_string(t));
    return e;
}

static const analysis_entry table[ANALYSIS_COUNT] = {
    // kind, name, tab, lane, needs, compute, request, output, write, schedule, print (then, where a row has them,
    // its own state, its parts of other panels and its script commands)
    {ANALYSIS_LENS, "lens", TAB_LENS, 0, {gb::FEATURE_LENS, FEATURE_RUN},
     compute_lens, &typeid(lens_request), &typeid(lens_output), export_lens, nullptr, nullptr},
    // direct logit attribution or the token saliency, whichever the kind offers (tab_available decides)
    {ANALYSIS_ATTRIBUTION, "attribution", TAB_ATTRIBUTION, 0, {FEATURE_RUN, FEATURE_RUN}, compute_attribution,
     &typeid(attribution_request), &typeid(attribution_output), export_attribution, nullptr, nullptr},
    // the repeated-random-tokens test: the grid's scores (no tab of its own)
    {ANALYSIS_INDUCTION, "induction", TAB_HEAD, 0, {gb::FEATURE_INDUCTION_TEST, FEATURE_RUN},
     compute_induction, &typeid(induction_request), &typeid(induction_output), export_induction, nullptr, nullptr,
     make_inputs<induction_inputs>, &typeid(induction_inputs)},
    {ANALYSIS_PATCHING, "patching", TAB_PATCHING, 1, {gb::FEATURE_PATCHING, FEATURE_RUN},
     compute_patching, &typeid(patch_request), &typeid(patch_output), export_patching, nullptr, nullptr},
    {ANALYSIS_LEARN, "learn", TAB_LEARN, 0, {gb::FEATURE_LEARN, FEATURE_RUN},
     compute_learn, &typeid(learn_request), &typeid(learn_output), nullptr, nullptr, nullptr},
    // Break it: the Learn tab's rows and the demo's
    {ANALYSIS_BREAK, "break", TAB_LEARN, 1, {gb::FEATURE_BREAK_IT, FEATURE_RUN},
     compute_break, &typeid(break_request), &typeid(break_output), export_break, nullptr, nullptr},
    {ANALYSIS_SAMPLING, "sampling", TAB_SAMPLING, 0, {gb::FEATURE_TEMPERATURES, FEATURE_RUN},
     compute_sampling, &typeid(sampling_request), &typeid(sampling_output), export_sampling, nullptr, nullptr},
    // of patching's prompts, target and contrast: a forward per node and edge set, and the gradients
    {(analysis_kind)(ANALYSIS_SAMPLING + 1), "circuit", (analysis_tab)(TAB_CROSS + 1), 1,
     {gb::FEATURE_PATCHING, gb::FEATURE_GRADIENTS}, compute_circuit, &typeid(patch_request), &typeid(circuit_output),
     nullptr, schedule_circuit, print_circuit},
    // causal tracing: the Patching tab's other mode
    {(analysis_kind)(ANALYSIS_SAMPLING + 2), "trace", TAB_PATCHING, 1, {gb::FEATURE_TRACE, FEATURE_RUN},
     compute_trace, &typeid(trace_request), &typeid(trace_output), nullptr, schedule_trace, print_trace},
    // the Steer tab: the vector built, the continuations side by side, the sweep over scale x layer
    {(analysis_kind)(ANALYSIS_SAMPLING + 3), "steer_build", (analysis_tab)(TAB_CROSS + 2), 0,
     {gb::FEATURE_STEERING, FEATURE_RUN}, compute_steer_build, &typeid(steer_request), &typeid(steer_output), nullptr,
     schedule_steer_build, print_steer_build},
    {(analysis_kind)(ANALYSIS_SAMPLING + 4), "steer_compare", (analysis_tab)(TAB_CROSS + 2), 0,
     {gb::FEATURE_STEERING, FEATURE_RUN}, compute_steer_compare, &typeid(steer_request), &typeid(steer_output), nullptr,
     schedule_steer_compare, print_steer_compare},
    {(analysis_kind)(ANALYSIS_SAMPLING + 5), "steer_sweep", (analysis_tab)(TAB_CROSS + 2), 1,
     {gb::FEATURE_STEERING, FEATURE_RUN}, compute_steer_sweep, &typeid(steer_request), &typeid(steer_output), nullptr,
     schedule_steer_sweep, print_steer_sweep},
    // the Features tab: the prompt's features, a corpus index, training an SAE
    {ANALYSIS_FEATURES, "features", TAB_FEATURES, 0, {gb::FEATURE_SAE, FEATURE_RUN},
     compute_features, &typeid(features_request), &typeid(features_output), nullptr, nullptr, nullptr},
    {ANALYSIS_FEATURE_INDEX, "feature_index", TAB_FEATURES, 1, {gb::FEATURE_SAE, FEATURE_RUN},
     compute_features, &typeid(features_request), &typeid(features_output), nullptr, nullptr, nullptr},
    {ANALYSIS_SAE_TRAIN, "sae_train", TAB_FEATURES, 1, {gb::FEATURE_SAE, FEATURE_RUN},
     compute_features, &typeid(features_request), &typeid(features_output), nullptr, nullptr, nullptr},
    // the Graph tab: the attribution graph over a transcoder set (long: a backward per batch of nodes)
    {ANALYSIS_GRAPH, "graph", TAB_GRAPH, 1, {gb::FEATURE_SAE, FEATURE_RUN}, compute_graph, &typeid(graph_request),
     &typeid(graph_output), nullptr, nullptr, nullptr},
    // the Model panel's Export: the shown run's capture and the analyses of it, as they were when it was pressed
    {ANALYSIS_EXPORT, "export", TAB_HEAD, 0, {FEATURE_RUN, FEATURE_RUN}, compute_export, &typeid(export_request),
     &typeid(export_output), nullptr, schedule_export, nullptr, make_inputs<export_inputs>, &typeid(export_inputs)},
    // the Steer tab's Open and Save of a vector file
    {(analysis_kind)(ANALYSIS_EXPORT + 1), "steer_open", (analysis_tab)(TAB_CROSS + 2), 0,
     {gb::FEATURE_STEERING, FEATURE_RUN}, compute_steer_open, &typeid(steer_request), &typeid(steer_output), nullptr,
     schedule_steer_open, nullptr},
    {(analysis_kind)(ANALYSIS_EXPORT + 2), "steer_save", (analysis_tab)(TAB_CROSS + 2), 0,
     {gb::FEATURE_STEERING, FEATURE_RUN}, compute_steer_save, &typeid(steer_request), &typeid(steer_output), nullptr,
     schedule_steer_save, nullptr},
    // model B and the comparison with it: a lane of their own (a load first: the comparison waits for B); the
    // comparison keeps model B and the views, draws in the Model, grid, residual and lens panels, and has the
    // script's open-b and compare-view
    {(analysis_kind)(ANALYSIS_EXPORT + 3), "model_b", TAB_HEAD, 2, {FEATURE_RUN, FEATURE_RUN}, compute_model_b,
     &typeid(compare_request), &typeid(model_b_output), nullptr, schedule_model_b, nullptr},
    {(analysis_kind)(ANALYSIS_EXPORT + 4), "compare", TAB_HEAD, 2, {FEATURE_RUN, FEATURE_RUN}, compute_compare,
     &typeid(compare_request), &typeid(compare_output), nullptr, schedule_compare, print_compare,
     make_inputs<compare_state>, &typeid(compare_state), compare_parts, compare_script},
};

app_state::app_state() {
    for (const tab_entry& e : tabs)
        if (e.make_inputs) inputs[e.tab] = e.make_inputs();
    for (const analysis_entry& e : table)
        if (e.make_state) own[e.kind] = e.make_state();
}

const analysis_entry& analysis_info(analysis_kind k) {
    if (k < 0 || k >= ANALYSIS_COUNT || table[k].kind != k) throw gb::error("analysis table: no row for kind " + std::to_string(k));
    return table[k];
}

const char* analysis_name(analysis_kind k) { return k >= 0 && k < ANALYSIS_COUNT ? table[k].name : "?"; }

analysis_kind analysis_named(const std::string& name) {
    for (const analysis_entry& e : table)
        if (name == e.name) return e.kind;
    return ANALYSIS_COUNT;
}

analysis_kind analysis_id(const char* name) {
    const analysis_kind k = analysis_named(name);
    if (k == ANALYSIS_COUNT) throw gb::error(std::string("analysis table: no row named ") + name);
    return k;
}

analysis_tab tab_id(const char* name) {
    for (const tab_entry& e : tabs)
        if (std::string(name) == e.name) return e.tab;
    throw gb::error(std::string("tab table: no tab named ") + name);
}

bool draw_parts(app_state& s, ui_context& ui, panel_part p) {
    for (const analysis_entry& e : table)
        if (e.draw_part && e.draw_part(s, ui, p)) return true;
    return false;
}

bool analysis_script_command(app_state& s, ui_context& ui, const std::string& cmd, const std::string& arg) {
    for (const analysis_entry& e : table)
        if (e.script && e.script(s, ui, cmd, arg)) return true;
    return false;
}

bool analysis_offered(analysis_kind k, const gb::model* m) {
    if (!m) return false;
    for (gb::feature f : analysis_info(k).needs)
        if (!gb::offers(m->config, f)) return false;
    return true;
}

} // namespace gbui
