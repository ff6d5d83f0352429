// This process's memory as Linux counts it (/proc/self/status): what the app shows and its tests bound.
#pragma once
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace gb {

struct process_memory {
    size_t resident = 0; // VmRSS: bytes in RAM now (0: not known, e.g. no /proc)
    size_t peak = 0;     // VmHWM: the most it has held
};

inline process_memory process_memory_now() {
    process_memory m;
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return m;
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
        unsigned long kb = 0;
        if (std::sscanf(line, "VmRSS: %lu kB", &kb) == 1) m.resident = (size_t)kb << 10;
        else if (std::sscanf(line, "VmHWM: %lu kB", &kb) == 1) m.peak = (size_t)kb << 10;
    }
    std::fclose(f);
    return m;
}

} // namespace gb
