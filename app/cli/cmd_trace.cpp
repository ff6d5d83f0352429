// glassbox-cli trace: causal tracing, where restoring one clean activation brings back the answer that noise on
// the subject's embeddings took away.
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis_json.h"
#include "analysis/trace.h"
#include "model/model.h"
#include "run/record.h"
#include "tokenizer/tokenizer.h"

#include "args.h"
#include "commands.h"
#include "input.h"

namespace cli {

int cmd_trace(const args& a) {
    gb::model m = open_model(a);
    const std::vector<int> tokens = read_input(a, m).tokens;
    const int T = (int)tokens.size();
    gb::trace_options o;
    o.noise = parse_float(a.get("noise", "3"), "--noise", 0, 1e6);
    o.samples = (int)parse_int(a.get("samples", "10"), "--samples", 1, 100000);
    o.seed = (uint64_t)parse_int(a.get("seed", "0"), "--seed", 0, (long)1e15);
    o.attention = choose_backend(a);
    o.ab = parse_ablation(a, m);
    const std::vector<std::string> notes = check_knockouts(o.ab, m, T);
    int first = 0, end = 0;
    gb::subject_span(first, end, m.tok, tokens, a.need("subject"));
    const gb::trace_result r = gb::causal_trace(m, tokens, first, end, o);
    std::string subject;
    for (int t = first; t < end; t++) subject += (t > first ? " " : "") + quoted(m, tokens[t]);
    std::printf("subject: tokens %d..%d %s; noise %g x the embeddings' std %.4g = sigma %.4g, %d samples, seed %llu\n",
                first, end - 1, subject.c_str(), o.noise, r.embed_std, r.sigma, r.samples, (unsigned long long)r.seed);
    std::printf("p(%s) at the last position: clean %.4f, corrupted %.4f (%d restored runs in %.0f ms)\n",
                quoted(m, r.target).c_str(), r.clean_prob, r.corrupt_prob, r.runs, r.ms);
    // each kind of restore's best cell: where the answer comes back most
    auto best = [&](const std::vector<float>& v, const char* what, const std::vector<std::string>& labels) {
        size_t b = 0;
        for (size_t i = 1; i < v.size(); i++)
            if (v[i] > v[b]) b = i;
        const int row = (int)(b / T), t = (int)(b % T);
        std::printf("  %-5s best: %-9s at position %2d (%s) p = %.4f\n", what, labels[row].c_str(), t,
                    quoted(m, tokens[t]).c_str(), v[b]);
    };
    std::vector<std::string> layers;
    for (int l = 0; l < r.n_layer; l++) layers.push_back("L" + std::to_string(l));
    best(r.resid, "resid", gb::resid_labels(r.n_layer));
    best(r.mlp, "mlp", layers);
    best(r.attn, "attn", layers);
    nlohmann::json j = gb::trace_json(r, m.tok, tokens, o.noise);
    j.update(knockouts_json(o.ab, notes));
    write_outputs(a, j, [&](const std::string& d) { gb::write_trace_npy(d, r); });
    return 0;
}

} // namespace cli
