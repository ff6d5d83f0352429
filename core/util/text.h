// Small text and environment helpers that several folders need (one definition each, so that a unity batch,
// cmake/unity.cmake, never sees two).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace gb {

// The environment variable's value, "" when unset
inline std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// ASCII upper case ("q4_k_m" -> "Q4_K_M"); other bytes unchanged
inline std::string to_upper(std::string s) {
    for (char& c : s) c = (char)std::toupper((unsigned char)c);
    return s;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A full git commit id: 40 lower-case hex digits
inline bool is_commit_hash(const std::string& s) {
    return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit((unsigned char)c) || (c >= 'a' && c <= 'f'); });
}

} // namespace gb
