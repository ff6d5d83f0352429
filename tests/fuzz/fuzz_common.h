// Shared by the libFuzzer targets: write the input to a file (the loaders take paths) and accept only
// gb::error as a failure mode; anything else (a crash, another exception) is a bug the fuzzer reports.
#pragma once
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "util/error.h"

// A scratch file of this process, removed when the fuzzer exits (test.sh runs them for a minute each; their
// files piled up in /tmp).
inline std::string fuzz_path(const char* name) {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir ? dir : "/tmp") + "/glassbox-fuzz-" + std::to_string(getpid()) + "-" + name;
    static std::vector<std::string> made;
    static const bool hooked = std::atexit([] {
        std::error_code ec;
        for (const std::string& f : made) std::filesystem::remove_all(f, ec); // files, and the config fuzzer's folder
    }) == 0;
    (void)hooked;
    made.push_back(p);
    return p;
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
