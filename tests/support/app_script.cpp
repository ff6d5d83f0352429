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
    // The app's own exit code, kept in a file: xvfb-run removes its temporary folder before it stops Xvfb, and
    // that removal sometimes fails when the app exits at once (a script error); xvfb-run then exits 5 and
    // prints "problem while cleaning up temporary directory" whatever the app returned (1 run in 5 under load).
    // The wrapper returns the app's code and drops that one line from stderr.
    static const std::string dir = test_temp_dir("app_rc");
    static int n = 0;
    const std::string rc = dir + "/rc" + std::to_string(n++), err = rc + ".err";
    const std::string inner = sq(app_path()) + " " + args + "; echo $? > " + sq(rc);
    const std::string outer = "xvfb-run -a -s '-screen 0 " + screen + "x24' sh -c " + sq(inner) + " 2> " + sq(err) +
                              "; x=$?; grep -v 'xvfb-run: error: problem while cleaning up temporary directory' " +
                              sq(err) + " >&2; r=$(cat " + sq(rc) + " 2>/dev/null); exit ${r:-$x}";
    return "sh -c " + sq(outer);
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
