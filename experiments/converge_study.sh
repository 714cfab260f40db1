#!/usr/bin/env bash
# Issue 44 item 4: Stage I with --converge against the full schedule, on a finished `gamma run` work
# directory (its pool, teacher, layers.json and the learn command gamma run gave). For each tolerance:
# the steps run and seconds (the full schedule measured again in the same conditions), the plans
# of the raw deltas (gamma) and of the layer-calibrated ones (gamma-cal) at the run's budget, and
# where a plan differs, gamma compare of the two files on both test texts (16 x 512, paired).
# Usage: experiments/converge_study.sh RUN_DIR OUT_DIR BPW STEPS SIZE [TOL...]   (GAMMA=... to use a copy)
# (BPW, STEPS: the run's learn target and schedule, e.g. 4.75 and 481 for SmolLM2's default job.)
set -euo pipefail
run=$1 out=$2 bpw=$3 steps=$4 size=$5; shift 5
tols=${*:-0.2 0.1}
G=${GAMMA:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/gamma}
data=$(cd "$(dirname "$0")/../../shared/data" && pwd)
mkdir -p "$out"
learn() {  # the command gamma run gives (src/run/scorers.cpp), and --converge $1
  local tol=$1 f=$out/scores-$1.json
  [ -f "$f" ] && return 0
  /usr/bin/time -f "%e s wall, %M KB" "$G" learn "$run/pool" --teacher "$run/teacher-f32.gguf" --bpw "$bpw" --steps "$steps" \
    --layers-per-step 1 --visit-steps 16 --forcing sublayer --estimator st --measure-every 2 --lr 0.05 --tau-end 0.05 \
    --layer-loss clip --calib-tokens 8192 --calib "$run/calib.txt" -t 2 -q --converge "$tol" -o "$f" 2> "$out/learn-$tol.time"
}
for t in 0 $tols; do learn "$t"; done
for t in 0 $tols; do
  "$G" solve "$run/pool" --scores "$out/scores-$t.json" --transform delta --size "$size" -o "$out/plan-$t-gamma.json" > /dev/null
  "$G" solve "$run/pool" --scores "$out/scores-$t.json" --transform delta --layer-scale "$run/layers.json" --size "$size" \
    -o "$out/plan-$t-gamma-cal.json" > /dev/null
done
. "$(dirname "$0")/compare_plans.sh"
for t in $tols; do
  for v in gamma gamma-cal; do
    compare_plans "$out/plan-0-$v.json" "$out/plan-$t-$v.json" "$run/pool" "$run/teacher-f32.gguf" "$out/compare-$t-$v"
  done
done
python3 "$(dirname "$0")/converge_table.py" "$out" $tols -o "$out/table.md" && cat "$out/table.md"
