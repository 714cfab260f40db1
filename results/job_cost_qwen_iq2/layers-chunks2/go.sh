#!/usr/bin/env bash
# Lever study for issue 44 (quality only; timed under the CI proof's load): gamma layers on 2
# chunks instead of 4 over the 880MiB job's own pool, and what the layer-calibrated variants'
# plans at 880MiB make of it (same Stage I scores).
set -u
G=/work/main/build/cli/gamma
R=/root/runs/s880w/run
cd /root/runs/lc2
/usr/bin/time -v -o layers2.time $G layers $R/pool --teacher $R/teacher-f16.gguf --calib $R/calib.txt -c 512 --chunks 2 \
  --kld-base base2.kld -t 2 -q -o layers2.json > layers2.log 2>&1
echo "layers exit $?"
for L in $R/layers.json layers2.json; do
  t=$(basename $L .json)
  for h in Q4_K Q5_K; do
    $G solve $R/pool --scores $R/scores-gamma-3.81-c0.2.json --transform delta --layer-scale $L --fixed output.weight=$h \
      --size 922746880 -o cal-$h-$t.json > /dev/null
  done
done
python3 - <<'P'
import json
for h in ("Q4_K","Q5_K"):
    a=json.load(open(f"cal-{h}-layers.json"))["modules"]; b=json.load(open(f"cal-{h}-layers2.json"))["modules"]
    print(h, "modules changed:", sum(a[k]!=b[k] for k in a))
r=json.load(open("/root/runs/s880w/run/at-922746880/plan-gamma-cal-output-Q4_K.json"))["modules"]
a=json.load(open("cal-Q4_K-layers.json"))["modules"]
print("check: 4-chunk re-solve equals the run's plan:", a==r)
l4=[x["kld"] for x in json.load(open("/root/runs/s880w/run/layers.json"))["layers"]]
l2=[x["kld"] for x in json.load(open("layers2.json"))["layers"]]
import statistics
print("layer KLD ratio 2/4 chunks: median", statistics.median(b/a for a,b in zip(l4,l2)), "min", min(b/a for a,b in zip(l4,l2)), "max", max(b/a for a,b in zip(l4,l2)))
P
