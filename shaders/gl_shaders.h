// Compute shaders embedded into the binary at build time (shaders/*.comp -> generated source).
#pragma once

namespace gb {

struct embedded_shader {
    const char* name;   // file name, e.g. "attention.comp"
    const char* source; // GLSL text
};
extern const embedded_shader embedded_shaders[]; // terminated by {nullptr, nullptr}

} // namespace gb
