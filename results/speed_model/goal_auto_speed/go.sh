#!/usr/bin/env bash
# Issue 45's goal at Q3_K_S's and Q3_K_M's sizes with `gamma run --min-decode mix` itself, its pool
# of auto-speed types (auto + Q3_K; Q4_0 fits no row of Qwen that 256-wide blocks cannot hold), on
# issue 47's de-gridded teacher. The work directory starts from the speed race's
# (/work/runs/speed-degrid, results/speed_model/goal_degrid/) by what does not depend on the
# candidates: the teacher, the imatrix, the speed table (the run times Q3_K into it where it
# lacks it), the mixes and their evaluations, the report texts' teacher log-probs, and HAWQ-V2's
# Hessian traces (measured in 4,230 s there; the run's own rescoring of a new pool from an
# estimate's traces, `gamma hawq --traces-from`, makes the new estimate's scores from them).
#   GAMMA=path/to/gamma bash go.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G=${GAMMA:-$here/../../../build/cli/gamma}
S=${FROM:-/work/runs/speed-degrid}
work=${WORK:-/work/runs/speed-q3k}
mkdir -p "$work/run"
cd "$work"
[ -f teacher-dither1.gguf ] || ln -f "$S/teacher-dither1.gguf" .
for f in imatrix.gguf imatrix.log calib.txt python-valid.txt mixes-predicted.json \
         teacher-report-python-eval-c512-n16.kld teacher-report-wiki.test-c512-n16.kld; do
  [ -f "run/$f" ] || ln -f "$S/run/$f" "run/$f"
done
for f in "$S"/run/llama-*; do [ -f "run/$(basename "$f")" ] || ln -f "$f" run/; done
[ -f run/speed.json ] || cp "$S/run/speed.json" run/speed.json
if [ ! -f run/estimate/manifest.json ]; then
  "$G" pool teacher-dither1.gguf --types auto-speed --estimate-rows 128 -o run/estimate -t 2 -q --imatrix run/imatrix.gguf
fi
if [ ! -f run/scores-hawq-estimate.json ]; then
  "$G" hawq run/estimate --teacher teacher-dither1.gguf --calib run/calib.txt --samples 4 --seqs 4 --calib-tokens 4096 \
    --seq-len 256 -t 2 -q -o run/scores-hawq-estimate.json --traces-from "$S/run/scores-hawq-estimate.json"
fi
exec "$G" run teacher-dither1.gguf --size Q3_K_S,Q3_K_M --min-decode mix --stream-pool \
  --text wiki,python --valid-text wiki,python --chunks 16 --valid-chunks 8 --no-front -w run -t 2
