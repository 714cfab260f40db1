#!/usr/bin/env bash
# Produces: the search runs in WORK/search (experiments/search_qwen_eval.sh copies them to results/iq_qwen/plans/search-size-Q2_K-*, in results/iq_qwen/data.tar.xz).
# Issue 24: gamma search on Qwen at llama.cpp Q2_K's size, from the static plan (o5e2 head),
# over the 17-type pool, fitness on calibration text (never the test texts), GAMMA's Stage I
# wall time (3,168 s) as the limit. Resumable: rerun the same command.
# FROM=823: continue the shorter run's state (the same seed and inputs, so the longer run
# equals an uninterrupted one; the seconds already spent count against WALL).
W=${WORK:-/tmp/gamma-qwen}; R=$(cd "$(dirname "$0")/.." && pwd)/results/iq_qwen; mkdir -p $W/search
python3 "$(dirname "$0")/kept.py" extract $R  # its evals/, plans/, ... are kept in $R/data.tar.xz
S=$W/search/search-Q2_K-${WALL:-3168}.json
if [ -n "${FROM:-}" ] && [ ! -f $S.state.json ]; then
  cp $W/search/search-Q2_K-$FROM.json.state.json $S.state.json.tmp && mv $S.state.json.tmp $S.state.json
  [ -f $S.teacher.kld ] || cp $W/search/search-Q2_K-$FROM.json.teacher.kld $S.teacher.kld
fi
$(cd "$(dirname "$0")/.." && pwd)/build/cli/gamma search $W/pool-all --teacher $W/teacher-f32.gguf --size 752880576 \
  --init $R/plans/static-size-Q2_K-o5e2.json --calib $W/calib-learn.txt --chunks 4 --small-chunks 1 \
  --offspring 8 --wall-time ${WALL:-3168} --tmp-dir /dev/shm -t 2 -o $S
