#!/usr/bin/env bash
# A work directory on the de-gridded teacher made again in the current directory on a machine that
# has nothing: the teacher (teacher.sh: linked from TEACHER or made from the seed, sha256 checked),
# run/ unpacked from the state archive given, and run/speed.json from SPEED (a speed table this
# machine's kind made for the same teacher, .json or .json.xz; `gamma solve` refuses one made on
# another ggml build or CPU signature). Each step is skipped when its output is there.
#   G=path/to/gamma [TEACHER=file] SPEED=table bash workdir.sh STATE.tar.xz
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/teacher.sh"
if [ ! -d run ]; then
  mkdir run.partial && tar -xJf "$1" -C run.partial && mv run.partial run
fi
if [ ! -f run/speed.json ]; then
  case "${SPEED:?name a speed table with SPEED=}" in
    *.xz) xz -dc "$SPEED" > run/speed.partial.json ;;
    *) cp "$SPEED" run/speed.partial.json ;;
  esac
  mv run/speed.partial.json run/speed.json
fi
