#!/usr/bin/env bash
# Produces: results/iq_qwen/plans/search-size-Q2_K-*s* and evals/search-size-Q2_K-*s* (in results/iq_qwen/data.tar.xz).
# Evaluates the WALL=823 (or WALL=N) search (experiments/search_qwen.sh) on both test texts (16 x 512) and
# the starting static plan on the search's own calibration chunks; copies plan + state to results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd); G=$root/build/cli/gamma; W=${WORK:-/tmp/gamma-qwen}; R=$root/results/iq_qwen; txt=$root/../shared/data/text
python3 "$root/experiments/kept.py" extract $R  # its evals/, plans/, ... are kept in $R/data.tar.xz
WALL=${WALL:-823}; S=$W/search; n=search-size-Q2_K-${WALL}s
cp $S/search-Q2_K-$WALL.json $R/plans/$n.json
cp $S/search-Q2_K-$WALL.json.state.json $R/plans/$n.state.json
$G emit $W/pool-all $R/plans/$n.json -o $W/models/$n.gguf > /dev/null
for f in wiki.test.raw:wiki python-eval.txt:py; do
  $G eval $W/models/$n.gguf --teacher $W/teacher-f32.gguf --kld-base $W/kld-base-${f##*:}-16.bin --text $txt/${f%%:*} --ctx 512 --chunks 16 -t 2 -q -o $R/evals/$n.${f##*:}.json > /dev/null
done
rm -f $W/models/$n.gguf*
# the starting plan's fitness on the search's own calibration chunks (once)
[ -f $R/evals/static-size-Q2_K-o5e2.search-calib.json ] && { echo done; exit 0; }
$G emit $W/pool-all $R/plans/static-size-Q2_K-o5e2.json -o /dev/shm/init.gguf > /dev/null
$G eval /dev/shm/init.gguf --teacher $W/teacher-f32.gguf --kld-base $S/search-Q2_K-823.json.teacher.kld --text $W/calib-learn.txt --ctx 512 --chunks 4 -t 2 -q -o $R/evals/static-size-Q2_K-o5e2.search-calib.json > /dev/null
rm -f /dev/shm/init.gguf*
echo done
