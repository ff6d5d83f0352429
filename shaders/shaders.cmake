# The GL compute path: library glassbox_gl (EGL headless context, attention on the GPU) with the shaders
# embedded at build time. Without epoxy or EGL the target is not defined and everything stays on the CPU.
pkg_check_modules(GL_EPOXY IMPORTED_TARGET epoxy)
pkg_check_modules(GL_EGL IMPORTED_TARGET egl)
if(GL_EPOXY_FOUND AND GL_EGL_FOUND)
  file(GLOB SHADER_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/shaders/*.comp)
  set(SHADERS_CPP ${CMAKE_BINARY_DIR}/generated/shaders_embedded.cpp)
  add_custom_command(
    OUTPUT ${SHADERS_CPP}
    COMMAND ${CMAKE_COMMAND} -DSHADER_DIR=${CMAKE_SOURCE_DIR}/shaders -DOUTPUT=${SHADERS_CPP}
            -P ${CMAKE_SOURCE_DIR}/shaders/embed.cmake
    DEPENDS ${SHADER_FILES} ${CMAKE_SOURCE_DIR}/shaders/embed.cmake
    COMMENT "Embedding compute shaders")
  add_library(glassbox_gl STATIC ${CMAKE_SOURCE_DIR}/shaders/gl_attention.cpp ${SHADERS_CPP})
  target_include_directories(glassbox_gl PUBLIC ${CMAKE_SOURCE_DIR}/shaders)
  target_link_libraries(glassbox_gl PUBLIC glassbox_core PkgConfig::GL_EPOXY PkgConfig::GL_EGL)
else()
  message(WARNING "epoxy or EGL not found: no GL compute path (attention runs on the CPU)")
endif()
