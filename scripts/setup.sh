#!/usr/bin/env bash
# One setup path for a fresh Debian 12 machine that reaches only the package registries:
#   1. apt packages (compilers, LibTorch, OpenBLAS, CLI11, json, fmt, gtest, CBC, ccache, ...)
#   2. the pinned llama-cpp-python sdist from PyPI, sha256-checked, unpacked into the cache;
#      its vendor/llama.cpp is built as part of gamma's own CMake build (cmake/llama.cmake).
# Idempotent: a second run finds everything in place and returns in about a second.
# Prints the llama.cpp source directory on its last line.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
APT_PACKAGES=(build-essential cmake ccache git python3-pip unzip
  libtorch-dev libopenblas0-pthread libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev coinor-libcbc-dev libssl-dev libcairo2-dev
  libgloo-dev)  # the Gloo headers of LibTorch's c10d (distributed Stage I); the library is in libtorch

cache="${GAMMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gamma}"
deps="$cache/deps"
mkdir -p "$deps"

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi

src="$deps/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION"
if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
  tmp=$(mktemp -d "$deps/.dl.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "setup: fetching llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist" >&2
  python3 -m pip download -q --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$tmp" >&2
  tarball="$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
  got=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ "$got" != "$LLAMA_CPP_PYTHON_SHA256" ]; then
    echo "setup: sha256 mismatch for $tarball: got $got, want $LLAMA_CPP_PYTHON_SHA256" >&2
    exit 1
  fi
  tar -xzf "$tarball" -C "$tmp"
  rm -rf "$src"
  mv "$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION" "$src"   # atomic: same filesystem
fi
echo "$src/vendor/llama.cpp"
