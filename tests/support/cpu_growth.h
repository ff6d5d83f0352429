// Growth checks in place of wall-clock limits: how the CPU time of one piece of work grows with its size. A
// ratio of two sizes' times does not depend on how fast the machine is, and thread CPU time leaves out the
// time other processes hold the CPU, so the check fails for a worse algorithm, not for a busy machine.
#pragma once
#include <functional>

// The calling thread's CPU time for fn in seconds (CLOCK_THREAD_CPUTIME_ID), the least of `tries` runs: the
// least drops a run that an interrupt or a cold cache slowed. fn must do its work on this thread.
double thread_cpu_seconds(const std::function<void()>& fn, int tries = 5);

// CPU time of work(big) / CPU time of work(small), each the least of `tries` runs, after one untimed run of
// work(small) (first-touch costs: page faults, lazy tables). Linear work gives about big / small.
double cpu_growth(const std::function<void(int)>& work, int small, int big, int tries = 5);
