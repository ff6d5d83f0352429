// Reading the JSON files of a model folder (config.json, tokenizer.json, tokenizer_config.json, vocab.json,
// model.safetensors.index.json, the safetensors header): nesting bounded before parsing, and nlohmann's type
// errors turned into gb::error naming the file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "util/error.h"

namespace gb {

// Deeper nesting is refused: no model file needs more than a handful of levels, and code that walks a
// document recursively (nlohmann's dump(), copies, our own scans) must not overflow the stack.
constexpr int json_max_depth = 64;

// Parses text[0, n) as JSON; `what` names the source in errors ("PATH: not valid JSON (...)",
// "PATH: JSON nested deeper than 64 levels at byte N").
nlohmann::json parse_json_text(const char* text, size_t n, const std::string& what);
// Reads and parses a file; "cannot open PATH" when it cannot be read.
nlohmann::json read_json_file(const std::string& path);

// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_text(const std::exception& e);

// Runs f, which interprets JSON read from path; a nlohmann::json exception it lets escape (a value of the
// wrong type, an index out of range) becomes a gb::error naming the file, so bad input is never an internal
// error. Interpreters should still check types themselves where they can name the key.
template <class F> auto json_guard(const std::string& path, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const nlohmann::json::exception& e) {
        throw error(path + ": unexpected JSON value (" + json_error_text(e) + ")");
    }
}

// Typed reads of an optional key of an object; a present value of another type is an error naming the key.
bool json_bool(const nlohmann::json& obj, const char* key, bool def, const std::string& where);
std::string json_string(const nlohmann::json& obj, const char* key, const std::string& def, const std::string& where);

} // namespace gb
