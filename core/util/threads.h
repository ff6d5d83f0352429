// How the OpenMP threads wait between parallel regions. GCC's libgomp spins by default ("active"): on a quiet
// machine that saves a wake-up per region, but when another process holds one of the cores, the thread that is
// not running makes its partner spin away its whole time slice at every barrier. Measured on 2 cores with one of
// them busy (GPT-2-small shape, 16 tokens): 518 ms a forward spinning, 43 ms waiting passively (docs/performance.md).
#pragma once

namespace gb {

// Makes this process's OpenMP threads wait passively. libgomp reads OMP_WAIT_POLICY once, when it is loaded (before
// main), so when the variable is unset this sets it and re-executes the program (/proc/self/exe, the same argv
// and environment); a failed exec leaves the process running as it was. A user's own OMP_WAIT_POLICY (ACTIVE for a
// dedicated machine) is kept. Call first thing in main.
void wait_passively(char** argv);

// The wait policy in force, as OMP_WAIT_POLICY names it ("PASSIVE", "ACTIVE"), or "ACTIVE" where unset (libgomp's
// default then spins for a while before it sleeps).
const char* wait_policy();

} // namespace gb
