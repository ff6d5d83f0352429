// The app's Graph tab on the default model and its shipped transcoder set (docs/graphs.md "In the app"), driven as a
// user drives it (hover, click and right-click on the nodes and links it names, typing into its boxes) and read with
// the graph-print script command: a feature ablated from its right-click menu against `glassbox-cli intervene`, at its
// position and at every one; a right-click on a token node (one error, nothing edited); pins grouped into a supernode,
// saved as Neuronpedia JSON, exported as SVG and opened again against `glassbox-cli graph --open`; a broken file and a
// graph of another model (one error, the graph kept); an edge's head loadings in its tooltip summing to the edge; a
// feature's top contexts and logit effect against its decoder row read from the set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "app_script.h"
#include "io/loader.h"
#include "io/transcoders.h"
#include "model/quant.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

const std::string graph_prompt = "The Eiffel Tower is in the city of";

// The graph-print line of a run's output (the last one when several)
std::vector<nlohmann::json> graph_lines(const std::vector<nlohmann::json>& st) {
    std::vector<nlohmann::json> out;
    for (const nlohmann::json& j : st)
        if (j.contains("graph_tab")) out.push_back(j["graph_tab"]);
    return out;
}

// The tests' folder, made once per process (test_temp_dir empties it at every call)
const std::string& work_dir() {
    static const std::string dir = test_temp_dir("gui_graph_tab");
    return dir;
}

// The CLI's Neuronpedia JSON of the prompt (written once per test binary)
const nlohmann::json& cli_graph() {
    static const nlohmann::json j = [] {
        const std::string path = work_dir() + "/cli.json";
        const command_result c = run_cli("graph --prompt " + sq(graph_prompt) + " --neuronpedia " + path);
        EXPECT_EQ(c.code, 0) << c.err;
        return nlohmann::json::parse(read_file(path));
    }();
    return j;
}

// The id of the strongest link of the CLI's graph from a feature into the target logit: its (target, source)
std::pair<std::string, std::string> strongest_into_logit(const nlohmann::json& g) {
    std::string logit;
    for (const auto& n : g["nodes"])
        if (n["is_target_logit"].get<bool>()) logit = n["node_id"];
    std::set<std::string> features;
    for (const auto& n : g["nodes"])
        if (n["feature_type"] == "cross layer transcoder") features.insert(n["node_id"].get<std::string>());
    double best = 0;
    std::pair<std::string, std::string> out;
    for (const auto& l : g["links"])
        if (l["target"] == logit && features.count(l["source"].get<std::string>()) && std::fabs(l["weight"].get<double>()) > best)
            best = std::fabs(l["weight"].get<double>()), out = {logit, l["source"].get<std::string>()};
    return out;
}

} // namespace

TEST(GuiGraphTab, AblatingAFeatureFromItsMenuIsTheClisIntervention) {
    ASSERT_TRUE(have_app());
    const std::string feature = strongest_into_logit(cli_graph()).second; // "3_438_7": layer, index, position
    ASSERT_FALSE(feature.empty());
    const size_t u1 = feature.find('_'), u2 = feature.find('_', u1 + 1);
    const std::string layer = feature.substr(0, u1), index = feature.substr(u1 + 1, u2 - u1 - 1), pos = feature.substr(u2 + 1);
    const std::string dir = work_dir();
    const command_result c = run_cli("intervene --prompt " + sq(graph_prompt) + " --ablate " + layer + ":" + pos + ":" + index +
                                     " --top-k 10 --json " + dir + "/iv.json");
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json want = nlohmann::json::parse(read_file(dir + "/iv.json"));
    std::string token_node; // a token node: its right-click is an error
    for (const auto& n : cli_graph()["nodes"])
        if (n["feature_type"] == "embedding" && n["ctx_idx"] == 1) token_node = n["node_id"];
    int rc = -1;
    auto st = run_script("--timeout 600 --prompt " + sq(graph_prompt),
                         "tab graph\ngraph-wait\nrclick graph node " + token_node + "\nframes 3\ngraph-print\n"
                         "rclick graph node " + feature + "\nframes 3\nclick graph ablate\ngraph-wait\nframes 3\n"
                         "hover graph node " + feature + "\nframes 3\ngraph-print\n",
                         &rc);
    ASSERT_EQ(rc, 0);
    const std::vector<nlohmann::json> g = graph_lines(st);
    ASSERT_EQ(g.size(), 2u);
    const std::string why = g[0]["error"];
    EXPECT_NE(why.find("no feature"), std::string::npos) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos);
    EXPECT_TRUE(g[0]["edits"].empty());
    EXPECT_EQ(g[0]["run"]["nodes"], g[1]["run"]["nodes"]); // the graph stayed
    ASSERT_EQ(g[1]["edits"].size(), 1u);
    EXPECT_EQ(g[1]["edits"][0]["value"], 0.0);
    const nlohmann::json& after = g[1]["run"]["top_after"];
    ASSERT_EQ(after.size(), want["after"].size());
    for (size_t i = 0; i < after.size(); i++) { // the same tokens in the same order, the same probabilities
        EXPECT_EQ(after[i]["id"], want["after"][i]["id"]) << i;
        EXPECT_NEAR(after[i]["after"].get<double>(), want["after"][i]["prob"].get<double>(), 1e-5) << i;
        EXPECT_NEAR(after[i]["before"].get<double>(), want["after"][i]["prob_before"].get<double>(), 1e-5) << i;
    }
    // the answer moved, and the ablated node shows it is off
    EXPECT_GT(std::fabs(want["before"][0]["prob_after"].get<double>() - want["before"][0]["prob"].get<double>()), 1e-3);
    EXPECT_EQ(g[1]["hovered"]["id"], feature);
    EXPECT_EQ(g[1]["hovered"]["act_after"], 0.0);
    EXPECT_GT(g[1]["hovered"]["activation"].get<double>(), 0.0);
}

TEST(GuiGraphTab, AblatingAFeatureAtEveryPositionIsTheClisStar) {
    ASSERT_TRUE(have_app());
    const std::string feature = strongest_into_logit(cli_graph()).second;
    const size_t u1 = feature.find('_'), u2 = feature.find('_', u1 + 1);
    const std::string layer = feature.substr(0, u1), index = feature.substr(u1 + 1, u2 - u1 - 1);
    const command_result c = run_cli("intervene --prompt " + sq(graph_prompt) + " --ablate " + layer + ":*:" + index +
                                     " --top-k 10 --json " + work_dir() + "/iv_star.json");
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json want = nlohmann::json::parse(read_file(work_dir() + "/iv_star.json"));
    int rc = -1;
    auto st = run_script("--timeout 600 --prompt " + sq(graph_prompt), "tab graph\ngraph-wait\nrclick graph node " + feature +
                                                       "\nframes 3\nclick graph ablate everywhere\ngraph-wait\ngraph-print\n", &rc);
    ASSERT_EQ(rc, 0);
    const std::vector<nlohmann::json> g = graph_lines(st);
    ASSERT_EQ(g.size(), 1u);
    ASSERT_EQ(g[0]["edits"].size(), 1u);
    EXPECT_EQ(g[0]["edits"][0]["pos"], -1);
    const nlohmann::json& after = g[0]["run"]["top_after"];
    ASSERT_EQ(after.size(), want["after"].size());
    for (size_t i = 0; i < after.size(); i++) {
        EXPECT_EQ(after[i]["id"], want["after"][i]["id"]) << i;
        EXPECT_NEAR(after[i]["after"].get<double>(), want["after"][i]["prob"].get<double>(), 1e-5) << i;
    }
}

TEST(GuiGraphTab, PinsGroupIntoASupernodeThatSavesAndOpensWithTheGraph) {
    ASSERT_TRUE(have_app());
    const std::string dir = work_dir(), saved = dir + "/saved.json";
    std::filesystem::remove(saved);
    const auto [logit, a] = strongest_into_logit(cli_graph());
    std::string b; // another kept feature at the same position
    for (const auto& n : cli_graph()["nodes"])
        if (n["feature_type"] == "cross layer transcoder" && n["node_id"] != a && b.empty()) b = n["node_id"];
    int rc = -1;
    auto st = run_script("--timeout 600 --prompt " + sq(graph_prompt),
                         "tab graph\ngraph-wait\nclick graph node " + a + "\nclick graph node " + b + "\nframes 2\ngraph-print\n"
                         "click graph group name\ntype city\nclick graph group\nframes 2\ngraph-print\n"
                         "click graph file\ntype " + saved + "\nclick graph save\ngraph-wait\ngraph-print\n"
                         "click graph svg\ngraph-wait\ngraph-print\nclick graph open\ngraph-wait\nframes 2\ngraph-print\n",
                         &rc);
    ASSERT_EQ(rc, 0);
    const std::vector<nlohmann::json> g = graph_lines(st);
    ASSERT_EQ(g.size(), 5u);
    EXPECT_EQ(g[0]["pinned"], nlohmann::json({a, b}));
    ASSERT_EQ(g[1]["supernodes"].size(), 1u);
    EXPECT_EQ(g[1]["supernodes"][0]["name"], "city");
    EXPECT_EQ(g[1]["supernodes"][0]["members"], nlohmann::json({a, b}));
    EXPECT_TRUE(g[1]["pinned"].empty());
    EXPECT_NE(g[2]["note"].get<std::string>().find("saved"), std::string::npos) << g[2].dump();
    // the saved file is the CLI's graph (with the supernode in qParams), and opening it shows all of it
    const command_result c = run_cli("graph --open " + saved + " --json " + dir + "/open.json");
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json opened = nlohmann::json::parse(read_file(dir + "/open.json"));
    EXPECT_EQ(opened["n_nodes"], cli_graph()["nodes"].size());
    EXPECT_EQ(opened["n_links"], cli_graph()["links"].size());
    const nlohmann::json file = nlohmann::json::parse(read_file(saved));
    EXPECT_EQ(file["qParams"]["supernodes"], nlohmann::json::array({nlohmann::json({"city", a, b})}));
    // the picture as SVG beside it: a titled node per node of the graph, the supernode's name
    EXPECT_NE(g[3]["note"].get<std::string>().find("saved.svg"), std::string::npos) << g[3].dump();
    const std::string svg = read_file(dir + "/saved.svg");
    size_t titled = 0;
    for (size_t at = 0; (at = svg.find("<g><title>", at)) != std::string::npos; at++) titled++;
    EXPECT_EQ(titled, cli_graph()["nodes"].size());
    EXPECT_NE(svg.find(">city</text>"), std::string::npos);
    ASSERT_TRUE(g[4].contains("opened")) << g[4].dump();
    EXPECT_EQ(g[4]["opened"]["nodes"], opened["n_nodes"]);
    EXPECT_EQ(g[4]["opened"]["links"], opened["n_links"]);
    EXPECT_EQ(g[4]["opened"]["tokens"].size(), 8u);
    EXPECT_EQ(g[4]["supernodes"], g[1]["supernodes"]); // the file's qParams come back
    EXPECT_EQ(g[4]["error"], "");
}

TEST(GuiGraphTab, ABrokenFileOrAnotherModelsGraphIsOneErrorAndTheGraphStays) {
    ASSERT_TRUE(have_app());
    const std::string dir = work_dir();
    { std::ofstream(dir + "/broken.json") << "{\"metadata\": {\"prompt_tokens\": [\"a\""; }
    nlohmann::json other = cli_graph(); // a feature at a layer this model does not have
    for (auto& n : other["nodes"])
        if (n["feature_type"] == "cross layer transcoder") {
            const std::string id = n["node_id"], moved = "9" + id.substr(id.find('_'));
            n["node_id"] = moved, n["layer"] = "9";
            for (auto& l : other["links"]) {
                if (l["source"] == id) l["source"] = moved;
                if (l["target"] == id) l["target"] = moved;
            }
            break;
        }
    { std::ofstream(dir + "/other.json") << other.dump(); }
    for (const std::string file : {"broken.json", "other.json"}) {
        int rc = -1;
        auto st = run_script("--timeout 600 --prompt " + sq(graph_prompt), "tab graph\ngraph-wait\nclick graph file\ntype " + dir + "/" + file +
                                                           "\nclick graph open\ngraph-wait\nframes 2\ngraph-print\n", &rc);
        ASSERT_EQ(rc, 0);
        const std::vector<nlohmann::json> g = graph_lines(st);
        ASSERT_EQ(g.size(), 1u);
        const std::string why = g[0]["error"];
        EXPECT_NE(why.find(file == "broken.json" ? "not JSON" : "layer 9"), std::string::npos) << why;
        EXPECT_EQ(why.find('\n'), std::string::npos) << why;
        EXPECT_FALSE(g[0].contains("opened"));
        EXPECT_EQ(g[0]["run"]["nodes"], cli_graph()["nodes"].size()); // the run's graph is still shown
    }
}

TEST(GuiGraphTab, AnEdgesHeadLoadingsInItsTooltipSumToTheEdge) {
    ASSERT_TRUE(have_app());
    const auto [target, source] = strongest_into_logit(cli_graph());
    int rc = -1;
    auto st = run_script("--timeout 600 --prompt " + sq(graph_prompt), "tab graph\ngraph-wait\nhover graph link " + target + " " + source +
                                                       "\nframes 3\ngraph-wait\ngraph-print\n", &rc);
    ASSERT_EQ(rc, 0);
    const std::vector<nlohmann::json> g = graph_lines(st);
    ASSERT_EQ(g.size(), 1u);
    ASSERT_TRUE(g[0].contains("hovered_link")) << g[0].dump();
    // the link under the mouse (another may cross the one asked for at its midpoint): one of the CLI's, same weight
    const nlohmann::json& h = g[0]["hovered_link"];
    bool found = false;
    for (const auto& l : cli_graph()["links"])
        if (l["target"] == h["target"] && l["source"] == h["source"]) {
            found = true;
            EXPECT_NEAR(h["weight"].get<double>(), l["weight"].get<double>(), 1e-6);
        }
    EXPECT_TRUE(found) << h.dump();
    ASSERT_TRUE(h.contains("loadings")) << h.dump();
    const std::vector<double> ld = h["loadings"];
    const double w = h["weight"];
    const gb::model m = gb::load_model(gb::default_model_path());
    const int L = m.config.n_layer, H = m.config.n_head;
    ASSERT_EQ(ld.size(), (size_t)L * (H + 1));
    // every attention layer below the target's read has a row whose parts sum to the edge; the layers at and above
    // it are zero rows (a logit reads after the last layer: every layer has one)
    const bool logit = h["target"].get<std::string>().rfind(std::to_string(L + 1) + "_", 0) == 0;
    int rows = 0;
    for (int l = 0; l < L; l++) {
        double sum = 0, size = 0;
        for (int c = 0; c <= H; c++) sum += ld[(size_t)l * (H + 1) + c], size += std::fabs(ld[(size_t)l * (H + 1) + c]);
        if (size == 0 && !logit) continue;
        rows++;
        EXPECT_NEAR(sum, w, 1e-4 * std::max(1.0, std::fabs(w))) << "layer " << l;
    }
    EXPECT_GE(rows, 1);
}

TEST(GuiGraphTab, AFeaturesTooltipShowsItsTopContextsAndLogitEffect) {
    ASSERT_TRUE(have_app());
    const std::string feature = strongest_into_logit(cli_graph()).second;
    int rc = -1;
    auto st = run_script("--timeout 600 --prompt " + sq(graph_prompt), "tab graph\ngraph-wait\nhover graph node " + feature +
                                                       "\nframes 3\ngraph-wait\ngraph-print\n", &rc);
    ASSERT_EQ(rc, 0);
    const std::vector<nlohmann::json> g = graph_lines(st);
    ASSERT_EQ(g.size(), 1u);
    const nlohmann::json& h = g[0]["hovered"];
    ASSERT_TRUE(h.contains("promotes")) << h.dump();
    EXPECT_EQ(h["error"], "");
    ASSERT_FALSE(h["contexts"].empty()) << h.dump();
    for (size_t i = 0; i < h["contexts"].size(); i++) {
        EXPECT_NE(h["contexts"][i]["text"].get<std::string>().find("[["), std::string::npos);
        if (i > 0) {
            EXPECT_LE(h["contexts"][i]["act"].get<double>(), h["contexts"][i - 1]["act"].get<double>());
        }
    }
    // the top promoted token: the decoder row through the final norm's gain and the unembedding, computed here
    const gb::model m = gb::load_model(gb::default_model_path());
    const gb::transcoder_set t = gb::read_transcoders(gb::default_transcoders_path(m));
    const int layer = std::stoi(feature.substr(0, feature.find('_')));
    const int index = std::stoi(feature.substr(feature.find('_') + 1, feature.rfind('_') - feature.find('_') - 1));
    const int d = m.config.d_model;
    const float* dec = t.dec(layer, index, layer);
    const gb::row_table& U = m.weights.unembedding();
    std::vector<float> row(d);
    int best = -1;
    double top = -1e30;
    for (int64_t v = 0; v < U.rows; v++) {
        gb::table_row(row.data(), U, v);
        double e = 0;
        for (int j = 0; j < d; j++) e += (double)dec[j] * (m.weights.normf_g.empty() ? 1.0f : m.weights.normf_g[j]) * row[j];
        if (e > top) top = e, best = (int)v;
    }
    EXPECT_EQ(h["promotes"][0]["id"], best);
    EXPECT_NEAR(h["promotes"][0]["effect"].get<double>(), top, 1e-3 * std::max(1.0, std::fabs(top)));
}
