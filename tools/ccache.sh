# Sourced by tools/build.sh, fuzz.sh and sanitize.sh: when ccache is installed (tools/setup.sh installs it), CMake
# compiles through it, with paths taken relative to the checkout so that another clone of the same commit (CI's,
# a second worktree) reuses the same cache entries. CCACHE_DIR (default ~/.cache/ccache) holds the cache;
# GLASSBOX_CCACHE=0 turns it off.
CMAKE_LAUNCHER=()
if [ "${GLASSBOX_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  export CCACHE_NOHASHDIR=1
  CMAKE_LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
