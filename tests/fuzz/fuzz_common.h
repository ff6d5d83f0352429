// Shared by the libFuzzer targets: write the input to a file (the loaders take paths) and accept only
// gb::error as a failure mode; anything else (a crash, another exception) is a bug the fuzzer reports.
#pragma once
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "error.h"

inline std::string fuzz_path(const char* name) {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/glassbox-fuzz-" + std::to_string(getpid()) + "-" + name;
}

inline void fuzz_write(const std::string& path, const uint8_t* data, size_t size) {
    std::ofstream(path, std::ios::binary).write((const char*)data, (std::streamsize)size);
}

template <class F> void expect_only_gb_errors(F&& f) {
    try {
        f();
    } catch (const gb::error&) {
    }
}
