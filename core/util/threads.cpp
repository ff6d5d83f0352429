// OpenMP's wait policy, chosen before the runtime reads it (see threads.h).
#include "util/threads.h"

#include <cstdlib>
#include <unistd.h>

namespace gb {

void wait_passively(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY")) return; // the user's, or already set by the exec below
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
    execv("/proc/self/exe", argv);
    // exec failed (no /proc): go on with libgomp's default, spinning
}

const char* wait_policy() {
    const char* p = std::getenv("OMP_WAIT_POLICY");
    return p && *p ? p : "ACTIVE";
}

} // namespace gb
