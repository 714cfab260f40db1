#!/usr/bin/env bash
# front.sh on a machine that has nothing: the Q3_K_M run's work directory made again from
# state.tar.xz (its small files: the pool's manifest, Stage I's and HAWQ-V2's scores, layers.json,
# the imatrix), the de-gridded teacher linked from TEACHER (a copy made elsewhere from the seed;
# its sha256 checked here) or made again, and a speed table this machine's kind made for the same
# teacher (SPEED: speed.json or .json.xz). The variant is the run's choice after try 3
# (gamma-cal-output-Q4_K); try 3's own plan file was not kept, so PLAN is the same recipe's plan
# from try 1's budget (the same scores, transform, layer scale and head; front.sh re-solves it).
#   GAMMA=build/cli/gamma TEACHER=/work/runs/degrid-goal/teacher-dither1.gguf \
#     SPEED=epyc-2026-12-05/speed.json.xz FROM=Q3_K_M bash front_fresh.sh Q3_K_S 0 1.0 1.1 1.2
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G=${GAMMA:-/work/main/build/cli/gamma}
W=/root/gamma-work/speed-q3k   # the manifests name the teacher here
mkdir -p "$W"
cd "$W"
G=$G bash "$here/../../degrid_qwen/goal/workdir.sh" "$here/state.tar.xz"
PLAN=${PLAN:-run/at-924456512-tg28.010399999999997/plan-gamma-cal-output-Q4_K.json} GAMMA=$G W=$W bash "$here/front.sh" "$@"
