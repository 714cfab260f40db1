#!/usr/bin/env bash
# Issue 19: per-chunk test KLDs for the goal table's files, so that GAMMA and HAWQ-V2 are compared
# pair by pair on the same 16 chunks (experiments/goal_table.py, paired columns). Each family's
# file at each size in SIZES (results/iq_qwen/goal_table.json) whose test evals predate
# kld.chunk_means is emitted again and re-evaluated on the same chunks against the same cached
# teacher log-probs; the new mean must equal the committed one to 1e-9 (else it stops, keeping the
# old file as NAME.TEXT.json.old).
#   WORK=/tmp/gamma-qwen SIZES="IQ3_XS bpw3.5" FAMS="GAMMA HAWQ-V2 blend" experiments/paired_evals.sh
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
G=$root/build/cli/gamma; W=${WORK:-/tmp/gamma-qwen}; R=$root/results/iq_qwen; T=${THREADS:-2}; CH=16
txt=$root/../shared/data/text
FAMS=${FAMS:-"GAMMA HAWQ-V2 blend"}
SIZES=${SIZES:-"IQ3_XS bpw3.5 Q3_K_S IQ3_S IQ3_M Q3_K_M"}
python3 $root/experiments/goal_table.py $R -o $R/goal_table.md > /dev/null
for size in $SIZES; do
  for fam in $FAMS; do
    n=$(python3 -c "
import json, sys
rows = [r for r in json.load(open('$R/goal_table.json'))['rows'] if r['size'] == '$size']
print(rows[0]['$fam']['variant'] if rows and '$fam' in rows[0] else '')")
    [ -n "$n" ] || continue
    todo=""
    for t in wiki py; do
      python3 -c "import json,sys; sys.exit(0 if 'chunk_means' in json.load(open('$R/evals/$n.$t.json'))['kld'] else 1)" || todo="$todo $t"
    done
    [ -n "$todo" ] || continue
    echo "[$(date -u +%H:%M:%S)] $size $fam: $n ($todo )"
    $G emit $W/pool-all $R/plans/$n.json -o $W/models/$n.gguf > /dev/null
    for t in $todo; do
      text=$([ $t = wiki ] && echo wiki.test.raw || echo python-eval.txt)
      mv $R/evals/$n.$t.json $R/evals/$n.$t.json.old
      $G eval $W/models/$n.gguf --teacher $W/teacher-f32.gguf --kld-base $W/kld-base-$t-$CH.bin --text $txt/$text \
        --ctx 512 --chunks $CH -t $T -q -o $R/evals/$n.$t.json > /dev/null
      python3 -c "
import json, sys
a, b = (json.load(open(f))['kld']['mean'] for f in sys.argv[1:])
sys.exit(0 if abs(a - b) <= 1e-9 else 'the re-evaluated mean %.9f differs from the committed %.9f' % (b, a))" \
        $R/evals/$n.$t.json.old $R/evals/$n.$t.json
      rm $R/evals/$n.$t.json.old
    done
    rm -f $W/models/$n.gguf
  done
done
python3 $root/experiments/goal_table.py $R -o $R/goal_table.md
