#!/usr/bin/env bash
# Quick start: install what is missing, build, and run every test (ctest). GUI tests use xvfb-run.
set -euo pipefail
cd "$(dirname "$0")"
tools/setup.sh --tests
tools/build.sh
cd build
ctest --output-on-failure -j2 "$@"
