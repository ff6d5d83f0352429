// One exception type for bad input (files, shapes, text, usage). Anything else that escapes is internal.
#pragma once
#include <stdexcept>
#include <string>

namespace gb {

// Thrown where bad data enters, with context: file, tensor, expected vs found.
// The CLI maps it to exit code 2; the GUI shows what() and keeps its previous state.
struct error : std::runtime_error {
    explicit error(const std::string& what) : std::runtime_error(what) {}
};

// A run stopped between layers because a newer request replaced it (forward_options::cancelled). Not an error:
// nothing is shown, and the state it leaves is consistent (live.h).
struct cancelled : std::runtime_error {
    cancelled() : std::runtime_error("cancelled: a newer request replaced this run") {}
};

} // namespace gb
