#!/usr/bin/env bash
# The default Qwen-1.5B job at one size (SIZE: 880MiB, or Q2_K's 752880576 bytes), from an empty
# work directory and an empty gamma cache (only the model and llama.cpp's source linked in), with
# the binaries frozen in $R/b (a copy of the build directory). Disk (work directory, cache) and CPU
# (jiffies, idle jiffies) sampled every 15 s.
R=${R:?R: the run directory}
SIZE=${SIZE:-880MiB}
cd "$R"
ps -o pgid= $$ | tr -d " " > job.pgid
export GAMMA_CACHE=$R/cache
( while true; do
    echo "$(date +%s) $(du -sbL run 2>/dev/null | cut -f1) $(du -sb cache 2>/dev/null | cut -f1)" >> disk.samples
    echo "$(date +%s) $(awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8, $5+$6}' /proc/stat)" >> cpu.samples
    sleep 15
  done ) &
mon=$!
date +%s > start.epoch
/usr/bin/time -v -o time.txt ./b/cli/gamma run qwen2.5-coder-1.5b --size "$SIZE" -w run -t 2 "$@" > run.log 2>&1
echo "exit $?" >> run.log
date +%s > end.epoch
kill $mon
