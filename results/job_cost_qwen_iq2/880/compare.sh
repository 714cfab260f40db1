#!/usr/bin/env bash
set -u
T=/work/shared/data/text
G=/root/runs/s880w/b/cli/gamma
cd /root/runs/c880
for f in wiki.test.raw python-eval.txt; do
  $G compare /root/runs/s880n/run/gamma-922746880-gamma-cal-output-Q4_K.gguf /root/runs/s880w/run/gamma-922746880-gamma-cal-output-Q4_K.gguf \
    --teacher /root/runs/s880w/run/teacher-f16.gguf -f $T/$f --chunks 16 -c 512 -t 2 -q -o compare-$f.json > compare-$f.log 2>&1
  echo "compare $f exit $?"
done
bash /root/runs/q2k-iq2/go.sh   # then the Q2_K study (../q2k/)
