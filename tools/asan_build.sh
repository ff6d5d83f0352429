# Sourced by tools/sanitize.sh and tools/fuzz.sh (after tools/ccache.sh): asan_configure DIR configures the one
# sanitizer build both use: clang 14 with AddressSanitizer + UndefinedBehaviorSanitizer, the tests and the app,
# and the fuzzers (GLASSBOX_FUZZ: libFuzzer's coverage in the folders that read files). clang compiles it in about
# half gcc's time, and the fuzzers no longer need a build of their own (docs/development.md, "What ./test.sh
# costs"). A folder configured with another compiler (build-asan/ was gcc's until 2026-12-03) is emptied first:
# CMake cannot change a build folder's compiler in place.
asan_configure() {
  local dir=$1
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++-14$' "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASSBOX_SANITIZE=ON \
    -DGLASSBOX_FUZZ=ON "${CMAKE_LAUNCHER[@]}" >/dev/null
}
