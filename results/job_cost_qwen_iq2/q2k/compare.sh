#!/usr/bin/env bash
# The Q2_K-size job's chosen file (72f2570) against the cut-file job's file chosen by the new race
# (resumed, c9078ce's window), and against the file that job chose, paired on both test texts.
set -u
T=/work/shared/data/text
G=/root/runs/s880w/b/cli/gamma
cd /root/runs/cq2k
NEW=/root/runs/sq2kw/run/gamma-752880576-gamma-cal-output-Q4_K.gguf
for f in wiki.test.raw python-eval.txt; do
  $G compare /root/runs/q2k-race/run/gamma-752880576-gamma-cal-output-Q4_K.gguf $NEW \
    --teacher /root/runs/sq2kw/run/teacher-f16.gguf -f $T/$f --chunks 16 -c 512 -t 2 -q -o compare-$f.json > compare-$f.log 2>&1
  echo "compare $f exit $?"
done
