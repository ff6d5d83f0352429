// GL compute attention: EGL surfaceless context, shader compilation (errors carry the info log and the
// shader's name), limits (shared memory, storage block size), buffer management and the dispatch.
// State is per thread (each thread has its context).
#include "gl_attention.h"

#include <epoxy/egl.h>
#include <epoxy/gl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gl_shaders.h"
#include "util/error.h"
#include "util/text.h"

namespace gb {

namespace {

// Tile shapes of attention.comp (BQ queries per workgroup, BK keys per shared-memory tile, head size up to
// MAX_D), smallest MAX_D first; each is its own compiled program. Both fit the 32 KB of shared memory that
// every GL 4.3 implementation has (GL_MAX_COMPUTE_SHARED_MEMORY_SIZE is checked anyway).
struct tile_config {
    int bq, bk, max_d;
};
const tile_config tile_configs[] = {{16, 32, 128}, {8, 16, 256}};
const int n_tile_configs = sizeof tile_configs / sizeof tile_configs[0];
const int max_head_size = 256;

// shared memory of attention.comp for a tile shape: q_s + kv_s + p_s + m_s, l_s, a_s (floats)
size_t shared_bytes(const tile_config& t) {
    return sizeof(float) * ((size_t)t.bq * t.max_d + (size_t)t.bk * (t.max_d + 1) + (size_t)t.bq * (t.bk + 1) + 3 * (size_t)t.bq);
}

struct attention_program {
    GLuint id = 0;
    GLint n_q, n_past, n_head, n_kv_head, d_head, q_stride, kv_stride, out_stride, h0, write_probs, scale, softcap, window;
    GLint causal;
};

struct gl_state {
    bool ready = false;
    gl_info info;
    EGLDisplay dpy = EGL_NO_DISPLAY;
    EGLContext ctx = EGL_NO_CONTEXT;
    attention_program prog[n_tile_configs]; // compiled on first use, except the first (at init)
    GLint64 max_block_bytes = 0;            // GL_MAX_SHADER_STORAGE_BLOCK_SIZE
    GLint max_shared_bytes = 0;             // GL_MAX_COMPUTE_SHARED_MEMORY_SIZE
    GLint max_groups[2] = {0, 0};           // GL_MAX_COMPUTE_WORK_GROUP_COUNT x, y
    GLuint buf[5] = {0, 0, 0, 0, 0};        // q, k, v, probs, out
    size_t cap[5] = {0, 0, 0, 0, 0};        // bytes allocated
    std::vector<float> out_scratch; // readback when out_stride leaves gaps between rows
};
thread_local gl_state g;

std::string hex(unsigned v) {
    char b[16];
    std::snprintf(b, sizeof b, "0x%x", v);
    return b;
}

const char* find_shader(const char* name) {
    for (const embedded_shader* s = embedded_shaders; s->name; s++)
        if (std::strcmp(s->name, name) == 0) return s->source;
    throw error(std::string("internal: shader ") + name + " is not embedded");
}

// "#define BQ 16\n..." for a tile shape
std::string tile_defines(const tile_config& t) {
    return "#define BQ " + std::to_string(t.bq) + "\n#define BK " + std::to_string(t.bk) + "\n#define MAX_D " +
           std::to_string(t.max_d) + "\n";
}

// Compiles tile shape c of attention.comp (after checking its shared memory) and looks up its uniforms.
attention_program build_attention(int c) {
    const tile_config& t = tile_configs[c];
    if ((GLint64)shared_bytes(t) > g.max_shared_bytes)
        throw error("GL attention: tiles of " + std::to_string(t.bq) + " queries x " + std::to_string(t.bk) +
                    " keys (head size up to " + std::to_string(t.max_d) + ") need " + std::to_string(shared_bytes(t)) +
                    " bytes of shared memory, this GL allows " + std::to_string(g.max_shared_bytes) +
                    " (GL_MAX_COMPUTE_SHARED_MEMORY_SIZE)");
    attention_program p;
    p.id = gl_compile_compute("attention.comp", find_shader("attention.comp"), tile_defines(t));
    auto loc = [&](const char* n) { return glGetUniformLocation(p.id, n); };
    p.n_q = loc("n_q"), p.n_past = loc("n_past"), p.n_head = loc("n_head"), p.n_kv_head = loc("n_kv_head");
    p.d_head = loc("d_head"), p.q_stride = loc("q_stride"), p.kv_stride = loc("kv_stride");
    p.out_stride = loc("out_stride"), p.h0 = loc("h0"), p.write_probs = loc("write_probs"), p.scale = loc("scale");
    p.softcap = loc("softcap"), p.window = loc("window"), p.causal = loc("causal");
    return p;
}

gl_info setup_current() {
    gl_info info;
    if (epoxy_gl_version() < 43) {
        info.error = "OpenGL " + std::to_string(epoxy_gl_version() / 10) + "." + std::to_string(epoxy_gl_version() % 10) +
                     " has no compute shaders (4.3 needed)";
        g.info = info;
        return info;
    }
    info.context = true; // from here on a failure is a bug in the shaders or this file, not a missing GL
    info.renderer = (const char*)glGetString(GL_RENDERER);
    info.version = (const char*)glGetString(GL_VERSION);
    glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &g.max_block_bytes);
    glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &g.max_shared_bytes);
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, 0, &g.max_groups[0]);
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, 1, &g.max_groups[1]);
    try {
        g.prog[0] = build_attention(0);
    } catch (const std::exception& e) {
        info.error = e.what();
        g.info = info;
        return info;
    }
    glGenBuffers(5, g.buf);
    info.ok = true;
    g.ready = true;
    g.info = info;
    return info;
}

// Makes buffer `slot` at least `bytes` long (uploading data when given) and binds exactly that range.
void upload(int slot, const void* data, size_t bytes) {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, g.buf[slot]);
    // grow with headroom, so that calls of similar sizes do not reallocate; shrink to the size when a call needs under
    // a quarter: NVIDIA's driver spends time in proportion to a buffer's whole size at each call (on an H200, after
    // a 1,024-token prompt had grown the buffers, attention alone on 64 tokens took 3.8-4.0 ms, 0.57 ms shrunk;
    // docs/performance.md "GPU attention")
    if (bytes > g.cap[slot] || bytes * 4 < g.cap[slot]) {
        g.cap[slot] = bytes > g.cap[slot] ? std::max(bytes, g.cap[slot] * 3 / 2) : bytes;
        glBufferData(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)g.cap[slot], nullptr, GL_DYNAMIC_DRAW);
    }
    if (data) glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, (GLsizeiptr)bytes, data);
    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, slot, g.buf[slot], 0, (GLsizeiptr)bytes);
}

// Every buffer the shader indexes must fit one storage block; that also keeps its int32 indices in range.
void check_block(const char* what, size_t bytes) {
    if ((GLint64)bytes > g.max_block_bytes)
        throw error(std::string("GL attention: the ") + what + " buffer needs " + std::to_string(bytes) +
                    " bytes, over this GL's limit of " + std::to_string(g.max_block_bytes) +
                    " bytes (GL_MAX_SHADER_STORAGE_BLOCK_SIZE); use the CPU backend for this size");
}

} // namespace

unsigned gl_compile_compute(const std::string& name, const std::string& source, const std::string& defines) {
    // defines go after the #version line; #line keeps the info log's line numbers those of the file
    std::string text = source;
    if (!defines.empty()) {
        size_t eol = source.rfind("#version", 0) == 0 ? source.find('\n') : std::string::npos;
        if (eol == std::string::npos) throw error("shader " + name + " does not start with a #version line");
        text = source.substr(0, eol + 1) + defines + "#line 2\n" + source.substr(eol + 1);
    }
    const char* src = text.c_str();
    GLuint sh = glCreateShader(GL_COMPUTE_SHADER);
    glShaderSource(sh, 1, &src, nullptr);
    glCompileShader(sh);
    GLint ok = 0;
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[4096] = "";
        glGetShaderInfoLog(sh, sizeof log, nullptr, log);
        glDeleteShader(sh);
        throw error("shader " + name + " does not compile: " + log);
    }
    GLuint prog = glCreateProgram();
    glAttachShader(prog, sh);
    glLinkProgram(prog);
    glDeleteShader(sh);
    glGetProgramiv(prog, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[4096] = "";
        glGetProgramInfoLog(prog, sizeof log, nullptr, log);
        glDeleteProgram(prog);
        throw error("shader " + name + " does not link: " + log);
    }
    return prog;
}

gl_info gl_init_current() {
    if (g.ready) return g.info;
    return setup_current();
}

gl_info gl_init_headless() {
    if (g.ready || g.ctx != EGL_NO_CONTEXT) return g.info; // made on this thread already (maybe with broken shaders)
    gl_info info;
    if (!epoxy_has_egl()) {
        info.error = "no EGL library";
        return info;
    }
    // eglGetDisplay(EGL_DEFAULT_DISPLAY) needs an X server. Without one: the surfaceless platform (Mesa's, which
    // NVIDIA's driver 580 offers too), else the first EGL device (EGL_EXT_platform_device: older NVIDIA drivers
    // have no surfaceless platform, and a GPU server has no X). GLASSBOX_EGL names one of the two (tests take each).
    const std::string only = env_or_empty("GLASSBOX_EGL");
    if (!only.empty() && only != "surfaceless" && only != "device") {
        info.error = "GLASSBOX_EGL=" + only + ": expected surfaceless or device";
        return info;
    }
    const char* exts = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    const bool surfaceless = exts && std::strstr(exts, "EGL_MESA_platform_surfaceless") && only != "device";
    // NVIDIA names enumeration within EGL_EXT_device_base (enumeration and query together)
    const bool devices = exts && std::strstr(exts, "EGL_EXT_platform_device") &&
                         (std::strstr(exts, "EGL_EXT_device_enumeration") || std::strstr(exts, "EGL_EXT_device_base")) &&
                         only != "surfaceless";
    if (!surfaceless && !devices) {
        info.error = only.empty() ? "EGL has neither a surfaceless platform (EGL_MESA_platform_surfaceless) nor devices "
                                    "(EGL_EXT_platform_device)"
                                  : "EGL has no " + only + " platform (GLASSBOX_EGL=" + only + ")";
        return info;
    }
    EGLint major = 0, minor = 0;
    g.dpy = EGL_NO_DISPLAY;
    if (surfaceless) {
        g.dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
        if (g.dpy != EGL_NO_DISPLAY && !eglInitialize(g.dpy, &major, &minor)) g.dpy = EGL_NO_DISPLAY;
        if (g.dpy != EGL_NO_DISPLAY) info.platform = "surfaceless";
    }
    if (g.dpy == EGL_NO_DISPLAY && devices) {
        EGLDeviceEXT dev[16];
        EGLint n = 0;
        if (eglQueryDevicesEXT(16, dev, &n))
            for (EGLint i = 0; i < n && g.dpy == EGL_NO_DISPLAY; i++) {
                g.dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, dev[i], nullptr);
                if (g.dpy != EGL_NO_DISPLAY && !eglInitialize(g.dpy, &major, &minor)) g.dpy = EGL_NO_DISPLAY;
            }
        if (g.dpy != EGL_NO_DISPLAY) info.platform = "device";
    }
    if (g.dpy == EGL_NO_DISPLAY) {
        info.error = "cannot initialise an EGL display (EGL error " + hex(eglGetError()) + ")";
        return info;
    }
    if (!eglBindAPI(EGL_OPENGL_API)) {
        info.error = "EGL cannot bind the OpenGL API";
        return info;
    }
    const EGLint ctx_attr[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 3, EGL_CONTEXT_OPENGL_PROFILE_MASK,
                               EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    g.ctx = eglCreateContext(g.dpy, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ctx_attr);
    if (g.ctx == EGL_NO_CONTEXT || !eglMakeCurrent(g.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, g.ctx)) {
        info.error = "cannot create an OpenGL 4.3 core context (EGL error " + hex(eglGetError()) + ")";
        if (g.ctx != EGL_NO_CONTEXT) eglDestroyContext(g.dpy, g.ctx);
        g.ctx = EGL_NO_CONTEXT;
        return info;
    }
    gl_info out = setup_current();
    out.platform = g.info.platform = info.platform;
    return out;
}

void attention_gl(const attention_args& a) {
    if (!g.ready) throw error("internal: attention_gl without a GL context (call gl_init_headless first)");
    if (a.n_q <= 0) return;
    if (a.d_head < 1 || a.d_head > max_head_size)
        throw error("GL attention supports head sizes 1.." + std::to_string(max_head_size) + " (got " +
                    std::to_string(a.d_head) + ")");
    if (a.n_kv_head < 1 || a.n_head % a.n_kv_head)
        throw error("GL attention: " + std::to_string(a.n_head) + " query heads do not split into " +
                    std::to_string(a.n_kv_head) + " kv heads");
    if (!a.causal && a.window > 0) // as attention_cpu: a window bounds the keys before a query only
        throw error("GL attention: a sliding window (" + std::to_string(a.window) +
                    " tokens) needs causal attention; non-causal (encoder) attention must have window 0");
    int c = 0;
    while (tile_configs[c].max_d < a.d_head) c++;
    if (!g.prog[c].id) g.prog[c] = build_attention(c);
    const attention_program& p = g.prog[c];
    const int bq = tile_configs[c].bq;

    // sizes in bytes, up to the last element the shader touches; each must fit one storage block
    const size_t n_kv = (size_t)a.n_past + a.n_q, f = sizeof(float);
    const size_t q_bytes = f * ((size_t)(a.n_q - 1) * a.q_stride + (size_t)a.n_head * a.d_head);
    const size_t kv_bytes = f * ((n_kv - 1) * a.kv_stride + (size_t)a.n_kv_head * a.d_head);
    const size_t out_bytes = f * ((size_t)(a.n_q - 1) * a.out_stride + (size_t)a.n_head * a.d_head);
    const size_t head_probs = f * (size_t)a.n_q * n_kv; // one head's [n_q][n_kv]
    check_block("Q", q_bytes);
    check_block("K/V", kv_bytes);
    check_block("output", out_bytes);
    if (a.probs) check_block("probabilities (one head)", head_probs);
    // the probabilities go in passes of as many heads as one storage block holds (usually all of them)
    const int heads_per_pass = a.probs ? (int)std::min<GLint64>(a.n_head, g.max_block_bytes / (GLint64)head_probs) : a.n_head;
    const GLint64 groups_x = ((GLint64)a.n_q + bq - 1) / bq;
    if (groups_x > g.max_groups[0] || heads_per_pass > g.max_groups[1])
        throw error("GL attention: " + std::to_string(groups_x) + " x " + std::to_string(heads_per_pass) +
                    " workgroups exceed GL_MAX_COMPUTE_WORK_GROUP_COUNT (" + std::to_string(g.max_groups[0]) + " x " +
                    std::to_string(g.max_groups[1]) + ")");

    while (glGetError() != GL_NO_ERROR) {} // errors left by others are not ours
    upload(0, a.q, q_bytes);
    upload(1, a.k, kv_bytes);
    upload(2, a.v, kv_bytes);
    upload(3, nullptr, a.probs ? head_probs * heads_per_pass : f); // something must be bound even when unused
    upload(4, nullptr, out_bytes);
    glUseProgram(p.id);
    glUniform1i(p.n_q, a.n_q);
    glUniform1i(p.n_past, a.n_past);
    glUniform1i(p.n_head, a.n_head);
    glUniform1i(p.n_kv_head, a.n_kv_head);
    glUniform1i(p.d_head, a.d_head);
    glUniform1i(p.q_stride, a.q_stride);
    glUniform1i(p.kv_stride, a.kv_stride);
    glUniform1i(p.out_stride, a.out_stride);
    glUniform1i(p.write_probs, a.probs ? 1 : 0);
    glUniform1f(p.scale, a.scale > 0 ? a.scale : 1.0f / std::sqrt((float)a.d_head)); // the same float as attention_cpu's
    glUniform1f(p.softcap, a.softcap);
    glUniform1i(p.window, a.window);
    glUniform1i(p.causal, a.causal ? 1 : 0);

    for (int h0 = 0; h0 < a.n_head; h0 += heads_per_pass) {
        const int nh = std::min(heads_per_pass, a.n_head - h0);
        glUniform1i(p.h0, h0);
        glDispatchCompute((GLuint)groups_x, (GLuint)nh, 1);
        glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
        if (a.probs) {
            glBindBuffer(GL_SHADER_STORAGE_BUFFER, g.buf[3]);
            glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, (GLsizeiptr)(head_probs * nh),
                               a.probs + (size_t)h0 * a.n_q * n_kv);
        }
    }
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, g.buf[4]);
    const size_t width = (size_t)a.n_head * a.d_head;
    if ((size_t)a.out_stride == width) {
        glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, (GLsizeiptr)out_bytes, a.out);
    } else { // the columns between rows belong to the caller: copy only the heads' columns
        g.out_scratch.resize(out_bytes / f);
        glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, (GLsizeiptr)out_bytes, g.out_scratch.data());
        for (int i = 0; i < a.n_q; i++)
            std::copy_n(g.out_scratch.data() + (size_t)i * a.out_stride, width, a.out + (size_t)i * a.out_stride);
    }
    GLenum err = glGetError();
    if (err != GL_NO_ERROR) throw error("GL attention failed (GL error " + hex(err) + ")");
}

void gl_shutdown() {
    if (g.ready) {
        glDeleteBuffers(5, g.buf);
    }
    if (g.ready || g.info.context)
        for (attention_program& p : g.prog)
            if (p.id) glDeleteProgram(p.id);
    if (g.ctx != EGL_NO_CONTEXT) {
        eglMakeCurrent(g.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(g.dpy, g.ctx);
        eglTerminate(g.dpy);
    }
    g = gl_state{};
}

} // namespace gb
