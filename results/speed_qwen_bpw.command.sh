#!/usr/bin/env bash
# after the fixed budgets (chain2): emit gamma's files at 2.75/3.0/3.5 bpw, then llama-bench with the study paused
while pgrep -f "bash chain2.sh" > /dev/null; do sleep 10; done
set -euo pipefail
G=/work/main/build/cli/gamma; R=/work/main/results/iq_qwen; W=/tmp/gamma-qwen; S=$W/speed
python3 /work/main/experiments/kept.py extract $R  # $R/plans/ is kept in $R/data.tar.xz (added when results/ was archived)
cd $S
for b in 2.75 3.0 3.5; do
  [ -f gammad-bpw$b.gguf ] || $G emit $W/pool-auto $R/plans/$(cat $R/plans/gammad-size-bpw$b.choice).json -o gammad-bpw$b.gguf > /dev/null
done
pg=$(ps -o pgid= -p $(pgrep -f "calib_study.sh" | head -1) | tr -d ' ')
echo "bench from $(date -u +%T), pausing $pg"
cd /work/main
PAUSE=$pg REPS=5 OUT=results/speed_qwen_bpw FILES="llama-IQ2_M=$S/IQ2_M.gguf gammad@2.75=$S/gammad-bpw2.75.gguf uniform-Q2_K=$S/uniform-Q2_K.gguf llama-Q2_K=$W/run752/llama-Q2_K.gguf gammad@3.0=$S/gammad-bpw3.0.gguf uniform-IQ3_XXS=$S/uniform-IQ3_XXS.gguf llama-IQ3_XS=$S/IQ3_XS.gguf gammad@3.5=$S/gammad-bpw3.5.gguf uniform-IQ3_S=$S/uniform-IQ3_S.gguf uniform-Q3_K=$S/uniform-Q3_K.gguf" \
  bash experiments/speed_bench.sh
echo "bench done $(date -u +%T)"
