#!/usr/bin/env bash
# The layer-calibrated 880MiB plan (head Q4_K) with gamma layers on 2 chunks against 4 (the run's), paired.
set -u
T=/work/shared/data/text
G=/work/main/build/cli/gamma
R=/root/runs/s880w/run
cd /root/runs/lc2
for f in wiki.test.raw python-eval.txt; do
  $G compare $R/at-922746880/plan-gamma-cal-output-Q4_K.json cal-Q4_K-layers2.json --pool $R/pool --teacher $R/teacher-f16.gguf \
    -f $T/$f --chunks 16 -c 512 -t 2 -q -o compare-$f.json > compare-$f.log 2>&1
  echo "compare $f exit $?"
done
