#!/usr/bin/env bash
# Quick start: install what is missing, build, and run every test: the suite (ctest), the fuzzers (60 s
# each), and the suite again under AddressSanitizer + UndefinedBehaviorSanitizer. GUI tests use xvfb-run.
#   ./test.sh            everything (45-60 minutes on 2 cores; docs/development.md)
#   FAST=1 ./test.sh     only the suite
set -euo pipefail
cd "$(dirname "$0")"
tools/setup.sh --tests
tools/build.sh
rm -rf build/test_tmp # scratch of earlier runs (tests write tiny models here)
(cd build && ctest --output-on-failure -j2)
if [ -z "${FAST:-}" ]; then
  tools/fuzz.sh "${FUZZ_SECONDS:-60}"
  tools/sanitize.sh
fi
