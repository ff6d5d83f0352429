// OpenMP's waiting, chosen before the runtime reads it (see threads.h).
#include "util/threads.h"

#include <cstdio>
#include <cstdlib>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <vector>

namespace gb {

void wait_briefly(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return; // the user's, or set by the exec below
    if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
    execv("/proc/self/exe", argv);
    // exec failed (no /proc): go on with libgomp's default, spinning
}

static_assert(sizeof(cpu_set_t) <= 16 * sizeof(unsigned long) && alignof(cpu_set_t) <= alignof(unsigned long),
              "pinned_team keeps a cpu_set_t in 16 unsigned longs");

// Whether each CPU is its core's first (the first of its SMT siblings, as sysfs lists them; every CPU where sysfs
// says nothing): read once, since a forward asks at every call and the topology does not change
static bool core_first(int cpu) {
    static const std::vector<bool> first = [] {
        std::vector<bool> f(CPU_SETSIZE, true);
        for (int c = 0; c < CPU_SETSIZE; c++) {
            char path[96];
            std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
            FILE* file = std::fopen(path, "r");
            if (!file) continue;
            int lowest = c;
            if (std::fscanf(file, "%d", &lowest) == 1) f[(size_t)c] = lowest == c;
            std::fclose(file);
        }
        return f;
    }();
    return first[(size_t)cpu];
}

// The CPUs of set in the order team threads take them: each core's first CPU, then the others
static std::vector<int> cpu_order(const cpu_set_t& set) {
    std::vector<int> first, rest;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set)) (core_first(cpu) ? first : rest).push_back(cpu);
    first.insert(first.end(), rest.begin(), rest.end());
    return first;
}

pinned_team::pinned_team() {
    const int n = omp_get_max_threads();
    if (n < 2 || omp_in_parallel() || std::getenv("OMP_PROC_BIND") || std::getenv("OMP_PLACES")) return;
    cpu_set_t& mine = *(cpu_set_t*)before;
    if (pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), &mine) != 0) return;
    const std::vector<int> cpus = cpu_order(mine);
    if ((int)cpus.size() < n) return;
#pragma omp parallel num_threads(n)
    {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[(size_t)omp_get_thread_num()], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one); // a refusal leaves the thread where it was
    }
    active = true;
}

pinned_team::~pinned_team() {
    if (active) pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), (const cpu_set_t*)before);
}

std::string wait_policy() {
    for (const char* v : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
        if (const char* s = std::getenv(v); s && *s) return std::string(v) + "=" + s;
    return "libgomp's default";
}

} // namespace gb
