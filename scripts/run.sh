#!/usr/bin/env bash
# The main job on the default model, from a fresh clone: setup + build, then `gamma run`
# (fetch -> F16 teacher -> llama-imatrix -> streamed pool -> learn -> solve -> emit -> gamma's model
# beside the llama.cpp standard mix nearest in size, both measured against the teacher).
# Usage: scripts/run.sh [gamma run arguments]   (default: smollm2-135m at 4.75 bpw in ./gamma-run)
# Every step resumes from its files in the work directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh" >/dev/null
exec "$root/build/cli/gamma" run "$@"
