#!/bin/bash
# SmolLM2 files for the speed model's check: the source, uniform files of ten types and three llama.cpp mixes,
# all by the vendored llama-quantize from the source's F32 teacher and an imatrix of war-and-peace.txt.
# W: work directory; G: the gamma checkout (built).
set -e
G=${G:-$PWD}; B=$G/build/bin; cd "$W"
S=$($G/build/cli/gamma fetch smollm2-135m | tail -n 1)
T=teacher-f32.gguf; I=imatrix.gguf
[ -f $T ] || $G/build/cli/gamma dequantize $S -o $T --type f32 > teacher.log 2>&1
[ -f $I ] || $B/llama-imatrix -m $T -f ${TEXT:-$G/../shared/data/text}/war-and-peace.txt -o $I --chunks 64 -c 512 -t 2 > imatrix.log 2>&1
for t in Q2_K Q3_K Q4_0 Q4_K Q5_K Q6_K Q8_0 IQ4_NL IQ3_S IQ2_S; do
  [ -f uni-$t.gguf ] || $B/llama-quantize --pure --imatrix $I $T uni-$t.gguf $t 2 > uni-$t.log 2>&1
done
for m in Q3_K_M Q4_0 Q3_K_L Q4_K_M; do
  [ -f llama-$m.gguf ] || $B/llama-quantize --imatrix $I $T llama-$m.gguf $m 2 > llama-$m.log 2>&1
done
ln -sf $S source.gguf
echo done
