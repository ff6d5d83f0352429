# Install layout, man pages and the .deb (included from CMakeLists.txt).
#
#   cmake --install BUILD --prefix /usr     bin/, share/glassbox/assets/{models,saes}/, share/applications/,
#                                           share/icons/hicolor/scalable/apps/, share/man/man1/
#   cpack -G DEB (in BUILD)                 glassbox_<version>_<arch>.deb; tools/package.sh does both steps
#                                           from a portable build of its own

# The programs find their default model at <exe>/../share/glassbox/assets (gb::default_model_path()), so bin/
# and share/ are fixed here rather than taken from GNUInstallDirs, whose directories can be moved apart.
set(GLASSBOX_INSTALL_ASSETS share/glassbox/assets)

install(TARGETS glassbox-cli RUNTIME DESTINATION bin)
if(TARGET glassbox)
  install(TARGETS glassbox RUNTIME DESTINATION bin)
  install(FILES ${CMAKE_SOURCE_DIR}/packaging/glassbox.desktop DESTINATION share/applications)
  install(FILES ${CMAKE_SOURCE_DIR}/packaging/glassbox.svg DESTINATION share/icons/hicolor/scalable/apps)
endif()

# The default model: assets/models/DEFAULT and the folder it names, nothing else that may lie in assets/models/
# of a working tree (a downloaded GPT-2 would otherwise end up in the package).
file(STRINGS ${CMAKE_SOURCE_DIR}/assets/models/DEFAULT GLASSBOX_DEFAULT_MODEL LIMIT_COUNT 1)
string(STRIP "${GLASSBOX_DEFAULT_MODEL}" GLASSBOX_DEFAULT_MODEL)
if(GLASSBOX_DEFAULT_MODEL STREQUAL "" OR NOT EXISTS ${CMAKE_SOURCE_DIR}/assets/models/${GLASSBOX_DEFAULT_MODEL}/config.json)
  message(FATAL_ERROR "assets/models/DEFAULT does not name a model folder with a config.json")
endif()
install(FILES ${CMAKE_SOURCE_DIR}/assets/models/DEFAULT DESTINATION ${GLASSBOX_INSTALL_ASSETS}/models)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/assets/models/${GLASSBOX_DEFAULT_MODEL}
        DESTINATION ${GLASSBOX_INSTALL_ASSETS}/models)
# The SAE shipped for it (tools/train_default_sae.py): assets/saes/DEFAULT and the folder it names, without the
# feature-index caches (glassbox-index-*.bin) that `glassbox-cli feature` may have written beside it.
if(EXISTS ${CMAKE_SOURCE_DIR}/assets/saes/DEFAULT)
  file(STRINGS ${CMAKE_SOURCE_DIR}/assets/saes/DEFAULT GLASSBOX_DEFAULT_SAE LIMIT_COUNT 1)
  string(STRIP "${GLASSBOX_DEFAULT_SAE}" GLASSBOX_DEFAULT_SAE)
  if(GLASSBOX_DEFAULT_SAE STREQUAL "" OR NOT EXISTS ${CMAKE_SOURCE_DIR}/assets/saes/${GLASSBOX_DEFAULT_SAE}/cfg.json)
    message(FATAL_ERROR "assets/saes/DEFAULT does not name an SAE folder with a cfg.json")
  endif()
  install(FILES ${CMAKE_SOURCE_DIR}/assets/saes/DEFAULT DESTINATION ${GLASSBOX_INSTALL_ASSETS}/saes)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/assets/saes/${GLASSBOX_DEFAULT_SAE} DESTINATION ${GLASSBOX_INSTALL_ASSETS}/saes
          PATTERN "glassbox-index-*" EXCLUDE PATTERN "train_state.bin" EXCLUDE)
endif()

# The transcoder set shipped for it (tools/train_default_transcoders.py): assets/transcoders/<the model's folder>,
# which graph and intervene use on the default model without --transcoders.
if(EXISTS ${CMAKE_SOURCE_DIR}/assets/transcoders/${GLASSBOX_DEFAULT_MODEL}/layer_0.safetensors)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/assets/transcoders/${GLASSBOX_DEFAULT_MODEL}
          DESTINATION ${GLASSBOX_INSTALL_ASSETS}/transcoders)
endif()

# Man pages, written at build time by help2man from each program's own --help and --version, with the sections
# --help does not hold (description, files, environment, see also) from packaging/<program>.h2m.
find_program(HELP2MAN help2man)
if(HELP2MAN)
  set(man_pages)
  foreach(prog glassbox-cli glassbox)
    if(NOT TARGET ${prog})
      continue()
    endif()
    set(page ${CMAKE_BINARY_DIR}/man/${prog}.1)
    # help2man runs this command line with --help and --version; the app's wrapped synopsis is joined first
    set(run $<TARGET_FILE:${prog}>)
    if(prog STREQUAL "glassbox")
      set(run "${CMAKE_SOURCE_DIR}/packaging/usage-for-man.sh $<TARGET_FILE:${prog}>")
    endif()
    add_custom_command(
      OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${HELP2MAN} --no-info --section=1 --include=${CMAKE_SOURCE_DIR}/packaging/${prog}.h2m
              --output=${page} ${run}
      DEPENDS ${prog} ${CMAKE_SOURCE_DIR}/packaging/${prog}.h2m ${CMAKE_SOURCE_DIR}/packaging/usage-for-man.sh
      COMMENT "Writing the man page of ${prog} from its --help"
      VERBATIM)
    list(APPEND man_pages ${page})
  endforeach()
  add_custom_target(glassbox_man ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION share/man/man1)
else()
  message(WARNING "help2man not found: no man pages are built or installed (run tools/setup.sh)")
endif()

# ---- the .deb ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME glassbox)
set(CPACK_PACKAGE_VENDOR "Glassbox")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "desktop microscope for transformer language models")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON) # the build keeps its symbols; the package does not need them
set(GLASSBOX_MAINTAINER "Glassbox developers <glassbox@example.org>" CACHE STRING "the .deb's Maintainer field")
set(CPACK_PACKAGE_CONTACT "${GLASSBOX_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # glassbox_0.4.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# the extended description (CPack puts the summary above it and indents it as Debian's control format wants)
set(CPACK_PACKAGE_DESCRIPTION "Type a prompt and see every attention head's pattern, the residual stream's
norm through the layers, the logit lens, direct logit attribution, head scores and activation patching,
and what happens to the next-token prediction when residual connections, LayerNorm, attention or single
heads are knocked out. Runs offline on the CPU, on Hugging Face GPT-2, Llama, Mistral and Qwen2 folders,
GGUF files and llama2.c models, and ships a small GPT-2 trained by the project as its default model.
glassbox is the desktop app, glassbox-cli the same analyses from the command line.")
# Depends: the shared libraries the binaries link, found by dpkg-shlibdeps (runtime packages, never -dev ones:
# Dear ImGui, Eigen and nlohmann-json are linked statically or header-only), plus what it cannot see: GLFW and
# libepoxy load libGL at run time and the app reads DejaVu Sans from its path.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Recommends: what runs without being needed. libepoxy loads libEGL for --backend gl (the CPU is the fallback),
# Mesa's drivers render where there is no other, and WenQuanYi has the CJK glyphs.
if(TARGET glassbox)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libgl1, fonts-dejavu-core")
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libegl1, libgl1-mesa-dri, libegl-mesa0, fonts-wqy-microhei")
elseif(TARGET glassbox_gl)
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libegl1, libegl-mesa0")
endif()
include(CPack)
