#!/bin/bash
# Qwen files for the speed model's check: uniform plans from the pool, gamma's plans, llama.cpp mixes.
set -e
cd $W
B=build/bin; P=/work/runs/iqq/pool-all; T=/work/runs/iqq/teacher-f32.gguf; I=/work/runs/iqq/imatrix-mix.gguf
for t in Q4_0 Q2_K Q3_K Q4_K Q6_K Q8_0 IQ3_S IQ2_S IQ4_XS; do
  [ -f uni-$t.gguf ] && continue
  $B/gamma plan $P --uniform $t -o uni-$t.json && $B/gamma emit $P uni-$t.json -o uni-$t.gguf > uni-$t.log 2>&1
done
for p in full window; do
  [ -f gamma-$p.gguf ] || $B/gamma emit $P /work/runs/iqq/kld/$p.json -o gamma-$p.gguf > gamma-$p.log 2>&1
done
for m in Q3_K_M Q2_K Q4_K_M IQ3_M; do
  [ -f llama-$m.gguf ] || $B/llama-quantize --imatrix $I $T llama-$m.gguf $m 2 > llama-$m.log 2>&1
done
echo done
