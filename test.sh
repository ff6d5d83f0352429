#!/usr/bin/env bash
# Quick start: install what is missing, build, and run every test: the suite (ctest), the fuzzers (60 s
# each), and the suite again under AddressSanitizer + UndefinedBehaviorSanitizer (less the heavy tests named in
# tools/asan_skip.txt). GUI tests run the app on Xvfb.
#   ./test.sh            everything (about 34 minutes on 2 cores with a cold compiler cache; docs/development.md,
#                        "What ./test.sh costs")
#   FAST=1 ./test.sh     only the suite
# Each step ends with a line "test.sh: STEP took MmSSs"; the last one gives the total.
set -euo pipefail
cd "$(dirname "$0")"
t0=$SECONDS
step() { # step NAME COMMAND...: runs it and says how long it took
  local s=$SECONDS name=$1; shift
  "$@"
  printf 'test.sh: %s took %dm%02ds\n' "$name" $(((SECONDS - s) / 60)) $(((SECONDS - s) % 60))
}
suite() { rm -rf build/test_tmp && (cd build && ctest --output-on-failure -j2); } # test_tmp: earlier runs' scratch
step setup tools/setup.sh --tests
step build tools/build.sh
step suite suite
if [ -z "${FAST:-}" ]; then
  step fuzz tools/fuzz.sh "${FUZZ_SECONDS:-60}"
  step sanitize tools/sanitize.sh
fi
printf 'test.sh: everything took %dm%02ds\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60))
