#!/usr/bin/env bash
# Issue 47's de-gridded teacher in the current directory, as teacher-dither1.gguf: linked or copied
# from TEACHER (a copy made elsewhere) when given, else made from the seed (`gamma dequantize
# --dither 1` of the fetched Q4_K_M source); its sha256 checked once against teacher.sha256 here.
#   G=path/to/gamma [TEACHER=file] bash teacher.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f teacher-dither1.gguf ]; then
  if [ -n "${TEACHER:-}" ]; then
    ln "$TEACHER" teacher-dither1.gguf 2>/dev/null || cp "$TEACHER" teacher-dither1.gguf
  else
    src=$("$G" fetch qwen2.5-coder-1.5b)
    "$G" dequantize --dither 1 "$src" -o teacher-dither1.partial.gguf
    mv teacher-dither1.partial.gguf teacher-dither1.gguf
  fi
fi
if [ ! -f teacher.checked ]; then
  sha=$(sha256sum teacher-dither1.gguf | cut -d' ' -f1)
  [ "$sha" = "$(cat "$here/teacher.sha256")" ] || { echo "teacher.sh: teacher-dither1.gguf is $sha, not issue 47's" >&2; exit 1; }
  touch teacher.checked
fi
