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

} // namespace gb
