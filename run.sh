#!/usr/bin/env bash
# Quick start: install what is missing, build, and open Glassbox on the embedded default model.
# Extra arguments go to the app (e.g. ./run.sh --model path/to/gpt2).
set -euo pipefail
cd "$(dirname "$0")"
tools/setup.sh
# only the two programs: the tests are built by ./test.sh
tools/build.sh glassbox-cli $(pkg-config --exists imgui glfw3 epoxy 2>/dev/null && echo glassbox)
if [ -x build/glassbox ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  exec build/glassbox "$@"
fi
echo "(no display or no desktop app: running the CLI instead)"
exec build/glassbox-cli run --prompt "The cat sat on the mat. The cat sat on the" "$@"
