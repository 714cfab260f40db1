#!/usr/bin/env bash
# Issue 45: the default job (SmolLM2-135M, its budget 95,044,832 bytes) under a speed budget, "at
# least as fast as llama.cpp's Q4_0 of this model", now with the auto-speed pool (a speed budget adds
# Q3_K and, on SmolLM2's 576-wide rows that 256-wide blocks cannot hold, Q4_0). The same command as
# ../smollm2_min_decode_q4_0/go.sh (whose pool had no Q4_0: 0.94x / 0.88x the mix). Resumable:
# run again in the same work directory.
#   WORK=/work/runs/sm45b bash go.sh      (WORK/b/cli/gamma: the binary, frozen)
set -uo pipefail
work=${WORK:-/work/runs/sm45b}
cd "$work"
[ -f start.epoch ] || date +%s > start.epoch
/usr/bin/time -v -o time.txt ./b/cli/gamma run smollm2-135m --size 95044832 --min-decode Q4_0 -w run -t 2 \
  --text wiki,python --chunks 16 --valid-chunks 8 --bench-rounds 3 "$@" > "run-$(date +%H%M).log" 2>&1
echo "exit $?" >> time.txt
date +%s > end.epoch
