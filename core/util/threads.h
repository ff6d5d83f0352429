// How the OpenMP threads wait between parallel regions. GCC's libgomp spins for a long while by default: on a quiet
// machine that saves a wake-up per region, but when another process holds one of the cores, the thread that is
// not running makes its partner spin away its whole time slice at every barrier. Measured on 2 cores with one of
// them busy (GPT-2-small shape, 16 tokens): 600 ms a forward with the default spin, 50 ms spinning 1,000 times
// before sleeping, which costs 3-9 % on a quiet machine (docs/performance.md, "A busy machine").
#pragma once
#include <string>

namespace gb {

// Makes this process's OpenMP threads spin briefly (GOMP_SPINCOUNT=1000) before they sleep. libgomp reads its
// variables once, when it is loaded (before main), so when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set this
// sets GOMP_SPINCOUNT and re-executes the program (/proc/self/exe, the same argv and environment); a failed exec
// leaves the process running as it was. A user's own setting of either (OMP_WAIT_POLICY=ACTIVE for a dedicated
// machine) is kept. Call first thing in main.
void wait_briefly(char** argv);

// How the threads wait, as the variable in force says it: "GOMP_SPINCOUNT=1000", "OMP_WAIT_POLICY=ACTIVE", ...,
// or "libgomp's default" where neither is set.
std::string wait_policy();

} // namespace gb
