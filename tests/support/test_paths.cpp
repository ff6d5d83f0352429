// See test_paths.h: the one file that carries the checkout's and the build folder's paths.
#include "test_paths.h"

const char* glassbox_source_dir() { return GB_TEST_SOURCE_DIR; }
const char* glassbox_binary_dir() { return GB_TEST_BINARY_DIR; }
