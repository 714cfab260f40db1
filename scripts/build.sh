#!/usr/bin/env bash
# Setup (apt + pinned llama.cpp sdist) and build gamma with the llama.cpp tools, in build/
# (BUILD_DIR overrides; CMAKE_EXTRA adds configure options, e.g. the sanitizer build's).
# ccache keeps a second build of the same sources to about a minute.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Paths relative to the checkout in ccache's keys, so a clone elsewhere (CI's) reuses the objects;
# and not the build directory, which ccache hashes for objects with debug information (the
# sanitizer build's -g1: its 84 objects were all compiled again in another clone). The cost: an
# ASan report's source paths may name the clone that compiled them first.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
llama_dir=$(bash "$root/scripts/setup.sh" | tail -n 1)
jobs=${JOBS:-$(nproc)}
dir=$root/${BUILD_DIR:-build}
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DGAMMA_LLAMA_DIR="$llama_dir" ${CMAKE_EXTRA:-} >/dev/null
cmake --build "$dir" -j "$jobs"
