// Driving the desktop app in tests: under Xvfb at 1600x1000, with a script (the commands app/gui/script.h
// lists), its settings kept out of the user's home. Shared by the GUI, MoE and demo tests.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// The built app, and whether it was built (it needs libimgui-dev, libglfw3-dev, libepoxy-dev).
const std::string& app_path();
bool have_app();
// s in single quotes for the shell
std::string sq(const std::string& s);
// The shell command running the app with args on an Xvfb of its own (tests/support/on_xvfb.sh: several at once
// never share a display). Every run inherits an XDG_CONFIG_HOME inside the tests' temp folder and no
// GLASSBOX_CONFIG_DIR (a test's own env prefix may set either). screen: the Xvfb screen's size, "WxH" (at least
// the app's --size). The command exits with the app's own code.
std::string xvfb_app(const std::string& args, const std::string& screen = "1600x1000");
// Runs the app with args and the script (written to a file); returns every JSON line its `print`s wrote and
// sets *rc to its exit code. env: "NAME=value " prefixes for the command; screen as for xvfb_app.
std::vector<nlohmann::json> run_script(const std::string& args, const std::string& script, int* rc,
                                       const std::string& env = "", const std::string& screen = "1600x1000");
