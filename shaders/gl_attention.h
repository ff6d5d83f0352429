// The GL 4.3 compute path for attention: a headless EGL context (no X needed) or the caller's own context,
// and attention_gl() with the same contract as attention_cpu().
#pragma once
#include <string>

#include "run/forward.h"

namespace gb {

struct gl_info {
    bool ok = false;       // context current and shaders compiled: attention_gl can run
    bool context = false;  // an OpenGL 4.3+ context exists (ok == false with context == true: the shaders failed)
    std::string renderer, version, error;
    std::string platform; // the headless context's EGL platform: "surfaceless" or "device" (empty otherwise)
};

// Headless GL 4.3+ core context via EGL, made current on the calling thread, shaders compiled: on Mesa's
// surfaceless platform (NVIDIA's recent drivers offer it too), else on the first EGL device that initialises
// (EGL_EXT_platform_device, NVIDIA's headless path before that). GLASSBOX_EGL=surfaceless or =device takes only
// that one. Safe to call again on the same thread (returns the existing context's info).
gl_info gl_init_headless();
// Compiles the shaders in the context already current on this thread (e.g. a GLFW window's).
gl_info gl_init_current();
// GPU attention for one layer in the calling thread's context; same semantics as attention_cpu.
// d_head up to 256. Throws gb::error on GL failure or when a buffer exceeds GL_MAX_SHADER_STORAGE_BLOCK_SIZE
// (the probabilities are split into several dispatches by heads when all heads at once would).
// Buffers are reused across calls and grow on demand.
void attention_gl(const attention_args& a);
// Compiles and links a compute shader from source in the current context; returns the GL program (delete it
// with glDeleteProgram). `defines` go right after the #version line. Throws gb::error naming the shader and
// carrying the GL info log when it does not compile or link.
unsigned gl_compile_compute(const std::string& name, const std::string& source, const std::string& defines = "");
// Releases buffers, programs and the headless context made on this thread.
void gl_shutdown();

} // namespace gb
