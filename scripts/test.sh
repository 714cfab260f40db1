#!/usr/bin/env bash
# The test command: set up, build, fetch the default model (SmolLM2-135M), run every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh"
"$root/build/cli/gamma" fetch smollm2-135m >/dev/null
cd "$root/build"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 1800
