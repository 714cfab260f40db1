#!/usr/bin/env bash
# Issue 19 data point, on validation text only: --estimator st vs the soft scores that
# `gamma run` learned (SmolLM2, 4.75 bpw, same pool and recipe), each solved as size-log with
# --fill 0.995 at the run's file size, with the default and the Q5_1 embedding; KLD vs the
# teacher on wiki.valid.tokens (the run's own validation base file). Needs a finished
# `scripts/run.sh -w $RUN` first. Writes $OUT (default /tmp/gamma-st).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; W=${RUN:?set RUN to the gamma run work directory}; S=${OUT:-/tmp/gamma-st}
mkdir -p $S
size=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['size'])" $W/choice-4.75.json)
[ -f $S/scores-st.json ] || $G learn $W/pool --teacher $W/teacher-f32.gguf --bpw 4.75 --steps 300 --layers-per-step 6 \
  --calib-tokens 8192 -t 2 -q --estimator st -o $S/scores-st.json
for h in "" "--fixed token_embd.weight=Q5_1"; do
  if [ -n "$h" ]; then n=st-Q5_1; else n=st; fi
  $G solve --pool $W/pool --scores $S/scores-st.json --transform size-log --fill 0.995 --size $size $h -o $S/plan-$n.json
  $G emit $W/pool $S/plan-$n.json -o $S/$n.gguf > /dev/null
  $G eval $S/$n.gguf --teacher $W/teacher-f32.gguf --kld-base $W/teacher-logits-valid-c512-n8.kld \
    --text $root/../shared/data/text/wiki.valid.tokens --ctx 512 --chunks 8 -t 2 -q -o $S/$n.valid.json > /dev/null
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], j['model']['file_bytes'], j['kld']['mean'], j['kld']['stderr'])" \
    $S/$n.valid.json $n
done
