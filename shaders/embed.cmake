# Turns shaders/*.comp into a C++ source of raw string literals (run at build time by shaders.cmake).
# Inputs: SHADER_DIR, OUTPUT.
file(GLOB shaders "${SHADER_DIR}/*.comp")
list(SORT shaders)
set(out "// Generated from shaders/*.comp by shaders/embed.cmake: do not edit.\n#include \"gl_shaders.h\"\n\nnamespace gb {\n\nconst embedded_shader embedded_shaders[] = {\n")
foreach(s ${shaders})
  get_filename_component(name ${s} NAME)
  file(READ ${s} text)
  string(APPEND out "    {\"${name}\", R\"glsl(${text})glsl\"},\n")
endforeach()
string(APPEND out "    {nullptr, nullptr},\n};\n\n} // namespace gb\n")
file(WRITE ${OUTPUT}.tmp "${out}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUTPUT}.tmp ${OUTPUT})
