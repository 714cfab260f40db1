#!/usr/bin/env bash
# Packs the small state of go.sh's work directory into state.tar.xz beside this script: every
# file under run/ but the GGUFs (the imatrix excepted), the teacher's log-prob bases (*.kld), the
# streamed pool's made bytes (pool/stream, pool/fixed) and anything over 64 MiB, all of which
# go.sh's next run makes again, and a speed table (speed.json: this machine's kernel times, which
# another machine must measure again). Run it with the job stopped (between stages is enough:
# every file is written atomically). STATE names another archive (another job's go.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/work/runs/degrid-goal}
state=${STATE:-$here/state.tar.xz}
cd "$work/run"
find . -type f ! -path './pool/stream/*' ! -path './pool/fixed/*' ! -name '*.kld' ! -name '*.partial*' ! -name '*.lock' ! -name calib.txt ! -name python-valid.txt \
  ! -name speed.json \( ! -name '*.gguf' -o -name imatrix.gguf \) -size -64M -print0 | sort -z |
  tar --null -T - -cJf "$state.partial"
mv "$state.partial" "$state"
ls -l "$state"
