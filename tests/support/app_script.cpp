// Driving the desktop app in tests (app_script.h).
#include "app_script.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tiny_model.h"

const std::string& app_path() {
    static const std::string app = std::string(GLASSBOX_BINARY_DIR) + "/glassbox";
    return app;
}

bool have_app() { return std::ifstream(app_path()).good(); }

std::string sq(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string xvfb_app(const std::string& args, const std::string& screen) {
    static const bool hermetic = [] { // once per test process
        setenv("XDG_CONFIG_HOME", test_temp_dir("app_xdg_unused").c_str(), 1);
        unsetenv("GLASSBOX_CONFIG_DIR");
        return true;
    }();
    (void)hermetic;
    // A private Xvfb per run (tests/support/on_xvfb.sh), so that app tests run side by side
    static const std::string on_xvfb = std::string(GLASSBOX_SOURCE_DIR) + "/tests/support/on_xvfb.sh";
    return sq(on_xvfb) + " " + screen + " sh -c " + sq(sq(app_path()) + " " + args);
}

std::vector<nlohmann::json> run_script(const std::string& args, const std::string& script, int* rc, const std::string& env,
                                       const std::string& screen) {
    static int n = 0;
    const std::string path = test_temp_dir("app_steps") + "/script" + std::to_string(n++) + ".txt";
    std::ofstream(path) << script;
    command_result r = run_command(env + xvfb_app(args + " --script " + sq(path), screen));
    if (!r.err.empty()) std::fprintf(stderr, "%s", r.err.c_str());
    *rc = r.code;
    std::vector<nlohmann::json> states;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);)
        if (!line.empty() && line[0] == '{') states.push_back(nlohmann::json::parse(line));
    return states;
}
