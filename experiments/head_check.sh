#!/usr/bin/env bash
# Produces: results/iq_qwen/head_choice.md (and head_choice/, in results/iq_qwen/data.tar.xz).
# Issue 19: why gamma solve --choose-head rescales the scores layer by layer. On the calibration
# text gamma layers measured on (calib-learn.txt, 4 x 512; never test or validation text), KLD vs
# the teacher of:
#   body-IQ3_S[-out-Q4_K|-embd-Q2_K]: every linear module at IQ3_S (the source's head, or one head
#     tensor lowered): is the body's cost the sum of its layers', and the head's the same in context?
#   hawq-IQ3_XS-o4e2 / -o5e3: HAWQ-V2's plans at IQ3_XS's size with the two heads, against what
#     one global factor (the layers' measured sum over what HAWQ-V2's raw scores say it costs) and the layer-scaled scores predict.
# Writes results/iq_qwen/head_choice/*.json and head_choice.md.
#   WORK=/tmp/gamma-qwen experiments/head_check.sh
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
G=$root/build/cli/gamma; W=${WORK:-/tmp/gamma-qwen}; R=$root/results/iq_qwen; O=$R/head_choice; T=${THREADS:-2}
L=$R/layers-IQ3_S-heads.json
mkdir -p $O
for v in body-IQ3_S: body-IQ3_S-out-Q4_K:output.weight=Q4_K body-IQ3_S-embd-Q2_K:token_embd.weight=Q2_K; do
  n=${v%%:*}; fx=${v#*:}
  [ -f $O/$n.plan.json ] || python3 - $L $W/pool-auto/manifest.json "$fx" $O/$n.plan.json <<'PY'
import json, sys
L, man, fx, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
plan = {"schema": "gamma.plan", "version": 1, "model_fingerprint": L["model_fingerprint"], "method": "head_check",
        "info": {}, "modules": {k: v["low"] for k, v in L["modules"].items()},
        "fixed": {f["name"]: f["source_type"] for f in man["fixed"]}}
if fx:
    t, ty = fx.split("=")
    plan["fixed"][t] = ty
json.dump(plan, open(out, "w"), indent=1)
PY
done
for h in o4e2 o5e3; do  # from disk or results/iq_qwen/data.tar.xz (experiments/kept.py)
  [ -f $O/hawq-IQ3_XS-$h.plan.json ] || python3 $root/experiments/kept.py cat $R/plans/hawq-size-IQ3_XS-$h.json > $O/hawq-IQ3_XS-$h.plan.json
done
for p in $O/*.plan.json; do
  n=$(basename $p .plan.json)
  [ -f $O/$n.calib.json ] && continue
  $G emit $W/pool-all $p -o /dev/shm/head-check.gguf > /dev/null
  $G eval /dev/shm/head-check.gguf --teacher $W/teacher-f32.gguf --kld-base $W/kld-base-calib-4.bin \
    --text $W/calib-learn.txt --ctx 512 --chunks 4 -t $T -q -o $O/$n.calib.json > /dev/null
done
rm -f /dev/shm/head-check.gguf
python3 $root/experiments/head_check_table.py $R $L $O | tee $R/head_choice.md
