#!/usr/bin/env bash
# Qwen-1.5B default job at 880MiB (streamed pool, F16 teacher: no flag), from an empty work
# directory and an empty gamma cache (only the model and llama.cpp's source linked in), with the
# binaries frozen in $R/b (a copy of the build directory). Disk sampled every 15 s.
R=${R:-/root/runs/s880}
cd "$R"
ps -o pgid= $$ | tr -d " " > job.pgid
export GAMMA_CACHE=$R/cache
( while true; do echo "$(date +%s) $(du -sbL run 2>/dev/null | cut -f1) $(du -sb cache 2>/dev/null | cut -f1)" >> disk.samples; sleep 15; done ) &
mon=$!
date +%s > start.epoch
/usr/bin/time -v -o time.txt ./b/cli/gamma run qwen2.5-coder-1.5b --size 880MiB -w run -t 2 "$@" > run.log 2>&1
echo "exit $?" >> run.log
date +%s > end.epoch
kill $mon
