#!/bin/bash
# The dry run's eval cost (src/run/estimate.cpp, kEval*): gamma eval's wall time with the
# teacher's base cached, 4 chunks of 512 of wiki.valid.tokens, 2 threads, other jobs paused.
# Usage: eval_cost.sh NAME QUANT.gguf TEACHER.gguf BASE.kld [NAME QUANT TEACHER BASE ...]
set -euo pipefail
G=${G:-build/cli/gamma}
T=${T:-../shared/data/text/wiki.valid.tokens}
out=$(mktemp -d)
while [ $# -ge 4 ]; do
  s=$(date +%s.%N)
  "$G" eval "$2" --teacher "$3" --kld-base "$4" --text "$T" --ctx 512 --chunks 4 -t 2 -q -o "$out/$1.json" > /dev/null
  e=$(date +%s.%N)
  echo "$1 $(echo "$e - $s" | bc) s"
  shift 4
done
rm -rf "$out"
