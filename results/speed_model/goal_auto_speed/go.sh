#!/usr/bin/env bash
# Issue 45's goal with `gamma run --min-decode mix` itself, its pool of auto-speed types (auto +
# Q3_K; Q4_0 fits no row of Qwen that 256-wide blocks cannot hold), on issue 47's de-gridded
# teacher. It starts on any machine from what does not depend on the candidates: the teacher made
# again from its seed (sha256 checked against ../../degrid_qwen/goal/teacher.sha256), and from
# issue 47's run state (../../degrid_qwen/goal/state.tar.xz) its imatrix, the mixes' predicted
# sizes and HAWQ-V2's Hessian traces (4,230 s to measure; `gamma hawq --traces-from` makes the new
# estimate's scores from them, as the run itself does for its real pool). The speed table, the
# mixes and the teacher's report log-probs are made by the run. Resumable: run it again.
#   GAMMA=path/to/gamma [WORK=dir] [SIZES=Q3_K_S,Q3_K_M] [STATE=file] [SPEED_FROM=file] bash go.sh [more gamma run options]
# STATE: the packed state to start from (default state.tar.xz here, Q3_K_M's run; another size's
# run names its own, e.g. state-IQ3_M.tar.xz, which need not exist yet). SPEED_FROM: a speed table
# this machine made for the same pool types (another size's run/speed.json), taken instead of
# timing the kernels again (33 min on the Xeon).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G=${GAMMA:-$here/../../../build/cli/gamma}
state=$here/../../degrid_qwen/goal
work=${WORK:-/root/gamma-work/speed-q3k}
mkdir -p "$work"
cd "$work"
# This run's own state, packed after a session's part by
# `STATE=$here/state.tar.xz WORK=... bash ../../degrid_qwen/goal/save.sh` (WORK must be the same
# path again: the manifests name the teacher by it).
state_file=${STATE:-$here/state.tar.xz}
if [ ! -d run ] && [ -f "$state_file" ]; then
  mkdir run.partial && tar -xJf "$state_file" -C run.partial && mv run.partial run
fi
mkdir -p run
[ -z "${SPEED_FROM:-}" ] || [ -f run/speed.json ] || cp "$SPEED_FROM" run/speed.json
# On a machine without the state's speed table the run times the kernels again, and the mix's
# speed by the new table is another budget than the one the state's pool window was chosen for:
# gamma run would refuse the window. The pool (and Stage I's scores on it) stays as chosen; the
# window's record is set aside, so the new table only steers the solves.
if [ ! -f run/speed.json ] && [ -f run/pool-only.json ] && [ -f run/pool/manifest.json ]; then
  mv run/pool-only.json run/pool-only.other-machine.json
fi
G=$G bash "$state/teacher.sh"
for f in imatrix.gguf imatrix.log mixes-predicted.json; do
  [ -f "run/$f" ] || tar -xJf "$state/state.tar.xz" -C run "./$f"
done
[ -f traces.json ] || tar -xJOf "$state/state.tar.xz" ./scores-hawq-estimate.json > traces.json
# The run's calibration text as gamma run writes it (src/util/data.cpp): the traces are keyed by it.
[ -f run/calib.txt ] || python3 - "${SHARED:-/work/shared/data}/text" run/calib.txt <<'PY'
import sys
a = open(sys.argv[1] + "/war-and-peace.txt", "rb").read()[:40000]
b = open(sys.argv[1] + "/python-calib.txt", "rb").read()[:36000]
open(sys.argv[2], "wb").write(a + (b"" if a.endswith(b"\n") else b"\n") + b)
PY
if [ ! -f run/estimate/manifest.json ]; then
  "$G" pool teacher-dither1.gguf --types auto-speed --estimate-rows 128 -o run/estimate -t 2 -q --imatrix run/imatrix.gguf
fi
if [ ! -f run/scores-hawq-estimate.json ]; then
  "$G" hawq run/estimate --teacher teacher-dither1.gguf --calib run/calib.txt --samples 4 --seqs 4 --calib-tokens 4096 \
    --seq-len 256 -t 2 -q -o run/scores-hawq-estimate.json --traces-from traces.json
fi
exec "$G" run teacher-dither1.gguf --size "${SIZES:-Q3_K_S,Q3_K_M}" --min-decode mix --stream-pool \
  --text wiki,python --valid-text wiki,python --chunks 16 --valid-chunks 8 --no-front -w run -t 2 "$@"
