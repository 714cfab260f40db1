#!/usr/bin/env bash
# Issue 44 item 4, HAWQ-V2's half: the Hutchinson traces with `gamma hawq --converge TOL` against a
# fixed number of probes, on a finished `gamma run` work directory (its estimate, teacher, pool and
# calibration text, the hawq command gamma run gives: src/run/prune.cpp). For each setting: the
# seconds and probes run, the real pool's HAWQ-V2 scores from those traces (--traces-from, as gamma
# run scores it), the plan at the run's size, and the modules it changes against the reference
# (the most probes, no tolerance); where a plan differs, gamma compare of the two files on both
# test texts (16 x 512, paired).
# Usage: experiments/hawq_converge_study.sh RUN_DIR OUT_DIR SIZE [SETTING...]
#   SETTING: SAMPLES:TOL, e.g. 4:0 (gamma run's default) 8:0.1 8:0.2; the reference is 8:0 (GAMMA=... to use a copy)
set -euo pipefail
run=$1 out=$2 size=$3; shift 3
settings=${*:-4:0 8:0.2 8:0.1}
G=${GAMMA:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/gamma}
data=$(cd "$(dirname "$0")/../../shared/data" && pwd)
mkdir -p "$out"
# run.json's teacher, relative to where gamma run ran (the work directory's parent) unless absolute
teacher=$(python3 -c 'import glob, json, os, sys; t = json.load(open(sorted(glob.glob(sys.argv[1] + "/run*.json"))[0]))["teacher"]; print(t if os.path.isabs(t) else os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), t))' "$run")
hawq() {  # $1 SAMPLES:TOL -> $out/traces-$1.json (on the estimate) and $out/scores-$1.json (the real pool)
  local s=${1%%:*} tol=${1##*:} conv=()
  [ "$tol" != 0 ] && conv=(--converge "$tol")
  local common=(--teacher "$teacher" --calib "$run/calib.txt" --samples "$s" --seqs 4 --calib-tokens 4096
                --seq-len 256 -t 2 -q "${conv[@]}")
  [ -f "$out/traces-$1.json" ] || /usr/bin/time -f "%e" -o "$out/traces-$1.time" \
      "$G" hawq "$run/estimate" "${common[@]}" -o "$out/traces-$1.json" > /dev/null
  [ -f "$out/scores-$1.json" ] || "$G" hawq "$run/pool" "${common[@]}" --traces-from "$out/traces-$1.json" \
      -o "$out/scores-$1.json" > /dev/null
  [ -f "$out/plan-$1.json" ] || "$G" solve "$run/pool" --scores "$out/scores-$1.json" --size "$size" -o "$out/plan-$1.json" > /dev/null
}
for st in 8:0 $settings; do hawq "$st"; done
. "$(dirname "$0")/compare_plans.sh"
for st in $settings; do
  compare_plans "$out/plan-8:0.json" "$out/plan-$st.json" "$run/pool" "$teacher" "$out/compare-$st"
done
python3 "$(dirname "$0")/hawq_converge_table.py" "$out" $settings -o "$out/table.md" && cat "$out/table.md"
