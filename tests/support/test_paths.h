// The checkout's and the build folder's paths, for tests that read the source tree's files or run the built
// programs. Only test_paths.cpp is compiled with them (CMake defines GB_TEST_SOURCE_DIR / GB_TEST_BINARY_DIR for
// that one file), so every other test compiles to the same object in any clone, and ccache reuses it there.
#pragma once

const char* glassbox_source_dir(); // "/path/to/checkout"
const char* glassbox_binary_dir(); // "/path/to/checkout/build"

#define GLASSBOX_SOURCE_DIR glassbox_source_dir()
#define GLASSBOX_BINARY_DIR glassbox_binary_dir()
