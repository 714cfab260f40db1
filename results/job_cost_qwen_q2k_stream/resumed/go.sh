#!/usr/bin/env bash
# The streamed Q2_K job resumed after gamma layers with the binary of 310151c (mixes first, --max-mixes 1), issue 44.
# from an empty work directory and an empty gamma cache (only the model and llama.cpp's source linked in); issue 44.
cd /work/runs/q2ks2
export GAMMA_CACHE=/work/runs/q2ks2/cache
( while true; do echo "$(date +%s) $(du -sbL run 2>/dev/null | cut -f1) $(du -sb cache 2>/dev/null | cut -f1)" >> disk.samples; sleep 15; done ) &
mon=$!
date +%s > start.epoch
/usr/bin/time -v -o time.txt ./b/cli/gamma run qwen2.5-coder-1.5b --size 752880576 -w run -t 2 --stream-pool --teacher-type f16 > run.log 2>&1
echo "exit $?" >> run.log
date +%s > end.epoch
kill $mon
