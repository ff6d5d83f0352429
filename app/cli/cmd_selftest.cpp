// glassbox-cli selftest: facts published about GPT-2 small, checked on the user's copy.
#include <cstdio>

#include "analysis/export.h"
#include "analysis/selftest.h"
#include "model/model.h"

#include "args.h"
#include "commands.h"

namespace cli {

// Exit 3 when some fact does not match: a script can tell a broken conversion from a broken command.
int cmd_selftest(const args& a) {
    gb::model m = open_model(a);
    const gb::selftest_result r = gb::gpt2_selftest(m);
    nlohmann::json facts = nlohmann::json::array();
    for (const gb::selftest_fact& f : r.facts) {
        std::printf("%s  %s\n      expected %s, got %s\n", f.matched ? "ok  " : "FAIL", f.name.c_str(), f.expected.c_str(),
                    f.got.c_str());
        facts.push_back({{"fact", f.name}, {"expected", f.expected}, {"got", f.got}, {"matched", f.matched}});
    }
    const int n = (int)r.facts.size();
    std::printf("%d of %d facts match%s\n", r.matched(), n,
                r.matched() == n ? ": this is GPT-2 small, loaded and run as published"
                                 : ": not the published GPT-2 small (other weights, or a broken conversion)");
    write_outputs(a, nlohmann::json{{"model", gb::model_json(m)}, {"facts", facts}, {"matched", r.matched()}, {"of", n}}, nullptr);
    return r.matched() == n ? 0 : 3;
}

} // namespace cli
