#!/usr/bin/env bash
# The test command: set up, build, fetch the default model (SmolLM2-135M) and Gemma-3-270M, run every test;
# then the same suite again in the sanitizer build (build-asan/: gamma's own code, CLI and
# tests under AddressSanitizer + UndefinedBehaviorSanitizer; any report fails the run).
# ASAN=0 skips the second pass. Under CI (CI=true, 90 minutes on whatever machine the session
# had) the sanitizer pass runs every test that fits the time left, priced by the release pass's
# own times (scripts/ci_select.sh): all of them on this project's Xeon; CI_BUDGET_S sets the budget.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
t0=$(date +%s)
budget=${CI_BUDGET_S:-}
[ -z "$budget" ] && [ "${CI:-}" = true ] && budget=5400
left() { echo $(( budget - ($(date +%s) - t0) - 300 )); }  # 5 min kept for what follows the tests
bash "$root/scripts/build.sh"
"$root/build/cli/gamma" fetch smollm2-135m >/dev/null
"$root/build/cli/gamma" fetch gemma3-270m >/dev/null  # tests/test_gemma3.cpp: a second architecture
cd "$root/build"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 1800
[ "${ASAN:-1}" = 0 ] && exit 0
# A cold sanitizer build takes about 20 minutes on the Xeon: without them, no second pass.
if [ -n "$budget" ] && [ "$(left)" -lt 1200 ]; then
  echo "sanitizer pass: skipped, $(left) s of CI's time left after the release pass" >&2
  exit 0
fi
BUILD_DIR=build-asan CMAKE_EXTRA="-DGAMMA_SANITIZE=address,undefined" bash "$root/scripts/build.sh"
cd "$root/build-asan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=23
export LSAN_OPTIONS=suppressions=$root/cmake/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ -z "${ASAN_TESTS:-}" ] && [ -n "$budget" ]; then
  ASAN_TESTS=$(bash "$root/scripts/ci_select.sh" "$root/build/Testing/Temporary/CTestCostData.txt" "$(left)" "${JOBS:-2}")
  [ "$ASAN_TESTS" = NONE ] && { echo "sanitizer pass: skipped, no test fits CI's time left" >&2; exit 0; }
fi
start=$(date +%s)
ctest --output-on-failure -j "${JOBS:-2}" --timeout 1800 ${ASAN_TESTS:+-R "$ASAN_TESTS"}
echo "sanitizer suite: $(( $(date +%s) - start )) s" >&2
