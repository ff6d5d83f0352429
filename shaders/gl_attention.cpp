// GL compute attention: EGL surfaceless context, shader compilation (errors carry the info log and the
// shader's name), buffer management and the dispatch. State is per thread (each thread has its context).
#include "gl_attention.h"

#include <epoxy/egl.h>
#include <epoxy/gl.h>

#include <cmath>
#include <cstring>

#include "error.h"
#include "gl_shaders.h"

namespace gb {

namespace {

struct gl_state {
    bool ready = false;
    gl_info info;
    EGLDisplay dpy = EGL_NO_DISPLAY;
    EGLContext ctx = EGL_NO_CONTEXT;
    GLuint program = 0;
    GLuint buf[5] = {0, 0, 0, 0, 0}; // q, k, v, probs, out
    size_t cap[5] = {0, 0, 0, 0, 0}; // bytes allocated
    GLuint timer = 0;
    double last_ms = -1;
};
thread_local gl_state g;

const char* find_shader(const char* name) {
    for (const embedded_shader* s = embedded_shaders; s->name; s++)
        if (std::strcmp(s->name, name) == 0) return s->source;
    throw error(std::string("internal: shader ") + name + " is not embedded");
}

GLuint compile_program(const char* name) {
    const char* src = find_shader(name);
    GLuint sh = glCreateShader(GL_COMPUTE_SHADER);
    glShaderSource(sh, 1, &src, nullptr);
    glCompileShader(sh);
    GLint ok = 0;
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[4096];
        glGetShaderInfoLog(sh, sizeof log, nullptr, log);
        glDeleteShader(sh);
        throw error(std::string("shader ") + name + " does not compile: " + log);
    }
    GLuint prog = glCreateProgram();
    glAttachShader(prog, sh);
    glLinkProgram(prog);
    glDeleteShader(sh);
    glGetProgramiv(prog, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[4096];
        glGetProgramInfoLog(prog, sizeof log, nullptr, log);
        glDeleteProgram(prog);
        throw error(std::string("shader ") + name + " does not link: " + log);
    }
    return prog;
}

gl_info setup_current() {
    gl_info info;
    if (epoxy_gl_version() < 43) {
        info.error = "OpenGL " + std::to_string(epoxy_gl_version() / 10) + "." + std::to_string(epoxy_gl_version() % 10) +
                     " has no compute shaders (4.3 needed)";
        return info;
    }
    try {
        g.program = compile_program("attention.comp");
    } catch (const std::exception& e) {
        info.error = e.what();
        return info;
    }
    glGenBuffers(5, g.buf);
    glGenQueries(1, &g.timer);
    info.ok = true;
    info.renderer = (const char*)glGetString(GL_RENDERER);
    info.version = (const char*)glGetString(GL_VERSION);
    g.ready = true;
    g.info = info;
    return info;
}

void upload(int slot, const void* data, size_t bytes) {
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, g.buf[slot]);
    if (bytes > g.cap[slot]) { // grow (with headroom) so repeated calls of similar size do not reallocate
        g.cap[slot] = std::max(bytes, g.cap[slot] * 3 / 2);
        glBufferData(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)g.cap[slot], nullptr, GL_DYNAMIC_DRAW);
    }
    if (data && bytes) glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, (GLsizeiptr)bytes, data);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, slot, g.buf[slot]);
}

} // namespace

gl_info gl_init_current() {
    if (g.ready) return g.info;
    return setup_current();
}

gl_info gl_init_headless() {
    if (g.ready) return g.info;
    gl_info info;
    if (!epoxy_has_egl()) {
        info.error = "no EGL library";
        return info;
    }
    // eglGetDisplay(EGL_DEFAULT_DISPLAY) needs an X server; Mesa's surfaceless platform does not
    const char* exts = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!exts || !std::strstr(exts, "EGL_MESA_platform_surfaceless")) {
        info.error = "EGL has no surfaceless platform (EGL_MESA_platform_surfaceless)";
        return info;
    }
    g.dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    EGLint major = 0, minor = 0;
    if (g.dpy == EGL_NO_DISPLAY || !eglInitialize(g.dpy, &major, &minor)) {
        info.error = "cannot initialise an EGL display";
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
        info.error = "cannot create an OpenGL 4.3 core context (EGL error 0x" + [] {
            char b[16];
            snprintf(b, sizeof b, "%x", eglGetError());
            return std::string(b);
        }() + ")";
        return info;
    }
    return setup_current();
}

void attention_gl(const attention_args& a) {
    if (!g.ready) throw error("internal: attention_gl without a GL context (call gl_init_headless first)");
    if (a.d_head > 256) throw error("GL attention supports head sizes up to 256 (got " + std::to_string(a.d_head) + ")");
    const int n_kv = a.n_past + a.n_q;
    upload(0, a.q, sizeof(float) * (size_t)a.n_q * a.q_stride);
    upload(1, a.k, sizeof(float) * (size_t)n_kv * a.kv_stride);
    upload(2, a.v, sizeof(float) * (size_t)n_kv * a.kv_stride);
    upload(3, nullptr, sizeof(float) * (size_t)a.n_head * a.n_q * n_kv);
    upload(4, nullptr, sizeof(float) * (size_t)a.n_q * a.out_stride);
    glUseProgram(g.program);
    auto set = [](const char* n, int v) { glUniform1i(glGetUniformLocation(g.program, n), v); };
    set("n_q", a.n_q);
    set("n_past", a.n_past);
    set("n_head", a.n_head);
    set("n_kv_head", a.n_kv_head);
    set("d_head", a.d_head);
    set("q_stride", a.q_stride);
    set("kv_stride", a.kv_stride);
    set("out_stride", a.out_stride);
    glUniform1f(glGetUniformLocation(g.program, "scale"), 1.0f / std::sqrt((float)a.d_head));
    glBeginQuery(GL_TIME_ELAPSED, g.timer);
    glDispatchCompute((GLuint)a.n_q, (GLuint)a.n_head, 1);
    glEndQuery(GL_TIME_ELAPSED);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
    if (a.probs) {
        glBindBuffer(GL_SHADER_STORAGE_BUFFER, g.buf[3]);
        glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, sizeof(float) * (size_t)a.n_head * a.n_q * n_kv, a.probs);
    }
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, g.buf[4]);
    glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, sizeof(float) * (size_t)a.n_q * a.out_stride, a.out);
    GLuint64 ns = 0;
    glGetQueryObjectui64v(g.timer, GL_QUERY_RESULT, &ns);
    g.last_ms = ns / 1e6;
    GLenum err = glGetError();
    if (err != GL_NO_ERROR) throw error("GL attention failed (GL error 0x" + std::to_string(err) + ")");
}

double gl_last_dispatch_ms() { return g.last_ms; }

void gl_shutdown() {
    if (!g.ready) return;
    glDeleteBuffers(5, g.buf);
    glDeleteQueries(1, &g.timer);
    glDeleteProgram(g.program);
    if (g.ctx != EGL_NO_CONTEXT) {
        eglMakeCurrent(g.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        eglDestroyContext(g.dpy, g.ctx);
        eglTerminate(g.dpy);
    }
    g = gl_state{};
}

} // namespace gb
