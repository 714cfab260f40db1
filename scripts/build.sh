#!/usr/bin/env bash
# Setup (apt + pinned llama.cpp sdist) and build gamma with the llama.cpp tools, in build/.
# ccache keeps a second build of the same sources to about a minute.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama_dir=$(bash "$root/scripts/setup.sh" | tail -n 1)
jobs=${JOBS:-$(nproc)}
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DGAMMA_LLAMA_DIR="$llama_dir" >/dev/null
cmake --build "$root/build" -j "$jobs"
