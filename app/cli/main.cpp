// glassbox-cli: headless runs, generation, tokenisation and benchmarks on the core library. main() parses
// the command line, runs the command the command table names (commands.h; each in its cmd_<name>.cpp) and
// turns errors into exit codes.
#include <cstdio>
#include <new>
#include <string>

#include "args.h"
#include "commands.h"
#include "glassbox_version.h" // generated at build time (packaging/version.cmake)
#include "run/forward.h"
#include "util/threads.h"

using namespace cli;

int main(int argc, char** argv) {
    gb::wait_briefly(argv); // before any thread starts: OpenMP threads must not spin long on a busy machine
    gb::keep_freed_buffers_in_heap();
    try {
        const std::string first = argc >= 2 ? argv[1] : "";
        if (first == "--version") {
            std::printf("glassbox-cli %s\n", GLASSBOX_VERSION_FULL);
            return 0;
        }
        if (first == "--help" || first == "-h" || first == "help") {
            if (argc >= 3) { // help COMMAND
                const command* c = find_command(argv[2]);
                if (!c) throw usage_error("unknown command '" + std::string(argv[2]) + "' (" + command_names() + ")");
                std::fputs(command_help(*c).c_str(), stdout);
            } else {
                std::fputs(overview_text().c_str(), stdout);
                std::fputs(exit_codes_text, stdout);
            }
            return 0;
        }
        const args a = parse_args(argc, argv); // a known command, with options it takes
        const command& c = *find_command(a.command);
        if (a.has("help")) {
            std::fputs(command_help(c).c_str(), stdout);
            return 0;
        }
        return c.run(a);
    } catch (const gb::error& e) { // one line, whatever the message holds (a file name, a token with a newline)
        std::fprintf(stderr, "error: %s\n", terminal_safe(e.what(), false).c_str());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: internal: %s\n", terminal_safe(e.what(), false).c_str());
        return 1;
    }
}
