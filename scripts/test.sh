#!/usr/bin/env bash
# The test command: set up, build, fetch the default model (SmolLM2-135M) and Gemma-3-270M, run every test;
# then the same suite again in the sanitizer build (build-asan/: gamma's own code, CLI and
# tests under AddressSanitizer + UndefinedBehaviorSanitizer; any report fails the run).
# ASAN=0 skips the second pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
"$root/build/cli/gamma" fetch smollm2-135m >/dev/null
"$root/build/cli/gamma" fetch gemma3-270m >/dev/null  # tests/test_gemma3.cpp: a second architecture
cd "$root/build"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 1800
[ "${ASAN:-1}" = 0 ] && exit 0
BUILD_DIR=build-asan CMAKE_EXTRA="-DGAMMA_SANITIZE=address,undefined" bash "$root/scripts/build.sh"
cd "$root/build-asan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=23
export LSAN_OPTIONS=suppressions=$root/cmake/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
start=$(date +%s)
ctest --output-on-failure -j "${JOBS:-2}" --timeout 1800 ${ASAN_TESTS:+-R "$ASAN_TESTS"}
echo "sanitizer suite: $(( $(date +%s) - start )) s" >&2
