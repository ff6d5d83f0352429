#!/usr/bin/env bash
# Configures and builds Glassbox into build/ (Release, tuned to this CPU).
#   tools/build.sh                      everything: the programs, the man pages and every test
#   tools/build.sh glassbox glassbox-cli  only those targets (./run.sh: the programs it runs)
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/ccache.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${CMAKE_LAUNCHER[@]}" >/dev/null
if (($#)); then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
