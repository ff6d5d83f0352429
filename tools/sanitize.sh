#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, clang: the build
# tools/fuzz.sh uses too) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/ccache.sh
. tools/asan_build.sh
asan_configure build-asan
cmake --build build-asan -j"$(nproc)" >/dev/null
echo "sanitize.sh: the ASan build took $((SECONDS / 60))m$((SECONDS % 60))s"
# Mesa, X and fontconfig keep allocations until exit by design; our own leaks are still reported
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp:print_suppressions=0"
# intercept_tls_get_addr=0: GCC 12's runtime records a bogus dynamic-TLS block for the main thread after Mesa's
# drivers are loaded in the GUI (seen as "DTLS 12 at 0x11bd-0x18000022bf" with LSAN_OPTIONS=verbosity=1:log_threads=1),
# and the leak check's tracer then dies reading it ("Tracer caught signal 11"). Static TLS, where our
# thread_local scratch lives, is still scanned; only the dlopen'ed libraries' TLS is not, and those are suppressed.
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# the tests tools/asan_skip.txt names (with its reasons) run in the Release suite only
skip=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' tools/asan_skip.txt | paste -sd'|')
cd build-asan
ctest --output-on-failure -j2 -E "^($skip)\$" "$@"
