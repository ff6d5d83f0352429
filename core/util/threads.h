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

// While it lives, the calling thread and the OpenMP team it starts run one thread per core: team thread i on the
// i-th CPU the caller may use (a core's first CPU before any SMT sibling); the caller's CPU set comes back at the
// end, the team's other threads stay where they were put (they only run our regions). Unpinned, a forward of two
// threads on two cores now and then ran both on one core after a wake-up: GPT-2-small shape at 16 tokens took 20-23
// ms with its slowest of 10 up to 1.5x the median, pinned 15 ms and at most 1.2x (docs/performance.md, "A busy
// machine"). Nothing is pinned for a team of one, a team larger than the caller's CPUs, inside a parallel region,
// or where the user set OMP_PROC_BIND or OMP_PLACES (libgomp places the threads then). Not an environment setting:
// libgomp would pin the program's first thread at start, and every thread the app starts after it would inherit
// that one CPU.
class pinned_team {
public:
    pinned_team();
    ~pinned_team();
    pinned_team(const pinned_team&) = delete;
    pinned_team& operator=(const pinned_team&) = delete;
    bool pinned() const { return active; }

private:
    bool active = false;
    unsigned long before[16] = {}; // the caller's cpu_set_t (1,024 CPUs, an array of unsigned long), kept opaque here
};

// How the threads wait, as the variable in force says it: "GOMP_SPINCOUNT=1000", "OMP_WAIT_POLICY=ACTIVE", ...,
// or "libgomp's default" where neither is set.
std::string wait_policy();

} // namespace gb
