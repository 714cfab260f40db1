#!/usr/bin/env bash
# Every variant of the two cut-file jobs emitted from its run's pool and measured on all 8
# validation chunks (wiki.valid.tokens, 8 x 512), to simulate race rules (experiments/race_sim.py).
set -u
T=/work/shared/data/text
for spec in q2kn:752880576 s880n:922746880; do
  run=${spec%%:*}; at=${spec##*:}
  cd /root/runs/$run
  G=./b/cli/gamma
  out=/root/runs/racefull/$run/at-$at; mkdir -p $out
  base=/root/runs/racefull/$run/teacher-valid.kld
  for p in run/at-$at/plan-*.json; do
    n=$(basename $p .json); n=${n#plan-}
    j=$out/$n.valid-wiki.valid-c512-n8.json
    [ -s $j ] && continue
    if [ -s run/at-$at/$n.valid-wiki.valid-c512-n8.json ]; then cp run/at-$at/$n.valid-wiki.valid-c512-n8.json $j; continue; fi
    $G emit run/pool $p -o /root/runs/racefull/tmp.gguf -t 2 >/dev/null 2>&1 || { echo "emit $run $n failed"; continue; }
    $G eval /root/runs/racefull/tmp.gguf -f $T/wiki.valid.tokens --teacher run/teacher-f16.gguf --kld-base $base --chunks 8 -c 512 -t 2 -q -o $j.tmp && mv $j.tmp $j
    echo "$(date +%T) $run $n $(python3 -c "import json;print(json.load(open('$j'))['kld']['mean'])")"
  done
done
rm -f /root/runs/racefull/tmp.gguf
echo done
