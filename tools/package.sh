#!/usr/bin/env bash
# Builds the Debian package: a portable build (no -march=native, no tests, no fallback to this source tree's
# assets/) in build-package/, then cpack. Prints the .deb's path. Install it with: apt install ./glassbox_*.deb
#   tools/package.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bd=${PACKAGE_BUILD_DIR:-build-package}
cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Release -DGLASSBOX_NATIVE=OFF -DGLASSBOX_TESTS=OFF \
  -DGLASSBOX_SOURCE_ASSETS=OFF "$@" >/dev/null
cmake --build "$bd" -j"$(nproc)" >/dev/null
rm -f "$bd"/glassbox_*.deb # only this build's package is left to print
log=$(cd "$bd" && cpack -G DEB 2>&1) || { echo "$log" >&2; exit 1; } # quiet unless it fails
deb=$(ls "$bd"/glassbox_*.deb)
echo "$PWD/$deb"
