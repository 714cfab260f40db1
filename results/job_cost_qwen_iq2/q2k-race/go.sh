#!/usr/bin/env bash
# At Q2_K's size, from the cut-file job's own work directory (results/job_cost_qwen_cut/q2k):
# 1. the race rule of 72f2570 (--race-margin 0.03) on that run, resumed in a copy with its window
#    (--pool-window-iq2 -1): which file it chooses;
# 2. the plan the IQ2 window rule (--pool-window-iq2 1) makes of that choice's scores against the
#    run's own plan, paired on the same chunks (gamma compare) on both test texts.
set -u
T=/work/shared/data/text
G=/root/runs/s880w/b/cli/gamma
cd /root/runs/q2k-race
GAMMA_CACHE=$PWD/cache $G run qwen2.5-coder-1.5b --size 752880576 -w run -t 2 --pool-window-iq2 -1 > resume.log 2>&1
echo "resume exit $?"
cd /root/runs/q2kn
for f in wiki.test.raw python-eval.txt; do
  $G compare run/at-752880576/plan-gamma-cal-output-Q4_K.json /root/runs/q2k-iq2/plan-cal-q4k-iq2.json --pool run/pool \
    --teacher run/teacher-f16.gguf -f $T/$f --chunks 16 -c 512 -t 2 -q -o /root/runs/q2k-iq2/compare-$f.json
  echo "compare $f exit $?"
done
echo done
