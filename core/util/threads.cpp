// OpenMP's waiting, chosen before the runtime reads it (see threads.h).
#include "util/threads.h"

#include <cstdlib>
#include <unistd.h>

namespace gb {

void wait_briefly(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return; // the user's, or set by the exec below
    if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
    execv("/proc/self/exe", argv);
    // exec failed (no /proc): go on with libgomp's default, spinning
}

std::string wait_policy() {
    for (const char* v : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
        if (const char* s = std::getenv(v); s && *s) return std::string(v) + "=" + s;
    return "libgomp's default";
}

} // namespace gb
