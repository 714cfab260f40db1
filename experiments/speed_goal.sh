#!/bin/bash
# Issue 45's goal on Qwen2.5-Coder-1.5B: at a llama.cpp mix's size, gamma's plan with
# `--min-decode` set to the mix's measured tg128 (the layer-calibrated GAMMA scores of the IQ sweep,
# results/iq_qwen/gamma-clip-cal.json, with that size's head), beside the plan without the speed
# budget and the mix: predicted and measured tok/s (llama-bench, round-robin rounds) and KLD vs the
# teacher on both test texts (gamma compare, 16 x 512, paired against the mix).
#   experiments/speed_goal.sh W MIX TG128 HEAD_FIXED...   e.g. W Q3_K_M 27.40 output.weight=Q5_K token_embd.weight=IQ3_S
set -euo pipefail
W=$1; MIX=$2; TG=$3; shift 3
G=${G:-build/cli/gamma}; B=${B:-build/bin}
P=${POOL:-/work/runs/iqq/pool-all}; T=${TEACHER:-/work/runs/iqq/teacher-f32.gguf}
SRC=${SRC:-$HOME/.cache/gamma/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
M=${MIXFILE:-/work/runs/speed/qwen/llama-$MIX.gguf}
S=results/iq_qwen/gamma-clip-cal.json
mkdir -p $W
[ -f $W/speed.json ] || $G speed --pool $P --reference $SRC --llama-bin $B -o $W/speed.json
SIZE=$(stat -c %s $M)
fixed=(); for f in "$@"; do fixed+=(--fixed $f); done
for v in free speed; do
  extra=(); [ $v = speed ] && extra=(--min-decode $TG)
  [ -f $W/$MIX-$v.json ] || $G solve $P --scores $S --size $SIZE "${fixed[@]}" --speed $W/speed.json "${extra[@]}" -o $W/$MIX-$v.json
  [ -f $W/$MIX-$v.gguf ] || $G emit $P $W/$MIX-$v.json -o $W/$MIX-$v.gguf
done
$G speed $SRC $M $W/$MIX-free.gguf $W/$MIX-speed.gguf --bench --rounds 2 --llama-bin $B -o $W/$MIX-bench.json
for text in wiki.test.raw python-eval.txt; do
  for v in free speed; do
    [ -f $W/$MIX-$v-$text.json ] || $G compare $W/$MIX-$v.gguf $M --teacher $T --text ../shared/data/text/$text --chunks 16 -q -o $W/$MIX-$v-$text.json
  done
done
