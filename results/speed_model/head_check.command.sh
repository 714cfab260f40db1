#!/bin/bash
# Is the head what the Qwen check with probes misses in decode? Uniform Q8_0 and Q2_K files given the source's head
# (output Q6_K, token_embd Q4_K) by llama-quantize --allow-requantize from the check's uniform files; the model's
# predictions from the check's cached calibration (gamma speed without --bench: no llama-bench), then llama-bench
# on the source and the four uniform files in ROUNDS rounds, the source between every two files.
set -e
G=${G:-$PWD}; B=$G/build/bin; cd "$W"
for t in Q8_0 Q2_K; do
  [ -f head6-$t.gguf ] || $B/llama-quantize --allow-requantize --pure --output-tensor-type q6_k \
    --token-embedding-type q4_k uni-$t.gguf head6-$t.gguf $t 2 > head6-$t.log 2>&1
done
$G/build/cli/gamma speed source.gguf uni-Q8_0.gguf head6-Q8_0.gguf uni-Q2_K.gguf head6-Q2_K.gguf -t 2 \
  --llama-bin $B -o head-pred.json > head-pred.txt
: > head-bench.txt
for r in $(seq ${ROUNDS:-3}); do
  for f in uni-Q8_0 head6-Q8_0 uni-Q2_K head6-Q2_K; do
    [ $f = uni-Q8_0 ] || [ $f = uni-Q2_K ] && $B/llama-bench -m source.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/$r source /" >> head-bench.txt
    $B/llama-bench -m $f.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/$r $f /" >> head-bench.txt
  done
done
$B/llama-bench -m source.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/end source /" >> head-bench.txt
echo done >> head-bench.txt
